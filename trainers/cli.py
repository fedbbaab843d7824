"""``llm-marl train``: train a team with MAGRPO (GRPO for one agent), or resume a run.

    llm-marl train --env coding --num-agents 2 --model default --steps N --seed S --output DIR [--config cfg.yaml]
    llm-marl train --resume DIR [--steps M]

Every option of :class:`trainers.config.TrainerConfig` can be given in the YAML file; command-line options win. A bad
option is one clear error before any model loads.
"""

from __future__ import annotations

import argparse
from typing import Any

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
    parser.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> Any:
    """The :class:`TrainerConfig` the flags and the YAML file describe (validated; nothing is loaded)."""
    from trainers.config import TrainerConfig

    overrides = {name: getattr(args, name) for name in _FLAGS if getattr(args, name) is not None}
    if args.output is not None:
        overrides["output_dir"] = args.output
    if args.config is not None:
        return TrainerConfig.from_yaml(args.config, **overrides)
    return TrainerConfig.from_mapping(overrides)


def run(args: argparse.Namespace) -> int:
    """``llm-marl train``."""
    if args.resume is not None:
        from trainers import checkpoint

        extra = {name: getattr(args, name) for name in _FLAGS if getattr(args, name) is not None}
        unknown = sorted(set(extra) - {"steps"})
        if unknown or args.config is not None:
            raise SystemExit(f"--resume continues a run as it was configured; only --steps may change (got {unknown})")
        trainer = checkpoint.resume(args.resume, **extra)
    else:
        try:
            config = build_config(args)
        except (TypeError, ValueError) as error:
            raise SystemExit(f"llm-marl train: {error}") from None
        from trainers.magrpo import MAGRPOTrainer

        trainer = MAGRPOTrainer(config)
    print(f"training {trainer.config.env} with {len(trainer.agents)} agent(s) {list(trainer.agents)} "
          f"from step {trainer.step} to {trainer.config.steps}; output: {trainer.output}")
    rows = trainer.train(on_step=_print_step)
    last = rows[-1] if rows else {}
    print(f"done at step {trainer.step}: reward {last.get('reward', float('nan')):.3f}, "
          f"adapters in {trainer.output / 'adapters'}")
    return 0


__all__ = ["build_config", "register", "run"]


def _print_step(row: dict[str, Any]) -> None:
    print(f"step {row['step']}: reward {row['reward']:.3f} (std {row['reward_std']:.3f}), loss {row['loss']:.4f}, "
          f"{row['step_time']:.1f} s, {row['tokens_per_second']:.0f} tokens/s", flush=True)
