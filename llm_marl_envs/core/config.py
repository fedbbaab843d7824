"""Env configuration as small dataclasses — task, team, reward, observation, limits — validated when built.

Every env takes its config as an object or as the flat keywords its card lists (the two can be mixed; keywords win):

>>> from llm_marl_envs import writing_v0
>>> from llm_marl_envs.core.config import RewardConfig, TeamConfig
>>> a = writing_v0.parallel_env(num_agents=3, similarity="tfidf")
>>> b = writing_v0.parallel_env(team=TeamConfig(num_agents=3), reward=RewardConfig(similarity="tfidf"))
>>> a.config == b.config
True

A keyword is looked up among the groups' fields; an unknown keyword, a value of the wrong type or out of range raises
``TypeError``/``ValueError`` naming it. ``env.config.to_dict()`` is recorded in ``env.state()`` and in artefacts
(trajectory logs, checkpoints) so a run says exactly what it ran on.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from llm_marl_envs.core.magrpo_episode import MagrpoEpisodeConfig
from llm_marl_envs.core.observation import DONE_OFFER, MAX_DONE_OFFER_CHARS, OBSERVABILITY
from llm_marl_envs.core.rewards import REWARD_MODES, RewardWeights
from llm_marl_envs.core.similarity import BACKENDS as SIMILARITY_BACKENDS
from llm_marl_envs.core.spaces import DEFAULT_ACTION_CHARS, DEFAULT_OBSERVATION_CHARS
from llm_marl_envs.core.termination import END_QUORUMS


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> None:
    """``TypeError`` unless ``value`` is an integer (a Python or NumPy one, not a bool); ``ValueError`` outside
    ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected int, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"{minimum}..{maximum}"
        raise ValueError(f"{name}: expected {bound}, got {value}")


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    """``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name}: expected one of {tuple(choices)}, got {value!r}")


def check_positive(name: str, value: Any) -> None:
    """``TypeError``/``ValueError`` unless ``value`` is a finite number > 0 (a Python or NumPy one, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")


@dataclass(frozen=True)
class TeamConfig:
    """Who plays."""

    num_agents: int = 2
    """1 (one agent: the single-agent baseline and the GRPO case) to 4; the roles per size are in the env's card."""

    def __post_init__(self) -> None:
        check_int("num_agents", self.num_agents, 1, 4)


@dataclass(frozen=True)
class RewardConfig:
    """What the team is paid (see ``core/rewards.py``)."""

    reward_mode: str = "joint"
    """``"joint"`` (the env's shaped joint reward) or ``"magrpo"`` (MAGRPO's reward and episode, 2 agents)."""
    reward_weights: RewardWeights | Mapping[str, float] | None = None
    """Weights of the joint reward (:class:`RewardWeights` or a dict of overrides); stored as a RewardWeights."""
    similarity: str = "auto"
    """Similarity backend for the redundancy cap and the resemblance diagnostics: ``auto`` | ``minilm`` | ``tfidf``."""
    magrpo_episode: MagrpoEpisodeConfig | None = None
    """MAGRPO mode's episode knobs; ``None``: the official app's (``core/magrpo_episode.py``)."""

    def __post_init__(self) -> None:
        check_choice("reward_mode", self.reward_mode, REWARD_MODES)
        check_choice("similarity", self.similarity, SIMILARITY_BACKENDS)
        object.__setattr__(self, "reward_weights", RewardWeights.from_value(self.reward_weights))
        if self.magrpo_episode is not None:
            if not isinstance(self.magrpo_episode, MagrpoEpisodeConfig):
                kind = type(self.magrpo_episode).__name__
                raise TypeError(f"magrpo_episode: expected MagrpoEpisodeConfig or None, got {kind}")
            if self.reward_mode != "magrpo":
                raise ValueError("magrpo_episode: applies to reward_mode='magrpo' only")


@dataclass(frozen=True)
class ObservationConfig:
    """What each agent sees."""

    observability: str = "local"
    """``"local"`` (the Dec-POMDP: own draft, own feedback, messages to it) or ``"team"`` (plus teammates' drafts)."""
    max_observation_chars: int = DEFAULT_OBSERVATION_CHARS
    """Longest observation. What does not fit gives way in this order, each cut marked: messages (oldest first),
    teammates' drafts, feedback; the task and the agent's own draft only when they alone overflow
    (:func:`~llm_marl_envs.core.observation.render_observation`)."""
    reply_prefixes: bool = True
    """Start the replies of roles whose answer has a fixed opening (the coding env's code fence and ``def``) for the
    model: ``chat_messages`` ends with that assistant prefix (see ``CollaborativeTextEnv.reply_prefix``). ``False``:
    plain ``[system, user]`` chats for every role."""
    done_offer: str = DONE_OFFER
    """The last lines of every observation: the offer to end with ``<done/>``, worded for the default model
    (:data:`~llm_marl_envs.core.observation.DONE_OFFER`). Another model may want other words: any text that shows
    the tag, at most :data:`MAX_DONE_OFFER_CHARS` characters; ``""`` offers nothing (the tag still works)."""

    def __post_init__(self) -> None:
        check_choice("observability", self.observability, OBSERVABILITY)
        check_int("max_observation_chars", self.max_observation_chars, 256)
        if not isinstance(self.reply_prefixes, bool):
            raise TypeError(f"reply_prefixes: expected bool, got {type(self.reply_prefixes).__name__}")
        if not isinstance(self.done_offer, str):
            raise TypeError(f"done_offer: expected str, got {type(self.done_offer).__name__}")
        if self.done_offer and ("<done/>" not in self.done_offer or len(self.done_offer) > MAX_DONE_OFFER_CHARS):
            raise ValueError(
                f"done_offer: expected '' or text of at most {MAX_DONE_OFFER_CHARS} characters that shows the tag "
                f"<done/>, got {self.done_offer[:80]!r}{'...' if len(self.done_offer) > 80 else ''} "
                f"({len(self.done_offer)} characters)"
            )


@dataclass(frozen=True)
class LimitsConfig:
    """How long episodes and actions may be."""

    max_turns: int | None = None
    """Turns before truncation; ``None``: 4 in joint mode (``CollaborativeTextEnv.DEFAULT_MAX_TURNS``), the official
    app's in MAGRPO mode (coding 2, writing 1)."""
    max_action_chars: int = DEFAULT_ACTION_CHARS
    """Longest action; longer ones are cut and flagged (and cost an invalid-action penalty)."""
    end_quorum: str | None = None
    """How many finished agents end the episode for everyone: ``"all"``, ``"half"`` (rounded up) or ``"any"``; short
    of everyone, from turn 2 on (``core/termination.py``). ``None``: the env's own in joint mode (its
    ``DEFAULT_END_QUORUM``: writing ``"half"``; coding ``"half"`` under ``scheme="propose_verify"``, its default, and
    ``"all"`` under the others), ``"all"`` in MAGRPO mode."""

    def __post_init__(self) -> None:
        if self.max_turns is not None:
            check_int("max_turns", self.max_turns, 1)
        check_int("max_action_chars", self.max_action_chars, 16)
        if self.end_quorum is not None:
            check_choice("end_quorum", self.end_quorum, END_QUORUMS)


@dataclass(frozen=True)
class EnvConfig:
    """The groups every env has; each env adds its task group (and the coding env its sandbox group)."""

    team: TeamConfig = field(default_factory=TeamConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    render_mode: str | None = None
    """``None``, ``"ansi"`` (``render()`` returns the state as text) or ``"human"`` (prints it each step)."""

    RENDER_MODES: ClassVar[tuple[str, ...]] = ("human", "ansi")

    def __post_init__(self) -> None:
        for group in self._groups():
            value = getattr(self, group.name)
            expected = group.default_factory  # type: ignore[misc]
            if not isinstance(value, expected):
                raise TypeError(f"{group.name}: expected {expected.__name__}, got {type(value).__name__}")
            # A group built by hand may hold NumPy scalars (TeamConfig(num_agents=np.int64(3))): the env gets the
            # Python numbers, as from keywords.
            numpy_fields = {f.name: getattr(value, f.name) for f in fields(value)
                            if isinstance(getattr(value, f.name), np.generic)}
            if numpy_fields:
                plain = {name: _python_scalar(item) for name, item in numpy_fields.items()}
                object.__setattr__(self, group.name, dataclasses.replace(value, **plain))
        if self.render_mode is not None:
            check_choice("render_mode", self.render_mode, self.RENDER_MODES)

    @classmethod
    def _groups(cls) -> list[dataclasses.Field]:
        return [f for f in fields(cls) if f.default_factory is not dataclasses.MISSING]  # type: ignore[misc]

    @classmethod
    def keywords(cls) -> dict[str, str]:
        """Every flat keyword the env accepts → the group that holds it (``""`` for top-level fields)."""
        names: dict[str, str] = {}
        for group in cls._groups():
            for item in fields(group.default_factory):  # type: ignore[arg-type]
                names[item.name] = group.name
        names.update({f.name: "" for f in fields(cls) if f.default_factory is dataclasses.MISSING})  # type: ignore[misc]
        return names

    @classmethod
    def signature(cls, returns: Any) -> inspect.Signature:
        """The signature of an env constructor that takes ``(config=None, **keywords)`` and builds its config with
        :meth:`from_arguments`, as ``help()``, notebooks and IDEs that read ``inspect.signature`` should show it:
        ``config`` (this class or ``None``), then each group (``team=``: its class or a dict; ``None``: the
        config's), then every flat field with its default, keyword-only. Made from the fields, so it cannot
        drift from what the constructor accepts."""
        keyword = inspect.Parameter.KEYWORD_ONLY
        parameters = [inspect.Parameter("config", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                        annotation=cls | None)]
        groups = cls._groups()
        for group in groups:
            kind = group.default_factory  # type: ignore[misc]
            parameters.append(inspect.Parameter(group.name, keyword, default=None,
                                                annotation=kind | Mapping[str, Any] | None))
        for group in groups:
            kind = group.default_factory  # type: ignore[misc]
            hints = _type_hints(kind)
            defaults = kind()
            parameters += [inspect.Parameter(f.name, keyword, default=getattr(defaults, f.name),
                                             annotation=hints.get(f.name, f.type)) for f in fields(kind)]
        hints = _type_hints(cls)
        parameters += [inspect.Parameter(f.name, keyword, default=f.default, annotation=hints.get(f.name, f.type))
                       for f in fields(cls) if f.default_factory is dataclasses.MISSING]  # type: ignore[misc]
        return inspect.Signature(parameters, return_annotation=returns)

    @classmethod
    def from_arguments(cls, config: EnvConfig | None = None, **kwargs: Any) -> EnvConfig:
        """A config from an optional base ``config`` plus keywords: group objects (``team=TeamConfig(...)``, or a
        dict of that group's fields) or flat fields (``num_agents=3``). Keywords override ``config``; a flat field
        and a group given in the same call must agree (``team={"num_agents": 1}, num_agents=2`` is a
        ``ValueError``). NumPy scalars pass as the Python numbers they hold (``num_agents=np.int64(3)``)."""
        if config is None:
            config = cls()
        elif not isinstance(config, cls):
            raise TypeError(f"config: expected {cls.__name__} or None, got {type(config).__name__}")
        groups = {g.name: g.default_factory for g in cls._groups()}  # type: ignore[misc]
        keywords = cls.keywords()
        replaced: dict[str, Any] = {}
        given: dict[str, set[str]] = {}  # each group passed in this call → the fields it sets
        per_group: dict[str, dict[str, Any]] = {}
        for name, value in kwargs.items():
            value = _python_scalar(value)
            if name in groups and value is None:  # None: the config's group (as the signature shows it)
                continue
            if name in groups:
                if isinstance(value, Mapping):
                    given[name] = set(value)
                    value = _build(groups[name], name, {k: _python_scalar(v) for k, v in value.items()})
                elif isinstance(value, groups[name]):
                    given[name] = {f.name for f in fields(value)}
                else:
                    raise TypeError(f"{name}: expected {groups[name].__name__}, got {type(value).__name__} (a dict "
                                    "of its fields works too)")
                replaced[name] = value
            elif keywords.get(name):
                per_group.setdefault(keywords[name], {})[name] = value
            elif name in keywords:
                replaced[name] = value
            else:
                known = sorted({*groups, *keywords})
                raise TypeError(f"{cls.__name__}: unexpected keyword argument {name!r}; known: {known}")
        for group, values in per_group.items():
            base = replaced.get(group, getattr(config, group))
            merged = _build(type(base), group, {**_shallow(base), **values})
            for name in sorted(set(values) & given.get(group, set())):
                if getattr(merged, name) != getattr(base, name):
                    raise ValueError(f"{name}={values[name]!r} conflicts with {group}.{name}="
                                     f"{getattr(base, name)!r} in the same call: give it once")
            replaced[group] = merged
        return dataclasses.replace(config, **replaced)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: nested dicts; objects that are not plain data (an executor instance) by their class name."""
        return _plain(self)


def _type_hints(kind: type) -> dict[str, Any]:
    """``kind``'s field annotations as types (``int``, not the string ``"int"``); ``{}`` when one cannot be read."""
    try:
        return typing.get_type_hints(kind)
    except (NameError, TypeError):
        return {}


def _python_scalar(value: Any) -> Any:
    """A NumPy scalar as the Python value it holds (``np.int64(3)`` is ``3``); anything else unchanged."""
    return value.item() if isinstance(value, np.generic) else value


def _shallow(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def _build(kind: type, group: str, values: dict[str, Any]) -> Any:
    known = {f.name for f in fields(kind)}
    unknown = set(values) - known
    if unknown:
        raise TypeError(f"{group}: unexpected fields {sorted(unknown)}; known: {sorted(known)}")
    return kind(**values)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool, np.generic)):
        return _python_scalar(value)
    return f"<{type(value).__name__}>"
