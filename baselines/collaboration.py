"""The five collaboration baselines (the control groups of the seeds' studies and of MAGRPO), one registry.

Every baseline is an env configuration plus a prompting schedule, run through the PettingZoo ParallelEnv API only
(``reset``/``step``/``agents``/observations/infos). Each agent's request holds its own observation framed by the
baseline's prompts (:mod:`baselines.prompts`) — decentralized execution — except that the sequential pipeline, by
definition, shows agent *k* the outputs of agents ``< k``.

=======================  ==========  =============  ===========================================================
baseline                 max_turns   observability  schedule
=======================  ==========  =============  ===========================================================
``single_agent``         1           local          one agent (``num_agents=1``, role ``solo``) does everything
``naive_concatenation``  1           local          every agent writes its part alone; the env joins the parts
``sequential_pipeline``  1           local          agents act in order; agent k sees agents < k's outputs
``one_round_discussion`` 2           team           draft; see teammates' drafts once; revise and finish
``prompt_collaboration`` 3 (option)  team           multi-turn dialogue under fixed rules (messages, ``<done/>``)
=======================  ==========  =============  ===========================================================

:func:`run_episodes` runs several episodes in lockstep, so one policy call serves every live agent of every episode
(batched generation across agents and episodes). Its optional ``on_turn(episode_index, turn)`` and
``on_episode(result)`` callbacks report progress as it goes (``llm-marl demo`` draws its progress bar with them).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from baselines import prompts
from baselines.policies.base import ActionRequest, GenerationSettings, Policy

ENVS: dict[str, str] = {"writing": "writing_v0", "coding": "coding_v0"}
_DONE = re.compile(r"<done\s*/?>", re.IGNORECASE)  # as lenient as the env's protocol parser
_MESSAGE = re.compile(r"<message\b[^>]*>.*?</message>", re.IGNORECASE | re.DOTALL)


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

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (tuples become lists when dumped as JSON)."""
        return asdict(self)


@dataclass(frozen=True)
class Baseline:
    """A collaboration baseline: how the env is configured and how each agent's request is framed per turn."""

    name: str
    description: str
    max_turns: int
    observability: str
    rules: Callable[[int, int], str]
    """(turn, max_turns) → the rule key in :data:`baselines.prompts.BASELINE_RULES` for that turn (1-based);
    an empty key adds no framing."""
    single_agent: bool = False
    sequential: bool = False
    turns_adjustable: bool = False
    """Whether ``max_turns`` may change the number of turns (only open-ended dialogues; the others are fixed)."""
    finish: Callable[[str, int, int], str] = field(default=lambda action, turn, max_turns: action)
    """Post-processing of an action at (turn, max_turns): the discussion fixes its two-round schedule here."""

    def env_kwargs(self, num_agents: int, max_turns: int | None = None) -> dict[str, Any]:
        """The env arguments this baseline runs with (``max_turns`` applies only when ``turns_adjustable``)."""
        turns = max_turns if self.turns_adjustable and max_turns is not None else self.max_turns
        return {
            "num_agents": 1 if self.single_agent else num_agents,
            "max_turns": turns,
            "observability": self.observability,
        }


def _discussion_finish(action: str, turn: int, max_turns: int) -> str:
    # Round 1 is a draft whatever the model says; round 2 always ends the agent's part.
    if turn < max_turns:
        return _DONE.sub("", action).strip()
    return action if _DONE.search(action) else f"{action}\n<done/>"


