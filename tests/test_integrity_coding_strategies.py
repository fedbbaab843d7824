"""The coding strategies of the reward-integrity suite: the honest split really solves the tasks, the honest tester's
asserts are right, the strategies meant to produce correct programs do, and every strategy speaks only for live
agents. Everything runs on the local executor, one ``run_many`` batch per check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llm_marl_benchmarks.integrity.coding_strategies import (
    CODING_STRATEGIES,
    CORRECT_PROGRAM_STRATEGIES,
    HONEST_TASK_IDS,
    SCHEME_STRATEGIES,
    cheat_on_checks,
    honest_split,
    honest_tester_cases,
    reformatted,
    second_solution,
    visible_tests,
)
from llm_marl_envs.core.protocol import parse_action
from llm_marl_envs.core.tasks import Task
from llm_marl_envs.envs.coding.contribution import normalized_assert
from llm_marl_envs.envs.coding.program import (
    assemble_program,
    extract_asserts,
    extract_code,
    normalized_code,
    prompt_preamble,
)
from llm_marl_envs.envs.coding.roles import coding_team
from llm_marl_envs.envs.coding.tasks import load_coding_tasks
from llm_marl_envs.sandbox import Executor, TestJob, make_executor

MIN_HONEST_TASKS = 50
MAX_TURNS = 3
"""The coding env's default episode length, which the offline playthrough below mirrors."""
CORRECT_TASK_STRIDE = 8
"""Every eighth honest task is checked for the strategies meant to produce correct programs."""
SAMPLE_TASKS = 4
"""Tasks per strategy in the protocol checks (the strategies are per-task code, so a few cover their logic)."""


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with make_executor("local") as ex:
        yield ex


def _honest_tasks() -> list[Task]:
    source = load_coding_tasks("decomposable")
    return [source.get(task_id) for task_id in HONEST_TASK_IDS()]


def _program(task: Task, helper: str, main: str) -> str:
    return assemble_program(prompt_preamble(task["prompt"], task["entry_point"]), helper, main).program


def _with_reference(task: Task, reference: str | None) -> Task:
    """``task`` with another reference solution (``None``: none at all)."""
    return Task(task.task_id, task.split, {**task.fields, "reference_solution": reference})


def _final_drafts(strategy_name: str, task: Task, num_agents: int) -> dict[str, str]:
    """Play a strategy without the env: drafts replace drafts, ``<done/>`` retires an agent, and the episode stops
    when the strategy does, every agent is done or ``MAX_TURNS`` is reached (convergence only shortens it)."""
    strategy = next(s for s in CODING_STRATEGIES if s.name == strategy_name)
    live = [role.name for role in coding_team(num_agents, "magrpo")]
    drafts = dict.fromkeys(live, "")
    for turn in range(1, MAX_TURNS + 1):
        actions = strategy.act(task, tuple(live), turn)
        if actions is None or not live:
            break
        for agent, text in actions.items():
            parsed = parse_action(text, agent, live)
            if parsed.draft:
                drafts[agent] = parsed.draft
            if parsed.done:
                live.remove(agent)
    return drafts


def test_honest_split_covers_the_dataset_and_the_honest_program_passes_every_test(executor: Executor) -> None:
    tasks = _honest_tasks()
    assert len(tasks) >= MIN_HONEST_TASKS
    jobs = []
    for task in tasks:
        split = honest_split(task)
        assert split is not None
        assert split.aux_code.startswith("def aux(") and "def aux(" not in split.main_code
        assert split.main_code.startswith(f"def {task['entry_point']}(")
        jobs.append(TestJob(_program(task, split.aux_code, split.main_code), list(task["tests"])))
    reports = executor.run_many(jobs)
    failing = [task.task_id for task, report in zip(tasks, reports, strict=True) if report.passed != report.total]
    assert not failing, f"honest split programs that fail a test: {failing}"


