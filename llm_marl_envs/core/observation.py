"""One agent's observation: the text a policy reads before it acts.

Under ``observability="local"`` (the Dec-POMDP default) an agent observes only its role's instruction and view of the
task, its own latest draft, the feedback addressed to it, and the messages teammates sent it. It never sees a
teammate's draft. ``observability="team"`` adds the teammates' latest drafts (prompt-based baselines use it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llm_marl_envs.core.channel import Message

OBSERVABILITY: tuple[str, ...] = ("local", "team")

PROTOCOL_HELP = (
    "How to answer: write your part directly; it replaces your previous draft. "
    'To message teammates, wrap text in <message>...</message> (all) or <message to="ROLE">...</message> (one). '
    "Write <done/> when your part is final."
)

MAX_INBOX_MESSAGES = 8
"""Only the latest messages are shown, so long dialogues keep observations bounded."""


@dataclass(frozen=True)
class ObservationParts:
    """Everything one agent may see at one turn; :func:`render_observation` turns it into text."""

    agent: str
    role_title: str
    instruction: str
    task_view: str
    turn: int
    max_turns: int
    teammates: Sequence[str]
    own_draft: str
    feedback: str
    inbox: Sequence[Message]
    teammate_drafts: Mapping[str, str] | None


def render_observation(parts: ObservationParts, max_chars: int) -> str:
    """Render ``parts`` as a Markdown-ish prompt of at most ``max_chars`` characters.

    The role, instruction and protocol come first and survive truncation; the task view is cut first, with a
    visible marker, because it is the longest part and the rest is what changes from turn to turn.
    """
    header = [
        f"# Role: {parts.role_title} ({parts.agent})",
        parts.instruction,
        f"Turn {parts.turn + 1} of {parts.max_turns}. Teammates: {', '.join(parts.teammates) or 'none'}.",
        PROTOCOL_HELP,
    ]
    tail: list[str] = [f"## Your current draft\n{parts.own_draft or '(none yet)'}"]
    if parts.feedback:
        tail.append(f"## Feedback\n{parts.feedback}")
    if parts.inbox:
        lines = [f"- from {m.sender} (turn {m.turn}): {m.text}" for m in parts.inbox[-MAX_INBOX_MESSAGES:]]
        tail.append("## Messages to you\n" + "\n".join(lines))
    if parts.teammate_drafts is not None:
        drafts = [f"### {name}\n{text or '(none yet)'}" for name, text in parts.teammate_drafts.items()]
        tail.append("## Teammates' current drafts\n" + "\n".join(drafts))

    head_text = "\n".join(header)
    tail_text = "\n\n".join(tail)
    task = f"## Task\n{parts.task_view}"
    budget = max_chars - len(head_text) - len(tail_text) - 4
    if len(task) > budget:
        marker = "\n[... task text truncated ...]"
        task = task[: max(0, budget - len(marker))] + marker
    text = f"{head_text}\n\n{task}\n\n{tail_text}"
    return text[:max_chars]
