"""``llm-marl train``: train a team with MAGRPO (GRPO for one agent), or resume a run.

    llm-marl train --env coding --num-agents 2 --model default --steps N --seed S --output DIR [--config cfg.yaml]
    llm-marl train --resume DIR [--steps M]

Every option of :class:`trainers.config.TrainerConfig` can be given in the YAML file; command-line options win. A bad
option is one clear error before any model loads. On a terminal a progress bar shows the steps with the last reward
and step time (tqdm, from the ``cli`` extra); otherwise (a pipe, a log file, CI) each step is one plain line. The
output folder ends as a team directory: ``llm-marl demo --adapters DIR`` plays it.

Data-parallel over several processes (one per GPU, or CPU processes; :mod:`trainers.distributed`)::

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
    "envs_per_step": (int, "episodes (tree roots) per step"),
    "save_steps": (int, "checkpoint every this many steps"),
    "advantage": (str, "joint (MAGRPO: team return vs siblings) or per_agent (own reward vs teammates')"),
    "logging_dir": (str, "TensorBoard folder (default: OUTPUT/tensorboard)"),
}
_LIST_FLAGS: dict[str, str] = {
    "report_to": "where metrics go besides metrics.jsonl: tensorboard (default), wandb, or none",
}


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
    for name, (kind, text) in _FLAGS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=kind, default=None, help=text)
    for name, text in _LIST_FLAGS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, nargs="+", default=None, metavar="NAME",
                            help=text)
    parser.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> Any:
    """The :class:`TrainerConfig` the flags and the YAML file describe (validated; nothing is loaded)."""
    from trainers.config import TrainerConfig

    overrides = {name: getattr(args, name) for name in (*_FLAGS, *_LIST_FLAGS) if getattr(args, name) is not None}
    if args.output is not None:
        overrides["output_dir"] = args.output
    if args.config is not None:
        return TrainerConfig.from_yaml(args.config, **overrides)
    return TrainerConfig.from_mapping(overrides)


def run(args: argparse.Namespace) -> int:
    """``llm-marl train``."""
    if args.resume is not None:
        from trainers import checkpoint

        extra = {name: getattr(args, name) for name in (*_FLAGS, *_LIST_FLAGS) if getattr(args, name) is not None}
        unknown = sorted(set(extra) - {"steps"})
        if unknown or args.config is not None:
            raise SystemExit(f"--resume continues a run as it was configured; only --steps may change (got {unknown})")
        try:
            trainer = checkpoint.resume(args.resume, **extra)
        except (FileNotFoundError, ValueError) as error:  # no checkpoint; saved by another number of processes
            raise SystemExit(f"llm-marl train: {error}") from None
    else:
        try:
            config = build_config(args)
        except (TypeError, ValueError) as error:
            raise SystemExit(f"llm-marl train: {error}") from None
        from trainers.magrpo import MAGRPOTrainer

        trainer = MAGRPOTrainer(config)
    from trainers.magrpo import NonFiniteLossError

    if not trainer.parallel.is_main:  # the other ranks of a torchrun run train silently
        try:
            trainer.train()
        except NonFiniteLossError:
            raise SystemExit(1) from None
        return 0
    processes = f" in {trainer.parallel.world_size} processes" if trainer.parallel.enabled else ""
    print(f"training {trainer.config.env} with {len(trainer.agents)} agent(s) {list(trainer.agents)} "
          f"from step {trainer.step} to {trainer.config.steps}{processes}; output: {trainer.output}", flush=True)
    with StepProgress(trainer.config.steps, trainer.step) as progress:
        try:
            rows = trainer.train(on_step=progress.on_step)
        except NonFiniteLossError as error:
            raise SystemExit(f"llm-marl train: {error}") from None
    last = rows[-1] if rows else {}
    print(f"done at step {trainer.step}: reward {last.get('reward', float('nan')):.3f}, "
          f"adapters in {trainer.output / 'adapters'}")
    if (trainer.output / "team.json").is_file():
        print(f"team directory: {trainer.output} (play it: llm-marl demo --adapters {trainer.output})")
    return 0


class StepProgress:
    """The steps of a run on the command line: a tqdm bar with the last reward and step time on a terminal, one
    plain line per step elsewhere (a redrawn bar in a pipe or CI log is noise), or when tqdm is not installed."""

    def __init__(self, total: int, initial: int = 0, *, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        if live is None:
            live = _is_terminal(self.stream) and _has_tqdm()
        self.bar: Any = None
        if live:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="step", desc="train", file=self.stream,
                            dynamic_ncols=True)

    def on_step(self, row: dict[str, Any]) -> None:
        """The trainer's ``on_step`` callback."""
        from trainers.reporting import format_row

        if self.bar is None:
            print(format_row(row), file=self.stream, flush=True)
            return
        if row.get("skipped"):
            self.bar.write(format_row(row), file=self.stream)  # stays above the bar
        self.bar.set_postfix(reward=f"{row['reward']:.3f}", step_time=f"{row['step_time']:.1f}s", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        """Close the bar (a no-op for plain lines)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or file-like objects without a terminal
        return False


def _has_tqdm() -> bool:
    import importlib.util

    return importlib.util.find_spec("tqdm") is not None


__all__ = ["StepProgress", "build_config", "register", "run"]
