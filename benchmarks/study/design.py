"""What a study runs: conditions, presets, and the plan of episodes (one key per planned episode).

The seeds' design (6,000 episodes of collaborative writing and coding, teams of 2-4 agents with distinct roles, three
conditions on the same tasks and compute) is the ``full`` preset. A *cell* is one (env, team size, condition); every
cell gets the same number of episodes (the remainder of ``episodes`` over the cells goes one each to the first cells),
and episode ``j`` of a cell plays task ``tasks[j % K]`` with seed ``seed + j // K`` — so the same (env, size, task,
seed) is played under every condition, which is what lets the report pair episodes across conditions.

The single-agent condition is listed under each team size it is compared with: its episodes there are independent
replicates (one agent whatever the size), so every comparison has the same number of episodes on both sides.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_marl_envs.core.config import check_choice, check_int, check_positive
from llm_marl_envs.registry import ENV_NAMES, canonical_name, make_env


@dataclass(frozen=True)
class Condition:
    """One arm of the study: which collaboration schedule the team plays under and whether its policy is trained."""

    name: str
    baseline: str
    """The schedule, a name of :func:`baselines.collaboration.get_baseline` (``plain``: the env's own prompts)."""
    trained: bool
    description: str

    @property
    def single_agent(self) -> bool:
        """Whether the condition plays one agent whatever the cell's team size."""
        return self.baseline == "single_agent"


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("trained", "plain", True,
                  "the CTDE-trained team: one LoRA adapter per role, each acting on its own observation"),
        Condition("single", "single_agent", False, "one untrained agent does the whole task alone"),
        Condition("untrained", "prompt_collaboration", False,
                  "the same team size without learning: multi-turn dialogue under fixed rules"),
        Condition("base", "plain", False,
                  "the trained team's own prompts and schedule with the adapters off (the untrained base model): "
                  "what training alone changed"),
        Condition("naive_concatenation", "naive_concatenation", False,
                  "untrained agents write their parts alone; the parts are concatenated"),
        Condition("sequential_pipeline", "sequential_pipeline", False,
                  "untrained agents in order, each seeing the previous agents' outputs"),
        Condition("one_round_discussion", "one_round_discussion", False,
                  "untrained agents draft, see the teammates' drafts once, revise"),
    )
}
"""Every condition a study can run. The seeds' three are ``trained``, ``single`` and ``untrained``; ``base`` is the
ablation that isolates training (``untrained`` differs from ``trained`` in prompts and visibility as well)."""

SEEDS_CONDITIONS: tuple[str, ...] = ("trained", "single", "untrained")


