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
import itertools
import reprlib
import signal
import sys
import time

from llm_marl_envs.sandbox.harness.codec import dumps, write_frame  # harness-import
from llm_marl_envs.sandbox.harness.program import _BUILTIN_NAMES, ProgramProcess, RemoteError, TestTimeout, free_names, set_limits  # noqa: E501 # harness-import


MAX_SHOWN_CHARS = 200
"""The longest ``got``/``raised`` text a verdict carries; a longer one is cut and ends with :data:`CUT_MARK`."""
CUT_MARK = " [cut]"
CHECKED_CALL = "__judge_checked_call__"
"""The judge-side recorder the checked call of a test is wrapped in (see :func:`checked_call`)."""


def program_names(tree, entry_point):
    """Names a test reads that the program must provide (each is a :class:`Remote` in the test's namespace)."""
    return {name for name in free_names(tree) if name not in _BUILTIN_NAMES or name == entry_point}


def checked_call(tree, names):
    """What a test's last statement checks, when it is an assert whose failure can be explained by one call's result.

    Forms: ``assert CALL == EXPECTED``, ``assert EXPECTED == CALL``, ``assert CALL is EXPECTED`` (``EXPECTED`` calls no
    program function), ``assert CALL`` and ``assert not CALL``, where ``CALL`` is a call of a function in ``names``.
    Returns ``(call node, expected node or None, truth)``: ``truth`` is None for a comparison, else whether the call
    must be true. None for any other test (a loop, several calls of the program compared with each other, ...).
    """
    if not tree.body or not isinstance(tree.body[-1], ast.Assert):
        return None
    test = tree.body[-1].test

    def is_call(node):
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names

    def calls_program(node):
        return any(is_call(inner) for inner in ast.walk(node))

    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
        left, right = test.left, test.comparators[0]
        if is_call(left) and not calls_program(right):
            return left, right, None
        if is_call(right) and not calls_program(left):
            return right, left, None
        return None
    if is_call(test):
        return test, None, True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and is_call(test.operand):
        return test.operand, None, False
    return None


class _Recorder(ast.NodeTransformer):
    """Wraps one call node in ``CHECKED_CALL(lambda: CALL)``: the same call, same order, its result recorded."""

    def __init__(self, target):
        self.target = target

    def visit_Call(self, node):
        if node is self.target:
            wrapper = ast.parse(CHECKED_CALL + "(lambda: 0)", mode="eval").body
            wrapper.args[0].body = node
            return ast.copy_location(wrapper, node)
        return self.generic_visit(node)


class _ShownValue(reprlib.Repr):
    """``reprlib`` bounded to values a program can return (exact builtins, decoded by the judge itself), with no step
    whose cost grows with the value's size: huge ints are described (their decimal form costs quadratic time and
    Python 3.11+ refuses it past 4300 digits), large sets and dicts are not sorted, bytes are cut before ``repr``."""

    def __init__(self):
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother = 4, MAX_SHOWN_CHARS, MAX_SHOWN_CHARS
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdict = 30

    def repr_int(self, x, level):
        bits = x.bit_length()
        return repr(x) if bits <= 4 * MAX_SHOWN_CHARS else f"<an int of {bits} bits>"

    def repr_bytes(self, x, level):
        return repr(x[:MAX_SHOWN_CHARS]) + ("..." if len(x) > MAX_SHOWN_CHARS else "")

    def _unsorted(self, x, level, left, right, limit):
        head = list(itertools.islice(x, limit + 1))  # islice: never walks past what is shown
        return self._repr_iterable(head, level, left, right, limit) if len(x) > limit else None

    def repr_set(self, x, level):
        return (self._unsorted(x, level, "{", "}", self.maxset) if x else None) or super().repr_set(x, level)

    def repr_frozenset(self, x, level):
        shown = self._unsorted(x, level, "frozenset({", "})", self.maxfrozenset) if x else None
        return shown or super().repr_frozenset(x, level)

    def repr_dict(self, x, level):
        if len(x) <= self.maxdict:
            return super().repr_dict(x, level)
        if level <= 0:
            return "{...}"
        pairs = itertools.islice(x.items(), self.maxdict)
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in pairs]
        return "{" + ", ".join(items) + ", ...}"


