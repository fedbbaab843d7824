"""The coding env's chat framing: the system prompt around each agent's observation, and each role's budget."""

from __future__ import annotations

SYSTEM_PROMPT = "You write Python in a team."

_CODE_ANSWER = "Answer with one ```python code block."
ROLE_HINTS: dict[str, str] = {
    "aux": _CODE_ANSWER,
    "main": _CODE_ANSWER,
    "tester": _CODE_ANSWER,
    "solo": _CODE_ANSWER,
    "reviewer": "Answer with a short review and a <message> to the authors; write no code.",
    "coder_1": _CODE_ANSWER,
    "coder_2": _CODE_ANSWER,
    "author": _CODE_ANSWER,
    "fixer": _CODE_ANSWER,
    "verifier": "Answer with the name of one candidate; write no code.",
}
"""The answer's form per role, after the system prompt (the instruction, last in the observation, says what)."""

ROLE_NEW_TOKENS: dict[str, int] = {
    # A whole function with a short docstring. SmolLM2-135M restates the signature and often a docstring before the
    # body; with 128 tokens many of its functions were cut off inside (probed on train-split tasks), so 160.
    "aux": 160,
    "main": 160,
    "solo": 160,
    "tester": 128,
    "reviewer": 96,
    # The candidate schemes' code authors write what solo writes.
    "coder_1": 160,
    "coder_2": 160,
    "author": 160,
    "fixer": 160,
    # A name and a reason.
    "verifier": 48,
}
"""New tokens per role (the env's ``suggested_max_new_tokens``)."""

CODE_BLOCK_CLOSED = r"(?s)```[^\n`]*\n.*?```"
"""A fenced block opened and closed: where a code role's reply ends for the env. ``extract_code`` keeps the blocks
and drops the prose around them (``discarded_tokens``); SmolLM2-135M's coders close the block and write on to their
budget (17 of 24 shipped coding-2 first replies reached 160 tokens, 60 discarded words each:
docs/results/coding-propose-verify/2-trim)."""

ROLE_REPLY_ENDS: dict[str, str] = {role: CODE_BLOCK_CLOSED for role, hint in ROLE_HINTS.items() if hint == _CODE_ANSWER}
"""Per role, where its reply ends (the env's ``suggested_reply_end``): every role that answers with a code block ends
with the block; the reviewer and verifier, who write no code, have none."""
