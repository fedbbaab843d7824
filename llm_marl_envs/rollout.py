"""The one rollout loop: a batch of envs stepped in lockstep by a batched policy, with optional G-way branching.

Everything that plays episodes uses it: the baselines (their schedules are :class:`Schedule` objects), the trainer
(its MAGRPO tree is :func:`rollout_tree`) and the study. No torch here: a policy is any callable that takes a list of
:class:`ChatRequest` and returns one completion per request, in order — a string, or an object with a ``text``
attribute (e.g. a generation record carrying token ids and log-probabilities, which trajectories keep).

>>> from llm_marl_envs import writing_v0
>>> from llm_marl_envs.rollout import run_episodes
>>> envs = [writing_v0.parallel_env(num_agents=2, similarity="tfidf") for _ in range(2)]
>>> policy = lambda requests: ["A short summary of the article. <done/>" for _ in requests]
>>> episodes = run_episodes(envs, policy, seeds=[0, 1])
>>> [len(e.steps) for e in episodes], episodes[0].turns
([2, 2], 1)

The suite's envs are driven directly; any other PettingZoo ParallelEnv with text observations and actions goes
through :class:`ChatEnv`. Lockstep: every turn, the live agents of every unfinished env are asked in *one* policy
call (batched generation across agents and envs), then every env steps. Agents that finish early simply stop being
asked. Envs whose step waits on the sandbox (``concurrent_steps``) are stepped from threads, so one turn's programs
of all envs reach the executor's warm pool together instead of one env after another.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from llm_marl_envs.core.magrpo_episode import JOINT_MODES
from llm_marl_envs.core.prompts import DEFAULT_SYSTEM_PROMPT, chat


@dataclass(frozen=True)
class ChatRequest:
    """One agent asking for one action: its chat messages (system + user) and where it comes from."""

    env_index: int
    agent: str
    turn: int
    """1-based turn the action is for."""
    messages: tuple[Mapping[str, str], ...]


Completion = Any
"""A string, or an object with a ``text`` attribute (kept whole in :attr:`AgentStep.generation`)."""
PolicyFn = Callable[[list[ChatRequest]], Sequence[Completion]]


class Schedule(Protocol):
    """How agents are prompted within a turn (the baselines differ only in this)."""

    def groups(self, env: Any, agents: Sequence[str], turn: int) -> list[list[str]]:
        """The order in which the live ``agents`` act this turn: each group is one policy call."""
        ...

    def messages(self, env: Any, agent: str, turn: int, earlier: Mapping[str, str]) -> list[dict[str, str]]:
        """The chat for ``agent`` at ``turn``; ``earlier`` holds the actions of earlier groups this turn."""
        ...

    def finish(self, env: Any, action: str, turn: int) -> str:
        """Post-process an action before the env gets it."""
        ...


class EnvSchedule:
    """The default: every live agent acts at once on the env's own chat (:meth:`chat_messages`), unchanged."""

    def groups(self, env: Any, agents: Sequence[str], turn: int) -> list[list[str]]:
        """One group: all live agents."""
        return [list(agents)]

    def messages(self, env: Any, agent: str, turn: int, earlier: Mapping[str, str]) -> list[dict[str, str]]:
        """The env's chat for the agent."""
        return env.chat_messages(agent)

    def finish(self, env: Any, action: str, turn: int) -> str:
        """The action as generated."""
        return action


