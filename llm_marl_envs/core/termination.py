"""When an episode ends.

* An agent that says ``<done/>`` is finished: it is *terminated* and leaves ``env.agents``; its last draft stays in
  the team's output (a reply that is only ``<done/>`` keeps the draft it had). So is an agent that resubmits its
  draft unchanged: it has nothing more to change (a small model that copies its draft when told "revise" ends
  instead of idling through the budget).
* The episode *terminates* for everyone when the task says the team's output is solved (the coding env: the team's
  program passes every visible test), when every agent has said ``<done/>``, or when a whole turn changed no live
  agent's draft (the team has converged; from the second turn on).
* ``end_quorum`` (an env setting, :data:`END_QUORUMS`) says how many finished agents end it before that: ``"all"``
  (every agent), ``"half"`` (half the team, rounded up: one agent of 2, two of 3 or 4) or ``"any"`` (one agent, as
  in AutoGen's and CAMEL's chats, where one agent's termination message ends the conversation). Left ``None``, each
  env picks its own (``CollaborativeTextEnv.DEFAULT_END_QUORUM``: writing ``"half"``; coding ``"half"`` under its
  default scheme and ``"all"`` under the others, ``CodingEnv.DEFAULT_END_QUORUM_BY_SCHEME``; MAGRPO mode ``"all"``).
  A team ended by its quorum ends with ``"quorum_done"``; the agents still working are terminated with it, and their
  last drafts stand. A quorum counts from the second turn on. On the first no agent has had feedback or a teammate's
  message, so a finish there is one agent's, not the team's; the agents still working get one more turn, with
  feedback on their first drafts and any message sent them (only everyone's ``<done/>`` ends turn 1). Without this
  a team trained under ``"half"`` learned to end on its first draft, before anyone coordinated
  (``docs/results/end-quorum/retrain-half``).
* The episode is *truncated* for everyone still live at ``max_turns``.

The number of turns taken is the task completion time, the latency term of the joint reward: every turn costs
``w_t``, so at equal final quality a team that ends at turn ``k`` earns ``w_t * (max_turns - k)`` more than one that
plays out the budget (``core/rewards.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

END_REASONS: tuple[str, ...] = ("solved", "all_done", "quorum_done", "converged", "max_turns")
"""Why an episode ends; MAGRPO mode adds ``"magrpo_threshold"`` (its official early termination)."""

END_QUORUMS: tuple[str, ...] = ("all", "half", "any")
"""How many finished agents end an episode for everyone (see the module docstring)."""


QUORUM_FROM_TURN = 2
"""The first turn at which a quorum of finished agents (short of everyone) can end the episode."""


def quorum_size(end_quorum: str, num_agents: int) -> int:
    """How many of ``num_agents`` agents must be finished for ``end_quorum`` to end the episode."""
    if end_quorum not in END_QUORUMS:
        raise ValueError(f"end_quorum: expected one of {END_QUORUMS}, got {end_quorum!r}")
    return {"all": num_agents, "half": (num_agents + 1) // 2, "any": 1}[end_quorum]


@dataclass(frozen=True)
class TurnOutcome:
    """Which agents end at this turn, and why."""

    terminated: frozenset[str]
    truncated: frozenset[str]
    reason: str | None
    """``None`` while the episode goes on, else one of :data:`END_REASONS`."""


def end_of_turn(
    turn: int,
    max_turns: int,
    live: list[str],
    done: Mapping[str, bool],
    drafts_changed: bool,
    solved: bool = False,
    quorum: int | None = None,
) -> TurnOutcome:
    """Decide the end of turn ``turn`` (1-based) for the ``live`` agents that just acted; ``done``: every agent of
    the team, those that finished on earlier turns included; ``solved``: the task's own success check passed on this
    turn's output; ``quorum``: how many finished agents end the episode from turn :data:`QUORUM_FROM_TURN` on
    (:func:`quorum_size`; ``None``: all)."""
    everyone = frozenset(live)
    if solved:
        return TurnOutcome(everyone, frozenset(), "solved")
    said_done = frozenset(a for a in live if done[a])
    if said_done == everyone:
        return TurnOutcome(everyone, frozenset(), "all_done")
    if quorum is not None and turn >= QUORUM_FROM_TURN and sum(1 for finished in done.values() if finished) >= quorum:
        return TurnOutcome(everyone, frozenset(), "quorum_done")
    if turn >= 2 and not drafts_changed:
        return TurnOutcome(everyone, frozenset(), "converged")
    if turn >= max_turns:
        return TurnOutcome(said_done, everyone - said_done, "max_turns")
    return TurnOutcome(said_done, frozenset(), None)
