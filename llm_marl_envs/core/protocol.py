"""The action protocol: how one agent's action string becomes a draft, messages and a done flag.

An action is free text. Inside it:

* ``<message>...</message>`` sends the enclosed text to every teammate;
* ``<message to="ROLE">...</message>`` sends it to one teammate (``to="a,b"`` to several);
* ``<done/>`` says the agent has finished. It is read as leniently as a small model writes it — ``<done>``,
  ``</done>``, ``<done />``, a ``<done/`` left open — and every such tag is removed from the draft: of the 22 done
  tags the untrained SmolLM2-135M team wrote in 24 train-split writing episodes, 12 were malformed (10 of them in
  the forms read here);
* everything else, stripped, is the agent's draft of its part;
* a line that repeats one of the observation's labels (``Feedback:``, ``Your draft:``...) ends the reply: a small
  model that echoes its observation writes its part first and then the prompt's scaffolding, which is no part of
  anything (the problem ``echoed_observation`` is reported).

Parsing never raises on model text. Whatever is wrong (an unclosed tag, an unknown recipient, an empty action) is
reported in :attr:`ParsedAction.problems`; the env turns problems into a reward cost and an ``infos`` flag.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from llm_marl_envs.core.observation import CONTEXT_LABELS

_MESSAGE = re.compile(r"<message(?P<attrs>[^>]*)>(?P<body>.*?)</message\s*>", re.DOTALL | re.IGNORECASE)
_TO_ATTR = re.compile(r"""^\s*to\s*=\s*["']?(?P<to>[^"']*)["']?\s*$""", re.IGNORECASE)
DONE_TAG = re.compile(r"<done\s*/(?![\w(])\s*>?|</?done\s*>", re.IGNORECASE)
"""``<done/>`` and the forms a small model writes for it (see the module docstring). Code stays code: ``i<done``,
``a<done/2`` and ``<doneness>`` are no tag."""
_STRAY_TAG = re.compile(r"</?message\b[^>]*>?", re.IGNORECASE)


@dataclass(frozen=True)
class OutgoingMessage:
    """A message parsed from an action, before it is stamped with a sender and a turn."""

    recipients: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class ParsedAction:
    """What one action string means under the protocol."""

    draft: str
    messages: tuple[OutgoingMessage, ...]
    done: bool
    problems: tuple[str, ...]

    @property
    def is_valid(self) -> bool:
        """True when the action followed the protocol and said something."""
        return not self.problems


def parse_action(text: str, sender: str, teammates: Collection[str]) -> ParsedAction:
    """Parse ``text``, written by ``sender``, whose messages may go to ``teammates``.

    Problems reported: ``empty_action``, ``unclosed_message_tag``, ``empty_message``, ``bad_message_attribute``,
    ``unknown_recipient:NAME``, ``message_to_self``, ``no_teammates``, ``echoed_observation``. A message with no
    valid recipient is dropped.
    """
    problems: list[str] = []
    text, echoed = _before_echo(text)
    if echoed:
        problems.append("echoed_observation")
    messages: list[OutgoingMessage] = []
    for match in _MESSAGE.finditer(text):
        body = match.group("body").strip()
        recipients = _recipients(match.group("attrs"), sender, teammates, problems)
        if not body:
            problems.append("empty_message")
        elif recipients:
            messages.append(OutgoingMessage(recipients=recipients, text=body))

    remainder = _MESSAGE.sub("", text)
    done = bool(DONE_TAG.search(remainder))
    remainder = DONE_TAG.sub("", remainder)
    if _STRAY_TAG.search(remainder):
        problems.append("unclosed_message_tag")
        remainder = _STRAY_TAG.sub("", remainder)
    draft = remainder.strip()
    if not draft and not messages and not done:
        problems.append("empty_action")
    return ParsedAction(draft=draft, messages=tuple(messages), done=done, problems=tuple(problems))


def _before_echo(text: str) -> tuple[str, bool]:
    """``text`` up to its first line that is an observation label, and whether there was one."""
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.strip() in CONTEXT_LABELS:
            return "".join(lines[:index]), True
    return text, False


def _recipients(attrs: str, sender: str, teammates: Collection[str], problems: list[str]) -> tuple[str, ...]:
    others = tuple(name for name in teammates if name != sender)
    if not others:
        problems.append("no_teammates")
        return ()
    if not attrs.strip():
        return others
    match = _TO_ATTR.match(attrs)
    if match is None:
        problems.append("bad_message_attribute")
        return ()
    chosen: list[str] = []
    for name in (part.strip() for part in match.group("to").split(",")):
        if name == sender:
            problems.append("message_to_self")
        elif name not in others:
            problems.append(f"unknown_recipient:{name}")
        elif name not in chosen:
            chosen.append(name)
    return tuple(chosen)