BASELINES: dict[str, Baseline] = {
    baseline.name: baseline
    for baseline in (
        Baseline("single_agent", "one agent does the whole task alone", 1, "local",
                 rules=lambda turn, max_turns: "single_agent", single_agent=True),
        Baseline("naive_concatenation", "agents write their parts independently; parts are concatenated", 1,
                 "local", rules=lambda turn, max_turns: "naive_concatenation"),
        Baseline("sequential_pipeline", "each agent sees the previous agents' outputs", 1, "local",
                 rules=lambda turn, max_turns: "sequential_pipeline", sequential=True),
        Baseline("one_round_discussion", "draft, see teammates' drafts once, revise", 2, "team",
                 rules=lambda turn, max_turns: "discussion_draft" if turn < max_turns else "discussion_revise",
                 finish=_discussion_finish),
        Baseline("prompt_collaboration", "multi-turn dialogue under fixed rules, no learning", 3, "team",
                 rules=lambda turn, max_turns: "prompt_collaboration", turns_adjustable=True),
    )
}

PLAIN = Baseline("plain", "each agent acts on its raw observation (the env's own prompt), no extra framing", 2,
                 "local", rules=lambda turn, max_turns: "", turns_adjustable=True)
"""Not a baseline of the study: the minimal local-model loop ``llm-marl demo`` runs without ``--baseline``."""


def make_env(env: str, **kwargs: Any) -> Any:
    """Create ``writing_v0``/``coding_v0`` (``env`` = ``"writing"`` or ``"coding"``) as a ParallelEnv."""
    if env not in ENVS:
        raise ValueError(f"env: expected one of {tuple(ENVS)}, got {env!r}")
    import importlib

    return importlib.import_module(f"llm_marl_envs.{ENVS[env]}").parallel_env(**kwargs)


def get_baseline(name: str) -> Baseline:
    """The baseline called ``name`` (``"plain"`` included), or a ValueError listing the names."""
    if name == PLAIN.name:
        return PLAIN
    if name not in BASELINES:
        raise ValueError(f"baseline: expected one of {tuple(BASELINES)}, got {name!r}")
    return BASELINES[name]


def draft_part(action: str) -> str:
    """An action without its ``<message>`` and ``<done/>`` parts (what an earlier pipeline agent wrote)."""
    return _DONE.sub("", _MESSAGE.sub("", action)).strip()


class _Episode:
    """One env in a lockstep batch, with what the runner must remember about it."""

    def __init__(self, env: Any, seed: int | None, options: dict[str, Any]) -> None:
        self.env = env
        self.seed = seed
        self.observations, infos = env.reset(seed=seed, options=options)
        self.task_id = str(next(iter(infos.values()))["task_id"])
        self.agents = tuple(env.agents)
        self.actions: dict[str, list[str]] = {agent: [] for agent in self.agents}
        self.turn = 0
        self.episode_return = 0.0
        self.last_info: dict[str, Any] = {}
        self.start = time.perf_counter()
        self.end = self.start
        self.result: EpisodeResult | None = None

    def step(self, actions: dict[str, str]) -> None:
        for agent, action in actions.items():
            self.actions[agent].append(action)
        self.observations, rewards, _, _, infos = self.env.step(actions)
        self.turn += 1
        self.episode_return += float(next(iter(rewards.values())))  # joint reward: the same for every agent
        self.last_info = next(iter(infos.values()))
        self.end = time.perf_counter()


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
) -> list[EpisodeResult]:
    """Run one episode per seed of ``baseline`` on ``env`` (``"writing"``/``"coding"``), all in lockstep.

    ``max_turns`` changes only the multi-turn dialogue baseline (the others have fixed schedules);
    ``env_kwargs`` go to the env constructor (e.g. ``style``, ``dataset``, ``executor``).
    ``on_turn(episode_index, turn)`` is called after each step of each episode (``episode_index`` in ``seeds``
    order, ``turn`` 1-based); ``on_episode(result)`` once per episode, as soon as it ends.
    """
    spec = get_baseline(baseline) if isinstance(baseline, str) else baseline
    if not isinstance(policy, Policy):
        raise TypeError(f"policy: expected a Policy, got {type(policy).__name__}")
    config = {**dict(env_kwargs or {}), **spec.env_kwargs(num_agents, max_turns)}
    options: dict[str, Any] = {"split": split}
    if task_id is not None:
        options["task_id"] = task_id
    episodes = [_Episode(make_env(env, **config), seed, dict(options)) for seed in seeds]
    index = {id(episode): i for i, episode in enumerate(episodes)}

    def finish(episode: _Episode) -> None:
        # Built (and the env closed) as soon as the episode ends, so on_episode sees it without waiting for the
        # slowest episode of the batch.
        episode.result = _result(spec, env, episode)
        if on_episode is not None:
            on_episode(episode.result)

    while True:
        live = [episode for episode in episodes if episode.env.agents]
        if not live:
            break
        if spec.sequential:
            joint = _act_sequentially(spec, env, policy, settings, live)
        else:
            joint = _act_in_parallel(spec, env, policy, settings, live)
        for episode, actions in zip(live, joint, strict=True):
            episode.step(actions)
            if on_turn is not None:
                on_turn(index[id(episode)], episode.turn)
            if not episode.env.agents:
                finish(episode)
    for episode in episodes:
        if episode.result is None:  # an env with no agent at reset never stepped
            finish(episode)
    return [episode.result for episode in episodes if episode.result is not None]


