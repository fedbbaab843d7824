"""The hostile-program suite, on every backend: expected verdict (a runaway program must come back as ``timeout``),
host untouched, nothing left behind, and the executor still healthy for the next call.

Docker and bwrap must both hold the catalogue's expectations. Local expectations follow the local backend's
documented (weaker) guarantees and are asserted, not skipped. An ``isolated_only`` program, which would harm the host
if run locally, is never paired with the local backend (the catalogue's ``local_note`` says why), so nothing is
skipped. How long each program holds a call is a figure, not a pass/fail rule on a shared machine:
``python -m llm_marl_benchmarks.sandbox_hostile`` measures it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import pytest
from sandbox_fixtures import (
    BACKENDS,
    HARNESS_MARKER,
    HOSTILE_LIMITS,
    ISOLATED,
    HostBait,
    harness_processes,
    settled_harness_processes,
    warm_harness_processes,
)

from llm_marl_envs.sandbox import Executor
from llm_marl_envs.sandbox.hostile import HOSTILE, Hostile

HEALTHY = "def f(x):\n    return x + 1\n"
RUN_AS_ROOT = os.geteuid() == 0
# The local backend's documented filesystem weakness depends on who runs it: as root, the program runs as `nobody`
# and cannot reach the bait (a root-owned 0600 file, a 0755 dir); as anyone else it reads and writes them.
FILESYSTEM_REACH = frozenset({"read_host_file", "write_outside_workdir"})


def acceptable(hostile: Hostile, backend: str) -> frozenset[str]:
    """The statuses ``hostile`` may get on ``backend``, narrowed to this host's user for the local backend."""
    if backend == "local" and hostile.name in FILESYSTEM_REACH:
        return frozenset({"error"} if RUN_AS_ROOT else {"passed"})
    return hostile.statuses(backend)


def test_catalogue_is_large_enough() -> None:
    assert len(HOSTILE) >= 30
    assert len({h.name for h in HOSTILE}) == len(HOSTILE)
    forgeries = [h for h in HOSTILE if h.name.startswith("forge_")]
    assert len(forgeries) >= 10 and all("passed" not in h.expected for h in forgeries)


def test_leak_check_sees_this_runs_leftovers_and_ignores_other_runs(executor: Executor) -> None:
    """The "nothing left behind" check can fail: a stray harness process of this run counts, another run's not."""
    marker = HARNESS_MARKER.decode()
    ours = f"import time; time.sleep(30)  # {marker} {tempfile.gettempdir()}/llm-marl-sandbox-x"
    theirs = f"import time; time.sleep(30)  # {marker} /somewhere/else/llm-marl-sandbox-x"
    before = harness_processes(executor)
    strays = [subprocess.Popen([sys.executable, "-c", code]) for code in (ours, theirs)]
    try:
        # Locally the first stray looks like a harness process of this run; in Docker or bwrap neither is a sandbox's.
        counted = before + (1 if executor.backend == "local" else 0)
        assert settled_harness_processes(executor, counted) == counted
    finally:
        for stray in strays:
            stray.kill()
            stray.wait()


def _backend_programs() -> list[object]:
    """Every (backend, program) pair the suite runs: all of them but an ``isolated_only`` program on the local
    backend, which would harm the host there (its ``local_note`` says how). That pair is never generated, so no
    test is skipped."""
    pairs = []
    for backend in BACKENDS:
        name, marks = (backend.values[0], backend.marks) if hasattr(backend, "values") else (backend, ())
        pairs += [pytest.param(name, hostile, marks=marks, id=f"{name}-{hostile.name}")
                  for hostile in HOSTILE if not (hostile.isolated_only and name == "local")]
    return pairs


# `executor` is the module's shared fixture: parametrizing it indirectly, at module scope, keeps one executor per
# backend for the whole module, as its plain parametrization does.
@pytest.mark.parametrize(("executor", "hostile"), _backend_programs(), indirect=["executor"], scope="module")
def test_hostile_program(executor: Executor, bait: HostBait, hostile: Hostile) -> None:
    backend = executor.backend

    def expected() -> int:
        return warm_harness_processes(executor)

    assert settled_harness_processes(executor, expected()) == expected()
    bait.received.clear()

    report = executor.run(hostile.render(**bait.params()), [hostile.test])

    status = report.outcomes[0].status
    assert status in acceptable(hostile, backend), (status, report.outcomes[0].message, report.error)
    assert report.passed == (status == "passed") and report.total == 1
    # An overrun shows in the verdict, whatever the clock said.
    assert report.timed_out == (status == "timeout")
    assert len(report.stdout) < HOSTILE_LIMITS.output_bytes + 100
    assert len(report.stderr) < HOSTILE_LIMITS.output_bytes + 100
    # The host is untouched where the backend promises it; locally without root the write lands, as documented.
    escaped = bait.host_dir / "escaped.txt"
    wrote = backend == "local" and not RUN_AS_ROOT and hostile.name == "write_outside_workdir"
    assert escaped.exists() == wrote
    escaped.unlink(missing_ok=True)  # so the next program starts from an untouched host
    if backend in ISOLATED:
        time.sleep(0.05)
        assert bait.received == [], "a sandboxed program reached a host socket"
    # Nothing left running: locally no harness process at all, in Docker and bwrap only the warm sandboxes' own.
    assert settled_harness_processes(executor, expected()) == expected()
    # Still healthy for the next call.
    follow_up = executor.run(HEALTHY, ["assert f(1) == 2", "assert f(2) == 4"])
    assert [o.status for o in follow_up.outcomes] == ["passed", "failed"], follow_up


def test_local_network_weakness_is_as_documented(bait: HostBait) -> None:
    """The local backend does not isolate the network: a program reaches the host's loopback (documented)."""
    from llm_marl_envs.sandbox import make_executor

    program = next(h for h in HOSTILE if h.name == "network_host_loopback")
    with make_executor("local", HOSTILE_LIMITS) as local:
        bait.received.clear()
        report = local.run(program.render(**bait.params()), [program.test])
    assert report.outcomes[0].status == "passed"
    deadline = time.monotonic() + 2
    while not bait.received and time.monotonic() < deadline:
        time.sleep(0.02)
    assert bait.received == [b"escaped"]
