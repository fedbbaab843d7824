"""One agent's observation: the text a policy reads before it acts.

Under ``observability="local"`` (the Dec-POMDP default) an agent observes only its role's instruction and view of the
task, its own latest draft, the feedback addressed to it, and the messages teammates sent it. It never sees a
teammate's draft. ``observability="team"`` adds the teammates' latest drafts (prompt-based baselines use it).

The text is written for small models as much as for large ones. SmolLM2-135M-Instruct, the default model, copies
visible scaffolding — Markdown headers, bracketed placeholders, numbered lists of sections — into its answer, and
follows the last instruction it read best. So an observation is plain labelled paragraphs with no headers or
placeholders: first what the agent reads (the task, its own draft, feedback, messages, teammates' drafts), then who
it is and how to answer, and last what to write (the instruction is the very last line: the cue). Empty sections are
left out rather than shown as "(none)".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llm_marl_envs.core.channel import Message

OBSERVABILITY: tuple[str, ...] = ("local", "team")

PROTOCOL_HELP = (
    "Your reply replaces your draft. Optional: <message>...</message> sends a note to your teammates "
    '(<message to="ROLE">...</message> to one), and <done/> ends your work.'
)
"""The action protocol in one line (:mod:`llm_marl_envs.core.protocol`); teams only: a solo agent has no one to
message, and its episode ends by itself."""

SOLO_PROTOCOL_HELP = "Your reply replaces your draft; add <done/> when it is final."

MAX_INBOX_MESSAGES = 8
"""Only the latest messages are shown, so long dialogues keep observations bounded."""

TRUNCATION_MARKER = " [... text cut ...]"

OWN_DRAFT_LABEL = "Your draft so far:"
FEEDBACK_LABEL = "Feedback on your draft:"
INBOX_LABEL = "Messages to you:"
TEAM_DRAFTS_LABEL = "Your teammates' current drafts:"
CONTEXT_LABELS: tuple[str, ...] = (OWN_DRAFT_LABEL, FEEDBACK_LABEL, INBOX_LABEL, TEAM_DRAFTS_LABEL)
"""The labels of an observation's context paragraphs. A reply that repeats one on a line of its own copied the
observation's scaffolding instead of writing its part (:func:`echoes_scaffolding`)."""


def echoes_scaffolding(text: str) -> bool:
    """Whether ``text`` (an agent's draft) contains one of :data:`CONTEXT_LABELS` as a line of its own: a small model
    echoing its observation (seen with SmolLM2-135M at turn 2: ``Feedback on your draft:`` and its own draft again)."""
    return any(line.strip() in CONTEXT_LABELS for line in text.splitlines())


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
    """Render ``parts`` as plain text of at most ``max_chars`` characters: context first, the cue last.

    The cue (role, turn, instruction, protocol) and what changes from turn to turn survive truncation; the task view,
    the longest part, is cut first, with a visible marker.
    """
    context: list[str] = []
    if parts.own_draft:
        context.append(f"{OWN_DRAFT_LABEL}\n{parts.own_draft}")
    if parts.feedback:
        context.append(f"{FEEDBACK_LABEL}\n{parts.feedback}")
    if parts.inbox:
        lines = [f"From {m.sender} (turn {m.turn}): {m.text}" for m in parts.inbox[-MAX_INBOX_MESSAGES:]]
        context.append(f"{INBOX_LABEL}\n" + "\n".join(lines))
    if parts.teammate_drafts is not None:
        drafts = [f"{name} wrote:\n{text}" if text else f"{name} has written nothing yet."
                  for name, text in parts.teammate_drafts.items()]
        context.append(f"{TEAM_DRAFTS_LABEL}\n" + "\n\n".join(drafts))

    team = (f"You are the {parts.role_title.lower()} ({parts.agent}) in a team with {', '.join(parts.teammates)}."
            if parts.teammates else f"You are the {parts.role_title.lower()} ({parts.agent}), working alone.")
    protocol = PROTOCOL_HELP if parts.teammates else SOLO_PROTOCOL_HELP
    cue = f"{team} Turn {parts.turn + 1} of {parts.max_turns}. {protocol}\n{parts.instruction}"

    rest = "\n\n".join([*context, cue])
    budget = max_chars - len(rest) - 2
    task = parts.task_view
    if len(task) > budget:
        task = task[: max(0, budget - len(TRUNCATION_MARKER))] + TRUNCATION_MARKER
    text = f"{task}\n\n{rest}"
    return text if len(text) <= max_chars else text[-max_chars:]  # even the cue is too long: keep its end
