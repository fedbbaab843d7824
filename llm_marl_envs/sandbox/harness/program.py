"""The program process: loads the program under test and answers calls with strictly encoded values.

It is forked by the judge and, before any program code runs, points stdin/stdout/stderr at /dev/null and pipes,
closes every other descriptor and applies the resource limits. All it can ever send back is a value (or the name of
an exception); see :mod:`llm_marl_envs.sandbox.harness.judge` for why that makes verdicts unforgeable.
"""

# ruff: noqa: I001 (the harness-import lines must stay one line each: they are stripped when concatenated)
import ast
import builtins
import contextlib
import os
import resource
import select
import signal
import sys
import time

from llm_marl_envs.sandbox.harness.codec import UncheckableValue, decode_value, dumps, encode_value, loads, read_frame, write_frame  # noqa: E501 # harness-import

_BUILTIN_NAMES = frozenset(dir(builtins))
_REBUILT_EXCEPTIONS = {
    name: getattr(builtins, name)
    for name in dir(builtins)
    if isinstance(getattr(builtins, name), type)
    and issubclass(getattr(builtins, name), Exception)
    and name != "AssertionError"
}
# Modules programs commonly use, imported before privileges are dropped (the interpreter's tree may be unreadable).
PRELOAD = [
    *("math", "cmath", "itertools", "functools", "collections", "heapq", "bisect", "string", "re", "random"),
    *("statistics", "fractions", "decimal", "hashlib", "operator", "copy", "datetime", "typing", "array"),
    *("dataclasses", "json", "struct", "textwrap", "unicodedata", "numbers", "enum", "ctypes", "socket", "threading"),
    *("encodings.idna", "signal", "subprocess"),
]


class TestTimeout(BaseException):
    """The current test ran out of time (raised by the judge's alarm or a wait)."""


class RemoteError(Exception):
    """The program raised, crashed, or returned a value that cannot be checked."""


def set_limits(job, cpu_s):
    """Resource limits of a sandboxed process (applied to both the judge and the program process)."""
    memory = int(job["memory_mb"]) * 1024 * 1024
    file_bytes = int(job["file_mb"]) * 1024 * 1024
    for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_FSIZE, file_bytes), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    if job.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(job["nproc"]), int(job["nproc"])))


class ProgramProcess:
    """The forked process that loads the program and answers calls; its output is drained into the judge's buffers."""

    def __init__(self, compiled, job, sink):
        self.sink = sink
        call_r, call_w = os.pipe()
        resp_r, resp_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # program process: nothing of the judge's reachable from here on
            try:
                os.setpgid(0, 0)
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
                for fd in range(3, 1024):
                    if fd not in (call_r, resp_w):
                        with contextlib.suppress(OSError):
                            os.close(fd)
                set_limits(job, int(job["cpu_s"]))
                _serve(compiled, call_r, resp_w)
            finally:
                os._exit(0)
        for fd in (call_r, resp_w, out_w, err_w):
            os.close(fd)
        self.pid, self.call_w, self.resp_r, self.outputs = pid, call_w, resp_r, {out_r: "stdout", err_r: "stderr"}
        self.alive = True

    def wait_frame(self, deadline):
        """The next frame from the program, draining its output meanwhile; RemoteError if it died or hung up."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TestTimeout()
            readable, _, _ = select.select([self.resp_r, *self.outputs], [], [], min(remaining, 0.05))
            for fd in readable:
                if fd == self.resp_r:
                    frame = read_frame(fd)
                    if frame is None:
                        # Dead or hung up (e.g. it failed encoding its reply): the judge loads a fresh program for the
                        # next test instead of failing every later test of the run on this one.
                        self.alive = False
                        raise RemoteError("the program's process exited or closed its channel")
                    try:
                        return loads(frame)
                    except ValueError:
                        raise RemoteError("malformed message from the program") from None
                self._drain(fd)
            if not readable and os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                self.alive = False
                raise RemoteError("the program's process died")

    def _drain(self, fd):
        chunk = os.read(fd, 65536)
        if not chunk:
            del self.outputs[fd]
            os.close(fd)
            return
        self.sink(self.outputs[fd], chunk)

    def call(self, name, args, kwargs, deadline):
        """Ask the program for ``name(*args, **kwargs)``; return the decoded builtin value."""
        try:
            request = dumps([name, encode_value(list(args)), encode_value(kwargs)])
        except UncheckableValue as exc:
            raise RemoteError(f"the test passes {exc} to the program") from None
        try:
            write_frame(self.call_w, request)
        except OSError:
            self.alive = False
            raise RemoteError("the program's process is gone") from None
        reply = self.wait_frame(deadline)
        if not isinstance(reply, list) or not reply:
            raise RemoteError("malformed reply from the program")
        if reply[0] == "ok" and len(reply) == 2:
            try:
                return decode_value(reply[1])
            except (UncheckableValue, RecursionError) as exc:
                raise RemoteError(f"the program returned {exc}") from None
        if reply[0] == "raise" and len(reply) == 3:
            kind, message = str(reply[1])[:80], str(reply[2])[:300]
            if kind in _REBUILT_EXCEPTIONS:
                raise _REBUILT_EXCEPTIONS[kind](message)
            raise RemoteError(f"the program raised {kind}: {message}")
        if reply[0] == "uncheckable" and len(reply) == 2:
            raise RemoteError(f"the program returned {str(reply[1])[:200]}")
        raise RemoteError("malformed reply from the program")

    def kill(self):
        """Kill the program's process group and reap it; drain what it printed."""
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            with contextlib.suppress(OSError):
                target()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        self.alive = False
        for fd in list(self.outputs):
            os.set_blocking(fd, False)
            try:
                while fd in self.outputs:
                    self._drain(fd)
            except BlockingIOError:
                os.close(fd)
                del self.outputs[fd]
        for fd in (self.call_w, self.resp_r):
            os.close(fd)


def _flush():
    """Push the program's buffered prints into the pipes (the program may have broken sys.stdout: ignore that)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def _serve(compiled, call_r, resp_w):
    """Program process: load the program, say ready, then answer calls until the judge hangs up."""
    namespace = {"__name__": "__sandbox__", "__builtins__": builtins}
    # Line-buffered streams: prints reach the judge even when the program later dies with os._exit or a signal.
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    try:
        exec(compiled, namespace)
        _flush()
    except BaseException as exc:
        write_frame(resp_w, dumps(["load_error", f"{type(exc).__name__}: {str(exc)[:300]}"]))
        return
    write_frame(resp_w, dumps(["ready"]))
    while True:
        request = read_frame(call_r)
        if request is None:
            return
        name, args, kwargs = loads(request)
        try:
            if name not in namespace:
                raise NameError(f"name {name!r} is not defined by the program")
            result = namespace[name](*decode_value(args), **decode_value(kwargs))
            reply = ["ok", encode_value(result)]
        except UncheckableValue as exc:
            reply = ["uncheckable", str(exc)]
        except BaseException as exc:
            reply = ["raise", type(exc).__name__, str(exc)[:300]]
        _flush()
        write_frame(resp_w, dumps(reply))


def free_names(tree):
    """Names a test reads but never binds itself: the ones the program must provide."""
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound
