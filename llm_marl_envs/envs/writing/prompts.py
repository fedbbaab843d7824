"""The writing env's chat framing: the system prompt and per-role hints around each agent's observation."""

from __future__ import annotations

SYSTEM_PROMPT = (
    "You are a careful writer in a small writing team. Write only your own part, in plain prose, "
    "with no preamble such as 'Here is'."
)

ROLE_HINTS: dict[str, str] = {
    "solo": "You write the whole piece alone: cover every part the task asks for.",
}
"""Hints beyond the role's instruction in the observation (the instruction stays the authority; hints sharpen form)."""

ROLE_NEW_TOKENS: dict[str, int] = {
    # About 1.3 tokens a word: each part's word range (roles.PART_SPECS) plus room to finish the sentence.
    "concise": 64,
    "detailed": 128,
    "key_points": 128,
    "headline": 32,
    "background": 192,
    "method": 192,
    "limitations": 128,
    "title": 32,
    "solo": 192,
}
"""New tokens per role (the env's ``suggested_max_new_tokens``)."""
