"""The priced coding-2 teams (``../2-trim``, ``../2-brief``) with every reply stopped at its code block's end, against
the shipped coding-2 and one agent under the same design (``../reply-end-train/on``), train split (see PLAN.md).

``python compare.py`` (in this folder, with ``trim/`` and ``brief/`` holding the two study runs) prints each priced
team − one agent and − the shipped team (paired by task and seed, 95 % CI, p) on the plan's metrics, and per
condition the tokens a turn (critical path / turns) and the coders' mean final-draft length in whitespace tokens. It
writes ``figures.json``.
"""

from collections import Counter
from pathlib import Path
from statistics import mean

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, read_episodes

HERE = Path(__file__).resolve().parent
METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")
PRICED = ("trim", "brief")
SHIPPED_RUN = HERE.parent / "reply-end-train" / "on"
CODERS = ("coder_1", "coder_2")


def main() -> None:
    rows = [{**row, "condition": "shipped" if row["condition"] == "trained" else row["condition"]}
            for row in read_episodes(SHIPPED_RUN / "episodes.jsonl").rows if row["team_size"] == 2]
    for team in PRICED:
        rows += [{**row, "condition": team} for row in read_episodes(HERE / team / "episodes.jsonl").rows]
    figures: dict = {"episodes": dict(Counter(row["condition"] for row in rows)),
                     "dtypes": sorted({str(row.get("dtype")) for row in rows})}
    pairs = [(team, other) for team in PRICED for other in ("single", "shipped")] + [("shipped", "single")]
    figures["comparisons"] = compare_pairs(rows, pairs, METRICS, "coding", size=2, echo=True)
    for label in ("single", "shipped", *PRICED):
        mine = [r for r in rows if r["condition"] == label]
        per_turn = mean(r["critical_path_tokens"] / r["turns"] for r in mine)
        summary = {"tokens_a_turn": round(per_turn, 1), "endings": dict(Counter(r["end_reason"] for r in mine))}
        if label != "single":
            summary["coder_draft_words"] = round(mean(len((r["texts"].get(c) or "").split())
                                                      for r in mine for c in CODERS), 1)
        else:
            summary["solo_draft_words"] = round(mean(len((r["texts"].get("solo") or "").split()) for r in mine), 1)
        figures[label] = summary
        print(f"{label}: {summary}")
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
