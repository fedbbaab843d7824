"""The joint reward: one value for the whole team, built from named components.

Team score of the drafts after turn ``t`` (``q`` quality, ``c`` consistency, both in [0, 1]):

    S_t = w_q * q_t + w_c * c_t          (a team of 2+ agents)
    S_t = (w_q + w_c) * q_t              (one agent: consistency is undefined, reported as None)

A single agent has no teammate to coordinate with, so it gets no consistency term at all (never a free 1.0); its
quality weight is renormalised to the same total so the best possible score is the same for a solo agent and a
team, and the two can be compared fairly. Consistency is each env's *counterfactual contribution* measure (what the
team loses without each agent's part: see ``envs/coding/contribution.py`` and ``envs/writing/contribution.py``),
not a resemblance between texts.

Joint reward of step ``t`` (``reward_mode="joint"``, the default), with ``S_0 = 0``:

    r_t = (S_t - S_{t-1}) - w_t - w_m * message_tokens_t - w_inv * invalid_actions_t - w_r * longest_reply_t
          - w_d * discarded_tokens_t

The score enters as a difference (potential-based shaping, Ng et al. 1999), so the undiscounted return telescopes to
exactly the episode-level objective

    R = w_q * quality + w_c * consistency - w_t * turns - w_m * message_tokens - w_inv * invalid_actions
        - w_r * sum_t longest_reply_t - w_d * sum_t discarded_tokens_t

of the final drafts: quality and consistency are paid once, not once per turn, so dragging an episode out never pays,
while every turn, message token and malformed action costs. Each component is reported in ``infos``.

Ending early. At equal final drafts, a team that ends at turn ``k`` of a budget of ``T`` earns ``w_t * (T - k)`` more
than one that plays the budget out (``tests/test_core_observation.py``), so the branches of a MAGRPO tree that end
early rank above their siblings. ``w_t = 0.05`` is the exchange rate: a revision turn pays when it adds more than 5
points of quality. Next to the noise of one group it is a small signal in writing (the shipped writing team's reward
varied with a standard deviation of about 0.41 across a step, so two turns saved are about a quarter of it) and a
large one in coding (0.08: one turn is most of it). A larger ``w_t`` would speed learning to end early but would
also pay a team to stop revising parts that a turn could still improve, and every margin of the integrity suite is
stated in it (a degenerate strategy must lose by half a turn, 0.025); so the default stays 0.05, and a study that
wants ending early to weigh more passes ``reward_weights={"turn": ...}``.

Latency within a turn. The agents of a turn reply in parallel, so a turn lasts as long as its longest reply:
``longest_reply_t`` is the whitespace tokens of the longest action of turn ``t``, and the sum over turns is the
episode's critical path in those units. ``w_r`` (``reply_token``) prices it; it is 0 by default (the envs' returns are
as they were), and a recipe that trains a team to be no slower than one agent sets it. What it can pay for, and why
that loses to honest work: an empty or truncated reply saves its tokens but loses the quality it would have earned
(at ``w_r = 0.002`` a 100-token reply costs 0.2, a passing program earns ``w_q`` = 1); a reply that drops padding
(a re-typed docstring, comments) keeps its quality and costs less, which is the point
(``tests/test_coding_schemes.py``).

Text the env throws away. ``discarded_tokens_t`` counts, over the agents of turn ``t``, the whitespace tokens of each
reply that became neither the agent's stored draft nor a message nor the ``<done/>`` marker: what the env's
``normalize_draft`` drops (in coding: prose around the code block, a second code block, a redefinition or a
top-level test after the function; in writing nothing, as the draft is the reply). ``w_d`` (``discarded_token``)
prices it, 0 by default. Why it exists: a coder of SmolLM2-135M closes its code block and goes on writing (17 of 24
first replies of the shipped coding-2 on train-split tasks ran to the 160-token cap, against 3 of 12 for one agent;
``docs/results/coding-propose-verify/2-trim``), so its turns are long for nothing the env keeps, and ``w_r`` prices
that waste only as much as the program itself. Unlike ``w_r``, ``w_d`` cannot be earned by writing less of the
program: a reply with no discarded text costs nothing however long its program, so no honest reply is taxed and
the cheapest way to avoid the charge is to stop after the part the env keeps. Moving the surplus into the draft (a
docstring, dead code) or into a message is left to ``w_r`` and ``w_m`` (``tests/test_coding_schemes.py``).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

REWARD_MODES: tuple[str, ...] = ("joint", "magrpo")
"""``joint``: the shaped joint reward above. ``magrpo``: each step pays the absolute MAGRPO reward of that turn's
outputs, as in the MAGRPO paper's multi-turn setting (its rewards are task-specific; see each env)."""


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the joint reward. All must be finite and non-negative."""

    quality: float = 1.0
    """w_q: weight of task quality (test pass rate for code, reference-free checks for writing)."""
    consistency: float = 0.5
    """w_c: weight of coordination consistency (each agent's counterfactual contribution to the team's output)."""
    turn: float = 0.05
    """w_t: cost of each turn (latency, i.e. task completion time)."""
    message_token: float = 0.001
    """w_m: cost per whitespace token of messages sent between agents."""
    invalid_action: float = 0.05
    """w_inv: cost per action that broke the protocol (empty, unclosed tag, unknown recipient...)."""
    reply_token: float = 0.0
    """w_r: cost per whitespace token of each turn's longest reply (latency within a turn; 0: not priced)."""
    discarded_token: float = 0.0
    """w_d: cost per whitespace token of the replies' text that the env discards (neither draft, message nor marker;
    0: not priced)."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"RewardWeights.{name}: expected a number, got {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"RewardWeights.{name}: expected a finite number >= 0, got {value!r}")

    @classmethod
    def from_value(cls, value: RewardWeights | dict | None) -> RewardWeights:
        """Accept an instance, a dict of field overrides, or ``None`` (defaults)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - set(asdict(cls()))
            if unknown:
                raise ValueError(f"reward_weights: unknown keys {sorted(unknown)}; known: {sorted(asdict(cls()))}")
            return cls(**value)
        raise TypeError(f"reward_weights: expected RewardWeights, dict or None, got {type(value).__name__}")


