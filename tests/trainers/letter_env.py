"""A tiny text env where reward is easy to raise: each agent is paid the share of its text that is the letter 'e'.

A plain PettingZoo ParallelEnv (no suite machinery): the trainer drives it through the rollout runner's ``ChatEnv``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pettingzoo import ParallelEnv

from llm_marl_envs.core.spaces import UnicodeText


class LetterEnv(ParallelEnv):
    """One turn; every agent writes text; the joint reward is the mean share of 'e' among the letters written."""

    metadata: ClassVar[dict[str, Any]] = {"name": "letter_v0", "render_modes": []}

    def __init__(self, num_agents: int = 2) -> None:
        self.possible_agents = [f"writer_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self._space = UnicodeText(4096)

    def observation_space(self, agent: str) -> UnicodeText:
        return self._space

    def action_space(self, agent: str) -> UnicodeText:
        return self._space

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents = list(self.possible_agents)
        return {a: "Write some text." for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict, dict[str, Any]]:
        shares = [_share_of_e(actions[a]) for a in self.agents]
        reward = sum(shares) / len(shares)
        agents, self.agents = self.agents, []
        return (
            {a: "" for a in agents},
            {a: reward for a in agents},
            {a: True for a in agents},
            {a: False for a in agents},
            {a: {"reward_components": {"quality": reward}} for a in agents},
        )


def _share_of_e(text: str) -> float:
    letters = [c for c in text.lower() if c.isalpha()]
    return sum(c == "e" for c in letters) / len(letters) if letters else 0.0
