"""``llm-marl bench study`` (``python -m llm_marl_benchmarks.study``): reproduce the seeds' 6,000-episode experiment.

Conditions (``--conditions``): ``trained`` (the CTDE-trained team: one LoRA adapter per role from the MAGRPO trainer,
each agent acting on its own observation), ``single`` (one agent does everything, with the same turn budget, feedback
and endings as the teams) and ``untrained`` (the same team size, prompt-based multi-turn collaboration, no learning)
— the seeds' three — plus ``base`` (the trained team's own prompts with the adapters off: what training alone
changed), ``single_oneshot`` (MAGRPO's one-turn single agent), ``single_best_of_n`` (coding: ``single`` sampling as
many candidates a turn as the team has agents, sending the one that passes the most visible tests),
``naive_concatenation``, ``sequential_pipeline`` and ``one_round_discussion``. Every multi-turn condition plays the
same turn budget (``--max-turns``, 4). Defaults
reproduce the design: 6,000 episodes over both envs × team sizes {2, 3, 4} × conditions × held-out tasks × seeds.
The trained condition needs ``--adapters DIR`` (team directories written by ``llm-marl train``, one per env and team
size; ``builtin``: the shipped teams, and a size none ships plays without the trained condition) or ``--train``
(train them first, into ``OUT/teams/``). ``--preset smoke`` is a small design that trains briefly and evaluates the
three conditions in minutes on 2 CPU cores; ``--policy scripted`` runs any design without a model (to check the
machinery).

Every episode is appended to ``OUT/episodes.jsonl`` as it ends (flushed and fsync-ed); running the same command
again resumes — nothing lost, nothing run twice, also after SIGKILL. A progress line comes once per turn of the
running batch (episodes done, turns played, rate, ETA). ``OUT/study.json`` records the design, the policy, the config
hash and the package versions; ``OUT/report.md`` (+ CSV, PNG) is written at the end, and ``llm-marl bench report OUT``
rebuilds it from the log. ``--ray-address auto|HOST:PORT`` runs the batches as Ray tasks on a cluster.

    llm-marl bench study --preset smoke --out runs/study-smoke
    llm-marl bench study --adapters runs/teams/coding-2 ... --out runs/study
    llm-marl bench study --preset smoke --policy scripted --out /tmp/s   # no model
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from llm_marl_baselines.teams import BUILTIN
from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.progress import StudyProgress, duration
from llm_marl_benchmarks.study.design import (
    CONDITIONS,
    PRESETS,
    PlannedEpisode,
    StudyDesign,
    TrainingPlan,
    cells_needing_teams,
    config_hash,
)
from llm_marl_benchmarks.study.episode_log import EpisodeLog
from llm_marl_benchmarks.study.execution import (
    BATCHING,
    DEFAULT_BATCH_EPISODES,
    GENERATE_ROWS,
    POLICY_KINDS,
    PROMPT_TOKENS,
    PolicySpec,
    make_batches,
    run_local,
    run_ray,
)
from llm_marl_benchmarks.study.report import decoding_stops, precisions, sandboxes
from llm_marl_envs.core.termination import END_QUORUMS
from llm_marl_envs.registry import ENV_NAMES, canonical_name

RECORD_NAME = "study.json"
FULL_DESIGN_EPISODES = 6000


def build_parser() -> argparse.ArgumentParser:
    """The study's options (a design option left out takes the preset's value)."""
    parser = argparse.ArgumentParser(
        prog="python -m llm_marl_benchmarks.study", description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--preset", choices=tuple(PRESETS), default="full",
                        help="full: the seeds' 6,000-episode design; main: the shipped 2-agent teams vs the "
                             "untrained team and one agent, 16 pairs per env, under 10 min on 2 CPU cores; results: "
                             "the results tables of docs/results.md (sizes 2-4); smoke: trains briefly, checks the "
                             "machinery (default: full)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: runs/study-PRESET)")
    design = parser.add_argument_group("design (defaults from the preset)")
    design.add_argument("--envs", nargs="+", default=None, metavar="ENV", help=f"of {list(ENV_NAMES)}")
    design.add_argument("--sizes", nargs="+", type=int, default=None, metavar="N", help="team sizes (2-4)")
    design.add_argument("--conditions", nargs="+", default=None, metavar="NAME", help=f"of {list(CONDITIONS)}")
    design.add_argument("--episodes", type=int, default=None, help="episodes in all, spread over the cells")
    design.add_argument("--pairs", nargs="+", default=None, metavar="N|SIZE=N",
                        help="episodes per cell (pairs per condition): N for every team size, or SIZE=N each "
                             "(e.g. 2=40 3=24 4=24); replaces --episodes")
    design.add_argument("--tasks", type=int, default=None, help="tasks per env (default: every task of the split)")
    design.add_argument("--split", choices=("eval", "train"), default=None, help="task split (default: eval)")
    design.add_argument("--seed", type=int, default=None)
    design.add_argument("--max-turns", type=int, default=None,
                        help="turn budget of every multi-turn condition (default 4)")
    design.add_argument("--max-new-tokens", type=int, default=None)
    design.add_argument("--role-budgets", action="store_true", default=None,
                        help="every local policy's replies stop at their own role's token budget (e.g. a coding "
                             "verifier's 48), not the batch's, in every condition")
    design.add_argument("--stop-at-reply-end", action=argparse.BooleanOptionalAction, default=None,
                        help="every local policy's replies stop where the env stops reading them "
                             "(env.suggested_reply_end: a coder's where its code block closes), in every condition. "
                             "Default: on wherever replies are decoded here (since 2026-12-06); the flag refuses a "
                             "scripted or endpoint policy; --no-stop-at-reply-end plays as every coding figure "
                             "committed before then")
    design.add_argument("--temperature", type=float, default=None)
    design.add_argument("--top-p", type=float, default=None)
    design.add_argument("--similarity", choices=("auto", "minilm", "tfidf"), default=None,
                        help="similarity backend (auto: MiniLM, the seeds' consistency measure)")
    design.add_argument("--executor", choices=("auto", "docker", "bwrap", "local"), default=None,
                        help="coding env's unit-test executor")
    design.add_argument("--end-quorum", choices=END_QUORUMS, default=None,
                        help="how many finished agents end an episode, in every env and condition (the envs' "
                             "end_quorum; default: each env's own, writing half, coding half under its default scheme "
                             "propose_verify and all under the others)")
    design.add_argument("--dataset", nargs="+", default=None, metavar="ENV=PATH",
                        help="your own tasks per env: coding=PATH.jsonl (HumanEval's schema), writing=PATH.jsonl "
                             "(a 'source' field per line), or a dataset name of the env (e.g. coding=decomposable)")
    design.add_argument("--env-option", nargs="+", default=None, metavar="ENV.KEY=VALUE",
                        help="any further env keyword from the env's card, per env (e.g. "
                             "coding.scheme=propose_verify); VALUE is read as a Python literal where it is one (4, "
                             "True), else as text")
    model = parser.add_argument_group("policy")
    model.add_argument("--policy", choices=POLICY_KINDS, default="local",
                       help="local model, OpenAI-compatible endpoint, or scripted (no model)")
    model.add_argument("--model", default=None, help="local model folder (default: the offline SmolLM2-135M)")
    model.add_argument("--dtype", default="auto", choices=("auto", "bfloat16", "float32", "float16"))
    model.add_argument("--base-url", default=None, help="endpoint: e.g. http://127.0.0.1:8000/v1")
    model.add_argument("--endpoint-model", default=None, help="endpoint: served model name")
    model.add_argument("--api-key-env", default="OPENAI_API_KEY", help="endpoint: env var holding the key")
    model.add_argument("--adapters", nargs="+", type=Path, default=None, metavar="DIR",
                       help="team directories of the trained condition (team.json + adapters/), or 'builtin' for "
                            "the teams shipped with the package (the main and results presets' default)")
    model.add_argument("--train", action="store_true", help="train the trained condition's teams first")
    model.add_argument("--train-steps", type=int, default=None, help="MAGRPO steps per team (with --train)")
    run = parser.add_argument_group("execution")
    run.add_argument("--batch-size", type=int, default=None,
                     help=f"the most episodes of a lockstep batch (default {DEFAULT_BATCH_EPISODES}; with "
                          "--batching policy a batch also holds at most --generate-rows agents)")
    run.add_argument("--batching", choices=tuple(BATCHING), default="policy",
                     help="policy: a lockstep batch holds every condition of an env that the same model plays with "
                          "the same token budget (one generate call per turn serves them all); condition: one "
                          "condition per batch (the old schedule, for comparisons)")
    run.add_argument("--generate-rows", type=int, default=GENERATE_ROWS,
                     help=f"the most rows of one local generate call (default {GENERATE_ROWS})")
    run.add_argument("--reuse-prompts", action=argparse.BooleanOptionalAction, default=True,
                     help="each batch keeps its prompts' keys and values, so an episode's next turn prefills only "
                          "what its observation adds (default; --no-reuse-prompts prefills every prompt whole, for "
                          "comparisons)")
    run.add_argument("--ray-address", default=None, help="run batches as Ray tasks: auto, HOST:PORT, ray://...")
    run.add_argument("--ray-cpus-per-task", type=float, default=1.0)
    run.add_argument("--ray-gpus-per-task", type=float, default=0.0)
    run.add_argument("--no-report", action="store_true", help="log episodes only; build the report later")
    run.add_argument("--json", type=Path, default=None, metavar="PATH",
                     help="write the run's figures (episodes/min, projected full-design wall-clock, the precision the "
                          "policies ran in) as JSON")
    return parser


def design_from_args(args: argparse.Namespace) -> tuple[StudyDesign, TrainingPlan]:
    """The design and training plan the preset and flags describe (validated; nothing runs)."""
    preset = PRESETS[args.preset]
    values: dict[str, Any] = dict(preset["design"])
    flags = {"envs": args.envs, "team_sizes": args.sizes, "conditions": args.conditions, "episodes": args.episodes,
             "tasks": args.tasks, "split": args.split, "seed": args.seed, "max_turns": args.max_turns,
             "max_new_tokens": args.max_new_tokens, "role_budgets": args.role_budgets,
             "stop_at_reply_end": args.stop_at_reply_end,
             "temperature": args.temperature, "top_p": args.top_p,
             "similarity": args.similarity}
    values.update({k: v for k, v in flags.items() if v is not None})
    if args.episodes is not None:
        values.pop("cell_episodes", None)
    if args.pairs is not None:
        values["cell_episodes"] = parse_pairs(args.pairs, values.get("team_sizes", StudyDesign.team_sizes))
    elif args.sizes is not None and values.get("cell_episodes") is not None:
        # The preset's pairs per size, for the sizes asked (--preset results --sizes 2 4: 40 and 24).
        preset_counts = values["cell_episodes"]
        unset = [size for size in args.sizes if size not in preset_counts]
        if unset:
            raise ValueError(f"--sizes: the {args.preset} preset sets pairs for sizes {sorted(preset_counts)}, not "
                             f"{unset}; give --pairs (e.g. --pairs 24)")
        values["cell_episodes"] = {size: preset_counts[size] for size in args.sizes}
    env_kwargs: dict[str, dict[str, Any]] = {env: dict(kw) for env, kw in values.get("env_kwargs", {}).items()}
    if args.executor is not None:
        env_kwargs.setdefault("coding", {})["executor"] = args.executor
    for env, dataset in parse_datasets(args.dataset or ()).items():
        env_kwargs.setdefault(env, {})["dataset"] = dataset
    if args.end_quorum is not None:
        for env in ENV_NAMES:
            env_kwargs.setdefault(env, {})["end_quorum"] = args.end_quorum
    for env, key, value in parse_env_options(args.env_option or ()):
        env_kwargs.setdefault(env, {})[key] = value
    if env_kwargs:
        values["env_kwargs"] = env_kwargs
    training = dict(preset["training"])
    if args.train_steps is not None:
        training["steps_override"] = args.train_steps
    return StudyDesign(**values), TrainingPlan(**training)


def env_endings(design: StudyDesign) -> dict[str, str]:
    """Each env's ``end_quorum`` as the design plays it, its own default included: a default that changes between
    versions changes the config hash, so a log played under the old ending is not resumed under the new one."""
    endings = {}
    for env in design.envs:
        with design.probe_env(env) as instance:
            endings[env] = instance.end_quorum
    return endings


def prompt_digests(design: StudyDesign) -> dict[str, str]:
    """Short hashes of the texts the models read, so that a log played under other words is not resumed under new
    ones (as on 2026-12-07, when the baselines' rule blocks changed under a running study's feet): ``"rules"`` for the
    framing every baseline adds (:mod:`llm_marl_envs.core.prompts`), and per env the turn-1 chat messages of every
    agent of every cell (system prompt, role hint and instruction, protocol, reply prefix) on one fixed task of the
    design's split. Later turns' feedback is not rendered; a change there shows in the package version of
    ``study.json``."""
    from llm_marl_envs.core import prompts

    rules = {name: getattr(prompts, name) for name in
             ("DEFAULT_SYSTEM_PROMPT", "SIGHTED_RULES", "BLIND_RULES", "BASELINE_RULES", "SEQUENTIAL_HEADER")}
    digests = {"rules": config_hash(rules)}
    for env in design.envs:
        rendered = {}
        for _, size, condition in (cell for cell in design.cells() if cell[0] == env):
            with design.probe_env(env, condition, size) as instance:  # no code runs at reset
                instance.reset(seed=0, options={"split": design.split})  # a dataset may hold one split only
                rendered[f"{size}/{condition}"] = [instance.chat_messages(agent) for agent in instance.agents]
        digests[env] = config_hash(rendered)
    return digests


def changed_parts(recorded: dict[str, Any], parts: dict[str, Any]) -> list[str]:
    """Which of ``parts`` differ from an earlier ``study.json``'s (dotted to one level: ``"prompts.rules"``)."""
    changed = []
    for name, value in parts.items():
        before = recorded.get(name)
        if isinstance(value, dict) and isinstance(before, dict):
            changed += [f"{name}.{key}" for key in sorted(set(value) | set(before))
                        if json.dumps(value.get(key), sort_keys=True, default=str)
                        != json.dumps(before.get(key), sort_keys=True, default=str)]
        elif json.dumps(value, sort_keys=True, default=str) != json.dumps(before, sort_keys=True, default=str):
            changed.append(name)
    return changed


