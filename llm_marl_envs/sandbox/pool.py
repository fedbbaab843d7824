"""A warm pool of long-lived sandboxes, each running the harness supervisor: what the Docker and bwrap backends share.

A run costs a fork inside a sandbox that is already up, instead of a container or a namespace and an interpreter
started per run. Each sandbox serves runs one at a time over a byte stream (its supervisor's stdin/stdout). Between
runs its supervisor kills every process the run left and empties the work dir; the pool throws a sandbox away (and
starts another lazily) after ``max_uses`` runs or on any anomaly: a timeout, a missing or malformed verdict,
processes that survived the sweep, a work dir that would not empty, or output from the supervisor on stderr.
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from typing import Any, Protocol

from llm_marl_envs.sandbox.executor import Executor, elapsed_since
from llm_marl_envs.sandbox.protocol import build_report, parse_answer, request_bytes
from llm_marl_envs.sandbox.types import SandboxError, TestReport

MAX_SUPERVISOR_STDERR = 4096
"""Supervisor stderr beyond this ends an exchange: a healthy supervisor writes none."""


class Sandbox(Protocol):
    """One long-lived sandbox with its supervisor."""

    uses: int
    stderr: bytes
    """What the supervisor (or the sandbox tool around it) wrote on stderr; anything here retires the sandbox."""

    def exchange(self, request: bytes, deadline: float) -> bytes | None:
        """Send one job and return the supervisor's answer frame (None if it hung up); raises TimeoutError."""

    def destroy(self) -> None:
        """Stop the sandbox and free what the host holds for it (never raises)."""


class WarmPoolExecutor(Executor):
    """Runs jobs on a pool of at most ``pool_size`` warm sandboxes (see the module docstring).

    Subclasses call :meth:`_start_pool` from their constructor and implement :meth:`_new_sandbox`; they may adjust
    each job before it is sent (:meth:`_prepare_job`).
    """

    pool_size: int
    max_uses: int
    recycled: int

    def _start_pool(self, pool_size: int, max_uses: int) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size: expected a positive int, got {pool_size!r}")
        if isinstance(max_uses, bool) or not isinstance(max_uses, int) or max_uses < 1:
            raise ValueError(f"max_uses: expected a positive int, got {max_uses!r}")
        self.pool_size, self.max_uses = pool_size, max_uses
        self.default_workers = pool_size
        self._idle: queue.LifoQueue[Sandbox] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(pool_size)
        self._live: set[Sandbox] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.recycled = 0
        # Executors nobody closed (e.g. shared by envs for the whole process) still stop their sandboxes at exit.
        self._finalizer = weakref.finalize(self, _destroy_all, self._live)

    def _new_sandbox(self) -> Sandbox:
        raise NotImplementedError

    def _prepare_job(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job as this backend's supervisor should get it (default: unchanged)."""
        return job

    def warm(self, count: int | None = None) -> None:
        """Start ``count`` sandboxes now (default: the pool size) so the first runs do not pay start-up."""
        wanted = min(count or self.pool_size, self.pool_size) - self._idle.qsize()
        started = [self._add_sandbox() for _ in range(max(0, wanted))]
        for sandbox in started:
            self._idle.put(sandbox)

    def _add_sandbox(self) -> Sandbox:
        sandbox = self._new_sandbox()
        with self._lock:
            self._live.add(sandbox)
        return sandbox

    def _discard(self, sandbox: Sandbox) -> None:
        with self._lock:
            self._live.discard(sandbox)
            self.recycled += 1
        sandbox.destroy()

    def _execute(self, job: dict[str, Any]) -> TestReport:
        if self._closed:
            raise SandboxError("this executor is closed")
        start = time.monotonic()
        job = self._prepare_job(job)
        request, nonce = request_bytes(job)
        with self._slots:
            try:
                sandbox = self._idle.get_nowait()
            except queue.Empty:
                try:
                    sandbox = self._add_sandbox()
                except Exception as exc:  # the engine or tool refused (gone, out of resources): the caller must know
                    raise SandboxError(f"could not start a {self.backend} sandbox: {exc}") from exc
            answer, failure, overran = None, None, False
            try:
                answer = sandbox.exchange(request, time.monotonic() + float(job["run_budget_s"]) + 5.0)
            except TimeoutError as exc:
                failure, overran = str(exc), True
            except OSError as exc:
                failure = f"lost the sandbox: {exc}"
            verdict = parse_answer(answer, nonce)
            if verdict is None and failure is None:
                failure = "the sandbox's supervisor died or answered without the run's nonce"
            report, anomalies = build_report(
                job["tests"], verdict, duration_s=elapsed_since(start), backend=self.backend,
                failure=failure, timed_out_host=overran,
            )
            healthy = verdict is not None and not anomalies and not report.timed_out and not sandbox.stderr
            if healthy and sandbox.uses < self.max_uses and not self._closed:
                self._idle.put(sandbox)
            else:
                self._discard(sandbox)
        return report

    def live_sandboxes(self) -> int:
        """How many sandboxes this executor holds now."""
        with self._lock:
            return len(self._live)

    def close(self) -> None:
        """Stop every sandbox of this executor."""
        self._closed = True
        with self._lock:
            sandboxes = list(self._live)
            self._live.clear()
        for sandbox in sandboxes:
            sandbox.destroy()
        while not self._idle.empty():
            self._idle.get_nowait()


def _destroy_all(sandboxes: set[Sandbox]) -> None:
    """Stop every sandbox in ``sandboxes`` (run by the executor's finalizer at exit or collection)."""
    for sandbox in list(sandboxes):
        sandbox.destroy()
    sandboxes.clear()
