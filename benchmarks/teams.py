"""``llm-marl teams``: the shipped teams, their learning curves, and putting a trained run into the package.

    llm-marl teams list                              # the shipped teams (env, size, roles, steps, folder)
    llm-marl teams untrained RUN_DIR --steps 10      # the untrained team on the run's first 10 steps' tasks
    llm-marl teams curve RUN_DIR [--out PNG]         # return and final quality per step with running means and the
                                                     # untrained team's, share of zero-std groups
    llm-marl teams ship RUN_DIR --recipe YAML        # copy the team (float16), its metrics and curve into the package

A learning curve reads only ``RUN_DIR/metrics.jsonl`` (one row per step, written by the trainer) and, when present,
``RUN_DIR/untrained.jsonl``: the same metrics for the *untrained* team (adapters at their zero-effect initialisation)
on the same tasks as the run's first steps — the line a trained team's reward should rise above. Both are plain JSON
lines, so the curve is rebuilt without a model.

That line is the untrained team on the *first* steps' tasks, and a run's later steps draw other tasks: with no update
at all a coding run's reward went 0.290 (steps 1-10) to 0.334 (steps 51-60) on its tasks alone
(docs/results/coding-propose-verify/2-frozen). So when ``untrained.jsonl`` covers steps of the last window
(``llm-marl teams untrained RUN_DIR --steps N`` with N the run's steps), the curve also gives trained − untrained on
those very steps, paired by step: the comparison that separates learning from the draw of tasks.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

UNTRAINED_FILE = "untrained.jsonl"
CURVE_FILE = "curve.png"


def register(subparsers: Any) -> None:
    """Add the ``teams`` subcommand to the ``llm-marl`` parser."""
    parser = subparsers.add_parser("teams", help="the shipped teams: list them, draw learning curves, ship a run",
                                   description=__doc__.split("\n\n")[0],
                                   epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="teams_command", metavar="ACTION", required=True)
    commands.add_parser("list", help="the shipped teams").set_defaults(func=run_list)
    untrained = commands.add_parser("untrained", help="the untrained team's metrics on a run's first steps' tasks")
    untrained.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    untrained.add_argument("--steps", type=_positive_int, default=10, help="how many of the run's steps (default 10)")
    untrained.set_defaults(func=run_untrained)
    curve = commands.add_parser("curve", help="a learning curve (PNG) from a run's metrics.jsonl")
    curve.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    curve.add_argument("--out", type=Path, default=None, help=f"PNG path (default RUN_DIR/{CURVE_FILE})")
    curve.add_argument("--window", type=_positive_int, default=10, help="running-mean window in steps (default 10)")
    curve.set_defaults(func=run_curve)
    ship = commands.add_parser("ship", help="copy a trained run's team into the package (baselines/teams/)")
    ship.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    ship.add_argument("--recipe", type=Path, default=None, help="the recipe YAML the run was trained with")
    ship.add_argument("--to", type=Path, default=None, help="destination folder (default: the package's)")
    ship.set_defaults(func=run_ship)


# --------------------------------------------------------------------------------------------------------- curves
def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The JSON rows of a ``.jsonl`` file (blank lines skipped); errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: invalid JSON ({error.msg})") from None
    return rows


def running_mean(values: Sequence[float], window: int) -> list[float]:
    """The mean of each value and the ``window - 1`` before it (fewer at the start), NaNs skipped."""
    means = []
    for index in range(len(values)):
        recent = [v for v in values[max(0, index - window + 1): index + 1] if not math.isnan(v)]
        means.append(sum(recent) / len(recent) if recent else math.nan)
    return means


def curve_figures(run_dir: str | Path, window: int = 10) -> dict[str, Any]:
    """What the curve shows, as numbers: per-step rewards and zero-std shares, the running mean, the untrained
    team's mean reward (``None`` without ``untrained.jsonl``), and the last window's mean."""
    run_dir = Path(run_dir)
    rows = [row for row in read_rows(run_dir / "metrics.jsonl") if not row.get("skipped")]
    if not rows:
        raise ValueError(f"{run_dir / 'metrics.jsonl'}: no steps logged yet")
    steps = [int(row["step"]) for row in rows]
    rewards = [float(row.get("reward", math.nan)) for row in rows]
    quality = [float(row.get("episode/quality", math.nan)) for row in rows]
    zero_std = [float(row.get("frac_reward_zero_std", math.nan)) for row in rows]
    untrained = paired = None
    if (run_dir / UNTRAINED_FILE).is_file():
        base = read_rows(run_dir / UNTRAINED_FILE)
        untrained = {"mean": sum(float(r["reward"]) for r in base) / len(base), "steps": len(base),
                     "quality": sum(float(r.get("episode/quality", math.nan)) for r in base) / len(base),
                     "by_step": {"steps": [int(r["step"]) for r in base if "step" in r],
                                 "mean": [float(r["reward"]) for r in base if "step" in r],
                                 "quality": [float(r.get("episode/quality", math.nan)) for r in base if "step" in r]}}
        by_step = untrained["by_step"]
        paired = _last_window_against_untrained(dict(zip(steps, rewards, strict=True)),
                                                dict(zip(by_step["steps"], by_step["mean"], strict=True)),
                                                steps[-window:])
    means = running_mean(rewards, window)
    return {"steps": steps, "reward": rewards, "running_mean": means, "frac_reward_zero_std": zero_std,
            "quality": quality, "quality_running_mean": running_mean(quality, window),
            "untrained": untrained, "window": window, "last_window_mean": means[-1],
            "last_window_vs_untrained": paired}


def _last_window_against_untrained(trained: dict[int, float], untrained: dict[int, float],
                                   last_window: list[int]) -> dict[str, Any] | None:
    """Trained − untrained reward (each by step) on the last window's steps that the untrained team also played
    (paired t by step, 95 % CI); ``None`` where fewer than two such steps."""
    from llm_marl_benchmarks.study import stats

    shared = [step for step in last_window if step in untrained and not math.isnan(trained[step])]
    if len(shared) < 2:
        return None
    result = stats.compare([trained[s] for s in shared], [untrained[s] for s in shared], paired=True)
    return {"steps": shared, "trained": result.mean_a, "untrained": result.mean_b, "diff": result.diff,
            "ci": [result.diff_ci_low, result.diff_ci_high], "p": result.p}


def plot_curve(run_dir: str | Path, out: str | Path | None = None, window: int = 10) -> Path:
    """Draw ``run_dir``'s learning curve to ``out`` (default ``RUN_DIR/curve.png``) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    figures = curve_figures(run_dir, window)
    title = run_dir.name
    config_path = run_dir / "config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text(encoding="utf-8"))
        title = (f"{config.get('env')} · {config.get('num_agents')} agents · G = {config.get('num_generations')} · "
                 f"{run_dir.name}")
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(8, 7.5), sharex=True, height_ratios=(3, 2, 1))
    untrained = figures["untrained"]
    for axis, values, means, label, key in (
        (top, figures["reward"], figures["running_mean"], "return (mean over the tree's samples)", "mean"),
        (middle, figures["quality"], figures["quality_running_mean"], "quality of the final drafts", "quality"),
    ):
        axis.plot(figures["steps"], values, "o", markersize=3, alpha=0.45, label="per step")
        axis.plot(figures["steps"], means, "-", linewidth=2, label=f"running mean ({window} steps)")
        if untrained is not None and not math.isnan(untrained[key]):
            axis.axhline(untrained[key], color="grey", linestyle="--",
                         label=f"untrained team, same tasks ({untrained['steps']} steps): {untrained[key]:.3f}")
            by_step = untrained["by_step"]
            if len(by_step["steps"]) > window:  # it reaches later steps: show it step by step, on their tasks
                axis.plot(by_step["steps"], by_step[key], "x", color="grey", markersize=3, alpha=0.6,
                          label="untrained team, that step's tasks")
        axis.set_ylabel(label, fontsize=8)
        axis.legend(fontsize=7, loc="best")
        axis.grid(alpha=0.3)
    top.set_title(title, fontsize=10)
    bottom.bar(figures["steps"], figures["frac_reward_zero_std"], color="tab:red", alpha=0.6)
    bottom.set_ylim(0, 1)
    bottom.set_ylabel("zero-std\ngroups")
    bottom.set_xlabel("optimisation step")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(out) if out is not None else run_dir / CURVE_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# ------------------------------------------------------------------------------------------------------- commands
