"""The judge's two timeout paths may fire together: whenever the SIGALRM lands, a test gets a verdict.

A test's deadline is enforced twice: by the judge's own ``ITIMER_REAL`` alarm (for test code that loops by itself)
and by the wait for the program's reply (``ProgramProcess.wait_frame`` raises ``TestTimeout`` at the same deadline).
When the program floods its output, the judge polls busily, so the wait often sees the deadline a few microseconds
before the alarm arrives. The alarm used to land while ``run_test`` was already handling the first ``TestTimeout``:
the second one escaped ``run_test`` (a ``BaseException``, past ``Judge.run``'s ``except Exception``), the judge exited
without its end frame and the test came back as ``error`` / "the harness stopped early" instead of ``timeout``
(about 1 run in 10 of the ``flood_forever`` hostile program, on both backends).

Python runs a signal handler between two bytecodes of the main thread, so these tests replay the alarm's handler at
*every* bytecode of a test run in turn (through an opcode trace function, which raises at exactly that point like a
signal handler does) and require a verdict each time. Deterministic, unlike waiting for the race.

The judge runs here in this process against a stand-in program (no sandbox, no fork, no pipes), so these tests are
not part of the serial sandbox suite: they are CPU-bound and take about 45 s, which the parallel phase's two workers
share. The end-to-end check of the race with real programs stays in ``tests/sandbox/test_sandbox_judge_timeout.py``.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from llm_marl_envs.sandbox.harness import program
from llm_marl_envs.sandbox.harness.judge import Judge

TEST = "assert f(1) == 2"


class FakeProgram:
    """Stands in for the program process: answers a call the way a real one would, with no fork and no pipes."""

    alive = True

    def __init__(self, answer: Callable[[], Any]) -> None:
        self.answer = answer

    def call(self, name: str, args: tuple, kwargs: dict, deadline: float) -> Any:
        return self.answer()

    def kill(self) -> None:
        self.alive = False


def _deadline_reached() -> Any:
    raise program.TestTimeout()  # what ProgramProcess.wait_frame raises when the deadline passes before the alarm fires


def _program_raised() -> Any:
    raise program.RemoteError("the program raised ValueError: nope")


ANSWERS: dict[str, tuple[Callable[[], Any], frozenset[str]]] = {
    # the program's answer -> the statuses acceptable when an alarm may also land anywhere in the run
    "deadline": (_deadline_reached, frozenset({"timeout"})),
    "right": (lambda: 2, frozenset({"passed", "timeout"})),
    "wrong": (lambda: 3, frozenset({"failed", "timeout"})),
    "raised": (_program_raised, frozenset({"error", "timeout"})),
}


def _judge(answer: Callable[[], Any]) -> Judge:
    judge = Judge({"timeout_s": 1.5, "entry_point": None, "output_bytes": 64, "tests": [TEST]}, report_fd=-1)
    judge.program = FakeProgram(answer)  # type: ignore[assignment]
    judge.deadline = time.monotonic() + 60.0  # the real timer never fires here: the alarm is replayed by hand
    return judge


def _run_with_alarm_at(judge: Judge, position: int) -> tuple[tuple[str, str, dict | None], bool]:
    """``judge.run_test`` with the SIGALRM handler run before its ``position``-th bytecode: (verdict, whether run)."""
    seen, fired = 0, False

    def on_opcode(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal seen, fired
        if event == "opcode" and not fired:
            if seen == position:
                fired = True
                judge.on_alarm(signal.SIGALRM, frame)  # may raise TestTimeout right here, as a signal handler does
            seen += 1
        return on_opcode

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return on_opcode

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        verdict = judge.run_test(0, TEST)
    finally:
        sys.settrace(previous)
        signal.setitimer(signal.ITIMER_REAL, 0)  # the replayed alarm never consumed the real (60 s) timer
    return verdict, fired


@pytest.fixture
def quiet_alarm():
    """No real SIGALRM can end the test process while run_test arms its (long) timer."""
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: None)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("answer", sorted(ANSWERS))
def test_an_alarm_anywhere_in_a_test_still_gives_a_verdict(quiet_alarm: None, answer: str) -> None:
    reply, acceptable = ANSWERS[answer]
    baseline, _ = _run_with_alarm_at(_judge(reply), -1)  # traced, no alarm
    assert baseline[0] == ("timeout" if answer == "deadline" else min(acceptable - {"timeout"})), baseline
    position, statuses = 0, set()
    while True:
        judge = _judge(reply)
        try:
            (status, message, _shown), fired = _run_with_alarm_at(judge, position)
        except program.TestTimeout:
            pytest.fail(f"a TestTimeout escaped run_test when the alarm landed before bytecode {position}")
        if not fired:
            break  # the alarm would have landed after the test was over
        assert status in acceptable, (position, status, message)
        assert not judge.armed, f"the alarm is still armed after the test (alarm before bytecode {position})"
        statuses.add(status)
        position += 1
    assert position > 20, "the trace saw too few bytecodes to exercise anything"
    assert "timeout" in statuses
