"""The ``single_best_of_n`` control: one agent sampling as many candidates a turn as the team has agents and sending
the one that passes the most visible tests. Real coding envs and the real (local) executor; scripted candidates stand
in for the model, so each test knows which candidate should win."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from llm_marl_baselines.policies import Generation
from llm_marl_benchmarks.study import execution
from llm_marl_benchmarks.study.best_of_n import (
    BestOfN,
    BestOfNReply,
    candidate_program,
    coding_auditor,
    coding_chooser,
)
from llm_marl_benchmarks.study.design import StudyDesign
from llm_marl_benchmarks.study.execution import PolicySpec, make_batches, run_batch, token_counts
from llm_marl_envs import rollout
from llm_marl_envs.envs.coding.selection import select_program, visible_test_runner
from llm_marl_envs.registry import make_env
from llm_marl_envs.rollout import AgentStep
from llm_marl_envs.sandbox import make_executor

CODING = {"dataset": "decomposable", "executor": "local", "similarity": "tfidf"}
# LME/0: count_vowel_words; its visible tests: ('Anna ate one apple') == 4, ('the sky is blue') == 0, ('') == 0.
ZERO = "```python\ndef count_vowel_words(sentence: str) -> int:\n    return 0\n```"  # passes 2 of the 3 visible tests
NONE = "def count_vowel_words(sentence):\n    return None"  # passes none
PROSE = "I would count the words that start and end with a vowel."  # no code: the env keeps the previous draft
BROKEN = "```python\ndef count_vowel_words(sentence:\n    return 1\n```"  # does not parse


def reference(task_id: str = "LME/0") -> str:
    env = make_env("coding", num_agents=1, **CODING)
    env.reset(options={"task_id": task_id})
    return env.task["reference_solution"]


class Candidates:
    """Stands in for the model: the k-th copy of a request within one call writes ``by_turn[turn][k]`` (a request
    asked once writes the first); ``tokens`` gives each reply that many token ids (a :class:`Generation`)."""

    def __init__(self, by_turn: dict[int, list[str]], tokens: list[int] | None = None) -> None:
        self.by_turn, self.tokens, self.calls = by_turn, tokens, []

    def __call__(self, requests: list[Any]) -> list[Any]:
        self.calls.append(len(requests))
        copies: Counter[tuple[int, str]] = Counter()
        replies = []
        for request in requests:
            k = copies[(request.env_index, request.agent)]
            copies[(request.env_index, request.agent)] += 1
            texts = self.by_turn[min(request.turn, max(self.by_turn))]
            text = texts[k % len(texts)]
            replies.append(text if self.tokens is None
                           else Generation(text=text, completion_ids=tuple(range(self.tokens[k % len(self.tokens)]))))
        return replies


# ------------------------------------------------------------------------------------------------- the rule itself
def test_the_rule_keeps_the_candidate_passing_most_visible_tests_and_the_first_of_a_tie():
    executor = make_executor("local")
    try:
        tests = ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(2, 2) == 4"]
        programs = ["def add(a, b):\n    return 0",        # 1 (add(0, 0))
                    "",                                    # no runnable code: not run, 0
                    "def add(a, b):\n    return a + b",    # 3
                    "def add(a, b) return a",              # does not parse: 0
                    "def add(a, b):\n    return b + a"]    # 3, but later
        choice = select_program(programs, visible_test_runner(executor, tests))
        assert (choice.index, choice.visible_passed) == (2, (1, 0, 3, 0, 3))
        # Every candidate failing every test: the first is kept (the rule never returns "none").
        assert select_program(["x = 1", ""], visible_test_runner(executor, tests)).index == 0
        assert select_program(programs, visible_test_runner(executor, [])).visible_passed == (0,) * 5
    finally:
        executor.close()
    with pytest.raises(ValueError, match="non-empty sequence"):
        select_program([], lambda programs: [])
    with pytest.raises(ValueError, match="non-empty sequence"):
        select_program("def f(): pass", lambda programs: [0])
    with pytest.raises(ValueError, match="one per candidate"):
        select_program(["a", "b"], lambda programs: [1])
    with pytest.raises(ValueError, match="one per candidate"):
        select_program(["a", "b"], lambda programs: [1, -1])


# ------------------------------------------------------------------------------------------ in a real episode
def test_the_env_steps_with_the_chosen_candidate_and_counts_what_the_choice_counted():
    """Turn 1: prose (no code, no previous draft), ``return 0`` (2 visible), ``return None`` (0): the second is sent.
    Turn 2: prose now keeps the previous draft (2), ``return None`` (0), the reference (3): the reference is sent and
    the task is solved. Each turn the env's own visible count for the action is the one the choice saw."""
    env = make_env("coding", num_agents=1, max_turns=4, **CODING)
    policy = BestOfN(Candidates({1: [PROSE, ZERO, NONE], 2: [PROSE, NONE, reference()]}), {0: 3}, coding_chooser([env]))
    (trajectory,) = rollout.run_episodes([env], policy, seeds=[0], options=[{"task_id": "LME/0"}])
    replies = [step.generation for step in trajectory.steps]
    assert all(isinstance(reply, BestOfNReply) for reply in replies)
    assert [(r.chosen, r.visible_passed) for r in replies] == [(1, (0, 2, 0)), (2, (2, 0, 3))]
    assert [step.action for step in trajectory.steps] == [ZERO, reference()]
    assert [step.info["details"]["tests"]["visible_passed"] for step in trajectory.steps] == [2, 3]
    assert trajectory.end_reason == "solved" and trajectory.turns == 2
    assert trajectory.final_info["details"]["tests"]["held_out_passed"] == 4
    assert all(r.held_out_passed is None for r in replies)  # no audit asked for
    # With the audit: the same choices and actions, and each candidate's held-out tests counted beside them; the
    # chosen candidate's count is the env's own.
    env = make_env("coding", num_agents=1, max_turns=4, **CODING)
    audited = BestOfN(Candidates({1: [PROSE, ZERO, NONE], 2: [PROSE, NONE, reference()]}), {0: 3},
                      coding_chooser([env]), coding_auditor([env]))
    (again,) = rollout.run_episodes([env], audited, seeds=[0], options=[{"task_id": "LME/0"}])
    replies = [step.generation for step in again.steps]
    assert [(r.chosen, r.visible_passed) for r in replies] == [(1, (0, 2, 0)), (2, (2, 0, 3))]
    assert [step.action for step in again.steps] == [ZERO, reference()]
    held_out = [step.info["details"]["tests"]["held_out_passed"] for step in again.steps]
    assert [r.held_out_passed[r.chosen] for r in replies] == held_out and held_out[-1] == 4
    assert replies[0].held_out_passed[0] == 0 and replies[1].held_out_passed == (held_out[0], 0, 4)
    # The same candidates without selection: the first (prose) every turn, so nothing is ever run.
    env = make_env("coding", num_agents=1, max_turns=2, **CODING)
    (alone,) = rollout.run_episodes([env], Candidates({1: [PROSE, ZERO, NONE], 2: [PROSE, NONE, reference()]}),
                                    seeds=[0], options=[{"task_id": "LME/0"}])
    assert alone.final_info["details"]["tests"]["visible_passed"] == 0 and alone.end_reason != "solved"


