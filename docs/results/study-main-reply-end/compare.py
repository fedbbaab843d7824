"""The main job under the new default (replies stopped at their env's reply end) against the same job played with
replies unstopped in ``../study-main-2026-12-06`` (see PLAN.md).

``python compare.py`` (in this folder) checks the plan's two conditions — every writing episode replays exactly
(the same turn digests: writing's roles have no reply end), every coding row says its replies were stopped — and
prints, per coding condition, the paired difference on − off (95 % CI, p) on the plan's metrics, then within this
run the trained team − each other condition. It writes ``figures.json``.
"""

from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, read_episodes

HERE = Path(__file__).resolve().parent
METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")
CONDITIONS = ("trained", "untrained", "single", "single_best_of_n")
RUNS = {"on": HERE / "episodes.jsonl", "off": HERE.parent / "study-main-2026-12-06" / "episodes.jsonl"}


def main() -> None:
    runs = {run: read_episodes(path).rows for run, path in RUNS.items()}
    figures: dict = {"episodes": {run: dict(Counter(f"{r['env']}/{r['condition']}" for r in rows))
                                  for run, rows in runs.items()},
                     "dtypes": sorted({str(r.get("dtype")) for rows in runs.values() for r in rows})}
    # Check 1: writing replays exactly.
    keyed = {run: {r["key"]: r for r in rows} for run, rows in runs.items()}
    writing = [key for key, row in keyed["on"].items() if row["env"] == "writing"]
    same = sum(keyed["on"][k]["turn_digests"] == keyed["off"][k]["turn_digests"] for k in writing)
    figures["writing: same turn digests"] = {"episodes": len(writing), "same": same}
    print(f"writing: the same turn digests in {same} of {len(writing)} episodes")
    # Check 2: every coding row of this run says its replies were stopped.
    coding = [r for r in runs["on"] if r["env"] == "coding"]
    stopped = sum(r.get("stop_at_reply_end") is True for r in coding)
    figures["coding: rows stopped at their reply end"] = {"episodes": len(coding), "stopped": stopped}
    print(f"coding: {stopped} of {len(coding)} rows say their replies were stopped")
    rows = [{**r, "condition": f"{r['condition']}@{run}"} for run, run_rows in runs.items() for r in run_rows
            if r["env"] == "coding"]
    pairs = [(f"{c}@on", f"{c}@off") for c in CONDITIONS]
    pairs += [(f"trained@{run}", f"{c}@{run}") for run in RUNS for c in CONDITIONS[1:]]
    figures["comparisons"] = compare_pairs(rows, pairs, METRICS, "coding", size=2, echo=True)
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
