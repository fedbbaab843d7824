"""How a study log's episodes ended, per condition: episodes, how many ended before the turn budget, mean turns,
mean team return and the end reasons.

    python endings.py LOG.jsonl [LOG.jsonl ...]
"""

from __future__ import annotations

import collections
import json
import sys


def main(paths: list[str]) -> None:
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            rows = [json.loads(line) for line in lines if line.strip()]
        by_condition: dict[str, list[dict]] = collections.defaultdict(list)
        for row in rows:
            by_condition[row["condition"]].append(row)
        for condition, episodes in sorted(by_condition.items()):
            early = sum(e["turns"] < e["turn_budget"] for e in episodes)
            turns = sum(e["turns"] for e in episodes) / len(episodes)
            team_return = sum(e["team_return"] for e in episodes) / len(episodes)
            reasons = dict(collections.Counter(e["end_reason"] for e in episodes))
            print(f"{path}: {condition}: {len(episodes)} episodes, {early} before the budget, mean turns {turns:.2f}, "
                  f"mean team return {team_return:.3f}, ends {reasons}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
