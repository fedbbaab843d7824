"""Policies: a batch of (agent, observation) requests → action strings. Backends load lazily.

>>> from llm_marl_baselines.policies import make_policy, ActionRequest, GenerationSettings
>>> policy = make_policy("scripted")
>>> policy.act([ActionRequest("concise", "Source text:\\nA cat sat.")], GenerationSettings(max_new_tokens=8))
['A cat sat.\\n<done/>']

``policy.generate(...)`` returns :class:`Generation` records instead: the text plus, where the backend has them, the
prompt and completion token ids and per-token log-probabilities (local models always; endpoints when asked and
served; scripted: text only). ``policy.as_rollout_policy(settings)`` (a :class:`RolloutPolicy`) is the batched
callable :func:`llm_marl_envs.rollout.run_episodes` takes; ``ActionRequest.from_messages(agent, messages)`` builds a
request from an env's chat.
"""

from __future__ import annotations

import importlib
from typing import Any

from llm_marl_baselines.policies.base import (
    ActionRequest,
    Generation,
    GenerationSettings,
    Policy,
    RolloutPolicy,
    env_reply_ends,
    env_role_budgets,
    rollout_output,
)

# kind -> (module, class, the extra that provides its dependencies)
POLICY_KINDS: dict[str, tuple[str, str, str]] = {
    "scripted": ("llm_marl_baselines.policies.scripted", "ScriptedPolicy", ""),
    "local": ("llm_marl_baselines.policies.local", "LocalModelPolicy", "model"),
    "adapters": ("llm_marl_baselines.policies.adapters", "AdapterTeamPolicy", "train"),
    "endpoint": ("llm_marl_baselines.policies.endpoint", "EndpointPolicy", "endpoint"),
}

__all__ = [
    "POLICY_KINDS",
    "ActionRequest",
    "Generation",
    "GenerationSettings",
    "Policy",
    "RolloutPolicy",
    "env_reply_ends",
    "env_role_budgets",
    "make_policy",
    "rollout_output",
]


def make_policy(kind: str, **kwargs: Any) -> Policy:
    """Build a policy by kind: ``"scripted"``, ``"local"`` (model=...), ``"adapters"`` (team_dir=...) or
    ``"endpoint"`` (base_url=..., model=...). Keyword arguments go to the backend's constructor."""
    if kind not in POLICY_KINDS:
        raise ValueError(f"policy kind: expected one of {tuple(POLICY_KINDS)}, got {kind!r}")
    module_name, class_name, extra = POLICY_KINDS[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(
            f"the {kind!r} policy needs the [{extra}] extra: pip install 'llm-marl-envs[{extra}]' ({error})"
        ) from error
    return getattr(module, class_name)(**kwargs)