def parse_pairs(items: Sequence[str], sizes: Sequence[int]) -> dict[int, int]:
    """``["40"]`` (every size) or ``["2=40", "3=24"]`` as ``{size: episodes per cell}``."""
    def count(text: str, item: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"--pairs: expected N or SIZE=N (e.g. 2=40), got {item!r}") from None

    if len(items) == 1 and "=" not in items[0]:
        return {int(size): count(items[0], items[0]) for size in sizes}
    pairs: dict[int, int] = {}
    for item in items:
        size, sep, n = item.partition("=")
        if not sep:
            raise ValueError(f"--pairs: expected SIZE=N for each size when several are given, got {item!r}")
        pairs[count(size, item)] = count(n, item)
    return pairs


def parse_env_options(items: Sequence[str]) -> list[tuple[str, str, Any]]:
    """``["coding.scheme=propose_verify", ...]`` as ``[("coding", "scheme", "propose_verify"), ...]``; a value that
    is a Python literal (``4``, ``True``) is read as one. The env checks the keyword when the design builds it."""
    import ast

    options = []
    for item in items:
        target, sep, text = item.partition("=")
        env, dot, key = target.strip().partition(".")
        env = canonical_name(env)
        if not sep or not dot or not key.isidentifier():
            raise ValueError(f"--env-option: expected ENV.KEY=VALUE (e.g. coding.scheme=propose_verify), got {item!r}")
        if env not in ENV_NAMES:
            raise ValueError(f"--env-option {item}: expected an env among {list(ENV_NAMES)}, got {env!r}")
        try:
            value: Any = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = text.strip()
        options.append((env, key, value))
    return options


