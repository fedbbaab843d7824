"""A catalogue of hostile programs and the verdict each must get: used by the test suite and the soak benchmark.

Every program defines (or fails to define) ``f`` and is judged by one test, usually ``assert f(1) == 2``. A program
*forging* success must never get ``passed``; a program doing damage must get a bounded verdict and leave nothing
behind. ``expected`` holds the acceptable statuses on the isolating backends (Docker and bwrap); ``local`` overrides
them for the local backend where its documented guarantee is weaker (see the local backend's docstring), with
``local_note`` saying why. ``isolated_only`` programs are never run on the local backend, because there they would harm
the host; ``local_note`` says how. Templates may use ``{host_file}`` (a 0600 secret), ``{host_public_file}`` (a
world-readable file of the host outside any temp dir), ``{host_dir}``, ``{port}``, ``{host_ip}`` and
``{secret_env}``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hostile:
    """One hostile program."""

    name: str
    code: str
    expected: frozenset[str]
    test: str = "assert f(1) == 2"
    local: frozenset[str] | None = None
    local_note: str = ""
    isolated_only: bool = False

    def render(self, **params: object) -> str:
        """The program with its ``{placeholders}`` filled in."""
        code = self.code
        for key, value in params.items():
            code = code.replace("{" + key + "}", str(value))
        return code

    def statuses(self, backend: str) -> frozenset[str]:
        """The statuses acceptable on ``backend``."""
        return self.local if backend == "local" and self.local is not None else self.expected


def _h(name: str, code: str, *expected: str, **extra: object) -> Hostile:
    return Hostile(name, code.strip() + "\n", frozenset(expected), **extra)  # type: ignore[arg-type]


_LOOP = "def f(x):\n    while True:\n        pass"
HOSTILE: tuple[Hostile, ...] = (
    # -- runaway time
    _h("infinite_loop", _LOOP, "timeout"),
    _h("infinite_loop_at_load", "while True:\n    pass\ndef f(x):\n    return x + 1", "timeout"),
    _h("loop_in_child_process", "import os\ndef f(x):\n    if os.fork() == 0:\n        while True:\n            pass\n"
       "    return x + 1", "passed"),
    _h("loop_in_thread", "import threading\ndef spin():\n    while True:\n        pass\n"
       "def f(x):\n    threading.Thread(target=spin).start()\n    return x + 1", "passed"),
    _h("ignore_sigterm", "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + _LOOP, "timeout"),
    _h("setsid_escape", "import os, time\ndef f(x):\n    if os.fork() == 0:\n        os.setsid()\n"
       "        if os.fork() == 0:\n            while True:\n                time.sleep(0.05)\n        os._exit(0)\n"
       "    return x + 1", "passed"),
    # -- resources
    _h("fork_bomb", "import os\ndef f(x):\n    while True:\n        try:\n            os.fork()\n"
       "        except OSError:\n            pass", "timeout", "error"),
    _h("memory_bomb_gradual", "def f(x):\n    hoard = []\n    while True:\n        hoard.append(bytearray(10**7))",
       "error", "timeout"),
    _h("memory_bomb_at_once", "def f(x):\n    return len(bytearray(10**11))", "error"),
    _h("disk_fill", "def f(x):\n    with open('fill.bin', 'wb') as out:\n        while True:\n"
       "            out.write(b'0' * 2**20)", "error"),
    _h("deep_recursion", "def f(x):\n    return f(x + 1)", "error"),
    _h("deep_recursion_unlimited", "import sys\nsys.setrecursionlimit(10**8)\ndef f(x):\n    return f(x + 1)",
       "error", "timeout"),
    _h("segfault_ctypes", "import ctypes\ndef f(x):\n    ctypes.string_at(0)\n    return x + 1", "error"),
    # -- output
    _h("stdout_flood", "import sys\ndef f(x):\n    sys.stdout.write('A' * (40 * 2**20))\n    return x + 1", "passed"),
    _h("stderr_flood", "import sys\ndef f(x):\n    sys.stderr.write('E' * (40 * 2**20))\n    return x + 1", "passed"),
    _h("flood_forever", "def f(x):\n    while True:\n        print('spam' * 100)", "timeout"),
    _h("binary_output", "import os\ndef f(x):\n    os.write(1, bytes(range(256)) * 4096)\n    return x + 1", "passed"),
    # -- broken or strange source
    _h("syntax_error", "def f(x) return x + 1", "error"),
    _h("unicode_garbage_source", "".join(chr(c) for c in range(1, 0x3000, 7)), "error"),
    _h("lone_surrogates", "def f(x):\n    return '\ud800\udfff'", "failed"),
    _h("unicode_result", r"def f(x):\n    return '\u202e\x00\U0001f600e\u0301\udcff' * x".replace(r"\n", "\n"),
       "passed", test=r"assert f(2) == '\u202e\x00\U0001f600e\u0301\udcff' * 2"),
    _h("null_bytes_source", "def f(x):\n    return x + 1\n\x00", "error"),
    # -- escape attempts
    _h("network_host_loopback", "import socket\ndef f(x):\n    s = socket.create_connection(('127.0.0.1', {port}), 1)"
       "\n    s.sendall(b'escaped')\n    return x + 1", "error",
       local=frozenset({"passed"}), local_note="no network isolation: the host's loopback is reachable"),
    _h("network_outside", "import socket\ndef f(x):\n    s = socket.create_connection(('{host_ip}', {port}), 1)"
       "\n    s.sendall(b'escaped')\n    return x + 1", "error",
       local=frozenset({"passed"}), local_note="no network isolation: the host's interfaces are reachable"),
    _h("read_host_file", "def f(x):\n    return open('{host_file}').read()", "error",
       test="assert f(1) == 'host secret'",
       local=frozenset({"error", "passed"}),
       local_note="no filesystem isolation: readable when the host does not run as root (root: dropped to nobody)"),
    _h("read_host_public_file", "def f(x):\n    return open('{host_public_file}').read()", "error",
       test="assert len(f(1)) > 0", local=frozenset({"passed", "error"}),
       local_note="no filesystem isolation: a world-readable host file is readable (error only where a folder on its "
       "path is closed to the sandbox user, e.g. a checkout under /root read as nobody)"),
    _h("read_env_secret", "import os\ndef f(x):\n    return os.environ.get('{secret_env}')", "failed",
       test="assert f(1) == 'env secret'"),
    _h("write_outside_workdir", "def f(x):\n    open('{host_dir}/escaped.txt', 'w').write('x')\n    return x + 1",
       "error", local=frozenset({"error", "passed"}),
       local_note="no filesystem isolation: writable when the host does not run as root"),
    _h("kill_parent", "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return x + 1",
       "error"),
    _h("stop_parent", "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGSTOP)\n    return x + 1",
       "timeout", "error"),
    _h("kill_supervisor", "import os, signal\ndef f(x):\n    stat = open('/proc/%d/stat' % os.getppid()).read()\n"
       "    os.kill(int(stat.rsplit(')', 1)[1].split()[1]), signal.SIGKILL)\n    return x + 1", "error"),
    _h("kill_everything", "import os, signal\ndef f(x):\n    os.kill(-1, signal.SIGKILL)\n    return x + 1",
       "error", isolated_only=True,
       local_note="not run locally: kill(-1) would SIGKILL every host process the sandbox user may signal (the "
       "test runner and the user's session when not root; every process of `nobody` when root)"),
    # -- forged verdicts
    _h("forge_sys_exit_at_load", "import sys\nsys.exit(0)\ndef f(x):\n    return 0", "error"),
    _h("forge_os_exit_at_load", "import os\nos._exit(0)", "error"),
    _h("forge_os_exit_in_call", "import os\ndef f(x):\n    os._exit(0)", "error"),
    _h("forge_print_markers", "print('PASSED 1/1')\nprint('{\"passed\": 1, \"total\": 1}')\n"
       "def f(x):\n    print('ok')\n    return 0", "failed"),
    _h("forge_assert_builtins", "import builtins\nclass Never(Exception):\n    pass\nbuiltins.AssertionError = Never\n"
       "def check(candidate):\n    return True\ndef f(x):\n    return 0", "failed"),
    _h("forge_eq_always_true", "class Anything:\n    def __eq__(self, other):\n        return True\n"
       "def f(x):\n    return Anything()", "error"),
    _h("forge_int_subclass", "class Yes(int):\n    def __eq__(self, other):\n        return True\n"
       "    __hash__ = int.__hash__\ndef f(x):\n    return Yes(0)", "error"),
    _h("forge_patch_modules", "import sys, builtins\nbuiltins.len = lambda *a: 3\nsys.modules['builtins'].abs = len\n"
       "def f(x):\n    return []", "failed", "error", test="assert len(f(1)) == 3"),
    _h("forge_raise_systemexit", "def f(x):\n    raise SystemExit(0)", "error"),
    _h("forge_keyboard_interrupt", "def f(x):\n    raise KeyboardInterrupt", "error"),
    _h("forge_result_files", "for name in ('result.json', 'verdict', 'report.json', '../result.json'):\n    try:\n"
       "        open(name, 'w').write('{\"passed\": 1, \"total\": 1}')\n    except OSError:\n        pass\n"
       "def f(x):\n    return 0", "failed"),
    _h("forge_write_every_fd", "import os\nfor fd in range(1024):\n    try:\n"
       "        os.write(fd, b'\\x00\\x00\\x00\\x02ok')\n    except OSError:\n        pass\ndef f(x):\n    return 0",
       "failed", "error"),
    _h("forge_parent_fds_via_proc", "import os\ndef up(pid):\n    return int(open('/proc/%d/stat' % pid).read()"
       ".rsplit(')', 1)[1].split()[1])\ndef f(x):\n    for pid in (os.getppid(), up(os.getppid())):\n"
       "        for fd in range(8):\n            try:\n"
       "                with open('/proc/%d/fd/%d' % (pid, fd), 'wb') as h:\n"
       "                    h.write(b'forged')\n            except OSError:\n                pass\n    return 0",
       "failed"),
)
