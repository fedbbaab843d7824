"""The one table of the suite's envs: name → versioned module, PettingZoo id and config.

Everything that needs the list of envs (the package's PettingZoo registration, the CLI, the baselines, the study,
the trainer) reads :data:`ENVS`; no other module names them.

>>> from llm_marl_envs.registry import ENV_NAMES, make_env
>>> ENV_NAMES
('writing', 'coding')
>>> env = make_env("writing", num_agents=2, similarity="tfidf")
>>> env.possible_agents
['concise', 'detailed']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EnvSpec:
    """One env of the suite."""

    name: str
    """Short name used by the CLI, the baselines and configs (``"writing"``)."""
    module: str
    """The versioned PettingZoo-style module exposing ``env()``, ``parallel_env()`` and ``raw_env``."""
    env_id: str
    """The id registered with ``pettingzoo.make("parallel", ...)``."""
    summary: str

    @property
    def entry_point(self) -> str:
        """``module:parallel_env``, as PettingZoo's registry wants it."""
        return f"{self.module}:parallel_env"

    def parallel_env(self) -> Callable[..., Any]:
        """The module's ``parallel_env`` constructor (imported on first use)."""
        return importlib.import_module(self.module).parallel_env


ENVS: dict[str, EnvSpec] = {
    spec.name: spec
    for spec in (
        EnvSpec("writing", "llm_marl_envs.writing_v0", "llm_marl_envs/Writing-v0", "a team writes parts of a summary"),
        EnvSpec("coding", "llm_marl_envs.coding_v0", "llm_marl_envs/Coding-v0", "a team writes one Python function"),
    )
}
ENV_NAMES: tuple[str, ...] = tuple(ENVS)


def canonical_name(name: str) -> str:
    """``name`` as the registry keys it: ``"writing_v0"`` (the module's name, PettingZoo style) is ``"writing"``.
    Other names pass unchanged (:func:`env_spec` rejects the unknown ones)."""
    if isinstance(name, str) and name.endswith("_v0") and name[: -len("_v0")] in ENVS:
        return name[: -len("_v0")]
    return name


def env_spec(name: str) -> EnvSpec:
    """The spec of ``name`` (``writing`` or ``writing_v0``); a ``ValueError`` lists the known names."""
    name = canonical_name(name)
    if name not in ENVS:
        raise ValueError(f"env: expected one of {ENV_NAMES}, got {name!r}")
    return ENVS[name]


def make_env(name: str, config: Any = None, **keywords: Any) -> Any:
    """Build env ``name`` as a PettingZoo ParallelEnv from its config dataclass (``WritingConfig``...) and/or
    keywords: the arguments of its ``parallel_env`` (see its card)."""
    return env_spec(name).parallel_env()(config, **keywords)
