"""Collaborative coding, version 0: ``env()``, ``parallel_env()`` and ``raw_env``.

The documentation card is the docstring of :mod:`llm_marl_envs.envs.coding.env`.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv

from llm_marl_envs.core.aec import to_aec
from llm_marl_envs.envs.coding import env as _card
from llm_marl_envs.envs.coding.config import CodingConfig
from llm_marl_envs.envs.coding.env import CodingEnv

raw_env = CodingEnv


def parallel_env(config: CodingConfig | None = None, **keywords: Any) -> CodingEnv:
    return CodingEnv(config, **keywords)


def env(config: CodingConfig | None = None, **keywords: Any) -> AECEnv:
    """The coding env through the AEC API: ``parallel_to_aec`` (order enforcing included) with bad actions refused
    before anything changes (:mod:`llm_marl_envs.core.aec`); the arguments are ``parallel_env``'s. PettingZoo's
    ``api_test`` does not apply (its observation checks assume arrays: a text observation has no ``dtype``);
    ``tests/test_env_api.py`` runs the checks of it that apply to text."""
    return to_aec(parallel_env(config, **keywords))


# help(parallel_env) shows the env card (its keyword arguments, spaces, rewards and endings) and, as IDEs and
# notebooks do, every keyword with its default (made from CodingConfig's fields), not only "(**keywords)".
parallel_env.__doc__ = f"The coding env as a ParallelEnv: ``CodingEnv(config, **keywords)``.\n\n{_card.__doc__ or ''}"
parallel_env.__signature__ = CodingConfig.signature(CodingEnv)  # type: ignore[attr-defined]
env.__signature__ = CodingConfig.signature(AECEnv)  # type: ignore[attr-defined]
