"""The shipped coding-2 and one agent with and without ``--stop-at-reply-end``, on 66 fresh held-out pairs (see
PLAN.md).

``python compare.py`` (in this folder, with ``off/`` and ``on/`` holding the two study runs) prints, per condition,
the paired difference on − off (95 % CI, p) on the plan's metrics and in how many pairs the final drafts (what the
env kept of every agent) are the same; and within each run the trained team − one agent. It writes
``figures.json``.
"""

from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, read_episodes

HERE = Path(__file__).resolve().parent
METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")
RUNS = ("off", "on")
CONDITIONS = ("trained", "single")


def main() -> None:
    rows = [{**row, "condition": f"{row['condition']}@{run}"}
            for run in RUNS for row in read_episodes(HERE / run / "episodes.jsonl").rows]
    figures: dict = {"episodes": dict(Counter(row["condition"] for row in rows)),
                     "dtypes": sorted({str(row.get("dtype")) for row in rows})}
    pairs = [(f"{c}@on", f"{c}@off") for c in CONDITIONS] + [(f"trained@{r}", f"single@{r}") for r in RUNS]
    figures["comparisons"] = compare_pairs(rows, pairs, METRICS, "coding", size=2, echo=True)
    by_key = {(r["condition"], r["task"], r["seed"]): r for r in rows}
    for condition in CONDITIONS:
        matched = [(off, by_key[(f"{condition}@on", task, seed)]) for (label, task, seed), off in by_key.items()
                   if label == f"{condition}@off" and (f"{condition}@on", task, seed) in by_key]
        same = sum(off["texts"] == on["texts"] for off, on in matched)
        figures[f"{condition}: same final drafts"] = {"pairs": len(matched), "same": same}
        print(f"{condition}: the same final drafts in {same} of {len(matched)} pairs")
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
