"""Returns and advantages against values computed by hand (``trainers/advantages.py``)."""

from __future__ import annotations

import math

import pytest
import torch

from llm_marl_envs.rollout import TreeNode
from llm_marl_trainers.advantages import (
    group_advantages,
    node_returns,
    per_agent_advantages,
    reward_metrics,
    sample_returns,
    sibling_groups,
)

EPS = 1e-4


def hand_tree() -> dict[str, TreeNode]:
    """The tree ``root → {a (r=1) → {a1 (r=2), a2 (r=4)}, b (r=0) → {b1 (r=0), b2 (r=1, done)}}``."""
    a1, a2 = TreeNode(0, 2, reward=2.0), TreeNode(0, 2, reward=4.0)
    b1, b2 = TreeNode(0, 2, reward=0.0), TreeNode(0, 2, reward=1.0, done=True)
    a = TreeNode(0, 1, reward=1.0, children=[a1, a2])
    b = TreeNode(0, 1, reward=0.0, children=[b1, b2])
    root = TreeNode(0, 0, children=[a, b])
    return {"root": root, "a": a, "b": b, "a1": a1, "a2": a2, "b1": b1, "b2": b2}


@pytest.mark.parametrize(
    ("gamma", "expected"),
    [
        # γ = 1: R(a) = 1 + (2 + 4)/2 = 4, R(b) = 0 + (0 + 1)/2 = 0.5, R(root) = 0 + (4 + 0.5)/2 = 2.25
        (1.0, {"root": 2.25, "a": 4.0, "b": 0.5, "a1": 2.0, "a2": 4.0, "b1": 0.0, "b2": 1.0}),
        # γ = 0.9: R(a) = 1 + 0.9·3 = 3.7, R(b) = 0.9·0.5 = 0.45, R(root) = 0.9·(3.7 + 0.45)/2 = 1.8675
        (0.9, {"root": 1.8675, "a": 3.7, "b": 0.45, "a1": 2.0, "a2": 4.0, "b1": 0.0, "b2": 1.0}),
        # γ = 0: only the immediate reward
        (0.0, {"root": 0.0, "a": 1.0, "b": 0.0, "a1": 2.0, "a2": 4.0, "b1": 0.0, "b2": 1.0}),
    ],
)
def test_node_returns_match_hand_values(gamma: float, expected: dict[str, float]) -> None:
    tree = hand_tree()
    returns = node_returns(tree["root"], gamma)
    assert {name: returns[id(node)] for name, node in tree.items()} == pytest.approx(expected)


def test_node_returns_leave_the_tree_alone_and_reject_bad_gamma() -> None:
    tree = hand_tree()
    before = repr(tree["root"])
    node_returns(tree["root"], 0.9)
    assert repr(tree["root"]) == before
    with pytest.raises(ValueError, match=r"gamma: expected a discount in \[0, 1\], got 1.5"):
        node_returns(tree["root"], 1.5)


def test_sibling_groups_are_the_children_of_each_internal_node_depth_first() -> None:
    tree = hand_tree()
    groups = sibling_groups(tree["root"])
    assert [[id(n) for n in g] for g in groups] == [
        [id(tree["a"]), id(tree["b"])],
        [id(tree["a1"]), id(tree["a2"])],
        [id(tree["b1"]), id(tree["b2"])],
    ]


def test_tree_group_advantages_without_scaling() -> None:
    tree = hand_tree()
    returns = node_returns(tree["root"], 1.0)
    groups = [torch.tensor([returns[id(n)] for n in g]) for g in sibling_groups(tree["root"])]
    advantages = group_advantages(groups, scale_rewards="none")
    # groups [4, 0.5], [2, 4], [0, 1] minus their means 2.25, 3, 0.5
    assert [a.tolist() for a in advantages] == [[1.75, -1.75], [-1.0, 1.0], [-0.5, 0.5]]


RETURNS = torch.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])


def test_group_scaling_divides_by_each_groups_unbiased_std_plus_eps() -> None:
    # group 1: mean 2, unbiased std 1; group 2: all equal, std 0 -> advantages 0
    expected = torch.tensor([[-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]) / torch.tensor([[1.0 + EPS], [0.0 + EPS]])
    assert torch.allclose(group_advantages(RETURNS, "group"), expected)


def test_batch_scaling_divides_by_one_std_over_the_whole_batch() -> None:
    # all six values: mean 3.5, squared deviations 6.25 + 2.25 + 0.25 + 3·2.25 = 15.5, unbiased var 15.5/5 = 3.1
    expected = torch.tensor([[-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]) / (math.sqrt(3.1) + EPS)
    assert torch.allclose(group_advantages(RETURNS, "batch"), expected)


def test_no_scaling_is_the_mean_baseline_only() -> None:
    assert group_advantages(RETURNS, "none").tolist() == [[-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]


def test_population_std_as_comlrl() -> None:
    # population std of [1, 2, 3] = sqrt(2/3)
    expected = torch.tensor([-1.0, 0.0, 1.0]) / (math.sqrt(2 / 3) + EPS)
    assert torch.allclose(group_advantages(RETURNS, "group", unbiased=False)[0], expected)


def test_ragged_groups_and_a_group_of_one() -> None:
    # [1, 3]: mean 2, unbiased std sqrt(2); [2]: alone, advantage 0
    first, second = group_advantages([[1.0, 3.0], [2.0]], "group")
    assert torch.allclose(first, torch.tensor([-1.0, 1.0], dtype=torch.float64) / (math.sqrt(2) + EPS))
    assert second.tolist() == [0.0]


def test_unknown_scale_rewards_is_refused() -> None:
    with pytest.raises(ValueError, match=r"scale_rewards: expected one of \('group', 'batch', 'none'\), got 'std'"):
        group_advantages(RETURNS, "std")  # type: ignore[arg-type]


def test_reward_metrics_use_trl_names_and_values() -> None:
    metrics = reward_metrics(RETURNS)
    assert metrics == pytest.approx({"reward": 3.5, "reward_std": math.sqrt(3.1), "frac_reward_zero_std": 0.5})


def test_sample_returns_cross_mode_mean_and_sum() -> None:
    # two agents, G = 2, joint actions (0,0)→1, (0,1)→2, (1,0)→3, (1,1)→6
    joint = [1.0, 2.0, 3.0, 6.0]
    index = [(0, 0), (0, 1), (1, 0), (1, 1)]
    # agent 0: sample 0 in {1, 2}, sample 1 in {3, 6}; agent 1: sample 0 in {1, 3}, sample 1 in {2, 6}
    assert sample_returns(joint, index, 2, "mean").tolist() == [[1.5, 4.5], [2.0, 4.0]]
    assert sample_returns(joint, index, 2, "sum").tolist() == [[3.0, 9.0], [4.0, 8.0]]


def test_sample_returns_aligned_mode_is_the_joint_return() -> None:
    assert sample_returns([1.0, 5.0], [(0, 0), (1, 1)], 2).tolist() == [[1.0, 5.0], [1.0, 5.0]]


def test_per_agent_advantages() -> None:
    R = torch.tensor([1.0, 2.0, 6.0])  # mean 3
    assert per_agent_advantages(R).tolist() == [-2.0, -1.0, 3.0]
    # leave-one-out: 1 − (2+6)/2 = −3, 2 − (1+6)/2 = −1.5, 6 − (1+2)/2 = 4.5
    assert per_agent_advantages(R, leave_one_out=True).tolist() == [-3.0, -1.5, 4.5]
    assert per_agent_advantages(torch.tensor([[4.0, 2.0]])).tolist() == [[1.0, -1.0]]
