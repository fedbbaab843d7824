"""The policy interface: a batch of (agent, observation) requests in, one action string per request out.

Every backend (local model, trained adapters, OpenAI-compatible endpoint, scripted) implements :class:`Policy`.
Execution is decentralized: a request carries one agent's own observation (plus an optional system prompt the
baseline adds) and nothing else, so an action can depend only on what that agent observed.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baselines.prompts import DEFAULT_SYSTEM_PROMPT


@dataclass(frozen=True)
class GenerationSettings:
    """How to sample actions.

    Attributes:
        temperature: 0 means greedy decoding; otherwise the softmax temperature (> 0).
        top_p: nucleus sampling mass in (0, 1].
        max_new_tokens: the most tokens generated per action (>= 1).
        seed: makes sampling reproducible (local backends seed torch; endpoints send it as ``seed``); None = unseeded.
    """

    temperature: float = 0.7
    top_p: float = 0.95
    max_new_tokens: int = 128
    seed: int | None = 0

    def __post_init__(self) -> None:
        _check_number("temperature", self.temperature)
        _check_number("top_p", self.top_p)
        if self.temperature < 0:
            raise ValueError(f"temperature: expected >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: expected a value in (0, 1], got {self.top_p}")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int):
            raise TypeError(f"max_new_tokens: expected int, got {type(self.max_new_tokens).__name__}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens: expected >= 1, got {self.max_new_tokens}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise TypeError(f"seed: expected int or None, got {type(self.seed).__name__}")

    @property
    def greedy(self) -> bool:
        """True when decoding is greedy (temperature 0)."""
        return self.temperature == 0

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GenerationSettings:
        """Build settings from a dict (e.g. a team manifest), rejecting unknown keys with a clear error."""
        if not isinstance(values, dict):
            raise TypeError(f"generation settings: expected a dict, got {type(values).__name__}")
        known = {"temperature", "top_p", "max_new_tokens", "seed"}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"generation settings: unknown keys {sorted(unknown)}; known: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-friendly dict."""
        return {"temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens,
                "seed": self.seed}


@dataclass(frozen=True)
class ActionRequest:
    """One agent asking for one action.

    Attributes:
        agent: the agent id (its role name, e.g. ``"concise"`` or ``"aux"``); adapter policies pick the adapter by it.
        observation: the agent's own observation text (the user message), possibly framed by a baseline.
        system: the system prompt; None lets the policy use :data:`baselines.prompts.DEFAULT_SYSTEM_PROMPT`.
    """

    agent: str
    observation: str
    system: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.agent, str) or not self.agent:
            raise TypeError(f"agent: expected a non-empty str, got {self.agent!r}")
        if not isinstance(self.observation, str):
            raise TypeError(f"observation of agent {self.agent!r}: expected str, got {type(self.observation).__name__}")
        if self.system is not None and not isinstance(self.system, str):
            raise TypeError(f"system prompt of agent {self.agent!r}: expected str or None, got "
                            f"{type(self.system).__name__}")

    def messages(self) -> list[dict[str, str]]:
        """The chat messages of this request: system prompt, then the observation as the user turn."""
        system = DEFAULT_SYSTEM_PROMPT if self.system is None else self.system
        return [{"role": "system", "content": system}, {"role": "user", "content": self.observation}]


class Policy(abc.ABC):
    """Maps a batch of action requests to action strings (one per request, same order)."""

    name: str = "policy"

    def act(self, requests: Sequence[ActionRequest], settings: GenerationSettings) -> list[str]:
        """Return one action string per request, in order. An empty batch returns an empty list."""
        requests = check_requests(requests)
        if not isinstance(settings, GenerationSettings):
            raise TypeError(f"settings: expected GenerationSettings, got {type(settings).__name__}")
        if not requests:
            return []
        actions = self._act(requests, settings)
        if len(actions) != len(requests) or not all(isinstance(a, str) for a in actions):
            raise RuntimeError(f"{type(self).__name__} returned {len(actions)} actions for {len(requests)} requests")
        return actions

    @abc.abstractmethod
    def _act(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[str]:
        """Backend hook: ``requests`` is a validated, non-empty list."""

    def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release resources (connections, threads). Idempotent."""

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def check_requests(requests: Sequence[ActionRequest]) -> list[ActionRequest]:
    """Validate a batch: a sequence of :class:`ActionRequest` (a clear TypeError otherwise)."""
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence):
        raise TypeError(f"requests: expected a sequence of ActionRequest, got {type(requests).__name__}")
    for index, request in enumerate(requests):
        if not isinstance(request, ActionRequest):
            raise TypeError(f"requests[{index}]: expected ActionRequest, got {type(request).__name__}")
    return list(requests)


def _check_number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name}: expected a finite number, got {value!r}")
