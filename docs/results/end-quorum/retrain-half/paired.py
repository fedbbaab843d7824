"""Paired comparison of one condition of a study episode log against the conditions of another log, on the tasks
and seeds both hold (`bench study` logs: one JSON episode per line): mean difference, 95 % CI and paired t-test p,
with the study's own reader and test (`llm_marl_benchmarks.study.report.read_episodes`, `study.stats.compare`).

    python docs/results/end-quorum/retrain-half/paired.py NEW/episodes.jsonl OLD/episodes.jsonl [--condition trained]
"""

from __future__ import annotations

import argparse
from typing import Any

from llm_marl_benchmarks.study import stats
from llm_marl_benchmarks.study.report import read_episodes

METRICS = ("team_return", "quality", "pass_rate", "turns", "critical_path_tokens")


def by_condition(path: str) -> dict[str, dict[tuple, dict[str, Any]]]:
    """condition -> (env, team size, task, seed) -> episode."""
    table: dict[str, dict[tuple, dict[str, Any]]] = {}
    for row in read_episodes(path).rows:
        key = (row["env"], int(row["team_size"]), str(row["task"]), int(row["seed"]))
        table.setdefault(row["condition"], {})[key] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("new")
    parser.add_argument("old")
    parser.add_argument("--condition", default="trained", help="the new log's condition to compare")
    args = parser.parse_args()
    new = by_condition(args.new)[args.condition]
    for condition, old in sorted(by_condition(args.old).items()):
        keys = sorted(new.keys() & old.keys())
        if len(keys) < 2:
            continue
        print(f"new {args.condition} vs old {condition} ({len(keys)} pairs)")
        for metric in METRICS:
            result = stats.compare([new[k].get(metric) for k in keys], [old[k].get(metric) for k in keys], paired=True)
            if result.note:
                print(f"  {metric}: {result.note}")
                continue
            print(f"  {metric}: {result.mean_a:.3f} vs {result.mean_b:.3f}: {result.diff:+.3f} "
                  f"[{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f}")
        early = [sum(rows[k]["turns"] < rows[k]["turn_budget"] for k in keys) for rows in (new, old)]
        first = [sum(rows[k]["turns"] == 1 for k in keys) for rows in (new, old)]
        print(f"  ended before the budget: {early[0]} vs {early[1]}; at turn 1: {first[0]} vs {first[1]}")


if __name__ == "__main__":
    main()