def test_candidate_programs_are_what_the_env_runs():
    """The program a candidate is judged by is the one the env assembles for it: a broken or code-less reply runs
    nothing before any draft exists, and code wrapped in a fence, messages or ``<done/>`` is read as the env reads
    it."""
    env = make_env("coding", num_agents=1, max_turns=4, **CODING)
    env.reset(options={"task_id": "LME/0"})
    assert candidate_program(env, "solo", BROKEN) == "" and candidate_program(env, "solo", PROSE) == ""
    program = candidate_program(env, "solo", f"<message to=solo>hi</message>\n{ZERO}\n<done/>")
    assert program.rstrip().endswith("return 0") and "def count_vowel_words" in program
    env.step({"solo": ZERO})
    assert candidate_program(env, "solo", PROSE) == program  # the previous draft stays
    assert env.last_assessment.private["program"] == program


def test_single_best_of_n_plays_beside_single_with_the_team_size_as_n(monkeypatch):
    """Through the study's batch runner: ``single`` and ``single_best_of_n`` share a lockstep batch (one policy call a
    turn); each best-of-n request is asked as many times as the cell's team has agents; the best-of-n agent sends the
    reference (the second candidate) and solves the task, ``single`` sends the first, wrong, one. Its tokens: every
    candidate is compute, the longest is latency."""
    design = StudyDesign(envs=("coding",), team_sizes=(2, 3), conditions=("single", "single_best_of_n"),
                         cell_episodes={2: 1, 3: 1}, tasks=1, similarity="tfidf", max_turns=2,
                         env_kwargs={"coding": {"dataset": "decomposable", "executor": "local"}})
    plan = design.plan()
    assert {(e.condition, e.team_size): (e.candidates, e.rows) for e in plan} == {
        ("single", 2): (1, 1), ("single", 3): (1, 1), ("single_best_of_n", 2): (2, 2), ("single_best_of_n", 3): (3, 3)}
    (batch,) = make_batches(plan, 8, {}, design, max_rows=7)
    task = plan[0].task
    wrong = f"def {reference(task).split('def ')[1].split('(')[0]}(*args, **kwargs):\n    return None"
    stand_in = Candidates({1: [wrong, reference(task), reference(task)]}, tokens=[10, 30, 20])
    monkeypatch.setattr(execution, "_rollout_policy",
                        lambda spec, team_dir, settings, store, role_budgets, reply_ends: (
                            stand_in, dict(execution.NO_PRECISION)))
    rows = {(r["condition"], r["team_size"]): r for r in run_batch(batch, design, PolicySpec(kind="local"))}
    assert stand_in.calls == [1 + 1 + 2 + 3, 1 + 1]  # turn 2: only the two single agents play on
    for size in (2, 3):
        best, single = rows[("single_best_of_n", size)], rows[("single", size)]
        assert best["candidates_per_turn"] == size and single["candidates_per_turn"] == 1
        assert [s["chosen"] for s in best["selections"]] == [1]
        assert len(best["selections"][0]["visible_passed"]) == size
        # Each candidate's held-out tests, for the log: the wrong one passes none, the references every one.
        assert best["selections"][0]["held_out_passed"] == [0] + [turn_total(best)] * (size - 1)
        assert best["end_reason"] == "solved" and best["pass_rate"] == 1.0 and best["turns"] == 1
        assert single["pass_rate"] == 0.0 and single["selections"] is None and single["end_reason"] != "solved"
        # The per-turn trace: the best-of-n agent's one turn passed every test, the single agent's none on any.
        (turn,) = best["turn_tests"]
        assert turn["turn"] == 1 and turn["held_out"] > 0 and turn["visible"] > 0 and "candidates" not in turn
        assert [t["turn"] for t in single["turn_tests"]] == list(range(1, single["turns"] + 1))
        assert all(t["held_out"] == 0 for t in single["turn_tests"])
        assert best["num_agents"] == single["num_agents"] == 1 and best["turn_budget"] == single["turn_budget"]
        # Tokens of the n candidates: 10 + 30 (+ 20): all are compute, the longest is the turn's latency.
        assert best["completion_tokens"] == sum([10, 30, 20][:size])
        assert best["critical_path_tokens"] == 30
        assert single["completion_tokens"] == single["critical_path_tokens"] == 10 * single["turns"]


