"""Scripted policies: deterministic, model-free actions for tests and for measuring env overhead.

:class:`ScriptedPolicy` reads only the agent's own observation. By default it copies words from the task text
(writing) or writes a function with the right name (coding), sends one short message on its first turn and says
``<done/>`` from its second turn on (or at once when the episode has a single turn). Pass ``responder`` to script
anything else.

:func:`protocol_action` is the other scripted source, for env tests and the env-overhead benchmark: a fixed,
protocol-exercising action per role and turn, read from the env itself (not a policy: it sees the task's entry point).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from llm_marl_baselines.policies.base import ActionRequest, GenerationSettings, Policy

_TURN = re.compile(r"Turn (\d+) of (\d+)")
_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(([^)]*)\)", re.MULTILINE)
_SOURCE = re.compile(r"Source text:\n(.*?)(?:\n\n|\Z)", re.DOTALL)
_WORDS_PER_ROLE = {"concise": 25, "detailed": 90, "headline": 8, "title": 8}
_CODE_ROLES = ("solo", "aux", "main", "coder_1", "coder_2", "author", "fixer")
"""Roles that write the entry point (or, for ``aux``, the helper), under every coding scheme."""


def observed_turn(observation: str) -> tuple[int, int]:
    """(turn, max_turns) as printed in an observation's header; (1, 1) when absent."""
    match = _TURN.search(observation)
    return (int(match.group(1)), int(match.group(2))) if match else (1, 1)


def extractive_responder(request: ActionRequest) -> str:
    """A reasonable fixed action from the agent's own observation (see module docstring)."""
    observation, agent = request.observation, request.agent
    turn, max_turns = observed_turn(observation)
    definitions = _DEF.findall(observation)
    if definitions and agent in (*_CODE_ROLES, "tester", "reviewer", "verifier"):
        body = _code_part(agent, definitions)
    else:
        body = _writing_part(agent, observation)
    if turn == 1 and max_turns > 1:
        return f"{body}\n<message>{agent} here: I wrote my part.</message>"
    return f"{body}\n<done/>"


def _writing_part(agent: str, observation: str) -> str:
    match = _SOURCE.search(observation)
    words = (match.group(1) if match else observation).split()
    if agent == "key_points" or agent == "limitations":
        return "\n".join(f"- {' '.join(words[i:i + 8])}" for i in range(0, 24, 8))
    return " ".join(words[: _WORDS_PER_ROLE.get(agent, 60)])


def _code_part(agent: str, definitions: list[tuple[str, str]]) -> str:
    entry_point, params = definitions[-1]
    if agent == "aux":
        return "```python\ndef aux(*args):\n    return args[0] if args else None\n```"
    if agent == "tester":
        return f"assert {entry_point} is not None"
    if agent == "reviewer":
        return "<message>Check the edge cases: empty input and negative numbers.</message>"
    if agent == "verifier":
        return "Choice: coder_1"
    return f"```python\ndef {entry_point}({params}):\n    return None\n```"


class ScriptedPolicy(Policy):
    """Answers every request with ``responder(request)`` (default :func:`extractive_responder`); no model."""

    name = "scripted"

    def __init__(self, responder: Callable[[ActionRequest], str] | None = None) -> None:
        if responder is not None and not callable(responder):
            raise TypeError(f"responder: expected a callable, got {type(responder).__name__}")
        self.responder = responder or extractive_responder
        self.calls: list[list[ActionRequest]] = []
        """Every batch this policy received, for tests that check what each agent was shown."""

    def _act(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[str]:
        self.calls.append(list(requests))
        return [self.responder(request) for request in requests]


ARTICLE_ACTIONS: dict[str, str] = {
    "solo": "Fires forced hundreds from homes near Hill Top. " * 8,
    "concise": "Bushfires forced hundreds of residents near Hill Top to leave as winds pushed the blaze.",
    "detailed": "Strong winds pushed a large bushfire toward Hill Top in New South Wales, forcing about 500 "
    "residents to leave for Mittagong. Another fire near Goulburn closed the Hume Highway in both directions, and "
    "crews fought more than 100 blazes across the state on New Year's Eve while rain brought little relief.",
    "key_points": "- 500 residents evacuated\n- Hume Highway closed\n- 100 fires burning",
    "headline": "Bushfires force evacuations in New South Wales",
}
"""A plausible part per writing role (TL;DR style) about one bushfire article; other roles reuse ``solo``'s."""


def protocol_action(env: Any, agent: str, turn: int, *, episode: int | None = None) -> str:
    """A deterministic action for ``agent`` at ``turn`` of ``env`` that exercises the whole protocol: the role's part
    (a code block per coding role, prose per writing role) and a ``<message to=...>`` to the first teammate.

    ``episode`` adds the episode to every version marker, so the text is new at each episode and turn and no cache
    hides a step's cost (the env-overhead benchmark); without it the action depends on the turn only (env tests).
    """
    version = f"{turn}" if episode is None else f"{episode}.{turn}"
    teammates = [a for a in env.possible_agents if a != agent]
    message = f'<message to="{teammates[0]}">turn {version} note from {agent}</message>' if teammates else ""
    if hasattr(env, "executor"):  # the coding env; duck-typed so this module needs no env import
        entry = env.task["entry_point"]
        body = {
            "aux": f"def aux(x):\n    return x  # v{version}",
            "main": f"def {entry}(*args):\n    return aux(args[0])  # v{version}",
            "solo": f"def {entry}(*args):\n    return None  # v{version}",
            "tester": f"assert {entry}(1) == 1\nassert {entry}(2) == 2  # v{version}",
            "reviewer": f"Check edge cases, round {version}.",
            "verifier": f"Choice: {teammates[0] if teammates else agent} (round {version})",
        }.get(agent, f"def {entry}(*args):\n    return None  # v{version}")  # the candidate schemes' code authors
        if agent == "verifier":
            return f"{body}\n{message}"
        return f"```python\n{body}\n```\n{message}"
    return f"{ARTICLE_ACTIONS.get(agent, ARTICLE_ACTIONS['solo'])} (revision {version}) {message}"
