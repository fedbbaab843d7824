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

ROLE_NEW_TOKENS: dict[str, int] = {
    # A whole function with a short docstring. SmolLM2-135M restates the signature and often a docstring before the
    # body; with 128 tokens many of its functions were cut off inside (probed on train-split tasks), so 160.
    "aux": 160,
    "main": 160,
    "solo": 160,
    "tester": 128,
    "reviewer": 96,
}
"""New tokens per role (the env's ``suggested_max_new_tokens``)."""