class ChatEnv:
    """Any PettingZoo ParallelEnv whose observations and actions are text, shaped as the runner drives the suite's
    envs: it keeps the latest observations (``chat_messages`` wraps them with a system prompt), the turn and the team
    return (the first agent's reward, summed), and a minimal ``state()``. Copies (``copy.deepcopy``) copy the inner
    env, so trees branch from any env that deep-copies."""

    def __init__(self, env: Any, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> None:
        self.env, self.system_prompt = env, system_prompt
        self.possible_agents = list(env.possible_agents)
        self.turn, self.team_return, self.end_reason = 0, 0.0, None
        self._observations: dict[str, str] = {}

    @property
    def agents(self) -> list[str]:
        """The inner env's live agents."""
        return list(self.env.agents)

    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[dict, dict]:
        """Reset the inner env and remember its observations."""
        observations, infos = self.env.reset(seed=seed, options=None if options is None else dict(options))
        self._observations = dict(observations)
        self.turn, self.team_return, self.end_reason = 0, 0.0, None
        return observations, infos

    def step(self, actions: Mapping[str, str]) -> tuple:
        """Step the inner env and remember what it returned."""
        observations, rewards, terminations, truncations, infos = self.env.step(dict(actions))
        self._observations.update(observations)
        self.turn += 1
        self.team_return += float(next(iter(rewards.values()))) if rewards else 0.0
        if not self.env.agents:
            self.end_reason = "truncated" if any(truncations.values()) else "terminated"
        return observations, rewards, terminations, truncations, infos

    def chat_messages(self, agent: str) -> list[dict[str, str]]:
        """The agent's latest observation as ``[system, user]`` chat messages."""
        return chat(self.system_prompt, str(self._observations[agent]))

    def suggested_reply_end(self, agent: str) -> str | None:
        """The inner env's ``suggested_reply_end(agent)``, else None (the whole reply is the action)."""
        ends = getattr(self.env, "suggested_reply_end", None)
        return None if ends is None else ends(agent)

    def state(self) -> dict[str, Any]:
        """What trajectories record: the turn, the team return and how the episode ended, every agent's latest
        observation, and the inner env's own ``state()`` (``env_state``) where it has one."""
        task_id = str(getattr(self.env, "task_id", type(self.env).__name__))
        state = {
            "task": {"task_id": task_id},
            "turn": self.turn,
            "team_return": self.team_return,
            "end_reason": self.end_reason,
            "drafts": {},
            "config": {},
            "observations": {agent: str(text) for agent, text in self._observations.items()},
        }
        # PettingZoo's ParallelEnv.state() raises NotImplementedError where the env does not write one.
        with contextlib.suppress(AttributeError, NotImplementedError):
            state["env_state"] = self.env.state()
        return state


@dataclass(frozen=True)
class AgentStep:
    """What one agent did at one turn and what it got for it."""

    agent: str
    turn: int
    messages: tuple[Mapping[str, str], ...]
    action: str
    reward: float
    reward_components: Mapping[str, Any]
    terminated: bool
    truncated: bool
    generation: Any = None
    """The policy's completion object when it was not a plain string (token ids, log-probabilities...)."""
    info: Mapping[str, Any] = field(default_factory=dict)
    """The env's whole ``infos[agent]`` of this step (quality terms, test counts, action problems...)."""


@dataclass(frozen=True)
class Trajectory:
    """One finished episode of one env."""

    env_index: int
    task_id: str
    seed: int | None
    agents: tuple[str, ...]
    steps: tuple[AgentStep, ...]
    team_return: float
    """The sum of the joint rewards of the episode (the same for every agent)."""
    turns: int
    end_reason: str | None
    final_info: Mapping[str, Any]
    """The last step's info of the first agent (reward components, quality terms...)."""
    final_drafts: Mapping[str, str]
    config: Mapping[str, Any] = field(default_factory=dict)
    """The env's config (``env.state()["config"]``), so a saved trajectory says what it was played on."""

    def agent_steps(self, agent: str) -> list[AgentStep]:
        """The steps of one agent, in turn order."""
        return [step for step in self.steps if step.agent == agent]


def _text(completion: Completion) -> str:
    text = completion if isinstance(completion, str) else getattr(completion, "text", None)
    if not isinstance(text, str):
        raise TypeError(f"policy: expected a str or an object with a str 'text', got {type(completion).__name__}")
    return text


def _ask(policy: PolicyFn, requests: list[ChatRequest]) -> list[Completion]:
    if not requests:
        return []
    completions = list(policy(requests))
    if len(completions) != len(requests):
        raise RuntimeError(f"policy returned {len(completions)} completions for {len(requests)} requests")
    return completions


def _step_all(envs: Sequence[Any], actions: Sequence[dict[str, str]]) -> list[tuple]:
    """Step each env with its joint action; in threads when every env waits on I/O (the sandbox) while stepping."""
    if len(envs) > 1 and all(getattr(env, "concurrent_steps", False) for env in envs):
        with ThreadPoolExecutor(max_workers=min(16, len(envs)), thread_name_prefix="env-step") as pool:
            return list(pool.map(lambda pair: pair[0].step(pair[1]), zip(envs, actions, strict=True)))
    return [env.step(action) for env, action in zip(envs, actions, strict=True)]


def _joint_actions(
    policy: PolicyFn, schedule: Schedule, envs: Sequence[tuple[int, Any]], turn_of: Callable[[Any], int]
) -> list[tuple[dict[str, str], dict[str, tuple[tuple[Mapping[str, str], ...], Completion]]]]:
    """Ask the policy for every live agent of every env (one call per schedule group) and build joint actions."""
    actions: list[dict[str, str]] = [{} for _ in envs]
    records: list[dict[str, tuple]] = [{} for _ in envs]
    plans = [schedule.groups(env, list(env.agents), turn_of(env)) for _, env in envs]
    for depth in range(max((len(plan) for plan in plans), default=0)):
        requests, where = [], []
        for slot, ((index, env), plan) in enumerate(zip(envs, plans, strict=True)):
            if depth >= len(plan):
                continue
            for agent in plan[depth]:
                messages = tuple(schedule.messages(env, agent, turn_of(env), dict(actions[slot])))
                requests.append(ChatRequest(index, agent, turn_of(env), messages))
                where.append(slot)
        for request, slot, completion in zip(requests, where, _ask(policy, requests), strict=True):
            env = envs[slot][1]
            actions[slot][request.agent] = schedule.finish(env, _text(completion), request.turn)
            records[slot][request.agent] = (request.messages, completion)
    return list(zip(actions, records, strict=True))


def _agent_steps(turn: int, records: Mapping[str, tuple], actions: Mapping[str, str], result: tuple) -> list[AgentStep]:
    _, rewards, terminations, truncations, infos = result
    return [
        AgentStep(
            agent=agent,
            turn=turn,
            messages=messages,
            action=actions[agent],
            reward=float(rewards[agent]),
            reward_components=dict(infos[agent].get("reward_components", {})),
            terminated=bool(terminations[agent]),
            truncated=bool(truncations[agent]),
            generation=None if isinstance(completion, str) else completion,
            info=dict(infos[agent]),
        )
        for agent, (messages, completion) in records.items()
    ]


def run_episodes(
    envs: Sequence[Any],
    policy: PolicyFn,
    *,
    seeds: Sequence[int | None] | None = None,
    options: Sequence[Mapping[str, Any] | None] | Mapping[str, Any] | None = None,
    schedule: Schedule | None = None,
    on_turn: Callable[[int, int], None] | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """Reset each env (``seeds[i]``, ``options`` shared or per env) and play one episode of each in lockstep.

    ``on_turn(env_index, turn)`` is called after each step of each env, ``on_episode(trajectory)`` as soon as an
    episode ends. Returns the trajectories in env order.
    """
    envs = list(envs)
    seeds = list(seeds) if seeds is not None else [None] * len(envs)
    if len(seeds) != len(envs):
        raise ValueError(f"seeds: expected {len(envs)} (one per env), got {len(seeds)}")
    per_env = list(options) if isinstance(options, Sequence) else [options] * len(envs)
    if len(per_env) != len(envs):
        raise ValueError(f"options: expected one mapping or {len(envs)}, got {len(per_env)}")
    schedule = schedule or EnvSchedule()
    for env, seed, env_options in zip(envs, seeds, per_env, strict=True):
        env.reset(seed=seed, options=None if env_options is None else dict(env_options))
    state = [_EpisodeState(env, i, seed) for i, (env, seed) in enumerate(zip(envs, seeds, strict=True))]
    trajectories: dict[int, Trajectory] = {}
    for episode in state:
        if not episode.env.agents:
            trajectories[episode.index] = episode.finish()
    while True:
        live = [episode for episode in state if episode.env.agents]
        if not live:
            break
        joint = _joint_actions(policy, schedule, [(e.index, e.env) for e in live], lambda env: env.turn + 1)
        results = _step_all([e.env for e in live], [actions for actions, _ in joint])
        for episode, (actions, records), result in zip(live, joint, results, strict=True):
            episode.record(_agent_steps(episode.env.turn, records, actions, result), result)
            if on_turn is not None:
                on_turn(episode.index, episode.env.turn)
            if not episode.env.agents:
                trajectories[episode.index] = episode.finish()
                if on_episode is not None:
                    on_episode(trajectories[episode.index])
    return [trajectories[i] for i in range(len(envs))]


class _EpisodeState:
    def __init__(self, env: Any, index: int, seed: int | None) -> None:
        self.env, self.index, self.seed = env, index, seed
        self.steps: list[AgentStep] = []
        self.last_info: Mapping[str, Any] = {}
        self.agents = tuple(env.agents)

    def record(self, steps: list[AgentStep], result: tuple) -> None:
        self.steps.extend(steps)
        infos = result[4]
        if infos:
            self.last_info = next(iter(infos.values()))

    def finish(self) -> Trajectory:
        state = self.env.state()
        return Trajectory(
            env_index=self.index,
            task_id=state["task"]["task_id"],
            seed=self.seed,
            agents=self.agents,
            steps=tuple(self.steps),
            team_return=float(state["team_return"]),
            turns=int(state["turn"]),
            end_reason=state["end_reason"],
            final_info=dict(self.last_info),
            final_drafts=dict(state["drafts"]),
            config=dict(state.get("config", {})),
        )


@dataclass
class TreeNode:
    """One node of a MAGRPO rollout tree: the joint action that led here and what it earned.

    The root (``depth == 0``) holds the reset env's position and no action. A node's ``children`` are the joint
    actions sampled from its position (G aligned, or G^N crossed); leaves are nodes whose episode ended or that
    reached ``max_depth``. Returns and advantages are the trainer's business (``R = r + γ·mean(children R)``).
    """

    env_index: int
    depth: int
    steps: tuple[AgentStep, ...] = ()
    reward: float = 0.0
    """The joint reward of the step into this node (0 at the root)."""
    done: bool = False
    """The episode ended at this node (every agent terminated or truncated)."""
    sample_index: tuple[int, ...] = ()
    """Per acting agent, which of its G samples this joint action took (aligned: all equal)."""
    children: list[TreeNode] = field(default_factory=list)
    state: Any = None
    """The env's ``state()`` at this node's position (the root's after reset, a child's after its step), when the
    runner was asked to record it (``record_state``: the input of a centralized critic); otherwise None."""

    def nodes(self) -> list[TreeNode]:
        """This node and every descendant, depth first."""
        return [self, *itertools.chain.from_iterable(child.nodes() for child in self.children)]


def _before_branching(turns: Collection[int] | None, turn: int) -> bool:
    """Whether ``turn`` comes before every branching turn of a tree (``None``: the full tree branches at every turn)."""
    return bool(turns) and turn < min(turns)


def rollout_tree(
    envs: Sequence[Any],
    policy: PolicyFn,
    *,
    group_size: int,
    joint: str = "aligned",
    max_depth: int | None = None,
    seeds: Sequence[int | None] | None = None,
    options: Mapping[str, Any] | None = None,
    early_termination_threshold: float | None = None,
    record_state: bool = False,
    branch_turns: Sequence[Collection[int] | None] | None = None,
) -> list[TreeNode]:
    """Grow one MAGRPO tree per env: at each node every live agent samples ``group_size`` completions from the same
    position (restored from a snapshot of that node), the samples form joint actions (``joint``), and each joint
    action is stepped in its own copy of the env. All nodes of one depth, across envs, share one policy call.

    ``branch_turns`` (one entry per env): the turns (1-based) at which that env's nodes branch into ``group_size``
    samples; at every other turn a node takes one joint action (one sample per agent), so the tree is a single
    rollout up to its branching turn and each branch is rolled out once after it: each branch's return is then a
    Monte Carlo estimate of what its joint action leads to, at the cost of one rollout, instead of a G-ary subtree
    (a full tree over T turns has G^T leaves). None (or a None entry): branch at every turn, the full tree.
    An episode that ends before its tree has branched branches at the turn it ended instead: that single joint
    action is set aside and the node samples ``group_size`` fresh ones, so every tree yields a group, and the turns
    where teams end — where a group can differ in when it ends — are the ones such trees train on. The set-aside
    sample is not one of the group: a group holding the one sample chosen *because* its episode ended would be biased
    towards ending; the fresh samples are drawn from the node like any group's.

    ``early_termination_threshold``: a node whose joint actions earned a mean reward above it is not expanded further
    (its children are leaves even if their episodes go on): the group is already good enough, so no more turns are
    spent under it (MAGRPO's early termination; CoMLRL's ``early_termination_threshold``). None: every branch runs
    until its episode ends or ``max_depth``.

    ``record_state``: every node keeps the env's ``state()`` at its position (:attr:`TreeNode.state`), the privileged
    view a centralized critic learns from; agents never see it.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size: expected an int >= 1, got {group_size!r}")
    if joint not in JOINT_MODES:
        raise ValueError(f"joint: expected one of {JOINT_MODES}, got {joint!r}")
    if early_termination_threshold is not None and (
        isinstance(early_termination_threshold, bool) or not isinstance(early_termination_threshold, (int, float))
        or math.isnan(early_termination_threshold)
    ):
        raise ValueError(f"early_termination_threshold: expected None or a number, got {early_termination_threshold!r}")
    envs = list(envs)
    seeds = list(seeds) if seeds is not None else [None] * len(envs)
    branching = list(branch_turns) if branch_turns is not None else [None] * len(envs)
    if len(branching) != len(envs):
        raise ValueError(f"branch_turns: expected one entry per env ({len(envs)}), got {len(branching)}")
    for turns in branching:
        if turns is not None and not all(isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in turns):
            raise ValueError(f"branch_turns: expected None or collections of turns >= 1, got {turns!r}")

    def width(env_index: int, turn: int) -> int:
        turns = branching[env_index]
        return group_size if turns is None or turn in turns else 1

    roots = []
    frontier: list[tuple[TreeNode, Any]] = []
    for index, (env, seed) in enumerate(zip(envs, seeds, strict=True)):
        env.reset(seed=seed, options=None if options is None else dict(options))
        root = TreeNode(index, 0, done=not env.agents, state=env.state() if record_state else None)
        roots.append(root)
        if env.agents:
            frontier.append((root, env))
    schedule = EnvSchedule()
    while frontier:
        requests, owners = [], []
        for slot, (node, env) in enumerate(frontier):
            samples_here = width(node.env_index, env.turn + 1)
            for agent in env.agents:
                messages = tuple(schedule.messages(env, agent, env.turn + 1, {}))
                requests += [ChatRequest(node.env_index, agent, env.turn + 1, messages)] * samples_here
                owners += [(slot, agent)] * samples_here
        samples: list[dict[str, list[tuple[ChatRequest, Completion]]]] = [{} for _ in frontier]
        for request, (slot, agent), completion in zip(requests, owners, _ask(policy, requests), strict=True):
            samples[slot].setdefault(agent, []).append((request, completion))
        next_frontier = []
        for slot, (node, env) in enumerate(frontier):
            agents = list(env.agents)
            samples_here = width(node.env_index, env.turn + 1)
            if joint == "aligned":
                choices = [(k,) * len(agents) for k in range(samples_here)]
            else:
                choices = list(itertools.product(range(samples_here), repeat=len(agents)))
            growing, rebranch = [], False
            for choice in choices:
                child_env = copy.deepcopy(env)  # the node's position, carried by the env's snapshot of its episode
                records = {
                    a: (samples[slot][a][k][0].messages, samples[slot][a][k][1])
                    for a, k in zip(agents, choice, strict=True)
                }
                actions = {a: _text(records[a][1]) for a in agents}
                result = child_env.step(actions)
                steps = tuple(_agent_steps(child_env.turn, records, actions, result))
                done = not child_env.agents
                child = TreeNode(node.env_index, node.depth + 1, steps, steps[0].reward, done, choice,
                                 state=child_env.state() if record_state else None)
                if done and samples_here == 1 and _before_branching(branching[node.env_index], child_env.turn):
                    # Ended before its branching turn: branch here instead (see the docstring), from this node again.
                    branching[node.env_index] = {child_env.turn}
                    rebranch = True
                    break
                node.children.append(child)
                if not done and (max_depth is None or child.depth < max_depth):
                    growing.append((child, child_env))
            if rebranch:
                next_frontier.append((node, env))
                continue
            mean_reward = sum(child.reward for child in node.children) / len(node.children)
            if early_termination_threshold is None or not mean_reward > early_termination_threshold:
                next_frontier += growing
        frontier = next_frontier
    return roots
