"""Text spaces wide enough for what language models write, and the sanitizer that keeps strings inside them.

Gymnasium's ``Text`` space defaults to 62 alphanumeric characters, so ``Text(10).contains("a b")`` is False. Model
output contains spaces, punctuation, newlines, code and any Unicode character, so the suite uses :class:`UnicodeText`:
membership accepts every valid Unicode string up to ``max_length`` characters, while ``sample()`` draws from a broad
printable subset (a 1.1-million-character set would cost tens of MB per space).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gymnasium.spaces import Text

# Printable ASCII, whitespace that matters for code, and a few blocks of accented/Greek/CJK letters and symbols,
# so sampled strings exercise non-ASCII paths in the env.
_SAMPLE_CHARSET: str = (
    "".join(chr(c) for c in range(0x20, 0x7F))
    + "\n\t"
    + "".join(chr(c) for c in range(0xC0, 0x100))
    + "".join(chr(c) for c in range(0x391, 0x3CA))
    + "".join(chr(c) for c in range(0x4E00, 0x4E40))
    + "—–…•→✓✗"
)

DEFAULT_ACTION_CHARS = 8_192
"""Default maximum length (characters) of one action: about 2,000 tokens, more than the models here emit per turn."""

DEFAULT_OBSERVATION_CHARS = 32_768
"""Default maximum length (characters) of one observation."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class UnicodeText(Text):
    """A ``Text`` space holding any valid Unicode string of at most ``max_length`` characters.

    ``contains`` accepts every ``str`` without lone surrogates; ``sample`` draws from a printable subset.

    >>> space = UnicodeText(max_length=16)
    >>> space.contains("déjà vu: x = 1\\n")
    True
    >>> space.contains("x" * 17)
    False
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        """Return whether ``x`` is a valid Unicode string whose length is within the bounds."""
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    __hash__ = None  # type: ignore[assignment]  # spaces are mutable (seeded rng), like gymnasium's own


@dataclass(frozen=True)
class SanitizedText:
    """A string made safe for a :class:`UnicodeText` space, with flags saying what had to change."""

    text: str
    truncated: bool
    invalid_unicode_replaced: bool
    original_length: int


def sanitize_text(value: str, max_length: int) -> SanitizedText:
    """Replace each lone surrogate with one U+FFFD and cut ``value`` to ``max_length`` characters.

    One character in, one character out, so a string within the limit is never flagged ``truncated`` because of
    the replacement (an earlier version round-tripped through UTF-8 bytes and tripled each surrogate).
    Raises ``TypeError`` for anything but ``str``; never raises on the content of a string.
    """
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    cleaned, replacements = _LONE_SURROGATE.subn("\ufffd", value)
    truncated = len(cleaned) > max_length
    return SanitizedText(
        text=cleaned[:max_length] if truncated else cleaned,
        truncated=truncated,
        invalid_unicode_replaced=replacements > 0,
        original_length=len(value),
    )
