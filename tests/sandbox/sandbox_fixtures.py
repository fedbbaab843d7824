"""Fixtures and helpers of the sandbox tests: executors per backend, and a host with things a program must not reach.

Docker tests need a running engine and the sandbox image; bwrap tests need a working ``bwrap``. Where ``CI`` is set or
``LLM_MARL_REQUIRE_DOCKER=1`` (scripts/test.sh sets it) their absence FAILS those tests (CI's set-up installs all
three); elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from llm_marl_envs.sandbox import Executor, SandboxLimits, make_executor
from llm_marl_envs.sandbox.backends import docker_available
from llm_marl_envs.sandbox.bwrap_backend import bwrap_status

HOSTILE_LIMITS = SandboxLimits(timeout_s=1.5, memory_mb=256)
HARNESS_MARKER = b"supervisor_main()"
SECRET_ENV = "LLM_MARL_SANDBOX_TEST_SECRET"


def docker_required() -> bool:
    """Whether a missing engine must fail the Docker tests instead of skipping them."""
    return bool(os.environ.get("CI")) or os.environ.get("LLM_MARL_REQUIRE_DOCKER") == "1"


def need_docker() -> None:
    """Fail (CI) or skip (elsewhere) when no engine with the sandbox image answers."""
    if docker_available():
        return
    reason = "no Docker engine with the sandbox image (`llm-marl sandbox build-image`)"
    if docker_required():
        pytest.fail(f"{reason}, and CI/LLM_MARL_REQUIRE_DOCKER demands the real engine")
    pytest.skip(reason)


def need_bwrap() -> None:
    """Fail (CI) or skip (elsewhere) when ``bwrap`` cannot start a sandbox here."""
    usable, reason = bwrap_status()
    if usable:
        return
    if docker_required():
        pytest.fail(f"{reason}, and CI/LLM_MARL_REQUIRE_DOCKER demands every sandbox backend (scripts/setup.sh "
                    "installs bubblewrap)")
    pytest.skip(reason)


BACKENDS = [pytest.param("docker", marks=pytest.mark.docker), "bwrap", "local"]
ISOLATED = ("docker", "bwrap")
"""The backends that isolate the host (network, file system, processes); local does not."""
PROCESSES_PER_SANDBOX = {"docker": 2, "bwrap": 3}
"""Harness processes a warm sandbox shows on the host: Docker's init (its command line holds ours) and the supervisor;
bwrap's outer process, its init in the new PID namespace and the supervisor."""


@pytest.fixture(scope="module", params=BACKENDS)
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """One executor per backend for the whole module, with short limits.

    The local backend's work dirs go under a temporary root of this run, so :func:`harness_processes` can tell this
    run's harness processes (their command line names the work dir) from another test run's on the same host.
    """
    if request.param in ISOLATED:
        (need_docker if request.param == "docker" else need_bwrap)()
        ex = make_executor(request.param, HOSTILE_LIMITS)
        yield ex
        ex.close()
        return
    root = tempfile.mkdtemp(prefix="llm-marl-sandbox-tests-")
    os.chmod(root, 0o755)  # the judge and program run as nobody when we are root: they must reach their work dir
    previous, tempfile.tempdir = tempfile.tempdir, root
    ex = make_executor("local", HOSTILE_LIMITS)
    try:
        yield ex
    finally:
        ex.close()
        tempfile.tempdir = previous
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def docker_executor() -> Iterator[Executor]:
    """A Docker executor (fails in CI, skips elsewhere, when there is no engine)."""
    need_docker()
    ex = make_executor("docker", HOSTILE_LIMITS, pool_size=2)
    yield ex
    ex.close()


