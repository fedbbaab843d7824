"""``scripts/test.sh`` runs the suite in two phases picked by ``LLM_MARL_TEST_PHASE`` (tests/conftest.py): together
they run every test once, and the sandbox suite, which counts machine-wide state, only in the serial one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/sandbox/test_leak_check.py", "tests/test_registry.py"]


def collected(phase: str | None) -> tuple[int, set[str], str]:
    env = {k: v for k, v in os.environ.items() if k != "LLM_MARL_TEST_PHASE"}
    if phase is not None:
        env["LLM_MARL_TEST_PHASE"] = phase
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FILES],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return run.returncode, {line for line in run.stdout.splitlines() if "::" in line}, run.stderr


def test_the_two_phases_split_the_suite_and_keep_the_sandbox_suite_serial() -> None:
    (status_all, everything, _), (_, parallel, _), (_, serial, _) = (collected(p) for p in (None, "parallel", "serial"))
    assert status_all == 0 and everything
    assert parallel | serial == everything and not parallel & serial
    assert serial and all(name.startswith("tests/sandbox/") for name in serial)
    assert parallel and not any(name.startswith("tests/sandbox/") for name in parallel)


def test_an_unknown_phase_is_a_usage_error() -> None:
    status, names, error = collected("both")
    assert status == 4 and not names and "LLM_MARL_TEST_PHASE: expected 'parallel', 'serial' or unset" in error


def test_serial_tests_live_only_in_the_sandbox_folder() -> None:
    """scripts/test.sh collects only tests/sandbox for the serial phase when given no arguments, so a test marked
    ``serial`` anywhere else would never run there (and never in the parallel phase either)."""
    # tests/conftest.py marks tests/sandbox (checked above); no test module may mark a test of its own.
    marked = [path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("*.py")
              if path.name != "conftest.py" and not path.is_relative_to(ROOT / "tests" / "sandbox")
              and re.search(r"mark\.serial\b|pytestmark\s*=.*serial", path.read_text(encoding="utf-8"))]
    assert marked == [], marked
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "LLM_MARL_TEST_PHASE=serial phase tests/sandbox" in script
