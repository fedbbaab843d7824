"""What a study runs: conditions, presets, and the plan of episodes (one key per planned episode).

The seeds' design (6,000 episodes of collaborative writing and coding, teams of 2-4 agents with distinct roles, three
conditions on the same tasks and compute) is the ``full`` preset. A *cell* is one (env, team size, condition); by
default every cell gets the same number of episodes (the remainder of ``episodes`` over the cells goes one each to
the first cells), or ``cell_episodes`` fixes them per team size; episode ``j`` of a cell plays task ``tasks[j % K]``
with seed ``seed + j // K`` — so the same (env, size, task, seed) is played under every condition, which is what
lets the report pair episodes across conditions.

Same footing: every multi-turn condition (``trained``, ``base``, ``untrained`` and the one agent of ``single`` and
``single_best_of_n``) plays the same turn budget (``max_turns``, 4 by default) with the env's feedback and endings (a
team or an agent may end before the budget). ``single_oneshot`` is MAGRPO's one-shot single agent (one turn), kept as
a named baseline. ``single_best_of_n`` is ``single`` sampling as many candidates a turn as the cell's team has agents,
of which it sends the one passing the most visible tests (:mod:`llm_marl_envs.envs.coding.selection`): about the
team's completion tokens, so a team that only samples more is not credited with coordinating. It needs visible tests,
so it plays the coding env only (its writing cells are left out of the plan).

The single-agent conditions are listed under each team size they are compared with: their episodes there are
independent replicates (one agent whatever the size), so every comparison has the same number of episodes on both
sides.

A team size with no trained team (``missing_teams``: e.g. sizes 3 and 4 while only 2-agent teams ship) plays every
condition but ``trained``: those cells are left out of the plan, and the run and the report say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_marl_benchmarks.env_probe import read_only_env
from llm_marl_envs.core.config import check_choice, check_int, check_positive
from llm_marl_envs.registry import ENV_NAMES, canonical_name


@dataclass(frozen=True)
class Condition:
    """One arm of the study: which collaboration schedule the team plays under and whether its policy is trained."""

    name: str
    baseline: str
    """The schedule, a name of :func:`llm_marl_baselines.collaboration.get_baseline` (``plain``: the env's own
    prompts)."""
    trained: bool
    description: str
    best_of_n: bool = False
    """Whether its agent samples as many candidates a turn as the cell's team has agents and sends the one passing the
    most visible tests (the study's execution does the sampling and the choice)."""
    envs: tuple[str, ...] | None = None
    """The envs it can play (``None``: every env); its cells in other envs are left out of the plan."""

    @property
    def single_agent(self) -> bool:
        """Whether the condition plays one agent whatever the cell's team size."""
        from llm_marl_baselines.collaboration import get_baseline

        return get_baseline(self.baseline).single_agent

    def candidates(self, team_size: int) -> int:
        """Candidates its agents sample a turn in a cell of ``team_size``: the team's size for a best-of-n condition
        (its completion tokens then match the team's), else 1."""
        return team_size if self.best_of_n else 1

    def plays(self, env: str) -> bool:
        """Whether the condition has cells in ``env``."""
        return self.envs is None or env in self.envs


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("trained", "plain", True,
                  "the CTDE-trained team: one LoRA adapter per role, each acting on its own observation"),
        Condition("single", "single_agent_multiturn", False,
                  "one untrained agent does the whole task alone, with the teams' turn budget, feedback and endings "
                  "(it may refine its answer and end early)"),
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
        Condition("single_oneshot", "single_agent", False,
                  "MAGRPO's single-agent baseline: one untrained agent answers the whole task in one turn"),
        Condition("single_best_of_n", "single_agent_multiturn", False,
                  "single (same turns, feedback and endings) sampling as many candidates a turn as the team has "
                  "agents; it sends the one passing the most visible tests (ties: the first): the team's compute, "
                  "no coordination", best_of_n=True, envs=("coding",)),
    )
}
"""Every condition a study can run. The seeds' three are ``trained``, ``single`` and ``untrained``; ``base`` is the
ablation that isolates training (``untrained`` differs from ``trained`` in prompts and visibility as well);
``single_oneshot`` is the one-turn single agent MAGRPO compares with; ``single_best_of_n`` the one agent with the
team's sampling budget (coding only)."""

