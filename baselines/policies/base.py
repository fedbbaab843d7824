"""The policy interface: a batch of (agent, observation) requests in, one action string per request out.

Every backend (local model, trained adapters, OpenAI-compatible endpoint, scripted) implements :class:`Policy`.
Execution is decentralized: a request carries one agent's own chat (the env's system prompt and its observation,
possibly framed by a baseline) and nothing else, so an action can depend only on what that agent observed.

:meth:`Policy.act` returns the action texts; :meth:`Policy.generate` returns :class:`Generation` records that also
carry the token ids and per-token log-probabilities a policy-gradient trainer needs, where the backend has them
(:func:`rollout_output` turns a batch of records into the dict TRL's ``GRPOTrainer(rollout_func=...)`` expects).
:meth:`Policy.as_rollout_policy` makes any policy the batched callable that :mod:`llm_marl_envs.rollout` drives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl_envs.core.prompts import DEFAULT_SYSTEM_PROMPT
from llm_marl_envs.rollout import ChatRequest


@dataclass(frozen=True)
class GenerationSettings:
    """How to sample actions.

    Attributes:
        temperature: 0 means greedy decoding; otherwise the softmax temperature (> 0).
        top_p: nucleus sampling mass in (0, 1].
        max_new_tokens: the most tokens generated per action (>= 1).
        seed: makes sampling reproducible (local backends seed torch; endpoints send it as ``seed``); None = unseeded.
            One call draws from this seed; a rollout policy (:meth:`Policy.as_rollout_policy`), which the runner
            calls once a turn, draws its k-th call from :func:`call_seed` ``(seed, k)``, so turns never reuse the
            first turn's random numbers.
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

    Build it from an observation (``ActionRequest(agent, observation, system)``: the chat is then ``[system,
    observation]``) or from chat messages as an env gives them (:meth:`from_messages`, e.g. ``env.chat_messages``).

    Attributes:
        agent: the agent id (its role name, e.g. ``"concise"`` or ``"aux"``); adapter policies pick the adapter by it.
        observation: the agent's own observation text (the user message), possibly framed by a baseline.
        system: the system prompt; None lets the policy use
            :data:`llm_marl_envs.core.prompts.DEFAULT_SYSTEM_PROMPT`.
        chat: the full chat as ``(role, content)`` pairs when the request was built :meth:`from_messages` (then
            ``observation`` and ``system`` are read from it); None for a request built from an observation.
    """

    agent: str
    observation: str
    system: str | None = None
    chat: tuple[tuple[str, str], ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.agent, str) or not self.agent:
            raise TypeError(f"agent: expected a non-empty str, got {self.agent!r}")
        if not isinstance(self.observation, str):
            raise TypeError(f"observation of agent {self.agent!r}: expected str, got {type(self.observation).__name__}")
        if self.system is not None and not isinstance(self.system, str):
            raise TypeError(f"system prompt of agent {self.agent!r}: expected str or None, got "
                            f"{type(self.system).__name__}")
        if self.chat is not None:
            self._check_chat()

    def _check_chat(self) -> None:
        chat = self.chat
        if not isinstance(chat, tuple) or not all(
            isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(part, str) for part in pair)
            for pair in chat
        ):
            raise TypeError(f"chat of agent {self.agent!r}: expected a tuple of (role, content) str pairs, "
                            f"got {chat!r:.80}")
        # A backend renders the chat while scripted responders read ``observation``: both must be the same prompt.
        if (self.observation, self.system) != _observation_and_system(self.agent, chat):
            raise ValueError(f"chat of agent {self.agent!r}: observation and system must be its last user message "
                             "and its system message; build the request with ActionRequest.from_messages")

    @classmethod
    def from_messages(cls, agent: str, messages: Sequence[Mapping[str, str]]) -> ActionRequest:
        """A request whose chat is ``messages`` (``[{"role": ..., "content": ...}, ...]``, as
        ``env.chat_messages(agent)`` returns them): the policy sees exactly these messages; ``observation`` is the
        last user message and ``system`` the system message (None without one)."""
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise TypeError(f"messages of agent {agent!r}: expected a sequence of chat messages, "
                            f"got {type(messages).__name__}")
        chat = []
        for index, message in enumerate(messages):
            if not isinstance(message, Mapping) or not isinstance(message.get("role"), str) or not isinstance(
                message.get("content"), str
            ):
                raise TypeError(f"messages[{index}] of agent {agent!r}: expected a mapping with str 'role' and "
                                f"'content', got {message!r:.80}")
            chat.append((message["role"], message["content"]))
        observation, system = _observation_and_system(agent, tuple(chat))
        return cls(agent, observation, system, tuple(chat))

    def messages(self) -> list[dict[str, str]]:
        """The chat messages of this request: the chat it was built from, else the system prompt and the observation
        as the user turn."""
        if self.chat is not None:
            return [{"role": role, "content": content} for role, content in self.chat]
        system = DEFAULT_SYSTEM_PROMPT if self.system is None else self.system
        return [{"role": "system", "content": system}, {"role": "user", "content": self.observation}]


def _observation_and_system(agent: str, chat: tuple[tuple[str, str], ...]) -> tuple[str, str | None]:
    users = [content for role, content in chat if role == "user"]
    if not users:
        raise ValueError(f"messages of agent {agent!r}: expected at least one user message (the observation), "
                         f"got roles {[role for role, _ in chat]}")
    systems = [content for role, content in chat if role == "system"]
    return users[-1], (systems[0] if systems else None)


FINISH_REASONS: tuple[str, ...] = ("stop", "length")
"""Why a completion ended, with the OpenAI API's names: an end-of-sequence token or stop string, or the token budget."""


