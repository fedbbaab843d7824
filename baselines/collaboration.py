"""The five collaboration baselines (the control groups of the seeds' studies and of MAGRPO), one registry.

A baseline is an env configuration plus a :class:`~llm_marl_envs.rollout.Schedule` (who acts when within a turn,
what each agent's chat says, how an action is post-processed); the episodes themselves are played by the one rollout
runner, :func:`llm_marl_envs.rollout.run_episodes`. Each agent's chat is the env's own (``env.chat_messages``: the
env's system prompt and the agent's observation) with the baseline's rule block put before the observation
(:mod:`llm_marl_envs.core.prompts`; a rule that speaks of teammates' drafts names the ones this agent's observation
really holds, :func:`drafts_seen`) — decentralized execution — except that the sequential pipeline, by definition,
shows agent *k* the outputs of agents ``< k``.

=======================  ==========  =============  ===========================================================
baseline                 max_turns   observability  schedule
=======================  ==========  =============  ===========================================================
``single_agent``         1           local          one agent (``num_agents=1``, role ``solo``) does everything
``naive_concatenation``  1           local          every agent writes its part alone; the env joins the parts
``sequential_pipeline``  1           local          agents act in order; agent k sees agents < k's outputs
``one_round_discussion`` 2           team           draft; see teammates' drafts once; revise and finish
``prompt_collaboration`` 3 (option)  team           multi-turn dialogue under fixed rules (messages, ``<done/>``)
=======================  ==========  =============  ===========================================================

Beside the five, :data:`SINGLE_MULTITURN` (``single_agent_multiturn``) is one agent on the env's own prompts with a
team's turn budget (option), feedback and endings: it may refine its answer and end early. The study compares teams
with it on the same footing; ``single_agent`` stays MAGRPO's one-shot single agent.

:func:`run_episodes` runs several episodes in lockstep, so one policy call serves every live agent of every episode
(batched generation across agents and episodes). Its optional ``on_turn(episode_index, turn)`` and
``on_episode(result)`` callbacks report progress as it goes (``llm-marl demo`` draws its progress bar with them).
To drive the runner yourself (a study, a trainer), take a baseline's ``schedule`` and ``env_kwargs``::

    spec = get_baseline("sequential_pipeline")
    envs = [make_env("writing", **spec.env_kwargs(num_agents=3)) for _ in range(4)]
    trajectories = rollout.run_episodes(envs, policy.as_rollout_policy(settings), seeds=range(4),
                                        schedule=spec.schedule)
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from llm_marl_baselines.policies.base import GenerationSettings, Policy
from llm_marl_envs import rollout
from llm_marl_envs.core.prompts import frame_observation, sequential_observation
from llm_marl_envs.core.protocol import DONE_TAG
from llm_marl_envs.registry import make_env
from llm_marl_envs.rollout import EnvSchedule, Schedule, Trajectory

_MESSAGE = re.compile(r"<message\b[^>]*>.*?</message>", re.IGNORECASE | re.DOTALL)


def draft_part(action: str) -> str:
    """An action without its ``<message>`` and ``<done/>`` parts (what an earlier pipeline agent wrote)."""
    return DONE_TAG.sub("", _MESSAGE.sub("", action)).strip()


def drafts_seen(env: Any, agent: str) -> list[str]:
    """The teammates whose drafts ``agent``'s observation holds: those the env shows it under its observability
    (``observability="team"``: :meth:`~llm_marl_envs.core.base_env.CollaborativeTextEnv.drafts_shown_to`) and those
    its role reads whatever the setting (``drafts_read_by_role``), in the env's agent order. A rule block that speaks
    of teammates' drafts says exactly these (:func:`llm_marl_envs.core.prompts.rule_block`)."""
    shown = set(env.drafts_shown_to(agent)) if env.observability == "team" else set()
    shown |= set(env.drafts_read_by_role(agent))
    return [teammate for teammate in env.possible_agents if teammate in shown]


