"""A shipped writing team against its untrained team in each precision, paired by (task, seed).

``python compare_precision.py SIZE`` (2 or 3) reads ``results-writing-SIZE-precision/bfloat16/episodes.jsonl`` and
``.../float32/episodes.jsonl`` beside the README table's own log, ``results-writing-SIZE/episodes.jsonl`` (whose rows
predate the dtype column), and prints, per log and metric, the two means, the paired difference with its 95 % CI and
p (the study's own reader and test, ``study.report``).
"""

import sys
from pathlib import Path

from llm_marl_benchmarks.study.report import compare_pair, read_episodes

HERE = Path(__file__).resolve().parent
METRICS = ("team_return", "quality", "turns", "critical_path_tokens")


def main(size: str) -> None:
    precision = HERE / f"results-writing-{size}-precision"
    logs = {"README table (dtype not logged)": HERE / f"results-writing-{size}", "bfloat16": precision / "bfloat16",
            "float32": precision / "float32"}
    print("| log | metric | trained | untrained | difference [95 % CI] | p |")
    print("|---|---|---|---|---|---|")
    for name, folder in logs.items():
        rows = read_episodes(folder / "episodes.jsonl").rows
        for metric in METRICS:
            r = compare_pair(rows, "trained", "untrained", metric, "writing")
            print(f"| {name} ({r.n_a} pairs) | {metric} | {r.mean_a:.3f} | {r.mean_b:.3f} | "
                  f"{r.diff:+.3f} [{r.diff_ci_low:+.3f}, {r.diff_ci_high:+.3f}] | {r.p:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "2")
