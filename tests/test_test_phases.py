"""``scripts/test.sh`` runs the suite in three phases picked by ``LLM_MARL_TEST_PHASE`` (tests/conftest.py): together
they run every test once; the sandbox suite, which strains machine-wide state, runs only in the serial one, and next
to it only tests marked ``beside_serial``, which may not start a sandbox (the phase refuses one)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/sandbox/test_leak_check.py", "tests/test_registry.py", "tests/test_trainer_step_bench.py"]
BESIDE = "tests/test_trainer_step_bench.py::test_a_tiny_run_reports_every_case_its_ratios_and_its_settings"


def pytest_in(folder: Path, phase: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LLM_MARL_TEST_PHASE"}
    if phase is not None:
        env["LLM_MARL_TEST_PHASE"] = phase
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)


def collected(phase: str | None) -> tuple[int, set[str], str]:
    run = pytest_in(ROOT, phase, "--collect-only", *FILES)
    return run.returncode, {line for line in run.stdout.splitlines() if "::" in line}, run.stderr


def test_the_three_phases_split_the_suite_and_keep_the_sandbox_suite_serial() -> None:
    (status_all, everything, _), (_, parallel, _), (_, serial, _), (_, beside, _) = (
        collected(p) for p in (None, "parallel", "serial", "beside"))
    assert status_all == 0 and everything
    assert parallel | serial | beside == everything
    assert not parallel & serial and not parallel & beside and not serial & beside
    assert serial and all(name.startswith("tests/sandbox/") for name in serial)
    assert parallel and not any(name.startswith("tests/sandbox/") for name in parallel)
    assert beside == {BESIDE}


def test_an_unknown_phase_is_a_usage_error() -> None:
    status, names, error = collected("both")
    assert status == 4 and not names
    assert "LLM_MARL_TEST_PHASE: expected one of parallel, serial, beside or unset" in error


def _suite_with(tmp_path: Path, folder: str, code: str) -> Path:
    """A scratch suite under our conftest: ``folder/test_it.py`` holding ``code``."""
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    beside_serial: next to the serial phase\n")
    (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    (tmp_path / folder / "test_it.py").write_text(code, encoding="utf-8")
    return tmp_path


RUNS_A_PROGRAM = r"""
import pytest
from llm_marl_envs.sandbox import make_executor

pytestmark = pytest.mark.beside_serial

def test_runs_a_program():
    with make_executor("local") as executor:
        report = executor.run("def f(x):\n    return x\n", ["assert f(1) == 1"])
    assert report.passed
"""


def test_a_sandbox_in_the_beside_phase_fails_the_test_that_started_it(tmp_path: Path) -> None:
    suite = _suite_with(tmp_path, "checks", RUNS_A_PROGRAM)
    refused = pytest_in(suite, "beside")
    assert refused.returncode == 1 and "1 failed" in refused.stdout, refused.stdout
    assert "LocalExecutor ran a sandbox in the beside phase" in refused.stdout
    # The same test in any other phase runs its program (the check belongs to the beside phase alone).
    allowed = pytest_in(suite, None)
    assert allowed.returncode == 0 and "1 passed" in allowed.stdout, allowed.stdout


def test_a_sandbox_test_marked_beside_serial_is_a_usage_error(tmp_path: Path) -> None:
    suite = _suite_with(tmp_path, "sandbox", RUNS_A_PROGRAM)
    run = pytest_in(suite, None, "--collect-only")
    assert run.returncode == 4 and "a sandbox test cannot run beside the serial phase" in run.stderr, run.stderr


def test_serial_tests_live_only_in_the_sandbox_folder() -> None:
    """scripts/test.sh collects only tests/sandbox for the serial phase when given no arguments, so a test marked
    ``serial`` anywhere else would never run there (and never in the parallel phase either)."""
    # tests/conftest.py marks tests/sandbox (checked above); no test module may mark a test of its own.
    marked = [path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("*.py")
              if path.name != "conftest.py" and not path.is_relative_to(ROOT / "tests" / "sandbox")
              and re.search(r"mark\.serial\b|pytestmark\s*=.*\bserial\b", path.read_text(encoding="utf-8"))]
    assert marked == [], marked
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "LLM_MARL_TEST_PHASE=serial phase tests/sandbox" in script


def test_beside_serial_tests_are_marked_where_test_sh_looks_for_them() -> None:
    """With no arguments scripts/test.sh's beside phase collects only the files in which a line starts with the
    ``@pytest.mark.beside_serial`` decorator: a test marked any other way (``pytestmark``, a parametrize mark) would
    run in no phase."""
    this = Path(__file__).resolve()
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name == "conftest.py" or path.resolve() == this:
            continue
        text = path.read_text(encoding="utf-8")
        uses = len(re.findall(r"mark\.beside_serial\b", text))
        assert uses == len(re.findall(r"^@pytest\.mark\.beside_serial\b", text, re.MULTILINE)), path
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "grep -rlE --include='test_*.py' '^@pytest\\.mark\\.beside_serial\\b' tests" in script
