"""Host side of the harness protocol: validate inputs, frame a job, and turn the supervisor's answer into a report."""

from __future__ import annotations

import json
import math
import secrets
import struct
from collections.abc import Sequence
from typing import Any

from llm_marl_envs.sandbox.harness.judge import CUT_MARK, MAX_SHOWN_CHARS
from llm_marl_envs.sandbox.splitting import split_tests
from llm_marl_envs.sandbox.types import SandboxLimits, TestOutcome, TestReport

FRAME = struct.Struct(">I")
MAX_CODE_CHARS = 2_000_000
MAX_TESTS = 1000


def normalize_tests(tests: str | Sequence[str], entry_point: str | None) -> list[str]:
    """Validate ``tests`` and return one source per test (see :func:`split_tests`)."""
    if entry_point is not None and (not isinstance(entry_point, str) or not entry_point.isidentifier()):
        raise ValueError(f"entry_point: expected a Python identifier or None, got {entry_point!r}")
    return split_tests(tests, entry_point)


def build_job(code: str, tests: list[str], entry_point: str | None, limits: SandboxLimits) -> dict[str, Any]:
    """The job document the harness reads (limits flattened in)."""
    if not isinstance(code, str):
        raise TypeError(f"code: expected str, got {type(code).__name__}")
    return {
        "code": code,
        "tests": tests,
        "entry_point": entry_point,
        "timeout_s": float(limits.timeout_s),
        "run_budget_s": limits.run_budget_s,
        "cpu_s": math.ceil(limits.run_budget_s) + 1,
        "memory_mb": int(limits.memory_mb),
        "output_bytes": int(limits.output_bytes),
        "file_mb": int(limits.file_mb),
        "nproc": int(limits.max_processes),
    }


def frame(data: bytes) -> bytes:
    """One length-prefixed frame."""
    return FRAME.pack(len(data)) + data


def request_bytes(job: dict[str, Any]) -> tuple[bytes, bytes]:
    """The bytes to write to the supervisor (job frame, then nonce frame) and the nonce itself."""
    nonce = secrets.token_hex(16).encode()
    payload = json.dumps(job, separators=(",", ":")).encode()
    return frame(payload) + frame(nonce), nonce


def take_frame(buffer: bytes) -> tuple[bytes | None, bytes]:
    """Split one complete frame off ``buffer``: (frame or None, rest)."""
    if len(buffer) < FRAME.size:
        return None, buffer
    (size,) = FRAME.unpack(buffer[: FRAME.size])
    if len(buffer) < FRAME.size + size:
        return None, buffer
    return buffer[FRAME.size : FRAME.size + size], buffer[FRAME.size + size :]


def parse_answer(answer: bytes | None, nonce: bytes) -> dict[str, Any] | None:
    """The verdict document if ``answer`` carries the right nonce and parses, else None."""
    if answer is None or not answer.startswith(nonce + b"\n"):
        return None
    try:
        document = json.loads(answer[len(nonce) + 1 :].decode("utf-8", "replace"))
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def build_report(
    tests: list[str],
    verdict: dict[str, Any] | None,
    *,
    duration_s: float,
    backend: str,
    failure: str | None = None,
    timed_out_host: bool = False,
) -> tuple[TestReport, list[str]]:
    """A :class:`TestReport` from the verdict document (or from nothing, when the harness died); also the anomalies.

    Tests without a verdict count as ``timeout`` when the run overran its budget and ``error`` otherwise: a test is
    ``passed`` only when the judge said so.
    """
    verdict = verdict or {}
    anomalies = [str(a) for a in verdict.get("anomalies", [])]
    raw = verdict.get("outcomes", {}) if isinstance(verdict.get("outcomes"), dict) else {}
    end = verdict.get("end") if isinstance(verdict.get("end"), dict) else None
    overran = bool(verdict.get("overran")) or timed_out_host
    if not verdict:
        anomalies.append(failure or "no verdict from the harness")
    missing_status = "timeout" if overran else "error"
    missing_message = "the run overran its time budget" if overran else (failure or "the harness stopped early")
    outcomes = []
    for index, source in enumerate(tests):
        entry = raw.get(str(index))
        status, message, shown = missing_status, missing_message, {}
        if isinstance(entry, list) and len(entry) in (2, 3) and entry[0] in ("passed", "failed", "error", "timeout"):
            status, message = entry[0], str(entry[1])[:300]
            # A third element (what the checked call gave) is optional: a harness without it answers [status, message].
            if len(entry) == 3 and isinstance(entry[2], dict) and status != "passed":
                shown = {key: _shown(entry[2].get(key)) for key in ("got", "raised")}
        outcomes.append(TestOutcome(index=index, source=source, status=status, message=message, **shown))
    error = end.get("error") if end else (failure or missing_message if tests else None)
    report = TestReport(
        passed=sum(o.status == "passed" for o in outcomes),
        total=len(outcomes),
        outcomes=tuple(outcomes),
        timed_out=any(o.status == "timeout" for o in outcomes),
        duration_s=duration_s,
        stdout=str(end.get("stdout", "")) if end else "",
        stderr=str(end.get("stderr", "")) if end else "",
        backend=backend,
        error=None if error is None else str(error)[:1000],
        details={"anomalies": anomalies} if anomalies else {},
    )
    return report, anomalies


def _shown(text: Any) -> str | None:
    """A ``got``/``raised`` text from the judge, re-bounded here (the verdict document is parsed JSON)."""
    if not isinstance(text, str):
        return None
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - len(CUT_MARK)] + CUT_MARK


def rejected_report(tests: list[str], reason: str, backend: str) -> TestReport:
    """A report for a job refused before running (e.g. a program too large): every test ``error``."""
    outcomes = tuple(TestOutcome(i, s, "error", reason) for i, s in enumerate(tests))
    return TestReport(0, len(outcomes), outcomes, False, 0.0, backend=backend, error=reason)
