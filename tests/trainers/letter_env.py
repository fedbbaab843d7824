"""A tiny text env where reward is easy to raise: each agent is paid the share of its letters that are target letters.

A plain PettingZoo ParallelEnv (no suite machinery): the trainer drives it through the rollout runner's ``ChatEnv``.
Options make the variants the trainer tests need: ``letters`` (the target set; ``"aeiou"`` gives a signal a tiny
random model picks up in a few dozen steps), ``per_agent`` (each agent paid its own share instead of the team's
mean) and ``nonfinite_from_seed`` (episodes reset with a seed at or above it pay NaN: a broken reward in a real run).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pettingzoo import ParallelEnv

from llm_marl_envs.core.spaces import UnicodeText


class LetterEnv(ParallelEnv):
    """One turn; every agent writes text; the joint reward is the mean share of target letters among the letters
    written (or, ``per_agent``, each agent's own share)."""

    metadata: ClassVar[dict[str, Any]] = {"name": "letter_v0", "render_modes": []}

    def __init__(self, num_agents: int = 2, letters: str = "e", per_agent: bool = False,
                 nonfinite_from_seed: int | None = None) -> None:
        self.possible_agents = [f"writer_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self.letters = letters
        self.per_agent = per_agent
        self.nonfinite_from_seed = nonfinite_from_seed
        self._nonfinite = False
        self._space = UnicodeText(4096)

    def observation_space(self, agent: str) -> UnicodeText:
        return self._space

    def action_space(self, agent: str) -> UnicodeText:
        return self._space

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents = list(self.possible_agents)
        self._nonfinite = self.nonfinite_from_seed is not None and seed is not None and seed >= self.nonfinite_from_seed
        return {a: "Write some text." for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, str]) -> tuple[dict, dict, dict, dict, dict[str, Any]]:
        shares = {a: share_of(actions[a], self.letters) for a in self.agents}
        team = sum(shares.values()) / len(shares)
        rewards = {a: (shares[a] if self.per_agent else team) for a in self.agents}
        if self._nonfinite:
            rewards = dict.fromkeys(rewards, float("nan"))
        agents, self.agents = self.agents, []
        return (
            {a: "" for a in agents},
            rewards,
            {a: True for a in agents},
            {a: False for a in agents},
            {a: {"reward_components": {"quality": team}} for a in agents},
        )


def share_of(text: str, letters: str) -> float:
    """The share of ``text``'s letters that are in ``letters`` (0 for text without letters)."""
    found = [c for c in text.lower() if c.isalpha()]
    return sum(c in letters for c in found) / len(found) if found else 0.0
