"""When an episode ends.

* An agent that says ``<done/>`` is finished: it is *terminated* and leaves ``env.agents``; its last draft stays in
  the team's output.
* The episode *terminates* for everyone when every agent has said ``<done/>``, or when a whole turn changed no
  live agent's draft (the team has converged; from the second turn on).
* The episode is *truncated* for everyone still live at ``max_turns``.

The number of turns taken is the task completion time, the latency term of the joint reward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TurnOutcome:
    """Which agents end at this turn, and why."""

    terminated: frozenset[str]
    truncated: frozenset[str]
    reason: str | None
    """``None`` while the episode goes on, else ``"all_done"``, ``"converged"`` or ``"max_turns"``."""


def end_of_turn(
    turn: int, max_turns: int, live: list[str], done: Mapping[str, bool], drafts_changed: bool
) -> TurnOutcome:
    """Decide the end of turn ``turn`` (1-based) for the ``live`` agents that just acted."""
    said_done = frozenset(a for a in live if done[a])
    if said_done == frozenset(live):
        return TurnOutcome(frozenset(live), frozenset(), "all_done")
    if turn >= 2 and not drafts_changed:
        return TurnOutcome(frozenset(live), frozenset(), "converged")
    if turn >= max_turns:
        return TurnOutcome(said_done, frozenset(live) - said_done, "max_turns")
    return TurnOutcome(said_done, frozenset(), None)
