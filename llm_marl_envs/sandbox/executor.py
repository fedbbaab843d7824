"""The executor interface and the memoizing wrapper. The backends (:mod:`~llm_marl_envs.sandbox.docker_backend`,
:mod:`~llm_marl_envs.sandbox.local`) subclass :class:`Executor`; choosing and sharing them is
:mod:`~llm_marl_envs.sandbox.backends`' job, so this module imports no backend."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from llm_marl_envs.sandbox.protocol import MAX_CODE_CHARS, MAX_TESTS, build_job, normalize_tests, rejected_report
from llm_marl_envs.sandbox.types import SandboxError, SandboxLimits, TestJob, TestReport

BACKENDS = ("auto", "docker", "bwrap", "local")


class Executor:
    """Runs programs against unit tests. Subclasses implement :meth:`_execute`; everything else is shared.

    Thread-safe: :meth:`run` may be called from many threads (that is what :meth:`run_many` does).
    """

    backend: str = "abstract"
    limits: SandboxLimits = SandboxLimits()
    default_workers: int = 2
    _verdict_cache: CachingExecutor | None = None
    """This executor's process-wide verdict cache, made on first use by :func:`shared_executor`."""

    def run(self, code: str, tests: str | Sequence[str], *, entry_point: str | None = None) -> TestReport:
        """Run ``code`` against ``tests`` (asserts, or a ``check(candidate)`` source with ``entry_point``)."""
        test_list = normalize_tests(tests, entry_point)
        job = build_job(code, test_list, entry_point, self.limits)
        if not test_list:
            return TestReport(0, 0, (), False, 0.0, backend=self.backend)
        if len(code) > MAX_CODE_CHARS or len(test_list) > MAX_TESTS:
            reason = f"job too large: {len(code)} chars of code (max {MAX_CODE_CHARS}), {len(test_list)} tests"
            return rejected_report(test_list, reason, self.backend)
        return self._execute(job)

    def run_many(self, jobs: Sequence[TestJob], max_workers: int | None = None) -> list[TestReport]:
        """Run many jobs concurrently on at most ``max_workers`` threads; reports come back in job order."""
        jobs = list(jobs)
        for i, job in enumerate(jobs):
            if not isinstance(job, TestJob):
                raise TypeError(f"jobs[{i}]: expected TestJob, got {type(job).__name__}")
        if not jobs:
            return []
        workers = max(1, min(len(jobs), max_workers or self.default_workers))
        if workers == 1:
            return [self.run(j.code, j.tests, entry_point=j.entry_point) for j in jobs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as pool:
            return list(pool.map(lambda j: self.run(j.code, j.tests, entry_point=j.entry_point), jobs))

    def _execute(self, job: dict[str, Any]) -> TestReport:
        raise NotImplementedError

    def close(self) -> None:
        """Release the executor's resources (containers, threads). Idempotent."""

    def __getstate__(self) -> dict[str, Any]:
        # The verdict cache holds a lock and belongs to this process: a pickled copy starts its own on first use.
        state = dict(self.__dict__)
        state.pop("_verdict_cache", None)
        return state

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def verdict_key(code: str, tests: Sequence[str], entry_point: str | None, limits: SandboxLimits) -> bytes:
    """The cache key of a run: a BLAKE2b digest of the program, the tests, the entry point and the limits.

    A fixed-size digest instead of the source strings themselves keeps a 4,096-entry cache from holding megabytes of
    programs as keys. Every part is length-prefixed, so no two different jobs hash the same input. The limits are part
    of the key because they change verdicts (a run that passes in 3 s may time out in 1 s).
    """
    if not isinstance(code, str):
        raise TypeError(f"code: expected str, got {type(code).__name__}")
    digest = hashlib.blake2b(digest_size=32)

    def part(text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)

    part(code)
    digest.update(len(tests).to_bytes(8, "big"))
    for test in tests:
        part(test)
    digest.update(b"\x00" if entry_point is None else b"\x01")
    part(entry_point or "")
    part(repr(limits))
    return digest.digest()


class CachingExecutor(Executor):
    """Memoizes reports by a hash of (code, tests, entry point, limits): the G samples of a GRPO group often repeat.

    Thread-safe, and identical jobs in flight run once: a caller asking for a job that another call is already
    running waits for that run's report instead of starting its own (and so do duplicates within one
    :meth:`run_many` batch). Only the distinct misses of a batch reach the inner executor, in one ``run_many`` call,
    so its pool runs them concurrently. Reports that hit a ``timeout`` or a harness anomaly are not cached (they may
    be load-dependent), though callers that joined the run in flight share them. LRU eviction beyond
    ``max_entries``. Counters: ``misses`` (runs of the inner executor), ``hits`` (served from the cache), ``joined``
    (served by a run in flight).
    """

    def __init__(self, inner: Executor, max_entries: int = 4096) -> None:
        if not isinstance(inner, Executor):
            raise TypeError(f"inner: expected an Executor, got {type(inner).__name__}")
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries: expected a positive int, got {max_entries!r}")
        self.inner, self.max_entries = inner, max_entries
        self.backend, self.limits = inner.backend, inner.limits
        self.default_workers = inner.default_workers
        self._cache: OrderedDict[bytes, TestReport] = OrderedDict()
        self._in_flight: dict[bytes, Future[TestReport]] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = self.joined = 0

    def __len__(self) -> int:
        """How many reports the cache holds."""
        return len(self._cache)

    def key(self, code: str, tests: str | Sequence[str], entry_point: str | None = None) -> bytes:
        """The cache key of a job on this executor (see :func:`verdict_key`)."""
        return verdict_key(code, normalize_tests(tests, entry_point), entry_point, self.inner.limits)

    def run(self, code: str, tests: str | Sequence[str], *, entry_point: str | None = None) -> TestReport:
        """Return the cached report for an identical job, else run it on the inner executor (once, however many
        threads ask for it at the same time)."""
        return self.run_many([TestJob(code, tests, entry_point)], max_workers=1)[0]

    def run_many(self, jobs: Sequence[TestJob], max_workers: int | None = None) -> list[TestReport]:
        """Reports in job order: hits from the cache, the distinct misses in one ``run_many`` of the inner executor,
        jobs already running elsewhere from that run."""
        jobs = list(jobs)
        for i, job in enumerate(jobs):
            if not isinstance(job, TestJob):
                raise TypeError(f"jobs[{i}]: expected TestJob, got {type(job).__name__}")
        keys = [self.key(job.code, job.tests, job.entry_point) for job in jobs]
        reports: list[TestReport | None] = [None] * len(jobs)
        owned: dict[bytes, tuple[Future[TestReport], TestJob]] = {}
        waiting: list[tuple[int, Future[TestReport]]] = []
        with self._lock:
            for i, key in enumerate(keys):
                if key in self._cache:
                    self._cache.move_to_end(key)
                    self.hits += 1
                    reports[i] = self._cache[key]
                elif key in self._in_flight:
                    self.joined += 1
                    waiting.append((i, self._in_flight[key]))
                else:
                    future: Future[TestReport] = Future()
                    self._in_flight[key] = future
                    owned[key] = (future, jobs[i])
                    self.misses += 1
                    waiting.append((i, future))
        if owned:
            self._run_owned(owned, max_workers)
        for i, pending in waiting:
            reports[i] = pending.result()
        return [report for report in reports if report is not None]

    def _run_owned(self, owned: dict[bytes, tuple[Future[TestReport], TestJob]], max_workers: int | None) -> None:
        """Run the jobs this call claimed, publish their reports to the cache and to every waiter."""
        try:
            ran = self.inner.run_many([job for _, job in owned.values()], max_workers)
        except BaseException as error:
            # Waiters must not hang on a run that will never finish: they get the same error.
            with self._lock:
                for key in owned:
                    self._in_flight.pop(key, None)
            for future, _ in owned.values():
                future.set_exception(error)
            raise
        with self._lock:
            for key, report in zip(owned, ran, strict=True):
                if not report.timed_out and not report.details.get("anomalies"):
                    self._cache[key] = report
                    self._cache.move_to_end(key)
                self._in_flight.pop(key, None)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        for (future, _), report in zip(owned.values(), ran, strict=True):
            future.set_result(report)

    def close(self) -> None:
        """Close the inner executor."""
        self.inner.close()

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy gets the same inner executor and bound, with an empty cache (locks and futures do not pickle).
        return (CachingExecutor, (self.inner, self.max_entries))


def elapsed_since(start: float) -> float:
    """Seconds since a ``time.monotonic()`` reading, rounded to microseconds."""
    return round(time.monotonic() - start, 6)


__all__ = [
    "BACKENDS",
    "CachingExecutor",
    "Executor",
    "SandboxError",
    "elapsed_since",
    "verdict_key",
]
