"""A shipped team's headline under coupled and fresh turn noise, paired by (task, seed).

    python compare.py writing SIZE     # README log, its bf16 and float32 replays of 2026-11-29 (coupled), the fresh
                                       # replays (writing-SIZE/ in bf16, writing-SIZE-float32/ where it ran)
    python compare.py coding SIZE      # the coupled bf16 log of the same design, the fresh replay (coding-SIZE/)

Prints, per log and metric, trained and the other condition's means, the paired difference with its 95 % CI and p
(the study's own reader and test, ``study.report``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from llm_marl_benchmarks.study.report import compare_pair, read_episodes

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
WRITING_METRICS = ("team_return", "quality", "turns", "critical_path_tokens")
CODING_METRICS = ("pass_rate", "turns", "critical_path_tokens")
OTHERS = {"writing": ("untrained",), "coding": ("untrained", "single", "single_best_of_n")}
PROPOSE_VERIFY = RESULTS / "coding-propose-verify"
CODING_COUPLED = {"2": [PROPOSE_VERIFY / "2-turn1" / "study"],
                  "4": [PROPOSE_VERIFY / "4" / "base", PROPOSE_VERIFY / "4" / "trained"]}
"""The shipping looks' logs of the same designs (bf16, the runs' float32 adapters)."""


def logs(env: str, size: str) -> dict[str, list[Path]]:
    if env == "writing":
        return {"README log (coupled)": [RESULTS / f"results-writing-{size}"],
                "bf16 replay, 2026-11-29 (coupled)": [RESULTS / f"results-writing-{size}-precision" / "bfloat16"],
                "float32 replay, 2026-11-29 (coupled)": [RESULTS / f"results-writing-{size}-precision" / "float32"],
                "bf16, fresh each turn": [HERE / f"writing-{size}"],
                "float32, fresh each turn": [HERE / f"writing-{size}-float32"]}
    return {"shipping look, bf16 (coupled)": CODING_COUPLED[size], "bf16, fresh each turn": [HERE / f"coding-{size}"]}


def main(env: str, size: str) -> None:
    metrics = WRITING_METRICS if env == "writing" else CODING_METRICS
    print("| log | metric | trained | other | difference [95 % CI] | p |")
    print("|---|---|---|---|---|---|")
    for name, folders in logs(env, size).items():
        paths = [folder / "episodes.jsonl" for folder in folders]
        missing = [str(path.relative_to(RESULTS)) for path in paths if not path.exists()]
        if missing:
            print(f"| {name} | (no log at {', '.join(missing)}) | | | | |")
            continue
        rows = [row for path in paths for row in read_episodes(path).rows]
        for other in OTHERS[env]:
            for metric in metrics:
                r = compare_pair(rows, "trained", other, metric, env)
                if r is None:  # the log has no such condition
                    continue
                print(f"| {name}: trained vs {other} ({r.n_a} pairs) | {metric} | {r.mean_a:.3f} | {r.mean_b:.3f} | "
                      f"{r.diff:+.3f} [{r.diff_ci_low:+.3f}, {r.diff_ci_high:+.3f}] | {r.p:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("writing", "coding"):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
