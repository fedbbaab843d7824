"""The ParallelEnv every task in the suite is built on: a Dec-POMDP of agents writing text together.

A turn: every live agent sends one action string; the env parses each (:mod:`~llm_marl_envs.core.protocol`),
updates drafts and delivers messages (:mod:`~llm_marl_envs.core.channel`), asks the task to assess the team's drafts
(quality, consistency, per-agent feedback), pays the joint reward (:mod:`~llm_marl_envs.core.rewards`), decides who is
finished (:mod:`~llm_marl_envs.core.termination`) and renders each agent's next observation
(:mod:`~llm_marl_envs.core.observation`). Tasks subclass :class:`CollaborativeTextEnv` and implement
:meth:`~CollaborativeTextEnv.assess` (and optionally :meth:`~CollaborativeTextEnv.normalize_draft`).

Bad input is rejected before anything changes: a step with missing or extra agents, an action for a finished agent or
a non-string action raises ``ValueError``/``TypeError`` naming the agent, and the env is exactly as it was.

Copies. An env remembers the arguments it was built with (as PettingZoo's ``EzPickle`` does) and keeps its episode in
the attributes named by ``EPISODE_ATTRIBUTES``. ``pickle`` and ``copy.deepcopy`` rebuild the env from its arguments
(process-wide resources such as the sandbox executor, the similarity model and the datasets are shared, not copied)
and carry the episode over, so a copy made at any point continues exactly like the original. ``snapshot()`` /
``restore()`` save and reset only the episode, cheaply, in place: the G branches of a group restore one snapshot.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pettingzoo import ParallelEnv

from llm_marl_envs.core import prompts
from llm_marl_envs.core.channel import Channel, Message
from llm_marl_envs.core.config import EnvConfig, check_choice
from llm_marl_envs.core.magrpo_episode import MagrpoEpisodeConfig, magrpo_step, official_episode_config
from llm_marl_envs.core.observation import ObservationParts, render_observation
from llm_marl_envs.core.protocol import ParsedAction, parse_action
from llm_marl_envs.core.rewards import RewardWeights, discarded_words, joint_step_reward, team_score
from llm_marl_envs.core.roles import Role
from llm_marl_envs.core.spaces import (
    SanitizedText,
    UnicodeText,
    sanitize_text,
)
from llm_marl_envs.core.tasks import SPLITS, Task, TaskSource
from llm_marl_envs.core.termination import TurnOutcome, end_of_turn, quorum_size

RESET_OPTION_KEYS: frozenset[str] = frozenset({"task_id", "split"})
"""The keys ``reset(options=...)`` accepts; any other key is rejected with this list."""
PETTINGZOO_PROBE_OPTION = "options"
"""PettingZoo's own conformance tests call ``reset(seed=0, options={"options": 1})`` only to check that ``reset``
takes an ``options`` keyword (``pettingzoo/test/parallel_test.py``); that one key is accepted and ignored."""


@dataclass(frozen=True)
class Assessment:
    """A task's verdict on the team's drafts after one turn."""

    quality: float
    """Task quality in [0, 1]."""
    consistency: float | None
    """Coordination consistency in [0, 1] (counterfactual contribution); ``None`` for a single agent."""
    quality_terms: Mapping[str, float] = field(default_factory=dict)
    """The named terms quality was computed from (reported in infos)."""
    feedback: Mapping[str, str] = field(default_factory=dict)
    """Per-agent feedback text shown in the next observation. Must hold only what that agent may see."""
    magrpo_reward: float | None = None
    """The MAGRPO paper's reward of these drafts (used when ``reward_mode="magrpo"``)."""
    contributions: Mapping[str, float | None] = field(default_factory=dict)
    """Each agent's counterfactual contribution in [0, 1] (``None``: not scored this turn); consistency is their
    mean over the scored agents."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Extra JSON-friendly diagnostics every agent's infos carry: numbers and task-owned text only, never text a
    teammate wrote or a teammate's program printed."""
    private: Mapping[str, Any] = field(default_factory=dict)
    """Privileged diagnostics (full test reports with their messages, counterfactual runs): ``state()`` only."""
    solved: bool = False
    """The task's own success check passed (coding: the team's program passes every visible test): the episode ends
    for everyone (``end_reason="solved"``) in joint mode. Held-out checks still decide quality."""