@dataclass(frozen=True)
class TrainingPlan:
    """How ``--train`` trains the team of the ``trained`` condition (one MAGRPO run per env and team size): with the
    recipe of the shipped team of that env and size when there is one (``recipes`` True, ``recipes/<env>-<size>.yaml``
    in the repository, ``recipe.yaml`` beside the team in the package), else with these settings — the recipes'
    own: multi-turn trees as the study plays them, so that finishing early (the turn cost) is learnable."""

    recipes: bool = True
    """Use the shipped teams' recipes where they exist (the smoke preset does not: it trains for 2 steps)."""
    steps_override: int | None = None
    """``--train-steps``: the steps of every team, recipe or not."""
    steps: int = 50
    num_generations: int = 4
    envs_per_step: int = 1
    max_completion_length: int | None = None
    """New tokens per completion; ``None``: the env's budget for the team's roles."""
    max_turns: int | None = None
    """Turns of a training episode; ``None``: the design's ``max_turns`` (what the study evaluates)."""
    learning_rate: float = 5e-4
    lora_r: int = 8
    temperature: float = 1.0
    """Sampling temperature of training (exploration; the study samples at the design's temperature)."""
    dtype: str = "bfloat16"
    """The frozen base's dtype (bfloat16 is about twice as fast as float32 on CPUs; the adapters stay float32)."""

    def __post_init__(self) -> None:
        for name in ("steps", "envs_per_step", "lora_r"):
            check_int(name, getattr(self, name), 1)
        for name in ("max_completion_length", "max_turns", "steps_override"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        check_int("num_generations", self.num_generations, 2)
        check_positive("learning_rate", self.learning_rate)
        check_positive("temperature", self.temperature)
        check_choice("dtype", self.dtype, ("auto", "float32", "bfloat16"))


@dataclass(frozen=True)
class StudyDesign:
    """The factors of a study; :meth:`plan` lists its episodes. Validated when built (clear errors, nothing runs)."""

    envs: tuple[str, ...] = ENV_NAMES
    team_sizes: tuple[int, ...] = (2, 3, 4)
    conditions: tuple[str, ...] = SEEDS_CONDITIONS
    episodes: int = 6000
    """Planned episodes in all, spread evenly over the cells."""
    tasks: int | None = None
    """Tasks per env, drawn once with ``seed`` from the split (``None``: every task of the split)."""
    split: str = "eval"
    """Held-out tasks by default: a trained team is evaluated on tasks it did not train on."""
    seed: int = 0
    max_turns: int = 3
    """Turn budget of the multi-turn conditions (``trained``, ``base`` and ``untrained``); the others fix their own."""
    max_new_tokens: int | None = None
    """New tokens per action; ``None``: each env's budget for its roles (``env.suggested_max_new_tokens()``)."""
    temperature: float = 0.7
    top_p: float = 0.95
    similarity: str = "auto"
    """Similarity backend of the envs (``auto``: MiniLM, the seeds' measure of consistency, when installed)."""
    env_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Extra env arguments per env name (e.g. ``{"coding": {"dataset": "humaneval"}}``)."""
    writing_success_quality: float = 0.5
    """A writing episode succeeds when its quality reaches this (the seeds do not define writing success; coding
    succeeds when every held-out unit test passes)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "envs", tuple(canonical_name(e) for e in self.envs))
        object.__setattr__(self, "team_sizes", tuple(self.team_sizes))
        object.__setattr__(self, "conditions", tuple(self.conditions))
        if not self.envs or not self.team_sizes or not self.conditions:
            raise ValueError("a study needs at least one env, one team size and one condition")
        for env in self.envs:
            check_choice("env", env, ENV_NAMES)
        for condition in self.conditions:
            check_choice("condition", condition, tuple(CONDITIONS))
        for size in self.team_sizes:
            check_int("team size", size, 2, 4)  # the single agent is a condition, not a team size
        for name, values in (("envs", self.envs), ("team sizes", self.team_sizes), ("conditions", self.conditions)):
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: listed twice in {list(values)}")
        check_int("episodes", self.episodes, len(self.cells()))
        if self.tasks is not None:
            check_int("tasks", self.tasks, 1)
        check_choice("split", self.split, ("train", "eval"))
        check_int("seed", self.seed, 0)
        check_int("max_turns", self.max_turns, 1)
        if self.max_new_tokens is not None:
            check_int("max_new_tokens", self.max_new_tokens, 1)
        check_positive("top_p", self.top_p)
        if self.temperature < 0:
            raise ValueError(f"temperature: expected >= 0, got {self.temperature}")
        unknown = sorted(set(self.env_kwargs) - set(ENV_NAMES))
        if unknown:
            raise ValueError(f"env_kwargs: unknown envs {unknown}; known: {list(ENV_NAMES)}")
        object.__setattr__(self, "env_kwargs", {k: dict(v) for k, v in self.env_kwargs.items()})

    # ---------------------------------------------------------------------------------------------------- the plan
    def cells(self) -> list[tuple[str, int, str]]:
        """Every (env, team size, condition), in plan order."""
        return [(e, s, c) for e in self.envs for s in self.team_sizes for c in self.conditions]

    def task_ids(self, env: str) -> list[str]:
        """The tasks of ``env`` the study plays: ``tasks`` of the split drawn with ``seed`` (all when ``None``)."""
        ids = make_env(env, num_agents=1, similarity="tfidf", **self.env_kwargs.get(env, {})).task_source.ids(
            self.split
        )
        if self.tasks is None:
            return ids
        if self.tasks > len(ids):
            raise ValueError(f"tasks: {env} has {len(ids)} tasks in split {self.split!r}, asked for {self.tasks}")
        order = np.random.default_rng([self.seed, len(ids)]).permutation(len(ids))
        return [ids[i] for i in sorted(order[: self.tasks])]

    def plan(self) -> list[PlannedEpisode]:
        """Every planned episode, in plan order (keys are unique)."""
        cells = self.cells()
        base, extra = divmod(self.episodes, len(cells))
        tasks = {env: self.task_ids(env) for env in self.envs}
        planned = []
        for index, (env, size, condition) in enumerate(cells):
            ids = tasks[env]
            for j in range(base + (index < extra)):
                task, seed = ids[j % len(ids)], self.seed + j // len(ids)
                planned.append(PlannedEpisode(
                    key=f"{condition}/{env}/{size}/{task}/{seed}",
                    condition=condition,
                    env=env,
                    team_size=size,
                    num_agents=1 if CONDITIONS[condition].single_agent else size,
                    task=task,
                    seed=seed,
                ))
        return planned

    def env_kwargs_for(self, env: str, condition: str, team_size: int) -> dict[str, Any]:
        """The env arguments an episode of this cell is built with (the condition's baseline sets team size,
        turns and observability)."""
        from baselines.collaboration import get_baseline

        spec = get_baseline(CONDITIONS[condition].baseline)
        return {"similarity": self.similarity, **self.env_kwargs.get(env, {}),
                **spec.env_kwargs(team_size, self.max_turns)}

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON), for the config hash and ``study.json``."""
        data = dataclasses.asdict(self)
        for name in ("envs", "team_sizes", "conditions"):
            data[name] = list(data[name])
        return data


@dataclass(frozen=True)
class PlannedEpisode:
    """One episode of the plan; ``key`` identifies it in the log (``condition/env/size/task/seed``)."""

    key: str
    condition: str
    env: str
    team_size: int
    num_agents: int
    task: str
    seed: int


PRESETS: dict[str, dict[str, Any]] = {
    "full": {
        "design": {},
        "training": {},
    },
    "main": {
        # The main job (scripts/study.sh): the shipped teams against the untrained team, one agent and the same team
        # with its adapters off, on held-out tasks, 2 turns as the teams were trained; 6 pairs per env in about
        # 5 minutes on 2 CPU cores.
        "design": {"team_sizes": (2,), "conditions": (*SEEDS_CONDITIONS, "base"), "episodes": 48, "tasks": 6,
                   "max_turns": 2},
        "training": {},
        "teams": "builtin",
    },
    "results": {
        # The README's results table: held-out tasks of each env, 40 pairs per env and condition at size 2.
        "design": {"team_sizes": (2,), "conditions": (*SEEDS_CONDITIONS, "base"), "episodes": 320, "max_turns": 2},
        "training": {},
        "teams": "builtin",
    },
    "smoke": {
        # Small enough for 2 CPU cores in minutes with the default model: the machinery end to end (training,
        # three conditions, report), not a result.
        "design": {"team_sizes": (2,), "episodes": 12, "tasks": 2, "max_turns": 2, "max_new_tokens": 48},
        "training": {"recipes": False, "steps": 2, "num_generations": 2, "envs_per_step": 1,
                     "max_completion_length": 32, "learning_rate": 1e-3},
        "teams": "train",
    },
}
"""Named designs: ``full`` is the seeds' 6,000-episode design; ``main`` the main job (shipped teams, minutes);
``results`` the README's results table; ``smoke`` checks the machinery quickly. ``teams``: where the trained
condition's teams come from when neither ``--adapters`` nor ``--train`` says (``builtin``: the shipped teams;
``train``: train them first)."""


def config_hash(parts: Mapping[str, Any]) -> str:
    """A short stable hash of what decides the episodes' outcomes (design, policy, training); the log's rows carry
    it so a re-run with other settings cannot resume into the wrong log."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cells_needing_teams(design: StudyDesign) -> list[tuple[str, int]]:
    """(env, team size) of every trained team the design needs."""
    return [(env, size) for env in design.envs for size in design.team_sizes
            if any(CONDITIONS[c].trained for c in design.conditions)]

