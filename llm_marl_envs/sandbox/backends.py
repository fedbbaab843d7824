"""Choosing and sharing executors: the backend factory :func:`make_executor`, the process-wide
:func:`shared_executor` (one executor and one verdict cache per backend and limits) and the one-shot :func:`run_tests`.

Kept apart from :mod:`~llm_marl_envs.sandbox.executor` (the interface the backends subclass), so the backends import
the interface and this module imports the backends, never the other way round. The backends are imported when first
asked for: the Docker one needs the ``docker`` SDK, which a local-only install may lack.

``"auto"`` (:func:`choose_backend`) picks Docker, else bwrap, and otherwise raises: it never runs model-written code
unisolated unless ``"local"`` is asked for by name.
"""

from __future__ import annotations

import atexit
import logging
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from llm_marl_envs.sandbox.executor import BACKENDS, CachingExecutor, Executor
from llm_marl_envs.sandbox.types import SandboxError, SandboxLimits, TestReport

logger = logging.getLogger("llm_marl_envs.sandbox")


def docker_status(image: str | None = None) -> tuple[bool, str]:
    """Whether the Docker backend can run here (an engine answers and has the sandbox image), and why (or why not)."""
    state, reason = _docker_state(image)
    return state == "ready", reason


def _docker_state(image: str | None) -> tuple[str, str]:
    """``("ready" | "no-image" | "no-engine", why)``."""
    from llm_marl_envs.sandbox.image import DEFAULT_IMAGE

    image = image or DEFAULT_IMAGE
    try:
        from llm_marl_envs.sandbox.image import docker_client, image_exists

        client = docker_client()
    except Exception as exc:  # any failure to reach the engine (no SDK, no socket, no daemon) means "not available"
        return "no-engine", f"no Docker engine answers ({_first_line(exc)})"
    try:
        if not image_exists(image, client):
            return "no-image", (f"the Docker engine answers but has no sandbox image {image!r} "
                           "(build it: `llm-marl sandbox build-image`)")
    except Exception as exc:
        return "no-engine", f"the Docker engine could not be asked for the image ({_first_line(exc)})"
    finally:
        client.close()
    return "ready", f"the Docker engine answers and has {image}"


def docker_available(image: str | None = None) -> bool:
    """Whether a Docker engine answers and has the sandbox image."""
    return docker_status(image)[0]


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


class NoIsolationError(SandboxError):
    """``executor="auto"`` found neither Docker (engine and image) nor a working ``bwrap``."""


def choose_backend(image: str | None = None) -> str:
    """What ``"auto"`` runs on: ``"docker"`` when an engine answers and has the image, else ``"bwrap"`` when it can
    start a sandbox, else :class:`NoIsolationError`, which says how to get isolation or how to opt in to ``"local"``.

    Never ``"local"``: that backend runs model-written code on the host with the user's rights, so it is used only
    when asked for by name. The choice is logged (logger ``llm_marl_envs.sandbox``, INFO); an engine that answers
    without the image (a failed or forgotten image build) also gives a ``UserWarning``, since its user likely meant to
    run on Docker.
    """
    from llm_marl_envs.sandbox.bwrap_backend import bwrap_status

    docker_state, docker_reason = _docker_state(image)
    if docker_state == "ready":
        logger.info("sandbox: executor='auto' chose docker: %s", docker_reason)
        return "docker"
    bwrap_ok, bwrap_reason = bwrap_status()
    if not bwrap_ok:
        raise NoIsolationError(
            "executor='auto' found no isolated sandbox for model-written code, and does not run it unisolated "
            f"without being asked.\n  docker: {docker_reason}\n  bwrap: {bwrap_reason}\n"
            "Get isolation: start a Docker engine and run `llm-marl sandbox build-image`, or install bubblewrap "
            "(`sudo apt-get install bubblewrap`). Or, for code you trust, opt in to running it on this machine "
            "without isolation (no network or file system protection) with executor='local'."
        )
    if docker_state == "no-image":
        warnings.warn(f"sandbox: executor='auto' runs on bwrap, not Docker: {docker_reason}", UserWarning,
                      stacklevel=3)
    logger.info("sandbox: executor='auto' chose bwrap (docker: %s)", docker_reason)
    return "bwrap"


def make_executor(backend: str = "auto", limits: SandboxLimits | None = None, **options: Any) -> Executor:
    """An executor for ``backend``: ``"docker"``, ``"bwrap"``, ``"local"`` or ``"auto"`` (see :func:`choose_backend`:
    Docker, else bwrap, else an error; never local). ``options`` go to the backend (Docker: ``image``, ``pool_size``,
    ``max_uses``, ``client``; bwrap: ``pool_size``, ``max_uses``; local: ``max_workers``); under ``"auto"`` those of
    the backend not chosen are dropped."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    limits = limits if limits is not None else SandboxLimits()
    if not isinstance(limits, SandboxLimits):
        raise TypeError(f"limits: expected SandboxLimits, got {type(limits).__name__}")
    if backend == "auto":
        unknown = sorted(set(options) - {name for names in _OPTIONS.values() for name in names})
        if unknown:
            raise TypeError(f"options: unknown {unknown}; expected some of {_OPTIONS}")
        backend = choose_backend(options.get("image"))
        options = {k: v for k, v in options.items() if k in _OPTIONS[backend]}
    if backend == "docker":
        from llm_marl_envs.sandbox.docker_backend import DockerExecutor

        return DockerExecutor(limits, **options)
    if backend == "bwrap":
        from llm_marl_envs.sandbox.bwrap_backend import BwrapExecutor

        return BwrapExecutor(limits, **options)
    from llm_marl_envs.sandbox.local import LocalExecutor

    return LocalExecutor(limits, **options)


_OPTIONS = {
    "docker": ("image", "pool_size", "max_uses", "client"),
    "bwrap": ("pool_size", "max_uses"),
    "local": ("max_workers",),
}
"""The options each backend takes (``"auto"`` passes on those of the backend it chose)."""


_SHARED: dict[tuple[str, SandboxLimits], Executor] = {}
_SHARED_LOCK = threading.Lock()


def _close_shared() -> None:
    with _SHARED_LOCK:
        for executor in {id(e): e for e in _SHARED.values()}.values():
            executor.close()
        _SHARED.clear()


atexit.register(_close_shared)


def _backend_executor(backend: str, limits: SandboxLimits) -> Executor:
    """The process's one executor for (backend, limits), created on first use (so one warm pool serves all).

    ``"auto"`` is resolved once per limits, to the executor of the backend it chose: asking for ``"auto"`` and for
    that backend by name gives the same executor.
    """
    key = (backend, limits)
    with _SHARED_LOCK:
        if key not in _SHARED:
            chosen = (choose_backend() if backend == "auto" else backend, limits)
            if chosen not in _SHARED:
                _SHARED[chosen] = make_executor(chosen[0], limits)
            _SHARED[key] = _SHARED[chosen]
        return _SHARED[key]


def shared_executor(
    backend: str | Executor = "auto", limits: SandboxLimits | None = None, *, cache: bool = True
) -> Executor:
    """The process-wide executor for ``backend`` with one verdict cache that every caller shares.

    ``backend`` is a name (``"auto"``, ``"docker"``, ``"bwrap"``, ``"local"``: one executor per backend and ``limits``
    for the whole process, closed at exit) or an :class:`Executor` instance (its own limits; ``limits`` must then be
    None). With ``cache`` the result is that executor's one :class:`CachingExecutor`, made on first use and kept on the
    executor, so every env built on the same backend and limits, or on the same executor object, shares hits: the G
    envs of a group stepping one joint action cost one sandbox run. A :class:`CachingExecutor` passed in is returned
    as it is (a caller that wants a private cache passes its own). Without ``cache``, the bare executor.
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


__all__ = [
    "NoIsolationError",
    "choose_backend",
    "docker_available",
    "docker_status",
    "make_executor",
    "run_tests",
    "shared_executor",
]
