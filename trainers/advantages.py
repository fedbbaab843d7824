"""Returns and advantages: the MAGRPO tree return, group-relative advantages and the per-agent variant.

Pure functions, named after the math; each has a unit test against hand-computed values
(``tests/trainers/test_advantages.py``).

Sources (read, not copied):

- MAGRPO: Liu, Liang, Lyu, Amato, *LLM Collaboration With Multi-Agent Reinforcement Learning*, arXiv 2508.04652, and
  its official code, OpenMLRL/CoMLRL ``comlrl/trainers/reinforce/magrpo.py`` at commit
  ``bb779554bac9d6c95a44504184f41d00ac751db1`` (``compute_returns`` inside ``_train_step_returns``,
  ``_compute_advantages``, ``_compute_loss_with_gradients``) and the PyPI release ``comlrl==1.4.3`` (same file).
- GRPO advantages: TRL 1.16.0 ``trl/trainer/grpo_trainer.py`` (``_generate_and_score_completions``, the
  ``multi_objective_aggregation == "sum_then_normalize"`` branch), ``trl/trainer/grpo_config.py``
  (``scale_rewards``) and ``trl/trainer/utils.py`` (``nanstd``).
- Critic baseline: REINFORCE with a state-value baseline (Sutton & Barto, 2nd ed., §13.4), the value of the
  centralized state (MAPPO, Yu et al., arXiv 2103.01955); :func:`value_targets`.
- Per-agent advantage: Qiu, Xu, Yue, *Reinforcement Learning-Augmented LLM Agents for Collaborative Decision Making
  and Performance Optimization*, arXiv 2512.24609 (team credit relative to the other agents).

Tree vocabulary (:class:`llm_marl_envs.rollout.TreeNode`): a node is the joint action that led to it and carries its
joint reward ``r``; a node's ``children`` are the G (aligned) or G^N (cross) joint actions sampled from its position —
the *siblings* whose returns form one group. The root holds no action (``r = 0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal, overload

import torch
from torch import Tensor

if TYPE_CHECKING:
    from llm_marl_envs.rollout import TreeNode

ScaleRewards = Literal["group", "batch", "none"]
SCALE_REWARDS: tuple[str, ...] = ("group", "batch", "none")
"""TRL's ``GRPOConfig.scale_rewards`` values: divide ``R − mean(group)`` by the std of the group, of the batch, or
not at all (Dr. GRPO, arXiv 2503.20783, recommends ``"none"``: std scaling biases towards easy or hard prompts)."""

STD_EPS = 1e-4
"""Added to the std before dividing, as TRL does (``advantages / (std_rewards + 1e-4)``)."""


# --------------------------------------------------------------------------------------------------------------------
# MAGRPO tree returns
# --------------------------------------------------------------------------------------------------------------------


def node_returns(root: TreeNode, gamma: float) -> dict[int, float]:
    """The return of every node of a MAGRPO tree, keyed by ``id(node)``; the tree is not modified.

    ``R(node) = r(node) + γ · mean_{c ∈ children(node)} R(c)``, and ``R(leaf) = r(leaf)``.

    Source: CoMLRL ``magrpo.py`` ``compute_returns`` at ``bb779554`` — ``parent_returns.append(rj + gamma *
    mean_child)`` with ``gamma = args.discount`` (default 0.9); ``comlrl==1.4.3`` drops the discount
    (``rj + mean_child``, "the undiscounted reward sum over the rollout tree"), which is ``gamma=1``. A node whose
    episode ended (``done``) or whose branch stopped early has no children, so it is a leaf.

    Keys are ``id(node)`` because :class:`TreeNode` is a mutable dataclass (unhashable); keep the tree alive while
    the dict is used.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma: expected a discount in [0, 1], got {gamma!r}")
    returns: dict[int, float] = {}

    def visit(node: TreeNode) -> float:
        if not node.children:
            R = float(node.reward)
        else:
            mean_child_R = sum(visit(child) for child in node.children) / len(node.children)
            R = float(node.reward) + gamma * mean_child_R
        returns[id(node)] = R
        return R

    visit(root)
    return returns


def value_targets(root: TreeNode, gamma: float) -> list[tuple[TreeNode, float]]:
    """The regression targets of a centralized critic: every expanded node with the return of its position,
    ``V*(n) = mean_{c ∈ children(n)} R(c)`` — the tree's Monte-Carlo estimate of what the team earns from ``n`` on
    under the sampling policy (the reward of the step *into* ``n`` is not part of it). Depth first, in the order of
    :func:`sibling_groups` (a node's target is the baseline of its children's group).

    The critic ``V(s_n)`` then replaces the group mean as the baseline: ``A = R(c) − V(s_n)``, REINFORCE with a
    learned state-value baseline (Sutton & Barto, *Reinforcement Learning*, 2nd ed., §13.4), the value fed by the
    centralized state as in MAPPO (Yu et al., arXiv 2103.01955).
    """
    returns = node_returns(root, gamma)
    return [(node, sum(returns[id(c)] for c in node.children) / len(node.children))
            for node in root.nodes() if node.children]


