"""The team's message log and who may read which message.

Partial observability of communication lives here: a message is delivered to its recipients only, and an agent's
inbox never contains what it did not receive.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Message:
    """A message ``sender`` sent at ``turn`` to ``recipients`` (never empty)."""

    sender: str
    recipients: tuple[str, ...]
    text: str
    turn: int

    @property
    def num_tokens(self) -> int:
        """Length in whitespace-separated tokens: the unit of the message cost in the joint reward."""
        return len(self.text.split())


class Channel:
    """An append-only log of the messages of one episode."""

    def __init__(self) -> None:
        self._log: list[Message] = []

    def post(self, message: Message) -> None:
        """Append ``message`` to the log."""
        self._log.append(message)

    def inbox(self, agent: str, *, last: int | None = None) -> list[Message]:
        """Messages delivered to ``agent`` (optionally only the ``last`` ones), oldest first."""
        received = [m for m in self._log if agent in m.recipients]
        return received if last is None else received[-last:]

    def sent_at(self, turn: int) -> list[Message]:
        """Messages sent at ``turn``."""
        return [m for m in self._log if m.turn == turn]

    def to_list(self) -> list[dict]:
        """The whole log as JSON-friendly dicts (for the global state)."""
        return [asdict(m) for m in self._log]

    def __len__(self) -> int:
        return len(self._log)
