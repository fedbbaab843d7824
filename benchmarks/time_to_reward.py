"""Time to reward: our MAGRPO trainer against CoMLRL's ``MAGRPOTrainer``, held-out team return against wall time.

Both train the same team on the same env with the same model (the offline default SmolLM2-135M-Instruct, float32),
the same LoRA (rank 8, alpha 16 on ``q_proj``/``v_proj``: CoMLRL gets our adapter through
:func:`llm_marl_trainers.comlrl_adapter.magrpo_trainer`; ``--peer-finetuning full`` gives it its own default, full
fine-tuning), the same G, new tokens, turns, learning rate, sampling (temperature 1, top-p 1, top-k 50), the same tasks
in the same order (step ``s`` plays the task ``env.reset(seed=seed·1000003 + s)`` draws) and the same seed, one after
the other on the same machine, each in a fresh interpreter; ``--seeds`` repeats the race per seed and reports the
ratio's spread. Every ``K`` steps (and before the first) training pauses and the team
plays ``E`` held-out tasks (``split="eval"``, seeds ``0..E-1``) greedily, the same way for both (the rollout runner,
one batched ``generate`` per turn); evaluation time is left out of the training wall time.

The report: each trainer's held-out return against training wall time, the race's level ``L``, the wall time each
needs to first reach ``L`` and their ratio (target: ours ≤ 0.5 × CoMLRL's), the held-out returns at equal wall time
beside it, and where the time goes (set-up, generation, update, evaluation)::

    python -m llm_marl_benchmarks.time_to_reward --steps 30 --eval-every 5 --eval-tasks 24 --json R.json --plot R.png
    python -m llm_marl_benchmarks.time_to_reward --seeds 0 1 2 --steps 15 --eval-every 5 --eval-tasks 16 --json R.json
    python -m llm_marl_benchmarks.time_to_reward --steps 2 --eval-every 1 --eval-tasks 2 --group-size 2 \
        --max-new-tokens 16

Every run prints its plan and an estimate first, then one progress line per step and per evaluation.

**The level** (:func:`race_level`) is the untrained team's held-out return ``u`` (the same for both: the same
untrained team plays the same tasks greedily) plus half the larger of the two trainers' gains, ``L = u + ½ ·
max(final_ours − u, final_CoMLRL − u)``. Why this one: the race used to run to CoMLRL's final return, which has no
answer when CoMLRL ends below its untrained team (seed 0 of 15 steps: ours 0.630 → 0.806, CoMLRL 0.630 → 0.577, ratio
n/a), and "a level both reach" has none either when one trainer never improves. This level is symmetric (neither
trainer's curve defines it alone), lies strictly above ``u`` whenever either trainer learned (so reaching it takes
training, never the step-0 evaluation), half way so it is passed while learning rather than decided by the noisy last
evaluation, and the trainer with the larger gain always reaches it (at its final evaluation at the latest).

**The ratio** (:func:`race_ratio`) is ours' wall time to ``L`` over CoMLRL's. A trainer that never reaches ``L`` in
its run needed more than its whole training wall time, so that time stands in for its time to ``L`` and the ratio is
a bound, recorded as such (``ratio_bound``): ``"upper"`` when CoMLRL never got there (the true ratio is smaller),
``"lower"`` when ours never did (the true ratio is larger). Only when neither trainer's final return beats ``u`` is
there nothing to race to (ratio None, with a note). A seed meets the target when its ratio is ≤ 0.5 and is not a lower
bound. Each seed's ``level``, ``ratio`` and ``ratio_bound`` go to the JSON; across seeds the report gives the ratio's
mean, min and max (bounds counted at their value, and how many there were) beside the returns at equal wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json

REPO_ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS: tuple[str, ...] = ("ours", "comlrl")
TOP_K = 50
"""Both trainers sample with top-k 50: transformers' default, which ours uses (CoMLRL's own default is no top-k;
an earlier race gave it that, so the two sampled from different distributions)."""
TARGET_RATIO = 0.5
"""Ours should reach the race's level in at most this share of the wall time CoMLRL needs."""
LEVEL_IS = "untrained return + half the larger of the two trainers' gains (final - untrained)"
# Step times measured on these 2 cores (benchmarks/trainer_step.py, README "Figures measured"): N = 2, G = 4,
# 64 new tokens, ~600-token prompts, fp32: ours 35.8 s, CoMLRL with our LoRA 37.5 s (full fine-tuning 57.6 s).
REFERENCE_STEP_S: dict[str, float] = {"ours": 35.8, "comlrl_lora": 37.5, "comlrl_full": 57.6}
REFERENCE_COMPLETION_TOKENS = 2 * 4 * 64
EVAL_FIXED_S = 8.0
"""Seconds an evaluation costs besides its episodes (envs, reading the prompts): measured 10-13 s for 2 tasks at 16
tokens on these cores."""
EVAL_EPISODE_S = 2.4
"""Seconds per held-out episode at 64 new tokens, one turn, 2 agents (the study's 25 episodes a minute)."""


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m llm_marl_benchmarks.time_to_reward",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="writing", help="env name (default writing)")
    parser.add_argument("--num-agents", type=int, default=2, help="team size (default 2)")
    parser.add_argument("--steps", type=int, default=30, help="optimisation steps of each trainer (default 30)")
    parser.add_argument("--eval-every", type=int, default=5, metavar="K", help="evaluate every K steps (default 5)")
    parser.add_argument("--eval-tasks", type=int, default=24, metavar="E",
                        help="held-out tasks per evaluation (default 24)")
    parser.add_argument("--group-size", type=int, default=4, help="G (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="new tokens per completion (default 64)")
    parser.add_argument("--turns", type=int, default=1, help="turns per episode (default 1)")
    parser.add_argument("--learning-rate", type=float, default=5e-4, help="AdamW learning rate (default 5e-4)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, metavar="SEED",
                        help="race once per seed (each seed: its own training tasks, sampling and adapter "
                             "initialisation; the same held-out tasks) and report the ratio's spread; overrides --seed")
    parser.add_argument("--similarity", default="tfidf", choices=("tfidf", "minilm", "auto"),
                        help="the env's similarity backend (default tfidf)")
    parser.add_argument("--executor", default="auto", choices=("auto", "docker", "bwrap", "local"),
                        help="coding's sandbox")
    parser.add_argument("--peer-finetuning", default="lora", choices=("lora", "full"),
                        help="CoMLRL's trainable parameters: our LoRA (default) or full fine-tuning (its default)")
    parser.add_argument("--only", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS),
                        help="run only these trainers (the comparison needs both)")
    parser.add_argument("--json", default=None, metavar="PATH", help="write settings, curves and figures here")
    parser.add_argument("--plot", default=None, metavar="PATH", help="draw held-out return against wall time here")
    parser.add_argument("--workdir", default=None, help="where children write (default: a temporary folder)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return parser


def settings_of(args: argparse.Namespace, seed: int | None = None) -> dict[str, Any]:
    """The race's settings, as the children read them (``seed``: this race's, default ``--seed``)."""
    from llm_marl_envs.registry import env_spec

    seed = args.seed if seed is None else seed
    env = env_spec(args.env).name
    env_kwargs: dict[str, Any] = {"max_turns": args.turns, "similarity": args.similarity}
    if env == "coding":
        env_kwargs["executor"] = args.executor
    return {"env": env, "num_agents": args.num_agents, "steps": args.steps, "eval_every": args.eval_every,
            "eval_tasks": args.eval_tasks, "group_size": args.group_size, "max_new_tokens": args.max_new_tokens,
            "turns": args.turns, "learning_rate": args.learning_rate, "seed": seed, "env_kwargs": env_kwargs,
            "peer_finetuning": args.peer_finetuning, "lora_r": 8, "lora_alpha": 16, "temperature": 1.0,
            "top_p": 1.0, "top_k": TOP_K, "dtype": "float32",
            "train_seeds": [seed * 1_000_003 + step for step in range(args.steps)],
            "eval_seeds": list(range(args.eval_tasks))}


def check(args: argparse.Namespace) -> None:
    """Bad settings fail here, before anything loads: positive counts, a known env that takes the team size."""
    from llm_marl_envs.registry import make_env

    for name in ("num_agents", "steps", "eval_every", "eval_tasks", "max_new_tokens", "turns"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')}: expected an int >= 1, got {getattr(args, name)}")
    if args.group_size < 2:
        raise SystemExit(f"--group-size: expected >= 2 (a group baseline needs two samples), got {args.group_size}")
    try:
        settings = settings_of(args)
        env = make_env(settings["env"], num_agents=args.num_agents, **settings["env_kwargs"])
        held_out = len(env.task_source.ids("eval"))
        env.close()
    except (TypeError, ValueError, KeyError) as error:
        raise SystemExit(f"time_to_reward: {error}") from None
    if args.eval_tasks > held_out:
        raise SystemExit(f"--eval-tasks: the {settings['env']} env has {held_out} held-out tasks, got "
                         f"{args.eval_tasks}")


# ----------------------------------------------------------------------------------------------------------------
# The plan and its estimate
# ----------------------------------------------------------------------------------------------------------------


def estimate(settings: dict[str, Any], frameworks: Sequence[str]) -> dict[str, float]:
    """Seconds each part should take, scaled from step times measured on these 2 cores (:data:`REFERENCE_STEP_S`):
    linear in the completion tokens of a step (N·G per node, times the aligned tree's nodes), evaluation from
    :data:`EVAL_FIXED_S` and :data:`EVAL_EPISODE_S`."""
    tokens = settings["num_agents"] * settings["group_size"] * settings["max_new_tokens"]
    tree = sum(settings["group_size"] ** t for t in range(settings["turns"]))  # aligned tree nodes per episode
    scale = max(0.25, tokens * tree / REFERENCE_COMPLETION_TOKENS)
    evaluations = settings["steps"] // settings["eval_every"] + 1 + (settings["steps"] % settings["eval_every"] > 0)
    episode_s = EVAL_EPISODE_S * settings["num_agents"] / 2 * (0.3 + 0.7 * settings["max_new_tokens"] / 64)
    evaluation_s = settings["turns"] * (EVAL_FIXED_S + settings["eval_tasks"] * episode_s)
    out = {}
    for framework in frameworks:
        key = "ours" if framework == "ours" else f"comlrl_{settings['peer_finetuning']}"
        out[f"{framework}_train_s"] = REFERENCE_STEP_S[key] * scale * settings["steps"]
        out[f"{framework}_eval_s"] = evaluations * evaluation_s
        out[f"{framework}_setup_s"] = 20.0  # a fresh interpreter: imports, the model from its cache, the envs
    out["total_s"] = sum(out.values())
    return out


def print_plan(settings: dict[str, Any], frameworks: Sequence[str]) -> None:
    """What will run, and for how long."""
    from llm_marl_benchmarks.progress import duration

    guess = estimate(settings, frameworks)
    print(f"[race] {' then '.join(frameworks)} on {settings['env']} ({settings['num_agents']} agents, "
          f"{settings['turns']} turn(s)), default model fp32, G = {settings['group_size']}, "
          f"{settings['max_new_tokens']} new tokens, lr {settings['learning_rate']:g}, {settings['steps']} steps each; "
          f"held-out return over {settings['eval_tasks']} eval tasks every {settings['eval_every']} steps (greedy); "
          f"CoMLRL fine-tunes {'our LoRA' if settings['peer_finetuning'] == 'lora' else 'full models'}", flush=True)
    parts = ", ".join(f"{f}: train {duration(guess[f'{f}_train_s'])} + eval {duration(guess[f'{f}_eval_s'])}"
                      for f in frameworks)
    print(f"[race] estimate ≈ {duration(guess['total_s'])} in all ({parts}; from step times measured on these 2 "
          f"cores, scaled to this step's completion tokens)", flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Children: one trainer each, in a fresh interpreter
# ----------------------------------------------------------------------------------------------------------------


class _Curve:
    """Training wall time (evaluations left out), per-step rows and the held-out curve of one trainer."""

    def __init__(self, framework: str, settings: dict[str, Any], tag: str) -> None:
        from llm_marl_benchmarks.progress import Progress

        self.framework, self.settings = framework, settings
        self.points: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.eval_s = 0.0
        self.progress = Progress(settings["steps"], "step", tag=tag)

    def evaluate(self, policy: Any, step: int, wall: float) -> None:
        """Play the held-out tasks with ``policy`` and add a point at ``(step, wall)``."""
        started = time.perf_counter()
        returns, quality = held_out_returns(policy, self.settings)
        seconds = time.perf_counter() - started
        self.eval_s += seconds
        mean = sum(returns) / len(returns)
        self.points.append({"step": step, "wall_time": wall, "eval_return": mean, "eval_quality": quality,
                            "eval_returns": returns, "eval_s": seconds})
        self.progress.write(f"[{self.progress.tag}] held-out return {mean:.4f} (quality {quality:.3f}) at step "
                            f"{step}, {wall:.1f} s of training; {len(returns)} tasks in {seconds:.1f} s")

    def step(self, step: int, wall: float, step_time: float, generation_time: float, reward: float) -> None:
        """Record one training step and print its line."""
        self.steps.append({"step": step, "wall_time": wall, "step_time": step_time,
                           "generation_time": generation_time, "train_reward": reward})
        self.progress.advance(1, event=f"step {step}",
                              detail=f": train reward {reward:.4f}, step {step_time:.1f} s "
                                     f"(generation {generation_time:.1f} s), {wall:.1f} s of training")

    def due(self, step: int) -> bool:
        """Whether an evaluation follows step ``step``."""
        return step % self.settings["eval_every"] == 0 or step == self.settings["steps"]


def held_out_returns(policy: Any, settings: dict[str, Any]) -> tuple[list[float], float]:
    """Team returns of the held-out tasks (seeds ``eval_seeds`` of the eval split) with ``policy`` (a rollout-runner
    policy), and the mean final quality."""
    import torch

    from llm_marl_envs.registry import make_env
    from llm_marl_envs.rollout import run_episodes

    envs = [make_env(settings["env"], num_agents=settings["num_agents"], **settings["env_kwargs"])
            for _ in settings["eval_seeds"]]
    try:
        with torch.no_grad():
            trajectories = run_episodes(envs, policy, seeds=settings["eval_seeds"], options={"split": "eval"})
    finally:
        for env in envs:
            env.close()
    returns = [float(t.team_return) for t in trajectories]
    qualities = [float(t.final_info.get("reward_components", {}).get("quality") or 0.0) for t in trajectories]
    return returns, sum(qualities) / len(qualities)


def _greedy(settings: dict[str, Any]) -> Any:
    from llm_marl_baselines.policies.base import GenerationSettings

    return GenerationSettings(temperature=0.0, top_p=1.0, max_new_tokens=settings["max_new_tokens"], seed=0)


def run_ours(settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Our trainer (:class:`llm_marl_trainers.magrpo.MAGRPOTrainer`), evaluated through its own team model."""
    from llm_marl_trainers.config import TrainerConfig
    from llm_marl_trainers.magrpo import MAGRPOTrainer

    started = time.perf_counter()
    config = TrainerConfig(
        env=settings["env"], num_agents=settings["num_agents"], env_kwargs=settings["env_kwargs"], model="default",
        dtype=settings["dtype"], num_generations=settings["group_size"], joint_mode="aligned", envs_per_step=1,
        max_completion_length=settings["max_new_tokens"], temperature=settings["temperature"],
        top_p=settings["top_p"], loss_type="magrpo", learning_rate=settings["learning_rate"],
        lora_r=settings["lora_r"], lora_alpha=settings["lora_alpha"], steps=settings["steps"], seed=settings["seed"],
        output_dir=str(workdir / "ours"), save_steps=settings["steps"], report_to="none")
    trainer = MAGRPOTrainer(config)
    setup_s = time.perf_counter() - started
    curve = _Curve("ours", settings, "race ours")
    policy = trainer.team.as_rollout_policy(_greedy(settings), logprobs=False)

    def evaluate(step: int, wall: float) -> None:
        trainer.team.eval()
        curve.evaluate(policy, step, wall)

    evaluate(0, 0.0)
    excluded = 0.0
    begin = time.perf_counter()

    def on_step(row: dict[str, Any]) -> None:
        nonlocal excluded
        now = time.perf_counter()
        wall = now - begin - excluded
        curve.step(row["step"], wall, row["step_time"], row["generation_time"], row["reward"])
        if curve.due(row["step"]):
            evaluate(row["step"], wall)
        excluded += time.perf_counter() - now

    trainer.train(on_step=on_step)
    return {"setup_s": setup_s, "points": curve.points, "steps": curve.steps, "eval_s": curve.eval_s,
            "total_s": time.perf_counter() - started}


def _agent_models_policy(agents: Sequence[Any], roles: Sequence[str], tokenizer: Any, settings: dict[str, Any]) -> Any:
    """CoMLRL's per-agent models as a rollout-runner policy: each role's requests are generated by its own model
    (llm_marl_baselines.policies.local.generate_actions, the local policy's batched path)."""
    from llm_marl_baselines.models import LoadedModel
    from llm_marl_baselines.policies.base import Policy
    from llm_marl_baselines.policies.local import generate_actions

    by_role = dict(zip(roles, agents, strict=True))

    class AgentModels(Policy):
        name = "comlrl-agents"

        def _act(self, requests: list[Any], generation: Any) -> list[str]:
            out: list[str | None] = [None] * len(requests)
            for role, model in by_role.items():
                rows = [i for i, r in enumerate(requests) if r.agent == role]
                if not rows:
                    continue
                loaded = LoadedModel(model=model, tokenizer=tokenizer, source="comlrl", dtype="float32", device="cpu")
                for row, text in zip(rows, generate_actions(loaded, [requests[i] for i in rows], generation,
                                                            model=model), strict=True):
                    out[row] = text
            return [text or "" for text in out]

    return AgentModels().as_rollout_policy(_greedy(settings), records=False)


def run_comlrl(settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """CoMLRL's own ``MAGRPOTrainer.train()`` (:func:`llm_marl_trainers.comlrl_adapter.train_magrpo`), evaluated per
    agent."""
    import torch

    from llm_marl_trainers.comlrl_adapter import import_comlrl, magrpo_trainer, train_magrpo

    started = time.perf_counter()
    torch.manual_seed(settings["seed"])
    MAGRPOConfig, _ = import_comlrl()
    args = MAGRPOConfig(num_agents=settings["num_agents"], num_turns=settings["turns"],
                        num_generations=settings["group_size"], max_new_tokens=settings["max_new_tokens"],
                        num_train_epochs=1, eval_interval=0, early_termination_threshold=None,
                        rollout_buffer_size=1, temperature=settings["temperature"], top_p=settings["top_p"],
                        top_k=settings["top_k"], agent_learning_rate=settings["learning_rate"], joint_mode="aligned")
    env_kwargs = {k: v for k, v in settings["env_kwargs"].items() if k != "max_turns"}
    trainer = magrpo_trainer(settings["env"], settings["num_agents"], args=args, seeds=settings["train_seeds"],
                             peft_config="default" if settings["peer_finetuning"] == "lora" else None,
                             dtype=settings["dtype"], **env_kwargs)
    trainer.verbose = False
    setup_s = time.perf_counter() - started
    curve = _Curve("comlrl", settings, "race comlrl")
    policy = _agent_models_policy(trainer.agents, trainer.bridge.agents, trainer.tokenizer, settings)

    def evaluate(step: int, wall: float) -> None:
        for agent in trainer.agents:
            agent.eval()
        try:
            curve.evaluate(policy, step, wall)
        finally:
            for agent in trainer.agents:  # CoMLRL trains with its agents in train mode (MAGRPOTrainer.train)
                agent.train()

    evaluate(0, 0.0)

    def on_step(row: Any) -> None:  # train_magrpo leaves this callback out of the wall time
        curve.step(row.step, row.wall_time, row.step_time, row.generation_time, row.peer_reward)
        if curve.due(row.step):
            evaluate(row.step, row.wall_time)

    try:
        train_magrpo(trainer, on_step=on_step, replay=False)
    finally:
        trainer.bridge.close()
    return {"setup_s": setup_s, "points": curve.points, "steps": curve.steps, "eval_s": curve.eval_s,
            "total_s": time.perf_counter() - started}


RUNNERS = {"ours": run_ours, "comlrl": run_comlrl}


def run_child(framework: str, spec_path: Path) -> None:
    """One trainer's race (the parent's spec in, its result JSON out)."""
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    result = RUNNERS[framework](spec["settings"], Path(spec["workdir"]))
    Path(spec["out"]).write_text(json.dumps(result), encoding="utf-8")


def run_framework(framework: str, settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Run one trainer in a fresh interpreter, streaming its progress lines; its result (or ``error``)."""
    spec_path, out_path = workdir / f"{framework}.spec.json", workdir / f"{framework}.out.json"
    spec_path.write_text(json.dumps({"settings": settings, "workdir": str(workdir), "out": str(out_path)}),
                         encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "llm_marl_benchmarks.time_to_reward", "--child", framework, str(spec_path)]
    tail: list[str] = []
    with subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("[race"):
                print(line, end="", flush=True)
            tail = [*tail, line][-40:]
    if process.returncode != 0 or not out_path.is_file():
        return {"error": f"exit status {process.returncode}; output tail:\n{''.join(tail)}"}
    return json.loads(out_path.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------------------------------------------
# The comparison
# ----------------------------------------------------------------------------------------------------------------


def race_level(ours: Sequence[dict[str, Any]], peer: Sequence[dict[str, Any]]) -> float:
    """The race's level from the two held-out curves (points in step order, the first at step 0, untrained): the
    untrained return plus half the larger of the two gains (final minus untrained); see the module docstring."""
    untrained = (ours[0]["eval_return"] + peer[0]["eval_return"]) / 2  # the same team and tasks: equal but for rounding
    gain = max(ours[-1]["eval_return"] - untrained, peer[-1]["eval_return"] - untrained)
    return untrained + gain / 2


def first_reach(points: Sequence[dict[str, Any]], level: float) -> dict[str, Any] | None:
    """The first evaluation point after training began (step > 0) whose held-out return is at least ``level``
    (None if none)."""
    return next((p for p in points if p["step"] > 0 and p["eval_return"] >= level - 1e-12), None)


def race_ratio(ours: Sequence[dict[str, Any]], peer: Sequence[dict[str, Any]], level: float) -> dict[str, Any]:
    """Each trainer's training wall time to first reach ``level`` and the ratio ours / CoMLRL's.

    A trainer that never reaches it is given its whole training wall time (its last evaluation's), which it needed
    more than: the ratio is then an ``"upper"`` bound (CoMLRL never reached it) or a ``"lower"`` bound (ours never
    did). If neither trainer's final return beats the untrained one's, there is no race (``ratio`` None)."""
    untrained = (ours[0]["eval_return"] + peer[0]["eval_return"]) / 2
    reached = {"ours": first_reach(ours, level), "comlrl": first_reach(peer, level)}
    out: dict[str, Any] = {
        "ours_wall_to_level_s": reached["ours"]["wall_time"] if reached["ours"] else None,
        "comlrl_wall_to_level_s": reached["comlrl"]["wall_time"] if reached["comlrl"] else None,
        "ours_step_at_level": reached["ours"]["step"] if reached["ours"] else None,
        "comlrl_step_at_level": reached["comlrl"]["step"] if reached["comlrl"] else None,
        "ratio": None, "ratio_bound": None, "note": None,
    }
    learned = max(ours[-1]["eval_return"], peer[-1]["eval_return"]) > untrained
    if not learned or not (reached["ours"] or reached["comlrl"]):
        out["note"] = "neither trainer's final held-out return beat the untrained team's: nothing to race to, no ratio"
        return out
    ours_s = reached["ours"]["wall_time"] if reached["ours"] else ours[-1]["wall_time"]
    peer_s = reached["comlrl"]["wall_time"] if reached["comlrl"] else peer[-1]["wall_time"]
    out["ratio"] = ours_s / peer_s
    if not reached["comlrl"]:
        out["ratio_bound"] = "upper"
        out["note"] = (f"CoMLRL never reached the level in its {peer_s / 60:.1f} min of training: the ratio uses that "
                       "time, an upper bound on ours / CoMLRL's")
    elif not reached["ours"]:
        out["ratio_bound"] = "lower"
        out["note"] = (f"ours never reached the level in its {ours_s / 60:.1f} min of training: the ratio uses that "
                       "time, a lower bound on ours / CoMLRL's")
    return out


def meets_target(ratio: float | None, bound: str | None) -> bool:
    """Whether a seed's ratio shows ours at or under :data:`TARGET_RATIO` (a lower bound shows nothing of the kind)."""
    return ratio is not None and bound != "lower" and ratio <= TARGET_RATIO


def at_wall(points: Sequence[dict[str, Any]], wall: float) -> dict[str, Any]:
    """The last evaluation point at or before ``wall`` seconds of training."""
    return [p for p in points if p["wall_time"] <= wall + 1e-9][-1]


def time_split(result: dict[str, Any]) -> dict[str, float]:
    """Where one trainer's time went: set-up, generation, update (step minus generation), evaluation."""
    steps = result["steps"]
    generation = sum(s["generation_time"] for s in steps)
    stepping = sum(s["step_time"] for s in steps)
    return {"setup_s": result["setup_s"], "generation_s": generation, "update_s": stepping - generation,
            "train_wall_s": steps[-1]["wall_time"] if steps else 0.0, "eval_s": result["eval_s"],
            "mean_step_s": stepping / len(steps) if steps else float("nan"),
            "mean_generation_s": generation / len(steps) if steps else float("nan")}


def compare(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The race's figures for one seed (see the module docstring)."""
    ours, peer = results["ours"]["points"], results["comlrl"]["points"]
    level = race_level(ours, peer)
    race = race_ratio(ours, peer, level)
    equal_wall = min(ours[-1]["wall_time"], peer[-1]["wall_time"])
    return {
        "level": level, "level_is": LEVEL_IS, **race, "target": TARGET_RATIO,
        "meets_target": meets_target(race["ratio"], race["ratio_bound"]),
        "equal_wall_s": equal_wall, "ours_at_equal_wall": at_wall(ours, equal_wall)["eval_return"],
        "comlrl_at_equal_wall": at_wall(peer, equal_wall)["eval_return"],
        "untrained": {"ours": ours[0]["eval_return"], "comlrl": peer[0]["eval_return"]},
        "final": {"ours": ours[-1]["eval_return"], "comlrl": peer[-1]["eval_return"]},
        "time": {name: time_split(result) for name, result in results.items()},
    }


def summarize(comparisons: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Across seeds: each seed's level and ratio (and whether it is a bound), the ratio's mean, min and max, and
    beside them the held-out returns at equal wall time."""
    ratios = [c["ratio"] for c in comparisons]
    known = [r for r in ratios if r is not None]
    bounds = [c["ratio_bound"] for c in comparisons]
    ours_equal = [c["ours_at_equal_wall"] for c in comparisons]
    peer_equal = [c["comlrl_at_equal_wall"] for c in comparisons]
    gaps = [o - p for o, p in zip(ours_equal, peer_equal, strict=True)]
    step_ratio = [c["time"]["ours"]["mean_step_s"] / c["time"]["comlrl"]["mean_step_s"] for c in comparisons]
    return {
        "levels": [c["level"] for c in comparisons], "ratios": ratios, "ratio_bounds": bounds,
        "ratio_mean": sum(known) / len(known) if known else None,
        "ratio_min": min(known) if known else None, "ratio_max": max(known) if known else None,
        "ratio_bounds_count": {"upper": bounds.count("upper"), "lower": bounds.count("lower")},
        "seeds_meeting_target": sum(1 for c in comparisons if c["meets_target"]), "target": TARGET_RATIO,
        "ours_at_equal_wall": ours_equal, "comlrl_at_equal_wall": peer_equal,
        "equal_wall_gap": gaps, "equal_wall_gap_mean": sum(gaps) / len(gaps) if gaps else None,
        "step_time_ratio": step_ratio,
    }


def format_ratio(ratio: float | None, bound: str | None) -> str:
    """``0.42``, ``<0.12`` (an upper bound), ``>0.54`` (a lower bound) or ``n/a``."""
    if ratio is None:
        return "n/a"
    return {"upper": "<", "lower": ">"}.get(bound or "", "") + f"{ratio:.2f}"


def print_report(report: dict[str, Any]) -> None:
    """The figures, as lines (one block per seed, then the spread across seeds)."""
    for run in report.get("runs", []):
        print(f"[race] seed {run['settings']['seed']}:")
        print_report(run)
    summary = report.get("summary")
    if summary:
        shown = ", ".join(format_ratio(r, b) for r, b in zip(summary["ratios"], summary["ratio_bounds"], strict=True))
        spread = ("n/a" if summary["ratio_mean"] is None else f"mean {summary['ratio_mean']:.2f}, min "
                  f"{summary['ratio_min']:.2f}, max {summary['ratio_max']:.2f}")
        counted = summary["ratio_bounds_count"]
        print(f"[race] over {len(summary['ratios'])} seeds: ratio {shown} ({spread}; bounds counted at their value: "
              f"{counted['upper']} upper, {counted['lower']} lower; target ≤ {summary['target']}: met by "
              f"{summary['seeds_meeting_target']}); levels " + ", ".join(f"{v:.3f}" for v in summary["levels"]))
        print("[race] held-out return at equal time, ours vs CoMLRL: "
              + ", ".join(f"{o:.3f} vs {p:.3f}" for o, p in zip(summary["ours_at_equal_wall"],
                                                               summary["comlrl_at_equal_wall"], strict=True))
              + " (ours minus CoMLRL " + ", ".join(f"{g:+.3f}" for g in summary["equal_wall_gap"])
              + "); our step / CoMLRL's " + ", ".join(f"{r:.2f}" for r in summary["step_time_ratio"]))
    if "results" not in report:
        return
    for name, result in report["results"].items():
        if "error" in result:
            print(f"[race] {name} FAILED: {result['error']}")
            continue
        curve = ", ".join(f"{p['eval_return']:.3f}@{p['wall_time'] / 60:.1f}min" for p in result["points"])
        print(f"[race] {name}: held-out return by training time: {curve}")
    comparison = report.get("comparison")
    if not comparison:
        return
    c = comparison
    ours_to = "never" if c["ours_wall_to_level_s"] is None else f"{c['ours_wall_to_level_s'] / 60:.1f} min"
    peer_to = "never" if c["comlrl_wall_to_level_s"] is None else f"{c['comlrl_wall_to_level_s'] / 60:.1f} min"
    ratio = format_ratio(c["ratio"], c["ratio_bound"])
    print(f"[race] level L = {c['level']:.4f}, the {c['level_is']} (untrained: ours "
          f"{c['untrained']['ours']:.4f}, CoMLRL {c['untrained']['comlrl']:.4f}; final: ours "
          f"{c['final']['ours']:.4f}, CoMLRL {c['final']['comlrl']:.4f})")
    print(f"[race] time to reach L: ours {ours_to}, CoMLRL {peer_to}; ratio {ratio} (target ≤ {c['target']}: "
          f"{'met' if c['meets_target'] else 'not met'}){'; ' + c['note'] if c['note'] else ''}")
    print(f"[race] at equal training time ({c['equal_wall_s'] / 60:.1f} min): ours {c['ours_at_equal_wall']:.4f}, "
          f"CoMLRL {c['comlrl_at_equal_wall']:.4f}")
    for name, split in c["time"].items():
        print(f"[race] {name} time: set-up {split['setup_s']:.0f} s, generation {split['generation_s']:.0f} s, "
              f"update {split['update_s']:.0f} s ({split['mean_step_s']:.1f} s a step, "
              f"{split['mean_generation_s']:.1f} s of it generating), evaluation {split['eval_s']:.0f} s")


def plot(report: dict[str, Any], path: Path) -> None:
    """Held-out return against training wall time, both trainers, with the level line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"ours": "ours (llm_marl_trainers.magrpo)", "comlrl": "CoMLRL MAGRPOTrainer"}
    colors = {"ours": "tab:blue", "comlrl": "tab:orange"}
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    runs = report.get("runs") or [report]
    for index, run in enumerate(runs):
        seed = f" seed {run['settings']['seed']}" if len(runs) > 1 else ""
        for name, result in run["results"].items():
            if "error" in result:
                continue
            points = result["points"]
            axes.plot([p["wall_time"] / 60 for p in points], [p["eval_return"] for p in points], marker="o",
                      markersize=3, color=colors.get(name), alpha=1.0 if len(runs) == 1 else 0.75,
                      linestyle=["-", "--", ":", "-."][index % 4], label=labels.get(name, name) + seed)
        if run.get("comparison") and len(runs) == 1:
            axes.axhline(run["comparison"]["level"], color="grey", linestyle="--", linewidth=1,
                         label="the race's level")
    s = runs[0]["settings"]
    axes.set_xlabel("training wall time (min, 2 CPU cores; evaluation excluded)")
    axes.set_ylabel(f"held-out team return ({s['eval_tasks']} tasks)")
    axes.set_title(f"{s['env']}, {s['num_agents']} agents, G={s['group_size']}, {s['max_new_tokens']} tokens, "
                   f"{s['steps']} steps", fontsize=10)
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def versions() -> dict[str, str | None]:
    """Installed versions of the libraries the race depends on."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for package in ("torch", "transformers", "peft", "comlrl", "llm-marl-envs"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Run the race (or, with ``--child``, one side of it)."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.child is not None:
        if args.child not in FRAMEWORKS or len(rest) != 1:
            parser.error("--child FRAMEWORK SPEC.json")
        run_child(args.child, Path(rest[0]))
        return 0
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    check(args)
    seeds = list(dict.fromkeys(args.seeds)) if args.seeds else [args.seed]
    frameworks = [f for f in FRAMEWORKS if f in args.only]
    print_plan(settings_of(args, seeds[0]), frameworks)
    if len(seeds) > 1:
        print(f"[race] {len(seeds)} seeds ({', '.join(map(str, seeds))}): {len(seeds)} races one after another")
    started = time.perf_counter()
    runs = []
    with tempfile.TemporaryDirectory(prefix="time-to-reward-") as scratch:
        workdir = Path(args.workdir) if args.workdir else Path(scratch)
        for seed in seeds:
            settings = settings_of(args, seed)
            results: dict[str, dict[str, Any]] = {}
            seed_dir = workdir / f"seed-{seed}" if len(seeds) > 1 else workdir
            seed_dir.mkdir(parents=True, exist_ok=True)
            for framework in frameworks:
                results[framework] = run_framework(framework, settings, seed_dir)
            run: dict[str, Any] = {"settings": settings, "results": results}
            if all(f in results and "error" not in results[f] for f in FRAMEWORKS):
                run["comparison"] = compare(results)
            runs.append(run)
    header = {"benchmark": "time_to_reward", "versions": versions(), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "wall_s": time.perf_counter() - started,
              "command": "python -m llm_marl_benchmarks.time_to_reward "
              + " ".join(sys.argv[1:] if argv is None else argv)}
    if len(runs) == 1:
        report: dict[str, Any] = {**header, **runs[0]}
    else:
        report = {**header, "settings": runs[0]["settings"], "seeds": seeds, "runs": runs}
        comparisons = [run["comparison"] for run in runs if "comparison" in run]
        if len(comparisons) == len(runs):
            report["summary"] = summarize(comparisons)
    print_report(report)
    if args.json:
        path = write_figures_json(args.json, report)
        print(f"[race] wrote {path}")
    if args.plot:
        plot(report, Path(args.plot))
        print(f"[race] wrote {args.plot}")
    return 0 if all("error" not in r for run in runs for r in run["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