def run_list(args: argparse.Namespace) -> int:
    """``llm-marl teams list``."""
    from llm_marl_baselines.policies.adapters import load_team_manifest
    from llm_marl_baselines.teams import builtin_teams

    teams = builtin_teams()
    if not teams:
        print("no shipped teams")
        return 0
    for (env, size), folder in sorted(teams.items()):
        manifest = load_team_manifest(folder)
        steps = len(read_rows(folder / "metrics.jsonl")) if (folder / "metrics.jsonl").is_file() else "?"
        scheme = manifest.env_kwargs.get("scheme")  # a coding team plays only the scheme it was trained under
        print(f"{env}-{size}: roles {list(manifest.roles)}" + (f" (scheme {scheme})" if scheme else "") +
              f", {steps} training steps, base {manifest.base_model}, {folder}")
    return 0


def run_untrained(args: argparse.Namespace) -> int:
    """``llm-marl teams untrained RUN_DIR``: the untrained team's metrics rows on the run's first steps' tasks."""
    import tempfile

    from llm_marl_benchmarks.progress import Progress
    from llm_marl_trainers import checkpoint
    from llm_marl_trainers.magrpo import MAGRPOTrainer

    try:
        config = checkpoint.read_config(args.run_dir)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"llm-marl teams untrained: {error}") from None
    with tempfile.TemporaryDirectory() as scratch:
        trainer = MAGRPOTrainer(config.replace(output_dir=scratch, report_to="none"))
        rows = []
        print(f"[untrained] {config.env} with {config.num_agents} agents: the untrained team on the tasks of steps "
              f"1-{args.steps} of {args.run_dir}", flush=True)
        with Progress(args.steps, "step", tag="untrained") as progress:
            for step in range(args.steps):
                rows.append(trainer.rollout_metrics(step))
                progress.advance(1, f"step {step + 1}", f": reward {rows[-1]['reward']:.3f}")
    path = args.run_dir / UNTRAINED_FILE
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    mean = sum(row["reward"] for row in rows) / len(rows)
    print(f"[untrained] mean reward {mean:.3f} over {len(rows)} steps -> {path}")
    return 0


