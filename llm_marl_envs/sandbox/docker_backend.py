"""Docker backend: hardened long-lived containers in a warm pool, each running the harness supervisor.

Each container runs ``python3 -I -S -c <harness>`` as its main process (under Docker's init) with: no network, memory
and swap limits, a pids limit, one CPU, a read-only root with a small ``noexec`` tmpfs at ``/tmp`` (the work dir),
uid/gid 65534, all capabilities dropped, ``no-new-privileges``, no IPC namespace sharing (``ipc_mode="none"``: no
``/dev/shm``), and the label ``llm_marl_envs.sandbox``. The host talks to the supervisor over the attached
stdin/stdout, so a run costs a fork inside the container instead of a ``docker run`` or ``docker exec``.

Between runs the supervisor kills every other process of the container's user (``kill(-1)``, which spares only itself
and init) and empties ``/tmp``; a read-only root and no ``/dev/shm`` leave no other writable place, so the next
program starts from the same state. A container is thrown away (and replaced lazily) after ``max_uses`` runs or on
any anomaly: a timeout, a missing or malformed verdict, processes that survived the sweep, a work dir that would not
empty, output from the supervisor on stderr.

Orphans: every container's owner label holds ``host|boot id|pid``; at start-up (and with ``llm-marl sandbox clean``)
containers whose owner process is gone (same host and boot, dead pid; or an older boot) are removed, so executors in
other live processes are never disturbed.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from llm_marl_envs.sandbox.harness import harness_source
from llm_marl_envs.sandbox.image import DEFAULT_IMAGE, docker_client, image_exists
from llm_marl_envs.sandbox.pool import MAX_SUPERVISOR_STDERR, WarmPoolExecutor
from llm_marl_envs.sandbox.protocol import take_frame
from llm_marl_envs.sandbox.types import SandboxError, SandboxLimits

LABEL = "llm_marl_envs.sandbox"
OWNER_LABEL = "llm_marl_envs.sandbox.owner"
SANDBOX_UID = "65534:65534"
# docker-py keeps one HTTP pool per URL in a small LRU and closes evicted pools even while another thread uses them
# ('NoneType' object has no attribute 'qsize' under concurrent container churn): lifecycle calls are serialized. Runs
# themselves use each container's attached socket and never take this lock.
_ENGINE_LOCK = threading.Lock()


def boot_id() -> str:
    """This machine's boot id (distinguishes a crashed run before a reboot from a live one with the same pid)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown-boot"


def owner_tag() -> str:
    """The owner label of containers made by this process."""
    return f"{socket.gethostname()}|{boot_id()}|{os.getpid()}"


def owner_is_gone(tag: str) -> bool:
    """Whether the process that made a container with this owner label cannot be alive any more."""
    try:
        host, boot, pid_text = tag.split("|")
        pid = int(pid_text)
    except ValueError:
        return True
    if host != socket.gethostname():
        return False  # another machine sharing the engine: not ours to judge
    if boot != boot_id():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def remove_orphans(client: Any | None = None, *, everything: bool = False) -> list[str]:
    """Remove sandbox containers whose owner is gone (all sandbox containers with ``everything``); return ids."""
    client = client or docker_client()
    removed = []
    # The low-level listing carries the labels without a per-container inspect, which would race with containers
    # that other executors remove meanwhile.
    with _ENGINE_LOCK:
        for summary in client.api.containers(all=True, filters={"label": LABEL}):
            if everything or owner_is_gone((summary.get("Labels") or {}).get(OWNER_LABEL, "")):
                with contextlib.suppress(Exception):
                    client.api.remove_container(summary["Id"], force=True)
                    removed.append(summary["Id"])
    return removed


