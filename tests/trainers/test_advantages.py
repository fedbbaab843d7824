"""Returns and advantages against values computed by hand (``trainers/advantages.py``): the functions the trainer
calls, from a tree's returns to each sample's scaled advantage."""

from __future__ import annotations

import math

import pytest
import torch

from llm_marl_envs.rollout import AgentStep, TreeNode
from llm_marl_trainers.advantages import (
    agent_node_returns,
    batch_samples,
    node_returns,
    per_agent_advantages,
    reward_metrics,
    sample_returns,
    scale_advantages,
)
from llm_marl_trainers.config import TrainerConfig

EPS = 1e-4


def _step(agent: str, text: str, reward: float = 0.0) -> AgentStep:
    return AgentStep(agent, 1, (), text, reward, {}, True, False, generation=text)


def hand_tree() -> dict[str, TreeNode]:
    """The tree ``root → {a (r=1) → {a1 (r=2), a2 (r=4)}, b (r=0) → {b1 (r=0), b2 (r=1, done)}}``, one agent ``w``
    whose sample names are the node names, aligned (``sample_index`` = the child's position)."""

    def node(name: str, depth: int, k: int, reward: float, children: list[TreeNode] | None = None,
             done: bool = False) -> TreeNode:
        return TreeNode(0, depth, (_step("w", name),), reward, done, (k,), children or [])

    a1, a2 = node("a1", 2, 0, 2.0), node("a2", 2, 1, 4.0)
    b1, b2 = node("b1", 2, 0, 0.0), node("b2", 2, 1, 1.0, done=True)
    a = node("a", 1, 0, 1.0, [a1, a2])
    b = node("b", 1, 1, 0.0, [b1, b2])
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


def test_a_trees_samples_get_return_minus_their_siblings_mean_depth_first() -> None:
    tree = hand_tree()
    config = TrainerConfig(env="writing", num_generations=2, scale_rewards="none", discount=1.0)
    samples, groups = batch_samples([tree["root"]], ["w"], config)
    # groups [R(a), R(b)] = [4, 0.5], [2, 4], [0, 1], depth first, minus their means 2.25, 3, 0.5
    assert [g.tolist() for g in groups] == [[4.0, 0.5], [2.0, 4.0], [0.0, 1.0]]
    assert [(s.generation, s.advantage) for s in samples] == [
        ("a", 1.75), ("b", -1.75), ("a1", -1.0), ("a2", 1.0), ("b1", -0.5), ("b2", 0.5)]
    # "group" scaling: each group by its own Bessel std (sqrt(2)·|difference|/2) plus TRL's 1e-4
    scaled, _ = batch_samples([tree["root"]], ["w"], config.replace(scale_rewards="group"))
    stds = [3.5 / math.sqrt(2)] * 2 + [2 / math.sqrt(2)] * 2 + [1 / math.sqrt(2)] * 2
    assert [s.advantage for s in scaled] == pytest.approx(
        [A / (std + EPS) for A, std in zip((1.75, -1.75, -1.0, 1.0, -0.5, 0.5), stds, strict=True)])


def test_cross_joint_actions_give_each_sample_the_mean_return_of_its_joint_actions() -> None:
    config = TrainerConfig(env="writing", num_generations=2, joint_mode="cross", scale_rewards="none")
    root = TreeNode(0, 0)
    for i, j, reward in ((0, 0, 1.0), (0, 1, 3.0), (1, 0, 5.0), (1, 1, 7.0)):
        root.children.append(TreeNode(0, 1, (_step("a", f"a{i}"), _step("b", f"b{j}")), reward, True, (i, j)))
    samples, groups = batch_samples([root], ["a", "b"], config)
    by_text = {s.generation: s.advantage for s in samples}
    # a's sample 0 is in joint actions with returns 1 and 3 (mean 2), sample 1 in 5 and 7 (mean 6): A = -2, +2.
    assert by_text == {"a0": -2.0, "a1": 2.0, "b0": -1.0, "b1": 1.0}
    assert [g.tolist() for g in groups] == [[2.0, 6.0], [3.0, 5.0]]


def test_a_sample_of_an_agent_without_an_adapter_is_refused() -> None:
    root = TreeNode(0, 0, children=[TreeNode(0, 1, (_step("x", f"x{k}"),), 1.0, True, (k,)) for k in range(2)])
    with pytest.raises(ValueError, match="agent 'x' acted but the team has no adapter for it"):
        batch_samples([root], ["a"], TrainerConfig(env="writing", num_generations=2))


