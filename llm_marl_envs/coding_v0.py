"""Collaborative coding, version 0: ``env()``, ``parallel_env()`` and ``raw_env``.

The documentation card is the docstring of :mod:`llm_marl_envs.envs.coding.env`.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils import parallel_to_aec

from llm_marl_envs.envs.coding import env as _card
from llm_marl_envs.envs.coding.env import CodingEnv

raw_env = CodingEnv


def parallel_env(**kwargs: Any) -> CodingEnv:
    return CodingEnv(**kwargs)


def env(**kwargs: Any) -> AECEnv:
    """The coding env through the AEC API (``parallel_to_aec``, which adds order enforcing)."""
    return parallel_to_aec(parallel_env(**kwargs))


# help(parallel_env) shows the env card (its keyword arguments, spaces, rewards and endings), not only "(**kwargs)".
parallel_env.__doc__ = f"The coding env as a PettingZoo ParallelEnv: ``CodingEnv(**kwargs)``.\n\n{_card.__doc__ or ''}"
