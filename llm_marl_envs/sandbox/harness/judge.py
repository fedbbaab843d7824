"""The judge: runs each test's code itself and asks a separate program process only for function results.

Why verdicts cannot be forged by the program under test: the program is loaded only in a *program process* forked
from the judge, which first points its stdin/stdout/stderr at /dev/null and pipes and closes every other descriptor.
Test code (``assert f(x) == y``) runs in the judge, where each name the program defines is a :class:`Remote` stub:
calling it sends the (builtin) arguments over a pipe and gets back a strictly encoded builtin value, or the name of
the exception raised. Asserts, comparisons, builtins and the test helper all live in the judge, which never executes
a line of the program; exiting early, printing markers, patching builtins or ``sys.modules``, raising
``SystemExit``, returning objects with a rigged ``__eq__`` or writing files only ever affect the program process, and
all that process can send back is a value. The judge is non-dumpable, so the program process cannot ptrace it, read
its memory or open its descriptors through /proc.
"""

# ruff: noqa: I001 (the harness-import lines must stay one line each: they are stripped when concatenated)
import ast
import builtins
import signal
import sys
import time

from llm_marl_envs.sandbox.harness.codec import dumps, write_frame  # harness-import
from llm_marl_envs.sandbox.harness.program import _BUILTIN_NAMES, ProgramProcess, RemoteError, TestTimeout, free_names, set_limits  # noqa: E501 # harness-import


class Remote:
    """Stands in the test's namespace for a function of the program; calling it is a round trip to the program."""

    def __init__(self, name, judge):
        self.name, self.judge = name, judge

    def __call__(self, *args, **kwargs):
        return self.judge.call(self.name, args, kwargs)

    def __repr__(self):
        return f"<program function {self.name}>"


class Judge:
    """Runs every test of one job in order and streams one outcome frame per test, then an end frame."""

    def __init__(self, job, report_fd):
        self.job, self.report_fd = job, report_fd
        self.program, self.deadline, self.armed = None, 0.0, False
        self.output = {"stdout": bytearray(), "stderr": bytearray()}
        self.dropped = {"stdout": 0, "stderr": 0}

    def sink(self, stream, chunk):
        """Keep the head of each output stream, count the rest."""
        buffer = self.output[stream]
        room = int(self.job["output_bytes"]) - len(buffer)
        if room > 0:
            buffer += chunk[:room]
        self.dropped[stream] += max(0, len(chunk) - max(room, 0))

    def call(self, name, args, kwargs):
        """Round trip to the program process (see :class:`ProgramProcess`)."""
        if self.program is None or not self.program.alive:
            raise RemoteError("the program's process is gone")
        return self.program.call(name, args, kwargs, self.deadline)

    def on_alarm(self, signum, frame):
        """SIGALRM: the test's own code (not only the program) ran past its deadline. Raises at most once per arming.

        The wait for the program's reply enforces the same deadline and may raise ``TestTimeout`` a moment before the
        alarm arrives (a program flooding its output keeps that wait busy). Python runs this handler between any two
        bytecodes, so :meth:`run_test` keeps every handler of the test's exceptions outside the armed region.
        """
        if self.armed:
            self.armed = False
            raise TestTimeout()

    def emit(self, index, status, message):
        """Stream one test's verdict to the supervisor."""
        write_frame(self.report_fd, dumps({"i": index, "s": status, "m": str(message)[:300]}))

    def run(self):
        """Judge every test; program-level failures are reported once as ``error`` and apply to every test."""
        job, start = self.job, time.monotonic()
        timeout, budget_end = float(job["timeout_s"]), start + float(job["run_budget_s"])
        error, settled = None, None
        try:
            compiled = compile(job["code"], "<program>", "exec")
        except SyntaxError as exc:
            error = f"SyntaxError: {exc.msg} (line {exc.lineno})"
            settled = ("error", error)
        except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
            error = f"the program cannot be compiled: {type(exc).__name__}: {str(exc)[:200]}"
            settled = ("error", error)
        for index, source in enumerate(job["tests"]):
            if settled is not None:
                self.emit(index, *settled)
                continue
            if time.monotonic() >= budget_end:
                self.emit(index, "timeout", "the run's time budget ran out before this test started")
                continue
            if self.program is None:
                self.deadline = min(time.monotonic() + timeout, budget_end)
                failure = self.load(compiled)
                if failure is not None:
                    settled, error = failure, failure[1]
                    self.emit(index, *settled)
                    continue
            self.deadline = min(time.monotonic() + timeout, budget_end)
            try:
                status, message = self.run_test(index, source)
            except Exception as exc:  # a judge-side failure is an error, never a pass
                status, message = "error", f"harness error: {type(exc).__name__}: {str(exc)[:200]}"
            self.emit(index, status, message)
            if status == "timeout" or not self.program.alive:
                self.program.kill()
                self.program = None
        if self.program is not None:
            self.program.kill()
        end = {"end": True, "error": error}
        for stream, buffer in self.output.items():
            text = bytes(buffer).decode("utf-8", "replace")
            if self.dropped[stream]:
                text += f"\n[... {self.dropped[stream]} more bytes dropped]"
            end[stream] = text
        write_frame(self.report_fd, dumps(end))

    def load(self, compiled):
        """Start a program process; None when it loaded, else the (status, message) every remaining test gets."""
        self.program = ProgramProcess(compiled, self.job, self.sink)
        try:
            reply = self.program.wait_frame(self.deadline)
        except TestTimeout:
            failure = ("timeout", "the program did not finish loading within {}s".format(self.job["timeout_s"]))
        except RemoteError as exc:
            failure = ("error", f"the program exited while loading ({exc})")
        else:
            if reply == ["ready"]:
                return None
            detail = reply[1] if isinstance(reply, list) and len(reply) == 2 else "malformed reply"
            failure = ("error", f"the program raised while loading: {str(detail)[:300]}")
        self.program.kill()
        self.program = None
        return failure

    def run_test(self, index, source):
        """Run one test's code in a fresh namespace of the judge; program names are :class:`Remote` stubs."""
        try:
            tree = ast.parse(source)
            code = compile(tree, f"<test {index}>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return "error", f"the test does not parse: {exc}"
        namespace = {"__name__": "__test__", "__builtins__": builtins}
        for name in free_names(tree):
            if name not in _BUILTIN_NAMES or name == self.job.get("entry_point"):
                namespace[name] = Remote(name, self)
        # The alarm may land at any bytecode until the inner ``finally`` has disarmed it, including while a
        # TestTimeout from the wait for the program (same deadline) is already on its way out. It can therefore only
        # raise inside the inner block, and every handler below runs after it is disarmed: no TestTimeout can escape
        # the judge (which would then exit without its end frame, turning a timeout into "the harness stopped early").
        try:
            try:
                self.armed = True
                signal.setitimer(signal.ITIMER_REAL, max(self.deadline - time.monotonic(), 0.001))
                exec(code, namespace)
            finally:
                self.armed = False
                signal.setitimer(signal.ITIMER_REAL, 0)
        except TestTimeout:
            return "timeout", "the test ran past its {}s limit".format(self.job["timeout_s"])
        except AssertionError as exc:
            return "failed", str(exc)[:300] or "assertion failed"
        except RemoteError as exc:
            return "error", str(exc)
        except BaseException as exc:
            return "error", f"{type(exc).__name__}: {str(exc)[:300]}"
        return "passed", ""


def judge_main(job, report_fd):
    """Entry point of the forked judge process."""
    judge = Judge(job, report_fd)
    signal.signal(signal.SIGALRM, judge.on_alarm)
    set_limits(job, int(job["cpu_s"]))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    judge.run()