class SandboxContainer:
    """One long-lived container and its attached supervisor."""

    def __init__(self, client: Any, image: str, limits: SandboxLimits, owner: str, instance: str) -> None:
        self.client, self.uses = client, 0
        memory = f"{2 * limits.memory_mb + limits.file_mb + 64}m"
        config = json.dumps({"workdir": "/tmp", "sweep_all": True})
        with _ENGINE_LOCK:
            self._create(client, image, limits, owner, instance, memory, config)
        self.stdout, self.stderr, self.pending = b"", b"", b""

    def _create(self, client: Any, image: str, limits: SandboxLimits, owner: str, instance: str, memory: str,
                config: str) -> None:
        self.container = client.containers.create(
            image,
            command=["python3", "-I", "-S", "-c", harness_source(), config],
            stdin_open=True,
            network_mode="none",
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=limits.max_processes + 8,
            nano_cpus=1_000_000_000,
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,size={limits.file_mb}m,mode=1777"},
            user=SANDBOX_UID,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            init=True,
            ipc_mode="none",
            working_dir="/tmp",
            environment={"LANG": "C.UTF-8", "HOME": "/tmp", "PATH": "/usr/local/bin:/usr/bin:/bin"},
            labels={LABEL: instance, OWNER_LABEL: owner},
            hostname="sandbox",
        )
        self.sock: Any = None
        try:
            params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            attached = client.api.attach_socket(self.container.id, params=params)
            self.sock = getattr(attached, "_sock", attached)
            self._attached = attached
            self.container.start()
        except Exception:
            self._remove()
            raise

    def exchange(self, request: bytes, deadline: float) -> bytes | None:
        """Send one job and return the supervisor's answer frame (None if it hung up); raises TimeoutError."""
        self.uses += 1
        self.sock.sendall(request)
        while True:
            answer, self.stdout = take_frame(self.stdout)
            if answer is not None:
                return answer
            if len(self.stderr) > MAX_SUPERVISOR_STDERR or not self._read_chunk(deadline):
                return None

    def _read_chunk(self, deadline: float) -> bool:
        """Read one multiplexed chunk from the attach stream (8-byte header: stream, 0, 0, 0, size)."""
        while len(self.pending) < 8 or len(self.pending) < 8 + int.from_bytes(self.pending[4:8], "big"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the sandbox did not answer in time")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError as exc:
                raise TimeoutError("the sandbox did not answer in time") from exc
            if not data:
                return False
            self.pending += data
        size = int.from_bytes(self.pending[4:8], "big")
        stream, payload, self.pending = self.pending[0], self.pending[8 : 8 + size], self.pending[8 + size :]
        if stream == 1:
            self.stdout += payload
        else:
            self.stderr += payload
        return True

    def _remove(self) -> None:
        with contextlib.suppress(Exception):
            self.container.remove(force=True)

    def destroy(self) -> None:
        """Kill and remove the container and close the attach stream (never raises)."""
        with _ENGINE_LOCK:
            self._remove()
        # The SDK's SocketIO wrapper does not close the raw socket, and the HTTP response it keeps alive holds it
        # too: close all three, or every recycled container leaks a descriptor.
        for closable in (getattr(self.sock, "_response", None), getattr(self, "_attached", None), self.sock):
            with contextlib.suppress(Exception):
                if closable is not None:
                    closable.close()


class DockerExecutor(WarmPoolExecutor):
    """Runs jobs in a warm pool of hardened containers (see the module docstring)."""

    backend = "docker"

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        image: str = DEFAULT_IMAGE,
        pool_size: int | None = None,
        max_uses: int = 200,
        client: Any | None = None,
    ) -> None:
        self.limits = limits if limits is not None else SandboxLimits()
        try:
            self.client = client or docker_client()
        except Exception as exc:
            raise SandboxError(f"no Docker engine answers ({exc}); start one, or use backend='bwrap' (bubblewrap), or "
                               "backend='local' for code you trust (no isolation)") from exc
        if not image_exists(image, self.client):
            raise SandboxError(f"the sandbox image {image!r} is missing: run `llm-marl sandbox build-image`")
        self.image = image
        self.owner, self.instance = owner_tag(), uuid.uuid4().hex
        self.orphans_removed = remove_orphans(self.client)
        self._start_pool(pool_size or 2 * (os.cpu_count() or 2), max_uses)

    def _new_sandbox(self) -> SandboxContainer:
        return SandboxContainer(self.client, self.image, self.limits, self.owner, self.instance)

    def live_containers(self) -> int:
        """How many containers this executor holds now."""
        return self.live_sandboxes()
