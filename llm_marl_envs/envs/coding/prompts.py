"""The coding env's chat framing: the system prompt and per-role hints around each agent's observation."""

from __future__ import annotations

SYSTEM_PROMPT = (
    "You are a Python programmer in a small team. Answer with one ```python code block that defines the "
    "function your role asks for; no explanations outside the block."
)

ROLE_HINTS: dict[str, str] = {
    "solo": "You write the whole solution alone: one function, complete and self-contained.",
    "aux": "Write only the helper function `aux`; the main agent's function will call it.",
    "main": "Write only the entry-point function; you may call the helper `aux(...)` a teammate writes.",
    "tester": "Write only `assert` lines that test the entry-point function.",
    "reviewer": "Write a short review of the likely mistakes, as a <message> to the teammates.",
}
"""Hints beyond the role's instruction in the observation (the instruction stays the authority; hints sharpen form)."""
