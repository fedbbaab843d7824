"""Where a coding episode's pass rate is decided: read a study folder's ``turn_tests`` column (per turn, the held-out
and visible tests the team's program passed, and in the candidate schemes each candidate's).

``python by_turn.py train-split/by-turn`` prints, per condition: the episodes, those that played more than one
turn, those in which a later turn's program passed more held-out tests than turn 1's (``raised``) or fewer than an
earlier turn's (``lowered``), and, for teams, the episodes whose last selection was a tie on the visible tests
between candidates that differ on the held-out ones (``final ties``; the rule then keeps the earliest) and those of
them where a tied candidate passed more held-out tests than the one kept (``tie lost``).
"""

import sys
from collections import defaultdict

from paired import ROOT, load  # the sibling script's reader of a study folder's episode log


def main(folder: str) -> None:
    rows = load(ROOT / folder)
    stats: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        trace = row.get("turn_tests")
        if not trace:
            continue
        s = stats[row["condition"]]
        s["episodes"] += 1
        s["multi-turn"] += len(trace) > 1
        held = [t["held_out"] for t in trace]
        s["raised"] += max(held[1:], default=held[0]) > held[0]
        s["lowered"] += any(h < max(held[:i]) for i, h in enumerate(held) if i)
        last = trace[-1]
        candidates = last.get("candidates")
        if candidates and last.get("selected") is not None:
            kept = candidates[last["selected"]]
            tied = [c for c in candidates.values() if c[0] == kept[0]]
            if len({c[1] for c in tied}) > 1:
                s["final ties"] += 1
                s["tie lost"] += max(c[1] for c in tied) > kept[1]
    columns = ["episodes", "multi-turn", "raised", "lowered", "final ties", "tie lost"]
    print("| condition | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for condition, s in stats.items():
        print(f"| {condition} | " + " | ".join(str(s[c]) for c in columns) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "train-split/by-turn")