def _framed_by_rule(env: Any, agent: str, rule: str) -> list[dict[str, str]]:
    """The env's chat for ``agent`` with the rule block ``rule`` before its observation, saying truly whose drafts
    the agent sees."""
    teammates = [a for a in env.possible_agents if a != agent]
    seen = drafts_seen(env, agent)
    return _reframed(env, agent, lambda observation: frame_observation(observation, rule, teammates, seen))


def _reframed(env: Any, agent: str, frame: Callable[[str], str]) -> list[dict[str, str]]:
    """The env's chat for ``agent`` with its observation (the user message) passed through ``frame``."""
    observation = next(m["content"] for m in env.chat_messages(agent) if m["role"] == "user")  # not the reply's start
    return env.chat_messages(agent, frame(observation))


# ------------------------------------------------------------------------------------------------------- schedules
@dataclass(frozen=True)
class RuleSchedule:
    """Every live agent acts at once, on its own observation with one fixed rule block before it (single agent, naive
    concatenation, prompt collaboration)."""

    rule: str
    """The key of the rule block in :data:`llm_marl_envs.core.prompts.BASELINE_RULES`."""

    def groups(self, env: Any, agents: Sequence[str], turn: int) -> list[list[str]]:
        """One group: all live agents (one batched policy call)."""
        return [list(agents)]

    def messages(self, env: Any, agent: str, turn: int, earlier: Mapping[str, str]) -> list[dict[str, str]]:
        """The env's chat, the rule block (saying whose drafts the agent sees) before the observation."""
        return _framed_by_rule(env, agent, self.rule)

    def finish(self, env: Any, action: str, turn: int) -> str:
        """The action as generated."""
        return action


@dataclass(frozen=True)
class SequentialSchedule:
    """Agents act one after another within the turn (one policy call per agent position, batched across episodes);
    agent *k*'s chat adds the drafts of agents ``< k`` — never their private messages."""

    def groups(self, env: Any, agents: Sequence[str], turn: int) -> list[list[str]]:
        """One group per agent, in the env's agent order."""
        return [[agent] for agent in agents]

    def messages(self, env: Any, agent: str, turn: int, earlier: Mapping[str, str]) -> list[dict[str, str]]:
        """The env's chat, the observation followed by the earlier agents' drafts and the pipeline rule."""
        drafts = {teammate: draft_part(action) for teammate, action in earlier.items()}
        return _reframed(env, agent, lambda observation: sequential_observation(observation, drafts))

    def finish(self, env: Any, action: str, turn: int) -> str:
        """The action as generated."""
        return action


@dataclass(frozen=True)
class DiscussionSchedule:
    """Two rounds, every agent at once: a draft, then — with the teammates' drafts in view (team observability) — the
    final version. The schedule, not the model, decides when an agent is done."""

    def groups(self, env: Any, agents: Sequence[str], turn: int) -> list[list[str]]:
        """One group: all live agents."""
        return [list(agents)]

    def messages(self, env: Any, agent: str, turn: int, earlier: Mapping[str, str]) -> list[dict[str, str]]:
        """The env's chat with the draft rule before the last turn and the revise rule at it."""
        return _framed_by_rule(env, agent, "discussion_draft" if turn < env.max_turns else "discussion_revise")

    def finish(self, env: Any, action: str, turn: int) -> str:
        """Round 1 is a draft whatever the model says (``<done/>`` removed); the last round always ends the agent's
        part (``<done/>`` added when missing)."""
        if turn < env.max_turns:
            return DONE_TAG.sub("", action).strip()
        return action if DONE_TAG.search(action) else f"{action}\n<done/>"


