"""bwrap backend: isolation without Docker, from bubblewrap's namespaces (Debian/Ubuntu package ``bubblewrap``).

Each sandbox is one long-lived ``bwrap`` process running the harness supervisor (``python3 -I -S -c <harness>``),
kept in a warm pool like the Docker backend's containers (:mod:`~llm_marl_envs.sandbox.pool`), so a run costs a
fork inside a sandbox that is already up. What a sandbox gets:

* no network: its own network namespace, with only a loopback of its own (the host's listeners are out of reach);
* its own PID, IPC, UTS (hostname ``sandbox``) and, where the kernel allows, cgroup namespaces: a program sees only
  the sandbox's processes, and the supervisor's ``kill(-1)`` sweep between runs reaches nothing outside;
* a file system of its own: an empty root with the host's system directories (``/usr`` and its ``/bin``, ``/lib``…
  links), the Python interpreter's own tree and the dynamic loader's cache bound **read-only**; a fresh
  ``/proc`` and a minimal ``/dev``; a private ``/tmp`` (tmpfs of ``file_mb``, the work dir, emptied between runs);
  then the root and ``/dev`` are remounted read-only, so ``/tmp`` is the only writable place. Home folders, the
  project, other users' files, the host's ``/tmp`` and ``/var`` do not exist inside;
* an environment stripped to PATH/LANG/HOME/TMPDIR, a new session (no terminal to inject into), and the sandbox
  dies with the process that started it;
* the harness's rlimits (``RLIMIT_AS``/``CPU``/``FSIZE``/``NPROC``/``CORE``) on the judge and program processes.

Run as root, ``bwrap`` keeps root's user (no user namespace, which would map the sandbox user to root) but drops
every capability except ``CAP_SETUID``/``CAP_SETGID``/``CAP_KILL``, with which the supervisor drops the judge and the
program to ``nobody`` (uid 65534, no capabilities) and sweeps them after each run. As any other user, ``bwrap`` runs
unprivileged in a user namespace (the kernel must allow unprivileged user namespaces): everything inside runs as
that user, who owns nothing the sandbox can see but ``/tmp``.

What it does not do, against Docker: no memory cgroup (``RLIMIT_AS`` bounds each process's address space instead),
no CPU quota (``RLIMIT_CPU`` bounds CPU seconds), and ``/tmp`` is not ``noexec``. The host's system directories are
visible read-only, so a program can read what any user may read there.

Orphans: a sandbox whose host process dies sees its stdin close and exits, and ``--die-with-parent`` kills it even
when its supervisor is stuck, so nothing outlives the executor's process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llm_marl_envs.sandbox.harness import harness_source
from llm_marl_envs.sandbox.local import NOBODY, process_count
from llm_marl_envs.sandbox.pool import MAX_SUPERVISOR_STDERR, WarmPoolExecutor
from llm_marl_envs.sandbox.protocol import take_frame
from llm_marl_envs.sandbox.types import SandboxError, SandboxLimits

INSTALL_HINT = (
    "install bubblewrap: `sudo apt-get install bubblewrap` (Debian/Ubuntu), `sudo dnf install bubblewrap` (Fedora), "
    "`sudo pacman -S bubblewrap` (Arch)"
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host directories bound read-only (or recreated as the same symlink, on merged-/usr systems)."""
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
"""The only entries of the host's ``/etc`` a sandbox sees: what the dynamic loader and ``time.localtime`` read."""
ROOT_CAPABILITIES = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL")
"""What the supervisor keeps when ``bwrap`` runs as root: to drop the judge and program to ``nobody`` and sweep them."""
SANDBOX_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp"}
_PROBE_TIMEOUT_S = 30.0
# The processes above the judge in a sandbox of an unprivileged user: bwrap's init and the supervisor. In a user
# namespace RLIMIT_NPROC counts only the namespace's processes of that user.
_SANDBOX_OVERHEAD_PROCESSES = 4


def find_bwrap() -> str | None:
    """The ``bwrap`` executable on ``PATH``, or None."""
    return shutil.which("bwrap")


def interpreter() -> str:
    """The Python interpreter the sandbox runs: the host's own, outside any virtual environment (the harness needs the
    standard library only)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _interpreter_dirs(python: str) -> list[str]:
    """Directories holding the interpreter and its standard library that the system directories do not cover."""
    wanted = {os.path.realpath(path) for path in (sys.base_prefix, sys.base_exec_prefix, os.path.dirname(python))}
    covered = [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    dirs = sorted(d for d in wanted if not any(d == c or d.startswith(c + "/") for c in covered))
    # Keep only the outermost of nested directories (a prefix and its bin/).
    return [d for d in dirs if not any(d != o and d.startswith(o + "/") for o in dirs)]


def tmpfs_size_option(bwrap: str) -> bool:
    """Whether this ``bwrap`` caps a tmpfs's size (``--size``, bubblewrap 0.7+; Ubuntu 22.04 ships 0.6)."""
    return _help_text(bwrap).find("--size") >= 0


