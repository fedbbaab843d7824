"""What a failing test's checked call gave (``TestOutcome.got``/``raised``), on every backend (they share the harness).

The judge records the call where the test makes it and shows a bounded ``repr`` of the builtin value it decoded
itself: a hostile program can return huge, deep or odd values, or objects with a hostile ``__repr__``, and still only
ever gets a bounded text or a placeholder, never a changed verdict.
"""

from __future__ import annotations

import pytest

from llm_marl_envs.sandbox import Executor
from llm_marl_envs.sandbox.harness.judge import CUT_MARK, MAX_SHOWN_CHARS
from llm_marl_envs.sandbox.protocol import build_report

PROGRAM = """
def f(x):
    if x == 1:
        return [1, 2, 3]
    if x == 2:
        raise ValueError("bad " + "input")
    if x == 3:
        return "y" * 10**6
    if x == 4:
        return set(range(10**5))
    if x == 5:
        nested = []
        for _ in range(150):
            nested = [nested]
        return nested
    if x == 6:
        print("PRINTED BY THE PROGRAM")
        return "ok"
    if x == 7:
        return {i: str(i) for i in range(10**4)}
    if x == 8:
        return b"\\x00" * 10**6
    if x == 9:
        return 7 ** 5000
    return x

class Loud:
    def __repr__(self):
        print("REPR RAN")
        return "R" * 10**7

class Raises:
    def __repr__(self):
        raise RuntimeError("repr raised")

class Loops(str):
    def __repr__(self):
        while True:
            pass

def g(kind):
    return {"loud": Loud, "raises": Raises}[kind]() if kind != "loops" else Loops("x")
"""


def _outcomes(executor: Executor, tests: list[str]) -> list:
    return list(executor.run(PROGRAM, tests).outcomes)


def test_a_failing_call_carries_its_value_or_exception(executor: Executor) -> None:
    tests = ["assert f(1) == [1, 2]", "assert f(2) == 0", "assert 5 == f(1)", "assert f(1) is None",
             "assert not f(1)", "assert f(0)", "assert f(10) == 10", "x = f(1)\nassert x == 2",
             "assert [f(1)] == [2]", "assert f(f(1)[0]) == 2"]
    got = [(o.status, o.got, o.raised) for o in _outcomes(executor, tests)]
    assert got == [
        ("failed", "[1, 2, 3]", None),
        ("error", None, "ValueError: bad input"),
        ("failed", "[1, 2, 3]", None),  # EXPECTED == CALL
        ("failed", "[1, 2, 3]", None),  # CALL is EXPECTED
        ("failed", "[1, 2, 3]", None),  # assert not CALL
        ("failed", "0", None),  # assert CALL
        ("passed", None, None),  # a passing test carries nothing
        ("failed", None, None),  # the checked value is not one call's
        ("failed", None, None),
        ("failed", "[1, 2, 3]", None),  # the outer call is the one checked: f(1)[0] == 1, f(1) again
    ]


def test_hostile_values_are_bounded_and_the_verdicts_unchanged(executor: Executor) -> None:
    tests = [f"assert f({x}) == 0" for x in (3, 4, 5, 6, 7, 8, 9)]
    tests += [f"assert g('{kind}') == 0" for kind in ("loud", "raises", "loops")]
    outcomes = _outcomes(executor, tests)
    assert [o.status for o in outcomes] == ["failed"] * 7 + ["error"] * 3
    for outcome in outcomes:
        shown = outcome.got if outcome.got is not None else outcome.raised
        assert shown and len(shown) <= MAX_SHOWN_CHARS, outcome
        assert "PRINTED" not in shown and "REPR RAN" not in shown
    huge_str, big_set, deep, printed, big_dict, big_bytes, big_int = (o.got for o in outcomes[:7])
    assert huge_str.startswith("'yyy") and "..." in huge_str
    assert big_set.startswith("{0, 1, 2") and big_set.endswith("...}")
    assert deep.startswith("[[[") and "..." in deep
    assert printed == "'ok'"  # what the program printed is its output, not the value
    assert big_dict.endswith(CUT_MARK) or big_dict.endswith("...}")
    assert big_bytes.startswith("b'\\x00") and big_bytes.endswith(CUT_MARK)
    assert big_int == "<an int of 14037 bits>"  # never converted to its 4,226 digits
    # An object is never shown (never repr'd): the program's process says it cannot be checked.
    for outcome in outcomes[7:]:
        assert "only builtin values can be checked" in outcome.raised, outcome
    # The verdicts of a healthy program afterwards: the executor is unharmed.
    assert [o.status for o in _outcomes(executor, ["assert f(10) == 10"])] == ["passed"]


def test_a_program_that_dies_answering_one_test_is_reloaded_for_the_next(executor: Executor) -> None:
    """An int past Python's 4,300-digit conversion limit kills the program's process while it encodes its reply: that
    test is an error, and the next tests run on a freshly loaded program (they used to fail on the dead one, "the
    program's process is gone")."""
    program = "def f(x):\n    return 7 ** 20000 if x == 1 else x\n"
    outcomes = executor.run(program, ["assert f(1) == 0", "assert f(2) == 2", "assert f(3) == 3"]).outcomes
    assert [o.status for o in outcomes] == ["error", "passed", "passed"], outcomes


def test_a_harness_without_results_still_reads_and_results_are_rebounded() -> None:
    """Verdict documents from a harness that answers [status, message] still parse; a third element is re-bounded."""
    tests = ["assert f(1) == 2", "assert f(2) == 3", "assert f(3) == 4"]
    verdict = {"outcomes": {"0": ["failed", "assertion failed"],
                            "1": ["failed", "assertion failed", {"got": "x" * 5000}],
                            "2": ["error", "ValueError: v", {"raised": 7, "got": None}]},
               "end": {"end": True, "error": None}}
    report, _ = build_report(tests, verdict, duration_s=0.0, backend="test")
    first, second, third = report.outcomes
    assert (first.status, first.got, first.raised) == ("failed", None, None)
    assert len(second.got) == MAX_SHOWN_CHARS and second.got.endswith(CUT_MARK)
    assert (third.got, third.raised) == (None, None)  # not text: dropped
    assert report.from_dict(report.to_dict()) == report


@pytest.mark.parametrize("test", ["assert __judge_checked_call__(1) == 2"])
def test_a_test_using_the_recorder_name_is_judged_as_before(executor: Executor, test: str) -> None:
    (outcome,) = _outcomes(executor, [test])
    assert outcome.status == "error" and outcome.got is None
