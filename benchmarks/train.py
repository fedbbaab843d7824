"""``llm-marl train``: train a team with MAGRPO (GRPO for one agent), or resume a run.

    llm-marl train --env coding --num-agents 2 --steps N --seed S --output DIR [--config cfg.yaml] [--dataset F]
    llm-marl train --config recipes/writing-2.yaml --output DIR       # a shipped team's recipe
    llm-marl train --resume DIR [--steps M]

Every option of :class:`llm_marl_trainers.config.TrainerConfig` can be given in the YAML file; command-line options win.
A bad option is one clear error before any model loads. Without a GPU the ``cpu`` profile fills the options neither the
flags nor the YAML set (:data:`CPU_PROFILE`: a bfloat16 base where the CPU has native bf16, float32 where it has
not, 2 turns, G = 3, short completions — about a minute a step on 2 cores with the default model); ``--profile
full`` keeps the dataclass defaults, the seeds' settings.
Before the first step the command prints what one step will generate (tree nodes, completions, tokens) and a measured
estimate of its time (:mod:`llm_marl_trainers.plan`; ``--no-estimate`` skips the few seconds it costs), then one
progress line per step: reward mean and std, the share of zero-std groups, loss, step time and ETA (a live bar on a
terminal). The output folder ends as a team directory: ``llm-marl demo --adapters DIR`` plays it.

Data-parallel over several processes (one per GPU, or CPU processes; :mod:`llm_marl_trainers.distributed`)::

    torchrun --standalone --nproc-per-node 2 --no-python llm-marl train --envs-per-step 4 ... --output DIR

Each process grows ``envs_per_step / N`` of every step's episodes; rank 0 prints and writes. Resume the same way.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

# Command-line flags for the options people change most; the rest go in --config YAML.
_FLAGS: dict[str, tuple[type, str]] = {
    "env": (str, "env name: writing or coding (writing_v0 / coding_v0 accepted)"),
    "num_agents": (int, "team size, 1-4 (1 = GRPO)"),
    "model": (str, "'default' (offline SmolLM2-135M-Instruct) or a local model folder"),
    "steps": (int, "optimisation steps in all"),
    "seed": (int, "seed of sampling, tasks and adapter initialisation"),
    "num_generations": (int, "G: completions per agent per node (>= 2)"),
    "joint_mode": (str, "aligned (G joint actions per node) or cross (G^N)"),
    "loss_type": (str, "magrpo, grpo, dr_grpo or dapo"),
    "learning_rate": (float, "AdamW learning rate of each adapter"),
    "max_completion_length": (int, "new tokens per completion at most"),
    "micro_batch_size": (int, "completions per forward/backward pass (memory; the update is the same)"),
    "envs_per_step": (int, "episodes (tree roots) per step"),
    "save_steps": (int, "checkpoint every this many steps"),
    "advantage": (str, "joint (MAGRPO: team return vs siblings) or per_agent (own reward vs teammates')"),
    "logging_dir": (str, "TensorBoard folder (default: OUTPUT/tensorboard)"),
}
_LIST_FLAGS: dict[str, str] = {
    "report_to": "where metrics go besides metrics.jsonl: tensorboard (default), wandb, or none",
}


CPU_PROFILE: dict[str, Any] = {
    "num_generations": 3,
    "max_completion_length": None,
    "micro_batch_size": 8,
    "max_turns": 2,
}
"""What ``--profile cpu`` (the default without a GPU) sets where neither the flags nor the YAML do: besides these,
the base in the fastest dtype this CPU computes natively (:func:`cpu_native_dtype`: bfloat16 with AVX512-BF16/AMX,
about twice as fast as float32 there; float32 without, where bf16 matmuls are emulated and about 50x slower; the
adapters stay float32), trees of 2 turns with G = 3 (2·3 + 3·6 = 24 completions for 2 agents) and completions as
long as the env's roles need (``max_completion_length`` None: the env's ``suggested_max_new_tokens()``;
``max_turns`` goes to ``env_kwargs``)."""

PROFILES: tuple[str, ...] = ("auto", "cpu", "full")

RESUME_OPTIONS: frozenset[str] = frozenset({"steps", "micro_batch_size"})
"""What ``--resume`` may change: where the run stops, and the micro-batch (memory only: the update is the same, see
``TrainerConfig.micro_batch_size``) — so a run that ran out of memory continues with smaller passes."""


def register(subparsers: Any) -> None:
    """Add the ``train`` subcommand to the ``llm-marl`` parser."""
    parser = subparsers.add_parser(
        "train",
        help="train one LoRA adapter per agent with MAGRPO (GRPO for one agent), or resume a run",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--config", default=None, metavar="YAML", help="options from a YAML file (flags win)")
    parser.add_argument("--output", default=None, metavar="DIR", help="output folder (checkpoints, metrics, adapters)")
    parser.add_argument(
        "--resume", default=None, metavar="DIR", help="continue the run in DIR from its last checkpoint"
    )
    parser.add_argument("--profile", choices=PROFILES, default="auto",
                        help="defaults for options left unset: cpu (about a minute a step on 2 cores), full (the "
                             "seeds' settings), auto (cpu without a GPU; default)")
    parser.add_argument("--dataset", default=None, metavar="PATH",
                        help="train on your own tasks: a .jsonl file (coding: HumanEval's schema; writing: a "
                             "'source' field per line), or a dataset name of the env")
    parser.add_argument("--no-estimate", action="store_true",
                        help="skip the measured step-time estimate printed before the first step")
    for name, (kind, text) in _FLAGS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=kind, default=None, help=text)
    for name, text in _LIST_FLAGS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, nargs="+", default=None, metavar="NAME",
                            help=text)
    parser.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> Any:
    """The :class:`TrainerConfig` the flags, the YAML file and the profile describe (validated; nothing is loaded)."""
    from llm_marl_trainers.config import TrainerConfig

    values: dict[str, Any] = {}
    if args.config is not None:
        values = TrainerConfig.yaml_values(args.config)
    values.update({name: getattr(args, name) for name in (*_FLAGS, *_LIST_FLAGS) if getattr(args, name) is not None})
    if args.output is not None:
        values["output_dir"] = args.output
    if getattr(args, "dataset", None) is not None:
        values["env_kwargs"] = {**dict(values.get("env_kwargs") or {}), "dataset": args.dataset}
    if resolve_profile(getattr(args, "profile", "full")) == "cpu":
        values = apply_cpu_profile(values)
    return TrainerConfig.from_mapping(values)


def resolve_profile(profile: str) -> str:
    """``auto`` is ``cpu`` when no CUDA device is present, else ``full``."""
    if profile != "auto":
        return profile
    import torch

    return "full" if torch.cuda.is_available() else "cpu"


def cpu_native_dtype() -> str:
    """``bfloat16`` where this CPU computes it natively (AVX512-BF16 or AMX), else ``float32``: the choice of
    :func:`llm_marl_baselines.models.choose_dtype` for ``auto`` on a CPU. (The trainer's own ``auto`` stays float32 on
    every CPU, for exact updates and resumes.)"""
    from llm_marl_baselines.models import choose_dtype

    return choose_dtype("auto", "cpu")


def apply_cpu_profile(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with :data:`CPU_PROFILE` filling what they leave unset."""
    from llm_marl_envs.registry import make_env

    values = dict(values)
    if "dtype" not in values:
        values["dtype"] = cpu_native_dtype()
    for name, value in CPU_PROFILE.items():
        if name == "max_turns":
            values["env_kwargs"] = {"max_turns": value, **dict(values.get("env_kwargs") or {})}
        elif name not in values:
            values[name] = value
    if values["max_completion_length"] is None:
        env = make_env(values.get("env", "coding"), num_agents=values.get("num_agents", 2),
                       **{**values["env_kwargs"], "similarity": "tfidf"})
        values["max_completion_length"] = env.suggested_max_new_tokens()
    return values