def test_a_single_rollout_node_is_not_trained_on() -> None:
    """``branching: one_turn``: a node with one joint action (G = 1) has no group; only the branch below counts."""
    leaves = [TreeNode(0, 2, (_step("w", f"w{k}"),), float(k), True, (k,)) for k in range(2)]
    lone = TreeNode(0, 1, (_step("w", "lone"),), 0.0, False, (0,), leaves)
    samples, groups = batch_samples([TreeNode(0, 0, children=[lone])], ["w"],
                                    TrainerConfig(env="writing", num_generations=2, scale_rewards="none"))
    assert [(s.generation, s.advantage) for s in samples] == [("w0", -0.5), ("w1", 0.5)]
    assert [g.tolist() for g in groups] == [[0.0, 1.0]]


CENTERED = [torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64), torch.tensor([0.0, 0.0, 0.0], dtype=torch.float64)]
RETURNS = [torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), torch.tensor([5.0, 5.0, 5.0], dtype=torch.float64)]


def test_group_scaling_divides_by_each_groups_unbiased_std_plus_eps() -> None:
    # group 1: unbiased std 1; group 2: all equal, std 0 -> advantages stay 0
    first, second = scale_advantages(CENTERED, RETURNS, "group")
    assert torch.allclose(first, CENTERED[0] / (1.0 + EPS)) and second.tolist() == [0.0, 0.0, 0.0]


def test_batch_scaling_divides_by_one_std_over_the_whole_batch() -> None:
    # all six values: mean 3.5, squared deviations 6.25 + 2.25 + 0.25 + 3·2.25 = 15.5, unbiased var 15.5/5 = 3.1
    first, second = scale_advantages(CENTERED, RETURNS, "batch")
    assert torch.allclose(first, CENTERED[0] / (math.sqrt(3.1) + EPS)) and second.tolist() == [0.0, 0.0, 0.0]


def test_batch_scaling_takes_the_std_of_every_ranks_values() -> None:
    """Data parallelism: ``gather`` adds the other ranks' values; the std is the whole step's."""
    seen = []

    def gather(values: torch.Tensor) -> torch.Tensor:
        seen.append(values.tolist())
        return torch.cat([values, torch.tensor([5.0, 5.0, 5.0], dtype=torch.float64)])  # another rank's returns

    (only,) = scale_advantages(CENTERED[:1], RETURNS[:1], "batch", gather=gather)
    assert seen == [[1.0, 2.0, 3.0]] and torch.allclose(only, CENTERED[0] / (math.sqrt(3.1) + EPS))


