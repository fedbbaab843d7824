"""Candidate by candidate: why a coding team of 2 and one agent's best of 2 pass what they pass
(``candidates/PLAN.md``).

Both send one of two candidates, chosen by the visible tests. On turn 1 (where the pass rate is decided) a candidate's
score is the share of its task's held-out tests it passes: the team's rows log each coder's (``turn_tests[0]
["candidates"]``), best of 2's each sample's (``selections[0]["held_out_passed"]``, logged after the choice). Per pair
(task, seed) the sent program's score splits exactly into three terms:

    sent = one candidate (the two's mean) + the second's gain (better − mean) + what the choice keeps (sent − better)

and each term, with the two candidates' agreement, is compared team − best of 2, paired by task and seed.

    python candidates.py candidates/study-seed46 candidates/study-seed48 ...   # writes candidates/figures.json

Older logs have no best-of-2 candidates, but their teams' coders and one agent can still be read alone on turn 1:

    python candidates.py --alone 2-turn1/study 2-turn1/study-seed6             # each condition's turn-1 candidates
"""

import sys
from collections import Counter
from pathlib import Path

import numpy as np

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study import stats
from llm_marl_benchmarks.study.report import read_episodes
from llm_marl_envs.envs.coding.tasks import load_humaneval

ROOT = Path(__file__).resolve().parent
TEAM, BEST_OF_2 = "trained", "single_best_of_n"
TERMS = ("one_candidate", "better_candidate", "second_candidate_gain", "choice_keeps", "sent")


def turn_one(row: dict, held_out_total: int) -> dict[str, float]:
    """The row's turn-1 candidates' scores, in the order the choice breaks ties by (coder_1 first; sample 0 first),
    and the sent program's."""
    first = row["turn_tests"][0]
    if row["condition"] == TEAM:
        counts = [count for _, count in (first["candidates"][a] for a in sorted(first["candidates"]))]
    else:
        selection = row["selections"][0]
        counts = selection["held_out_passed"]
        if counts is None:
            raise SystemExit(f"{row['key']}: no held-out counts per candidate (a log from before the audit)")
    scores = [count / held_out_total for count in counts]
    return {"candidates": scores, "sent": first["held_out"] / held_out_total}


def terms(scores: list[float], sent: float) -> dict[str, float]:
    """The identity's terms for one episode's turn 1 (see the module docstring)."""
    mean, best = float(np.mean(scores)), max(scores)
    return {"one_candidate": mean, "better_candidate": best, "second_candidate_gain": best - mean,
            "choice_keeps": sent - best, "sent": sent}


