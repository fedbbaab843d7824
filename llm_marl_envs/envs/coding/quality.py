"""Quality of a team's program, code metrics, and per-agent feedback.

Quality is a weighted mean of these terms (weights :data:`TERM_WEIGHTS`):

* ``pass_rate`` — fraction of the task's *held-out* unit tests the team's program passes, from the sandboxed
  executor (the visible tests, shown in feedback, are not counted: hard-coding their outputs earns nothing);
* ``syntax`` — 1 when the team's program parses *and* defines the entry point (an empty or non-code program earns
  nothing);
* ``structure`` — fraction of the role contracts met: ``main``/``solo`` defines the entry point, ``aux`` defines
  ``aux``.

There is no static "main calls aux" term any more: whether the helper matters is measured by counterfactual runs and
paid as consistency (:mod:`~llm_marl_envs.envs.coding.contribution`). The tester's ``tester_validity`` (fraction of
its asserts the reference solution passes) is reported in the quality terms for diagnosis but is paid only through
the tester's contribution. Diagnostics ``similarity`` and ``duplication`` (resemblance of the drafts) are reported too,
never paid.

Code metrics from radon (cyclomatic complexity, maintainability index) go to infos, not into the reward.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Mapping, Sequence
from typing import Any

from llm_marl_envs.core.python_source import PARSE_LOCK
from llm_marl_envs.sandbox import TestOutcome, checked_call, program_names

TERM_WEIGHTS: dict[str, float] = {
    "pass_rate": 0.8,
    "syntax": 0.1,
    "structure": 0.1,
}


def weighted_quality(terms: Mapping[str, float]) -> float:
    """Weighted mean of the terms of :data:`TERM_WEIGHTS` (all must be present)."""
    return sum(weight * terms[name] for name, weight in TERM_WEIGHTS.items()) / sum(TERM_WEIGHTS.values())


def code_metrics(code: str) -> dict[str, Any]:
    """Radon metrics of ``code``: max and mean cyclomatic complexity, maintainability index (0-100), lines."""
    from radon.complexity import cc_visit
    from radon.metrics import mi_visit
    from radon.raw import analyze

    try:
        with PARSE_LOCK:  # radon parses with ast.parse: the same thread-safety rule as our own parses
            blocks = cc_visit(code)
            maintainability = mi_visit(code, multi=True)
            raw = analyze(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError):
        return {"parsed": False}
    complexities = [block.complexity for block in blocks]
    return {
        "parsed": True,
        "max_complexity": max(complexities, default=0),
        "mean_complexity": sum(complexities) / len(complexities) if complexities else 0.0,
        "maintainability_index": round(float(maintainability), 2),
        "source_lines": raw.sloc,
    }


HIDDEN_RESULT = "(hidden: it holds text that is neither the task's nor your code's)"
"""Shown instead of a teammate-made ``got``/``raised`` text that could carry a teammate's words (see
:func:`shown_result`)."""
MAX_SHOWN_CHARS = 160
"""The longest call, expected value or result a feedback line shows (the sandbox keeps up to 200 characters)."""

# The words of CPython's common builtin exception messages, the builtins' own names (types, functions, exceptions) and
# the sandbox's own accounts ("the program's process died", "a value of type X (only builtin values can be
# checked)"): a message made only of these, of numbers and of words the agent already knows says nothing a teammate
# chose beyond which of these it wrote.
_WORD = re.compile(r"\w+")
_PYTHON_WORDS = frozenset(
    _WORD.findall(
        """
    a an and are argument arguments as assignment at attribute attributes base be being before between builtin but by
    call called callable can cannot changed channel character checked closed concatenate convert could coroutine decode
    decimal defined deletion depth dictionary died division does during empty encode enough exceeded exceeds exited
    expected for format found from function generator given gone got has have in index indices instance instances int
    integer integers invalid is it item iterable iteration iterator keyword length limit list literal local math
    maximum message method missing module modulo more multiple must name need no non none nonetype not number object of
    only operand or out positional process program range raised recursion referenced required returned separator
    sequence size slice str string subscriptable substring support supported takes than the to too type types
    unexpected unhashable unpack unsupported value values variable was were while with zero
    """
    )
) | frozenset(name.lower() for name in dir(builtins))


def shown_result(got: str | None, raised: str | None, known: str | None, teammates: str = "") -> str | None:
    """The ``got: ...`` or ``raised: ...`` line of a failing test, as an agent may see it (None when there is none).

    ``known`` is the text the agent may already see (the task, the visible tests, its own draft), or None for an
    agent working alone, which sees its own program's values whole. For a team's program a returned value or an
    exception message is text the program made, and a teammate's code can put any text there (a canary): it is shown
    only when each of its words (runs of letters, digits and ``_``) occurs in ``known``, case aside, or is one of
    Python's or the sandbox's own message words; a number of 4 digits or more must, besides, not come from a
    teammate's draft (``teammates``). Otherwise the line says the value is hidden (and for an exception keeps its type
    when that is a builtin one). Why an allow-list and not "hide what a teammate wrote": a teammate's program can
    compute text its draft never holds (``"nekot"[::-1]``). What remains is a slow channel (which known words, which
    numbers), like the verdicts themselves.
    """
    if got is None and raised is None:
        return None
    if raised is not None:
        text = raised.removeprefix("the program raised ")
        label = "raised" if text != raised or not raised.startswith("the program") else "error"
    else:
        text, label = got, "got"
    text = _clipped(text)
    if known is None or _only_known_words(text, known, teammates):
        return f"{label}: {text}"
    kind = text.split(":", 1)[0] if label == "raised" else ""
    if kind and isinstance(getattr(builtins, kind, None), type) and issubclass(getattr(builtins, kind), BaseException):
        return f"{label}: {kind} {HIDDEN_RESULT.replace('it holds', 'its message holds')}"
    return f"{label}: {HIDDEN_RESULT}"


def _only_known_words(text: str, known: str, teammates: str) -> bool:
    known_lower = known.lower()
    for word in _WORD.findall(text):
        lower = word.lower()
        if word.isdigit():
            if len(word) >= 4 and word not in known and word in teammates:
                return False
        elif lower not in _PYTHON_WORDS and lower not in known_lower:
            return False
    return True


def _clipped(text: str) -> str:
    text = " ".join(text.split())  # one line, whatever the value holds
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 6] + " [cut]"


def describe_tests(
    tests: Sequence[str],
    statuses: Sequence[str],
    outcomes: Sequence[TestOutcome] | None = None,
    *,
    entry_point: str | None = None,
    known: str | None = None,
    teammates: str = "",
    limit: int = 6,
    explained: int = 3,
) -> str:
    """Readable lines for the first ``limit`` tests (``statuses``: what the agent may see).

    A passing test, or a test whose form says no single call decides it, is one line ``- assert ...: passed``. The
    first ``explained`` tests that did not pass and end in an assert on one call of the program
    (:func:`~llm_marl_envs.sandbox.checked_call`) get a line each for the call and its verdict, ``expected: ...``, and
    what the call gave, ``got: ...`` or ``raised: Type: message`` (from ``outcomes``, filtered by
    :func:`shown_result` with ``known`` and ``teammates``). Every line is at most about 170 characters, so the whole
    is bounded by ``limit``.
    """
    lines = []
    shown = 0
    for index, (test, status) in enumerate(list(zip(tests, statuses, strict=False))[:limit]):
        check = _check_text(test, entry_point) if status != "passed" and shown < explained else None
        if check is None:
            last_line = test.strip().splitlines()[-1][:MAX_SHOWN_CHARS] if test.strip() else test
            lines.append(f"- {last_line}: {status}")
            continue
        shown += 1
        call, expected = check
        lines += [f"- {call}: {status}", f"  expected: {expected}"]
        outcome = outcomes[index] if outcomes is not None and index < len(outcomes) else None
        result = shown_result(outcome.got, outcome.raised, known, teammates) if outcome is not None else None
        if result:
            lines.append(f"  {result}")
    return "\n".join(lines)


def _check_text(test: str, entry_point: str | None) -> tuple[str, str] | None:
    """(the checked call, what it should give) as source text, for a test :func:`checked_call` knows; else None."""
    try:
        with PARSE_LOCK:
            tree = ast.parse(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    check = checked_call(tree, program_names(tree, entry_point))
    if check is None:
        return None
    call, expected, truth = check
    call_text = ast.get_source_segment(test, call) or ast.unparse(call)
    if expected is not None:
        expected_text = ast.get_source_segment(test, expected) or ast.unparse(expected)
    else:
        expected_text = "a true value" if truth else "a false value"
    return _clipped(call_text), _clipped(expected_text)
