"""Chat messages from observations, and the framing the collaboration baselines add: every prompt in one place.

An env's observation is already a complete prompt (role, instruction, protocol, the role's view of the task, own
draft, feedback, messages). :meth:`~llm_marl_envs.core.base_env.CollaborativeTextEnv.chat_messages` wraps it as
``[system, user]`` chat messages — the format chat templates take — with the env's system prompt and the role's hint
(``envs/*/prompts.py``). The baselines only add a rule block per baseline and turn, and the sequential pipeline the
earlier teammates' outputs; nothing here reaches another agent's observation.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant working in a team. Follow your role's instruction exactly."

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
        "Round 2 of 2: read your teammates' drafts below and write the final version of your part so that the "
        "parts fit together (no repetition, no contradiction)."
    ),
    "prompt_collaboration": (
        "Team rules (fixed): you see your teammates' current drafts. Each turn, write your full updated part. "
        "If something must be agreed (names, facts, who covers what), send one short <message>...</message>. "
        "When your part fits with your teammates' parts, end with <done/>."
    ),
}
"""One rule block per baseline and phase."""

SEQUENTIAL_HEADER = "Your teammates before you in the pipeline wrote:"


def chat(system: str, user: str) -> list[dict[str, str]]:
    """Chat messages ``[system, user]``."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def system_prompt(base: str, hints: Mapping[str, str], agent: str) -> str:
    """``base`` followed by the role's hint, when it has one."""
    hint = hints.get(agent)
    return f"{base} {hint}" if hint else base


def frame_observation(observation: str, rule_key: str) -> str:
    """A baseline's rule block put before an agent's own observation, whose last paragraph — the role's instruction,
    the cue a small model answers — stays last."""
    if rule_key not in BASELINE_RULES:
        raise ValueError(f"rule: expected one of {sorted(BASELINE_RULES)}, got {rule_key!r}")
    return f"{BASELINE_RULES[rule_key]}\n\n{observation}"


def sequential_observation(observation: str, earlier: Mapping[str, str]) -> str:
    """The sequential pipeline's prompt: the pipeline rule, earlier agents' outputs, then the agent's observation."""
    if not earlier:
        return frame_observation(observation, "naive_concatenation")
    parts = "\n\n".join(f"{agent} wrote:\n{text.strip() or '(nothing)'}" for agent, text in earlier.items())
    return f"{BASELINE_RULES['sequential_pipeline']}\n\n{SEQUENTIAL_HEADER}\n{parts}\n\n{observation}"