def parse_datasets(items: Sequence[str]) -> dict[str, str]:
    """``["coding=PATH", ...]`` as ``{"coding": "PATH"}`` (env names as the registry knows them)."""
    datasets: dict[str, str] = {}
    for item in items:
        env, sep, dataset = item.partition("=")
        env = canonical_name(env.strip())
        if not sep or not dataset.strip():
            raise ValueError(f"--dataset: expected ENV=PATH (e.g. coding=tasks.jsonl), got {item!r}")
        if env not in ENV_NAMES:
            raise ValueError(f"--dataset {item}: expected an env among {list(ENV_NAMES)}, got {env!r}")
        if env in datasets:
            raise ValueError(f"--dataset: {env} given twice")
        datasets[env] = dataset.strip()
    return datasets


def main(argv: Sequence[str] | None = None) -> int:
    """Run (or resume) a study and write its report; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        design, training = design_from_args(args)
        policy = _policy_spec(args)
        out = args.out or Path(f"runs/study-{args.preset}")
        batch_size = DEFAULT_BATCH_EPISODES if args.batch_size is None else args.batch_size
        if batch_size < 1:
            raise ValueError(f"--batch-size: expected >= 1, got {batch_size}")
        teams, design = _team_sources(args, design, training, policy, out)
        plan = design.plan()
    except (TypeError, ValueError, FileNotFoundError) as error:
        print(f"study: {error}", file=sys.stderr)
        return 2
    parts = {"design": design.to_dict(), "policy": policy.to_dict(), "teams": teams.describe(),
             "endings": env_endings(design), "prompts": prompt_digests(design)}
    digest = config_hash(parts)
    try:
        log = EpisodeLog(out, digest)
    except ValueError as error:  # another study's log (other settings, words or default ending)
        print(f"study: {error}{_what_changed(out, parts)}", file=sys.stderr)
        return 2
    _write_record(out, parts, digest, argv)
    pending = [episode for episode in plan if episode.key not in log.done()]
    print(f"[study] {len(plan)} planned episodes ({len(design.cells())} cells: {len(design.envs)} env(s) × "
          f"sizes {list(design.team_sizes)} × {list(design.conditions)}); {len(plan) - len(pending)} already in "
          f"{log.path}, {len(pending)} to run" + (f"; {log.torn_lines} torn line(s) dropped" if log.torn_lines else ""),
          flush=True)
    if design.missing_teams:
        print(f"[study] note: no trained team for {_team_names(design.missing_teams)}: the trained condition is left "
              "out there; the other conditions play those cells", flush=True)
    for condition in design.conditions:
        left_out = [env for env in design.envs if not CONDITIONS[condition].plays(env)]
        if left_out:
            print(f"[study] note: {condition} plays only {list(CONDITIONS[condition].envs or ())}: its "
                  f"{', '.join(left_out)} cells are left out", flush=True)
    team_dirs = teams.prepare(pending) if pending else {}
    started = time.perf_counter()
    turn_budgets = {condition: design.turn_budget(condition) for condition in design.conditions}
    waiting = {e.key for e in pending}
    progress = StudyProgress([turn_budgets[e.condition] for e in plan],
                             done=[turn_budgets[e.condition] for e in plan if e.key not in waiting])
    batches = make_batches(pending, batch_size, team_dirs, design, args.batching,
                           max_rows=policy.generate_rows if args.batching == "policy" else None)

    played: list[dict[str, Any]] = []

    def on_rows(rows: list[dict[str, Any]]) -> None:
        fresh = [row for row in rows if row["key"] not in log.rows]
        log.append(fresh)
        played.extend(fresh)
        if args.ray_address:  # remote batches report no turns: their episodes count when their rows arrive
            progress.episodes_logged([turn_budgets[row["condition"]] for row in fresh],
                                     " + ".join(dict.fromkeys(f"{r['env']} {r['condition']}" for r in fresh)))

    PROMPT_TOKENS.clear()
    if args.ray_address:
        run_ray(batches, design, policy, on_rows, args.ray_address, args.ray_cpus_per_task, args.ray_gpus_per_task)
    else:
        run_local(batches, design, policy, on_rows, on_turn=progress.on_turn)
    elapsed = time.perf_counter() - started
    progress.close()
    figures = {**_figures(len(pending), elapsed, design), "precision": precisions(played),
               "decoding": decoding_stops(played), "sandbox": sandboxes(played)}
    print(f"[study] {len(pending)} episodes in {elapsed:.1f} s ({figures['episodes_per_minute']:.1f} episodes/min; "
          f"the {FULL_DESIGN_EPISODES:,}-episode design would take about "
          f"{_eta(figures['projected_full_design_s'])} at this pace)", flush=True)
    if PROMPT_TOKENS["prompt"]:  # batches with a prompt store, here or on Ray workers
        figures.update(prompt_tokens=PROMPT_TOKENS["prompt"], prefilled_tokens=PROMPT_TOKENS["prefilled"])
        print(f"[study] prompts: {PROMPT_TOKENS['prompt']:,} tokens, {PROMPT_TOKENS['prefilled']:,} of them read by "
              f"the model ({1 - PROMPT_TOKENS['prefilled'] / PROMPT_TOKENS['prompt']:.0%} reused from earlier prompts "
              "of their batch)", flush=True)
    if args.json:
        write_figures_json(args.json, {**figures, "config_hash": digest, "out": str(out)})
    if not args.no_report:
        from llm_marl_benchmarks.study.render import build_report, print_headline

        report = build_report(out)
        print_headline(list(log.rows.values()))
        print(f"[study] report: {report}")
    return 0


# ---------------------------------------------------------------------------------------------------------- teams
class _Teams:
    """Where the trained condition's teams come from: given directories, training, or none needed."""

    def __init__(self, given: dict[tuple[str, int], str], training: TrainingPlan | None, needed: list[tuple[str, int]],
                 design: StudyDesign, policy: PolicySpec, out: Path) -> None:
        self.given, self.training, self.needed = given, training, needed
        self.design, self.policy, self.out = design, policy, out

    def describe(self) -> dict[str, Any]:
        """What identifies the teams, for the config hash: adapter contents or the training plan."""
        if self.given:
            return {f"{env}-{size}": _team_fingerprint(Path(d)) for (env, size), d in sorted(self.given.items())}
        if self.training is not None:
            return {"train": self.training.__dict__, "teams": [f"{e}-{s}" for e, s in self.needed]}
        return {}

    def prepare(self, pending: Sequence[PlannedEpisode]) -> dict[tuple[str, int], str]:
        """Team directory per (env, size) of the pending trained episodes (training the missing ones first)."""
        wanted = sorted({(e.env, e.team_size) for e in pending if CONDITIONS[e.condition].trained})
        if self.policy.kind == "scripted" or not wanted:
            return {}
        if self.given:
            return dict(self.given)
        return {cell: str(_train_team(cell, self.design, self.training, self.policy, self.out)) for cell in wanted}