def turn_total(row: dict[str, Any]) -> int:
    return row["turn_tests"][-1]["held_out"]


def test_an_audit_that_miscounts_is_an_error():
    env = make_env("coding", num_agents=1, max_turns=1, **CODING)
    policy = BestOfN(Candidates({1: [ZERO, NONE]}), {0: 2}, coding_chooser([env]), lambda request, texts: (0,))
    with pytest.raises(RuntimeError, match="1 counts for 2 candidates"):
        rollout.run_episodes([env], policy, seeds=[0], options=[{"task_id": "LME/0"}])


def test_a_best_of_n_step_counts_every_candidate():
    reply = BestOfNReply("b", (Generation(text="a", completion_ids=(1,) * 30),
                               Generation(text="b", completion_ids=(1,) * 50)), 1, (0, 1))
    steps = [AgentStep(agent="solo", turn=turn, messages=(), action="b", reward=0.0, reward_components={},
                       terminated=False, truncated=False, generation=reply) for turn in (1, 2)]
    assert token_counts(steps) == (100, 160)
    no_ids = BestOfNReply("b", ("a", "b"), 1, (0, 1))
    assert token_counts([*steps, AgentStep("solo", 3, (), "b", 0.0, {}, False, False, no_ids)]) == (None, None)


def test_best_of_n_needs_at_least_two_candidates():
    with pytest.raises(ValueError, match="n >= 2"):
        BestOfN(lambda requests: [], {0: 1}, coding_chooser([]))


def test_turn_tests_trace_each_turns_program_and_candidates():
    """The study row's ``turn_tests``: per turn, the team's program's tests and each candidate's. A propose_verify
    pair whose coder_1 writes a candidate passing 2 of 3 visible tests, then replaces it with one passing none: the
    trace shows the drop the final row alone hides."""
    script = {("coder_1", 1): ZERO, ("coder_2", 1): NONE, ("coder_1", 2): NONE, ("coder_2", 2): NONE}

    def policy(requests: list[Any]) -> list[str]:
        return [script[(r.agent, min(r.turn, 2))] for r in requests]

    env = make_env("coding", num_agents=2, max_turns=2, scheme="propose_verify", **CODING)
    (episode,) = rollout.run_episodes([env], policy, seeds=[0], options=[{"task_id": "LME/0"}])
    trace = execution.turn_tests(episode.steps)
    assert [t["turn"] for t in trace] == [1, 2]
    assert trace[0]["visible"] == 2 and trace[0]["selected"] == "coder_1"
    assert all(t["held_out_total"] == len(env.task["held_out_tests"]) > 0 for t in trace)
    assert trace[0]["candidates"]["coder_1"][0] == 2 and trace[0]["candidates"]["coder_2"] == [0, 0]
    assert trace[1]["visible"] == 0 and trace[1]["candidates"]["coder_1"][0] == 0
    assert execution.turn_tests([]) is None


