"""The plan's reading of the two probe runs (PLAN.md): ``same.json`` (both coders one instruction) and
``distinct.json`` (``coder_briefs="distinct"``), the same 50 train tasks and seeds.

    python compare.py      # in this folder; prints the three comparisons and writes figures.json
"""

import json
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.role_prompts import pair_any_passes, paired_difference

HERE = Path(__file__).resolve().parent
PAIR = "coder_1+coder_2"


def main() -> None:
    runs = {name: json.loads((HERE / f"{name}.json").read_text()) for name in ("same", "distinct")}
    same, distinct = (runs[name]["per_task"] for name in ("same", "distinct"))
    assert [r["task"] for r in same] == [r["task"] for r in distinct], "the runs must hold the same tasks"
    # solo's prompt and seeds are the same in both runs, so its samples should be too (a check, not a figure).
    solo_same = sum(a["solo"]["all_visible_samples"] == b["solo"]["all_visible_samples"]
                    for a, b in zip(same, distinct, strict=True))

    def column(rows: list[dict], *keys: str) -> list[float]:
        values = []
        for row in rows:
            value = row
            for key in keys:
                value = value[key]
            values.append(value)
        return values

    figures = {
        "tasks": len(same),
        "solo_samples_identical_in_both_runs": f"{solo_same} of {len(same)} tasks",
        "precision": {name: run["precision"] for name, run in runs.items()},
        "either_of_two_passes": {
            "solo+solo": runs["same"]["pairs"]["solo+solo"],
            "same coders": runs["same"]["pairs"][PAIR],
            "distinct coders": runs["distinct"]["pairs"][PAIR],
        },
        "1. distinct pair - same pair": paired_difference(column(distinct, "pairs", PAIR), column(same, "pairs", PAIR)),
        "2. distinct pair - solo+solo": paired_difference(column(distinct, "pairs", PAIR),
                                                         column(distinct, "pairs", "solo+solo")),
        "3. own share passing every visible test, distinct - same": {
            coder: {"same": runs["same"]["summary"][coder]["all_visible"],
                    "distinct": runs["distinct"]["summary"][coder]["all_visible"],
                    "difference": paired_difference(column(distinct, coder, "all_visible"),
                                                    column(same, coder, "all_visible"))}
            for coder in ("coder_1", "coder_2")},
    }
    # Beside the plan, descriptive: two samples of one distinct brief (is the pair's gain its mix of two ways, or one
    # brief's better candidates?).
    for coder in ("coder_1", "coder_2"):
        own = [pair_any_passes(row[coder]["all_visible_samples"]) for row in distinct]
        figures[f"beside the plan: two samples of {coder}'s distinct brief"] = {
            "either_passes": sum(own) / len(own),
            "distinct pair - this": paired_difference(column(distinct, "pairs", PAIR), own)}
    print(json.dumps(figures, indent=2))
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
