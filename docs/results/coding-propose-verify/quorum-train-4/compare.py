"""The shipped coding-4 under the two endings, train split (PLAN.md): the team under ``end_quorum="half"`` against
itself under ``"all"`` (the same tasks and seeds, so the same first turns), and against one agent; and, for the
episodes the quorum ended, which agents made it up.

    python compare.py          # reads study-all/ and study-half/, writes figures.json
"""

import sys
from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, quorum_makeup, read_episodes

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from endings import MAKEUP  # noqa: E402  (endings.py's names for who made up the quorum)

METRICS = ("turns", "critical_path_tokens", "completion_tokens", "pass_rate", "success")
CODERS = frozenset({"coder_1", "coder_2"})


def main() -> None:
    rows = []
    for quorum in ("all", "half"):
        for row in read_episodes(HERE / f"study-{quorum}" / "episodes.jsonl").rows:
            # One condition name per ending, so the report's pairing (by task and seed) can set them side by side.
            rows.append({**row, "condition": f"{row['condition']}_{quorum}" if row["condition"] == "trained"
                         else row["condition"]})
    pairs = (("trained_half", "trained_all"), ("trained_half", "single"), ("trained_all", "single"))
    figures: dict = {"comparisons": compare_pairs(rows, pairs, METRICS, env="coding", size=4)}
    ends = {}
    for quorum in ("all", "half"):
        team = [r for r in rows if r["condition"] == f"trained_{quorum}"]
        ends[quorum] = dict(sorted(Counter(r["end_reason"] for r in team).items()))
        print(f"team under {quorum!r}: how episodes ended: {ends[quorum]}")
    figures["end_reasons"] = ends
    # Who was finished in the episodes the quorum ended (the `finished` column, logged from 5be81ef on: it landed
    # after study-all began and before study-half did, and only study-half's rows are read here).
    counts = quorum_makeup((r for r in rows if r["condition"] == "trained_half"), CODERS)
    makeup = {MAKEUP[n] + " among them": k for n, k in counts.items()}
    figures["quorum_done_finished_agents"] = dict(sorted(makeup.items()))
    print(f"the {sum(counts.values())} episodes the quorum ended, by who was finished: {dict(sorted(makeup.items()))}")
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
