"""The shipped coding-2 and coding-4 and one agent, with and without ``--stop-at-reply-end``, on the same train-split
tasks and seeds (see PLAN.md).

``python compare.py`` (in this folder, with ``off/`` and ``on/`` holding the two study runs) prints, per team size:
each condition's paired difference on − off (95 % CI, p) on the plan's metrics; within each run the trained team −
one agent; in how many pairs every agent's final draft (what the env kept) is the same with and without the stop;
how the episodes ended and their summed longest replies. With ``both/`` (the addendum's run: coding-4 with
``--role-budgets`` as well) it adds that team against ``off/``'s and ``on/``'s and against ``on/``'s one agent. It
writes ``figures.json``.
"""

from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, read_episodes

HERE = Path(__file__).resolve().parent
METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")
RUNS = ("off", "on")
BOTH = "both"
"""The addendum's third run: coding-4 with ``--role-budgets --stop-at-reply-end``, trained condition only."""
CONDITIONS = ("trained", "single")


def load(run: str) -> list[dict]:
    """The run's episodes, each condition relabelled with the run (``trained@on``) so the runs can be paired."""
    return [{**row, "condition": f"{row['condition']}@{run}"}
            for row in read_episodes(HERE / run / "episodes.jsonl").rows]


def main() -> None:
    runs = RUNS + ((BOTH,) if (HERE / BOTH / "episodes.jsonl").exists() else ())
    rows = [row for run in runs for row in load(run)]
    sizes = sorted({row["team_size"] for row in rows})
    figures: dict = {"episodes": dict(Counter(row["condition"] for row in rows)),
                     "dtypes": sorted({str(row.get("dtype")) for row in rows})}
    for size in sizes:
        print(f"--- size {size}")
        pairs = [(f"{c}@on", f"{c}@off") for c in CONDITIONS] + [(f"trained@{r}", f"single@{r}") for r in RUNS]
        pairs += [(f"trained@{BOTH}", other) for other in ("trained@off", "trained@on", "single@on")]
        figures[f"size_{size}"] = compare_pairs(rows, pairs, METRICS, "coding", size=size, echo=True)
        by_key = {(r["condition"], r["task"], r["seed"]): r for r in rows if r["team_size"] == size}
        for condition in CONDITIONS:
            matched = [(off, by_key[(f"{condition}@on", task, seed)]) for (label, task, seed), off in by_key.items()
                       if label == f"{condition}@off" and (f"{condition}@on", task, seed) in by_key]
            same = sum(off["texts"] == on["texts"] for off, on in matched)
            figures[f"size_{size}"][f"{condition}: same final drafts"] = {"pairs": len(matched), "same": same}
            print(f"{condition}: the same final drafts (what the env kept of every agent) in {same} of "
                  f"{len(matched)} pairs")
        for label in sorted({r["condition"] for r in rows if r["team_size"] == size}):
            mine = [r for r in rows if r["team_size"] == size and r["condition"] == label]
            endings = dict(Counter(r["end_reason"] for r in mine))
            longest = [r["reward_components"].get("longest_reply_tokens") for r in mine]
            figures[f"size_{size}"][f"{label}: endings"] = endings
            print(f"{label}: endings {endings}; mean summed longest reply (whitespace tokens) "
                  f"{sum(longest) / len(longest):.1f}")
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