@dataclass(frozen=True)
class Generation:
    """One completion: its text and, where the backend has them, the token-level record a trainer needs.

    The fields a trainer reads are named as in TRL's ``rollout_func`` contract (``prompt_ids``, ``completion_ids``,
    ``logprobs``); :func:`rollout_output` builds that dict from a batch.

    Attributes:
        text: the action string :meth:`Policy.act` returns: the decoded completion without special tokens, surrounding
            whitespace stripped (so ``tokenizer.decode(completion_ids, skip_special_tokens=True).strip() == text``).
        prompt_ids: the token ids the model was conditioned on (the chat-templated prompt, after any truncation),
            without padding; None when the backend does not expose them (scripted; endpoints that do not return them).
        completion_ids: the generated token ids, through the first end-of-sequence token (included, as TRL keeps it)
            and nothing after it: no padding. None when unknown.
        logprobs: one log-probability per completion token, in order. The local backends give the model's
            ``log_softmax`` of the raw logits (temperature 1, before top-p) at each generated token: the quantity a
            policy-gradient trainer recomputes for the ratio, whatever sampling produced the token. Endpoints give what
            the server reports (for vLLM, see its ``--logprobs-mode``). None when unknown.
        finish_reason: ``"stop"`` (an end-of-sequence token or stop string), ``"length"`` (the token budget ran out)
            or None when unknown.
    """

    text: str
    prompt_ids: tuple[int, ...] | None = None
    completion_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Generation.text: expected str, got {type(self.text).__name__}")
        for name in ("prompt_ids", "completion_ids"):
            ids = getattr(self, name)
            if ids is not None and not (
                isinstance(ids, tuple) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
            ):
                raise TypeError(f"Generation.{name}: expected a tuple of ints or None, got {ids!r:.80}")
        if self.logprobs is not None:
            if not (isinstance(self.logprobs, tuple) and all(isinstance(x, float) for x in self.logprobs)):
                raise TypeError(f"Generation.logprobs: expected a tuple of floats or None, got {self.logprobs!r:.80}")
            if self.completion_ids is not None and len(self.logprobs) != len(self.completion_ids):
                raise ValueError(f"Generation.logprobs: expected one per completion token "
                                 f"({len(self.completion_ids)}), got {len(self.logprobs)}")
        if self.finish_reason is not None and self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"Generation.finish_reason: expected one of {FINISH_REASONS} or None, "
                             f"got {self.finish_reason!r}")

    @property
    def has_token_record(self) -> bool:
        """Whether prompt ids, completion ids and log-probabilities are all known (what a trainer needs)."""
        return self.prompt_ids is not None and self.completion_ids is not None and self.logprobs is not None


