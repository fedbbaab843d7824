"""The MAGRPO trainer (GRPO when the team has one agent): centralized training, decentralized execution.

One step, top to bottom (Liu et al. 2025, arXiv 2508.04652, Alg. 1; official code OpenMLRL/CoMLRL):

1. ``envs_per_step`` episodes grow MAGRPO trees (:func:`llm_marl_envs.rollout.rollout_tree`): at every node each live
   agent samples ``G = num_generations`` completions from its *own* observation (decentralized execution), all nodes
   of one depth across envs in one batched ``generate`` (:class:`trainers.generation.TeamModel`), and the samples form
   ``aligned`` (G) or ``cross`` (G^N) joint actions, each stepped in its own copy of the env.
2. Returns ``R = r + γ·mean(children R)`` (:func:`trainers.advantages.node_returns`) — the centralized part: the joint
   reward of the whole team, computed from what the envs pay.
3. At every node, each agent's G samples get ``A = R − mean(siblings' R)`` (optionally scaled:
   :func:`trainers.advantages.group_advantages`).
4. The loss (:func:`trainers.losses.policy_loss`) over every sampled completion under its agent's adapter; one AdamW
   optimizer per agent's adapter.

Everything the step needs to be replayed is in a checkpoint (adapters, optimizers, RNG states, step, config), and the
tasks of step ``s`` are drawn from seeds fixed by ``(seed, s)``, so a run resumed from a checkpoint repeats the
uninterrupted run's per-step metrics exactly on CPU.
"""

from __future__ import annotations

import functools
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines.policies.base import GenerationSettings
from llm_marl_envs.registry import make_env
from llm_marl_envs.rollout import ChatEnv, TreeNode, rollout_tree
from trainers import checkpoint
from trainers.advantages import group_advantages, node_returns, reward_metrics, sample_returns, sibling_groups
from trainers.config import TrainerConfig
from trainers.generation import LoraSettings, TeamModel
from trainers.losses import LossSettings, PolicyBatch, policy_loss


@dataclass(frozen=True)
class Sample:
    """One sampled completion and the advantage it is trained with."""

    agent: str
    generation: Any
    """The generation record (prompt ids, completion ids, log-probabilities) the policy returned."""
    advantage: float


def tree_samples(
    root: TreeNode, agents: Sequence[str], config: TrainerConfig
) -> tuple[list[Sample], list[torch.Tensor]]:
    """Every completion of one tree with its group-relative advantage, and the per-agent groups of returns.

    At each node with children, agent ``i``'s sample ``k`` is the completion the child with ``sample_index[i] == k``
    acted with; its return is :func:`~trainers.advantages.sample_returns`' (the child's return, aligned; the mean over
    the joint actions it is part of, cross).
    """
    returns = node_returns(root, config.discount)
    samples: list[Sample] = []
    groups: list[torch.Tensor] = []
    for siblings in sibling_groups(root):
        acting = [step.agent for step in siblings[0].steps]
        joint = [returns[id(child)] for child in siblings]
        per_agent = sample_returns(joint, [child.sample_index for child in siblings], config.num_generations)
        advantages = group_advantages(per_agent, config.scale_rewards)
        for i, agent in enumerate(acting):
            if agent not in agents:
                raise ValueError(f"agent {agent!r} acted but the team has no adapter for it: {list(agents)}")
            groups.append(per_agent[i])
            for k in range(config.num_generations):
                child = next(c for c in siblings if c.sample_index[i] == k)
                step = next(s for s in child.steps if s.agent == agent)
                samples.append(Sample(agent, step.generation, float(advantages[i, k])))
    return samples, groups


