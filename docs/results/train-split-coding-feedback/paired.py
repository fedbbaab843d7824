"""Paired comparisons of a study log's conditions by (task, seed): mean difference, 95 % t CI, paired t p.

    python paired.py after/episodes.jsonl      # and before/episodes.jsonl
"""
import json
import sys
from collections import defaultdict

import numpy as np
from scipy import stats

with open(sys.argv[1], encoding="utf-8") as log:
    episodes = [json.loads(line) for line in log]
by = defaultdict(dict)
for episode in episodes:
    by[episode["condition"]][(episode["task"], episode["seed"])] = episode
for cond, rows in by.items():
    rates = [r["pass_rate"] for r in rows.values()]
    turns = [r["turns"] for r in rows.values()]
    success = np.mean([r["success"] for r in rows.values()])
    print(f"{cond:15s} n={len(rates)} pass={np.mean(rates):.3f} turns={np.mean(turns):.2f} success={success:.3f}")


def paired(a, b, metric="pass_rate"):
    keys = sorted(set(by[a]) & set(by[b]))
    d = np.array([by[a][k][metric] - by[b][k][metric] for k in keys])
    m = d.mean()
    if np.allclose(d, d[0]):
        print(f"{a} - {b} [{metric}] n={len(d)}: {m:+.3f} (every pair equal)")
        return
    se = d.std(ddof=1) / np.sqrt(len(d))
    t = stats.t.ppf(0.975, len(d) - 1)
    p = stats.ttest_rel([by[a][k][metric] for k in keys], [by[b][k][metric] for k in keys]).pvalue
    print(f"{a} - {b} [{metric}] n={len(d)}: {m:+.3f} [{m - t * se:+.3f}, {m + t * se:+.3f}], p = {p:.3f}; "
          f"a>b in {sum(d > 0)}, a<b in {sum(d < 0)}")


for a, b in [("single", "single_oneshot"), ("untrained", "single_oneshot"), ("untrained", "single")]:
    if a in by and b in by:
        for metric in ("pass_rate", "quality"):
            paired(a, b, metric)
for cond in ("single", "untrained"):
    if cond in by:
        rows = [(k[0], r["turns"], round(r["pass_rate"], 2), round(by["single_oneshot"][k]["pass_rate"], 2),
                 r["end_reason"]) for k, r in sorted(by[cond].items())]
        print(cond, "per task:", rows)
