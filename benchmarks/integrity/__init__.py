"""Scripted strategies for the reward-integrity suite: honest references and the degenerate strategies an optimiser
could find, each a named way of filling a team's joint actions.

A strategy answers, for one task, a team and a turn, the joint action of the live agents, or ``None`` when it has
nothing more to say (the runner then ends the episode by sending ``<done/>`` for every live agent). Honest
strategies are the references every degenerate strategy must lose to (see ``benchmarks/reward_integrity.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llm_marl_envs.core.tasks import Task

ActionFn = Callable[[Task, Sequence[str], int], "dict[str, str] | None"]
"""``(task, live agents, turn starting at 1) -> {agent: action string}`` or ``None`` (stop)."""


@dataclass(frozen=True)
class Strategy:
    """A named scripted strategy for one env family (``"writing"`` or ``"coding"``)."""

    name: str
    env: str
    honest: bool
    description: str
    act: ActionFn
    team_sizes: tuple[int, ...] = (1, 2, 3, 4)
    """Team sizes the strategy makes sense for (a 'solo hog' needs a teammate to hog from)."""