def _team_sources(args: argparse.Namespace, design: StudyDesign, training: TrainingPlan, policy: PolicySpec,
                  out: Path) -> tuple[_Teams, StudyDesign]:
    """Check before anything runs that the trained condition has its teams (or a way to get them). With the shipped
    teams (``builtin``), a team size none ships is left out of the trained condition (``design.missing_teams``);
    teams given by folder must cover every cell."""
    needed = cells_needing_teams(design)
    default_teams = PRESETS[args.preset].get("teams") if args.adapters is None and not args.train else None
    if args.adapters and args.train:
        raise ValueError("give either --adapters DIR ... or --train, not both")
    if default_teams == "builtin":
        args.adapters = [Path(BUILTIN)]
    if needed and args.adapters and any(str(d) == BUILTIN for d in args.adapters):
        # Decided from the shipped teams before anything else (also for a scripted run: the same plan).
        from llm_marl_baselines.teams import builtin_teams

        shipped = {}
        for cell, directory in builtin_teams().items():
            mismatch = _team_role_mismatch(directory, cell, design) if cell in needed else None
            if mismatch:  # e.g. a coding team trained under another scheme: not a team for this env
                print(f"[study] note: the shipped {mismatch}", flush=True)
            else:
                shipped[cell] = directory
        covered = set(shipped) | {_manifest_cell(d) for d in args.adapters if str(d) != BUILTIN}
        missing = [cell for cell in needed if cell not in covered]
        if missing:
            design = dataclasses.replace(design, missing_teams=(*design.missing_teams, *missing))
            needed = cells_needing_teams(design)
    if not needed or policy.kind == "scripted":
        return _Teams({}, None, needed, design, policy, out), design
    if policy.kind == "endpoint":
        raise ValueError("the trained condition runs local adapters: use --policy local, or leave 'trained' out "
                         "of --conditions for an endpoint study")
    if args.adapters:
        from llm_marl_baselines.policies.adapters import load_team_manifest

        given: dict[tuple[str, int], str] = {}
        for directory in _expand_builtin(args.adapters):
            manifest = load_team_manifest(directory)  # FileNotFoundError / ValueError name the folder
            given[(manifest.env_name, manifest.num_agents)] = str(directory)
        missing = [cell for cell in needed if cell not in given]
        if missing:
            raise ValueError(f"--adapters: no team for {_team_names(missing)}; got teams for "
                             f"{_team_names(sorted(given))}")
        for cell in needed:
            mismatch = _team_role_mismatch(given[cell], cell, design)
            if mismatch:
                raise ValueError(f"--adapters: {mismatch}")
        return _Teams({cell: d for cell, d in given.items() if cell in needed}, None, needed, design, policy,
                      out), design
    if args.train or default_teams == "train":
        return _Teams({}, training, needed, design, policy, out), design
    raise ValueError("the trained condition needs --adapters DIR ... (teams from `llm-marl train`) or --train; "
                     "or leave it out with --conditions")


