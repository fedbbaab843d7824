"""The team trained on stopped replies against the shipped coding-2 on the same held-out pairs, and what each
training cost (see PLAN.md).

``python compare.py`` (in this folder, with ``study/episodes.jsonl`` the new team's look beside its untrained team and
one agent, ``shipped/episodes.jsonl`` the shipped coding-2 on the same pairs, ``team/metrics.jsonl`` the new run's
steps) prints the new team against the shipped one (paired by task and seed, 95 % CI, paired t; the plan's rule),
each team's credit shares, the shipped team against the untrained team and one agent of the same pairs (added after
the look, a description) and each run's completion tokens and seconds a step; it writes ``figures.json``. The new
team against its untrained team and one agent: ``python ../paired.py 2-stopped/study``.
"""

import sys
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, precisions

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from paired import METRICS, load, team_credit, training_figures  # noqa: E402  (the results folder's own reading)

SHIPPED_RUN = HERE.parents[3] / "baselines" / "teams" / "coding-2" / "metrics.jsonl"


def main() -> None:
    new = [r for r in load(HERE / "study") if r["condition"] == "trained"]
    shipped = [{**r, "condition": "shipped"} for r in load(HERE / "shipped") if r["condition"] == "trained"]
    rows = [*({**r, "condition": "stopped"} for r in new), *shipped]
    figures: dict = {"precision": precisions(rows)}
    print(f"precision: {[(p['dtype'], p['episodes']) for p in figures['precision']]}")
    figures["stopped - shipped"] = compare_pairs(rows, [("stopped", "shipped")], METRICS, "coding", size=2, echo=True)
    for name, played in (("stopped", new), ("shipped", shipped)):
        team_credit(name, played, figures)
    # Added after the look (a description, not the plan's rule): the shipped coding-2 against the untrained team and
    # one agent of the same pairs, its first fresh look under today's defaults in float32.
    base = [r for r in load(HERE / "study") if r["condition"] in ("untrained", "single")]
    figures["beside it: shipped - untrained, single"] = compare_pairs(
        [*shipped, *base], [("shipped", "untrained"), ("shipped", "single")], METRICS, "coding", size=2, echo=True)
    training_figures({"stopped run (float32 base, this 2-core AMD EPYC)": HERE / "team" / "metrics.jsonl",
                      "shipped run (bf16 base, a 2-core CPU with native bf16)": SHIPPED_RUN}, figures)
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
