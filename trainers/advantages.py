"""Returns and advantages: the one place the trainer's formulas live, from a step's trees to each sample's advantage.

:func:`batch_samples` is what :class:`llm_marl_trainers.magrpo.MAGRPOTrainer` calls: it walks a step's MAGRPO trees,
takes the returns (:func:`node_returns`, or :func:`agent_node_returns` per agent), forms each node's groups of samples
(:func:`sample_returns`, :func:`per_agent_advantages`), centres them on the group mean (or the critic's value) and
scales them (:func:`scale_advantages`); :func:`reward_metrics` reports the returns, :func:`value_targets` feeds the
critic. Every function here is called by the trainer and has a unit test against hand-computed values
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
the *siblings* whose returns form one group. The root holds no action (``r = 0``). Groups are visited depth first
(:meth:`TreeNode.nodes` order, the root's children first), the order of :func:`value_targets` too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from llm_marl_trainers.config import SCALE_REWARDS

if TYPE_CHECKING:
    from llm_marl_envs.rollout import TreeNode
    from llm_marl_trainers.config import TrainerConfig

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
    under the sampling policy (the reward of the step *into* ``n`` is not part of it). Depth first, the order in which
    :func:`batch_samples` visits the groups (a node's target is the baseline of its children's group).

    The critic ``V(s_n)`` then replaces the group mean as the baseline: ``A = R(c) − V(s_n)``, REINFORCE with a
    learned state-value baseline (Sutton & Barto, *Reinforcement Learning*, 2nd ed., §13.4), the value fed by the
    centralized state as in MAPPO (Yu et al., arXiv 2103.01955).
    """
    returns = node_returns(root, gamma)
    return [(node, sum(returns[id(c)] for c in node.children) / len(node.children))
            for node in root.nodes() if node.children]


def agent_node_returns(root: TreeNode, gamma: float) -> dict[int, dict[str, float]]:
    """Every node's per-agent returns, keyed by ``id(node)``: ``R_i(n) = r_i(n) + γ · mean_c R_i(c)``.

    :func:`node_returns` with each agent's own reward ``r_i`` (what the env's ``rewards[agent]`` paid it for the step
    into ``n``; 0 where the agent did not act, e.g. after it finished) instead of the joint one
    (``advantage="per_agent"``).
    """
    returns: dict[int, dict[str, float]] = {}

    def visit(node: TreeNode) -> dict[str, float]:
        own = {step.agent: float(step.reward) for step in node.steps}
        below = [visit(child) for child in node.children]
        agents = set(own).union(*below)
        R = {a: own.get(a, 0.0) + (gamma * sum(c.get(a, 0.0) for c in below) / len(below) if below else 0.0)
             for a in agents}
        returns[id(node)] = R
        return R

    visit(root)
    return returns


def sample_returns(
    joint_returns: Tensor | Sequence[float],
    sample_index: Sequence[Sequence[int]],
    group_size: int,
) -> Tensor:
    """Per acting agent, the return of each of its G samples at one node: ``[num_agents, G]``.

    ``joint_returns[j]`` is the return of the node's j-th joint action and ``sample_index[j][i]`` the sample of agent
    ``i`` it used (:attr:`TreeNode.sample_index`). Agent ``i``'s sample ``k`` gets the mean
    ``R_i(k) = mean_{j : sample_index[j][i] = k} R_j``.

    - ``aligned`` (``sample_index[j] = (j, …, j)``): every sample is in exactly one joint action, so ``R_i(k) = R_k``.
    - ``cross`` (all G^N combinations): each sample is in G^(N−1) joint actions. CoMLRL sums them
      (``post_order_update``: "Use joint reward sum per completion (no averaging)"); the mean keeps returns on the
      reward scale. The two differ by the factor G^(N−1), which group std scaling removes but ``scale_rewards="none"``
      does not.
    """
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
    return totals / counts.clamp(min=1.0)


def per_agent_advantages(agent_returns: Tensor) -> Tensor:
    """Per-agent credit when the env reports one return per agent: ``A_i = R_i − mean_j R_j`` over the last axis.

    ``agent_returns`` is ``[..., N]`` (N agents); N = 1 gives ``A = 0``. Source: arXiv 2512.24609 (§II, team-relative
    credit under CTDE). The paper describes its credit as leave-one-out, ``R_i − mean_{j≠i} R_j``, which is this times
    the constant N/(N−1): the two agree after any std scaling.
    """
    R = torch.as_tensor(agent_returns)
    return R - R.mean(dim=-1, keepdim=True)