def run(args: argparse.Namespace) -> int:
    """``llm-marl train``."""
    if args.resume is not None:
        from llm_marl_trainers.magrpo import MAGRPOTrainer

        extra = {name: getattr(args, name) for name in (*_FLAGS, *_LIST_FLAGS) if getattr(args, name) is not None}
        unknown = sorted(set(extra) - RESUME_OPTIONS) + [name for name in ("config", "dataset") if getattr(args, name)]
        if unknown:
            raise SystemExit(f"--resume continues a run as it was configured; only {sorted(RESUME_OPTIONS)} may "
                             f"change (got {unknown})")
        try:
            trainer = MAGRPOTrainer.resume(args.resume, **extra)
        except (FileNotFoundError, ValueError) as error:  # no checkpoint; saved by another number of processes
            raise SystemExit(f"llm-marl train: {error}") from None
    else:
        try:
            config = build_config(args)
            check_env(config)
        except (TypeError, ValueError, KeyError, FileNotFoundError) as error:
            raise SystemExit(f"llm-marl train: {error.args[0] if isinstance(error, KeyError) else error}") from None
        from llm_marl_trainers.magrpo import MAGRPOTrainer

        trainer = MAGRPOTrainer(config)
    from llm_marl_trainers.magrpo import NonFiniteLossError

    if not trainer.parallel.is_main:  # the other ranks of a torchrun run train silently
        try:
            trainer.train()
        except NonFiniteLossError:
            raise SystemExit(1) from None
        return 0
    print_plan(trainer, estimate=not args.no_estimate)
    with StepProgress(trainer.config.steps, trainer.step) as progress:
        try:
            rows = trainer.train(on_step=progress.on_step)
        except NonFiniteLossError as error:
            raise SystemExit(f"llm-marl train: {error}") from None
    last = rows[-1] if rows else {}
    print(f"[train] done at step {trainer.step}: reward {last.get('reward', float('nan')):.3f}, "
          f"adapters in {trainer.output / 'adapters'}")
    if (trainer.output / "team.json").is_file():
        print(f"[train] team directory: {trainer.output} (play it: llm-marl demo --adapters {trainer.output}; "
              f"learning curve: llm-marl teams curve {trainer.output})")
    return 0


