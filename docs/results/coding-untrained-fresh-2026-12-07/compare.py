"""The untrained coding teams (and the shipped coding-4) against one agent under today's defaults, on fresh held-out
pairs (see PLAN.md). ``python compare.py`` (in this folder, with ``episodes.jsonl`` the untrained/single run's log
and ``trained-4/episodes.jsonl`` the coding-4 run's, ``words-old-4/episodes.jsonl`` the untrained team of 4 under the
old rule words, PLAN.md's addendum 2; ``words-train-2/{new,old}/episodes.jsonl`` the untrained team of 2 on the train
split under each, PLAN.md's "Beside it") prints, per team size, the plan's comparisons (paired by task and seed, 95 %
CI, paired t) with each condition's episodes, precision and decoding stops, how the episodes ended, the share of
episodes whose program passes any held-out test and, for each team agent, the share in which its counterfactual
credit is > 0; then the untrained team of 4, new words − old words, and of 2 on the train split. It writes
``figures.json``.
"""

import sys
from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, decoding_stops, precisions, read_episodes

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "coding-propose-verify"))
from paired import credit_shares  # noqa: E402  (the coding results' own reading of credit)

METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")
# The plan's reading: (1) the target, untrained − single, per size; (2) coding-4 − single and − untrained.
PAIRS = {2: [("untrained", "single")],
         4: [("untrained", "single"), ("trained", "single"), ("trained", "untrained")]}


def described(rows: list[dict]) -> dict:
    """Per condition: its end reasons, the share of programs passing any held-out test, and (teams) each agent's
    share of episodes with credit > 0."""
    out: dict = {}
    for condition in sorted({r["condition"] for r in rows}):
        played = [r for r in rows if r["condition"] == condition]
        entry: dict = {"end_reasons": dict(sorted(Counter(r["end_reason"] for r in played).items())),
                       "any_heldout_test_passed": sum(r["pass_rate"] > 0 for r in played) / len(played)}
        agents = sorted({a for r in played for a in r["contributions"]})
        if len(agents) > 1:
            entry["credit_positive"] = credit_shares(played, agents)
        out[condition] = entry
        print(f"  {condition} ({len(played)} episodes): {entry}")
    return out


def new_minus_old_words(new: list[dict], old: list[dict], size: int) -> dict:
    """The untrained team under the new rule words against the old, paired by task and seed."""
    pair = [*({**r, "condition": "untrained@new words"} for r in new),
            *({**r, "condition": "untrained@old words"} for r in old)]
    return compare_pairs(pair, [("untrained@new words", "untrained@old words")], METRICS, "coding", size=size,
                         echo=True)


def main() -> None:
    rows = [*read_episodes(HERE / "episodes.jsonl").rows]
    trained = HERE / "trained-4" / "episodes.jsonl"
    if trained.exists():
        rows += read_episodes(trained).rows
    figures: dict = {"episodes": dict(Counter(f"{r['team_size']}/{r['condition']}" for r in rows)),
                     "precision": precisions(rows), "decoding": decoding_stops(rows)}
    print(figures["episodes"])
    print(f"precision: {[(p['dtype'], p['episodes']) for p in figures['precision']]}; stopped at the reply end: "
          f"{[(d['stop_at_reply_end'], d['episodes']) for d in figures['decoding']]}")
    for size, pairs in PAIRS.items():
        sized = [r for r in rows if r["team_size"] == size]
        print(f"\nteam size {size}:")
        figures[f"size {size}"] = compare_pairs(sized, pairs, METRICS, "coding", size=size, echo=True)
        figures[f"size {size}, described"] = described(sized)
    old_words = HERE / "words-old-4" / "episodes.jsonl"
    if old_words.exists():  # PLAN.md, addendum 2: the same 33 pairs, the untrained team of 4 under the old words
        new = [r for r in rows if r["team_size"] == 4 and r["condition"] == "untrained"]
        old = read_episodes(old_words).rows
        print("\nthe untrained team of 4, new words − old words:")
        figures["untrained, size 4, new - old words"] = new_minus_old_words(new, old, size=4)
        figures["untrained, size 4, old words, described"] = described(
            [{**r, "condition": "untrained@old words"} for r in old])
    train = HERE / "words-train-2"
    if (train / "new" / "episodes.jsonl").exists() and (train / "old" / "episodes.jsonl").exists():
        print("\nthe untrained team of 2, train split, new words − old words:")
        figures["untrained, size 2, train split, new - old words"] = new_minus_old_words(
            read_episodes(train / "new" / "episodes.jsonl").rows, read_episodes(train / "old" / "episodes.jsonl").rows,
            size=2)
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