@functools.lru_cache(maxsize=8)
def _help_text(bwrap: str) -> str:
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def bwrap_command(
    bwrap: str, limits: SandboxLimits, program: Sequence[str], *, as_root: bool, python: str | None = None,
    cap_tmp: bool = True,
) -> list[str]:
    """The ``bwrap`` command line that runs ``program`` (its argv, starting with the interpreter) in a sandbox.

    ``cap_tmp``: give the private ``/tmp`` a size (``file_mb``); bubblewrap before 0.7 cannot, and then only each
    file's size is capped (``RLIMIT_FSIZE``), and what one run writes is freed when the run ends.
    """
    python = python or interpreter()
    command = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if as_root:
        command += ["--cap-drop", "ALL"]
        for capability in ROOT_CAPABILITIES:
            command += ["--cap-add", capability]
    else:
        command += ["--unshare-user"]
    command += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            command += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            command += ["--ro-bind", path, path]
    for path in ETC_FILES:
        if os.path.exists(path):
            command += ["--ro-bind", path, path]
    made: set[str] = set()
    for path in _interpreter_dirs(python):
        # Parents that exist only to reach the interpreter (e.g. /root/.pyenv, 0700 on the host) are made 0755, so the
        # judge and program (as nobody) can import the standard library's modules that were not preloaded.
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            if parent not in made and not any(parent == d or parent.startswith(d + "/") for d in SYSTEM_DIRS):
                command += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        command += ["--ro-bind", path, path]
    command += ["--proc", "/proc", "--dev", "/dev"]
    size = ["--size", str(limits.file_mb * 1024 * 1024)] if cap_tmp else []
    command += ["--perms", "1777", *size, "--tmpfs", "/tmp"]
    # Last: nothing but /tmp stays writable (an unprivileged user owns the sandbox's root and /dev tmpfs otherwise).
    command += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp", *program]
    return command


_WORKING: set[tuple[str, bool, str]] = set()
"""(bwrap, as root, interpreter) combinations that started a sandbox in this process (failures are tried again)."""


def _probe(bwrap: str, as_root: bool, python: str) -> str | None:
    """Start a sandbox that prints ``ok``: None when it works, else why not."""
    if (bwrap, as_root, python) in _WORKING:
        return None
    command = bwrap_command(bwrap, SandboxLimits(), [python, "-I", "-S", "-c", "print('ok')"], as_root=as_root,
                            python=python, cap_tmp=tmpfs_size_option(bwrap))
    try:
        done = subprocess.run(command, capture_output=True, timeout=_PROBE_TIMEOUT_S, env=SANDBOX_ENV)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not start a sandbox: {exc}"
    if done.returncode == 0 and done.stdout.strip() == b"ok":
        _WORKING.add((bwrap, as_root, python))
        return None
    said = done.stderr.decode("utf-8", "replace").strip()[-300:] or f"exit status {done.returncode}"
    hint = "" if as_root else (
        " (bwrap needs unprivileged user namespaces: they may be disabled by the kernel, e.g. "
        "`sysctl kernel.unprivileged_userns_clone=0` or an AppArmor restriction, or inside an unprivileged container)"
    )
    return f"{bwrap} is installed but could not start a sandbox: {said}{hint}"


def bwrap_status() -> tuple[bool, str]:
    """Whether a ``bwrap`` sandbox can run here, and why (or why not)."""
    bwrap = find_bwrap()
    if bwrap is None:
        return False, f"bwrap is not installed (or not on PATH): {INSTALL_HINT}"
    problem = _probe(bwrap, os.geteuid() == 0, interpreter())
    if problem is not None:
        return False, problem
    return True, f"{bwrap} starts sandboxes"