def sibling_groups(root: TreeNode) -> list[list[TreeNode]]:
    """The groups of a tree: the children of every internal node, depth first (the root's children come first).

    Each group holds the joint actions sampled from one position, so their returns are comparable: MAGRPO's baseline
    is the mean over one group (CoMLRL builds one ``NodeSample`` per node from ``node["returns"]``).
    """
    groups: list[list[TreeNode]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.children:
            groups.append(list(node.children))
            stack.extend(reversed(node.children))
    return groups


def sample_returns(
    joint_returns: Tensor | Sequence[float],
    sample_index: Sequence[Sequence[int]],
    group_size: int,
    reduce: Literal["mean", "sum"] = "mean",
) -> Tensor:
    """Per acting agent, the return of each of its G samples at one node: ``[num_agents, G]``.

    ``joint_returns[j]`` is the return of the node's j-th joint action and ``sample_index[j][i]`` the sample of agent
    ``i`` it used (:attr:`TreeNode.sample_index`). Agent ``i``'s sample ``k`` gets
    ``R_i(k) = reduce_{j : sample_index[j][i] = k} R_j``.

    - ``aligned`` (``sample_index[j] = (j, …, j)``): every sample is in exactly one joint action, so ``R_i(k) = R_k``
      whatever ``reduce``.
    - ``cross`` (all G^N combinations): each sample is in G^(N−1) joint actions. CoMLRL sums them
      (``post_order_update``: "Use joint reward sum per completion (no averaging)"), which is ``reduce="sum"``;
      ``"mean"`` (default) keeps returns on the reward scale. The two differ by the factor G^(N−1), which group std
      scaling removes but ``scale_rewards="none"`` does not.
    """
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce: expected 'mean' or 'sum', got {reduce!r}")
    R = torch.as_tensor(joint_returns, dtype=torch.float64)
    if R.ndim != 1 or len(R) == 0 or len(R) != len(sample_index):
        raise ValueError(
            f"joint_returns: expected one return per joint action ({len(sample_index)}), got shape {tuple(R.shape)}"
        )
    index = torch.as_tensor(sample_index, dtype=torch.long).reshape(len(R), -1)  # [J, N]
    if index.numel() and (index.min() < 0 or index.max() >= group_size):
        raise ValueError(f"sample_index: expected sample numbers in [0, {group_size}), got {index.tolist()}")
    num_agents = index.shape[1]
    totals = torch.zeros(num_agents, group_size, dtype=torch.float64)
    counts = torch.zeros(num_agents, group_size, dtype=torch.float64)
    for i in range(num_agents):
        totals[i].index_add_(0, index[:, i], R)
        counts[i].index_add_(0, index[:, i], torch.ones_like(R))
    if reduce == "sum":
        return totals
    return totals / counts.clamp(min=1.0)


# --------------------------------------------------------------------------------------------------------------------
# Group-relative advantages (GRPO / MAGRPO)
# --------------------------------------------------------------------------------------------------------------------


def _std(x: Tensor, unbiased: bool) -> Tensor:
    """Std of a 1-D tensor; 0 for a single value (TRL: ``torch.zeros_like`` when there is nothing to compare)."""
    if x.numel() < 2:
        return torch.zeros((), dtype=x.dtype)
    return x.std(correction=1 if unbiased else 0)


@overload
def group_advantages(
    returns: Tensor, scale_rewards: ScaleRewards = ..., eps: float = ..., unbiased: bool = ...
) -> Tensor: ...
@overload
def group_advantages(
    returns: Sequence[Tensor] | Sequence[Sequence[float]],
    scale_rewards: ScaleRewards = ...,
    eps: float = ...,
    unbiased: bool = ...,
) -> list[Tensor]: ...
def group_advantages(
    returns: Tensor | Sequence[Tensor] | Sequence[Sequence[float]],
    scale_rewards: ScaleRewards = "group",
    eps: float = STD_EPS,
    unbiased: bool = True,
) -> Tensor | list[Tensor]:
    """Group-relative advantages: ``A = R − mean(group R)``, then divided by ``std + eps`` unless ``"none"``.

    ``returns`` is ``[num_groups, G]`` (a tensor; the result is a tensor) or a sequence of 1-D groups of any sizes
    (the result is a list), e.g. the siblings of :func:`sibling_groups` or the rows of :func:`sample_returns`.

    ``scale_rewards`` (TRL 1.16 ``GRPOConfig.scale_rewards``; ``grpo_trainer.py``: ``advantages = rewards −
    mean_grouped_rewards``; ``advantages / (std_rewards + 1e-4)`` unless ``"none"``):

    - ``"group"``: ``std`` of each group (TRL's default; MAGRPO's ``advantage_normalization``);
    - ``"batch"``: one ``std`` over every return of the batch (PPO Lite, arXiv 2508.08221), the mean still per group;
    - ``"none"``: ``A = R − mean`` (Dr. GRPO, arXiv 2503.20783; MAGRPO with ``advantage_normalization=False``).

    ``unbiased=True`` is TRL's Bessel-corrected ``nanstd``; CoMLRL's ``advantage_normalization`` uses the population
    std (``std(unbiased=False).clamp(min=1e-6)``), i.e. ``unbiased=False`` (and a clamp instead of ``+ eps``).
    A group of one return gets ``A = 0``.
    """
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards: expected one of {SCALE_REWARDS}, got {scale_rewards!r}")
    as_tensor = isinstance(returns, Tensor)
    if as_tensor and returns.ndim != 2:
        raise ValueError(f"returns: expected a [num_groups, G] tensor, got shape {tuple(returns.shape)}")
    groups = [
        torch.as_tensor(group, dtype=torch.float64 if not isinstance(group, Tensor) else None) for group in returns
    ]
    if any(group.ndim != 1 or group.numel() == 0 for group in groups):
        raise ValueError("returns: expected non-empty 1-D groups")
    batch_std = _std(torch.cat(groups), unbiased) if groups else None
    advantages = []
    for R in groups:
        A = R - R.mean()
        if scale_rewards == "group":
            A = A / (_std(R, unbiased) + eps)
        elif scale_rewards == "batch":
            A = A / (batch_std + eps)
        advantages.append(A)
    if as_tensor:
        return torch.stack(advantages) if advantages else returns.new_zeros(returns.shape)
    return advantages


def reward_metrics(returns: Tensor | Iterable[Tensor] | Iterable[Sequence[float]]) -> dict[str, float]:
    """The batch's reward diagnostics under TRL's names.

    - ``reward``: mean over every value; ``reward_std``: Bessel-corrected std over every value (TRL
      ``nanstd(rewards)``);
    - ``frac_reward_zero_std``: the fraction of groups whose values all coincide (their group std is 0, so their
      advantages are 0: no learning signal). TRL computes ``is_std_zero`` per completion from the std used for scaling,
      which is the same for equal-size groups and ``scale_rewards`` ``"group"``/``"none"`` (with ``"batch"`` TRL's
      value reflects the batch std instead; we always report the groups').
    """
    groups = [torch.as_tensor(group, dtype=torch.float64) for group in returns]
    if not groups:
        return {"reward": float("nan"), "reward_std": float("nan"), "frac_reward_zero_std": float("nan")}
    values = torch.cat([group.reshape(-1) for group in groups])
    group_stds = torch.stack([_std(group.reshape(-1), unbiased=True) for group in groups])
    is_std_zero = torch.isclose(group_stds, torch.zeros_like(group_stds))
    return {
        "reward": values.mean().item(),
        "reward_std": _std(values, unbiased=True).item() if values.numel() > 1 else float("nan"),
        "frac_reward_zero_std": is_std_zero.double().mean().item(),
    }


# --------------------------------------------------------------------------------------------------------------------
# Per-agent advantage (arXiv 2512.24609)
# --------------------------------------------------------------------------------------------------------------------


def per_agent_advantages(agent_returns: Tensor, leave_one_out: bool = False) -> Tensor:
    """Per-agent credit when the env reports one return per agent: ``A_i = R_i − mean_j R_j`` over the last axis.

    ``agent_returns`` is ``[..., N]`` (N agents). ``leave_one_out=True`` uses the other agents only,
    ``A_i = R_i − mean_{j≠i} R_j = N/(N−1) · (R_i − mean_j R_j)`` — arXiv 2512.24609 describes its team credit as
    leave-one-out; the two differ by the constant N/(N−1), so they agree after any std scaling.
    Source: arXiv 2512.24609 (§II, team-relative credit under CTDE); N = 1 gives ``A = 0``.
    """
    R = torch.as_tensor(agent_returns)
    N = R.shape[-1]
    A = R - R.mean(dim=-1, keepdim=True)
    if leave_one_out:
        return A * (N / (N - 1)) if N > 1 else torch.zeros_like(A)
    return A
