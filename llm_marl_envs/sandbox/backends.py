"""Choosing and sharing executors: the backend factory :func:`make_executor`, the process-wide
:func:`shared_executor` (one executor and one verdict cache per backend and limits) and the one-shot :func:`run_tests`.

Kept apart from :mod:`~llm_marl_envs.sandbox.executor` (the interface the backends subclass), so the backends import
the interface and this module imports the backends, never the other way round. The backends are imported when first
asked for: the Docker one needs the ``docker`` SDK, which a local-only install may lack.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Sequence
from typing import Any

from llm_marl_envs.sandbox.executor import BACKENDS, CachingExecutor, Executor
from llm_marl_envs.sandbox.types import SandboxLimits, TestReport


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


def _backend_executor(backend: str, limits: SandboxLimits) -> Executor:
    """The process's one executor for (backend, limits), created on first use (so one Docker warm pool serves all)."""
    key = (backend, limits)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = make_executor(backend, limits)
        return _SHARED[key]


def shared_executor(
    backend: str | Executor = "auto", limits: SandboxLimits | None = None, *, cache: bool = True
) -> Executor:
    """The process-wide executor for ``backend`` with one verdict cache that every caller shares.

    ``backend`` is a name (``"auto"``, ``"docker"``, ``"local"``: one executor per name and ``limits`` for the whole
    process, closed at exit) or an :class:`Executor` instance (its own limits; ``limits`` must then be None). With
    ``cache`` the result is that executor's one :class:`CachingExecutor`, made on first use and kept on the executor,
    so every env built on the same backend and limits, or on the same executor object, shares hits: the G envs of a
    group stepping one joint action cost one sandbox run. A :class:`CachingExecutor` passed in is returned as it is
    (a caller that wants a private cache passes its own). Without ``cache``, the bare executor.
    """
    if isinstance(backend, Executor):
        if limits is not None:
            raise ValueError("limits: an Executor instance carries its own limits; expected None, got "
                             f"{limits!r}")
        executor = backend
    elif isinstance(backend, str):
        if limits is not None and not isinstance(limits, SandboxLimits):
            raise TypeError(f"limits: expected SandboxLimits or None, got {type(limits).__name__}")
        if backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS} or an Executor, got {backend!r}")
        executor = _backend_executor(backend, limits if limits is not None else SandboxLimits())
    else:
        raise TypeError(f"backend: expected a backend name or an Executor, got {type(backend).__name__}")
    if not cache or isinstance(executor, CachingExecutor):
        return executor
    with _SHARED_LOCK:
        # Kept on the executor rather than in a weak-keyed table: a table's value (the wrapper) refers to its key (the
        # executor), so the entry would never be freed; as an attribute it lives and dies with the executor.
        if executor._verdict_cache is None:
            executor._verdict_cache = CachingExecutor(executor)
        return executor._verdict_cache


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
    executor = _backend_executor(backend, SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb))
    return executor.run(code, tests, entry_point=entry_point)


__all__ = ["docker_available", "make_executor", "run_tests", "shared_executor"]
