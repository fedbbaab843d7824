"""llm-marl-envs: collaborative LLM agents as Dec-POMDPs, with PettingZoo ParallelEnvs.

>>> from llm_marl_envs import writing_v0
>>> env = writing_v0.parallel_env(num_agents=2)
>>> observations, infos = env.reset(seed=0)
>>> sorted(observations)
['concise', 'detailed']

Importing the package registers ``llm_marl_envs/Writing-v0`` and ``llm_marl_envs/Coding-v0`` with
``pettingzoo.make("parallel", ...)``. It never imports torch or transformers.
"""

from __future__ import annotations

import pettingzoo

from llm_marl_envs import writing_v0
from llm_marl_envs.registry import ENVS

__version__ = "0.1.0"
__all__ = ["ENV_IDS", "coding_v0", "writing_v0"]

ENV_IDS: dict[str, str] = {spec.env_id: spec.entry_point for spec in ENVS.values()}
"""PettingZoo ids of the suite's envs (from :mod:`llm_marl_envs.registry`)."""


def _register() -> None:
    registered = pettingzoo.parallel_registry if hasattr(pettingzoo, "parallel_registry") else {}
    for env_id, entry_point in ENV_IDS.items():
        if env_id not in registered:
            pettingzoo.register("parallel", env_id, entry_point=entry_point)


_register()