def check_env(config: Any) -> None:
    """Build one env of ``config`` (its dataset loaded and validated) before any model loads."""
    from llm_marl_envs.registry import make_env

    make_env(config.env, num_agents=config.num_agents, **{"similarity": "tfidf", **config.env_kwargs}).close()


def print_plan(trainer: Any, *, estimate: bool = True, stream: TextIO | None = None) -> None:
    """What the run will do: the team, the steps, one step's trees, completions and tokens, and (``estimate``) a
    measured estimate of a step's time and of the run's."""
    from llm_marl_baselines.models import choose_device
    from llm_marl_trainers.magrpo import base_dtype
    from llm_marl_trainers.plan import estimate_step, step_plan

    stream = stream if stream is not None else sys.stdout
    config = trainer.config
    processes = f" in {trainer.parallel.world_size} processes" if trainer.parallel.enabled else ""
    print(f"[train] {config.env}, {len(trainer.agents)} agent(s) {list(trainer.agents)}, steps {trainer.step} -> "
          f"{config.steps}{processes}; output {trainer.output}", file=stream, flush=True)
    plan = step_plan(config, trainer.envs[0].max_turns, len(trainer.agents))
    # What "auto" resolved to here (bfloat16 on a GPU, float32 on a CPU): the plan names the dtype that runs.
    device = choose_device(trainer.parallel.device)
    print(f"[train] one step: {plan.describe()}; G = {config.num_generations} ({config.joint_mode}), "
          f"{config.max_completion_length} new tokens at most, {base_dtype(config.dtype, device)} base on {device}",
          file=stream, flush=True)
    if trainer.warm_started:
        fresh = [agent for agent in trainer.agents if agent not in trainer.warm_started]
        digest = trainer.warm_start_record["adapters_sha256"]
        print(f"[train] warm start from {config.init_team} (adapters {digest}): {', '.join(trainer.warm_started)}; "
              f"fresh: {', '.join(fresh) or 'none'}", file=stream, flush=True)
    if not estimate:
        return
    print(estimate_line(estimate_step(trainer, plan), plan, config.steps - trainer.step), file=stream, flush=True)


def estimate_line(guess: Any, plan: Any, left: int) -> str:
    """The plan's estimate line: a step's measured estimate (a :class:`~llm_marl_trainers.plan.StepEstimate`), its
    time at the plan's most completions where trees may re-branch, and the ``left`` steps' total."""
    from llm_marl_benchmarks.progress import duration

    # Re-branching trees sample more than the plan's nominal count; their generation scales with the completions.
    most = guess.total_s + guess.generation_s * (plan.most_completions / plan.completions - 1)
    upto = f", up to {duration(most)} with re-branches" if plan.most_completions > plan.completions else ""
    return (f"[train] estimated {duration(guess.total_s)} a step{upto} (generation {duration(guess.generation_s)}, "
            f"update {duration(guess.update_s)}; measured in {duration(guess.calibration_s)}): {left} step(s) take "
            f"about {duration(guess.total_s * left)}")


class StepProgress:
    """The steps of a run on the command line (:class:`llm_marl_benchmarks.progress.Progress`): a live bar on a
    terminal, one plain line per step elsewhere, each with reward mean/std, the share of zero-std groups, loss, step
    time and ETA."""

    def __init__(self, total: int, initial: int = 0, *, stream: TextIO | None = None, live: bool | None = None) -> None:
        from llm_marl_benchmarks.progress import Progress

        self.progress = Progress(total, "step", initial=initial, tag="train", stream=stream, live=live)

    def on_step(self, row: dict[str, Any]) -> None:
        """The trainer's ``on_step`` callback."""
        self.progress.advance(1, f"step {row['step']}", ": " + format_step(row))

    def close(self) -> None:
        """Close the bar (a no-op for plain lines)."""
        self.progress.close()

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def format_step(row: dict[str, Any]) -> str:
    """A step's figures in one line: reward mean ± std, zero-std groups, loss (or why it was skipped), step time."""
    import math

    zero = row.get("frac_reward_zero_std", math.nan)
    loss = "skipped: non-finite loss" if row.get("skipped") else f"loss {row.get('loss', math.nan):.4f}"
    return (f"reward {row.get('reward', math.nan):.3f} ± {row.get('reward_std', math.nan):.3f}, "
            f"zero-std groups {zero:.0%}, {loss}, {row.get('step_time', math.nan):.1f} s")


__all__ = ["CPU_PROFILE", "StepProgress", "build_config", "cpu_native_dtype", "format_step", "print_plan", "register",
           "run"]