def test_turn_tests_log_what_the_choice_read():
    """Beside the pairs, ``turn_tests`` logs the rest of what the env's choice read: whether each candidate ran
    (``runnable``) and how many of the tester's asserts it passed (``tester_passed``). A team of 3: coder_1's
    candidate passes the tester's one assert, coder_2's does not parse (it never ran, though it passed as many tests
    as one that ran and passed none)."""
    tester = 'assert count_vowel_words("") == 0'
    script = {"coder_1": ZERO, "coder_2": BROKEN, "tester": tester}
    env = make_env("coding", num_agents=3, max_turns=1, scheme="propose_verify", **CODING)
    (episode,) = rollout.run_episodes([env], lambda requests: [script[r.agent] for r in requests], seeds=[0],
                                      options=[{"task_id": "LME/0"}])
    (turn,) = execution.turn_tests(episode.steps)
    assert turn["runnable"] == {"coder_1": True, "coder_2": False}
    assert turn["tester_passed"] == {"coder_1": 1, "coder_2": 0}
    assert turn["candidates"]["coder_2"] == [0, 0] and turn["selected"] == "coder_1"


def test_said_done_records_who_was_ready_on_which_turn():
    """The study row's ``said_done``: per agent, the turn whose action said ``<done/>``, or None. coder_1 sends a
    candidate with ``<done/>`` on turn 1 and acts no more; coder_2 sends one without (a comment with the word "done"
    is not the marker), and the episode ends by its ``<done/>`` on turn 2. One agent that resubmits its program
    unchanged is finished too (the episode ends ``all_done``), but it never said the marker: None."""
    script = {("coder_1", 1): ZERO + "\n<done/>", ("coder_2", 1): NONE + "\n# done when it passes",
              ("coder_2", 2): "<done/>"}

    def policy(requests: list[Any]) -> list[str]:
        return [script[(r.agent, r.turn)] for r in requests]

    env = make_env("coding", num_agents=2, max_turns=3, scheme="propose_verify", **CODING)
    (episode,) = rollout.run_episodes([env], policy, seeds=[0], options=[{"task_id": "LME/0"}])
    assert episode.end_reason == "all_done" and episode.turns == 2
    assert execution.said_done(episode.steps) == {"coder_1": 1, "coder_2": 2}
    solo = make_env("coding", num_agents=1, max_turns=2, **CODING)
    (alone,) = rollout.run_episodes([solo], lambda requests: [NONE for _ in requests], seeds=[0],
                                    options=[{"task_id": "LME/0"}])
    assert alone.end_reason == "all_done" and alone.turns == 2
    assert execution.said_done(alone.steps) == {alone.steps[0].agent: None}
    assert execution.said_done([]) == {}


def test_finished_records_who_the_quorum_counted():
    """The study row's ``finished``: per agent, the turn it finished by the env's rule, the marker *or* its part
    resubmitted unchanged, or None. A team of 4 under ``"half"``: coder_1 says ``<done/>`` on turn 1; on turn 2 the
    tester resubmits its asserts unchanged, which makes two of four finished, and the quorum ends the episode.
    ``said_done`` sees coder_1 only; ``finished`` sees both, and the two agents still working as None."""
    tester = 'assert count_vowel_words("") == 0'
    script = {("coder_1", 1): ZERO + "\n<done/>", ("coder_2", 1): NONE, ("coder_2", 2): ZERO,
              ("tester", 1): tester, ("tester", 2): tester, ("verifier", 1): "Choice: coder_1",
              ("verifier", 2): "Choice: coder_2"}

    def policy(requests: list[Any]) -> list[str]:
        return [script[(r.agent, r.turn)] for r in requests]

    env = make_env("coding", num_agents=4, max_turns=3, scheme="propose_verify", end_quorum="half", **CODING)
    (episode,) = rollout.run_episodes([env], policy, seeds=[0], options=[{"task_id": "LME/0"}])
    assert episode.end_reason == "quorum_done" and episode.turns == 2
    assert execution.said_done(episode.steps) == {"coder_1": 1, "coder_2": None, "tester": None, "verifier": None}
    assert execution.finished(episode.steps) == {"coder_1": 1, "coder_2": None, "tester": 2, "verifier": None}
    assert execution.finished([]) == {}