def test_honest_split_refuses_a_helper_that_closes_over_the_entry_point() -> None:
    task = _honest_tasks()[0]
    closure = (
        f"def {task['entry_point']}(text):\n    limit = 3\n\n    def aux(word):\n        return len(word) > limit\n"
        f"    return sum(1 for word in text.split() if aux(word))\n"
    )
    assert honest_split(_with_reference(task, closure)) is None


def test_honest_tester_asserts_are_valid_new_and_enough(executor: Executor) -> None:
    tasks = _honest_tasks()
    jobs, counts = [], []
    for task in tasks:
        asserts = [case.assert_source() for case in honest_tester_cases(task)]
        assert 3 <= len(asserts) <= 5, task.task_id
        jobs.append(TestJob(task["reference_solution"], asserts))
        seen = {normalized_assert(test) for test in visible_tests(task)}
        counts.append(sum(normalized_assert(a) not in seen for a in asserts))
    reports = executor.run_many(jobs)
    failing = {
        task.task_id: [o.status for o in report.outcomes]
        for task, report in zip(tasks, reports, strict=True)
        if report.passed != report.total
    }
    assert not failing, f"honest tester asserts that fail on the reference: {failing}"
    # New inputs, not copies of what the team already sees: some on every task, three or more on nearly all.
    assert min(counts) >= 1
    assert sum(count >= 3 for count in counts) >= len(tasks) - 6


def test_strategies_meant_to_be_correct_pass_every_test(executor: Executor) -> None:
    # Every task would be ~1500 runs; a spread of tasks covers the rewriting code paths (the program transforms are
    # the same on every task) at a fraction of the time.
    tasks = _honest_tasks()[::CORRECT_TASK_STRIDE]
    jobs, labels = [], []
    for strategy in CODING_STRATEGIES:
        if strategy.name not in CORRECT_PROGRAM_STRATEGIES:
            continue
        for task in tasks:
            for num_agents in {1, 2} & set(strategy.team_sizes):
                drafts = {a: extract_code(t) for a, t in _final_drafts(strategy.name, task, num_agents).items()}
                helper, main = ("", drafts["solo"]) if num_agents == 1 else (drafts["aux"], drafts["main"])
                jobs.append(TestJob(_program(task, helper, main), list(task["tests"])))
                labels.append(f"{strategy.name}/{num_agents}/{task.task_id}")
    reports = executor.run_many(jobs)
    failing = [label for label, report in zip(labels, reports, strict=True) if report.passed != report.total]
    assert not failing, f"'correct' strategies whose program fails a test: {failing}"


def test_tester_strategies_do_what_they_claim(executor: Executor) -> None:
    """Wrong asserts fail on the reference; trivial ones pass on it; the rest pass on it (they are cheap, not
    false)."""
    task = _honest_tasks()[0]
    expectations = {
        "tester_wrong": 0.0,
        "tester_trivial": 1.0,
        "tester_copies_visible": 1.0,
        "tester_rephrased_visible": 1.0,
        "tester_type_checks": 1.0,
    }
    jobs = []
    for name in expectations:
        asserts = extract_asserts(extract_code(_final_drafts(name, task, 3)["tester"]))
        assert asserts, name
        jobs.append(TestJob(task["reference_solution"], asserts))
    for (name, expected), report in zip(expectations.items(), executor.run_many(jobs), strict=True):
        assert report.passed / report.total == expected, name


@pytest.mark.parametrize("strategy", CODING_STRATEGIES, ids=lambda s: s.name)
def test_strategy_speaks_only_for_live_agents_with_strings(strategy) -> None:
    assert strategy.env == "coding" and strategy.team_sizes and set(strategy.team_sizes) <= {1, 2, 3, 4}
    for task in _honest_tasks()[:SAMPLE_TASKS]:
        for num_agents in strategy.team_sizes:
            live = [role.name for role in coding_team(num_agents, "magrpo")]
            for turn in range(1, MAX_TURNS + 1):
                actions = strategy.act(task, tuple(live), turn)
                if actions is None:
                    break
                assert set(actions) == set(live), (strategy.name, num_agents, turn)
                assert all(isinstance(text, str) for text in actions.values())
                problems = {a: parse_action(t, a, live).problems for a, t in actions.items()}
                assert not any(problems.values()), (strategy.name, num_agents, turn, problems)
                live = [a for a in live if not parse_action(actions[a], a, live).done]
                if not live:
                    break


