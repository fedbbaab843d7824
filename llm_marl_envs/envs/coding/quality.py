"""Quality of a team's program, code metrics, and per-agent feedback.

Quality is a weighted mean of the terms present (weights :data:`TERM_WEIGHTS`, renormalised over those present):

* ``pass_rate`` — fraction of the task's unit tests the team's program passes, from the sandboxed executor;
* ``syntax`` — 1 when the whole program parses;
* ``structure`` — fraction of the role contracts met: ``main``/``solo`` defines the entry point, ``aux`` defines
  ``aux``;
* ``aux_usage`` (2+ agents) — 1 when the entry point calls ``aux`` (the helper is actually used);
* ``tester_validity`` (3+ agents, when the task has a reference solution) — fraction of the tester's asserts that
  the reference solution passes (a test that rejects a correct program is a wrong test); 0 with no asserts.

Code metrics from radon (cyclomatic complexity, maintainability index) go to infos, not into the reward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TERM_WEIGHTS: dict[str, float] = {
    "pass_rate": 0.7,
    "syntax": 0.1,
    "structure": 0.1,
    "aux_usage": 0.1,
    "tester_validity": 0.1,
}


def weighted_quality(terms: Mapping[str, float]) -> float:
    """Weighted mean of the present terms with :data:`TERM_WEIGHTS`."""
    total_weight = sum(TERM_WEIGHTS[name] for name in terms)
    return sum(TERM_WEIGHTS[name] * value for name, value in terms.items()) / total_weight


def code_metrics(code: str) -> dict[str, Any]:
    """Radon metrics of ``code``: max and mean cyclomatic complexity, maintainability index (0-100), lines."""
    from radon.complexity import cc_visit
    from radon.metrics import mi_visit
    from radon.raw import analyze

    try:
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


def describe_tests(tests: Sequence[str], statuses: Sequence[tuple[str, str]], limit: int = 6) -> str:
    """Readable lines ``assert ...: passed`` / ``failed (message)`` for the first ``limit`` tests."""
    lines = []
    for test, (status, message) in list(zip(tests, statuses, strict=False))[:limit]:
        first_line = test.strip().splitlines()[-1][:160] if test.strip() else test
        detail = f" ({message[:160]})" if message and status != "passed" else ""
        lines.append(f"- {first_line}: {status}{detail}")
    return "\n".join(lines)