class BwrapSandbox:
    """One long-lived ``bwrap`` sandbox and its supervisor, talked to over pipes."""

    def __init__(self, command: list[str]) -> None:
        self.uses = 0
        self.stdout = self.stderr = b""
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=SANDBOX_ENV,
            start_new_session=True, close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self._in, self._out, self._err = self.proc.stdin.fileno(), self.proc.stdout.fileno(), self.proc.stderr.fileno()
        for fd in (self._in, self._out, self._err):
            os.set_blocking(fd, False)
        self._readers = {self._out, self._err}

    def exchange(self, request: bytes, deadline: float) -> bytes | None:
        """Send one job and return the supervisor's answer frame (None if it hung up); raises TimeoutError."""
        self.uses += 1
        self._send(request, deadline)
        while True:
            answer, self.stdout = take_frame(self.stdout)
            if answer is not None:
                return answer
            if len(self.stderr) > MAX_SUPERVISOR_STDERR or not self._read(deadline):
                return None

    def _wait(self, fds: list[int], events: int, deadline: float) -> list[int]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the sandbox did not answer in time")
        poller = select.poll()
        for fd in fds:
            poller.register(fd, events)
        return [fd for fd, _ in poller.poll(remaining * 1000)]

    def _send(self, data: bytes, deadline: float) -> None:
        # A job of megabytes does not fit the pipe: write as the supervisor reads, never past the deadline.
        view = memoryview(data)
        while view:
            if self._wait([self._in], select.POLLOUT, deadline):
                with contextlib.suppress(BlockingIOError):
                    view = view[os.write(self._in, view) :]

    def _read(self, deadline: float) -> bool:
        """Read what the supervisor wrote (stdout into the frame buffer, stderr aside); False once stdout closed."""
        while True:
            ready = self._wait(sorted(self._readers), select.POLLIN, deadline)
            got_stdout = False
            for fd in ready:
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if fd == self._out:
                    if not chunk:
                        return False
                    self.stdout += chunk
                    got_stdout = True
                elif chunk:
                    self.stderr += chunk
                else:
                    self._readers.discard(fd)
            if got_stdout or len(self.stderr) > MAX_SUPERVISOR_STDERR:
                return True

    def destroy(self) -> None:
        """Kill the sandbox (``--die-with-parent`` takes everything inside with it) and close the pipes."""
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                kill(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()


class BwrapExecutor(WarmPoolExecutor):
    """Runs jobs in a warm pool of ``bwrap`` sandboxes (see the module docstring)."""

    backend = "bwrap"

    def __init__(
        self, limits: SandboxLimits | None = None, *, pool_size: int | None = None, max_uses: int = 200
    ) -> None:
        self.limits = limits if limits is not None else SandboxLimits()
        usable, reason = bwrap_status()
        if not usable:
            raise SandboxError(f"backend='bwrap' cannot run here: {reason}")
        self.bwrap = find_bwrap() or "bwrap"
        self.as_root = os.geteuid() == 0
        self.instance = uuid.uuid4().hex
        # The instance id in the config marks this executor's processes on the host (tests count them by it).
        config: dict[str, Any] = {"workdir": "/tmp", "sweep_all": True, "sandbox": self.instance}
        if self.as_root:
            config.update(drop_uid=NOBODY, drop_gid=NOBODY)
        python = interpreter()
        program = [python, "-I", "-S", "-c", harness_source(), json.dumps(config)]
        self.tmp_capped = tmpfs_size_option(self.bwrap)
        if not self.tmp_capped:
            warnings.warn(f"{self.bwrap} is older than bubblewrap 0.7 and cannot cap the sandbox's /tmp: a program may "
                          "fill memory with files until its run ends (each file stays under file_mb)", UserWarning,
                          stacklevel=3)
        self.command = bwrap_command(self.bwrap, self.limits, program, as_root=self.as_root, python=python,
                                     cap_tmp=self.tmp_capped)
        # --die-with-parent is PR_SET_PDEATHSIG, which fires when the *thread* that started bwrap ends: sandboxes
        # started from run_many's worker threads died with them. One long-lived thread starts them all.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bwrap-spawner")
        self._start_pool(pool_size or 2 * (os.cpu_count() or 2), max_uses)

    def _new_sandbox(self) -> BwrapSandbox:
        return self._spawner.submit(BwrapSandbox, self.command).result()

    def close(self) -> None:
        """Stop every sandbox of this executor and its spawner thread."""
        super().close()
        self._spawner.shutdown(wait=False)

    def _prepare_job(self, job: dict[str, Any]) -> dict[str, Any]:
        # As root the judge and program run as nobody in the host's user namespace, where RLIMIT_NPROC counts every
        # process of nobody on the host: the limit sits above what nobody already runs. In a user namespace it counts
        # the namespace's processes only: bwrap's init, the supervisor and the judge come on top of the program's.
        base = process_count(NOBODY) if self.as_root else _SANDBOX_OVERHEAD_PROCESSES
        return {**job, "nproc": base + int(job["nproc"])}