def _team_role_mismatch(directory: str | Path, cell: tuple[str, int], design: StudyDesign) -> str | None:
    """``None`` when a team's roles are the agents of the env its cell plays, else what differs (a coding team
    trained under another ``scheme``, say) and the env options the team was trained with."""
    from llm_marl_baselines.policies.adapters import load_team_manifest

    env, size = cell
    manifest = load_team_manifest(directory)
    with design.probe_env(env, "trained", size) as instance:
        agents = instance.possible_agents
    if sorted(manifest.roles) == sorted(agents):
        return None
    scheme = manifest.env_kwargs.get("scheme")  # the env option that decides a coding team's roles
    hint = f" (--env-option {env}.scheme={scheme})" if scheme else f" (it was trained with {manifest.env_kwargs})"
    return (f"team in {directory} plays roles {sorted(manifest.roles)}, but the study's {env} env with {size} agents "
            f"has {list(agents)}; play it in the env it was trained for{hint}")


def _manifest_cell(directory: Path) -> tuple[str, int]:
    from llm_marl_baselines.policies.adapters import load_team_manifest

    manifest = load_team_manifest(directory)
    return manifest.env_name, manifest.num_agents


def _team_names(cells: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{env} with {size} agents" for env, size in cells)


def _expand_builtin(directories: Sequence[Path]) -> list[Path]:
    """``--adapters`` with ``builtin`` replaced by the shipped teams' directories (:mod:`llm_marl_baselines.teams`)."""
    expanded: list[Path] = []
    for directory in directories:
        if str(directory) == BUILTIN:
            from llm_marl_baselines.teams import builtin_teams

            expanded += builtin_teams().values()
        else:
            expanded.append(directory)
    return expanded


def _train_team(cell: tuple[str, int], design: StudyDesign, plan: TrainingPlan | None, policy: PolicySpec,
                out: Path) -> Path:
    """Train (or finish training) the team of ``cell`` with the MAGRPO trainer; its run folder is a team directory."""
    from llm_marl_benchmarks.train import StepProgress
    from llm_marl_trainers import checkpoint
    from llm_marl_trainers.magrpo import MAGRPOTrainer

    assert plan is not None
    env, size = cell
    run_dir = out / "teams" / f"{env}-{size}"
    config = training_config(cell, design, plan, policy, run_dir)
    found = checkpoint.checkpoints(run_dir) if run_dir.exists() else []
    if found:
        if checkpoint.read_config(run_dir).to_dict() != config.to_dict():
            raise ValueError(f"{run_dir}: trained with another configuration; remove it or use another --out")
        trainer = MAGRPOTrainer.resume(run_dir)
        if trainer.step >= config.steps and (run_dir / "team.json").is_file():
            print(f"[study] team {env}-{size}: trained ({trainer.step} steps) in {run_dir}", flush=True)
            return run_dir
    else:
        trainer = MAGRPOTrainer(config)
    print(f"[study] training team {env}-{size} ({list(trainer.agents)}) from step {trainer.step} to {config.steps}",
          flush=True)
    with StepProgress(config.steps, trainer.step) as progress:
        trainer.train(on_step=progress.on_step)
    return run_dir


def training_config(cell: tuple[str, int], design: StudyDesign, plan: TrainingPlan, policy: PolicySpec,
                    run_dir: Path) -> Any:
    """The :class:`~llm_marl_trainers.config.TrainerConfig` of the team of ``cell``: the shipped team's recipe when
    there is one and ``plan.recipes`` (the default), else the plan's settings; the study's similarity backend, env
    arguments and turns either way, and the plan's ``steps`` when ``--train-steps`` set them."""
    from llm_marl_trainers.config import TrainerConfig

    env, size = cell
    env_kwargs = {"similarity": design.similarity, **design.env_kwargs.get(env, {}),
                  "max_turns": plan.max_turns or design.max_turns}
    recipe = _shipped_recipe(env, size, design) if plan.recipes else None
    if recipe is not None:
        values = TrainerConfig.yaml_values(recipe)
        values.update(env_kwargs={**dict(values.get("env_kwargs") or {}), **env_kwargs},
                      model=policy.model or "default", seed=design.seed, output_dir=str(run_dir),
                      **({"steps": plan.steps_override} if plan.steps_override else {}))
        return TrainerConfig.from_mapping(values)
    tokens = plan.max_completion_length
    if not tokens:
        with design.probe_env(env, "trained", size) as instance:
            tokens = instance.suggested_max_new_tokens()
    steps = plan.steps_override or plan.steps
    return TrainerConfig(
        env=env, num_agents=size, env_kwargs=env_kwargs, model=policy.model or "default", dtype=plan.dtype,
        num_generations=plan.num_generations, envs_per_step=plan.envs_per_step, max_completion_length=tokens,
        learning_rate=plan.learning_rate, lora_r=plan.lora_r, temperature=plan.temperature, steps=steps,
        seed=design.seed, output_dir=str(run_dir), save_steps=max(1, steps // 4),
    )


def _shipped_recipe(env: str, size: int, design: StudyDesign) -> Path | None:
    """The recipe the shipped team of ``env`` × ``size`` was trained with, if the package has that team and its roles
    are the ones this study's env plays (a coding recipe of another scheme would train a team the study cannot play)."""
    from llm_marl_baselines.teams import builtin_team_dir

    try:
        team_dir = builtin_team_dir(env, size)
    except ValueError:
        return None
    recipe = team_dir / "recipe.yaml"
    return recipe if recipe.is_file() and _team_role_mismatch(team_dir, (env, size), design) is None else None


def _team_fingerprint(directory: Path) -> dict[str, Any]:
    """The manifest and a digest of the adapter weights: a different team is a different study."""
    from llm_marl_baselines.policies.adapters import adapters_digest

    return {"manifest": json.loads((directory / "team.json").read_text(encoding="utf-8")),
            "adapters_sha256": adapters_digest(directory)}


# ------------------------------------------------------------------------------------------------------- the rest
def _policy_spec(args: argparse.Namespace) -> PolicySpec:
    if args.policy == "endpoint" and not (args.base_url and args.endpoint_model):
        raise ValueError("--policy endpoint needs --base-url URL and --endpoint-model NAME")
    if args.model is not None and not Path(args.model).is_dir():
        raise ValueError(f"--model: no model folder at {args.model!r} (leave it out for the offline SmolLM2)")
    if args.generate_rows < 1:
        raise ValueError(f"--generate-rows: expected >= 1, got {args.generate_rows}")
    return PolicySpec(kind=args.policy, model=args.model, dtype=args.dtype, base_url=args.base_url,
                      endpoint_model=args.endpoint_model, api_key_env=args.api_key_env,
                      generate_rows=args.generate_rows, reuse_prompts=args.reuse_prompts)


def _what_changed(out: Path, parts: dict[str, Any]) -> str:
    """For the refusal to resume: what differs from the folder's ``study.json``, where one can be read."""
    try:
        recorded = json.loads((out / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    changed = changed_parts(recorded, parts) if isinstance(recorded, dict) else []
    return f" (changed since {out / RECORD_NAME}: {', '.join(changed)})" if changed else ""


def _write_record(out: Path, parts: dict[str, Any], digest: str, argv: Sequence[str] | None) -> None:
    """``OUT/study.json``: what the study is (design, policy, teams, hash) and what it ran with (versions)."""
    packages = {}
    for name in ("llm-marl-envs", "torch", "transformers", "peft", "numpy", "scipy", "statsmodels", "ray"):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    record = {**parts, "config_hash": digest, "python": platform.python_version(), "platform": platform.platform(),
              "packages": packages, "argv": list(sys.argv[1:] if argv is None else argv)}
    out.mkdir(parents=True, exist_ok=True)
    staging = out / f".{RECORD_NAME}.tmp"
    staging.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(staging, out / RECORD_NAME)


def _figures(episodes: int, elapsed: float, design: StudyDesign) -> dict[str, Any]:
    rate = episodes / elapsed * 60 if elapsed > 0 and episodes else float("nan")
    return {"episodes_run": episodes, "wall_s": elapsed, "episodes_per_minute": rate,
            "planned_episodes": design.episodes,
            "projected_full_design_s": FULL_DESIGN_EPISODES / rate * 60 if rate == rate and rate > 0 else None}


def _eta(seconds: float | None) -> str:
    return "an unknown time" if seconds is None else duration(seconds)
