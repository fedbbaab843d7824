"""The shipped coding-2 recipe trained with a float32 base, against the shipped team (bf16 base), the team trained on
stopped replies (float32 base), and the untrained team and one agent of the same held-out pairs (see PLAN.md; the
reads and the rule were fixed before the run).

``python compare.py`` (in this folder, with ``study/episodes.jsonl`` the new team's look and ``team/metrics.jsonl`` its
run's steps; the other conditions are ``../2-stopped``'s rows of the same 40 pairs) prints, paired by task and seed
with 95 % CI and paired t:
1. float32-trained - shipped (``../2-stopped/shipped``): what the precision of training costs;
2. float32-trained - stopped (``../2-stopped/study``, trained): what the stop costs, both trained in float32;
3. float32-trained - untrained and - single (``../2-stopped/study``);
4. each run's completion tokens and seconds a step;
and each team's credit shares. It writes ``figures.json``.
"""

import sys
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, precisions

HERE = Path(__file__).resolve().parent
STOPPED = HERE.parent / "2-stopped"
sys.path.insert(0, str(HERE.parent))
from paired import METRICS, load, team_credit, training_figures  # noqa: E402  (the results folder's own reading)

SHIPPED_RUN = HERE.parents[3] / "baselines" / "teams" / "coding-2" / "metrics.jsonl"


def main() -> None:
    def renamed(rows: list[dict], condition: str, name: str) -> list[dict]:
        return [{**r, "condition": name} for r in rows if r["condition"] == condition]

    float32 = renamed(load(HERE / "study"), "trained", "float32")
    shipped = renamed(load(STOPPED / "shipped"), "trained", "shipped")
    beside = load(STOPPED / "study")
    stopped = renamed(beside, "trained", "stopped")
    base = [r for r in beside if r["condition"] in ("untrained", "single")]
    rows = [*float32, *shipped, *stopped, *base]
    figures: dict = {"precision": precisions(rows)}
    print(f"precision: {[(p['dtype'], p['episodes']) for p in figures['precision']]}")
    for read, pairs in (("1. float32 - shipped", [("float32", "shipped")]),
                        ("2. float32 - stopped", [("float32", "stopped")]),
                        ("3. float32 - untrained, single", [("float32", "untrained"), ("float32", "single")])):
        print(f"--- {read}")
        figures[read] = compare_pairs(rows, pairs, METRICS, "coding", size=2, echo=True)
    for name, played in (("float32", float32), ("shipped", shipped), ("stopped", stopped)):
        team_credit(name, played, figures)
    training_figures({"float32 run (float32 base, a 2-core AMD EPYC)": HERE / "team" / "metrics.jsonl",
                      "stopped run (float32 base, a 2-core AMD EPYC)": STOPPED / "team" / "metrics.jsonl",
                      "shipped run (bf16 base, a 2-core CPU with native bf16)": SHIPPED_RUN},
                     figures, prefix="4. training: ")
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
