"""What one training step will do, before it runs: tree nodes, completions and tokens, and an estimate of its time.

A MAGRPO step grows ``envs_per_step`` trees (:func:`llm_marl_envs.rollout.rollout_tree`). At every expanded node each
live agent samples ``G`` completions, and the samples form ``b`` joint actions — ``b = G`` (``aligned``) or
``b = G^N`` (``cross``) — each a child node. A tree of ``T`` turns therefore expands ``b^(t-1)`` nodes at depth ``t``
and has ``sum_{t=0..T} b^t`` nodes; every expanded node costs ``N·G`` completions. For full trees these are upper
bounds: agents that say ``<done/>`` and episodes that end early (or ``early_termination_threshold``) grow less.
A ``one_turn`` tree is the other way round: its single rollout up to the branching turn ``k`` may end at turn
``d < k``, and then the tree branches at ``d`` instead (``rollout_tree``'s re-branch), so it rolls ``b`` branches out
over more turns. ``most_completions`` counts the worst case, every such tree ending at turn 1 (one set-aside joint
action, then ``G`` samples and ``b·(T − 1)`` single ones per agent).

The time estimate is measured, not guessed: :func:`estimate_step` times short ``generate`` calls of the step's real
prompts at the step's row counts (2 and 10 new tokens, after one warm-up call: prefill and per-token cost,
extrapolated to ``max_completion_length``) and a forward/backward pass of a micro-batch of full-length completions
(the second of two), then adds them up as the step will run them. It is measured on turn-1 prompts; later turns'
prompts are longer (they carry the agent's draft and feedback), so on multi-turn trees the estimate runs low (by about
a quarter for 2-turn writing trees on 2 CPU cores: 55 s estimated, 75 s measured), while counting every completion at
``max_completion_length`` leans the other way when completions stop early; env steps (the coding sandbox) are not
included.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from llm_marl_trainers.config import TrainerConfig


@dataclass(frozen=True)
class StepPlan:
    """The shape of one step (upper bounds; see the module docstring)."""

    trees: int
    turns: int
    """Depth of each tree (the env's ``max_turns``)."""
    agents: int
    branching: int
    """Children per expanded node: ``G`` (aligned) or ``G^N`` (cross)."""
    expanded_per_depth: tuple[int, ...]
    """Expanded nodes of all trees at each depth (depth 1 = the roots)."""
    nodes: int
    """Nodes of all trees, roots and leaves included."""
    completions: int
    most_completions: int
    """Completions when every ``one_turn`` tree that branches after turn 1 ends at turn 1 and re-branches there (the
    step's most; equal to ``completions`` for full trees)."""
    trained: int
    """Completions the update trains on: every one (``full``), the branching turns' only (``one_turn``)."""
    tokens: int
    """Completion tokens at most (``most_completions × max_completion_length``)."""
    rows_per_depth: tuple[int, ...]
    """Rows of the one ``generate`` call at each depth (agents × G × expanded nodes)."""

    def describe(self) -> str:
        """One line for people."""
        trained = "" if self.trained == self.completions else f", {self.trained} trained on"
        most = ("" if self.most_completions == self.completions
                else f" (up to {self.most_completions} when trees end before they branch and re-branch)")
        return (f"{self.trees} tree(s) x {self.turns} turn(s), {self.agents} agent(s), {self.branching} children per "
                f"node: {self.nodes} nodes, {self.completions} completions{most}{trained} (generate calls of "
                f"{'/'.join(map(str, self.rows_per_depth))} rows), at most {self.tokens:,} completion tokens")


def step_plan(config: TrainerConfig, max_turns: int, num_agents: int | None = None) -> StepPlan:
    """The :class:`StepPlan` of ``config`` on an env of ``max_turns`` turns (``num_agents``: the env's team size,
    default ``config.num_agents``)."""
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns: expected an int >= 1, got {max_turns!r}")
    agents = config.num_agents if num_agents is None else num_agents
    G, trees = config.num_generations, config.envs_per_step
    branching = G if config.joint_mode == "aligned" else G**agents
    if config.branching == "one_turn":
        # Tree i of the first step branches at turn k = 1 + i mod T: one node a depth before k (one sample per
        # agent), the branching node at k (G each), then `branching` single rollouts (one sample per agent).
        expanded_list, rows_list, nodes, most = [0] * max_turns, [0] * max_turns, 0, 0
        trained = trees * agents * G
        for i in range(trees):
            k = 1 + i % max_turns
            # Worst case: a tree branching later ends at turn 1, sets that joint action aside and branches there.
            most += agents * ((1 if k > 1 else 0) + G + branching * (max_turns - 1))
            for depth in range(1, max_turns + 1):
                width = 1 if depth <= k else branching
                expanded_list[depth - 1] += width
                rows_list[depth - 1] += width * agents * (G if depth == k else 1)
            nodes += 1 + k + branching * (max_turns - k + 1) - 1
        expanded, rows = tuple(expanded_list), tuple(rows_list)
    else:
        expanded = tuple(trees * branching ** (depth - 1) for depth in range(1, max_turns + 1))
        nodes = trees * sum(branching**depth for depth in range(max_turns + 1))
        rows = tuple(n * agents * G for n in expanded)
        trained = most = sum(rows)  # a full tree never re-branches: its nominal count is its most
    completions = sum(rows)
    return StepPlan(trees=trees, turns=max_turns, agents=agents, branching=branching, expanded_per_depth=expanded,
                    nodes=nodes, completions=completions, most_completions=most, trained=trained,
                    tokens=most * config.max_completion_length,
                    rows_per_depth=rows)


@dataclass(frozen=True)
class StepEstimate:
    """Measured parts of one step's time (seconds)."""

    generation_s: float
    update_s: float
    calibration_s: float
    """How long the measurement itself took."""

    @property
    def total_s(self) -> float:
        """The step's estimated model time."""
        return self.generation_s + self.update_s


def generation_estimate(rows: tuple[int, ...], measured: dict[int, tuple[float, float]], tokens: int) -> float:
    """Seconds to generate ``tokens`` new tokens at each depth's row count, from ``measured[rows] = (prefill_s,
    per_token_s)`` at some row counts (linear in rows between and beyond them)."""
    if not measured:
        raise ValueError("measured: expected timings at one row count at least")
    points = sorted(measured.items())

    def at(count: int) -> tuple[float, float]:
        if len(points) == 1:
            (r0, (p0, d0)), = points
            return p0 * count / r0, d0 * count / r0
        (r0, (p0, d0)), (r1, (p1, d1)) = points[0], points[-1]
        share = (count - r0) / (r1 - r0)
        return p0 + share * (p1 - p0), d0 + share * (d1 - d0)

    total = 0.0
    for count in rows:
        prefill, per_token = at(count)
        total += max(0.0, prefill) + max(0.0, per_token) * tokens
    return total


def estimate_step(trainer: Any, plan: StepPlan) -> StepEstimate:
    """Time one step of ``trainer`` (a :class:`~llm_marl_trainers.magrpo.MAGRPOTrainer`) will take, by measurement (see
    the module docstring). Nothing of the run changes: sampling uses a private seed, the global RNG states are restored,
    and the gradients of the trial backward pass are dropped."""
    import torch

    from llm_marl_baselines.policies.base import GenerationSettings
    from llm_marl_envs.rollout import ChatRequest

    started = time.perf_counter()
    config: TrainerConfig = trainer.config
    env = trainer.envs[0]
    env.reset(seed=config.seed)  # every training step resets its envs with its own seeds
    requests = [ChatRequest(0, agent, 1, tuple(env.chat_messages(agent))) for agent in env.agents]
    team = trainer.team
    G = config.num_generations

    def timed_generate(copies: int, tokens: int) -> float:
        settings = GenerationSettings(temperature=config.temperature, top_p=config.top_p, max_new_tokens=tokens, seed=0)
        begin = time.perf_counter()
        team.generate(requests * copies, settings, G, logprobs=True, min_new_tokens=tokens)
        return time.perf_counter() - begin

    measured: dict[int, tuple[float, float]] = {}
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        team.eval()
        timed_generate(1, 1)  # the first call pays one-off costs (allocations, kernels) that no step pays again
        for rows in sorted({plan.rows_per_depth[0], plan.rows_per_depth[-1]}):
            copies = max(1, rows // (len(requests) * G))
            short, long = timed_generate(copies, 2), timed_generate(copies, 10)
            per_token = max(0.0, (long - short) / 8)
            measured[copies * len(requests) * G] = (max(0.0, short - 2 * per_token), per_token)
    generation = generation_estimate(plan.rows_per_depth, measured, config.max_completion_length)

    # One micro-batch of full-length completions through forward and backward, as the update runs it.
    size = min(config.micro_batch_size, plan.trained)
    prompts = team.prompt_ids(requests, config.max_completion_length)
    rows = [(prompts[i % len(prompts)], prompts[i % len(prompts)][-1:] * config.max_completion_length)
            for i in range(size)]
    agents = [requests[i % len(requests)].agent for i in range(size)]
    with torch.random.fork_rng(devices=[]):
        team.train()
        for _ in range(2):  # the second pass is the one timed: the first pays one-off allocations
            begin = time.perf_counter()
            logps = team.forward_logprobs(rows, agents, entropies=True)
            (-logps.per_token_logps.sum()).backward()
            micro = time.perf_counter() - begin
        team.eval()
    for agent in trainer.agents:
        for parameter in team.adapter_parameters(agent):
            parameter.grad = None
    # Each optimisation pass runs forward + backward; π_old (num_iterations > 1) and the KL reference (beta) add one
    # no-grad forward each, about a third of a forward + backward.
    passes = config.num_iterations + ((config.num_iterations > 1) + (config.beta != 0.0)) / 3
    update = math.ceil(plan.trained / size) * micro * passes
    return StepEstimate(generation_s=generation, update_s=update, calibration_s=time.perf_counter() - started)
