"""The turn-1 role-prompt probe (benchmarks/role_prompts.py): it scores what each prompt's replies pass, pairs the
roles with ``solo`` by task, and runs end to end on the default model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_marl_benchmarks import role_prompts


class ScriptedReplies:
    """Answers ``solo`` and ``coder_2`` with the task's reference solution, ``coder_1`` with a wrong function."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def act(self, requests: list[Any], settings: Any) -> list[str]:
        replies = []
        for request in requests:
            self.seen.append((request.agent, request.observation))
            signature = request.chat[-1][1].split("\n", 1)[1]  # the started reply: "```python\ndef f(...):"
            entry_point = signature.split("(", 1)[0].removeprefix("def ")
            if request.agent == "coder_1":
                replies.append(f"```python\n{signature}\n    return None\n```")
            else:
                replies.append(f"```python\n{self.reference[entry_point]}\n```")
        return replies


def test_a_role_is_scored_on_what_its_replies_pass_and_paired_with_solo_by_task() -> None:
    from llm_marl_envs import coding_v0

    env = coding_v0.parallel_env(num_agents=1, dataset="humaneval", split="train", executor="local")
    policy = ScriptedReplies()
    policy.reference = {}
    for task_id in env.task_source.ids("train")[:3]:
        task = env.task_source.get(task_id)
        policy.reference[task["entry_point"]] = task["reference_solution"]
    result = role_prompts.run(scheme="propose_verify", team_size=2, tasks=3, samples=2, executor="local",
                              policy=policy)
    summary = result["summary"]
    assert list(summary) == ["solo", "coder_1", "coder_2"]
    assert summary["solo"]["all_visible"] == summary["coder_2"]["all_visible"] == 1.0
    assert summary["coder_1"]["all_visible"] == summary["coder_1"]["visible_share"] == 0.0
    assert summary["coder_1"]["all_visible_minus_solo"] == {"mean": -1.0, "ci_low": None, "ci_high": None, "p": None}
    assert summary["coder_2"]["visible_share_minus_solo"]["mean"] == 0.0
    assert [row["task"] for row in result["per_task"]] == env.task_source.ids("train")[:3]
    # Each prompt is the env's own turn-1 chat for that agent, asked `samples` times.
    assert [agent for agent, _ in policy.seen].count("coder_1") == 3 * 2
    assert all("You are solo, working alone." in text for agent, text in policy.seen if agent == "solo")
    assert all("You are coder_2, with coder_1." in text for agent, text in policy.seen if agent == "coder_2")


class OnePassingSample:
    """Of each batch of 3 samples, passes one: ``solo``'s and ``coder_1``'s first, ``coder_2``'s last."""

    def __init__(self, reference: dict[str, str]) -> None:
        self.reference = reference
        self.seen: dict[str, str] = {}

    def act(self, requests: list[Any], settings: Any) -> list[str]:
        agent = requests[0].agent
        self.seen[agent] = requests[0].observation
        signature = requests[0].chat[-1][1].split("\n", 1)[1]
        right = f"```python\n{self.reference[signature.split('(', 1)[0].removeprefix('def ')]}\n```"
        wrong = f"```python\n{signature}\n    return None\n```"
        passing = len(requests) - 1 if agent == "coder_2" else 0
        return [right if index == passing else wrong for index in range(len(requests))]


def test_the_best_of_two_figure_pairs_samples_drawn_with_different_random_numbers() -> None:
    from llm_marl_envs import coding_v0

    env = coding_v0.parallel_env(num_agents=1, dataset="humaneval", split="train", executor="local")
    reference = {}
    for task_id in env.task_source.ids("train")[:2]:
        task = env.task_source.get(task_id)
        reference[task["entry_point"]] = task["reference_solution"]
    policy = OnePassingSample(reference)
    result = role_prompts.run(scheme="propose_verify", team_size=2, tasks=2, samples=3, executor="local",
                              policy=policy, team_options={"coder_briefs": "distinct"})
    # solo [1, 0, 0]: of its 6 ordered pairs, 2 fail together. coder_1 [1, 0, 0] with coder_2 [0, 0, 1]: of the 6
    # pairs with different indices, 3 fail together.
    assert [row["pairs"] for row in result["per_task"]] == [{"solo+solo": 1 - 2 / 6, "coder_1+coder_2": 0.5}] * 2
    assert result["pairs"]["team_minus_solo"] == {"mean": pytest.approx(0.5 - 4 / 6), "ci_low": None,
                                                  "ci_high": None, "p": None}
    assert result["team_options"] == {"coder_briefs": "distinct"}
    assert result["precision"] == {"dtype": None, "device": None}  # a scripted policy holds no weights
    # The team's env took the option: each coder was asked for its own way.
    assert "plain loops" in policy.seen["coder_1"] and "built-in functions" in policy.seen["coder_2"]
    assert "plain loops" not in policy.seen["solo"]


def test_pairs_of_one_prompt_and_of_two_leave_out_the_samples_that_share_random_numbers() -> None:
    assert role_prompts.pair_any_passes([1, 0, 0]) == pytest.approx(1 - 2 / 6)
    assert role_prompts.pair_any_passes([0, 1], [0, 1]) == 1.0  # the pair (0, 0) shares sample 0's seed
    assert role_prompts.pair_any_passes([0, 0, 0, 0]) == 0.0
    with pytest.raises(ValueError, match="one length >= 2"):
        role_prompts.pair_any_passes([1])
    with pytest.raises(ValueError, match="one length >= 2"):
        role_prompts.pair_any_passes([1, 0], [1, 0, 0])


def test_the_paired_difference_has_a_ci_when_the_differences_vary() -> None:
    difference = role_prompts.paired_difference([0.5, 0.0, 1.0, 0.25], [0.0, 0.0, 0.5, 0.5])
    assert difference["mean"] == pytest.approx(0.1875)
    assert difference["ci_low"] < difference["mean"] < difference["ci_high"] and 0 < difference["p"] < 1


def test_only_the_candidate_schemes_can_be_probed() -> None:
    with pytest.raises(ValueError, match="scheme: expected one of"):
        role_prompts.run(scheme="magrpo", team_size=2, tasks=1, samples=1, executor="local", policy=object())


@pytest.mark.slow
def test_a_tiny_run_on_the_default_model_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    assert role_prompts.main(["--tasks", "1", "--samples", "2", "--max-new-tokens", "16", "--executor", "local",
                              "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["split"] == "train" and result["tasks"] == 1 and result["max_new_tokens"] == 16
    for name in ("solo", "coder_1", "coder_2"):
        assert 0.0 <= result["summary"][name]["visible_share"] <= 1.0
    assert set(result["summary"]["coder_1"]) == {"all_visible", "visible_share", "all_visible_minus_solo",
                                                 "visible_share_minus_solo"}
    assert set(result["pairs"]) == {"solo+solo", "coder_1+coder_2", "team_minus_solo"}
    assert result["stop_at_reply_end"] is True and result["precision"]["dtype"] in ("float32", "bfloat16")
