"""Collaborative writing, version 0: ``env()``, ``parallel_env()`` and ``raw_env``.

The documentation card is the docstring of :mod:`llm_marl_envs.envs.writing.env`.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv

from llm_marl_envs.core.aec import to_aec
from llm_marl_envs.envs.writing import env as _card
from llm_marl_envs.envs.writing.config import WritingConfig
from llm_marl_envs.envs.writing.env import WritingEnv

raw_env = WritingEnv


def parallel_env(config: WritingConfig | None = None, **keywords: Any) -> WritingEnv:
    return WritingEnv(config, **keywords)


def env(config: WritingConfig | None = None, **keywords: Any) -> AECEnv:
    """The writing env through the AEC API: ``parallel_to_aec`` (order enforcing included) with bad actions refused
    before anything changes (:mod:`llm_marl_envs.core.aec`); the arguments are ``parallel_env``'s. PettingZoo's
    ``api_test`` does not apply (its observation checks assume arrays: a text observation has no ``dtype``);
    ``tests/test_env_api.py`` runs the checks of it that apply to text."""
    return to_aec(parallel_env(config, **keywords))


# help(parallel_env) shows the env card (its keyword arguments, spaces, rewards and endings) and, as IDEs and
# notebooks do, every keyword with its default (made from WritingConfig's fields), not only "(**keywords)".
parallel_env.__doc__ = f"The writing env as a ParallelEnv: ``WritingEnv(config, **keywords)``.\n\n{_card.__doc__ or ''}"
parallel_env.__signature__ = WritingConfig.signature(WritingEnv)  # type: ignore[attr-defined]
env.__signature__ = WritingConfig.signature(AECEnv)  # type: ignore[attr-defined]