def main(folders: list[str]) -> None:
    tasks = load_humaneval()
    rows: dict[str, dict[tuple[str, int], dict]] = {TEAM: {}, BEST_OF_2: {}}
    for folder in folders:
        for row in read_episodes(ROOT / folder / "episodes.jsonl").rows:
            if row["condition"] in rows:
                rows[row["condition"]][(row["task"], row["seed"])] = dict(row)
    pairs = sorted(set(rows[TEAM]) & set(rows[BEST_OF_2]))
    if not pairs:
        raise SystemExit("no (task, seed) pair played by both the team and best of 2")
    per: dict[str, dict[str, list[float]]] = {c: {t: [] for t in TERMS} for c in rows}
    coders: dict[str, list[float]] = {}
    agreement: dict[str, Counter] = {c: Counter() for c in rows}
    passes: dict[str, list[tuple[bool, bool]]] = {c: [] for c in rows}
    final: dict[str, list[float]] = {c: [] for c in rows}
    mismatched = 0
    for pair in pairs:
        total = len(tasks.get(pair[0])["held_out_tests"])
        for condition in rows:
            row = rows[condition][pair]
            one = turn_one(row, total)
            if condition == BEST_OF_2:  # the audit's count of the sent sample against the env's own
                mismatched += one["candidates"][row["selections"][0]["chosen"]] != one["sent"]
            else:
                for agent, (_, count) in sorted(row["turn_tests"][0]["candidates"].items()):
                    coders.setdefault(agent, []).append(count / total)
            for term, value in terms(one["candidates"], one["sent"]).items():
                per[condition][term].append(value)
            yes = tuple(score > 0 for score in one["candidates"][:2])
            passes[condition].append(yes)
            agreement[condition][{2: "both", 1: "one", 0: "neither"}[sum(yes)]] += 1
            final[condition].append(float(row["pass_rate"]))
    figures: dict = {"pairs": len(pairs), "turn": 1, "audit_mismatches": mismatched, "terms": {}, "coders": {},
                     "agreement": {}, "final_pass_rate": {}}
    print(f"{len(pairs)} pairs (task, seed); turn 1; a candidate's score is its share of the held-out tests")
    print(f"best of 2: the audit's count of the sent sample differs from the env's in {mismatched} episodes\n")
    print("| turn 1 | team | best of 2 | team − best of 2 [95 % CI], p |")
    print("|---|---|---|---|")
    for term in TERMS:
        result = stats.compare(per[TEAM][term], per[BEST_OF_2][term], paired=True)
        figures["terms"][term] = {"team": result.mean_a, "best_of_2": result.mean_b, "diff": result.diff,
                                  "ci": [result.diff_ci_low, result.diff_ci_high], "p": result.p}
        print(f"| {term.replace('_', ' ')} | {result.mean_a:.3f} | {result.mean_b:.3f} | {result.diff:+.3f} "
              f"[{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f} |")
    print()
    for agent, scores in coders.items():
        figures["coders"][agent] = float(np.mean(scores))
    print("each coder alone (turn 1): " + ", ".join(f"{a} {v:.3f}" for a, v in figures["coders"].items()))
    for condition, counts in agreement.items():
        first, second = (np.array(side, dtype=float) for side in zip(*passes[condition], strict=True))
        # phi, the correlation of two yes/no outcomes; nan when either never varies.
        phi = float(np.corrcoef(first, second)[0, 1]) if first.std() and second.std() else float("nan")
        share = {k: counts[k] / len(pairs) for k in ("both", "one", "neither")}
        figures["agreement"][condition] = {**share, "phi": phi}
        print(f"{condition}: passes any held-out test: both candidates {share['both']:.0%}, one {share['one']:.0%}, "
              f"neither {share['neither']:.0%}; phi = {phi:.2f}")
    result = stats.compare(final[TEAM], final[BEST_OF_2], paired=True)
    figures["final_pass_rate"] = {"team": result.mean_a, "best_of_2": result.mean_b, "diff": result.diff,
                                  "ci": [result.diff_ci_low, result.diff_ci_high], "p": result.p}
    print(f"\nfinal pass rate (the episode's end): team {result.mean_a:.3f}, best of 2 {result.mean_b:.3f}, "
          f"{result.diff:+.3f} [{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f}")
    target = ROOT / Path(folders[0]).parent / "figures.json"
    write_figures_json(target, figures)
    print(f"wrote {target.relative_to(ROOT)}")


def alone(folders: list[str]) -> None:
    """Per condition, the turn-1 score of each agent's candidate (a team's coders) or of the sent program (one agent,
    best of n): how good one candidate is, read from logs of any age; each against one agent's (``single``), paired
    by task and seed, when the logs have it."""
    tasks = load_humaneval()
    scores: dict[tuple[str, str], dict[tuple[str, int], float]] = {}
    for folder in folders:
        for row in read_episodes(ROOT / folder / "episodes.jsonl").rows:
            first, total = row["turn_tests"][0], len(tasks.get(row["task"])["held_out_tests"])
            candidates = first.get("candidates") or {"sent": [first["visible"], first["held_out"]]}
            for agent, (_, count) in candidates.items():
                scores.setdefault((row["condition"], agent), {})[(row["task"], row["seed"])] = count / total
    single = scores.get(("single", "sent"), {})
    for (condition, agent), by_pair in sorted(scores.items()):
        line = f"{condition} {agent}: {np.mean(list(by_pair.values())):.3f} ({len(by_pair)} episodes)"
        shared = sorted(set(by_pair) & set(single))
        if shared and condition != "single":
            result = stats.compare([by_pair[k] for k in shared], [single[k] for k in shared], paired=True)
            line += (f"; − one agent's {result.mean_b:.3f}: {result.diff:+.3f} [{result.diff_ci_low:+.3f}, "
                     f"{result.diff_ci_high:+.3f}], p = {result.p:.3f}")
        print(line)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1:] == ["--alone"]:
        raise SystemExit(__doc__)
    alone(sys.argv[2:]) if sys.argv[1] == "--alone" else main(sys.argv[1:])