def team_score(quality: float, consistency: float | None, weights: RewardWeights) -> float:
    """S = w_q * quality + w_c * consistency; with no consistency (one agent) S = (w_q + w_c) * quality."""
    if consistency is None:
        return (weights.quality + weights.consistency) * quality
    return weights.quality * quality + weights.consistency * consistency


def joint_step_reward(
    score: float, previous_score: float, message_tokens: int, invalid_actions: int, weights: RewardWeights,
    longest_reply_tokens: int = 0, discarded_tokens: int = 0,
) -> float:
    """r_t = (S_t - S_{t-1}) - w_t - w_m * message_tokens_t - w_inv * invalid_actions_t - w_r * longest_reply_t
    - w_d * discarded_tokens_t (see module docstring)."""
    return (
        (score - previous_score)
        - weights.turn
        - weights.message_token * message_tokens
        - weights.invalid_action * invalid_actions
        - weights.reply_token * longest_reply_tokens
        - weights.discarded_token * discarded_tokens
    )


_FENCE_MARKER = re.compile(r"`{3,}[\w+.-]*")


def discarded_words(part: str, kept: str) -> int:
    """``discarded_tokens`` of one action (``w_d``, module docstring): the whitespace tokens of its draft part
    (messages and markers already out) that the stored draft ``kept`` does not hold, code-fence markers excepted (a
    fence packages the draft; it is not surplus); never negative."""
    words = sum(1 for word in part.split() if not _FENCE_MARKER.fullmatch(word))
    return max(0, words - len(kept.split()))


def bounded_length_score(length: int, low: int, high: int) -> float:
    """1 inside [low, high]; rises linearly from 0 below ``low``; falls linearly to 0 at ``2 * high`` above it."""
    if low <= length <= high:
        return 1.0
    if length < low:
        return length / low if low > 0 else 0.0
    return max(0.0, 1.0 - (length - high) / high)


@dataclass(frozen=True)
class MagrpoReward:
    """One MAGRPO reward: the ``total`` and its per-level / per-term breakdown (``levels``, for infos).

    ``maximum`` is the formula's nominal maximum; ``levels_passed`` counts the gates passed before scoring stopped.
    """

    total: float
    levels: dict[str, float] = field(default_factory=dict)
    maximum: float = 0.0
    levels_passed: int = 0
