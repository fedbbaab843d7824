"""One agent's observation: the text a policy reads before it acts.

Under ``observability="local"`` (the Dec-POMDP default) an agent observes only its role's instruction and view of the
task, its own latest draft, the feedback addressed to it, and the messages teammates sent it. It never sees a
teammate's draft. ``observability="team"`` adds the teammates' latest drafts (prompt-based baselines use it).

The text is written for small models, and kept short. SmolLM2-135M-Instruct, the default model, copies visible
scaffolding — Markdown headers, bracketed placeholders, numbered lists of sections — into its answer, and follows the
last instruction it read best. So an observation is plain labelled paragraphs with no headers or placeholders: first
what the agent reads (the task once, its own draft once, feedback, messages, teammates' drafts), then one line of who
it is and how to answer, and last what to write (the instruction, followed by the offer to end with ``<done/>``).
Empty sections are left out rather than shown as "(none)". Every prompt is read once per sample by generation and by
the trainer's update, so each line earns its tokens (``benchmarks/prompt_tokens.py`` measures them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llm_marl_envs.core.channel import Message

OBSERVABILITY: tuple[str, ...] = ("local", "team")

PROTOCOL_HELP = "Notes to teammates go in <message>...</message>."
"""The action protocol in one line (:mod:`llm_marl_envs.core.protocol`), teams only (a solo agent has no one to
message). ``<message to="ROLE">`` and the rest are in the env cards; a small model uses the plain form or nothing."""

REPLACES_DRAFT = "Your reply replaces your draft."
DONE_OFFER = "When your part is final, end your reply with:\n<done/>"
"""The ending an agent can reach, offered every turn (the last lines of the observation): a reply that ends with
``<done/>`` finishes the agent's work, one that is only ``<done/>`` keeps its draft, and one that resubmits the draft
unchanged finishes it too (:mod:`llm_marl_envs.core.termination`); the turn cost pays for ending early. Worded for
SmolLM2-135M: probed on train-split writing tasks (8 episodes, 16 turn-2 replies), "If your part needs no change,
answer only <done/>." and three other phrasings drew no ``<done/>`` at all; this one, with the tag alone on the last
line, drew 3 of 16. Offered from the first turn too (a part may be final at once): offered from the second turn
only, 1 of 8 untrained episodes per env ended before a budget of 4 turns. Another wording: ``done_offer`` in the
env's observation settings (``make_env(..., done_offer=TEXT)``)."""

MAX_DONE_OFFER_CHARS = 200
"""Longest offer to end an env accepts: it is read every turn, so it stays a line or two."""

MAX_INBOX_MESSAGES = 8
"""Only the latest messages are shown, so long dialogues keep observations bounded."""

TRUNCATION_MARKER = " [... text cut ...]"
MIN_KEPT_CHARS = 24
"""A message or feedback that a cut would leave shorter than this says nothing useful: it is left out whole."""

OWN_DRAFT_LABEL = "Your draft:"
FEEDBACK_LABEL = "Feedback:"
INBOX_LABEL = "Messages:"
TEAM_DRAFTS_LABEL = "Teammates' drafts:"
CONTEXT_LABELS: tuple[str, ...] = (OWN_DRAFT_LABEL, FEEDBACK_LABEL, INBOX_LABEL, TEAM_DRAFTS_LABEL)
"""The labels of an observation's context paragraphs, each on a line of its own. A reply that repeats one on a line
of its own copied the observation's scaffolding instead of writing its part (:func:`echoes_scaffolding`)."""


CUE_SENTENCES: tuple[str, ...] = (REPLACES_DRAFT, PROTOCOL_HELP, DONE_OFFER.splitlines()[0])
"""Sentences of the cue (:func:`cue`) that no part has a reason to contain: a part that does copied its prompt's last
lines. In the results logs (docs/results/results-*/episodes.jsonl, every env and size) the labels alone flagged no
final part; with these sentences and the turn header 95 of 896 untrained parts, 51 of 896 adapters-off, 14 of 328
single-agent and 12 of 896 trained ones are flagged."""

_TURN_HEADER = re.compile(r"\bTurn \d+ of \d+\.")


def echoes_scaffolding(text: str) -> bool:
    """Whether ``text`` (an agent's draft) copies its observation's scaffolding: one of :data:`CONTEXT_LABELS` as a
    line of its own (seen with SmolLM2-135M at turn 2: the feedback label and its own draft again), a sentence of the
    cue (:data:`CUE_SENTENCES`) or the cue's turn header ("Turn 2 of 4.") anywhere in it."""
    if any(line.strip() in CONTEXT_LABELS for line in text.splitlines()):
        return True
    return any(sentence in text for sentence in CUE_SENTENCES) or _TURN_HEADER.search(text) is not None


@dataclass(frozen=True)
class ObservationParts:
    """Everything one agent may see at one turn; :func:`render_observation` turns it into text."""

    agent: str
    instruction: str
    task_view: str
    turn: int
    """Turns played so far (0 right after ``reset``); the observation is for turn ``turn + 1``."""
    max_turns: int
    teammates: Sequence[str]
    own_draft: str
    feedback: str
    inbox: Sequence[Message]
    teammate_drafts: Mapping[str, str] | None
    done_offer: str = DONE_OFFER
    """The offer to end, the observation's last lines (``""``: none)."""