class MAGRPOTrainer:
    """Trains one LoRA adapter per agent of an env of the suite (see the module docstring)."""

    def __init__(
        self,
        config: TrainerConfig,
        team: TeamModel | None = None,
        env_factory: Callable[[], Any] | None = None,
    ) -> None:
        """``team``: a ready :class:`TeamModel` (default: loaded from ``config.model``); ``env_factory``: builds any
        PettingZoo ParallelEnv with text spaces instead of ``config.env`` (wrapped in :class:`ChatEnv` when it has no
        ``chat_messages``)."""
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config: expected TrainerConfig, got {type(config).__name__}")
        self.config = config
        if env_factory is None:
            env_factory = functools.partial(make_env, config.env, num_agents=config.num_agents, **config.env_kwargs)
        envs = [env_factory() for _ in range(config.envs_per_step)]
        self.envs = [env if hasattr(env, "chat_messages") else ChatEnv(env) for env in envs]
        self.agents = tuple(self.envs[0].possible_agents)
        _seed_everything(config.seed)
        if team is None:
            lora = LoraSettings(r=config.lora_r, alpha=config.lora_alpha, dropout=config.lora_dropout)
            model = None if config.model == "default" else config.model
            team = TeamModel.load(self.agents, model, dtype="float32", lora=lora, seed=config.seed)
        self.team = team
        self.optimizers = {
            agent: torch.optim.AdamW(team.adapter_parameters(agent), lr=config.learning_rate) for agent in self.agents
        }
        self.loss_settings = LossSettings(
            loss_type=config.loss_type,
            epsilon=config.epsilon,
            epsilon_high=config.epsilon_high,
            beta=config.beta,
            max_completion_length=config.max_completion_length,
        )
        # seed=None: sampling draws from the global torch RNG, which checkpoints save and restore.
        self.generation = GenerationSettings(
            temperature=config.temperature, top_p=config.top_p, max_new_tokens=config.max_completion_length, seed=None
        )
        self.step = 0
        self.output = Path(config.output_dir)
        self.bad_steps = 0

    # ------------------------------------------------------------------------------------------------- training
    def train(
        self, steps: int | None = None, on_step: Callable[[dict[str, Any]], None] | None = None
    ) -> list[dict[str, Any]]:
        """Run until ``steps`` (default ``config.steps``) steps in all; returns this call's metric rows
        (``on_step(row)`` sees each as it is logged)."""
        total = self.config.steps if steps is None else steps
        self.output.mkdir(parents=True, exist_ok=True)
        checkpoint.write_config(self.output, self.config)
        rows = []
        while self.step < total:
            row = self.training_step()
            rows.append(row)
            self._log(row)
            if on_step is not None:
                on_step(row)
            if self.step % self.config.save_steps == 0 or self.step == total:
                checkpoint.save(self, self.output, keep=self.config.save_total_limit)
            if self.bad_steps >= self.config.max_bad_steps:
                raise RuntimeError(
                    f"{self.bad_steps} steps in a row had a non-finite loss; stopped at step {self.step} "
                    f"(the last checkpoint is intact in {self.output})"
                )
        self.team.save_adapters(self.output / "adapters")
        return rows

    def training_step(self) -> dict[str, Any]:
        """One MAGRPO step (see the module docstring); returns its metrics row."""
        config = self.config
        started = time.perf_counter()
        seeds = [config.seed * 1_000_003 + self.step * config.envs_per_step + i for i in range(config.envs_per_step)]
        self.team.eval()
        with torch.no_grad():
            roots = rollout_tree(
                self.envs,
                self.team.as_rollout_policy(self.generation, min_new_tokens=config.min_completion_length),
                group_size=config.num_generations,
                joint=config.joint_mode,
                seeds=seeds,
            )
        generated = time.perf_counter()
        samples, groups = [], []
        for root in roots:
            tree, tree_groups = tree_samples(root, self.agents, config)
            samples += tree
            groups += tree_groups
        metrics = reward_metrics(groups)
        self.team.train()
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=True)
        logps = self.team.forward_logprobs(
            [s.generation for s in samples], [s.agent for s in samples], entropies=True
        )
        batch = PolicyBatch(
            per_token_logps=logps.per_token_logps,
            advantages=torch.tensor([s.advantage for s in samples], dtype=logps.per_token_logps.dtype),
            completion_mask=logps.completion_mask,
            entropies=logps.entropies,
        )
        loss, loss_metrics = policy_loss(batch, self.loss_settings)
        finite = math.isfinite(loss.item())
        if finite:
            loss.backward()
            for optimizer in self.optimizers.values():
                optimizer.step()
            self.bad_steps = 0
        else:
            self.bad_steps += 1
        self.step += 1
        tokens = int(logps.completion_mask.sum())
        elapsed = time.perf_counter() - started
        return {
            "step": self.step,
            "loss": loss.item(),
            "skipped": not finite,
            **metrics,
            **loss_metrics,
            "completions": len(samples),
            "completion_tokens": tokens,
            "step_time": elapsed,
            "generation_time": generated - started,
            "tokens_per_second": tokens / elapsed if elapsed > 0 else float("nan"),
            **_episode_metrics(roots),
        }

    # -------------------------------------------------------------------------------------------------- logging
    def _log(self, row: dict[str, Any]) -> None:
        with (self.output / "metrics.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")


def _episode_metrics(roots: Sequence[TreeNode]) -> dict[str, float]:
    """Means over the tree's leaves of the env's reward components (the episodes' final outcomes)."""
    leaves = [node for root in roots for node in root.nodes() if not node.children and node.steps]
    values: dict[str, list[float]] = {}
    for leaf in leaves:
        components = leaf.steps[0].reward_components
        for name in ("quality", "consistency", "turns"):
            value = components.get(name)
            if isinstance(value, (int, float)):
                values.setdefault(name, []).append(float(value))
    return {f"episode/{name}": float(np.mean(v)) for name, v in values.items()}


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
