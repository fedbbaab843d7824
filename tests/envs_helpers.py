"""Env factories and scripted actions shared by the env tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_marl_envs import writing_v0

ARTICLE_ACTIONS = {
    "solo": "Fires forced hundreds from homes near Hill Top. " * 8,
    "concise": "Bushfires forced hundreds of residents near Hill Top to leave as winds pushed the blaze.",
    "detailed": "Strong winds pushed a large bushfire toward Hill Top in New South Wales, forcing about 500 "
    "residents to leave for Mittagong. Another fire near Goulburn closed the Hume Highway in both directions, and "
    "crews fought more than 100 blazes across the state on New Year's Eve while rain brought little relief.",
    "key_points": "- 500 residents evacuated\n- Hume Highway closed\n- 100 fires burning",
    "headline": "Bushfires force evacuations in New South Wales",
}


def writing_env(**kwargs: Any) -> writing_v0.raw_env:
    """A writing env with the fast TF-IDF similarity unless asked otherwise."""
    return writing_v0.parallel_env(**{"similarity": "tfidf", **kwargs})


def coding_env(**kwargs: Any) -> Any:
    """A coding env on the local executor and TF-IDF similarity unless asked otherwise."""
    from llm_marl_envs import coding_v0

    return coding_v0.parallel_env(**{"similarity": "tfidf", "executor": "local", **kwargs})


ENV_FACTORIES: dict[str, Callable[..., Any]] = {"writing": writing_env, "coding": coding_env}


def scripted_action(env: Any, agent: str, turn: int) -> str:
    """A deterministic, protocol-exercising action for ``agent`` at ``turn``."""
    teammates = [a for a in env.possible_agents if a != agent]
    message = f'<message to="{teammates[0]}">turn {turn} note from {agent}</message>' if teammates else ""
    if hasattr(env, "executor"):
        entry = env.task["entry_point"]
        body = {
            "aux": f"def aux(x):\n    return x  # v{turn}",
            "main": f"def {entry}(*args):\n    return aux(args[0])  # v{turn}",
            "solo": f"def {entry}(*args):\n    return None  # v{turn}",
            "tester": f"assert {entry}(1) == 1\nassert {entry}(2) == 2  # v{turn}",
            "reviewer": f"Check edge cases, round {turn}.",
        }[agent]
        return f"```python\n{body}\n```\n{message}"
    return f"{ARTICLE_ACTIONS[agent]} (revision {turn}) {message}"
