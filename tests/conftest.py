"""Shared fixtures. Tests never reach a model or dataset hub."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


TEST_PHASE_ENV = "LLM_MARL_TEST_PHASE"
"""``parallel`` keeps only the tests not marked ``serial``, ``serial`` only those (unset: all). ``scripts/test.sh``
sets it per phase, so a caller's own ``-m`` still applies in both."""


def pytest_configure(config: pytest.Config) -> None:
    """Refuse an unknown phase before anything is collected."""
    phase = os.environ.get(TEST_PHASE_ENV, "")
    if phase not in ("", "parallel", "serial"):
        raise pytest.UsageError(f"{TEST_PHASE_ENV}: expected 'parallel', 'serial' or unset, got {phase!r}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``serial`` every test that reads or strains host-wide state: the sandbox suite (its leak checks count
    temp entries and containers machine-wide, its hostile programs fork up to a per-user process limit and kill
    process groups). ``scripts/test.sh`` runs the other tests on several pytest-xdist workers first, then these alone,
    so no other worker's sandbox or temp files can show up in their counts; :data:`TEST_PHASE_ENV` picks the phase."""
    sandbox = Path(__file__).resolve().parent / "sandbox"
    for item in items:
        if sandbox in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.serial)
    phase = os.environ.get(TEST_PHASE_ENV, "")
    if phase:
        keep = [item for item in items if (item.get_closest_marker("serial") is not None) == (phase == "serial")]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep
