"""Sandboxed unit-test executor: run model-written code against unit tests with verdicts the code cannot forge.

>>> from llm_marl_envs.sandbox import run_tests
>>> report = run_tests("def add(a, b):\\n    return a + b", ["assert add(1, 2) == 3"], backend="local")
>>> report.passed, report.total
(1, 1)

Backends: ``"docker"`` (hardened containers from a warm pool), ``"bwrap"`` (bubblewrap namespaces from a warm pool:
isolation without Docker), ``"local"`` (a subprocess with rlimits; not isolation, used only when named) and
``"auto"`` (Docker when an engine has the image, else bwrap, else :class:`NoIsolationError`). See ``README.md`` next
to this file for the threat model and the guarantees of each backend.
"""

from llm_marl_envs.sandbox.backends import (
    NoIsolationError,
    choose_backend,
    docker_available,
    docker_status,
    make_executor,
    run_tests,
    shared_executor,
)
from llm_marl_envs.sandbox.executor import BACKENDS, CachingExecutor, Executor, verdict_key
from llm_marl_envs.sandbox.harness.judge import checked_call, program_names
from llm_marl_envs.sandbox.image import DEFAULT_IMAGE
from llm_marl_envs.sandbox.splitting import split_tests
from llm_marl_envs.sandbox.types import STATUSES, SandboxError, SandboxLimits, TestJob, TestOutcome, TestReport

__all__ = [
    "BACKENDS",
    "DEFAULT_IMAGE",
    "STATUSES",
    "CachingExecutor",
    "Executor",
    "NoIsolationError",
    "SandboxError",
    "SandboxLimits",
    "TestJob",
    "TestOutcome",
    "TestReport",
    "checked_call",
    "choose_backend",
    "docker_available",
    "docker_status",
    "make_executor",
    "program_names",
    "run_tests",
    "shared_executor",
    "split_tests",
    "verdict_key",
]
