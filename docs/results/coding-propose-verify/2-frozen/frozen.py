"""PLAN.md's read: each 60-step coding team of 2 against the base model played through the same training steps.

``python frozen.py`` (in this folder; ``metrics.jsonl`` is the frozen run's, copied from its run folder) prints, per
trained run, the per-step pass rate (``episode/pass_rate``, the step's team episodes) minus the frozen run's on the
same step: the mean over steps 31-60 and over all steps, each with its 95 % CI and paired t-test over steps, and the
OLS slope of that difference per 10 steps with its CI; first, the check that step 1 is the same episodes (the trained
run's step 1 equals the frozen run's). Writes ``figures.json``. ``--frozen PATH`` reads another frozen log (a run
still going: the steps both logs have).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import statsmodels.api as sm

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study import stats

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
sys.path.insert(0, str(HERE.parent))
from paired import comparison_entry  # noqa: E402  (the results folder's own reading)

PRIMARY = "2-stopped"
RUNS = {PRIMARY: HERE.parent / "2-stopped" / "team" / "metrics.jsonl",
        "2-float32": HERE.parent / "2-float32" / "team" / "metrics.jsonl",
        "2-cross": HERE.parent / "2-cross" / "team" / "metrics.jsonl",
        "coding-2 (shipped)": ROOT / "baselines" / "teams" / "coding-2" / "metrics.jsonl"}
SECOND_HALF = 31


def by_step(path: Path) -> dict[int, dict]:
    """A training log's metrics rows, by step."""
    return {int(row["step"]): row for row in map(json.loads, path.read_text().splitlines())
            if row.get("step") is not None}


def values(rows: dict[int, dict], key: str) -> dict[int, float]:
    """Per step, ``key`` of the step's row (``episode/pass_rate``: the mean pass rate of its team episodes)."""
    return {step: float(row[key]) for step, row in rows.items()}


POST_HOC = ("reward", "episode/quality", "completion_tokens")
"""Read after the plan's figures, and labelled so: whether training raised its own objective (the step's mean joint
reward) or the quality term, and what it did to the tokens a step, steps 31-60."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frozen", type=Path, default=HERE / "metrics.jsonl")
    parser.add_argument("--out", type=Path, default=HERE / "figures.json")
    args = parser.parse_args(argv)
    frozen_rows = by_step(args.frozen)
    logs = {name: by_step(path) for name, path in RUNS.items()}
    frozen = values(frozen_rows, "episode/pass_rate")
    figures: dict = {"frozen_steps": len(frozen), "frozen_mean": float(np.mean(list(frozen.values()))), "runs": {}}
    print(f"frozen run: {len(frozen)} steps, mean pass rate {figures['frozen_mean']:.3f}\n")
    print("| trained run | step 1 same episodes | steps 31-60: trained − frozen | all steps | slope of the difference "
          "per 10 steps |")
    print("|---|---|---|---|---|")
    for name, rows in logs.items():
        trained = values(rows, "episode/pass_rate")
        steps = sorted(set(trained) & set(frozen))
        same_start = 1 in steps and trained[1] == frozen[1]
        run: dict = {"step_1_same": same_start, "steps": len(steps)}
        cells = []
        for key, chosen in (("second_half", [s for s in steps if s >= SECOND_HALF]), ("all", steps)):
            if len(chosen) < 2:
                run[key] = None
                cells.append("n/a")
                continue
            result = stats.compare([trained[s] for s in chosen], [frozen[s] for s in chosen], paired=True)
            run[key] = comparison_entry(result, "trained", "frozen", count="steps")
            cells.append(f"{result.mean_a:.3f} − {result.mean_b:.3f} = {result.diff:+.3f} "
                         f"[{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f}")
        differences = np.array([trained[s] - frozen[s] for s in steps])
        fit = sm.OLS(differences, sm.add_constant(np.array(steps, dtype=float))).fit()
        low, high = fit.conf_int()[1]
        run["slope_per_10_steps"] = {"slope": 10 * float(fit.params[1]), "ci": [10 * float(low), 10 * float(high)],
                                     "p": float(fit.pvalues[1])}
        cells.append(f"{10 * fit.params[1]:+.4f} [{10 * low:+.4f}, {10 * high:+.4f}], p = {fit.pvalues[1]:.3f}")
        figures["runs"][name] = run
        print(f"| {name} | {'yes' if same_start else 'no'} | " + " | ".join(cells) + " |")
    print("\npost hoc (read after the plan's figures), steps 31-60, trained − frozen:")
    for name, rows in logs.items():
        figures["runs"][name]["post_hoc"] = {}
        for key in POST_HOC:
            trained, base = values(rows, key), values(frozen_rows, key)
            steps = [s for s in sorted(set(trained) & set(base)) if s >= SECOND_HALF]
            if len(steps) < 2:
                continue
            result = stats.compare([trained[s] for s in steps], [base[s] for s in steps], paired=True)
            figures["runs"][name]["post_hoc"][key] = comparison_entry(result, "trained", "frozen", count="steps")
            print(f"  {name}, {key}: {result.mean_a:.3f} − {result.mean_b:.3f} = {result.diff:+.3f} "
                  f"[{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f}")
    write_figures_json(args.out, figures)


if __name__ == "__main__":
    main()
