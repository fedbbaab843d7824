"""How the teams' episodes ended in this look (PLAN.md), and who made up the quorum where it ended one: of the two
agents finished, how many were coders (the tester and the verifier could end a team of 4's episode for them).

    python endings.py        # reads study/episodes.jsonl, writes endings.json; the paired figures: ../paired.py
"""

from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import quorum_makeup, read_episodes

HERE = Path(__file__).resolve().parent
CODERS = ("coder_1", "coder_2")
MAKEUP = ("no coder", "one coder", "both coders")


def main() -> None:
    rows = read_episodes(HERE / "study" / "episodes.jsonl").rows
    figures: dict = {}
    for condition in ("trained", "untrained", "single"):
        played = [r for r in rows if r["condition"] == condition]
        entry: dict = {"end_reasons": dict(sorted(Counter(r["end_reason"] for r in played).items()))}
        if condition != "single":
            counts = quorum_makeup(played, CODERS)
            entry["quorum_done_finished_coders"] = {MAKEUP[n]: k for n, k in counts.items()}
        figures[condition] = entry
        print(f"{condition} ({len(played)} episodes): {entry}")
    write_figures_json(HERE / "endings.json", figures)


if __name__ == "__main__":
    main()