def clipped(text):
    """``text`` cut to :data:`MAX_SHOWN_CHARS`, with :data:`CUT_MARK` when cut."""
    text = str(text)
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - len(CUT_MARK)] + CUT_MARK


def shown_value(value):
    """A bounded ``repr`` of a value the program returned (a placeholder when even that fails)."""
    try:
        return clipped(_ShownValue().repr(value))
    except Exception:  # MemoryError, RecursionError: the verdict stands, only its explanation is lost
        return "<a value that cannot be shown>"


def shown_exception(exc):
    """``Type: message`` of what the checked call raised (a :class:`RemoteError` says it in its own words), bounded."""
    try:
        return clipped(str(exc) if isinstance(exc, RemoteError) else f"{type(exc).__name__}: {exc}")
    except Exception:
        return type(exc).__name__


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

    def emit(self, index, status, message, result=None):
        """Stream one test's verdict to the supervisor; ``result``: what its checked call gave, when it failed."""
        frame = {"i": index, "s": status, "m": str(message)[:300]}
        if result:
            frame["x"] = result
        write_frame(self.report_fd, dumps(frame))

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
                status, message, result = self.run_test(index, source)
            except Exception as exc:  # a judge-side failure is an error, never a pass
                status, message, result = "error", f"harness error: {type(exc).__name__}: {str(exc)[:200]}", None
            self.emit(index, status, message, result)
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
        """Run one test's code in a fresh namespace of the judge; program names are :class:`Remote` stubs.

        Returns (status, message, result). When the test fails or errs and its last statement is an assert of a form
        :func:`checked_call` knows, ``result`` is ``{"got": bounded repr}`` of what the checked call returned or
        ``{"raised": "Type: message"}``; else None. The call is recorded where the test makes it (wrapped in a judge
        function, never run twice), and its value is a builtin the judge decoded itself: no program code runs to show
        it.
        """
        try:
            tree = ast.parse(source)
            names = program_names(tree, self.job.get("entry_point"))
            check = checked_call(tree, names)
            if check is not None and not any(isinstance(n, ast.Name) and n.id == CHECKED_CALL for n in ast.walk(tree)):
                tree = ast.fix_missing_locations(_Recorder(check[0]).visit(tree))
            else:
                check = None
            code = compile(tree, f"<test {index}>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return "error", f"the test does not parse: {exc}", None
        namespace = {"__name__": "__test__", "__builtins__": builtins}
        for name in names:
            namespace[name] = Remote(name, self)
        seen = {}

        def record(thunk):
            try:
                value = thunk()
            except Exception as exc:  # never TestTimeout (a BaseException): the deadline stays the judge's
                seen["raised"] = exc
                raise
            seen["got"] = value
            return value

        if check is not None:
            namespace[CHECKED_CALL] = record
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
            return "timeout", "the test ran past its {}s limit".format(self.job["timeout_s"]), None
        except AssertionError as exc:
            return "failed", str(exc)[:300] or "assertion failed", _result(seen)
        except RemoteError as exc:
            return "error", str(exc), _result(seen)
        except BaseException as exc:
            return "error", f"{type(exc).__name__}: {str(exc)[:300]}", _result(seen)
        return "passed", "", None


def _result(seen):
    """What the checked call gave, for a failing verdict (computed after the test, outside its time limit: bounded)."""
    if "raised" in seen:
        return {"raised": shown_exception(seen["raised"])}
    if "got" in seen:
        return {"got": shown_value(seen["got"])}
    return None


def judge_main(job, report_fd):
    """Entry point of the forked judge process."""
    judge = Judge(job, report_fd)
    signal.signal(signal.SIGALRM, judge.on_alarm)
    set_limits(job, int(job["cpu_s"]))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    judge.run()
