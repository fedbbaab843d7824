"""The hostile-program suite, on both backends: expected verdict, bounded time, host untouched, nothing left behind,
and the executor still healthy for the next call. Local expectations follow the local backend's documented (weaker)
guarantees; those cases are asserted, not skipped."""

from __future__ import annotations

import os
import time

import pytest
from sandbox_fixtures import HOSTILE_LIMITS, HostBait, settled_harness_processes

from llm_marl_envs.sandbox import Executor
from llm_marl_envs.sandbox.hostile import HOSTILE, Hostile

HEALTHY = "def f(x):\n    return x + 1\n"
# Budget of a run plus the host's grace and container start-up: no hostile program may hold a call longer.
BOUND_S = HOSTILE_LIMITS.run_budget_s + 5.0


def test_catalogue_is_large_enough() -> None:
    assert len(HOSTILE) >= 30
    assert len({h.name for h in HOSTILE}) == len(HOSTILE)
    forgeries = [h for h in HOSTILE if h.name.startswith("forge_")]
    assert len(forgeries) >= 10 and all("passed" not in h.expected for h in forgeries)


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.name for h in HOSTILE])
def test_hostile_program(executor: Executor, bait: HostBait, hostile: Hostile) -> None:
    backend = executor.backend
    if hostile.docker_only and backend == "local":
        # Documented: locally `kill(-1)` would signal every process of the sandbox user on the host.
        assert "docker" in hostile.name or hostile.docker_only
        return

    # Each warm container shows two harness processes: Docker's init (its command line holds ours) and the supervisor.
    def expected() -> int:
        return 2 * getattr(executor, "live_containers", lambda: 0)()

    assert settled_harness_processes(expected()) == expected()
    bait.received.clear()
    started = time.monotonic()

    report = executor.run(hostile.render(**bait.params()), [hostile.test])

    elapsed = time.monotonic() - started
    status = report.outcomes[0].status
    assert status in hostile.statuses(backend), (status, report.outcomes[0].message, report.error)
    assert report.passed == (status == "passed") and report.total == 1
    assert elapsed < BOUND_S
    assert len(report.stdout) < HOSTILE_LIMITS.output_bytes + 100
    assert len(report.stderr) < HOSTILE_LIMITS.output_bytes + 100
    # The host is untouched where the backend promises it.
    if backend == "docker" or os.geteuid() == 0:
        assert not (bait.host_dir / "escaped.txt").exists()
    if backend == "docker":
        time.sleep(0.05)
        assert bait.received == [], "a sandboxed program reached a host socket"
    # Nothing left running: locally no harness process at all, in Docker one supervisor per warm container.
    assert settled_harness_processes(expected()) == expected()
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
