"""Candidate by candidate: why a coding team and one agent's best of n pass what they pass (``candidates/PLAN.md``,
``candidates-4/PLAN.md``).

Both send one of their candidates, chosen by the visible tests (a team of 4 adds its tester and verifier). On turn 1
(where the pass rate is decided) a candidate's score is the share of its task's held-out tests it passes: the team's
rows log each coder's (``turn_tests[0]["candidates"]``), best of n's each sample's (``selections[0]
["held_out_passed"]``, logged after the choice). Per pair (task, seed) the sent program's score splits exactly
into three terms:

    sent = one candidate (the mean) + the others' gain (best − mean) + what the choice keeps (sent − best)

and each term, with how many candidates pass, is compared team − best of n, paired by task and seed (the split
is the study report's own, :func:`llm_marl_benchmarks.study.report.candidate_split`).

    python candidates.py candidates/study-seed46 candidates/study-seed48 ...   # writes candidates/figures.json

Older logs have no best-of-2 candidates, but their teams' coders and one agent can still be read alone on turn 1:

    python candidates.py --alone 2-turn1/study 2-turn1/study-seed6             # each condition's turn-1 candidates

A team with a tester or a verifier chooses among its coders' candidates with more than the visible tests. Its logs
show what that bought against the visible tests alone on the same candidates (the env's rule without those roles):

    python candidates.py --choice ../fresh-turn-noise/coding-4 ../fresh-turn-noise/coding-4-seed1
"""

import sys
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study import stats
from llm_marl_benchmarks.study.report import (
    BEST_OF_N,
    CANDIDATE_TERMS,
    candidate_split,
    read_episodes,
    turn_one_candidates,
)
from llm_marl_envs.envs.coding.program import CandidateResult, select_candidate
from llm_marl_envs.envs.coding.roles import CANDIDATE_ORDER
from llm_marl_envs.envs.coding.tasks import load_humaneval

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from paired import comparison_entry, phi_interval  # noqa: E402  (the results folder's own reading)

TEAM = "trained"


