"""Env factories and scripted actions shared by the env tests.

The scripted actions are :func:`llm_marl_baselines.policies.scripted.protocol_action` (the env-overhead benchmark uses
the same generator), so the suite has one hand-written action source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_marl_baselines.policies.scripted import protocol_action
from llm_marl_envs import writing_v0

__all__ = ["ARTICLE_ACTIONS", "ENV_FACTORIES", "coding_env", "default_coding_env", "scripted_action", "writing_env"]


ARTICLE_ACTIONS: dict[str, str] = {
    "solo": "Fires forced hundreds from homes near Hill Top. " * 8,
    "concise": "Strong winds pushed a bushfire towards Hill Top, forcing hundreds from their homes, while a new blaze "
    "near Goulburn shut the Hume Highway.",
    "detailed": "Hundreds of Southern Highlands residents had to leave their homes as strong winds drove a large "
    "bushfire towards Hill Top. Authorities ordered the evacuation of outlying streets after a storm cell crossing the "
    "Blue Mountains worsened the weather in the afternoon. Another fire near Goulburn closed the Hume Highway.",
    "key_points": "- Hundreds evacuated near Hill Top\n- Hume Highway closed by a Goulburn fire\n- Storm cell worsened "
    "the weather",
    "headline": "Bushfires force evacuations in New South Wales",
}
"""A plausible part per writing role (TL;DR style) about the passage of ``news/000`` (the bushfire article's lead);
other roles reuse ``solo``'s (a repetitive part)."""


def writing_env(**kwargs: Any) -> writing_v0.raw_env:
    """A writing env with the fast TF-IDF similarity unless asked otherwise."""
    return writing_v0.parallel_env(**{"similarity": "tfidf", **kwargs})


def default_coding_env(**kwargs: Any) -> Any:
    """A coding env on the local executor and TF-IDF similarity unless asked otherwise, under the env's default
    scheme (the API conformance tests play it)."""
    from llm_marl_envs import coding_v0

    return coding_v0.parallel_env(**{"similarity": "tfidf", "executor": "local", **kwargs})


def coding_env(**kwargs: Any) -> Any:
    """:func:`default_coding_env`, but under ``scheme="magrpo"`` unless asked otherwise: the ``aux``/``main`` roles
    the env tests of the program, feedback, credit and leaks were written for (the candidate schemes' own tests name
    their scheme)."""
    return default_coding_env(**{"scheme": "magrpo", **kwargs})


ENV_FACTORIES: dict[str, Callable[..., Any]] = {"writing": writing_env, "coding": default_coding_env}


def scripted_action(env: Any, agent: str, turn: int) -> str:
    """A deterministic, protocol-exercising action for ``agent`` at ``turn`` (the same at every episode)."""
    return protocol_action(env, agent, turn)