def rollout_output(generations: Sequence[Generation]) -> dict[str, list[list[int]] | list[list[float]]]:
    """The dict TRL's ``GRPOTrainer(rollout_func=...)`` must return, from a batch of complete records.

    ``{"prompt_ids": [[int]], "completion_ids": [[int]], "logprobs": [[float]]}``, one row per generation; a
    ``ValueError`` names the first record that lacks a field (e.g. from a scripted policy or an endpoint asked for no
    log-probabilities).
    """
    for index, generation in enumerate(generations):
        if not isinstance(generation, Generation):
            raise TypeError(f"generations[{index}]: expected Generation, got {type(generation).__name__}")
        if not generation.has_token_record:
            missing = [name for name in ("prompt_ids", "completion_ids", "logprobs")
                       if getattr(generation, name) is None]
            raise ValueError(f"generations[{index}]: expected prompt_ids, completion_ids and logprobs, "
                             f"but {', '.join(missing)} is None (this backend does not record them)")
    return {
        "prompt_ids": [list(g.prompt_ids or ()) for g in generations],
        "completion_ids": [list(g.completion_ids or ()) for g in generations],
        "logprobs": [list(g.logprobs or ()) for g in generations],
    }


class Policy:
    """Maps a batch of action requests to action strings (one per request, same order).

    A backend overrides :meth:`_act` (texts only) or :meth:`_generate` (full :class:`Generation` records), or both
    when texts alone are cheaper to produce; each defaults to the other. (Not an ``abc.ABC``: "one of two hooks" is
    not expressible with ``abstractmethod``, so ``__init_subclass__`` and ``__new__`` check it instead.)
    """

    name: str = "policy"

    def __new__(cls, *args: Any, **kwargs: Any) -> Policy:
        if cls is Policy:
            raise TypeError("Policy is abstract: instantiate a backend (make_policy) or subclass it")
        return super().__new__(cls)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The two hooks default to each other; a backend that overrides neither would recurse forever on first use.
        if all(getattr(cls, hook) is getattr(Policy, hook) for hook in ("_act", "_generate")):
            raise TypeError(f"{cls.__name__}: a Policy must override _act or _generate")

    def act(self, requests: Sequence[ActionRequest], settings: GenerationSettings) -> list[str]:
        """Return one action string per request, in order. An empty batch returns an empty list."""
        requests = self._validated(requests, settings)
        if not requests:
            return []
        actions = self._act(requests, settings)
        if len(actions) != len(requests) or not all(isinstance(a, str) for a in actions):
            raise RuntimeError(f"{type(self).__name__} returned {len(actions)} actions for {len(requests)} requests")
        return actions

    def generate(self, requests: Sequence[ActionRequest], settings: GenerationSettings) -> list[Generation]:
        """Return one :class:`Generation` per request, in order; its ``text`` is what :meth:`act` returns for it.

        Which fields besides the text are filled depends on the backend (see :class:`Generation`).
        """
        requests = self._validated(requests, settings)
        if not requests:
            return []
        generations = self._generate(requests, settings)
        if len(generations) != len(requests) or not all(isinstance(g, Generation) for g in generations):
            raise RuntimeError(f"{type(self).__name__} returned {len(generations)} generations for "
                               f"{len(requests)} requests")
        return generations

    def _act(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[str]:
        """Backend hook: ``requests`` is a validated, non-empty list. Default: the texts of :meth:`_generate`."""
        return [generation.text for generation in self._generate(requests, settings)]

    def _generate(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[Generation]:
        """Backend hook for records. Default: text-only records (no token ids) from :meth:`_act`."""
        return [Generation(text) for text in self._act(requests, settings)]

    @staticmethod
    def _validated(requests: Sequence[ActionRequest], settings: GenerationSettings) -> list[ActionRequest]:
        requests = check_requests(requests)
        if not isinstance(settings, GenerationSettings):
            raise TypeError(f"settings: expected GenerationSettings, got {type(settings).__name__}")
        return requests

    def as_rollout_policy(self, settings: GenerationSettings, *, records: bool = True) -> RolloutPolicy:
        """This policy as the batched callable :func:`llm_marl_envs.rollout.run_episodes` takes (see
        :class:`RolloutPolicy`); ``records=False`` returns texts only (cheaper for local models: no logits kept)."""
        return RolloutPolicy(self, settings, records)

    def close(self) -> None:  # most backends hold nothing to release
        """Release resources (connections, threads). Idempotent."""

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True)
class RolloutPolicy:
    """A :class:`Policy` as the rollout runner's policy: ``list[ChatRequest] -> list[Generation]``.

    Each request's chat messages (the env's, or a baseline schedule's) become one :class:`ActionRequest`
    (:meth:`ActionRequest.from_messages`), the whole batch goes to the policy in one call, and the
    :class:`Generation` records come back as the completions, so trajectories keep token ids and log-probabilities.

    >>> from llm_marl_envs.rollout import run_episodes
    >>> from llm_marl_envs.registry import make_env
    >>> from llm_marl_baselines.policies import make_policy
    >>> envs = [make_env("writing", num_agents=2, max_turns=1, similarity="tfidf")]
    >>> (trajectory,) = run_episodes(envs, make_policy("scripted").as_rollout_policy(GenerationSettings()), seeds=[0])
    >>> type(trajectory.steps[0].generation).__name__
    'Generation'
    """

    policy: Policy
    settings: GenerationSettings
    """The first call's settings; call k samples with seed :func:`call_seed` ``(settings.seed, k)``."""
    records: bool = True
    """True: :meth:`Policy.generate` (records); False: :meth:`Policy.act` (plain strings, no token-level record)."""
    calls: CallSeeds = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.policy, Policy):
            raise TypeError(f"policy: expected a Policy, got {type(self.policy).__name__}")
        if not isinstance(self.settings, GenerationSettings):
            raise TypeError(f"settings: expected GenerationSettings, got {type(self.settings).__name__}")
        object.__setattr__(self, "calls", CallSeeds(self.settings))

    def __call__(self, requests: Sequence[ChatRequest]) -> list[Generation] | list[str]:
        """One completion per request, in order."""
        batch = [ActionRequest.from_messages(request.agent, request.messages) for request in requests]
        settings = self.calls.next()
        if self.records:
            return self.policy.generate(batch, settings)
        return self.policy.act(batch, settings)