def main(folders: list[str]) -> None:
    tasks = load_humaneval()
    rows = [dict(row) for folder in folders for row in read_episodes(ROOT / folder / "episodes.jsonl").rows
            if row["condition"] in (TEAM, BEST_OF_N)]
    # These logs predate turn_tests' held_out_total: the task data gives it.
    totals = {task: len(tasks.get(task)["held_out_tests"]) for task in {str(r["task"]) for r in rows}}
    (split,) = [r for r in candidate_split(rows, totals) if r["condition"] == TEAM]
    by_pair = {(r["condition"], r["task"], r["seed"]): r for r in rows}
    pairs = sorted({(t, s) for c, t, s in by_pair if c == TEAM} & {(t, s) for c, t, s in by_pair if c == BEST_OF_N})
    n = by_pair[(BEST_OF_N, *pairs[0])]["candidates_per_turn"]
    other = f"best of {n}"
    mismatched = 0  # best of n: the audit's count of the sent sample against the env's own
    for task, seed in pairs:
        row = by_pair[(BEST_OF_N, task, seed)]
        scores, sent = turn_one_candidates(row, totals[task])
        mismatched += scores[row["selections"][0]["chosen"]] != sent
    figures: dict = {"best_of": n, "pairs": split["pairs"], "turn": 1, "audit_mismatches": mismatched, "terms": {},
                     "coders": {}, "passing": split["passing"], "phi": {}, "phi_ci": {},
                     "final_pass_rate": {}}
    print(f"{split['pairs']} pairs (task, seed); turn 1; a candidate's score is its share of the held-out tests")
    print(f"{other}: the audit's count of the sent sample differs from the env's in {mismatched} episodes\n")
    print(f"| turn 1 | team | {other} | team − {other} [95 % CI], p |")
    print("|---|---|---|---|")
    for term in CANDIDATE_TERMS:
        result = split["terms"][term]
        figures["terms"][term] = comparison_entry(result, "team", "best_of_n")
        print(f"| {term.replace('_', ' ')} | {result.mean_a:.3f} | {result.mean_b:.3f} | {result.diff:+.3f} "
              f"[{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f} |")
    # The better candidate alone (one candidate + what the best adds), for the README's table.
    best = {c: [max(turn_one_candidates(by_pair[(c, t, s)], totals[t])[0]) for t, s in pairs]
            for c in (TEAM, BEST_OF_N)}
    result = stats.compare(best[TEAM], best[BEST_OF_N], paired=True)
    figures["terms"]["better_candidate"] = comparison_entry(result, "team", "best_of_n")
    print(f"| better candidate | {result.mean_a:.3f} | {result.mean_b:.3f} | {result.diff:+.3f} "
          f"[{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f} |")
    passing: dict[str, list[list[bool]]] = {}
    for condition in (TEAM, BEST_OF_N):
        read = [turn_one_candidates(by_pair[(condition, t, s)], totals[t])[0] for t, s in pairs]
        # phi: the correlation of two candidates' yes/no "passes any held-out test" (coder_1 and coder_2; best of
        # n's first two samples), with its paired bootstrap interval.
        passing[condition] = [[scores[i] > 0 for scores in read] for i in (0, 1)]
        value, low, high = phi_interval(*passing[condition])
        figures["phi"][condition] = value
        figures["phi_ci"][condition] = [low, high]
        print(f"{condition}: episodes by candidates passing any held-out test {split['passing'][condition]}; "
              f"phi = {value:.2f} [{low:.2f}, {high:.2f}]")
    diff, low, high = phi_interval(*passing[TEAM], *passing[BEST_OF_N])
    figures["phi_ci"]["team - best_of_n"] = {"diff": diff, "ci": [low, high]}
    print(f"phi, team − {other}: {diff:+.2f} [{low:+.2f}, {high:+.2f}]")
    for agent in sorted(by_pair[(TEAM, *pairs[0])]["turn_tests"][0]["candidates"]):
        figures["coders"][agent] = float(np.mean([
            by_pair[(TEAM, t, s)]["turn_tests"][0]["candidates"][agent][1] / totals[t] for t, s in pairs]))
    print("each coder alone (turn 1): " + ", ".join(f"{a} {v:.3f}" for a, v in figures["coders"].items()))
    result = stats.compare([by_pair[(TEAM, *p)]["pass_rate"] for p in pairs],
                           [by_pair[(BEST_OF_N, *p)]["pass_rate"] for p in pairs], paired=True)
    figures["final_pass_rate"] = comparison_entry(result, "team", "best_of_n")
    print(f"\nfinal pass rate (the episode's end): team {result.mean_a:.3f}, {other} {result.mean_b:.3f}, "
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
    # A team's coders against each other: their prompts differ only in the names, so a gap is the model's reading
    # of the names (or chance), not of the task.
    for condition in sorted({c for c, _ in scores}):
        coders = sorted(a for c, a in scores if c == condition and a != "sent")
        for other in coders[1:]:
            first, second = scores[(condition, coders[0])], scores[(condition, other)]
            shared = sorted(set(first) & set(second))
            result = stats.compare([first[k] for k in shared], [second[k] for k in shared], paired=True)
            print(f"{condition}: {coders[0]} − {other}: {result.diff:+.3f} [{result.diff_ci_low:+.3f}, "
                  f"{result.diff_ci_high:+.3f}], p = {result.p:.3f} ({len(shared)} episodes)")


def choice(folders: list[str]) -> None:
    """Per team condition, on turn 1: in how many episodes the team's choice (visible tests, then the tester's asserts
    and the verifier's pick) sent a candidate scoring other than what the visible tests alone would have sent (the
    env's own rule, :func:`~llm_marl_envs.envs.coding.program.select_candidate`, without the tester and verifier),
    with a two-sided sign test over those episodes. Logs before ``turn_tests`` recorded ``runnable`` give each
    candidate's visible and held-out counts but not whether it ran at all: one with neither passed may not have, and
    the rule skips such candidates. Where that decides the visible-only choice's score, the episode is counted as
    undetermined, not as a change."""
    tasks = load_humaneval()
    order_of = {frozenset(names): names for names in CANDIDATE_ORDER.values()}
    changes: dict[str, list[float]] = {}
    undetermined: dict[str, int] = {}
    for folder in folders:
        for row in read_episodes(ROOT / folder / "episodes.jsonl").rows:
            trace = row.get("turn_tests") or []
            if not trace or "candidates" not in trace[0] or not trace[0].get("selected"):
                continue
            first, total = trace[0], len(tasks.get(row["task"])["held_out_tests"])
            counts = first["candidates"]
            order = order_of[frozenset(counts)]
            if isinstance(first.get("runnable"), dict):
                # Logs since turn_tests recorded it say which candidates ran: the visible-only choice is known.
                picks = {select_candidate([CandidateResult(a, first["runnable"][a], counts[a][0]) for a in order],
                                          order)}
            else:
                # The visible-only choice twice: every candidate runnable, and only those known to be (the sent one,
                # and any that passed a test).
                known = {a for a in order if any(counts[a]) or a == first["selected"]}
                picks = {select_candidate([CandidateResult(a, everyone or a in known, counts[a][0]) for a in order],
                                          order) for everyone in (True, False)}
            scores = {counts[pick][1] for pick in picks if pick is not None}
            if len(scores) > 1:
                undetermined[row["condition"]] = undetermined.get(row["condition"], 0) + 1
                continue
            changes.setdefault(row["condition"], []).append((counts[first["selected"]][1] - scores.pop()) / total)
    for condition, values in changes.items():
        won, lost = sum(v > 0 for v in values), sum(v < 0 for v in values)
        p = binomtest(won, won + lost).pvalue if won + lost else float("nan")
        print(f"{condition}: {len(values)} episodes; the choice beat the visible tests alone in {won}, lost in {lost} "
              f"(sign test p = {p:.3f}); held-out score {np.mean(values):+.3f} an episode; "
              f"{undetermined.get(condition, 0)} more undetermined")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1:] in (["--alone"], ["--choice"]):
        raise SystemExit(__doc__)
    modes = {"--alone": alone, "--choice": choice}
    modes[sys.argv[1]](sys.argv[2:]) if sys.argv[1] in modes else main(sys.argv[1:])
