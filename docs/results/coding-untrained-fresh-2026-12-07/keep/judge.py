"""The rule of ``../RULE-coding-teams.md``, applied: does each shipped coding team stay shipped under the truthful rule
words? ``python judge.py`` (in this folder, with ``coding-4/episodes.jsonl`` and ``coding-2/episodes.jsonl`` the two
runs' logs) prints, per team, the judged comparison (trained − untrained, pass rate, paired by task and seed, paired
t) and its verdict, the reported ones (each against one agent), how the episodes ended and each agent's share of
episodes with credit > 0; it writes ``figures.json``.
"""

import sys
from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, decoding_stops, precisions, read_episodes

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from compare import METRICS, described  # noqa: E402  (the parent folder's reading, one place for it)

TEAMS = {"coding-4": 4, "coding-2": 2}
JUDGED = ("trained", "untrained")
REPORTED = [("trained", "single"), ("untrained", "single")]
ALPHA = 0.05


def verdict(judged: dict) -> str:
    """The rule: above its untrained team on pass rate with p < 0.05 stays shipped, anything else is withdrawn."""
    result = judged[f"{JUDGED[0]} - {JUDGED[1]}: pass_rate"]
    return "stays shipped" if result["diff"] > 0 and result["p"] < ALPHA else "withdrawn"


def main() -> None:
    figures: dict = {}
    for team, size in TEAMS.items():
        log = HERE / team / "episodes.jsonl"
        if not log.exists():
            print(f"{team}: no log yet ({log})")
            continue
        rows = [r for r in read_episodes(log).rows if r["team_size"] == size]
        entry: dict = {"episodes": dict(Counter(r["condition"] for r in rows)), "precision": precisions(rows),
                       "decoding": decoding_stops(rows)}
        print(f"\n{team}: {entry['episodes']}; precision {[(p['dtype'], p['episodes']) for p in entry['precision']]}")
        print("judged:")
        entry["judged"] = compare_pairs(rows, [JUDGED], METRICS, "coding", size=size, echo=True)
        entry["verdict"] = verdict(entry["judged"])
        print(f"verdict: {team} {entry['verdict']}")
        print("reported:")
        entry["reported"] = compare_pairs(rows, REPORTED, METRICS, "coding", size=size, echo=True)
        entry["described"] = described(rows)
        figures[team] = entry
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
