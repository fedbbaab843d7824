"""Docker backend on the real engine: hardening seen from outside and inside, pool recycling, orphan cleanup, CLI.

Without an engine these fail under CI/LLM_MARL_REQUIRE_DOCKER=1 and are skipped elsewhere (see sandbox_fixtures).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest
from sandbox_fixtures import HOSTILE_LIMITS, need_docker

from llm_marl_envs.sandbox import DEFAULT_IMAGE, Executor, SandboxError, make_executor
from llm_marl_envs.sandbox.docker_backend import LABEL, OWNER_LABEL, DockerExecutor, owner_tag, remove_orphans
from llm_marl_envs.sandbox.image import docker_client

pytestmark = pytest.mark.docker

PROBE = """
import os
def probe():
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
    try:
        open("/etc/escape", "w")
        root_writable = True
    except OSError:
        root_writable = False
    interfaces = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    return [os.getuid(), os.getgid(), status["CapEff"].strip(), status["NoNewPrivs"].strip(), root_writable,
            interfaces, len(pids), sorted(os.listdir("/tmp")), os.path.exists("/dev/shm")]
"""


def test_container_hardening_seen_from_inside(docker_executor: Executor) -> None:
    tests = [
        "assert probe()[0:2] == [65534, 65534]",
        "assert probe()[2] == '0000000000000000'",  # no effective capabilities
        "assert probe()[3] == '1'",  # no_new_privs
        "assert probe()[4] is False",  # read-only root
        "assert probe()[5] == ['lo']",  # no network but loopback
        "assert probe()[6] == 4",  # init, supervisor, judge, program: nothing left from earlier runs
        "assert probe()[7] == []",  # /tmp wiped between runs
        "assert probe()[8] is False",  # no /dev/shm (ipc none)
    ]
    docker_executor.run("open('/tmp/leftover', 'w').write('x')\ndef f():\n    return 1", ["assert f() == 1"])
    report = docker_executor.run(PROBE, tests)
    assert [o.status for o in report.outcomes] == ["passed"] * len(tests), report.outcomes


def test_container_hardening_seen_from_outside(docker_executor: DockerExecutor) -> None:
    docker_executor.run("def f():\n    return 1", ["assert f() == 1"])
    client = docker_client()
    mine = client.containers.list(filters={"label": f"{LABEL}={docker_executor.instance}"})
    assert mine, "the executor should hold a warm container"
    attrs = mine[0].attrs
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] and host["Init"]
    assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
    assert host["Memory"] == host["MemorySwap"] > 0 and host["PidsLimit"] == HOSTILE_LIMITS.max_processes + 8
    assert host["NanoCpus"] == 1_000_000_000 and host["IpcMode"] == "none" and "/tmp" in host["Tmpfs"]
    assert attrs["Config"]["User"] == "65534:65534"
    assert attrs["Config"]["Labels"][OWNER_LABEL] == owner_tag()


def test_pool_recycles_after_timeout_and_max_uses() -> None:
    need_docker()
    with make_executor("docker", HOSTILE_LIMITS, pool_size=1, max_uses=3) as executor:
        assert isinstance(executor, DockerExecutor)
        for _ in range(3):
            assert executor.run("def f():\n    return 1", ["assert f() == 1"]).all_passed
        assert executor.recycled == 1 and executor.live_containers() == 0  # retired after 3 uses
        assert executor.run("def f():\n    return 1", ["assert f() == 1"]).all_passed
        assert executor.live_containers() == 1
        executor.run("def f():\n    while True:\n        pass", ["assert f() == 1"])
        assert executor.recycled == 2 and executor.live_containers() == 0  # a timeout retires the container
    client = docker_client()
    assert client.containers.list(all=True, filters={"label": f"{LABEL}={executor.instance}"}) == []


def test_orphans_of_dead_owners_are_removed_and_live_ones_kept() -> None:
    need_docker()
    client = docker_client()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_owner = owner_tag().rsplit("|", 1)[0] + "|" + dead.stdout.strip()
    made = []
    for owner in (dead_owner, owner_tag()):
        labels = {LABEL: "test", OWNER_LABEL: owner}
        made.append(client.containers.create(DEFAULT_IMAGE, ["sleep", "60"], labels=labels))
    try:
        removed = remove_orphans(client)
        assert made[0].id in removed and made[1].id not in removed
        with DockerExecutor(HOSTILE_LIMITS, pool_size=1) as executor:  # start-up cleanup never touches live owners
            assert made[1].id not in executor.orphans_removed
        assert made[1].id in {c.id for c in client.containers.list(all=True, filters={"label": LABEL})}
    finally:
        for container in made:
            with contextlib.suppress(Exception):
                container.remove(force=True)


def test_missing_image_is_a_clear_error() -> None:
    need_docker()
    with pytest.raises(SandboxError, match="build-image"):
        make_executor("docker", image="llm-marl-envs/sandbox:does-not-exist")


def test_cli_check_runs_the_self_test() -> None:
    need_docker()
    done = subprocess.run(
        [sys.executable, "-m", "llm_marl_benchmarks.cli", "sandbox", "check"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "engine: Docker" in done.stdout and "self-test: ok" in done.stdout


def test_build_image_from_a_base_image() -> None:
    """The registry route (`--base-image`) on an image the engine already has (no registry here)."""
    need_docker()
    from llm_marl_envs.sandbox.image import IMAGE_LABEL, build_image

    tag = "llm-marl-envs/sandbox:test-from-base"
    client = docker_client()
    try:
        build_image(tag, base_image=DEFAULT_IMAGE, log=lambda *_: None)
        assert client.images.get(tag).labels[IMAGE_LABEL].startswith("from-")
        with make_executor("docker", HOSTILE_LIMITS, image=tag, pool_size=1) as executor:
            assert executor.run("def f():\n    return 1", ["assert f() == 1"]).all_passed
    finally:
        client.images.remove(tag, force=True)


def test_auto_backend_prefers_docker() -> None:
    need_docker()
    with make_executor("auto", HOSTILE_LIMITS, pool_size=1) as executor:
        assert executor.backend == "docker"


def _owned_by(client: object, pid: int) -> set[str]:
    """Ids of sandbox containers made by process ``pid`` of this host."""
    containers = client.api.containers(all=True, filters={"label": LABEL})  # type: ignore[attr-defined]
    return {c["Id"] for c in containers if (c.get("Labels") or {}).get(OWNER_LABEL, "").endswith(f"|{pid}")}


RUN_AND_EXIT = (
    "import os, signal, sys\n"
    "from llm_marl_envs.sandbox import make_executor\n"
    "ex = make_executor('docker', pool_size=2)\n"
    "ex.warm()\n"
    "assert ex.run('def f():\\n    return 1', ['assert f() == 1']).all_passed\n"
    "print(os.getpid(), flush=True)\n"
    "if sys.argv[1] == 'crash':\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
)


def test_unclosed_executor_removes_its_containers_at_exit() -> None:
    need_docker()
    done = subprocess.run([sys.executable, "-c", RUN_AND_EXIT, "exit"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _owned_by(docker_client(), int(done.stdout.split()[0])) == set()


def test_containers_of_a_crashed_process_are_removed_at_next_start() -> None:
    need_docker()
    done = subprocess.run([sys.executable, "-c", RUN_AND_EXIT, "crash"], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr
    client = docker_client()
    left = _owned_by(client, int(done.stdout.split()[0]))
    assert len(left) == 2  # SIGKILL gives no chance to clean up
    with DockerExecutor(HOSTILE_LIMITS, pool_size=1) as executor:
        assert left <= set(executor.orphans_removed)
    assert _owned_by(client, int(done.stdout.split()[0])) == set()