# -------------------------------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class Baseline:
    """A collaboration baseline: how the env is configured (:meth:`env_kwargs`) and how agents are prompted within a
    turn (:attr:`schedule`, for :func:`llm_marl_envs.rollout.run_episodes`)."""

    name: str
    description: str
    max_turns: int
    observability: str
    schedule: Schedule
    single_agent: bool = False
    turns_adjustable: bool = False
    """Whether ``max_turns`` may change the number of turns (only open-ended dialogues; the others are fixed)."""

    def env_kwargs(self, num_agents: int, max_turns: int | None = None) -> dict[str, Any]:
        """The env arguments this baseline runs with (``max_turns`` applies only when ``turns_adjustable``)."""
        turns = max_turns if self.turns_adjustable and max_turns is not None else self.max_turns
        return {
            "num_agents": 1 if self.single_agent else num_agents,
            "max_turns": turns,
            "observability": self.observability,
        }


BASELINES: dict[str, Baseline] = {
    baseline.name: baseline
    for baseline in (
        Baseline("single_agent", "one agent does the whole task alone", 1, "local",
                 RuleSchedule("single_agent"), single_agent=True),
        Baseline("naive_concatenation", "agents write their parts independently; parts are concatenated", 1,
                 "local", RuleSchedule("naive_concatenation")),
        Baseline("sequential_pipeline", "each agent sees the previous agents' outputs", 1, "local",
                 SequentialSchedule()),
        Baseline("one_round_discussion", "draft, see teammates' drafts once, revise", 2, "team",
                 DiscussionSchedule()),
        Baseline("prompt_collaboration", "multi-turn dialogue under fixed rules, no learning", 3, "team",
                 RuleSchedule("prompt_collaboration"), turns_adjustable=True),
    )
}

PLAIN = Baseline("plain", "each agent acts on its raw observation (the env's own prompt), no extra framing", 2,
                 "local", EnvSchedule(), turns_adjustable=True)
"""Not a baseline of the study: the minimal local-model loop ``llm-marl demo`` runs without ``--baseline``."""

SINGLE_MULTITURN = Baseline(
    "single_agent_multiturn",
    "one agent does the whole task with a team's turn budget, feedback and endings (it may refine and end early)",
    4, "local", EnvSchedule(), single_agent=True, turns_adjustable=True,
)
"""One agent (role ``solo``) on the env's own prompts, as a team's agents play them (the trained team's schedule):
the env's feedback after each turn and its early endings (``<done/>``, a solved task) apply to it as to a team, so a
study can compare a team with one agent on turns and latency, not only on a one-shot answer. Not one of the five
(``llm-marl demo`` does not list it): the study's ``single`` condition."""

_EXTRA: dict[str, Baseline] = {spec.name: spec for spec in (PLAIN, SINGLE_MULTITURN)}


def get_baseline(name: str) -> Baseline:
    """The baseline called ``name`` (``"plain"`` and ``"single_agent_multiturn"`` included), or a ValueError listing
    the names."""
    if name in _EXTRA:
        return _EXTRA[name]
    if name not in BASELINES:
        raise ValueError(f"baseline: expected one of {(*BASELINES, *_EXTRA)}, got {name!r}")
    return BASELINES[name]


# --------------------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class EpisodeResult:
    """What one baseline episode produced (JSON-friendly through :meth:`to_dict`)."""

    baseline: str
    env: str
    task_id: str
    seed: int | None
    agents: tuple[str, ...]
    episode_return: float
    turns: int
    end_reason: str | None
    quality: float
    consistency: float | None
    """The env's counterfactual consistency; ``None`` for a single agent (no teammate to coordinate with)."""
    reward_components: Mapping[str, Any]
    actions: Mapping[str, tuple[str, ...]]
    """Per agent, the action string it sent at each turn it acted."""
    drafts: Mapping[str, str]
    """The final drafts (from ``env.state()``, for reports only; no agent acted on it)."""
    wall_s: float
    """Seconds from reset to the episode's last step (episodes run in lockstep share their batch's time)."""
    trajectory: Trajectory | None = field(default=None, repr=False, compare=False)
    """The runner's full record (every chat, action, reward and the policy's generation records); not in
    :meth:`to_dict`."""

    def to_dict(self) -> dict[str, Any]:
        """The episode's figures as a plain dict (tuples become lists when dumped as JSON); the trajectory, with every
        prompt, is left out."""
        data = asdict(replace(self, trajectory=None))  # asdict deep-copies; the trajectory is dropped first, unwalked
        del data["trajectory"]
        return data

    @classmethod
    def from_trajectory(cls, baseline: str, env: str, trajectory: Trajectory, wall_s: float) -> EpisodeResult:
        """The result of ``trajectory``, an episode of ``baseline`` on ``env``."""
        components = dict(trajectory.final_info.get("reward_components", {}))
        consistency = components.get("consistency")
        return cls(
            baseline=baseline,
            env=env,
            task_id=trajectory.task_id,
            seed=trajectory.seed,
            agents=trajectory.agents,
            episode_return=trajectory.team_return,
            turns=trajectory.turns,
            end_reason=trajectory.end_reason,
            quality=float(components.get("quality", 0.0)),
            consistency=None if consistency is None else float(consistency),
            reward_components=components,
            actions={agent: tuple(s.action for s in trajectory.agent_steps(agent)) for agent in trajectory.agents},
            drafts=dict(trajectory.final_drafts),
            wall_s=wall_s,
            trajectory=trajectory,
        )


