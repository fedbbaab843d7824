"""How a coding team of 4's episodes ended in a study folder, and who made up the quorum where it ended one: of the
finished agents, how many were coders (under ``end_quorum="half"`` the tester and the verifier can end the episode
while both coders are still working).

    python endings.py heldout-4-half/study      # reads its episodes.jsonl, writes endings.json beside it

Per condition: the end reasons, and for a team the quorum endings by how many coders had finished
(``report.quorum_makeup``). The paired figures of the same folder: ``paired.py``.
"""

import sys
from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import quorum_makeup, read_episodes

ROOT = Path(__file__).resolve().parent  # the study folders beside this script
CONDITIONS = ("trained", "untrained", "single", "single_best_of_n")
TEAMS = ("trained", "untrained")
CODERS = ("coder_1", "coder_2")
MAKEUP = ("no coder", "one coder", "both coders")


def main(folder: str) -> None:
    rows = read_episodes(ROOT / folder / "episodes.jsonl").rows
    figures: dict = {}
    for condition in CONDITIONS:
        played = [r for r in rows if r["condition"] == condition]
        if not played:
            continue
        entry: dict = {"end_reasons": dict(sorted(Counter(r["end_reason"] for r in played).items()))}
        if condition in TEAMS:
            counts = quorum_makeup(played, CODERS)
            entry["quorum_done_finished_coders"] = {MAKEUP[n]: k for n, k in counts.items()}
        figures[condition] = entry
        print(f"{condition} ({len(played)} episodes): {entry}")
    write_figures_json(ROOT / folder / "endings.json", figures)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python endings.py STUDY_FOLDER   (e.g. heldout-4-half/study)")
    main(sys.argv[1])
