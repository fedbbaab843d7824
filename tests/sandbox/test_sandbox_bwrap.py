"""bwrap backend on the real tool: hardening seen from inside, pool recycling, nothing outliving its process.

Without a working ``bwrap`` these fail under CI/LLM_MARL_REQUIRE_DOCKER=1 and are skipped elsewhere (see
sandbox_fixtures).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_fixtures import HARNESS_MARKER, HOSTILE_LIMITS, need_bwrap

from llm_marl_envs.sandbox import make_executor
from llm_marl_envs.sandbox.bwrap_backend import BwrapExecutor, _interpreter_dirs, interpreter

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import os
def probe():
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
    writable = []
    for folder in ("/", "/etc", "/usr", "/dev", "/proc/sys"):
        try:
            open(folder.rstrip("/") + "/escape", "w")
            writable.append(folder)
        except OSError:
            pass
    interfaces = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    return [os.getuid(), status["CapEff"].strip(), status["NoNewPrivs"].strip(), writable, interfaces, len(pids),
            sorted(os.listdir("/tmp")), os.uname().nodename, sorted(os.environ)]
"""


@pytest.fixture(scope="module")
def bwrap_executor() -> Iterator[BwrapExecutor]:
    need_bwrap()
    ex = make_executor("bwrap", HOSTILE_LIMITS, pool_size=1)
    assert isinstance(ex, BwrapExecutor)
    yield ex
    ex.close()


def test_sandbox_hardening_seen_from_inside(bwrap_executor: BwrapExecutor, tmp_path: Path) -> None:
    sandbox_uid = 65534 if os.geteuid() == 0 else os.geteuid()
    tests = [
        f"assert probe()[0] == {sandbox_uid}",  # nobody when the host runs as root
        "assert probe()[1] == '0000000000000000'",  # no effective capabilities
        "assert probe()[2] == '1'",  # no_new_privs
        "assert probe()[3] == []",  # nothing writable but /tmp
        "assert probe()[4] == ['lo']",  # a loopback of its own, nothing else
        "assert probe()[5] == 4",  # bwrap's init, supervisor, judge, program: nothing left from earlier runs
        "assert probe()[6] == []",  # /tmp wiped between runs, and the host's /tmp is not there
        "assert probe()[7] == 'sandbox'",
        "assert probe()[8] == ['HOME', 'LANG', 'PATH', 'PWD', 'TMPDIR']",  # no secrets inherited
    ]
    (tmp_path / "host-temp-file").write_text("x")
    bwrap_executor.run("open('/tmp/leftover', 'w').write('x')\ndef f():\n    return 1", ["assert f() == 1"])
    report = bwrap_executor.run(PROBE, tests)
    assert [o.status for o in report.outcomes] == ["passed"] * len(tests), report.outcomes


def test_only_system_folders_and_the_interpreter_are_visible(bwrap_executor: BwrapExecutor) -> None:
    """The project, the host's /var, /home, /run... do not exist inside; /usr does, read-only. A home folder shows
    only the way to the interpreter when it lives there (pyenv's ~/.pyenv, say)."""
    code = "import os\ndef listing(path):\n    return sorted(os.listdir(path)) if os.path.isdir(path) else None\n"
    interpreter_dirs = _interpreter_dirs(interpreter())

    def expected(path: str) -> list[str] | None:
        """What a listing of ``path`` may show: only the next step towards the interpreter, if it lies below."""
        steps = sorted({d[len(path) + 1 :].split("/")[0] for d in interpreter_dirs if d.startswith(path + "/")})
        return steps or None

    hidden = [str(REPO), str(Path.home()), "/var", "/home", "/run", "/srv", "/mnt", "/opt", "/media", "/boot"]
    tests = [f"assert listing({path!r}) == {expected(path)!r}" for path in hidden
             if not any(d == path or path.startswith(d + "/") for d in interpreter_dirs)]
    tests.append("assert 'python3' in listing('/usr/bin')")
    report = bwrap_executor.run(code, tests)
    assert [o.status for o in report.outcomes] == ["passed"] * len(tests), report.outcomes


def test_pool_recycles_after_timeout_and_max_uses() -> None:
    need_bwrap()
    with make_executor("bwrap", HOSTILE_LIMITS, pool_size=1, max_uses=3) as executor:
        assert isinstance(executor, BwrapExecutor)
        for _ in range(3):
            assert executor.run("def f():\n    return 1", ["assert f() == 1"]).all_passed
        assert executor.recycled == 1 and executor.live_sandboxes() == 0  # retired after 3 uses
        assert executor.run("def f():\n    return 1", ["assert f() == 1"]).all_passed
        assert executor.live_sandboxes() == 1
        executor.run("def f():\n    while True:\n        pass", ["assert f() == 1"])
        assert executor.recycled == 2 and executor.live_sandboxes() == 0  # a timeout retires the sandbox


def _processes_with(marker: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline and HARNESS_MARKER in cmdline:
                found.append(int(entry))
    return found


WARM_AND_DIE = (
    "import os, signal\n"
    "from llm_marl_envs.sandbox import make_executor\n"
    "ex = make_executor('bwrap', pool_size=2)\n"
    "ex.warm()\n"
    "assert ex.run('def f():\\n    return 1', ['assert f() == 1']).all_passed\n"
    "print(ex.instance, flush=True)\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)


def test_sandboxes_die_with_the_process_that_started_them() -> None:
    """SIGKILL gives the executor no chance to clean up: the sandboxes must go by themselves."""
    need_bwrap()
    done = subprocess.run([sys.executable, "-c", WARM_AND_DIE], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert done.returncode == -signal.SIGKILL, done.stderr
    instance = done.stdout.split()[0].encode()
    deadline = time.monotonic() + 5
    while _processes_with(instance) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(instance) == []


def test_sandboxes_outlive_the_threads_that_needed_them(bwrap_executor: BwrapExecutor) -> None:
    """Sandboxes started for run_many's worker threads stay usable after those threads end (bwrap's
    --die-with-parent follows the thread that started it, so one long-lived thread starts them all)."""
    from llm_marl_envs.sandbox import TestJob

    jobs = [TestJob(f"def f():\n    return {i}\n", [f"assert f() == {i}"]) for i in range(4)]
    with make_executor("bwrap", HOSTILE_LIMITS, pool_size=4) as executor:
        assert all(r.all_passed for r in executor.run_many(jobs, max_workers=4))
        time.sleep(0.3)
        assert all(r.all_passed and not r.details for r in executor.run_many(jobs, max_workers=1))
        assert executor.recycled == 0


def test_command_binds_nothing_writable_and_runs_without_the_tmp_cap() -> None:
    """The command line itself: no read-write bind of a host path, no network; and the variant for bubblewrap before
    0.7 (no ``--size``) still starts a sandbox."""
    need_bwrap()
    from llm_marl_envs.sandbox import SandboxLimits
    from llm_marl_envs.sandbox.bwrap_backend import bwrap_command, find_bwrap

    bwrap, python = find_bwrap(), interpreter()
    assert bwrap is not None
    program = [python, "-I", "-S", "-c", "print('ok')"]
    command = bwrap_command(bwrap, SandboxLimits(), program, as_root=os.geteuid() == 0)
    assert "--bind" not in command and "--dev-bind" not in command and "--share-net" not in command
    assert {"--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session"} <= set(command)
    assert command[command.index("--size") + 1] == str(16 * 1024 * 1024) and command[-len(program):] == program
    uncapped = bwrap_command(bwrap, SandboxLimits(), program, as_root=os.geteuid() == 0, cap_tmp=False)
    assert "--size" not in uncapped
    done = subprocess.run(uncapped, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
