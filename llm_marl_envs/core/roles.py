"""Roles: who an agent is, what part of the task it sees, and what it is asked to write."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llm_marl_envs.core.tasks import Task


@dataclass(frozen=True)
class Role:
    """One agent's role in a team.

    Attributes:
        name: the agent id used in every per-agent dict (``"concise"``, ``"aux"``...).
        title: a short human-readable title shown in observations.
        instruction: what this role must write — a text, or a function of the task (to name its entry point, say);
            the last thing in its observation, the cue the model answers.
        view: the role's *private* view of the task (partial observability starts here).
    """

    name: str
    title: str
    instruction: str | Callable[[Task], str]
    view: Callable[[Task], str]

    def instruction_for(self, task: Task) -> str:
        """The instruction for ``task``."""
        return self.instruction(task) if callable(self.instruction) else self.instruction


def team_for(catalogue: Sequence[Role], solo: Role, num_agents: int) -> tuple[Role, ...]:
    """Return the team for ``num_agents``: the solo role for 1, else the first ``num_agents`` of ``catalogue``."""
    if isinstance(num_agents, bool) or not isinstance(num_agents, int):
        raise TypeError(f"num_agents: expected int, got {type(num_agents).__name__}")
    if num_agents == 1:
        return (solo,)
    if not 2 <= num_agents <= len(catalogue):
        raise ValueError(f"num_agents: expected 1..{len(catalogue)}, got {num_agents}")
    return tuple(catalogue[:num_agents])
