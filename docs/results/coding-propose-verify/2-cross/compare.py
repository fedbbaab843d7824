"""Look 1 of PLAN.md (the train split, a probe): the cross-trained team of 2 against its aligned control and one
agent's best of 2, candidate by candidate on turn 1. Written with the plan, before any run.

``python compare.py`` (in this folder, with ``train-cross/`` holding the cross team's and best of 2's rows and
``train-control/`` the control team's, on the same pairs) prints, per condition, the turn-1 split of the sent
program's held-out score (one candidate + the second candidate's gain + what the choice keeps = sent; the study
report's :func:`~llm_marl_benchmarks.study.report.candidate_terms`), phi of the two candidates' "passes any held-out
test", each term cross − control and cross − best of 2 (paired by task and seed, 95 % CI, paired t), the final pass
rates, the plan's decision, and each training run's cost a step; it writes ``figures.json``.
``--cross DIR --control DIR`` reads other folders (the script's own check runs it on an earlier log).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study import stats
from llm_marl_benchmarks.study.report import BEST_OF_N, CANDIDATE_TERMS, candidate_terms, turn_one_candidates
from llm_marl_envs.envs.coding.tasks import load_humaneval

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from paired import comparison_entry, load, phi_interval, training_figures  # noqa: E402  (the results folder's own reading)

CROSS, CONTROL = "cross", "control"
RUNS = {"cross": HERE / "team" / "metrics.jsonl",
        "control, stopped": HERE.parent / "2-stopped" / "team" / "metrics.jsonl",
        "control, float32": HERE.parent / "2-float32" / "team" / "metrics.jsonl"}


def turn_one(rows: list[dict]) -> dict[tuple[str, int], tuple[dict[str, float], list[float]]]:
    """Per (task, seed): the turn-1 split of the sent program and the candidates' scores (rows that log them; logs
    older than ``turn_tests``' ``held_out_total`` take it from the task data)."""
    tasks = load_humaneval()
    read = {}
    for row in rows:
        found = turn_one_candidates(row, len(tasks.get(str(row["task"]))["held_out_tests"]))
        if found is not None:
            scores, sent = found
            read[(str(row["task"]), int(row["seed"]))] = (candidate_terms(scores, sent), scores)
    return read


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cross", type=Path, default=HERE / "train-cross")
    parser.add_argument("--control", type=Path, default=HERE / "train-control")
    parser.add_argument("--out", type=Path, default=HERE / "figures.json")
    args = parser.parse_args(argv)
    cross_rows = load(args.cross)
    by_condition = {CROSS: [r for r in cross_rows if r["condition"] == "trained"],
                    BEST_OF_N: [r for r in cross_rows if r["condition"] == BEST_OF_N],
                    CONTROL: [r for r in load(args.control) if r["condition"] == "trained"]}
    reads = {c: turn_one(rows) for c, rows in by_condition.items()}
    pairs = sorted(set.intersection(*(set(read) for read in reads.values())))
    if not pairs:
        raise SystemExit("no (task, seed) pair is logged with turn-1 candidates by all three conditions")
    finals = {c: {(str(r["task"]), int(r["seed"])): float(r["pass_rate"]) for r in rows}
              for c, rows in by_condition.items()}
    figures: dict = {"pairs": len(pairs), "turn": 1, "conditions": {}, "cross - control": {},
                     f"cross - {BEST_OF_N}": {}}
    print(f"{len(pairs)} pairs (task, seed), turn 1; a candidate's score is its share of the task's held-out tests\n")
    print("| turn 1 | " + " | ".join(c for c in reads) + " | cross − control | cross − best of 2 |")
    print("|---" * (len(reads) + 3) + "|")
    for term in CANDIDATE_TERMS:
        values = {c: [reads[c][p][0][term] for p in pairs] for c in reads}
        for c in reads:
            figures["conditions"].setdefault(c, {})[term] = float(np.mean(values[c]))
        cells = []
        for other, key in ((CONTROL, "cross - control"), (BEST_OF_N, f"cross - {BEST_OF_N}")):
            result = stats.compare(values[CROSS], values[other], paired=True)
            figures[key][term] = comparison_entry(result, count="n")
            cells.append(f"{result.diff:+.3f} [{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], "
                         f"p = {result.p:.3f}")
        print(f"| {term.replace('_', ' ')} | " + " | ".join(f"{np.mean(values[c]):.3f}" for c in reads) + " | "
              + " | ".join(cells) + " |")
    passing = {c: [[reads[c][p][1][i] > 0 for p in pairs] for i in (0, 1)] for c in reads}
    for c in reads:
        value, low, high = phi_interval(*passing[c])
        figures["conditions"][c]["phi"] = value
        figures["conditions"][c]["phi_ci"] = [low, high]
        figures["conditions"][c]["final_pass_rate"] = float(np.mean([finals[c][p] for p in pairs]))
    print("phi (two candidates pass any held-out test together) [95 % paired bootstrap interval]: "
          + ", ".join(f"{c} {figures['conditions'][c]['phi']:.2f} [{figures['conditions'][c]['phi_ci'][0]:.2f}, "
                      f"{figures['conditions'][c]['phi_ci'][1]:.2f}]" for c in reads))
    for other, key in ((CONTROL, "cross - control"), (BEST_OF_N, f"cross - {BEST_OF_N}")):
        diff, low, high = phi_interval(*passing[CROSS], *passing[other])
        figures[key]["phi"] = {"diff": diff, "ci": [low, high]}
        print(f"phi, {key}: {diff:+.2f} [{low:+.2f}, {high:+.2f}]")
    for other, key in ((CONTROL, "cross - control"), (BEST_OF_N, f"cross - {BEST_OF_N}")):
        result = stats.compare([finals[CROSS][p] for p in pairs], [finals[other][p] for p in pairs], paired=True)
        figures[key]["final_pass_rate"] = comparison_entry(result, count="n")
        print(f"final pass rate, {key}: {result.mean_a:.3f} vs {result.mean_b:.3f}, {result.diff:+.3f} "
              f"[{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f}")
    # The plan's rule (point estimates): a held-out look follows only if both hold.
    gain_above = figures["cross - control"]["best_candidate_gain"]["diff"] > 0
    sent_not_below = figures[f"cross - {BEST_OF_N}"]["sent"]["diff"] >= 0
    figures["held-out look follows"] = gain_above and sent_not_below
    print(f"\nthe plan's rule: second candidate's gain above the control's: {gain_above}; sent pass rate at least "
          f"best of 2's: {sent_not_below} -> held-out look follows: {figures['held-out look follows']}")
    training_figures(RUNS, figures)
    write_figures_json(args.out, figures)


if __name__ == "__main__":
    main()
