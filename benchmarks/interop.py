"""``llm-marl interop``: a peer library's own trainer on one of our envs, with the default model.

    llm-marl interop comlrl --env coding_v0 --num-agents 2 --steps N [--json PATH]
    llm-marl interop torchrl --env writing_v0 --steps N [--json PATH]

``comlrl`` runs CoMLRL's ``MAGRPOTrainer`` through :mod:`llm_marl_trainers.comlrl_adapter` (one LoRA-wrapped copy of the
default model per agent; ``--full-finetune`` for CoMLRL's own default); ``torchrl`` runs TorchRL's
``LLMCollector`` + ``TransformersWrapper`` + ``MCAdvantage`` + ``GRPOLoss`` through
:mod:`llm_marl_trainers.torchrl_adapter` (one shared policy playing every role). Each prints its plan, then one line per
step with the peer's mean reward, the env's mean reward for the same completions (replayed in a fresh env) and the step
time. ``--json PATH`` writes the settings, versions and per-step records (``step``, ``wall_time``, ``step_time``,
``peer_reward``, ``env_reward``). Unknown envs, team sizes the env refuses and a missing extra are one clear error
before any model loads.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json

PEERS: tuple[str, ...] = ("comlrl", "torchrl")


def register(subparsers: Any) -> None:
    """Add the ``interop`` subcommand to the ``llm-marl`` parser."""
    parser = subparsers.add_parser(
        "interop", help="run a peer library's own trainer (CoMLRL, TorchRL) on one of our envs",
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peer", choices=PEERS, help="comlrl: CoMLRL's MAGRPOTrainer; torchrl: TorchRL's GRPO pieces")
    parser.add_argument("--env", required=True, help="env name: writing or coding (writing_v0 / coding_v0 accepted)")
    parser.add_argument("--num-agents", type=int, default=2, help="team size (the env's range, 1-4; default 2)")
    parser.add_argument("--steps", type=int, default=2, help="optimisation steps (default 2)")
    parser.add_argument("--group-size", type=int, default=4,
                        help="G: samples per prompt (CoMLRL num_generations, TorchRL MCAdvantage grpo_size; "
                             "default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="new tokens per completion (default 64)")
    parser.add_argument("--turns", type=int, default=1, help="turns per episode (the env's max_turns; default 1)")
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="AdamW learning rate (default 1e-4)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the task schedule and of torch (default 0)")
    parser.add_argument("--split", default="train", choices=("train", "eval"), help="task split (default train)")
    parser.add_argument("--similarity", default="tfidf", choices=("tfidf", "minilm", "auto"),
                        help="the env's similarity backend (default tfidf: no embedding model to load)")
    parser.add_argument("--executor", default="auto", choices=("auto", "docker", "bwrap", "local"),
                        help="coding: the sandbox backend (default auto: Docker when it answers)")
    parser.add_argument("--dataset", default=None, help="the env's dataset name or a .jsonl path (default: the env's)")
    parser.add_argument("--full-finetune", action="store_true",
                        help="comlrl: fine-tune full model copies (CoMLRL's own default) instead of LoRA adapters")
    parser.add_argument("--json", default=None, metavar="PATH", help="write settings and per-step records here")
    parser.set_defaults(func=run)


def env_kwargs(args: argparse.Namespace, env: str) -> dict[str, Any]:
    """The env keywords the flags describe (``executor`` only for coding)."""
    kwargs: dict[str, Any] = {"similarity": args.similarity, "max_turns": args.turns}
    if env == "coding":
        kwargs["executor"] = args.executor
    if args.dataset is not None:
        kwargs["dataset"] = args.dataset
    return kwargs


def check_settings(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """Validate everything that needs no model: the peer's extra, the env name, the team size and the env kwargs
    (one env is built and closed). Returns the env's registry name and its kwargs; raises ``SystemExit`` with one
    clear line otherwise."""
    from llm_marl_envs.registry import env_spec, make_env

    for name in ("steps", "group_size", "max_new_tokens", "turns"):
        value = getattr(args, name)
        if value < 1:
            raise SystemExit(f"llm-marl interop: --{name.replace('_', '-')}: expected an int >= 1, got {value}")
    if args.group_size < 2:
        raise SystemExit(f"llm-marl interop: --group-size: expected >= 2 (a group baseline needs two samples), "
                         f"got {args.group_size}")
    try:
        if args.peer == "comlrl":
            from llm_marl_trainers.comlrl_adapter import import_comlrl

            import_comlrl()
        else:
            from llm_marl_trainers.torchrl_adapter import import_torchrl

            import_torchrl()
    except ImportError as error:
        raise SystemExit(f"llm-marl interop {args.peer}: {error}") from None
    try:
        name = env_spec(args.env).name
        kwargs = env_kwargs(args, name)
        make_env(name, num_agents=args.num_agents, **kwargs).close()
    except (TypeError, ValueError, KeyError, FileNotFoundError) as error:
        raise SystemExit(f"llm-marl interop: {error.args[0] if isinstance(error, KeyError) else error}") from None
    return name, kwargs


def run(args: argparse.Namespace) -> int:
    """``llm-marl interop {comlrl,torchrl}``."""
    import torch

    name, kwargs = check_settings(args)
    torch.manual_seed(args.seed)
    seeds = [args.seed * 1_000_003 + step for step in range(args.steps)]  # the tasks llm_marl_trainers.magrpo draws
    print(f"[interop] {args.peer} on {name}: {args.num_agents} agent(s), {args.steps} step(s), G = {args.group_size}, "
          f"{args.max_new_tokens} new tokens, {args.turns} turn(s), default model "
          f"({'full fine-tuning' if args.full_finetune and args.peer == 'comlrl' else 'LoRA r 8'}), env {kwargs}",
          flush=True)
    records = (_run_comlrl if args.peer == "comlrl" else _run_torchrl)(args, name, kwargs, seeds)
    last = records[-1] if records else {}
    print(f"[interop] done: {len(records)} step(s), last reward {last.get('peer_reward', float('nan')):.4f} "
          f"(env {last.get('env_reward', float('nan')):.4f})", flush=True)
    if args.json:
        write_json(Path(args.json), args, name, kwargs, records)
        print(f"[interop] wrote {args.json}")
    return 0


def _line(step: int, total: int, peer: str, peer_reward: float, env_reward: float, step_time: float,
          wall_time: float) -> None:
    agree = "" if math.isclose(peer_reward, env_reward, abs_tol=1e-5) else "  (MISMATCH)"
    print(f"[interop] step {step}/{total}: {peer} reward {peer_reward:.4f}, env reward {env_reward:.4f}{agree}, "
          f"step {step_time:.1f} s, {wall_time:.1f} s in all", flush=True)


def _run_comlrl(args: argparse.Namespace, env: str, kwargs: dict[str, Any], seeds: list[int]) -> list[dict]:
    from llm_marl_trainers.comlrl_adapter import import_comlrl, magrpo_trainer, train_magrpo

    MAGRPOConfig, _ = import_comlrl()
    config = MAGRPOConfig(num_agents=args.num_agents, num_turns=args.turns, num_generations=args.group_size,
                          max_new_tokens=args.max_new_tokens, num_train_epochs=1, eval_interval=0,
                          early_termination_threshold=None, rollout_buffer_size=1, temperature=args.temperature,
                          top_p=1.0, top_k=None, agent_learning_rate=args.learning_rate)
    env_args = {k: v for k, v in kwargs.items() if k != "max_turns"}  # the bridge sets max_turns = num_turns
    trainer = magrpo_trainer(env, args.num_agents, args=config, seeds=seeds, split=args.split,
                             peft_config=None if args.full_finetune else "default", **env_args)
    trainer.verbose = False  # CoMLRL's tqdm bar; one line per step below instead
    records: list[dict] = []

    def on_step(row: Any) -> None:
        records.append({"step": row.step, "wall_time": row.wall_time, "step_time": row.step_time,
                        "generation_time": row.generation_time, "peer_reward": row.peer_reward,
                        "env_reward": row.env_reward, "joint_actions": len(row.rewards)})
        _line(row.step, args.steps, "CoMLRL", row.peer_reward, row.env_reward, row.step_time, row.wall_time)

    try:
        train_magrpo(trainer, on_step=on_step)
    finally:
        trainer.bridge.close()
    return records


def _run_torchrl(args: argparse.Namespace, env: str, kwargs: dict[str, Any], seeds: list[int]) -> list[dict]:
    from llm_marl_trainers.torchrl_adapter import TeamChatEnv, train_grpo

    team_env = TeamChatEnv(env, args.num_agents, seeds=seeds, group_size=args.group_size, split=args.split, **kwargs)
    records: list[dict] = []

    def on_step(row: Any) -> None:
        records.append({"step": row.step, "wall_time": row.wall_time, "step_time": row.step_time,
                        "peer_reward": row.torchrl_reward, "env_reward": row.env_reward,
                        "trajectories": row.trajectories, "loss": row.loss})
        _line(row.step, args.steps, "TorchRL", row.torchrl_reward, row.env_reward, row.step_time, row.wall_time)

    try:
        train_grpo(team_env, args.steps, learning_rate=args.learning_rate, max_new_tokens=args.max_new_tokens,
                   temperature=args.temperature, on_step=on_step)
    finally:
        team_env.close()
    return records


def versions() -> dict[str, str | None]:
    """Installed versions of the libraries the run depends on."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for package in ("torch", "transformers", "peft", "comlrl", "torchrl", "tensordict", "llm-marl-envs"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def write_json(path: Path, args: argparse.Namespace, env: str, kwargs: dict[str, Any], records: list[dict]) -> None:
    """Settings, versions and per-step records, written atomically."""
    settings = {key: value for key, value in vars(args).items() if key not in ("func", "json")}
    report = {"peer": args.peer, "env": env, "env_kwargs": kwargs, "settings": settings, "versions": versions(),
              "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "steps": records}
    write_figures_json(path, report)
