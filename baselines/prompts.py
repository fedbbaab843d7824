"""Every prompt the baselines add, in one readable place, per task and role.

The env's observation is already a complete prompt: the role and its instruction, the action protocol, the role's
view of the task, the agent's own draft, feedback and messages (and teammates' drafts under ``observability="team"``).
Baselines only add framing around it: a system prompt per task, a per-baseline rule block, and for the sequential
pipeline the earlier teammates' outputs. Nothing here reaches another agent's observation.
"""

from __future__ import annotations

from collections.abc import Mapping

TASKS: tuple[str, ...] = ("writing", "coding")

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant working in a team. Follow your role's instruction exactly."

SYSTEM_PROMPTS: dict[str, str] = {
    "writing": (
        "You are a careful writer in a small writing team. Write only your own part, in plain prose, "
        "with no preamble such as 'Here is'."
    ),
    "coding": (
        "You are a Python programmer in a small team. Answer with one ```python code block that defines the "
        "function your role asks for; no explanations outside the block."
    ),
}

# Per-role hints beyond the env's instruction (the env's instruction stays the authority; these only sharpen form).
ROLE_HINTS: dict[str, dict[str, str]] = {
    "writing": {
        "solo": "You write the whole piece alone: cover every part the task asks for.",
    },
    "coding": {
        "solo": "You write the whole solution alone: one function, complete and self-contained.",
        "aux": "Write only the helper function `aux`; the main agent's function will call it.",
        "main": "Write only the entry-point function; you may call the helper `aux(...)` a teammate writes.",
        "tester": "Write only `assert` lines that test the entry-point function.",
        "reviewer": "Write a short review of the likely mistakes, as a <message> to the teammates.",
    },
}

# One rule block per baseline and phase. `{turn}` / `{max_turns}` are filled in when rendered.
BASELINE_RULES: dict[str, str] = {
    "single_agent": "Work alone and give the complete answer now.",
    "naive_concatenation": (
        "Write your part now, independently; your teammates write theirs and the parts are joined as they are."
    ),
    "sequential_pipeline": (
        "Your teammates before you in the pipeline already wrote their parts (below). Write your own part so that "
        "it fits with theirs: do not repeat them, do not contradict them."
    ),
    "discussion_draft": "Round 1 of 2: write a first draft of your part. You will see your teammates' drafts next.",
    "discussion_revise": (
        "Round 2 of 2: read your teammates' drafts above and write the final version of your part so that the "
        "parts fit together (no repetition, no contradiction)."
    ),
    "prompt_collaboration": (
        "Team rules (fixed): you see your teammates' current drafts. Each turn, write your full updated part. "
        "If something must be agreed (names, facts, who covers what), send one short <message>...</message>. "
        "When your part fits with your teammates' parts, end with <done/>."
    ),
}

SEQUENTIAL_HEADER = "## Earlier teammates wrote"


def system_prompt(task: str, agent: str) -> str:
    """The system prompt for ``agent`` (its role name) on ``task`` (``"writing"`` or ``"coding"``)."""
    if task not in SYSTEM_PROMPTS:
        raise ValueError(f"task: expected one of {TASKS}, got {task!r}")
    hint = ROLE_HINTS[task].get(agent)
    return f"{SYSTEM_PROMPTS[task]} {hint}" if hint else SYSTEM_PROMPTS[task]


def frame_observation(observation: str, rule_key: str) -> str:
    """Append a baseline's rule block to an agent's own observation."""
    if rule_key not in BASELINE_RULES:
        raise ValueError(f"rule: expected one of {sorted(BASELINE_RULES)}, got {rule_key!r}")
    return f"{observation}\n\n## Rules\n{BASELINE_RULES[rule_key]}"


def sequential_observation(observation: str, earlier: Mapping[str, str]) -> str:
    """The sequential pipeline's prompt: the agent's observation, earlier agents' outputs, and the pipeline rule."""
    if not earlier:
        return frame_observation(observation, "naive_concatenation")
    parts = "\n".join(f"### {agent}\n{text.strip() or '(nothing)'}" for agent, text in earlier.items())
    return f"{observation}\n\n{SEQUENTIAL_HEADER}\n{parts}\n\n## Rules\n{BASELINE_RULES['sequential_pipeline']}"
