"""The MAGRPO trainer (GRPO when the team has one agent): centralized training, decentralized execution.

One step, top to bottom (Liu et al. 2025, arXiv 2508.04652, Alg. 1; official code OpenMLRL/CoMLRL):

1. ``envs_per_step`` episodes grow MAGRPO trees (:func:`llm_marl_envs.rollout.rollout_tree`): at every node each live
   agent samples ``G = num_generations`` completions from its *own* observation (decentralized execution), all nodes
   of one depth across envs in one batched ``generate`` (:class:`llm_marl_trainers.generation.TeamModel`), and the
   samples form ``aligned`` (G) or ``cross`` (G^N) joint actions, each stepped in its own copy of the env. A node whose
   joint actions' mean reward is above ``early_termination_threshold`` (when set) grows no further turns.
2. Returns ``R = r + γ·mean(children R)`` (:func:`llm_marl_trainers.advantages.node_returns`) — the centralized part:
   the joint reward of the whole team, computed from what the envs pay. With ``baseline="critic"`` a value head reads
   each expanded node's privileged ``state()`` (:mod:`llm_marl_trainers.critic`) and is fitted to ``mean(children R)``.
3. At every node, each agent's G samples get ``A = R − mean(siblings' R)`` (or ``R − V(s_node)`` with the critic),
   scaled by ``scale_rewards`` (the std of the group, or of the whole batch). With ``advantage="per_agent"`` each
   agent's own return is used instead and compared with its teammates': ``A_i = R_i − mean_j R_j`` (arXiv
   2512.24609). Steps 2-3 are :func:`llm_marl_trainers.advantages.batch_samples`, the one home of these formulas.
4. The loss (:func:`llm_marl_trainers.losses.policy_loss`) over every sampled completion under its agent's adapter;
   one AdamW optimizer per agent's adapter. A step whose loss or gradients are not finite is skipped (no update, the row
   says ``skipped: true``); ``max_bad_steps`` of them in a row stop the run (:class:`NonFiniteLossError`).

Everything the step needs to be replayed is in a checkpoint (adapters, optimizers, RNG states, step, config), and the
tasks of step ``s`` are drawn from seeds fixed by ``(seed, s)``, so a run resumed from a checkpoint repeats the
uninterrupted run's per-step metrics exactly on CPU. Metrics go to ``DIR/metrics.jsonl`` and, by ``report_to``, to
TensorBoard (``DIR/tensorboard``) and W&B (:mod:`llm_marl_trainers.reporting`). The output folder, and every checkpoint
in it, is a *team directory* (``team.json`` + ``adapters/<agent>/``) that ``llm_marl_baselines.policies.adapters`` loads
and ``llm-marl demo --adapters DIR`` plays.

Scaling out
-----------
- *Several processes* (one per GPU, or CPU processes): launch with ``torchrun`` (or ``accelerate launch``) and the
  trainer is data-parallel (:mod:`llm_marl_trainers.distributed`): each of the ``world_size`` ranks grows
  ``envs_per_step / world_size`` of the step's trees on its own copy of the team, the losses are weighted by the
  whole step's completions, the adapters' gradients are summed across ranks before each AdamW step, and the reward
  metrics are gathered, so the update is the one a single process would compute from the same completions. Rank 0
  writes metrics, checkpoints (with every rank's RNG states) and the team; a run resumes with the same number of
  processes. ``torchrun --standalone --nproc-per-node 2 --no-python llm-marl train ...``.
- *vLLM generation* is not supported: sampling is one batched ``model.generate`` call per depth with per-row LoRA
  routing (:mod:`llm_marl_trainers.lora_routing`). A vLLM backend would serve the base with one LoRA per agent
  (``enable_lora``), and after each step the updated adapters would have to be saved and reloaded into it (TRL's
  ``use_vllm`` does the weight sync for a single policy); the per-token log-probabilities it returns would be the
  records the loss needs. None of that is written: no GPU was available to build and check it on.
- For long completions on one GPU, :meth:`TeamModel.gradient_checkpointing_enable` trades compute for memory.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from llm_marl_baselines.models import DEFAULT_MODEL
from llm_marl_baselines.policies.base import GenerationSettings, env_reply_ends
from llm_marl_envs.registry import make_env
from llm_marl_envs.rollout import ChatEnv, TreeNode, rollout_tree
from llm_marl_trainers import checkpoint
from llm_marl_trainers.advantages import Sample, batch_samples, reward_metrics, value_targets
from llm_marl_trainers.config import TrainerConfig
from llm_marl_trainers.critic import StateCritic
from llm_marl_trainers.distributed import DataParallel
from llm_marl_trainers.generation import LoraSettings, TeamModel
from llm_marl_trainers.losses import LossSettings, PolicyBatch, policy_loss
from llm_marl_trainers.reporting import MetricsReporter, format_row

logger = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """``max_bad_steps`` steps in a row had a non-finite loss (or gradients); the last checkpoint is intact."""


def prompt_token_counts(samples: Sequence[Sample]) -> tuple[int, int]:
    """``(prompt tokens, distinct prompt tokens)`` of a step's samples: what reading every completion's prompt costs,
    and what reading each distinct (agent, prompt) once costs (``share_prefix``); the rows report both."""
    prompts = [(sample.agent, tuple(sample.generation.prompt_ids or ())) for sample in samples]
    return sum(len(ids) for _, ids in prompts), sum(len(ids) for _, ids in set(prompts))


class MAGRPOTrainer:
    """Trains one LoRA adapter per agent of an env of the suite (see the module docstring)."""

    def __init__(
        self,
        config: TrainerConfig,
        team: TeamModel | None = None,
        env_factory: Callable[[], Any] | None = None,
        base_model: str | None = None,
        parallel: DataParallel | None = None,
    ) -> None:
        """``team``: a ready :class:`TeamModel` (default: loaded from ``config.model``); ``env_factory``: builds any
        PettingZoo ParallelEnv with text spaces instead of ``config.env`` (wrapped in :class:`ChatEnv` when it has no
        ``chat_messages``); ``base_model``: what ``team.json`` names as the base of a given ``team`` (a model folder
        or ``SmolLM2-135M-Instruct``). The output is a team directory when the env is ``config.env`` and the base is
        known (the team was loaded from ``config.model``, or ``base_model`` names it); otherwise only the adapters are
        saved. ``parallel``: this process's rank in a data-parallel run (default: what ``torchrun`` set in the
        environment, else one process)."""
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config: expected TrainerConfig, got {type(config).__name__}")
        self.config = config
        self.parallel = parallel if parallel is not None else DataParallel.from_environment()
        if config.envs_per_step % self.parallel.world_size:
            raise ValueError(f"envs_per_step={config.envs_per_step} does not split over {self.parallel.world_size} "
                             f"processes: use a multiple of the number of processes")
        self.registry_env = env_factory is None
        """True when the envs are ``config.env`` from the registry (then ``team.json`` can name the env)."""
        if env_factory is None:
            env_factory = functools.partial(make_env, config.env, num_agents=config.num_agents, **config.env_kwargs)
        envs = [env_factory() for _ in range(config.envs_per_step // self.parallel.world_size)]
        self.envs = [env if hasattr(env, "chat_messages") else ChatEnv(env) for env in envs]
        self.agents = tuple(self.envs[0].possible_agents)
        self.reply_ends: dict[str, str] | None = None
        """``{agent: pattern}`` at whose first match a sampled reply stops (``config.stop_at_reply_end``; an env
        without ``suggested_reply_end`` gives none), None when replies are not cut."""
        if config.stop_at_reply_end:
            self.reply_ends = env_reply_ends(env for env in self.envs if hasattr(env, "suggested_reply_end"))
        # Each rank samples from its own stream (rank 0's is the one-process run's); adapters start equal anyway.
        _seed_everything(config.seed + 104_729 * self.parallel.rank)
        self.warm_started: dict[str, Path] = {}
        """``{agent: adapter folder}`` of the agents this run started from ``config.init_team`` (empty on a resume,
        where the checkpoint holds the adapters, and without one)."""
        self.warm_start_record: dict[str, Any] | None = None
        """What ``DIR/warm_start.json`` records of a warm start (:func:`warm_start_record`), None as ``warm_started``
        is empty; the first ``train`` call writes it, and a resumed run keeps the file its first start wrote."""
        if team is None:
            warm = warm_start_adapters(config, self.agents)  # before the model loads: a bad init_team fails fast
            lora = LoraSettings(r=config.lora_r, alpha=config.lora_alpha, dropout=config.lora_dropout)
            model = model_sources(config, self.agents)
            team = TeamModel.load(self.agents, model, dtype=base_dtype(config.dtype, self.parallel.device),
                                  device=self.parallel.device, lora=lora, seed=config.seed)
            for agent, folder in warm.items():
                team.load_adapter_weights(agent, folder)
            self.warm_started = warm
            if warm:
                self.warm_start_record = warm_start_record(config.init_team, self.agents, warm)
            base_model = base_model or manifest_base_model(config)
        team.share_prefix = config.share_prefix  # the config decides how the team reads prompts, given team or not
        team.graph_decode = config.graph_decode
        team.graph_compile = config.graph_compile
        self.team = team
        self.parallel.broadcast_parameters(p for agent in self.agents for p in team.adapter_parameters(agent))
        if config.gradient_checkpointing:
            team.gradient_checkpointing_enable()
        self.base_model = base_model
        """The base model ``team.json`` names (None: the team was given without one; no manifest is written)."""
        self.optimizers = {
            agent: torch.optim.AdamW(team.adapter_parameters(agent), lr=config.learning_rate) for agent in self.agents
        }
        self.critic = None
        """The centralized critic (``baseline="critic"``), else None."""
        if config.baseline == "critic":
            self.critic = StateCritic(team, learning_rate=config.critic_learning_rate,
                                      max_tokens=config.critic_max_tokens, seed=config.seed)
            self.parallel.broadcast_parameters(self.critic.head.parameters())
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
        self._per_agent_checked = False

    # ------------------------------------------------------------------------------------------------- training
    @classmethod
    def resume(cls, directory: str | Path, env_factory: Any = None, **overrides: Any) -> MAGRPOTrainer:
        """A trainer continuing the run in ``directory`` from its last checkpoint (``overrides``: e.g. ``steps``;
        ``env_factory``: the same one the run was started with, if any). Under ``torchrun`` every rank calls it."""
        # The run goes on where it now lies: a folder moved or copied since must not write into the old one.
        saved = checkpoint.load_last(directory, **{"output_dir": str(directory), **overrides})
        parallel = DataParallel.from_environment()
        saved.check_world_size(parallel.world_size)  # before the model loads
        config = saved.config
        team = TeamModel.load(list(saved.adapters), model_sources(config, list(saved.adapters)),
                              dtype=base_dtype(config.dtype, parallel.device), device=parallel.device,
                              adapters=saved.adapters, seed=config.seed)
        trainer = cls(config, team=team, env_factory=env_factory, base_model=manifest_base_model(config),
                      parallel=parallel)
        checkpoint.restore(trainer, saved)
        return trainer

    def train(
        self, steps: int | None = None, on_step: Callable[[dict[str, Any]], None] | None = None
    ) -> list[dict[str, Any]]:
        """Run until ``steps`` (default ``config.steps``) steps in all; returns this call's metric rows
        (``on_step(row)`` sees each as it is logged). At the end the output folder is a team directory.

        Raises :class:`NonFiniteLossError` after ``max_bad_steps`` skipped steps in a row (checkpoints and metrics
        up to then stay as written; ``--resume`` continues from the last checkpoint).
        """
        total = self.config.steps if steps is None else steps
        main = self.parallel.is_main  # rank 0 writes the run's files; every rank takes part in the steps
        if main:
            self.output.mkdir(parents=True, exist_ok=True)
            checkpoint.write_config(self.output, self.config)
            if self.warm_start_record is not None:
                checkpoint.write_warm_start(self.output, self.warm_start_record)
        rows = []
        reporting = MetricsReporter(self.output, self.config, start_step=self.step) if main else None
        with reporting or contextlib.nullcontext() as reporter:
            while self.step < total:
                row = self.training_step()
                rows.append(row)
                if reporter is not None:
                    reporter.log(row)
                if row["skipped"] and main:
                    logger.warning("%s; %d in a row (the run stops at %d)", format_row(row), self.bad_steps,
                                   self.config.max_bad_steps)
                if on_step is not None:
                    on_step(row)
                release_freed_memory()
                if self.step % self.config.save_steps == 0 or self.step == total:
                    checkpoint.save(self, self.output, keep=self.config.save_total_limit)
                if self.bad_steps >= self.config.max_bad_steps:
                    found = checkpoint.checkpoints(self.output)
                    last = found[-1].name if found else "none yet"
                    raise NonFiniteLossError(
                        f"{self.bad_steps} steps in a row had a non-finite loss (skipped, adapters unchanged); "
                        f"stopped at step {self.step}. The last checkpoint ({last}) is intact in {self.output}: "
                        f"fix the cause (rewards, learning rate) and continue with --resume"
                    )
        if main:
            self.save_team(self.output)
        self.parallel.barrier()
        return rows

    def save_team(self, directory: str | Path) -> Path:
        """Write the team to ``directory``: ``adapters/<agent>/`` and, when the env and base are known,
        ``team.json`` (:func:`llm_marl_trainers.checkpoint.write_team_manifest`), so the folder is a team directory."""
        directory = Path(directory)
        self.team.save_adapters(directory / "adapters")
        checkpoint.write_team_manifest(directory, self)
        return directory

    def training_step(self) -> dict[str, Any]:
        """One MAGRPO step (see the module docstring); returns its metrics row (the whole step's, on every rank)."""
        config = self.config
        parallel = self.parallel
        started = time.perf_counter()
        roots = self._grow_trees(self.step)
        generated = time.perf_counter()
        if config.advantage == "per_agent" and not self._per_agent_checked:
            _check_per_agent_rewards(roots)
            self._per_agent_checked = True
        node_values: dict[int, float] = {}
        critic_rows: list[tuple[TreeNode, float]] = []
        if self.critic is not None:  # V(s) of every expanded node, from the critic as it was before this step
            critic_rows = [pair for root in roots for pair in value_targets(root, config.discount)]
            features = self.critic.features([node.state for node, _ in critic_rows])
            node_values = {id(node): v for (node, _), v in zip(critic_rows, self.critic.values(features).tolist(),
                                                                strict=True)}
        samples, groups = batch_samples(roots, self.agents, config, gather=self._gather_values,
                                        values=node_values if self.critic is not None else None)
        # One gather for what the row reports of the whole step (every rank's part of it; in one process, this one).
        shared = parallel.gather({"groups": groups, "episodes": _episode_values(roots), "completions": len(samples),
                                  "generation_time": generated - started, "critic_nodes": len(critic_rows),
                                  "value_sum": sum(node_values.values()), "prompts": prompt_token_counts(samples)})
        metrics = reward_metrics([group for part in shared for group in part["groups"]])
        episodes: dict[str, list[float]] = {}
        for part in shared:
            for name, values in part["episodes"].items():
                episodes.setdefault(name, []).extend(values)
        completions = sum(part["completions"] for part in shared)
        loss, loss_metrics, tokens, applied = self._update(samples, completions)
        critic_metrics: dict[str, float] = {}
        if self.critic is not None:
            critic_nodes = sum(part["critic_nodes"] for part in shared)
            critic_metrics = self.critic.update(features, [target for _, target in critic_rows], parallel,
                                                total=critic_nodes)
            critic_metrics["critic/value_mean"] = sum(part["value_sum"] for part in shared) / critic_nodes
        if applied:
            self.bad_steps = 0
        else:
            self.bad_steps += 1
        self.step += 1
        elapsed = max(parallel.gather(time.perf_counter() - started))  # the step ends when its slowest rank does
        return {
            "step": self.step,
            "loss": loss,
            "skipped": not applied,
            **metrics,
            **loss_metrics,
            "completions": completions,
            "completion_tokens": tokens,
            "prompt_tokens": sum(part["prompts"][0] for part in shared),
            "distinct_prompt_tokens": sum(part["prompts"][1] for part in shared),
            "step_time": elapsed,
            "generation_time": max(part["generation_time"] for part in shared),
            "tokens_per_second": tokens / elapsed if elapsed > 0 else float("nan"),
            **critic_metrics,
            **{f"episode/{name}": float(np.mean(v)) for name, v in episodes.items()},
        }

    def _grow_trees(self, step: int) -> list[TreeNode]:
        """This rank's trees of step ``step`` (0-based): the tasks are drawn from seeds fixed by ``(seed, step)``."""
        config = self.config
        seeds = [config.seed * 1_000_003 + step * config.envs_per_step + i for i in range(config.envs_per_step)]
        branch_turns = None
        if config.branching == "one_turn":  # tree i of step s branches at turn 1 + (s·envs_per_step + i) mod T
            turns = self._max_turns()
            branch_turns = self.parallel.shard([{1 + (step * config.envs_per_step + i) % turns}
                                                for i in range(config.envs_per_step)])
        self.team.eval()
        with torch.no_grad():
            return rollout_tree(
                self.envs,
                self.team.as_rollout_policy(self.generation, min_new_tokens=config.min_completion_length,
                                            role_reply_ends=self.reply_ends),
                group_size=config.num_generations,
                joint=config.joint_mode,
                seeds=self.parallel.shard(seeds),  # this rank's roots (all of them in one process)
                early_termination_threshold=config.early_termination_threshold,
                record_state=self.critic is not None,
                branch_turns=branch_turns,
            )

    def _max_turns(self) -> int:
        """The envs' turn budget (``branching: one_turn`` cycles the branching turn through it)."""
        turns = getattr(self.envs[0], "max_turns", None)
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
            raise ValueError("branching: 'one_turn' needs envs with a max_turns budget (the suite's envs have one); "
                             f"this env has max_turns={turns!r}: use branching 'full'")
        return turns

    def rollout_metrics(self, step: int) -> dict[str, Any]:
        """The reward metrics of the trees step ``step`` (0-based) grows — the same tasks as the training step — with
        the team as it is now, and no update: on a fresh trainer, the untrained team's reference for a learning
        curve (``llm-marl teams untrained``). One process only."""
        if self.parallel.enabled:
            raise RuntimeError("rollout_metrics runs in one process")
        started = time.perf_counter()
        roots = self._grow_trees(step)
        _, groups = batch_samples(roots, self.agents, self.config)
        episodes = _episode_values(roots)
        return {"step": step + 1, **reward_metrics(groups), "step_time": time.perf_counter() - started,
                **{f"episode/{name}": float(np.mean(v)) for name, v in episodes.items()}}

    def _gather_values(self, values: Tensor) -> Tensor:
        """Every rank's ``values``, concatenated in rank order (``values`` itself in one process)."""
        if not self.parallel.enabled:
            return values
        return torch.cat(self.parallel.gather(values.cpu()))

    def _update(self, samples: list[Sample], step_samples: int | None = None) -> tuple[float, dict[str, float], int,
                                                                                       bool]:
        """The optimisation part of a step: ``num_iterations`` passes of loss, backward and one AdamW step per agent.

        Each pass runs ``micro_batch_size`` completions at a time (forward, backward; gradients add up), which bounds
        activation memory by the micro-batch, not by agents × G × envs. Returns ``(mean loss, last pass's loss
        metrics, completion tokens, applied)``, all of the whole step. A pass whose loss or gradients
        are not finite applies nothing and ends the step (``applied`` False); with ``num_iterations == 1`` (always for
        ``magrpo``) the adapters are then exactly as before the step.

        Data-parallel: ``samples`` are this rank's, ``step_samples`` the whole step's count (default
        ``len(samples)``); each rank's losses are weighted by its share of the whole step, the gradients summed
        across ranks before the optimizers step, and the returned figures are the whole step's.
        """
        config = self.config
        parallel = self.parallel
        step_samples = len(samples) if step_samples is None else step_samples
        size = config.micro_batch_size
        chunks = [range(start, min(start + size, len(samples))) for start in range(0, len(samples), size)]
        generations = [[samples[i].generation for i in chunk] for chunk in chunks]
        agent_of_row = [[samples[i].agent for i in chunk] for chunk in chunks]
        advantages = [torch.tensor([samples[i].advantage for i in chunk]) for chunk in chunks]
        # Micro-batches: the means over completions (magrpo, grpo, dr_grpo) are weighted by their share of the rows;
        # dapo's token mean is normalised by the whole batch's completion tokens (TRL's num_items_in_batch), so the
        # summed gradients equal the whole batch's.
        token_total = None
        if config.loss_type == "dapo":
            token_total = int(parallel.sum(sum(len(s.generation.completion_ids) for s in samples)))
        weights = [1.0 if token_total is not None else len(chunk) / step_samples for chunk in chunks]
        self.team.train()
        old: list[Tensor | None] = [None] * len(chunks)
        ref: list[Tensor | None] = [None] * len(chunks)
        with torch.no_grad():
            for k in range(len(chunks)):
                if config.beta != 0.0:  # the KL reference of a LoRA policy: the base with every adapter off
                    ref[k] = self.team.forward_logprobs(generations[k], agent_of_row[k], reference=True).per_token_logps
                if config.num_iterations > 1:  # π_old: the policy that sampled, fixed for all passes over the batch
                    old[k] = self.team.forward_logprobs(generations[k], agent_of_row[k]).per_token_logps
        losses: list[float] = []
        loss_metrics: dict[str, float] = {}
        tokens = 0
        applied = True
        for _ in range(config.num_iterations):
            for optimizer in self.optimizers.values():
                optimizer.zero_grad(set_to_none=True)
            total, loss_metrics, tokens = 0.0, {}, 0
            for k in range(len(chunks)):
                logps = self.team.forward_logprobs(generations[k], agent_of_row[k], entropies=True)
                tokens += int(logps.completion_mask.sum())
                batch = PolicyBatch(per_token_logps=logps.per_token_logps,
                                    advantages=advantages[k].to(logps.per_token_logps),
                                    completion_mask=logps.completion_mask, old_per_token_logps=old[k],
                                    ref_per_token_logps=ref[k], entropies=logps.entropies,
                                    num_items_in_batch=token_total)
                loss, metrics = policy_loss(batch, self.loss_settings)
                weighted = loss * weights[k]
                total += weighted.item()
                share = len(chunks[k]) / step_samples  # metrics: means over completions, weighted by rows
                for name, value in metrics.items():
                    loss_metrics[name] = loss_metrics.get(name, 0.0) + share * value
                if not math.isfinite(total):
                    applied = False
                    break
                weighted.backward()
            # Data-parallel: the whole step's figures. Every rank reaches these collectives once per pass, however many
            # micro-batches it ran or whether its loss broke off early.
            if parallel.enabled:
                parts = parallel.gather((applied, total, tokens, loss_metrics))
                applied = all(part[0] for part in parts)
                total, tokens = sum(part[1] for part in parts), sum(part[2] for part in parts)
                names = dict.fromkeys(name for part in parts for name in part[3])
                loss_metrics = {name: sum(part[3].get(name, 0.0) for part in parts) for name in names}
            losses.append(total)
            if applied:
                parallel.sum_gradients(p for optimizer in self.optimizers.values() for group in optimizer.param_groups
                                       for p in group["params"])
            if not applied or not self._gradients_finite():  # e.g. an overflow in the backward of a finite loss
                applied = False
                break
            for optimizer in self.optimizers.values():
                optimizer.step()
        for optimizer in self.optimizers.values():
            optimizer.zero_grad(set_to_none=True)  # a skipped step leaves no gradients behind
        return float(np.mean(losses)), loss_metrics, tokens, applied

    def _gradients_finite(self) -> bool:
        grads = [p.grad for optimizer in self.optimizers.values() for group in optimizer.param_groups
                 for p in group["params"] if p.grad is not None]
        # One norm over every gradient (NaN or inf in any of them makes it non-finite): one device sync, not one per
        # tensor. A norm that overflows float32 (gradients ~1e19) also counts as non-finite; such a step is no loss.
        return not grads or bool(torch.isfinite(torch.nn.utils.get_total_norm(grads)))


def release_freed_memory() -> None:
    """Give the memory freed during a step back to the operating system (glibc's ``malloc_trim``; a no-op
    elsewhere). A step allocates and frees tensors of ever-different shapes (prompts, completions, trees), and
    glibc keeps the freed heap pages: without this a 2-agent writing run on CPU grew from 10 to 15 GB of RSS in 11
    steps, which a 70-step run cannot afford."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return
    trim(0)


def base_dtype(dtype: str, device: str) -> str:
    """The dtype the trainer loads base models in (``TrainerConfig.dtype``): ``auto`` is bfloat16 on a GPU that
    supports it (as TRL's ``bf16``) and float32 otherwise — also on CPUs with native bf16, where sampling would be
    faster but the updates and an exact resume are what a CPU run is for."""
    if dtype != "auto":
        return dtype
    from llm_marl_baselines.models import choose_device

    device = choose_device(device)
    return "bfloat16" if device.startswith("cuda") and torch.cuda.is_bf16_supported() else "float32"


def model_sources(config: TrainerConfig, agents: Sequence[str]) -> str | dict[str, str] | None:
    """``config.model`` as :meth:`TeamModel.load` takes it: None for the default model, a folder, or
    ``{agent: source}`` for a per-agent mapping (whose agents must be the env's)."""
    def source(model: str) -> str:
        return DEFAULT_MODEL if model == "default" else model

    if not isinstance(config.model, dict):
        return None if config.model == "default" else config.model
    if sorted(config.model) != sorted(agents):
        raise ValueError(f"model: the mapping names agents {sorted(config.model)} but the env's agents are "
                         f"{sorted(agents)}; give one model per agent")
    return {agent: source(config.model[agent]) for agent in agents}


def init_team_dir(value: str) -> Path:
    """The team directory ``TrainerConfig.init_team`` names: ``builtin:<env>-<size>`` (a shipped team) or a folder."""
    if value.startswith("builtin:"):
        from llm_marl_baselines.teams import builtin_team_named

        try:
            return builtin_team_named(value.removeprefix("builtin:"))
        except ValueError as error:
            raise ValueError(f"init_team {value!r}: {error}") from None
    folder = Path(value)
    if not folder.is_dir():
        raise ValueError(f"init_team: no team directory at {value!r} (a shipped team: 'builtin:<env>-<size>', "
                         f"e.g. 'builtin:coding-2')")
    return folder


def warm_start_adapters(config: TrainerConfig, agents: Sequence[str]) -> dict[str, Path]:
    """``{agent: adapter folder}`` for the agents that start from ``config.init_team`` (those whose name is a role of
    that team); empty without one. The team must share this run's base model and name at least one of its agents."""
    if config.init_team is None:
        return {}
    from llm_marl_baselines.policies.adapters import load_team_manifest

    folder = init_team_dir(config.init_team)
    manifest = load_team_manifest(folder)
    base = manifest_base_model(config)
    if base is None or manifest.base_model != base:
        raise ValueError(f"init_team: {folder} is a team on {manifest.base_model!r}, this run's base is "
                         f"{base or config.model!r}; a warm start needs the same base model")
    warm = {agent: folder / manifest.roles[agent] for agent in agents if agent in manifest.roles}
    if not warm:
        raise ValueError(f"init_team: {folder} has roles {sorted(manifest.roles)} and this run's agents are "
                         f"{list(agents)}: no agent would start from it")
    return warm


def warm_start_record(init_team: str, agents: Sequence[str], warm: Mapping[str, Path]) -> dict[str, Any]:
    """What a run started from: ``init_team`` as the config names it, the team directory it resolved to, the digest
    of that team's adapters (:func:`llm_marl_baselines.policies.adapters.adapters_digest`; ``builtin:coding-2`` names
    whichever team ships under that name, so the name alone does not say which weights), and the agents that started
    from it (agent -> adapter folder) and fresh."""
    from llm_marl_baselines.policies.adapters import adapters_digest

    folder = init_team_dir(init_team)
    return {"init_team": init_team, "team_dir": str(folder.resolve()), "adapters_sha256": adapters_digest(folder),
            "warm": {agent: str(path.resolve()) for agent, path in warm.items()},
            "fresh": [agent for agent in agents if agent not in warm]}


def manifest_base_model(config: TrainerConfig) -> str | None:
    """The base model as ``team.json`` names it: ``SmolLM2-135M-Instruct`` for ``default`` (what
    ``llm_marl_baselines.models.load_model`` resolves offline), else the model folder's absolute path; None for a
    per-agent mapping of different models (a team directory names one base)."""
    models = set(config.model.values()) if isinstance(config.model, dict) else {config.model}
    if len(models) > 1:
        return None
    model = models.pop()
    return DEFAULT_MODEL if model == "default" else str(Path(model).resolve())


def _check_per_agent_rewards(roots: Sequence[TreeNode]) -> None:
    """``advantage="per_agent"`` needs rewards that differ between agents; an env that pays every agent the same
    (a joint reward, as the suite's envs do) would give ``A_i = 0`` for every sample. Checked on the first step."""
    for root in roots:
        for node in root.nodes():
            rewards = {float(step.reward) for step in node.steps}
            if len(rewards) > 1 or any(math.isnan(r) for r in rewards):
                return
    raise ValueError(
        "advantage='per_agent': the env paid every agent the same reward in every joint action of the first step "
        "(a joint team reward), so A_i = R_i − mean_j R_j is 0 for every sample; per-agent advantages need an env "
        "that rewards each agent separately. Use advantage='joint' (MAGRPO) for the suite's writing and coding envs"
    )


EPISODE_COMPONENTS = ("quality", "consistency", "turns", "longest_reply_tokens", "discarded_tokens")
"""The reward components each metric row averages over the step's episodes (``episode/<name>``)."""


def _episode_values(roots: Sequence[TreeNode]) -> dict[str, list[float]]:
    """The tree's leaves' (the episodes' final outcomes) values of the env's reward components (``quality``,
    ``consistency``, ``turns``, and the episode's ``longest_reply_tokens`` and ``discarded_tokens``, what ``w_r`` and
    ``w_d`` price) and of its quality terms' ``pass_rate`` (coding: held-out tests passed); the row reports their
    means as ``episode/<name>``."""
    leaves = [node for root in roots for node in root.nodes() if not node.children and node.steps]
    values: dict[str, list[float]] = {}
    for leaf in leaves:
        components = leaf.steps[0].reward_components
        terms = leaf.steps[0].info.get("quality_terms") or {}
        for name, value in (*((n, components.get(n)) for n in EPISODE_COMPONENTS),
                            ("pass_rate", terms.get("pass_rate"))):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.setdefault(name, []).append(float(value))
    return values


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
