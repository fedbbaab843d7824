"""MAGRPO's episode semantics (reward shift, early termination, number of turns), as pure functions.

The per-turn MAGRPO rewards (``envs/coding/magrpo_reward.py``, ``envs/writing/magrpo_reward.py``) score one turn's
joint output. What the official training code does with them over an episode is below; every fact names the file and
the commit it was read from (repositories ``OpenMLRL/CoMLRL``, ``OpenMLRL/LLM_Collab_Code_Generation``,
``OpenMLRL/LLM_Collab_Writing``; CoMLRL also as the PyPI release ``comlrl==1.4.3``). The code here is ours.

* **Reward processing.** Each turn's raw reward ``x`` becomes ``shift(scale(x)) = x * scale + shift``
  (``comlrl/utils/reward_processor.py`` in comlrl 1.4.3: ``scale`` is ``x * factor``, ``shift`` is ``x + value``;
  composed scale-then-shift in ``train_magrpo.py`` of both apps: Code_Generation ``0b914ca``, Writing ``7e59995``).
  Shipped values: code ``reward_processor: {scale_factor: 1.0, shift: -4}`` (``configs/magrpo_he_config.yaml`` and
  ``configs/magrpo_che_config.yaml`` at ``07663c1``); writing ``{scale_factor: 1.0, shift: 0.0}``
  (``configs/magrpo_tldr_config.yaml`` and ``configs/magrpo_arxiv_config.yaml`` at ``7e59995``). The shift is a
  constant: there is no ``reward - previous_reward`` difference anywhere; every turn is paid its own shifted reward.
* **Return.** In the rollout tree a node's return is ``R = r + gamma * mean(children's R)``, a leaf's is ``r``
  (``compute_returns`` in ``comlrl/trainers/reinforce/magrpo.py``, CoMLRL ``bb77955``, ``gamma = args.discount``);
  comlrl 1.4.3 drops the factor (``R = r + mean(children's R)``, "undiscounted reward sum"), and the shipped code
  configs set ``discount: 1.0`` anyway (``07663c1``), so the official return is undiscounted. Evaluation follows one
  path (one sample per agent per turn) and reports ``ret[t] = r[t] + gamma * ret[t + 1]`` (``evaluate`` in
  ``bb77955``; undiscounted in 1.4.3).
* **Early termination.** After scoring the G joint actions of a node, the branch stops expanding when
  ``mean(processed rewards of those G) > early_termination_threshold`` (strictly greater; the rewards are the
  *processed* ones), checked at every turn but the last (``build_node`` in ``bb77955`` and in 1.4.3). Default
  ``-0.2`` (``MAGRPOConfig`` in both, and the apps' ``train_magrpo.py``: ``magrpo.early_termination_threshold``,
  default ``-0.2``); the code configs set ``-0.2`` (``07663c1``). With code's shift ``-4`` a branch ends once the raw
  reward's group mean exceeds 3.8 (of 4.0). Evaluation never terminates early: it plays every turn.
* **Turns.** Code: ``num_turns: 2`` (configs at ``07663c1``; also the default of ``train_magrpo.py`` at ``0b914ca``
  and of ``MAGRPOConfig``). Writing: 1, enforced (``train_magrpo.py`` at ``7e59995`` raises for any other value).

**What "the per-episode return equals theirs" means for one linear episode.** An env episode is one path through
the tree: one joint action per turn, so the group of a node is that one action (G = 1) and ``mean(children's R)`` is
the one child's return. The official return of such a path, from its first turn, is ``R_1 = sum_t gamma**(t-1) *
r_t`` over the turns played, where ``r_t`` is the processed reward and the path stops after the first turn whose
``r_t`` exceeds the threshold (or after ``num_turns``). The env pays ``gamma**(t-1) * r_t`` at step ``t``
(:func:`step_payment`), so the plain, undiscounted sum of its step rewards is ``R_1``; with the official ``gamma =
1`` that is just ``r_t``. Per-step payments are discounted from the episode's start, not from each turn (the
trainer's ``R_t`` for ``t > 1`` restarts the discount at ``t``); nothing else differs.

**Padding turns is neutralised** by three things together: the shift makes every code turn worth at most ``4.0 - 4
= 0``, so an extra turn can only lower the return; the episode ends at ``num_turns`` (2 for code, 1 for writing) and
as soon as a turn's processed reward beats the threshold; and an episode the env ends early for its own reasons
(every agent said done, or the drafts stopped changing) is *settled*: its last step also pays the processed reward
of the remaining turns as if the same drafts were submitted again (:func:`settlement`), which is what the official
trainer would pay for them, so quitting early is neither a gain nor a loss. Settlement is ours: the official apps have
no way for agents to stop before ``num_turns``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

JOINT_MODES: tuple[str, ...] = ("aligned", "cross")
"""How G samples per agent form joint actions: ``aligned`` pairs the k-th samples (G joint actions), ``cross`` takes
every combination (G^N), as in MAGRPO (Liu et al. 2025, Sec. 4; CoMLRL's ``joint_mode``). The one list: the rollout
runner and the trainer's config import it from here."""


def _real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class MagrpoEpisodeConfig:
    """The episode knobs of MAGRPO's official training code (see the module docstring for sources).

    Attributes:
        num_turns: turns per episode (the env's ``max_turns`` in MAGRPO mode).
        reward_scale: multiplies the raw reward first (``reward_processor.scale_factor``).
        reward_shift: then added (``reward_processor.shift``).
        early_termination_threshold: a path ends after a turn whose processed reward is strictly greater; ``None``
            never ends early (the official evaluation protocol).
        discount: ``gamma`` of ``R = r + gamma * R_next``; 1.0 in the shipped configs and ignored by comlrl 1.4.3.
        num_generations: G, samples per agent per node (for tree rollouts; a linear episode has G = 1).
        joint_mode: ``"aligned"`` (the g-th samples form a joint action) or ``"cross"`` (Cartesian product).
    """

    num_turns: int
    reward_scale: float = 1.0
    reward_shift: float = 0.0
    early_termination_threshold: float | None = -0.2
    discount: float = 1.0
    num_generations: int = 4
    joint_mode: str = "aligned"

    def __post_init__(self) -> None:
        for name in ("num_turns", "num_generations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {value!r}")
        _real("reward_scale", self.reward_scale)
        _real("reward_shift", self.reward_shift)
        if self.early_termination_threshold is not None:
            _real("early_termination_threshold", self.early_termination_threshold)
        if not 0.0 < _real("discount", self.discount) <= 1.0:
            raise ValueError(f"discount: expected a number in (0, 1], got {self.discount!r}")
        if self.joint_mode not in JOINT_MODES:
            raise ValueError(f"joint_mode: expected one of {JOINT_MODES}, got {self.joint_mode!r}")

    def process(self, raw_reward: float) -> float:
        """The processed reward of one turn: ``raw * reward_scale + reward_shift`` (scale, then shift)."""
        return process_reward(raw_reward, scale=self.reward_scale, shift=self.reward_shift)

    def for_eval(self) -> MagrpoEpisodeConfig:
        """The evaluation protocol's variant: every turn is played (no early termination)."""
        return dataclasses.replace(self, early_termination_threshold=None)


OFFICIAL_EPISODE: Mapping[str, MagrpoEpisodeConfig] = MappingProxyType(
    {
        # LLM_Collab_Code_Generation configs/magrpo_he_config.yaml and magrpo_che_config.yaml at 07663c1:
        # num_turns 2, reward_processor {scale_factor 1.0, shift -4}, early_termination_threshold -0.2, discount 1.0,
        # num_generations 4, joint_mode aligned.
        "coding": MagrpoEpisodeConfig(
            num_turns=2, reward_scale=1.0, reward_shift=-4.0, early_termination_threshold=-0.2, discount=1.0
        ),
        # LLM_Collab_Writing configs/magrpo_tldr_config.yaml and magrpo_arxiv_config.yaml at 7e59995: num_turns 1
        # (enforced by train_magrpo.py), reward_processor {scale_factor 1.0, shift 0.0}; the threshold is the trainer's
        # default -0.2 and never acts with one turn; discount is irrelevant with one turn.
        "writing": MagrpoEpisodeConfig(
            num_turns=1, reward_scale=1.0, reward_shift=0.0, early_termination_threshold=-0.2, discount=1.0
        ),
    }
)
"""The official episode defaults per app (``"coding"``, ``"writing"``)."""


def official_episode_config(app: str) -> MagrpoEpisodeConfig:
    """The official defaults of ``app`` (``"coding"`` or ``"writing"``)."""
    if app not in OFFICIAL_EPISODE:
        raise ValueError(f"app: expected one of {tuple(OFFICIAL_EPISODE)}, got {app!r}")
    return OFFICIAL_EPISODE[app]


def process_reward(raw_reward: float, *, scale: float = 1.0, shift: float = 0.0) -> float:
    """``raw_reward * scale + shift``: CoMLRL's ``RewardProcessors.scale`` then ``RewardProcessors.shift``."""
    return _real("raw_reward", raw_reward) * _real("scale", scale) + _real("shift", shift)


def terminates_early(processed: float | Sequence[float], threshold: float | None) -> bool:
    """Whether a node stops expanding: the mean of its processed rewards is strictly greater than ``threshold``.

    ``processed`` is one reward (a linear episode: the group is the one joint action taken) or the rewards of a
    node's G joint actions (a tree rollout: the official rule uses their mean). ``None`` threshold: never.
    """
    if threshold is None:
        return False
    values = [processed] if isinstance(processed, (int, float)) else list(processed)
    if not values:
        return False
    mean = math.fsum(_real("processed", v) for v in values) / len(values)
    return mean > _real("threshold", threshold)


def step_payment(processed: float, turn: int, discount: float = 1.0) -> float:
    """What the env pays at step ``turn`` (1-based) so that the undiscounted sum of payments is the official return
    from the episode's start: ``discount ** (turn - 1) * processed``."""
    _check_turn(turn)
    return _real("discount", discount) ** (turn - 1) * _real("processed", processed)


def settlement(processed: float, turn: int, config: MagrpoEpisodeConfig) -> float:
    """What an episode the env ends after ``turn`` (< ``num_turns``, no early termination) still owes: the payments
    of turns ``turn + 1 .. num_turns`` had the same drafts been submitted again, each earning ``processed``.

    Zero when ``turn >= num_turns``. Ours, not the official code's (its agents cannot stop early).
    """
    _check_turn(turn)
    return math.fsum(step_payment(processed, t, config.discount) for t in range(turn + 1, config.num_turns + 1))


@dataclass(frozen=True)
class MagrpoStep:
    """The MAGRPO accounting of one env step.

    Attributes:
        reward: what the env pays every agent this step (the turn's payment plus any settlement).
        processed: this turn's processed reward (raw, scaled, shifted).
        early_terminated: the processed reward beat the threshold before the last turn: end the episode now
            (every live agent terminated).
        last_turn: the episode ends with this step (early termination, ``num_turns`` reached, or the env ending it).
        settled: the part of ``reward`` paid for turns not played (see :func:`settlement`).
    """

    reward: float
    processed: float
    early_terminated: bool
    last_turn: bool
    settled: float = 0.0


def magrpo_step(raw_reward: float, turn: int, config: MagrpoEpisodeConfig, *, env_ends: bool = False) -> MagrpoStep:
    """The MAGRPO accounting of step ``turn`` (1-based) that scored ``raw_reward``.

    ``env_ends``: the env ends the episode this step for its own reasons (all agents done, drafts converged); when
    that happens before ``num_turns`` without an early termination, the remaining turns are settled. A turn past
    ``num_turns`` is an error: the env's ``max_turns`` must be ``config.num_turns`` in MAGRPO mode.
    """
    _check_turn(turn)
    if turn > config.num_turns:
        raise ValueError(f"turn: expected at most num_turns={config.num_turns}, got {turn}")
    processed = config.process(raw_reward)
    payment = step_payment(processed, turn, config.discount)
    final = turn == config.num_turns
    early = not final and terminates_early(processed, config.early_termination_threshold)
    settled = settlement(processed, turn, config) if env_ends and not (early or final) else 0.0
    return MagrpoStep(payment + settled, processed, early, early or final or env_ends, settled)


@dataclass(frozen=True)
class EpisodePath:
    """One linear MAGRPO episode: the turns played, their processed rewards and payments, and its return.

    Attributes:
        processed: the processed reward of each turn played.
        payments: what the env pays at each step (sums to ``episode_return``).
        early_terminated: the path stopped before ``num_turns`` because a turn beat the threshold.
        episode_return: the official return of the path from its first turn, ``sum(gamma**(t-1) * r_t)``.
    """

    processed: tuple[float, ...]
    payments: tuple[float, ...]
    early_terminated: bool
    episode_return: float

    @property
    def turns(self) -> int:
        """How many turns the path played."""
        return len(self.processed)


def official_episode(raw_rewards: Sequence[float], config: MagrpoEpisodeConfig) -> EpisodePath:
    """The path the official trainer plays given the raw reward each turn would score.

    ``raw_rewards[t]`` is turn ``t + 1``'s raw reward. The path stops after the first turn (before the last) whose
    processed reward beats the threshold; rewards after that are ignored. Without an early termination there must
    be exactly ``num_turns`` rewards.
    """
    raws = list(raw_rewards)
    if not 1 <= len(raws) <= config.num_turns:
        raise ValueError(f"raw_rewards: expected 1..{config.num_turns} rewards, got {len(raws)}")
    processed: list[float] = []
    payments: list[float] = []
    early = False
    for turn, raw in enumerate(raws, start=1):
        step = magrpo_step(raw, turn, config)
        processed.append(step.processed)
        payments.append(step.reward)
        if step.early_terminated:
            early = True
            break
    if not early and len(processed) < config.num_turns:
        raise ValueError(
            f"raw_rewards: the path does not end early, so it needs {config.num_turns} rewards, got {len(raws)}"
        )
    return EpisodePath(tuple(processed), tuple(payments), early, math.fsum(payments))


def discounted_return(processed: Sequence[float], discount: float = 1.0) -> float:
    """``R_1 = r_1 + gamma * (r_2 + gamma * (...))`` of one path (the official ``compute_returns`` with G = 1)."""
    result = 0.0
    for reward in reversed(list(processed)):
        result = _real("processed", reward) + _real("discount", discount) * result
    return result


def _check_turn(turn: object) -> None:
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise ValueError(f"turn: expected an int >= 1, got {turn!r}")


@dataclass(frozen=True)
class HubSlice:
    """A slice of a hub dataset's split, as the official configs write it (``"test[33:163]"``)."""

    dataset: str
    hub_split: str
    start: int | None = None
    stop: int | None = None

    def __str__(self) -> str:
        start = "" if self.start is None else str(self.start)
        stop = "" if self.stop is None else str(self.stop)
        return f"{self.hub_split}[{start}:{stop}]"

    def contains(self, hub_split: str, index: int) -> bool:
        """Whether row ``index`` (0-based) of ``hub_split`` is in the slice (negative bounds are not used here)."""
        if hub_split != self.hub_split:
            return False
        return (self.start is None or index >= self.start) and (self.stop is None or index < self.stop)


OFFICIAL_DATA_SLICES: Mapping[str, Mapping[str, HubSlice]] = MappingProxyType(
    {
        # LLM_Collab_Code_Generation configs/magrpo_he_config.yaml at 07663c1: train test[33:163], eval test[:32]
        # (HumanEval/32 and /163 are in neither).
        "humaneval": {
            "train": HubSlice("openai/openai_humaneval", "test", 33, 163),
            "eval": HubSlice("openai/openai_humaneval", "test", None, 32),
        },
        # configs/magrpo_che_config.yaml at 07663c1: train train[16:], eval train[:16].
        "coophumaneval": {
            "train": HubSlice("OpenMLRL/CoopHumanEval", "train", 16, None),
            "eval": HubSlice("OpenMLRL/CoopHumanEval", "train", None, 16),
        },
        # configs/grpo_mbpp_config.yaml at 436fcbb and maac_mbpp_config.yaml at 67b79a4 (no current MAGRPO MBPP config
        # was found): OpenMLRL/MBPP, train test[15:65], eval test[:15].
        "mbpp": {
            "train": HubSlice("OpenMLRL/MBPP", "test", 15, 65),
            "eval": HubSlice("OpenMLRL/MBPP", "test", None, 15),
        },
        # LLM_Collab_Writing configs/magrpo_tldr_config.yaml at 7e59995: train train[:1100], eval test[:1100].
        "tldr": {
            "train": HubSlice("trl-lib/tldr", "train", None, 1100),
            "eval": HubSlice("trl-lib/tldr", "test", None, 1100),
        },
        # configs/magrpo_arxiv_config.yaml at 7e59995: train train[:1100], eval val[:1100] (the split is named "val").
        "arxiv": {
            "train": HubSlice("OpenMLRL/arXiv_abstract", "train", None, 1100),
            "eval": HubSlice("OpenMLRL/arXiv_abstract", "val", None, 1100),
        },
    }
)
"""The official train and eval slices per dataset. The trainer evaluates only the first ``eval_num_samples`` (4)
items of the eval slice at each evaluation (``evaluate`` in CoMLRL ``bb77955``; configs set 4)."""


def official_split(dataset: str, hub_split: str, index: int) -> str | None:
    """``"train"``, ``"eval"`` or ``None`` (unused by the official runs) for row ``index`` of ``hub_split``."""
    if dataset not in OFFICIAL_DATA_SLICES:
        raise ValueError(f"dataset: expected one of {tuple(OFFICIAL_DATA_SLICES)}, got {dataset!r}")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"index: expected an int >= 0, got {index!r}")
    for split, hub_slice in OFFICIAL_DATA_SLICES[dataset].items():
        if hub_slice.contains(hub_split, index):
            return split
    return None


__all__ = [
    "OFFICIAL_DATA_SLICES",
    "OFFICIAL_EPISODE",
    "EpisodePath",
    "HubSlice",
    "MagrpoEpisodeConfig",
    "MagrpoStep",
    "discounted_return",
    "magrpo_step",
    "official_episode",
    "official_episode_config",
    "official_split",
    "process_reward",
    "settlement",
    "step_payment",
    "terminates_early",
]
