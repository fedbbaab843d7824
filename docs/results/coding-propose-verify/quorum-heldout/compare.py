"""RULE-quorum.md's one held-out look: the shipped coding-2 under ``end_quorum="half"`` against itself under
``"all"``, and each ending against one agent and one agent's best of 2, on HumanEval's eval split at seeds 54–57.

    python compare.py          # reads all-seed54/, all-seed56/, half-seed54/, half-seed56/; writes figures.json

Written before the last run was in and run once when all four were (the rule). Every comparison is paired by task
and seed (``compare_pair``); the rule's two questions are answered at the end, by the thresholds the rule set.
"""

import sys
from collections import Counter
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pair, compare_pairs, read_episodes

HERE = Path(__file__).resolve().parent
RUNS = ("all-seed54", "all-seed56", "half-seed54", "half-seed56")
METRICS = ("pass_rate", "critical_path_tokens", "turns", "completion_tokens", "success")
PAIRS = (("trained_half", "trained_all"),
         ("trained_half", "single"), ("trained_all", "single"),
         ("trained_half", "single_best_of_n"), ("trained_all", "single_best_of_n"))
# RULE-quorum.md: (1) pass rate under "half" not lower when the CI's lower bound of half − all is above −0.03;
# (2) critical path shorter when half − all < 0 with p < 0.05.
PASS_RATE_MARGIN = -0.03
ALPHA = 0.05
EXPECTED_PAIRS = 132


def read_rows() -> list[dict]:
    """Every run's episodes, the team's condition renamed by its ending so the pairing sets the two side by side."""
    missing = [run for run in RUNS if not (HERE / run / "episodes.jsonl").is_file()]
    if missing:
        sys.exit(f"the rule is read once, with all four runs in; missing: {', '.join(missing)}")
    rows = []
    for run in RUNS:
        ending = run.split("-")[0]
        for row in read_episodes(HERE / run / "episodes.jsonl").rows:
            condition = row["condition"]
            rows.append({**row, "condition": f"trained_{ending}" if condition == "trained" else condition})
    return rows


def main() -> None:
    rows = read_rows()
    figures: dict = {"rule": "../RULE-quorum.md",
                     "comparisons": compare_pairs(rows, PAIRS, METRICS, env="coding", size=2), "end_reasons": {}}
    for ending in ("all", "half"):
        team = [r for r in rows if r["condition"] == f"trained_{ending}"]
        figures["end_reasons"][ending] = dict(sorted(Counter(r["end_reason"] for r in team).items()))
        print(f"team under {ending!r}: how episodes ended: {figures['end_reasons'][ending]}")

    pass_rate = compare_pair(rows, "trained_half", "trained_all", "pass_rate", env="coding", size=2)
    critical = compare_pair(rows, "trained_half", "trained_all", "critical_path_tokens", env="coding", size=2)
    if pass_rate is None or critical is None or pass_rate.test != "paired t" or pass_rate.n_a != EXPECTED_PAIRS:
        sys.exit(f"the rule asks for {EXPECTED_PAIRS} complete pairs; the runs do not give them")
    not_lower = pass_rate.diff_ci_low > PASS_RATE_MARGIN
    shorter = critical.diff < 0 and critical.p < ALPHA
    figures["rule_answers"] = {
        "1_pass_rate_not_lower": not_lower, "2_critical_path_shorter": shorter,
        "default_becomes_half": not_lower and shorter,
    }
    print(f"(1) pass rate not lower (CI low {pass_rate.diff_ci_low:+.3f} > {PASS_RATE_MARGIN}): {not_lower}")
    print(f"(2) critical path shorter ({critical.diff:+.1f}, p = {critical.p:.3g} < {ALPHA}): {shorter}")
    print(f"coding's default ending becomes 'half': {not_lower and shorter}")
    write_figures_json(HERE / "figures.json", figures)


if __name__ == "__main__":
    main()
