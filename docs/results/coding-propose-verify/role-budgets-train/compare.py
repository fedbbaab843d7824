"""The shipped coding-4 with and without ``--role-budgets`` on the same train-split tasks and seeds (see PLAN.md).

``python compare.py`` (in this folder, with ``off/`` and ``on/`` holding the two study runs) prints each metric's
paired difference (on − off, 95 % CI, p), how often the two runs sent the same program at turn 1 (where only the cut
replies differ), how long each role's final draft (the part of its reply the env keeps) is in the model's tokens, and
how the episodes ended, and writes ``figures.json``.
"""

from collections import Counter
from pathlib import Path
from statistics import mean, median

from llm_marl_baselines.models import ensure_default_model
from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, read_episodes

HERE = Path(__file__).resolve().parent
METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")
LABELS = {"off": "batch_budget", "on": "role_budgets"}


def load(run: str) -> list[dict]:
    """The run's episodes, relabelled so the two runs of the one ``trained`` condition can be paired."""
    return [{**row, "condition": LABELS[run]} for row in read_episodes(HERE / run / "episodes.jsonl").rows]


def main() -> None:
    from transformers import AutoTokenizer

    runs = {run: load(run) for run in LABELS}
    rows = [row for run_rows in runs.values() for row in run_rows]
    figures: dict = {"episodes": {run: len(run_rows) for run, run_rows in runs.items()}}
    figures["comparisons"] = compare_pairs(rows, [("role_budgets", "batch_budget")], METRICS, "coding", echo=True)
    by_pair = {run: {(r["task"], r["seed"]): r for r in run_rows} for run, run_rows in runs.items()}
    pairs = sorted(set(by_pair["off"]) & set(by_pair["on"]))

    def first_selected(row: dict) -> str | None:
        tests = row.get("turn_tests") or []
        return tests[0].get("selected") if tests else None

    same = sum(first_selected(by_pair["off"][p]) == first_selected(by_pair["on"][p]) for p in pairs)
    figures["same_turn1_selection"] = {"pairs": len(pairs), "same": same}
    print(f"turn 1 sent the same candidate in {same} of {len(pairs)} pairs")
    tokenizer = AutoTokenizer.from_pretrained(ensure_default_model())
    lengths: dict = {}
    for run, run_rows in runs.items():
        for agent in sorted({a for r in run_rows for a in r["texts"]}):
            counts = [len(tokenizer(r["texts"][agent])["input_ids"]) for r in run_rows if agent in r["texts"]]
            lengths.setdefault(run, {})[agent] = {"mean": mean(counts), "median": median(counts),
                                                  "at_least_150": sum(c >= 150 for c in counts)}
            print(f"{run}: {agent}'s final draft, model tokens: mean {mean(counts):.0f}, median {median(counts):.0f}, "
                  f">= 150 in {sum(c >= 150 for c in counts)} of {len(counts)}")
    figures["final_draft_tokens"] = lengths
    figures["endings"] = {run: dict(Counter(r["end_reason"] for r in run_rows)) for run, run_rows in runs.items()}
    print("endings:", figures["endings"])
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
