"""The executor interface, the memoizing wrapper, the backend factory and the one-shot :func:`run_tests`."""

from __future__ import annotations

import atexit
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llm_marl_envs.sandbox.protocol import MAX_CODE_CHARS, MAX_TESTS, build_job, normalize_tests, rejected_report
from llm_marl_envs.sandbox.types import SandboxError, SandboxLimits, TestJob, TestReport

BACKENDS = ("auto", "docker", "local")


class Executor:
    """Runs programs against unit tests. Subclasses implement :meth:`_execute`; everything else is shared.

    Thread-safe: :meth:`run` may be called from many threads (that is what :meth:`run_many` does).
    """

    backend: str = "abstract"
    limits: SandboxLimits = SandboxLimits()
    default_workers: int = 2

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

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CachingExecutor(Executor):
    """Memoizes reports by (code, tests, entry point, limits): the G samples of a GRPO group often repeat.

    Reports that hit a ``timeout`` or a harness anomaly are not cached (they may be load-dependent). LRU eviction
    beyond ``max_entries``; ``hits``/``misses`` count lookups.
    """

    def __init__(self, inner: Executor, max_entries: int = 4096) -> None:
        if not isinstance(inner, Executor):
            raise TypeError(f"inner: expected an Executor, got {type(inner).__name__}")
        if not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries: expected a positive int, got {max_entries!r}")
        self.inner, self.max_entries = inner, max_entries
        self.backend, self.limits = inner.backend, inner.limits
        self.default_workers = inner.default_workers
        self._cache: OrderedDict[tuple, TestReport] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def run(self, code: str, tests: str | Sequence[str], *, entry_point: str | None = None) -> TestReport:
        """Return the cached report for an identical job, else run it on the inner executor."""
        key = (code, tuple(normalize_tests(tests, entry_point)), entry_point, self.inner.limits)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.hits += 1
                return self._cache[key]
            self.misses += 1
        report = self.inner.run(code, list(key[1]), entry_point=entry_point)
        if not report.timed_out and not report.details.get("anomalies"):
            with self._lock:
                self._cache[key] = report
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
        return report

    def close(self) -> None:
        """Close the inner executor."""
        self.inner.close()


def docker_available(image: str | None = None) -> bool:
    """Whether a Docker engine answers and has the sandbox image."""
    try:
        from llm_marl_envs.sandbox.image import DEFAULT_IMAGE, docker_client, image_exists

        return image_exists(image or DEFAULT_IMAGE, docker_client())
    except Exception:  # any failure to reach the engine means "not available"
        return False


def make_executor(backend: str = "auto", limits: SandboxLimits | None = None, **options: Any) -> Executor:
    """An executor for ``backend``: ``"docker"``, ``"local"`` or ``"auto"`` (Docker when an engine and the image
    answer, else local). ``options`` go to the backend (Docker: ``image``, ``pool_size``, ``max_uses``)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    limits = limits if limits is not None else SandboxLimits()
    if not isinstance(limits, SandboxLimits):
        raise TypeError(f"limits: expected SandboxLimits, got {type(limits).__name__}")
    if backend == "auto":
        backend = "docker" if docker_available(options.get("image")) else "local"
    if backend == "docker":
        from llm_marl_envs.sandbox.docker_backend import DockerExecutor

        return DockerExecutor(limits, **options)
    from llm_marl_envs.sandbox.local import LocalExecutor

    # Docker-only options are dropped when "auto" fell back to the local backend.
    local_options = {k: v for k, v in options.items() if k not in ("image", "pool_size", "max_uses", "client")}
    return LocalExecutor(limits, **local_options)


_SHARED: dict[tuple[str, SandboxLimits], Executor] = {}
_SHARED_LOCK = threading.Lock()


def _close_shared() -> None:
    with _SHARED_LOCK:
        for executor in _SHARED.values():
            executor.close()
        _SHARED.clear()


atexit.register(_close_shared)


def run_tests(
    code: str,
    tests: str | Sequence[str],
    *,
    entry_point: str | None = None,
    backend: str = "auto",
    timeout_s: float = 3.0,
    memory_mb: int = 256,
) -> TestReport:
    """One-shot convenience: run ``code`` against ``tests`` on a module-level executor.

    One executor per (backend, limits) is created on first use and reused by later calls (so the Docker warm pool
    survives between calls); all are closed at interpreter exit. For batches use :meth:`Executor.run_many`.
    """
    limits = SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb)
    key = (backend, limits)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = make_executor(backend, limits)
        executor = _SHARED[key]
    return executor.run(code, tests, entry_point=entry_point)


def elapsed_since(start: float) -> float:
    """Seconds since a ``time.monotonic()`` reading, rounded to microseconds."""
    return round(time.monotonic() - start, 6)


__all__ = [
    "BACKENDS",
    "CachingExecutor",
    "Executor",
    "SandboxError",
    "docker_available",
    "make_executor",
    "run_tests",
]
