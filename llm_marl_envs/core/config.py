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
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from llm_marl_envs.core.magrpo_episode import MagrpoEpisodeConfig
from llm_marl_envs.core.observation import DONE_OFFER, MAX_DONE_OFFER_CHARS, OBSERVABILITY
from llm_marl_envs.core.rewards import REWARD_MODES, RewardWeights
from llm_marl_envs.core.similarity import BACKENDS as SIMILARITY_BACKENDS
from llm_marl_envs.core.spaces import DEFAULT_ACTION_CHARS, DEFAULT_OBSERVATION_CHARS
from llm_marl_envs.core.termination import END_QUORUMS


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> None:
    """``TypeError`` unless ``value`` is an int (not a bool); ``ValueError`` outside ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected int, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"{minimum}..{maximum}"
        raise ValueError(f"{name}: expected {bound}, got {value}")


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    """``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name}: expected one of {tuple(choices)}, got {value!r}")


def check_positive(name: str, value: Any) -> None:
    """``TypeError``/``ValueError`` unless ``value`` is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
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
    ``DEFAULT_END_QUORUM``: writing ``"half"``, coding ``"all"``), ``"all"`` in MAGRPO mode."""

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
    def from_arguments(cls, config: EnvConfig | None = None, **kwargs: Any) -> EnvConfig:
        """A config from an optional base ``config`` plus keywords: group objects (``team=TeamConfig(...)``, or a
        dict of that group's fields) or flat fields (``num_agents=3``)."""
        if config is None:
            config = cls()
        elif not isinstance(config, cls):
            raise TypeError(f"config: expected {cls.__name__} or None, got {type(config).__name__}")
        groups = {g.name: g.default_factory for g in cls._groups()}  # type: ignore[misc]
        keywords = cls.keywords()
        replaced: dict[str, Any] = {}
        per_group: dict[str, dict[str, Any]] = {}
        for name, value in kwargs.items():
            if name in groups:
                if isinstance(value, Mapping):
                    value = _build(groups[name], name, dict(value))
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
            replaced[group] = _build(type(base), group, {**_shallow(base), **values})
        return dataclasses.replace(config, **replaced)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: nested dicts; objects that are not plain data (an executor instance) by their class name."""
        return _plain(self)


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
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return f"<{type(value).__name__}>"