def run_curve(args: argparse.Namespace) -> int:
    """``llm-marl teams curve RUN_DIR``."""
    try:
        figures = curve_figures(args.run_dir, args.window)
        out = plot_curve(args.run_dir, args.out, args.window)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"llm-marl teams curve: {error}") from None
    untrained, paired = figures["untrained"], figures["last_window_vs_untrained"]
    against = (f" vs the untrained team's {untrained['mean']:.3f} on the first {untrained['steps']} steps' tasks"
               if untrained
               else f" (no {UNTRAINED_FILE}: run `llm-marl teams untrained {args.run_dir}` for the reference line)")
    if paired is not None:
        against += (f"; on the same {len(paired['steps'])} steps, trained − untrained {paired['diff']:+.3f} "
                    f"[{paired['ci'][0]:+.3f}, {paired['ci'][1]:+.3f}], p = {paired['p']:.3f}")
    elif untrained:
        against += (f" (other tasks than the last window's: `llm-marl teams untrained {args.run_dir} --steps "
                    f"{figures['steps'][-1]}` pairs them step by step)")
    print(f"{len(figures['steps'])} steps; last {args.window}-step mean reward {figures['last_window_mean']:.3f}"
          f"{against}; curve: {out}")
    return 0


def run_ship(args: argparse.Namespace) -> int:
    """``llm-marl teams ship RUN_DIR``."""
    from llm_marl_baselines.teams import ship_team

    try:
        target = ship_team(args.run_dir, args.to, args.recipe)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(f"llm-marl teams ship: {error}") from None
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"shipped {args.run_dir} -> {target} ({size / 1e6:.1f} MB)")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value
