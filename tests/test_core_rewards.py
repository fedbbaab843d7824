"""Joint reward math: the shaped per-step reward telescopes to the episode objective."""

from __future__ import annotations

import math

import pytest
from envs_helpers import writing_env

from llm_marl_envs.core.rewards import (
    RewardWeights,
    bounded_length_score,
    discarded_words,
    joint_step_reward,
    team_score,
)


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


def test_discarded_words_count_what_the_stored_draft_drops_fences_excepted() -> None:
    part = "```python\ndef f():\n    return 1\n```\nThis returns one."
    assert discarded_words(part, "def f():\n    return 1") == 3
    assert discarded_words("```py\ndef f(): pass\n```", "def f(): pass") == 0
    assert discarded_words("plain prose", "plain prose") == 0
    assert discarded_words("no code here", "") == 3  # nothing usable kept: all of it is discarded
    assert discarded_words("a", "a b c") == 0  # never negative
    weights = RewardWeights(discarded_token=0.01)
    assert math.isclose(joint_step_reward(0.5, 0.0, 0, 0, weights, 0, 20), 0.5 - 0.05 - 0.2)
    assert RewardWeights().discarded_token == 0.0  # off unless asked for


def test_a_writing_reply_is_its_draft_so_nothing_is_discarded() -> None:
    env = writing_env(num_agents=2, reward_weights={"discarded_token": 0.01})
    env.reset(seed=0)
    actions = {agent: f"{agent} writes two plain sentences. They are the whole reply." for agent in env.agents}
    *_, infos = env.step(actions)
    components = infos[env.possible_agents[0]]["reward_components"]
    assert components["step_discarded_tokens"] == components["discarded_tokens"] == 0


def test_weights_are_validated_with_clear_messages() -> None:
    with pytest.raises(ValueError, match=r"RewardWeights.turn: expected a finite number >= 0, got -1"):
        RewardWeights(turn=-1)
    with pytest.raises(TypeError, match=r"RewardWeights.quality: expected a number, got str"):
        RewardWeights(quality="1")
    with pytest.raises(ValueError, match=r"unknown keys \['speed'\]"):
        RewardWeights.from_value({"speed": 1.0})
    assert RewardWeights.from_value({"turn": 0.2}).turn == 0.2
