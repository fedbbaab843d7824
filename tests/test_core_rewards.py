"""Joint reward math: the shaped per-step reward telescopes to the episode objective."""

from __future__ import annotations

import math

import pytest

from llm_marl_envs.core.rewards import RewardWeights, bounded_length_score, joint_step_reward, team_score


def test_return_telescopes_to_final_score_minus_costs() -> None:
    weights = RewardWeights(quality=1.0, consistency=0.5, turn=0.05, message_token=0.01, invalid_action=0.1)
    scores = [team_score(q, c, weights) for q, c in [(0.2, 0.5), (0.6, 0.7), (0.9, 0.8)]]
    tokens, invalid = [3, 0, 10], [1, 0, 0]
    previous, total = 0.0, 0.0
    for score, t, i in zip(scores, tokens, invalid, strict=True):
        total += joint_step_reward(score, previous, t, i, weights)
        previous = score
    expected = 1.0 * 0.9 + 0.5 * 0.8 - 0.05 * 3 - 0.01 * 13 - 0.1 * 1
    assert math.isclose(total, expected)


@pytest.mark.parametrize(
    ("length", "score"), [(0, 0.0), (5, 0.5), (10, 1.0), (20, 1.0), (30, 0.5), (40, 0.0), (99, 0.0)]
)
def test_bounded_length_score(length: int, score: float) -> None:
    assert math.isclose(bounded_length_score(length, 10, 20), score)


def test_the_longest_reply_cost_telescopes_into_the_return() -> None:
    weights = RewardWeights(reply_token=0.002)
    scores = [team_score(q, c, weights) for q, c in [(0.5, 0.4), (0.9, 0.6)]]
    longest = [120, 30]
    previous, total = 0.0, 0.0
    for score, words in zip(scores, longest, strict=True):
        total += joint_step_reward(score, previous, 0, 0, weights, words)
        previous = score
    assert math.isclose(total, 0.9 + 0.5 * 0.6 - 0.05 * 2 - 0.002 * 150)
    assert RewardWeights().reply_token == 0.0  # off unless asked for: the envs' returns are as they were


def test_weights_are_validated_with_clear_messages() -> None:
    with pytest.raises(ValueError, match=r"RewardWeights.turn: expected a finite number >= 0, got -1"):
        RewardWeights(turn=-1)
    with pytest.raises(TypeError, match=r"RewardWeights.quality: expected a number, got str"):
        RewardWeights(quality="1")
    with pytest.raises(ValueError, match=r"unknown keys \['speed'\]"):
        RewardWeights.from_value({"speed": 1.0})
    assert RewardWeights.from_value({"turn": 0.2}).turn == 0.2