def _request(spec: Baseline, task: str, episode: _Episode, agent: str, earlier: Mapping[str, str] | None = None
             ) -> ActionRequest:
    observation = episode.observations[agent]
    rule = spec.rules(episode.turn + 1, episode.env.max_turns)
    if spec.sequential:
        text = prompts.sequential_observation(observation, earlier or {})
    elif rule:
        text = prompts.frame_observation(observation, rule)
    else:
        text = observation  # the plain loop: the env's own prompt, nothing added
    return ActionRequest(agent=agent, observation=text, system=prompts.system_prompt(task, agent))


def _act_in_parallel(spec: Baseline, task: str, policy: Policy, settings: GenerationSettings,
                     live: list[_Episode]) -> list[dict[str, str]]:
    keys = [(episode, agent) for episode in live for agent in episode.env.agents]
    texts = policy.act([_request(spec, task, episode, agent) for episode, agent in keys], settings)
    joint: dict[int, dict[str, str]] = {id(episode): {} for episode in live}
    for (episode, agent), text in zip(keys, texts, strict=True):
        joint[id(episode)][agent] = spec.finish(text, episode.turn + 1, episode.env.max_turns)
    return [joint[id(episode)] for episode in live]


def _act_sequentially(spec: Baseline, task: str, policy: Policy, settings: GenerationSettings,
                      live: list[_Episode]) -> list[dict[str, str]]:
    joint: list[dict[str, str]] = [{} for _ in live]
    for position in range(max(len(episode.env.agents) for episode in live)):
        keys = [(index, episode.env.agents[position]) for index, episode in enumerate(live)
                if position < len(episode.env.agents)]
        requests = [
            _request(spec, task, live[index], agent, {a: draft_part(t) for a, t in joint[index].items()})
            for index, agent in keys
        ]
        for (index, agent), text in zip(keys, policy.act(requests, settings), strict=True):
            joint[index][agent] = spec.finish(text, live[index].turn + 1, live[index].env.max_turns)
    return joint


def _result(spec: Baseline, task: str, episode: _Episode) -> EpisodeResult:
    components = dict(episode.last_info.get("reward_components", {}))
    state = episode.env.state()
    episode.env.close()
    return EpisodeResult(
        baseline=spec.name,
        env=task,
        task_id=episode.task_id,
        seed=episode.seed,
        agents=episode.agents,
        episode_return=episode.episode_return,
        turns=episode.turn,
        end_reason=episode.last_info.get("end_reason"),
        quality=float(components.get("quality", 0.0)),
        consistency=None if components.get("consistency") is None else float(components["consistency"]),
        reward_components=components,
        actions={agent: tuple(actions) for agent, actions in episode.actions.items()},
        drafts=dict(state["drafts"]),
        wall_s=episode.end - episode.start,
    )
