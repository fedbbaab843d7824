"""Registers the sandbox fixtures (defined in ``sandbox_fixtures`` so test modules can import its helpers)."""

from sandbox_fixtures import bait, docker_executor, executor

__all__ = ["bait", "docker_executor", "executor"]
