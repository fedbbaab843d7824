"""Chat messages from observations, and the framing the collaboration baselines add: every prompt in one place.

An env's observation is already a complete prompt (role, instruction, protocol, the role's view of the task, own
draft, feedback, messages). :meth:`~llm_marl_envs.core.base_env.CollaborativeTextEnv.chat_messages` wraps it as
``[system, user]`` chat messages — the format chat templates take — with the env's system prompt and the role's hint
(``envs/*/prompts.py``). The baselines only add a rule block per baseline and turn, and the sequential pipeline the
earlier teammates' outputs; nothing here reaches another agent's observation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant working in a team. Follow your role's instruction exactly."

_COLLABORATION_PLAY = (
    "Each turn, write your full updated part. If something must be agreed (names, facts, who covers what), send one "
    "short <message>...</message>."
)

# The rules that tell an agent whose drafts it sees. ``{whose}`` and ``{unseen}`` are filled per agent by
# :func:`rule_block` from what the env really shows it: a baseline must not tell a model it sees what it does not (the
# coding env's propose-and-verify coders never see each other's candidates, whatever the observability).
SIGHTED_RULES: dict[str, str] = {
    "discussion_draft": "Round 1 of 2: write a first draft of your part. You will see {whose} drafts{unseen} next.",
    "discussion_revise": (
        "Round 2 of 2: read {whose} drafts{unseen} below and write the final version of your part so that the "
        "parts fit together (no repetition, no contradiction)."
    ),
    "prompt_collaboration": (
        "Team rules (fixed): you see {whose} current drafts{unseen}. " + _COLLABORATION_PLAY
        + " When your part fits with your teammates' parts, end with <done/>."
    ),
}
"""Rule blocks that say whose drafts the agent sees (filled in by :func:`rule_block`)."""

BLIND_RULES: dict[str, str] = {
    "discussion_draft": "Round 1 of 2: write a first draft of your part. You do not see your teammates' drafts.",
    "discussion_revise": (
        "Round 2 of 2: write the final version of your part. You do not see your teammates' drafts; what you learn "
        "of their work is in your feedback and messages."
    ),
    "prompt_collaboration": (
        "Team rules (fixed): you do not see your teammates' drafts; what you learn of their work is in your feedback "
        "and messages. " + _COLLABORATION_PLAY + " When your part is final, end with <done/>."
    ),
}
"""The same rules for an agent that sees none of its teammates' drafts."""

BASELINE_RULES: dict[str, str] = {
    "single_agent": "Work alone and give the complete answer now.",
    "naive_concatenation": (
        "Write your part now, independently; your teammates write theirs and the parts are joined as they are."
    ),
    "sequential_pipeline": (
        "Your teammates before you in the pipeline already wrote their parts (below). Write your own part so that "
        "it fits with theirs: do not repeat them, do not contradict them."
    ),
    **{key: rule.format(whose="your teammates'", unseen="") for key, rule in SIGHTED_RULES.items()},
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


def _possessives(names: Sequence[str]) -> str:
    """``["tester", "verifier"]`` as ``"tester's and verifier's"``."""
    owned = [f"{name}'s" for name in names]
    return owned[0] if len(owned) == 1 else f"{', '.join(owned[:-1])} and {owned[-1]}"


def rule_block(rule_key: str, teammates: Sequence[str] = (), drafts_seen: Sequence[str] | None = None) -> str:
    """A baseline's rule block for one agent. For the rules that say whose drafts the agent sees
    (:data:`SIGHTED_RULES`), ``drafts_seen`` — the teammates whose drafts its observation holds; ``None``: all of
    ``teammates`` — makes them say it truly: all of them (the registry's text, :data:`BASELINE_RULES`), some by name
    with the others named as unseen, or none (:data:`BLIND_RULES`)."""
    if rule_key not in BASELINE_RULES:
        raise ValueError(f"rule: expected one of {sorted(BASELINE_RULES)}, got {rule_key!r}")
    if rule_key not in SIGHTED_RULES or drafts_seen is None:
        return BASELINE_RULES[rule_key]
    unknown = sorted(set(drafts_seen) - set(teammates))
    if unknown:
        raise ValueError(f"drafts_seen: {unknown} are not among the teammates {list(teammates)}")
    unseen = [teammate for teammate in teammates if teammate not in drafts_seen]
    if not unseen:
        return BASELINE_RULES[rule_key]
    seen = [teammate for teammate in teammates if teammate in drafts_seen]
    if not seen:
        return BLIND_RULES[rule_key]
    return SIGHTED_RULES[rule_key].format(whose=_possessives(seen), unseen=f" (not {_possessives(unseen)})")


def frame_observation(
    observation: str, rule_key: str, teammates: Sequence[str] = (), drafts_seen: Sequence[str] | None = None
) -> str:
    """A baseline's rule block (:func:`rule_block`) put before an agent's own observation, whose last paragraph — the
    role's instruction, the cue a small model answers — stays last."""
    return f"{rule_block(rule_key, teammates, drafts_seen)}\n\n{observation}"


def sequential_observation(observation: str, earlier: Mapping[str, str]) -> str:
    """The sequential pipeline's prompt: the pipeline rule, earlier agents' outputs, then the agent's observation."""
    if not earlier:
        return frame_observation(observation, "naive_concatenation")
    parts = "\n\n".join(f"{agent} wrote:\n{text.strip() or '(nothing)'}" for agent, text in earlier.items())
    return f"{BASELINE_RULES['sequential_pipeline']}\n\n{SEQUENTIAL_HEADER}\n{parts}\n\n{observation}"
