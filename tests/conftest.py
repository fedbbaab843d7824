"""Shared fixtures. Tests never reach a model or dataset hub."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


TEST_PHASE_ENV = "LLM_MARL_TEST_PHASE"
"""Which of ``scripts/test.sh``'s phases to collect (unset: every test). ``parallel``: the tests marked neither
``serial`` nor ``beside_serial``, on pytest-xdist workers; ``serial``: the sandbox suite, alone; ``beside``: the tests
marked ``beside_serial``, in one process next to the serial phase, on the core that phase leaves idle (it mostly
waits on timeouts and containers). The script sets it per phase, so a caller's own ``-m`` still applies in each."""

PHASES = ("parallel", "serial", "beside")

SANDBOX_TESTS = Path(__file__).resolve().parent / "sandbox"


def pytest_configure(config: pytest.Config) -> None:
    """Refuse an unknown phase before anything is collected."""
    phase = os.environ.get(TEST_PHASE_ENV, "")
    if phase not in ("", *PHASES):
        raise pytest.UsageError(f"{TEST_PHASE_ENV}: expected one of {', '.join(PHASES)} or unset, got {phase!r}")


def _phase_of(item: pytest.Item) -> str:
    if item.get_closest_marker("serial") is not None:
        return "serial"
    return "beside" if item.get_closest_marker("beside_serial") is not None else "parallel"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``serial`` every test that reads or strains host-wide state: the sandbox suite (its hostile programs fork
    up to a per-user process limit and kill process groups; its leak checks count what the executor holds). So that
    no other test's sandbox shares the machine with them, ``scripts/test.sh`` runs the other tests first, then these
    alone, with beside them only tests marked ``beside_serial``, which never start a sandbox (checked in that phase by
    :func:`_no_sandbox_beside_the_serial_phase`). :data:`TEST_PHASE_ENV` picks the phase."""
    for item in items:
        in_sandbox_suite = SANDBOX_TESTS in Path(str(item.fspath)).resolve().parents
        if in_sandbox_suite:
            item.add_marker(pytest.mark.serial)
        if in_sandbox_suite and item.get_closest_marker("beside_serial") is not None:
            raise pytest.UsageError(f"{item.nodeid}: a sandbox test cannot run beside the serial phase")
    phase = os.environ.get(TEST_PHASE_ENV, "")
    if phase:
        keep = [item for item in items if _phase_of(item) == phase]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


@pytest.fixture(autouse=True)
def _no_sandbox_beside_the_serial_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the ``beside`` phase a test that runs a program in a sandbox fails at once: its sandbox would share the
    machine with the serial phase's fork bombs and process-group kills. (Subprocesses a test starts are not covered:
    mark only tests whose children run no env with a sandbox.)"""
    if os.environ.get(TEST_PHASE_ENV) != "beside":
        return
    from llm_marl_envs.sandbox.local import LocalExecutor
    from llm_marl_envs.sandbox.pool import WarmPoolExecutor

    def refuse(self: object, *args: object) -> None:
        raise AssertionError(f"{type(self).__name__} ran a sandbox in the beside phase: this test must not be marked "
                             "beside_serial (its sandbox would share the machine with the serial phase's hostile "
                             "programs)")

    # Every program runs through one of these (Docker and bwrap are warm pools); a pool starts its sandboxes here.
    guarded = ((LocalExecutor, "_execute"), (WarmPoolExecutor, "_execute"), (WarmPoolExecutor, "_add_sandbox"))
    for cls, method in guarded:
        monkeypatch.setattr(cls, method, refuse)