# ----------------------------------------------------------------------------------------------------- the driver
def run_episodes(
    baseline: str | Baseline,
    env: str,
    policy: Policy,
    settings: GenerationSettings,
    *,
    seeds: Sequence[int | None] = (0,),
    num_agents: int = 2,
    split: str = "train",
    task_id: str | None = None,
    max_turns: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    on_turn: Callable[[int, int], None] | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    records: bool = True,
) -> list[EpisodeResult]:
    """Run one episode per seed of ``baseline`` on ``env`` (a name in :data:`llm_marl_envs.registry.ENV_NAMES`),
    all in lockstep through :func:`llm_marl_envs.rollout.run_episodes`.

    ``max_turns`` changes only the multi-turn dialogue baseline (the others have fixed schedules);
    ``env_kwargs`` go to the env constructor (e.g. ``style``, ``dataset``, ``executor``).
    ``on_turn(episode_index, turn)`` is called after each step of each episode (``episode_index`` in ``seeds``
    order, ``turn`` 1-based); ``on_episode(result)`` once per episode, as soon as it ends.
    ``records=True`` keeps the policy's generation records (token ids, log-probabilities) in each result's
    ``trajectory``; ``False`` asks for texts only, which spares a local model the logits they cost.
    """
    spec = get_baseline(baseline) if isinstance(baseline, str) else baseline
    if not isinstance(policy, Policy):
        raise TypeError(f"policy: expected a Policy, got {type(policy).__name__}")
    config = {**dict(env_kwargs or {}), **spec.env_kwargs(num_agents, max_turns)}
    options: dict[str, Any] = {"split": split}
    if task_id is not None:
        options["task_id"] = task_id
    seeds = list(seeds)
    envs = [make_env(env, **config) for _ in seeds]
    start = time.perf_counter()
    last_step = [start] * len(envs)
    results: dict[int, EpisodeResult] = {}

    def turn_done(index: int, turn: int) -> None:
        last_step[index] = time.perf_counter()
        if on_turn is not None:
            on_turn(index, turn)

    def episode_done(trajectory: Trajectory) -> None:
        # Built as soon as the episode ends, so on_episode sees it without waiting for the slowest episode.
        index = trajectory.env_index
        results[index] = EpisodeResult.from_trajectory(spec.name, env, trajectory, last_step[index] - start)
        if on_episode is not None:
            on_episode(results[index])

    try:
        trajectories = rollout.run_episodes(envs, policy.as_rollout_policy(settings, records=records), seeds=seeds,
                                            options=options, schedule=spec.schedule, on_turn=turn_done,
                                            on_episode=episode_done)
    finally:
        for instance in envs:
            instance.close()
    for trajectory in trajectories:
        if trajectory.env_index not in results:  # an env with no agent at reset never stepped, so never ended
            episode_done(trajectory)
    return [results[index] for index in range(len(envs))]