# --------------------------------------------------------------------------------------------------------------------
# Group-relative advantages (GRPO / MAGRPO): a step's samples
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One sampled completion and the advantage it is trained with."""

    agent: str
    generation: Any
    """The generation record (prompt ids, completion ids, log-probabilities) the policy returned."""
    advantage: float


@dataclass(frozen=True)
class _ScaleGroup:
    """Samples whose advantages share one std: an agent's G samples at a node (``joint``), or every acting agent's
    samples at a node (``per_agent``)."""

    agents: tuple[str, ...]
    generations: tuple[Any, ...]
    centered: Tensor
    """Advantages before std scaling (``R − mean``, or ``R − V(s)``), one per sample."""
    spread: Tensor
    """The values whose std scales the group: the returns (``joint``, as TRL's ``std_rewards``) or the
    advantages themselves (``per_agent``)."""


def _std(values: Tensor) -> Tensor:
    """Bessel-corrected std (TRL's ``nanstd``), 0 for a single value (TRL: nothing to compare)."""
    return values.std(correction=1) if values.numel() > 1 else torch.zeros((), dtype=values.dtype)


def scale_advantages(
    centered: Sequence[Tensor],
    spread: Sequence[Tensor],
    scale_rewards: str,
    gather: Callable[[Tensor], Tensor] | None = None,
) -> list[Tensor]:
    """Each group's centred advantages divided by a std plus :data:`STD_EPS`, as ``scale_rewards`` says.

    ``centered[g]`` are group ``g``'s advantages before scaling (``R − mean(R)``, or ``R − V(s)``) and ``spread[g]``
    the values whose std scales it (one 1-D tensor per group, any sizes). ``scale_rewards`` (TRL 1.16
    ``GRPOConfig.scale_rewards``; ``grpo_trainer.py``: ``advantages / (std_rewards + 1e-4)`` unless ``"none"``):

    - ``"group"``: the Bessel-corrected std of the group's own ``spread`` (TRL's default; MAGRPO's
      ``advantage_normalization``); a group of one value has std 0;
    - ``"batch"``: one std over every group's ``spread`` (PPO Lite, arXiv 2508.08221); ``gather`` (data parallelism)
      turns this process's values into every rank's first, so it is the whole step's std, not this rank's share;
    - ``"none"``: the centred advantages as they are (Dr. GRPO, arXiv 2503.20783, recommends it: std scaling biases
      towards easy or hard prompts; MAGRPO with ``advantage_normalization=False``).

    CoMLRL's ``advantage_normalization`` divides by the population std clamped at 1e-6 instead; TRL's form is used here.
    """
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards: expected one of {SCALE_REWARDS}, got {scale_rewards!r}")
    if len(centered) != len(spread):
        raise ValueError(f"spread: expected one tensor per group ({len(centered)}), got {len(spread)}")
    if scale_rewards == "none":
        return list(centered)
    if scale_rewards == "group":
        return [A / (_std(values) + STD_EPS) for A, values in zip(centered, spread, strict=True)]
    every = torch.cat(list(spread)) if spread else torch.zeros(0, dtype=torch.float64)
    batch_std = _std(gather(every) if gather is not None else every)
    return [A / (batch_std + STD_EPS) for A in centered]


def _scale_groups(root: TreeNode, agents: Sequence[str], config: TrainerConfig,
                  values: Mapping[int, float] | None = None) -> tuple[list[_ScaleGroup], list[Tensor]]:
    """One tree's samples grouped for scaling, and the per-agent groups of returns (for the reward metrics);
    ``values``: the critic's ``V`` of each expanded node (``id(node)``), the baseline instead of the group mean."""
    joint_returns = node_returns(root, config.discount) if config.advantage == "joint" else {}
    own_returns = agent_node_returns(root, config.discount) if config.advantage == "per_agent" else {}
    groups: list[_ScaleGroup] = []
    metric_groups: list[Tensor] = []
    for parent in (node for node in root.nodes() if node.children):  # every expanded node, depth first
        siblings = parent.children
        # Samples per agent at this node: G where the tree branches, 1 on a single rollout (``branching:
        # one_turn``), whose lone sample has no group to be compared with: its return only flows into the
        # branch above it, and it is not trained on.
        G = 1 + max(max(child.sample_index) for child in siblings)
        if G < 2:
            continue
        acting = [step.agent for step in siblings[0].steps]
        for agent in acting:
            if agent not in agents:
                raise ValueError(f"agent {agent!r} acted but the team has no adapter for it: {list(agents)}")
        index = [child.sample_index for child in siblings]
        # generations[i][k]: agent i's sample k is what the child with sample_index[i] == k acted with.
        generations = []
        for i, agent in enumerate(acting):
            row = []
            for k in range(G):
                child = next(c for c in siblings if c.sample_index[i] == k)
                row.append(next(s for s in child.steps if s.agent == agent).generation)
            generations.append(row)
        if config.advantage == "joint":
            # R_i(k): the return of the joint action(s) agent i's sample k took part in (sample_returns).
            per_sample = sample_returns([joint_returns[id(c)] for c in siblings], index, G)
            baseline = values[id(parent)] if values is not None else None
            for i, agent in enumerate(acting):
                R = per_sample[i]
                centered = R - (R.mean() if baseline is None else baseline)
                groups.append(_ScaleGroup((agent,) * G, tuple(generations[i]), centered, R))
                metric_groups.append(R)
        else:
            R = torch.tensor([[own_returns[id(c)].get(a, 0.0) for a in acting] for c in siblings], dtype=torch.float64)
            A = per_agent_advantages(R)  # [joint actions, acting agents]: A_i = R_i − mean_j R_j per joint action
            # A sample in several joint actions (cross) gets the mean of its A_i over them, as returns do.
            sample_A = torch.stack([sample_returns(A[:, i], index, G)[i] for i in range(len(acting))])
            sample_R = torch.stack([sample_returns(R[:, i], index, G)[i] for i in range(len(acting))])
            groups.append(_ScaleGroup(tuple(a for a in acting for _ in range(G)),
                                      tuple(g for row in generations for g in row),
                                      sample_A.reshape(-1), sample_A.reshape(-1)))
            metric_groups.extend(sample_R)
    return groups, metric_groups


def batch_samples(
    roots: Sequence[TreeNode],
    agents: Sequence[str],
    config: TrainerConfig,
    gather: Callable[[Tensor], Tensor] | None = None,
    values: Mapping[int, float] | None = None,
) -> tuple[list[Sample], list[Tensor]]:
    """Every completion of a step's trees with its advantage, and the per-agent groups of returns (for
    :func:`reward_metrics`). ``config`` supplies ``advantage``, ``discount`` and ``scale_rewards``.

    ``advantage="joint"`` (MAGRPO): at each node, agent ``i``'s sample ``k`` has the return ``R_i(k)`` of
    :func:`sample_returns` (the child's return, aligned; the mean over the joint actions it is part of, cross) and
    ``A = R_i(k) − mean_k R_i(k)``. ``advantage="per_agent"`` (arXiv 2512.24609): the agent's own return ``R_i``
    (:func:`agent_node_returns`) against the acting agents' mean in the same joint action, ``A_i = R_i − mean_j R_j``
    (:func:`per_agent_advantages`).

    Then :func:`scale_advantages`: ``group`` divides by the std of the group's returns (joint; an agent's G samples)
    or of the node's advantages (per_agent: all acting agents' samples, since one agent's A_i can be constant and
    non-zero), ``batch`` by one std over the whole step's values, ``none`` leaves ``A`` as it is. ``gather`` (data
    parallelism) turns this process's values into every rank's, so ``batch`` takes the std of the whole step's values,
    not of this rank's share. ``values`` (``baseline="critic"``): ``{id(node): V(s_node)}`` for every expanded node; a
    sample's return is then compared with its node's value instead of the group mean.
    """
    groups: list[_ScaleGroup] = []
    metric_groups: list[Tensor] = []
    for root in roots:
        tree_groups, tree_metrics = _scale_groups(root, agents, config, values)
        groups += tree_groups
        metric_groups += tree_metrics
    scaled = scale_advantages([g.centered for g in groups], [g.spread for g in groups], config.scale_rewards, gather)
    samples = [Sample(agent, generation, float(a))
               for group, A in zip(groups, scaled, strict=True)
               for agent, generation, a in zip(group.agents, group.generations, A.tolist(), strict=True)]
    return samples, metric_groups


def reward_metrics(returns: Iterable[Tensor] | Iterable[Sequence[float]]) -> dict[str, float]:
    """The batch's reward diagnostics under TRL's names, from the groups of returns :func:`batch_samples` gives.

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
    group_stds = torch.stack([_std(group.reshape(-1)) for group in groups])
    is_std_zero = torch.isclose(group_stds, torch.zeros_like(group_stds))
    return {
        "reward": values.mean().item(),
        "reward_std": _std(values).item() if values.numel() > 1 else float("nan"),
        "frac_reward_zero_std": is_std_zero.double().mean().item(),
    }