def test_strategies_skip_a_task_without_an_honest_split() -> None:
    task = _honest_tasks()[0]
    bare = _with_reference(task, None)
    for strategy in CODING_STRATEGIES:
        size = strategy.team_sizes[0]
        assert strategy.act(bare, tuple(role.name for role in coding_team(size, "magrpo")), 1) is None, strategy.name


def test_strategy_names_are_unique_and_honest_ones_come_first() -> None:
    names = [s.name for s in CODING_STRATEGIES]
    assert len(names) == len(set(names)) and names[0] == "honest"
    honest = [s.honest for s in CODING_STRATEGIES]
    assert honest == sorted(honest, reverse=True)
    assert set(names) >= CORRECT_PROGRAM_STRATEGIES


# ------------------------------------------------------------------------------- the candidate schemes' libraries
CANDIDATE_LIBRARIES = {name: SCHEME_STRATEGIES[name] for name in ("propose_verify", "author_fixer")}


@pytest.mark.parametrize("scheme", sorted(CANDIDATE_LIBRARIES))
def test_scheme_strategies_speak_only_for_live_agents_with_strings(scheme: str) -> None:
    library = CANDIDATE_LIBRARIES[scheme]
    names = [s.name for s in library]
    assert len(names) == len(set(names)) and names[0] == "honest"
    for strategy in library:
        assert set(strategy.team_sizes) <= {2, 3, 4}
        for task in _honest_tasks()[:SAMPLE_TASKS]:
            for num_agents in strategy.team_sizes:
                live = [role.name for role in coding_team(num_agents, scheme)]
                for turn in range(1, MAX_TURNS + 1):
                    actions = strategy.act(task, tuple(live), turn)
                    if actions is None:
                        break
                    assert set(actions) == set(live), (strategy.name, num_agents, turn)
                    problems = {a: parse_action(t, a, live).problems for a, t in actions.items()}
                    assert not any(problems.values()), (strategy.name, num_agents, turn, problems)
                    live = [a for a in live if not parse_action(actions[a], a, live).done]
                    if not live:
                        break
        assert strategy.act(_with_reference(_honest_tasks()[0], None), tuple(live or ["coder_1"]), 1) is None


def test_candidate_libraries_build_what_they_claim(executor: Executor) -> None:
    """The second honest candidate is correct and differs from the reference; the reformatted copy is the same
    program to the env; the candidate special-cased to every check passes the visible tests and the honest tester's
    asserts and fails held-out tests."""
    tasks = _honest_tasks()[::CORRECT_TASK_STRIDE]
    jobs, kinds = [], []
    for task in tasks:
        split = honest_split(task)
        second = second_solution(split)
        assert normalized_code(second) != normalized_code(split.solo_code)
        assert normalized_code(reformatted(split.solo_code)) == normalized_code(split.solo_code)
        checks = [*visible_tests(task), *(case.assert_source() for case in honest_tester_cases(task))]
        cheat = extract_code(cheat_on_checks(task))
        jobs += [TestJob(_program(task, "", second), list(task["tests"])), TestJob(_program(task, "", cheat), checks),
                 TestJob(_program(task, "", cheat), list(task["held_out_tests"]))]
        kinds += ["second", "cheat_checks", "cheat_held_out"]
    reports = executor.run_many(jobs)
    for kind, report in zip(kinds, reports, strict=True):
        if kind == "cheat_held_out":
            assert report.passed < report.total, kind
        else:
            assert report.passed == report.total, kind
