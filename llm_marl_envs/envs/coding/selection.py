"""Choosing one program among candidate programs by the task's visible tests: the candidate schemes' rule for a
writer of several candidates with no tester and no verifier (the study's ``single_best_of_n`` condition).

The rule is :func:`~llm_marl_envs.envs.coding.program.select_candidate`, the one the ``propose_verify`` and
``author_fixer`` teams' programs are chosen by; without a tester or a verifier it reads: run the *visible* tests on
every candidate and keep the one that passes the most of them; ties go to the earliest candidate (the order in which
they were written), so the rule is deterministic and a later duplicate never displaces an earlier one; when no
candidate has code at all, the first is kept. Held-out tests play no part: they decide the reward, and a selection
that saw them would leak them into the episode.

>>> from llm_marl_envs.sandbox import make_executor
>>> tests = ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]
>>> programs = ["def add(a, b):\\n    return 0", "def add(a, b):\\n    return a + b", "def add(a, b):\\n    return a+b"]
>>> choice = select_program(programs, visible_test_runner(make_executor("local"), tests))
>>> choice.index, choice.visible_passed
(1, (1, 2, 2))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llm_marl_envs.envs.coding.program import CandidateResult, select_candidate
from llm_marl_envs.sandbox import Executor, TestJob

VisibleTestRunner = Callable[[Sequence[str]], Sequence[int]]
"""Given candidate programs, how many visible tests each passes (one call for all, so a sandbox runs them as one
batch)."""


@dataclass(frozen=True)
class CandidateChoice:
    """Which candidate the rule kept, and what every candidate scored."""

    index: int
    """The kept candidate's position (0-based) among those given."""
    visible_passed: tuple[int, ...]
    """Visible tests passed by each candidate, in the order given."""


def select_program(programs: Sequence[str], run_visible: VisibleTestRunner) -> CandidateChoice:
    """Keep the candidate program that passes the most visible tests (ties: the earliest).

    ``run_visible(programs)`` returns the visible tests each program passes, in order (:func:`visible_test_runner`
    builds one on a sandbox executor). Raises ``ValueError`` for no candidates or a runner that does not return one
    non-negative count per candidate.
    """
    if isinstance(programs, str) or not programs:
        raise ValueError(f"programs: expected a non-empty sequence of candidate programs, got {programs!r:.80}")
    passed = tuple(run_visible(list(programs)))
    if len(passed) != len(programs) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in passed
    ):
        raise ValueError(f"run_visible: expected {len(programs)} counts >= 0 (one per candidate), got {passed!r:.120}")
    names = [str(index) for index in range(len(programs))]
    results = [CandidateResult(name, bool(program.strip()), count)
               for name, program, count in zip(names, programs, passed, strict=True)]
    chosen = select_candidate(results, names)
    return CandidateChoice(index=0 if chosen is None else int(chosen), visible_passed=passed)


def visible_test_runner(executor: Executor, tests: Sequence[str]) -> VisibleTestRunner:
    """A runner for :func:`select_program`: every program against ``tests`` (the task's visible asserts) in one
    :meth:`~llm_marl_envs.sandbox.Executor.run_many` batch. An empty program (``""``: a candidate with no runnable
    code) passes none and is not run; so does every program when there are no tests."""
    tests = list(tests)

    def run(programs: Sequence[str]) -> list[int]:
        runnable = [i for i, program in enumerate(programs) if program.strip()] if tests else []
        reports = executor.run_many([TestJob(programs[i], tests) for i in runnable]) if runnable else []
        passed = [0] * len(programs)
        for i, report in zip(runnable, reports, strict=True):
            passed[i] = report.passed
        return passed

    return run