def test_no_scaling_is_the_centred_advantage_and_a_group_of_one_has_std_zero() -> None:
    assert [A.tolist() for A in scale_advantages(CENTERED, RETURNS, "none")] == [[-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    (alone,) = scale_advantages([torch.tensor([0.5])], [torch.tensor([2.0])], "group")
    assert alone.item() == pytest.approx(0.5 / EPS)  # nothing to compare a lone value with: std 0, as TRL


def test_unknown_scale_rewards_and_mismatched_groups_are_refused() -> None:
    with pytest.raises(ValueError, match=r"scale_rewards: expected one of \('group', 'batch', 'none'\), got 'std'"):
        scale_advantages(CENTERED, RETURNS, "std")
    with pytest.raises(ValueError, match=r"spread: expected one tensor per group \(2\), got 1"):
        scale_advantages(CENTERED, RETURNS[:1], "group")


def test_reward_metrics_use_trl_names_and_values() -> None:
    metrics = reward_metrics(RETURNS)
    assert metrics == pytest.approx({"reward": 3.5, "reward_std": math.sqrt(3.1), "frac_reward_zero_std": 0.5})


def test_sample_returns_are_the_mean_over_a_samples_joint_actions() -> None:
    # two agents, G = 2, joint actions (0,0)→1, (0,1)→2, (1,0)→3, (1,1)→6
    joint = [1.0, 2.0, 3.0, 6.0]
    index = [(0, 0), (0, 1), (1, 0), (1, 1)]
    # agent 0: sample 0 in {1, 2}, sample 1 in {3, 6}; agent 1: sample 0 in {1, 3}, sample 1 in {2, 6}
    assert sample_returns(joint, index, 2).tolist() == [[1.5, 4.5], [2.0, 4.0]]
    # aligned: every sample in one joint action, its return
    assert sample_returns([1.0, 5.0], [(0, 0), (1, 1)], 2).tolist() == [[1.0, 5.0], [1.0, 5.0]]
    with pytest.raises(ValueError, match=r"sample_index: expected sample numbers in \[0, 2\)"):
        sample_returns([1.0, 5.0], [(0, 0), (2, 1)], 2)


def test_per_agent_advantages() -> None:
    assert per_agent_advantages(torch.tensor([1.0, 2.0, 6.0])).tolist() == [-2.0, -1.0, 3.0]  # mean 3
    assert per_agent_advantages(torch.tensor([[4.0, 2.0]])).tolist() == [[1.0, -1.0]]


def test_per_agent_advantage_is_own_return_minus_the_teams_mean() -> None:
    # Two aligned joint actions; the env pays each agent its own reward (the node's joint reward is their mean).
    root = TreeNode(0, 0)
    for k, (ra, rb) in enumerate(((1.0, 3.0), (4.0, 0.0))):
        steps = (_step("a", f"a:{ra}", ra), _step("b", f"b:{rb}", rb))
        root.children.append(TreeNode(0, 1, steps, (ra + rb) / 2, True, (k, k)))
    config = TrainerConfig(env="writing", num_generations=2, advantage="per_agent", scale_rewards="none")
    samples, groups = batch_samples([root], ["a", "b"], config)
    # A_i = R_i - mean_j R_j per joint action (arXiv 2512.24609): (1, 3) -> (-1, +1); (4, 0) -> (+2, -2).
    assert {s.generation: s.advantage for s in samples} == {"a:1.0": -1.0, "a:4.0": 2.0, "b:3.0": 1.0, "b:0.0": -2.0}
    assert [g.tolist() for g in groups] == [[1.0, 4.0], [3.0, 0.0]]  # each agent's own returns, for the metrics
    # "group" scaling divides by the std of the node's advantages (Bessel: sqrt(10/3)), as TRL adds 1e-4.
    scaled, _ = batch_samples([root], ["a", "b"], config.replace(scale_rewards="group"))
    assert [s.advantage for s in scaled] == pytest.approx([a / (math.sqrt(10 / 3) + 1e-4) for a in (-1, 2, 1, -2)])
    # The joint advantage of the same tree compares team returns (2 and 2): no signal at all.
    joint, _ = batch_samples([root], ["a", "b"], config.replace(advantage="joint"))
    assert [s.advantage for s in joint] == [0.0, 0.0, 0.0, 0.0]


def test_agent_node_returns_discount_each_agents_own_rewards() -> None:
    # root -> n (a: 1, b: 0) -> {(a: 2, b: 4), (b: 2 only: a has finished)}
    first = TreeNode(0, 2, (_step("a", "a", 2.0), _step("b", "b", 4.0)), 3.0, True, (0, 0))
    second = TreeNode(0, 2, (_step("b", "b", 2.0),), 2.0, True, (1,))
    node = TreeNode(0, 1, (_step("a", "a", 1.0), _step("b", "b", 0.0)), 0.5, False, (0, 0), [first, second])
    root = TreeNode(0, 0, children=[node])
    returns = agent_node_returns(root, gamma=0.5)
    assert returns[id(node)] == {"a": 1.0 + 0.5 * (2.0 + 0.0) / 2, "b": 0.0 + 0.5 * (4.0 + 2.0) / 2}
    assert returns[id(second)] == {"b": 2.0} and returns[id(root)] == {"a": 0.75, "b": 0.75}


def test_every_function_here_is_one_the_trainer_runs() -> None:
    """Issue 43: the advantage had two homes, one tested and unused. Every function and class of ``advantages.py`` is
    used by the trainer's code (``trainers/``), directly or through another function of the module."""
    import ast
    from pathlib import Path

    import llm_marl_trainers.advantages as advantages

    folder = Path(advantages.__file__).parent
    module = ast.parse(Path(advantages.__file__).read_text(encoding="utf-8"))
    defined = {node.name for node in module.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    used: set[str] = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.alias):
                used.add(node.name)
    assert {"batch_samples", "scale_advantages", "reward_metrics", "value_targets"} <= defined
    assert defined <= used, f"defined in advantages.py but never used by the trainer: {sorted(defined - used)}"