SEEDS_CONDITIONS: tuple[str, ...] = ("trained", "single", "untrained")


@dataclass(frozen=True)
class TrainingPlan:
    """How ``--train`` trains the team of the ``trained`` condition (one MAGRPO run per env and team size): with the
    recipe of the shipped team of that env and size when there is one (``recipes`` True, ``recipes/<env>-<size>.yaml``
    in the repository, ``recipe.yaml`` beside the team in the package), else with these settings — the recipes'
    own: multi-turn trees as the study plays them, so that finishing early (the turn cost) is learnable."""

    recipes: bool = True
    """Use the shipped teams' recipes where they exist (the smoke preset does not: it trains for 1 step)."""
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
    dtype: str = "auto"
    """The frozen base's dtype for teams trained without a recipe (the recipes name theirs): ``auto`` is the trainer's
    choice, float32 on a CPU. bfloat16 is about twice as fast on CPUs with native bf16 (AVX512-BF16, AMX) but about
    50x slower on CPUs without it (an AMD EPYC without AVX-512: 235 ms vs 4.5 ms a matmul), which would stretch the
    smoke preset from minutes to an hour. The adapters stay float32."""

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
    """Planned episodes in all, spread evenly over the cells (unless ``cell_episodes`` says per team size)."""
    cell_episodes: Mapping[int, int] | None = None
    """Episodes of every cell of a team size, by size (``{2: 40, 3: 24}``: 40 pairs per condition at size 2...);
    ``None``: ``episodes`` spread evenly. When given, ``episodes`` is their sum (set here, not by the caller)."""
    tasks: int | None = None
    """Tasks per env, drawn once with ``seed`` from the split (``None``: every task of the split)."""
    split: str = "eval"
    """Held-out tasks by default: a trained team is evaluated on tasks it did not train on."""
    seed: int = 0
    max_turns: int = 4
    """Turn budget of every multi-turn condition (``trained``, ``base``, ``untrained``, ``single``): the same for all,
    with the env's feedback and endings; the fixed schedules (``single_oneshot``, the one-round baselines) keep
    their own."""
    max_new_tokens: int | None = None
    """New tokens per action; ``None``: each env's budget for its roles (``env.suggested_max_new_tokens()``)."""
    role_budgets: bool = False
    """Every reply of every condition played by local weights (the trained team's and the base model's) stops at its
    own role's budget (``env.suggested_max_new_tokens([agent])``, capped at the batch's): a coding verifier's 48
    tokens, not the 160 its batch's coders need. One agent's budget is its own cell's, which the batch's is never
    below, so only teams change, wherever a role's budget is below the batch's (a coding tester or verifier, a
    writing team's shorter parts). False (default): every reply of a batch has the batch's budget, as every committed
    figure ran."""
    stop_at_reply_end: bool | None = None
    """Every reply of every condition played by local weights (the trained team's and the base model's) stops where
    its env stops reading it (``env.suggested_reply_end(agent)``: a coding role's reply where its first code block
    closes; writing's replies have no such end). What precedes the end is what the reply would have begun with, so
    a coder's code is what it would have sent; what goes is the text the env drops, and any ``<message>`` or
    ``<done/>`` written after the block. ``None`` (the default since 2026-12-06): on wherever this process decodes
    (a local model or a team), while a scripted or endpoint policy plays as it is; ``True``: on, and a policy that
    decodes nothing here is refused; ``False``: replies run to a stop token or the budget, as every coding figure
    committed before 2026-12-06 ran. Why on: held out, it cost no measured pass rate and cut the completion tokens of
    the team of 2 by 61 % and one agent's by 39 % (docs/results/coding-propose-verify/reply-end-heldout)."""
    temperature: float = 0.7
    top_p: float = 0.95
    similarity: str = "auto"
    """Similarity backend of the envs (``auto``: MiniLM, the seeds' measure of consistency, when installed)."""
    env_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Extra env arguments per env name (e.g. ``{"coding": {"dataset": "humaneval"}}``)."""
    writing_success_quality: float = 0.5
    """A writing episode succeeds when its quality reaches this (the seeds do not define writing success; coding
    succeeds when every held-out unit test passes)."""
    missing_teams: tuple[tuple[str, int], ...] = ()
    """(env, team size) with no trained team: the ``trained`` condition is left out of those cells (the other
    conditions still play them); the study says so in its first line and in the report."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "envs", tuple(canonical_name(e) for e in self.envs))
        object.__setattr__(self, "team_sizes", tuple(self.team_sizes))
        object.__setattr__(self, "conditions", tuple(self.conditions))
        object.__setattr__(self, "missing_teams", tuple(sorted((canonical_name(e), int(s))
                                                               for e, s in self.missing_teams)))
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
        if not self.cells():
            offside = [c for c in self.conditions if not any(CONDITIONS[c].plays(e) for e in self.envs)]
            if offside:
                raise ValueError("conditions: " + "; ".join(f"{c} plays only {list(CONDITIONS[c].envs or ())}"
                                                            for c in offside)
                                 + f", not {list(self.envs)}: no cell to play; add an env or another condition")
            raise ValueError(f"missing_teams: {list(self.missing_teams)} leaves no cell to play (only 'trained' was "
                             "asked for); add another condition or give the teams")
        if self.cell_episodes is not None:
            counts = {int(size): count for size, count in self.cell_episodes.items()}
            unknown = sorted(set(counts) - set(self.team_sizes))
            missing = sorted(set(self.team_sizes) - set(counts))
            if unknown or missing:
                raise ValueError(f"cell_episodes: expected a count for each team size {list(self.team_sizes)}, got "
                                 f"sizes {sorted(counts)}")
            for size, count in counts.items():
                check_int(f"cell_episodes[{size}]", count, 1)
            object.__setattr__(self, "cell_episodes", dict(sorted(counts.items())))
            object.__setattr__(self, "episodes", sum(counts[size] for _, size, _ in self.cells()))
        check_int("episodes", self.episodes, len(self.cells()))
        if self.tasks is not None:
            check_int("tasks", self.tasks, 1)
        check_choice("split", self.split, ("train", "eval"))
        check_int("seed", self.seed, 0)
        check_int("max_turns", self.max_turns, 1)
        if self.max_new_tokens is not None:
            check_int("max_new_tokens", self.max_new_tokens, 1)
        if not isinstance(self.role_budgets, bool):
            raise TypeError(f"role_budgets: expected True or False, got {self.role_budgets!r}")
        if self.stop_at_reply_end is not None and not isinstance(self.stop_at_reply_end, bool):
            raise TypeError(f"stop_at_reply_end: expected True, False or None, got {self.stop_at_reply_end!r}")
        check_positive("top_p", self.top_p)
        if self.temperature < 0:
            raise ValueError(f"temperature: expected >= 0, got {self.temperature}")
        unknown = sorted(set(self.env_kwargs) - set(ENV_NAMES))
        if unknown:
            raise ValueError(f"env_kwargs: unknown envs {unknown}; known: {list(ENV_NAMES)}")
        object.__setattr__(self, "env_kwargs", {k: dict(v) for k, v in self.env_kwargs.items()})

    # ---------------------------------------------------------------------------------------------------- the plan
    def cells(self) -> list[tuple[str, int, str]]:
        """Every (env, team size, condition) played, in plan order (``trained`` left out where its team is
        missing, a condition left out of the envs it does not play)."""
        missing = set(self.missing_teams)
        return [(e, s, c) for e in self.envs for s in self.team_sizes for c in self.conditions
                if not (CONDITIONS[c].trained and (e, s) in missing) and CONDITIONS[c].plays(e)]

    def skipped_cells(self) -> list[tuple[str, int, str]]:
        """The (env, team size, condition) cells left out: for lack of a trained team, or in an env the condition
        does not play."""
        played = set(self.cells())
        return [(e, s, c) for e in self.envs for s in self.team_sizes for c in self.conditions
                if (e, s, c) not in played]

    def cell_sizes(self) -> dict[tuple[str, int, str], int]:
        """Episodes per cell: ``cell_episodes`` of its team size, or ``episodes`` spread evenly."""
        cells = self.cells()
        if self.cell_episodes is not None:
            return {cell: self.cell_episodes[cell[1]] for cell in cells}
        base, extra = divmod(self.episodes, len(cells))
        return {cell: base + (index < extra) for index, cell in enumerate(cells)}

    def token_budget(self, env: str, condition: str, team_size: int) -> int:
        """New tokens per reply in a cell: ``max_new_tokens``, or the env's budget for the roles the condition plays
        there (``env.suggested_max_new_tokens()``: one agent writing everything gets its solo role's)."""
        if self.max_new_tokens is not None:
            return self.max_new_tokens
        options = self.env_kwargs_for(env, condition, team_size)  # one agent's cells build one agent
        key = (canonical_name(env), json.dumps(options, sort_keys=True, default=repr))
        if key not in _ROLE_BUDGETS:  # asked once per episode; the env is built once per cell's options
            with read_only_env(env, options) as instance:
                _ROLE_BUDGETS[key] = instance.suggested_max_new_tokens()
        return _ROLE_BUDGETS[key]

    def turn_budget(self, condition: str) -> int:
        """Turns an episode of ``condition`` may take: ``max_turns`` for the multi-turn conditions, the fixed
        schedule's own otherwise."""
        from llm_marl_baselines.collaboration import get_baseline

        return get_baseline(CONDITIONS[condition].baseline).env_kwargs(2, self.max_turns)["max_turns"]

    def task_ids(self, env: str) -> list[str]:
        """The tasks of ``env`` the study plays: ``tasks`` of the split drawn with ``seed`` (all when ``None``)."""
        with self.probe_env(env) as instance:
            ids = instance.task_source.ids(self.split)
        if self.tasks is None:
            return ids
        if self.tasks > len(ids):
            raise ValueError(f"tasks: {env} has {len(ids)} tasks in split {self.split!r}, asked for {self.tasks}")
        order = np.random.default_rng([self.seed, len(ids)]).permutation(len(ids))
        return [ids[i] for i in sorted(order[: self.tasks])]

    def plan(self) -> list[PlannedEpisode]:
        """Every planned episode, in plan order (keys are unique)."""
        tasks = {env: self.task_ids(env) for env in self.envs}
        planned = []
        for (env, size, condition), count in self.cell_sizes().items():
            ids = tasks[env]
            for j in range(count):
                task, seed = ids[j % len(ids)], self.seed + j // len(ids)
                planned.append(PlannedEpisode(
                    key=f"{condition}/{env}/{size}/{task}/{seed}",
                    condition=condition,
                    env=env,
                    team_size=size,
                    num_agents=1 if CONDITIONS[condition].single_agent else size,
                    task=task,
                    seed=seed,
                    candidates=CONDITIONS[condition].candidates(size),
                ))
        return planned

    def env_kwargs_for(self, env: str, condition: str, team_size: int) -> dict[str, Any]:
        """The env arguments an episode of this cell is built with (the condition's baseline sets team size,
        turns and observability)."""
        from llm_marl_baselines.collaboration import get_baseline

        spec = get_baseline(CONDITIONS[condition].baseline)
        return {"similarity": self.similarity, **self.env_kwargs.get(env, {}),
                **spec.env_kwargs(team_size, self.max_turns)}

    def probe_env(self, env: str, condition: str | None = None,
                  team_size: int = 1) -> contextlib.AbstractContextManager[Any]:
        """A context manager giving an env of this design built only to be read (its agents, tasks, role budgets,
        ending, turn-1 prompts) and closed after (:func:`~llm_marl_benchmarks.env_probe.read_only_env`: no code
        runs, no model loads, no sandbox is needed). With ``condition`` it is built as that cell plays it; without,
        from the design's options for ``env`` with ``team_size`` agents."""
        options = (self.env_kwargs_for(env, condition, team_size) if condition is not None
                   else {**self.env_kwargs.get(env, {}), "num_agents": team_size})
        return read_only_env(env, options)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON), for the config hash and ``study.json``."""
        data = dataclasses.asdict(self)
        for name in ("envs", "team_sizes", "conditions"):
            data[name] = list(data[name])
        data["missing_teams"] = [list(cell) for cell in self.missing_teams]
        if self.cell_episodes is not None:
            data["cell_episodes"] = {str(size): count for size, count in self.cell_episodes.items()}
        # Absent when off: the config hashes of runs from before these existed (both off then) stay the same, and a
        # run under the default that stops at reply ends (None) cannot resume into one of theirs.
        for switch in ("role_budgets", "stop_at_reply_end"):
            if data[switch] is False:
                del data[switch]
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
    candidates: int = 1
    """Candidates each agent samples a turn (a best-of-n condition: the team's size; else 1)."""

    @property
    def rows(self) -> int:
        """The rows of a turn's generate call this episode takes: a row per agent and candidate."""
        return self.num_agents * self.candidates


PRESETS: dict[str, dict[str, Any]] = {
    "full": {
        "design": {},
        "training": {},
    },
    "main": {
        # The main job (scripts/study.sh): the shipped 2-agent teams against the untrained team and one agent, on 16
        # held-out tasks per env (one pair each), at the study's turn budget; the coding cells add one agent's best of
        # n (16 more episodes): a team that only samples more is no team. 112 episodes in 18 min on 2 CPU cores
        # after set-up in float32 with code replies stopped at their end (no native bf16; 29 min unstopped; the 96
        # without best of n took 9 min with it: scripts/study.sh).
        "design": {"team_sizes": (2,), "conditions": (*SEEDS_CONDITIONS, "single_best_of_n"), "cell_episodes": {2: 16},
                   "tasks": 16},
        "training": {},
        "teams": "builtin",
    },
    "results": {
        # docs/results.md's tables: held-out tasks of each env, 40 pairs per env and condition at size 2 and 24 at
        # sizes 3 and 4 (the trained condition only where a team of that size ships), with the adapters-off team and
        # MAGRPO's one-shot single agent beside the seeds' three conditions, and in the coding cells one agent's best
        # of n (as many candidates a turn as the team has agents, the same selection rule).
        "design": {"team_sizes": (2, 3, 4), "conditions": (*SEEDS_CONDITIONS, "base", "single_oneshot",
                                                           "single_best_of_n"),
                   "cell_episodes": {2: 40, 3: 24, 4: 24}},
        "training": {},
        "teams": "builtin",
    },
    "smoke": {
        # Small enough for 2 CPU cores in minutes with the default model: the machinery end to end (training,
        # three conditions, report), not a result. One training step of 2-turn trees per team: each step re-reads
        # every completion's prompt in the update, and a second step exercised nothing the trainer's tests do not.
        "design": {"team_sizes": (2,), "episodes": 12, "tasks": 2, "max_turns": 2, "max_new_tokens": 32},
        "training": {"recipes": False, "steps": 1, "num_generations": 2, "envs_per_step": 1,
                     "max_completion_length": 24, "learning_rate": 1e-3},
        "teams": "train",
    },
}
"""Named designs: ``full`` is the seeds' 6,000-episode design; ``main`` the main job (shipped teams, minutes);
``results`` the tables of docs/results.md; ``smoke`` checks the machinery quickly. ``teams``: where the trained
condition's teams come from when neither ``--adapters`` nor ``--train`` says (``builtin``: the shipped teams, and a
team size none ships plays without the trained condition; ``train``: train them first)."""


_ROLE_BUDGETS: dict[tuple[str, str], int] = {}
"""Each cell's role budget by (env, its options as JSON): :meth:`StudyDesign.token_budget`'s cache."""


def config_hash(parts: Mapping[str, Any]) -> str:
    """A short stable hash of what decides the episodes' outcomes (design, policy, training); the log's rows carry
    it so a re-run with other settings cannot resume into the wrong log."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cells_needing_teams(design: StudyDesign) -> list[tuple[str, int]]:
    """(env, team size) of every trained team the design needs (those in ``missing_teams`` are not needed)."""
    return [(env, size) for env in design.envs for size in design.team_sizes
            if any(CONDITIONS[c].trained for c in design.conditions) and (env, size) not in design.missing_teams]

