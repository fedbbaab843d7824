"""The writing env's chat framing: the system prompt and per-role hints around each agent's observation."""

from __future__ import annotations

SYSTEM_PROMPT = "Write only your own part of the team's text, in plain prose, with no preamble."

ROLE_HINTS: dict[str, str] = {
    "solo": "You write the whole piece alone: cover every part the task asks for.",
}
"""Hints beyond the role's instruction in the observation (the instruction stays the authority; hints sharpen form)."""

ROLE_NEW_TOKENS: dict[str, int] = {
    # About 1.3 tokens a word: each part's word range (roles.PART_SPECS) plus room to finish the sentence.
    "concise": 48,
    "detailed": 96,
    "key_points": 80,
    "headline": 24,
    "background": 128,
    "method": 128,
    "limitations": 80,
    "title": 24,
    "solo": 144,
}
"""New tokens per role (the env's ``suggested_max_new_tokens``)."""