@dataclass
class HostBait:
    """Things on the host a sandboxed program must not reach: a TCP server, a secret file, a dir, an env var."""

    port: int
    host_ip: str
    secret_file: Path
    host_dir: Path
    received: list[bytes] = field(default_factory=list)

    def params(self) -> dict[str, object]:
        """Template values for :meth:`Hostile.render`."""
        return {
            "port": self.port,
            "host_ip": self.host_ip,
            "host_file": self.secret_file,
            "host_public_file": Path(__file__).resolve(),
            "host_dir": self.host_dir,
            "secret_env": SECRET_ENV,
        }


def _outside_ip() -> str:
    """An address of this host that is not loopback (the route out), for the 'egress' programs."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))
        return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


@pytest.fixture(scope="module")
def bait() -> Iterator[HostBait]:
    """A listening TCP server on all interfaces, a 0600 secret file and a 0755 dir (root-owned when run as root)."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    server.settimeout(0.2)
    scratch = Path(tempfile.mkdtemp(prefix="llm-marl-bait-"))
    scratch.chmod(0o755)
    secret = scratch / "secret.txt"
    secret.write_text("host secret")
    secret.chmod(0o600)
    host_dir = scratch / "dir"
    host_dir.mkdir(mode=0o755)
    found = HostBait(server.getsockname()[1], _outside_ip(), secret, host_dir)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.settimeout(1)
            try:
                found.received.append(conn.recv(1024))
            except OSError:
                found.received.append(b"")
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    old = os.environ.get(SECRET_ENV)
    os.environ[SECRET_ENV] = "env secret"
    yield found
    stop.set()
    thread.join(2)
    server.close()
    if old is None:
        os.environ.pop(SECRET_ENV, None)
    secret.unlink(missing_ok=True)
    for leftover in host_dir.iterdir():
        leftover.unlink()
    host_dir.rmdir()
    scratch.rmdir()


def harness_processes(executor: Executor) -> int:
    """Processes on this host running the sandbox harness for ``executor``.

    Other test runs on the same host (another checkout, a parallel session) run harness processes too; counting
    those made "nothing left behind" fail for processes that were never ours. Ours are, locally, those whose command
    line names a work dir under this run's temporary root (a forked child keeps its parent's command line); with
    bwrap, those whose command line carries this executor's instance id (in the supervisor's config); on Docker,
    those in a container of this executor (its cgroup names the container), retired ones included until they are
    removed.
    """
    if executor.backend == "bwrap":
        instance = executor.instance.encode()  # type: ignore[attr-defined]

        def mine(pid: str, cmdline: bytes) -> bool:
            return instance in cmdline
    elif executor.backend == "docker":
        from llm_marl_envs.sandbox.docker_backend import LABEL
        from llm_marl_envs.sandbox.image import docker_client

        instance = executor.instance  # type: ignore[attr-defined]
        ours = [c.id for c in docker_client().containers.list(all=True, filters={"label": f"{LABEL}={instance}"})]

        def mine(pid: str, cmdline: bytes) -> bool:
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
            return any(container in cgroup for container in ours)
    else:
        root = tempfile.gettempdir().encode()

        def mine(pid: str, cmdline: bytes) -> bool:
            return root in cmdline

    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                count += HARNESS_MARKER in cmdline and mine(entry, cmdline)
            except OSError:  # the process left while we looked
                continue
    return count


def warm_harness_processes(executor: Executor) -> int:
    """How many harness processes ``executor`` shows between runs: none locally, a fixed number per warm sandbox."""
    per_sandbox = PROCESSES_PER_SANDBOX.get(executor.backend, 0)
    return per_sandbox * executor.live_sandboxes() if per_sandbox else 0  # type: ignore[attr-defined]


def settled_harness_processes(executor: Executor, expected: int, wait_s: float = 3.0) -> int:
    """``executor``'s harness process count once it equals ``expected`` (killed processes take a moment to leave
    /proc)."""
    deadline = time.monotonic() + wait_s
    count = harness_processes(executor)
    while count != expected and time.monotonic() < deadline:
        time.sleep(0.05)
        count = harness_processes(executor)
    return count