@dataclass(frozen=True)
class EnvSnapshot:
    """The episode state of one env at one moment (see :meth:`CollaborativeTextEnv.snapshot`)."""

    env_type: type
    state: Mapping[str, Any]


class CollaborativeTextEnv(ParallelEnv, abc.ABC):
    """A team of LLM agents with distinct roles writing one output together (see module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {"name": "collaborative_text_v0", "render_modes": ["human", "ansi"]}
    SYSTEM_PROMPT: ClassVar[str] = prompts.DEFAULT_SYSTEM_PROMPT
    ROLE_HINTS: ClassVar[Mapping[str, str]] = {}
    ROLE_NEW_TOKENS: ClassVar[Mapping[str, int]] = {}
    """New tokens each role's action needs with the default model's tokenizer (``envs/*/prompts.py``); a role not
    listed gets ``DEFAULT_NEW_TOKENS``."""
    DEFAULT_NEW_TOKENS: ClassVar[int] = 128
    ROLE_REPLY_ENDS: ClassVar[Mapping[str, str]] = {}
    """Per role, a regular expression whose first match in a reply marks where the env's use of it ends (``envs/*/
    prompts.py``; :meth:`suggested_reply_end`); a role not listed has none."""
    MAGRPO_APP: ClassVar[str] = ""
    """Which MAGRPO app's official episode defaults apply in ``reward_mode="magrpo"`` (see core/magrpo_episode.py)."""
    DEFAULT_MAX_TURNS: ClassVar[int] = 4
    """The joint mode's turn budget, the study's too: room to write, revise and end early (a team that ends at turn
    ``k`` takes ``k/4`` of the budget, so the completion-time reduction the seeds report, 3.1x, is reachable; a budget
    of 3 would cap it at 3x), and no more turns than a MAGRPO tree can branch over on 2 cores."""
    DEFAULT_END_QUORUM: ClassVar[str] = "all"
    """The joint mode's ``end_quorum`` when the config leaves it ``None`` (``core/termination.py``); each task picks
    the ending its untrained team can reach without losing what training gains. MAGRPO mode always defaults to
    ``"all"`` (the official apps have no early finish by one agent)."""
    concurrent_steps: ClassVar[bool] = False
    """Whether a step mostly waits on I/O (the sandbox), so a rollout runner may step many envs from threads."""
    EPISODE_ATTRIBUTES: ClassVar[tuple[str, ...]] = (
        "task",
        "agents",
        "turn",
        "drafts",
        "done",
        "channel",
        "feedback",
        "score",
        "team_return",
        "message_tokens",
        "longest_reply_tokens",
        "discarded_tokens",
        "invalid_actions",
        "end_reason",
        "last_assessment",
        "_rng",
    )
    """Everything that changes during an episode: what snapshots, copies and pickles carry."""

    def __new__(cls, *args: Any, **kwargs: Any) -> CollaborativeTextEnv:
        # Remember the constructor's arguments (PettingZoo's EzPickle idea) so copies can be rebuilt from them.
        env = super().__new__(cls)
        env._constructor = (args, kwargs)
        return env

    def __init__(self, roles: Sequence[Role], tasks: TaskSource, config: EnvConfig, split: str) -> None:
        """Compose an env from its roles, its task source, its validated config and its default split."""
        check_choice("split", split, SPLITS)
        reward, limits, observation = config.reward, config.limits, config.observation
        max_turns, magrpo_episode = self._resolve_turns(limits.max_turns, reward.reward_mode, reward.magrpo_episode)
        self.config = config
        self.roles: dict[str, Role] = {role.name: role for role in roles}
        self.possible_agents: list[str] = list(self.roles)
        self.agents: list[str] = []
        self.task_source = tasks
        self.max_turns = max_turns
        self.observability = observation.observability
        self.reward_mode = reward.reward_mode
        self.reward_weights: RewardWeights = reward.reward_weights  # type: ignore[assignment]
        self.magrpo_episode = magrpo_episode
        self.default_split = split
        self.max_action_chars = limits.max_action_chars
        self.end_quorum = self._resolve_end_quorum(limits.end_quorum, reward.reward_mode)
        self.quorum = quorum_size(self.end_quorum, len(self.possible_agents))
        self.max_observation_chars = observation.max_observation_chars
        self.reply_prefixes = observation.reply_prefixes
        self.done_offer = observation.done_offer
        self.render_mode = config.render_mode
        # One space object per agent, returned on every call (PettingZoo expects stable spaces).
        self._observation_spaces = {a: UnicodeText(self.max_observation_chars) for a in self.possible_agents}
        self._action_spaces = {a: UnicodeText(self.max_action_chars) for a in self.possible_agents}
        self._rng = np.random.default_rng()
        self.task: Task | None = None

    def _resolve_turns(
        self, max_turns: int | None, reward_mode: str, episode: MagrpoEpisodeConfig | None
    ) -> tuple[int, MagrpoEpisodeConfig | None]:
        """``max_turns`` and the MAGRPO episode config: joint mode defaults to :attr:`DEFAULT_MAX_TURNS`; MAGRPO mode
        to the official app's episode (coding 2 turns, writing 1), whose ``num_turns`` is then the env's
        ``max_turns``."""
        if reward_mode != "magrpo":
            return (self.DEFAULT_MAX_TURNS if max_turns is None else max_turns), None
        if episode is None:
            official = official_episode_config(self.MAGRPO_APP)
            episode = official if max_turns is None else dataclasses.replace(official, num_turns=max_turns)
        elif max_turns is not None and max_turns != episode.num_turns:
            raise ValueError(f"max_turns={max_turns} disagrees with magrpo_episode.num_turns={episode.num_turns}")
        return episode.num_turns, episode

    def _resolve_end_quorum(self, end_quorum: str | None, reward_mode: str) -> str:
        """``end_quorum`` if set, else :meth:`default_end_quorum` in joint mode and ``"all"`` in MAGRPO mode."""
        if end_quorum is not None:
            return end_quorum
        return "all" if reward_mode == "magrpo" else self.default_end_quorum()

    def default_end_quorum(self) -> str:
        """The joint mode's ending when the config names none: :attr:`DEFAULT_END_QUORUM` (a task may choose by its
        own settings; the coding env does, per scheme). Called while the env is built, once ``self.config`` is set."""
        return self.DEFAULT_END_QUORUM

    # ----------------------------------------------------------------------------------------------- task hooks
    @abc.abstractmethod
    def assess(self, drafts: Mapping[str, str]) -> Assessment:
        """Judge the team's current drafts (one per possible agent, finished agents included)."""

    def normalize_draft(self, agent: str, draft: str) -> str:
        """Turn the draft part of an action into the stored draft (e.g. strip a code fence). Identity here.

        ``""`` means the draft part held nothing usable (coding: no code): the previous draft is kept and the action
        is flagged ``no_usable_draft`` in ``infos[agent]["action"]["problems"]`` (an invalid action)."""
        return draft

    # -------------------------------------------------------------------------------------------------- spaces
    def observation_space(self, agent: str) -> UnicodeText:
        """The observation space of ``agent`` (a text space; the same object on every call)."""
        return self._observation_spaces[self._known(agent)]

    def action_space(self, agent: str) -> UnicodeText:
        """The action space of ``agent`` (a text space; the same object on every call)."""
        return self._action_spaces[self._known(agent)]

    # --------------------------------------------------------------------------------------------- PettingZoo
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        """Start an episode. ``options``: ``{"task_id": str}`` picks a task, ``{"split": "train"|"eval"}`` a split.

        The same ``seed`` and ``options`` always give the same task.
        """
        task = self._choose_task(seed, options)
        self.task = task
        self.agents = list(self.possible_agents)
        self.turn = 0
        self.drafts: dict[str, str] = {a: "" for a in self.possible_agents}
        self.done: dict[str, bool] = {a: False for a in self.possible_agents}
        self.channel = Channel()
        self.feedback: dict[str, str] = {a: "" for a in self.possible_agents}
        self.score = 0.0
        self.team_return = 0.0
        self.message_tokens = 0
        self.longest_reply_tokens = 0
        self.discarded_tokens = 0
        self.invalid_actions = 0
        self.end_reason: str | None = None
        self.last_assessment: Assessment | None = None
        observations = {a: self._observe(a) for a in self.agents}
        infos = {a: {"task_id": task.task_id, "split": task.split, "role": a, "turn": 0} for a in self.agents}
        return observations, infos

    def step(
        self, actions: dict[str, str]
    ) -> tuple[dict[str, str], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        """Apply one joint action: ``{agent: action string}`` for exactly the agents in ``env.agents``."""
        sanitized = self._validate(actions)
        live = list(self.agents)
        parsed = {a: parse_action(sanitized[a].text, a, live) for a in live}
        before = dict(self.drafts)

        self.turn += 1
        step_tokens = 0
        step_discarded = 0
        resubmitted: dict[str, bool] = {}
        for agent in live:
            action = parsed[agent]
            resubmitted[agent] = False
            if action.draft:
                draft = self.normalize_draft(agent, action.draft)
                # What the draft part held beyond what is kept (core/rewards.py, w_d); messages and markers are
                # already out of action.draft.
                step_discarded += discarded_words(action.draft, draft)
                if draft:
                    # The same part again, from the second turn on: the agent has nothing to change, so it is done.
                    resubmitted[agent] = bool(before[agent]) and draft == before[agent]
                    self.drafts[agent] = draft
                else:  # e.g. prose where code was asked for: the previous draft stays, and the action is flagged
                    action = parsed[agent] = dataclasses.replace(action, problems=(*action.problems, "no_usable_draft"))
            self.done[agent] = self.done[agent] or action.done or resubmitted[agent]
            for outgoing in action.messages:
                message = Message(agent, outgoing.recipients, outgoing.text, self.turn)
                self.channel.post(message)
                step_tokens += message.num_tokens
        step_invalid = sum(1 for a in live if parsed[a].problems or sanitized[a].truncated)
        # The agents reply in parallel: the turn lasts as long as its longest reply (core/rewards.py, w_r).
        step_longest = max(len(sanitized[a].text.split()) for a in live)
        self.longest_reply_tokens += step_longest
        self.discarded_tokens += step_discarded
        self.message_tokens += step_tokens
        self.invalid_actions += step_invalid

        assessment = self.assess(dict(self.drafts))
        self.last_assessment = assessment
        self.feedback = {a: assessment.feedback.get(a, "") for a in self.possible_agents}
        previous_score = self.score
        self.score = team_score(assessment.quality, assessment.consistency, self.reward_weights)
        changed = any(self.drafts[a] != before[a] for a in live)
        # MAGRPO mode keeps the official episode: only its own endings (and the env's agreement endings) apply there.
        solved = assessment.solved and self.reward_mode == "joint"
        outcome = end_of_turn(self.turn, self.max_turns, live, self.done, changed, solved, self.quorum)
        magrpo = None
        if self.reward_mode == "magrpo":
            if assessment.magrpo_reward is None:
                raise RuntimeError(f"{type(self).__name__} has no MAGRPO reward for this configuration")
            env_ends = outcome.reason in ("all_done", "quorum_done", "converged")
            magrpo = magrpo_step(float(assessment.magrpo_reward), self.turn, self.magrpo_episode, env_ends=env_ends)
            reward = magrpo.reward
            if magrpo.early_terminated:  # the official trainer stops this branch: everyone terminates
                outcome = TurnOutcome(frozenset(live), frozenset(), "magrpo_threshold")
        else:
            reward = joint_step_reward(self.score, previous_score, step_tokens, step_invalid, self.reward_weights,
                                       step_longest, step_discarded)
        self.team_return += reward
        self.end_reason = outcome.reason

        observations = {a: self._observe(a) for a in live}
        rewards = {a: reward for a in live}
        terminations = {a: a in outcome.terminated for a in live}
        truncations = {a: a in outcome.truncated for a in live}
        components = {
            "quality": assessment.quality,
            "consistency": assessment.consistency,
            "contributions": dict(assessment.contributions),
            "turns": self.turn,
            "message_tokens": self.message_tokens,
            "invalid_actions": self.invalid_actions,
            "step_message_tokens": step_tokens,
            "step_invalid_actions": step_invalid,
            "longest_reply_tokens": self.longest_reply_tokens,
            "step_longest_reply_tokens": step_longest,
            "discarded_tokens": self.discarded_tokens,
            "step_discarded_tokens": step_discarded,
        }
        infos = {a: self._step_info(a, parsed[a], sanitized[a], components, assessment, reward) for a in live}
        for agent in live:
            infos[agent]["action"]["resubmitted"] = resubmitted[agent]
        if magrpo is not None:
            for info in infos.values():
                info["magrpo_processed_reward"] = magrpo.processed
                info["magrpo_settled"] = magrpo.settled
        self.agents = [a for a in live if not (terminations[a] or truncations[a])]
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def system_prompt(self, agent: str) -> str:
        """The system prompt of ``agent``: the env's, plus the role's hint (``envs/*/prompts.py``)."""
        return prompts.system_prompt(self.SYSTEM_PROMPT, self.ROLE_HINTS, self._known(agent))

    def suggested_max_new_tokens(self, agents: Sequence[str] | None = None) -> int:
        """The generation budget that lets every one of ``agents`` (default: the team) write its part: the most any
        of their roles needs (one batched ``generate`` call runs as long as its longest row anyway)."""
        agents = self.possible_agents if agents is None else [self._known(a) for a in agents]
        return max(self.ROLE_NEW_TOKENS.get(agent, self.DEFAULT_NEW_TOKENS) for agent in agents)

    def suggested_reply_end(self, agent: str) -> str | None:
        """A regular expression whose first match in ``agent``'s reply (the env's reply prefix included) marks the end
        of what the env makes of it as the agent's part: a policy may stop decoding there (``LocalModelPolicy``'s and
        ``TeamModel``'s ``reply_ends``, the study's ``--stop-at-reply-end``). ``None``: the whole reply counts (a
        writer's draft is its reply). In the coding env a code role's reply ends where its first code block closes;
        the text after it is dropped from the draft, but a ``<message>`` or ``<done/>`` written there would still
        count, so stopping there is a choice of the policy's, not the env's (off by default)."""
        return self.ROLE_REPLY_ENDS.get(self._known(agent))

    def drafts_shown_to(self, agent: str) -> list[str]:
        """The teammates whose current drafts ``agent`` reads under ``observability="team"``: every teammate here; a
        task may keep some drafts private whatever the setting (the coding env's propose-and-verify candidates)."""
        return [a for a in self.possible_agents if a != agent]

    def drafts_read_by_role(self, agent: str) -> list[str]:
        """The teammates whose drafts ``agent`` reads under every ``observability`` because reading them is its role's
        work (the coding env's verifier reads every candidate, its fixer the author's code); none here."""
        self._known(agent)
        return []

    def reply_prefix(self, agent: str) -> str:
        """The opening words of ``agent``'s reply that :meth:`chat_messages` starts for the model (``""``: none).

        A task may start a reply where a small model cannot find the form on its own (the coding env opens the code
        fence and the function's ``def``). The env reads any reply whole, with or without the prefix."""
        return ""

    def chat_messages(self, agent: str, observation: str | None = None) -> list[dict[str, str]]:
        """``agent``'s current observation (or ``observation``, e.g. framed by a baseline) as chat messages:
        ``[{"role": "system", ...}, {"role": "user", ...}]``, the format chat templates take.

        Where the env starts the reply (:meth:`reply_prefix`, on unless ``reply_prefixes=False``) a third message
        ``{"role": "assistant", "content": PREFIX}`` follows: a policy renders it as the start of the model's turn
        (``apply_chat_template(..., continue_final_message=True)``) and returns ``PREFIX`` + the continuation as
        the action. The observation itself (what ``reset``/``step`` return) never holds the prefix."""
        self._require_reset()
        agent = self._known(agent)
        user = self._observe(agent) if observation is None else observation
        messages = prompts.chat(self.system_prompt(agent), user)
        prefix = self.reply_prefix(agent) if self.reply_prefixes else ""
        if prefix:
            messages.append({"role": "assistant", "content": prefix})
        return messages

    def state(self) -> dict[str, Any]:
        """The full global state for centralized training: task, every draft, every message, turn, score."""
        self._require_reset()
        return {
            "config": self.config.to_dict(),
            "task": self.task.to_dict(),
            "turn": self.turn,
            "max_turns": self.max_turns,
            "end_quorum": self.end_quorum,
            "magrpo_episode": None if self.magrpo_episode is None else dataclasses.asdict(self.magrpo_episode),
            "agents": list(self.agents),
            "drafts": dict(self.drafts),
            "done": dict(self.done),
            "messages": self.channel.to_list(),
            "feedback": dict(self.feedback),
            "score": self.score,
            "team_return": self.team_return,
            "end_reason": self.end_reason,
            "assessment": None if self.last_assessment is None else dict(self.last_assessment.private),
        }

    def snapshot(self) -> EnvSnapshot:
        """The current episode state (a deep copy: later steps do not change it). Cheap: drafts, messages, scores."""
        return EnvSnapshot(type(self), copy.deepcopy(self._episode_state()))

    def restore(self, snapshot: EnvSnapshot) -> None:
        """Put the env back to ``snapshot``'s episode state; one snapshot can be restored any number of times."""
        if not isinstance(snapshot, EnvSnapshot):
            raise TypeError(f"snapshot: expected EnvSnapshot, got {type(snapshot).__name__}")
        if snapshot.env_type is not type(self):
            raise ValueError(f"snapshot of a {snapshot.env_type.__name__} cannot restore a {type(self).__name__}")
        self._set_episode_state(copy.deepcopy(snapshot.state))

    def __getstate__(self) -> dict[str, Any]:
        return {"constructor": self._constructor, "episode": self._episode_state()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        args, kwargs = state["constructor"]
        self._constructor = (args, kwargs)
        self.__init__(*args, **kwargs)
        self._set_episode_state(state["episode"])

    def __deepcopy__(self, memo: dict[int, Any]) -> CollaborativeTextEnv:
        # Rebuilt from the same arguments: shared resources (executor instances, models) are shared, not copied.
        args, kwargs = self._constructor
        clone = type(self)(*args, **kwargs)
        clone._set_episode_state(copy.deepcopy(self._episode_state(), memo))
        return clone

    def _episode_state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.EPISODE_ATTRIBUTES if hasattr(self, name)}

    def _set_episode_state(self, state: Mapping[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def render(self) -> str | None:
        """``"ansi"``: return the global state as text; ``"human"``: print it."""
        if self.render_mode is None:
            return None
        text = json.dumps(self.state(), indent=2, ensure_ascii=False, default=str)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        """Release resources (nothing to release in the base env)."""

    # ---------------------------------------------------------------------------------------------- internals
    def _choose_task(self, seed: int | None, options: dict[str, Any] | None) -> Task:
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise TypeError(f"seed: expected an int >= 0 or None, got {type(seed).__name__} {seed!r}")
            if seed < 0:
                raise ValueError(f"seed: expected an int >= 0 or None, got {int(seed)}")
        options = {} if options is None else options
        if not isinstance(options, Mapping):
            raise TypeError(f"options: expected a dict or None, got {type(options).__name__}")
        unknown = set(options) - RESET_OPTION_KEYS - {PETTINGZOO_PROBE_OPTION}
        if unknown:
            raise ValueError(
                f"options: unknown keys {sorted(map(str, unknown))}; accepted keys: {sorted(RESET_OPTION_KEYS)}"
            )
        split = options.get("split", self.default_split)
        check_choice("options['split']", split, SPLITS)
        task_id = options.get("task_id")
        task = self.task_source.get(task_id) if task_id is not None else None
        if seed is not None:  # only once every argument is known to be good: a bad reset changes nothing
            self._rng = np.random.default_rng(int(seed))
        return task if task is not None else self.task_source.sample(self._rng, split)

    def _validate(self, actions: dict[str, str]) -> dict[str, SanitizedText]:
        self._require_reset()
        if not self.agents:
            raise RuntimeError("the episode is over (no live agents); call reset() to start a new one")
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions: expected a dict {{agent: str}}, got {type(actions).__name__}")
        for agent in actions:
            if agent not in self.agents:
                if agent in self.roles:
                    raise ValueError(f"agent {agent!r} is finished and must not act; live agents: {self.agents}")
                raise ValueError(f"unknown agent {agent!r}; live agents: {self.agents}")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"missing actions for agents {missing}; every live agent must act each step")
        sanitized = {}
        for agent in self.agents:
            if not isinstance(actions[agent], str):
                raise TypeError(f"action of agent {agent!r}: expected str, got {type(actions[agent]).__name__}")
            sanitized[agent] = sanitize_text(actions[agent], self.max_action_chars)
        return sanitized

    def _observe(self, agent: str) -> str:
        role = self.roles[agent]
        teammates = [a for a in self.possible_agents if a != agent]
        teammate_drafts = None
        if self.observability == "team":
            teammate_drafts = {a: self.drafts[a] for a in self.drafts_shown_to(agent)}
        parts = ObservationParts(
            agent=agent,
            instruction=role.instruction_for(self.task),
            task_view=role.view(self.task),
            turn=self.turn,
            max_turns=self.max_turns,
            teammates=teammates,
            own_draft=self.drafts[agent],
            feedback=self.feedback[agent],
            inbox=self.channel.inbox(agent),
            teammate_drafts=teammate_drafts,
            done_offer=self.done_offer,
        )
        text = render_observation(parts, self.max_observation_chars)
        return sanitize_text(text, self.max_observation_chars).text

    def _step_info(
        self,
        agent: str,
        parsed: ParsedAction,
        sanitized: SanitizedText,
        components: dict[str, Any],
        assessment: Assessment,
        reward: float,
    ) -> dict[str, Any]:
        return {
            "task_id": self.task.task_id,
            "role": agent,
            "turn": self.turn,
            "score": self.score,
            "team_return": self.team_return,
            "reward_mode": self.reward_mode,
            "magrpo_reward": assessment.magrpo_reward,
            "reward_components": dict(components),
            "quality_terms": dict(assessment.quality_terms),
            "details": dict(assessment.details),
            "action": {
                "problems": list(parsed.problems),
                "done": parsed.done,
                "messages_sent": len(parsed.messages),
                "truncated": sanitized.truncated,
                "original_length": sanitized.original_length,
                "invalid_unicode_replaced": sanitized.invalid_unicode_replaced,
            },
            "end_reason": self.end_reason,
            "reward": reward,
        }

    def _known(self, agent: str) -> str:
        if agent not in self.roles:
            raise ValueError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        return agent

    def _require_reset(self) -> None:
        if self.task is None:
            raise RuntimeError("call reset() before step() or state()")
