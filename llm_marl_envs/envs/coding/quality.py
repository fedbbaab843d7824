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

from collections.abc import Mapping, Sequence
from typing import Any

from llm_marl_envs.core.python_source import PARSE_LOCK

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


def describe_tests(tests: Sequence[str], statuses: Sequence[str], limit: int = 6) -> str:
    """Readable lines ``- assert ...: passed`` for the first ``limit`` tests (``statuses``: what the agent may see)."""
    lines = []
    for test, status in list(zip(tests, statuses, strict=False))[:limit]:
        last_line = test.strip().splitlines()[-1][:160] if test.strip() else test
        lines.append(f"- {last_line}: {status}")
    return "\n".join(lines)