def env_reply_ends(envs: Iterable[Any]) -> dict[str, str]:
    """Where each agent of ``envs`` may stop decoding, as a policy's ``reply_ends`` takes it: ``{agent:
    env.suggested_reply_end(agent)}`` over every env's agents, those whose role has no end left out (a writer's whole
    reply is its draft, so writing gives ``{}``). Envs of one kind agree on a role's end; one policy playing envs of
    several kinds sets it per env, as the demo does (an agent name may end elsewhere in another env)."""
    return {agent: end for env in envs for agent in env.possible_agents
            if (end := env.suggested_reply_end(agent)) is not None}


def env_role_budgets(envs: Iterable[Any]) -> dict[str, int]:
    """Each agent's own token budget in ``envs`` (``env.suggested_max_new_tokens([agent])``), as a policy's
    ``role_max_new_tokens`` takes it: a coding verifier stops at its 48 tokens where its team's call runs to 160."""
    return {agent: env.suggested_max_new_tokens([agent]) for env in envs for agent in env.possible_agents}


def call_seed(seed: int | None, call: int) -> int | None:
    """The seed of a rollout policy's ``call``-th call (0-based): ``seed`` itself for the first, then a hash of
    ``(seed, call)`` (below 2**31, which endpoints accept); None stays None (unseeded).

    Why: reseeding every call with the same seed gives every turn of an episode the same random numbers, so a turn's
    draws are coupled to the turns before it (a batch sampled under the same noise each turn); training draws fresh
    numbers each turn, and an evaluation must too. Deterministic, so a seeded batch still replays the same way.
    """
    if isinstance(call, bool) or not isinstance(call, int) or call < 0:
        raise ValueError(f"call: expected an int >= 0, got {call!r}")
    if seed is None or call == 0:
        return seed
    digest = hashlib.blake2b(f"{seed}/{call}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 2**31


class CallSeeds:
    """Settings for each call of a rollout policy in turn: call k samples with :func:`call_seed` ``(seed, k)``."""

    def __init__(self, settings: GenerationSettings) -> None:
        self.settings = settings
        self._calls: Iterator[int] = itertools.count()

    def next(self) -> GenerationSettings:
        """The settings of the next call."""
        return dataclasses.replace(self.settings, seed=call_seed(self.settings.seed, next(self._calls)))


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
