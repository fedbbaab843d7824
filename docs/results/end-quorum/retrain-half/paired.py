"""Paired comparison of one condition of a study episode log against the conditions of another log, on the tasks
and seeds both hold (`bench study` logs: one JSON episode per line): mean difference, 95 % CI and paired t-test p.

    python docs/results/end-quorum/retrain-half/paired.py NEW/episodes.jsonl OLD/episodes.jsonl [--condition trained]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy import stats

METRICS = ("team_return", "quality", "pass_rate", "turns", "critical_path_tokens")


def episodes(path: str, condition: str | None = None) -> dict[str, dict[tuple, dict]]:
    """condition -> (task, seed) -> episode."""
    table: dict[str, dict[tuple, dict]] = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if condition is None or row["condition"] == condition:
                table.setdefault(row["condition"], {})[(row["task"], row["seed"])] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("new")
    parser.add_argument("old")
    parser.add_argument("--condition", default="trained", help="the new log's condition to compare")
    args = parser.parse_args()
    new = episodes(args.new, args.condition)[args.condition]
    for condition, old in sorted(episodes(args.old).items()):
        keys = sorted(new.keys() & old.keys())
        if len(keys) < 2:
            continue
        print(f"new {args.condition} vs old {condition} ({len(keys)} pairs)")
        for metric in METRICS:
            a = np.array([new[k][metric] or 0.0 for k in keys], dtype=float)
            b = np.array([old[k][metric] or 0.0 for k in keys], dtype=float)
            diff = a - b
            if not diff.any():
                print(f"  {metric}: {a.mean():.3f} vs {b.mean():.3f} (no difference)")
                continue
            low, high = stats.t.interval(0.95, len(diff) - 1, diff.mean(), stats.sem(diff))
            p = stats.ttest_rel(a, b).pvalue
            print(f"  {metric}: {a.mean():.3f} vs {b.mean():.3f}: {diff.mean():+.3f} [{low:+.3f}, {high:+.3f}], "
                  f"p = {p:.3f}")
        early = sum(new[k]["turns"] < new[k]["turn_budget"] for k in keys), sum(
            old[k]["turns"] < old[k]["turn_budget"] for k in keys)
        first = sum(new[k]["turns"] == 1 for k in keys), sum(old[k]["turns"] == 1 for k in keys)
        print(f"  ended before the budget: {early[0]} vs {early[1]}; at turn 1: {first[0]} vs {first[1]}")


if __name__ == "__main__":
    main()