def cue(parts: ObservationParts) -> str:
    """The end of an observation: who the agent is and the turn, the protocol, the instruction, and the offer to end
    (the last lines: what a small model answers best)."""
    if parts.teammates:
        team = f"You are {parts.agent}, with {_joined(parts.teammates)}."
        protocol = f" {PROTOCOL_HELP}"
    else:
        team, protocol = f"You are {parts.agent}, working alone.", ""
    header = f"{team} Turn {parts.turn + 1} of {parts.max_turns}.{protocol}"
    if parts.own_draft:
        header += f" {REPLACES_DRAFT}"
    return "\n".join([header, parts.instruction, parts.done_offer] if parts.done_offer else [header, parts.instruction])


def render_observation(parts: ObservationParts, max_chars: int) -> str:
    """Render ``parts`` as plain text of at most ``max_chars`` characters: the task first, context, the cue last.

    When everything does not fit, what changes every turn and matters least gives way first, each cut shown:
    messages, oldest first (a line ``[N earlier messages left out for length]`` opens the inbox; the last one left
    is cut at its end if need be), then teammates' drafts (longest first), then feedback. The task view and the
    agent's own draft are never touched while those can give way; only when the two of them and the cue exceed
    ``max_chars`` on their own are they cut at their ends with :data:`TRUNCATION_MARKER` (the draft first), and past
    that the cue keeps its end.
    """
    view = _View(
        task=parts.task_view,
        own_draft=parts.own_draft,
        feedback=parts.feedback,
        messages=[f"From {m.sender}: {m.text}" for m in parts.inbox[-MAX_INBOX_MESSAGES:]],
        teammate_drafts=None if parts.teammate_drafts is None else dict(parts.teammate_drafts),
        cue=cue(parts),
    )
    while (excess := len(view.text()) - max_chars) > 0:
        if view.messages:
            kept = len(view.messages[0]) - excess - len(TRUNCATION_MARKER)
            if len(view.messages) > 1 or kept < MIN_KEPT_CHARS:
                view.messages.pop(0)
                view.left_out += 1
            else:
                view.messages[0] = _shortened(view.messages[0], excess)
        elif view.teammate_drafts and max(map(len, view.teammate_drafts.values())) > len(TRUNCATION_MARKER):
            longest = max(view.teammate_drafts, key=lambda name: len(view.teammate_drafts[name]))
            view.teammate_drafts[longest] = _shortened(view.teammate_drafts[longest], excess)
        elif view.feedback:
            kept = len(view.feedback) - excess - len(TRUNCATION_MARKER)
            view.feedback = _shortened(view.feedback, excess) if kept >= MIN_KEPT_CHARS else ""
        elif len(view.own_draft) > len(TRUNCATION_MARKER):
            view.own_draft = _shortened(view.own_draft, excess)
        elif len(view.task) > len(TRUNCATION_MARKER):
            view.task = _shortened(view.task, excess)
        else:  # even the cue is too long: keep its end, the instruction and the offer to end
            text = view.text()
            return text[-max_chars:]
    return view.text()


@dataclass
class _View:
    """The pieces of one observation while :func:`render_observation` fits them into its budget."""

    task: str
    own_draft: str
    feedback: str
    messages: list[str]
    teammate_drafts: dict[str, str] | None
    cue: str
    left_out: int = 0
    """Messages left out for length (the oldest)."""

    def text(self) -> str:
        context: list[str] = []
        if self.own_draft:
            context.append(f"{OWN_DRAFT_LABEL}\n{self.own_draft}")
        if self.feedback:
            context.append(f"{FEEDBACK_LABEL}\n{self.feedback}")
        if self.messages or self.left_out:
            plural = "s" if self.left_out > 1 else ""
            marker = [f"[{self.left_out} earlier message{plural} left out for length]"] if self.left_out else []
            context.append(f"{INBOX_LABEL}\n" + "\n".join([*marker, *self.messages]))
        if self.teammate_drafts is not None:
            drafts = [f"{name} wrote:\n{text}" if text else f"{name} has written nothing yet."
                      for name, text in self.teammate_drafts.items()]
            context.append(f"{TEAM_DRAFTS_LABEL}\n" + "\n\n".join(drafts))
        return "\n\n".join([self.task, *context, self.cue])


def _shortened(text: str, by: int) -> str:
    """``text`` at least ``by`` characters shorter, its start kept and :data:`TRUNCATION_MARKER` at the cut."""
    keep = max(0, len(text) - by - len(TRUNCATION_MARKER))
    return text[:keep] + TRUNCATION_MARKER


def render_chat(messages: Sequence[Mapping[str, str]]) -> str:
    """Chat messages (``env.chat_messages(agent)``) as plain text: each message's content verbatim, under a line
    ``--- ROLE ---``. The env cards show their sample chats this way, generated from the env and tested
    (``tests/test_env_api.py``)."""
    return "\n".join(f"--- {message['role']} ---\n{message['content']}" for message in messages)


def _joined(names: Sequence[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
