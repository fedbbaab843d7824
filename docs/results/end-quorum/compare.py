"""Paired comparison of two default_team runs on the same tasks and seeds (one row per condition): ended-early
shares, quality (paired t-test, 95 % CI) and turns (Wilcoxon signed-rank).

    python docs/results/end-quorum/compare.py BEFORE.json AFTER.json
"""

from __future__ import annotations

import json
import sys

import numpy as np
from scipy import stats


def rows(path: str) -> dict[str, dict]:
    return {f["condition"]: f for f in json.load(open(path, encoding="utf-8"))["figures"]}


def main(before_path: str, after_path: str) -> None:
    before, after = rows(before_path), rows(after_path)
    for condition in before.keys() & after.keys():
        a, b = before[condition]["episodes_detail"], after[condition]["episodes_detail"]
        assert [e["task"] for e in a] == [e["task"] for e in b], "not the same tasks"
        qa, qb = np.array([e["quality"] for e in a]), np.array([e["quality"] for e in b])
        ta, tb = np.array([e["turns"] for e in a]), np.array([e["turns"] for e in b])
        dq = qb - qa
        low, high = stats.t.interval(0.95, len(dq) - 1, dq.mean(), stats.sem(dq))
        p_turns = stats.wilcoxon(tb, ta).pvalue if (tb != ta).any() else 1.0
        early_a, early_b = sum(e["early_end"] for e in a), sum(e["early_end"] for e in b)
        p_quality = stats.ttest_rel(qb, qa).pvalue
        print(f"{condition}: n={len(a)}; ended early {early_a}/{len(a)} -> {early_b}/{len(b)}; "
              f"turns {ta.mean():.2f} -> {tb.mean():.2f} (p = {p_turns:.2g}); quality {qa.mean():.3f} -> "
              f"{qb.mean():.3f}, diff {dq.mean():+.3f} [{low:+.3f}, {high:+.3f}], p = {p_quality:.2g}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
