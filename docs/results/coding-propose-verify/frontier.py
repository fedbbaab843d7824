"""Pass rate against critical-path tokens for every team of 2 retrained from the shipped coding-2, beside the shipped
team and the controls, on the shipped team's 80 fresh held-out pairs (``compare_fresh.py``'s rows).

    python frontier.py [--out frontier.png] [--json frontier.json]

Each point is a condition's mean over its episodes with 95 % t intervals on both axes (per-episode values, not
paired: the paired tests are in each folder's ``paired.json``). A team played on one seed's 40 pairs only is drawn
hollow. The issue's targets are the region up and to the left of one agent: more tests passed, no longer a wait.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from compare_fresh import BASELINES, HERE, baseline_rows, team_rows

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.stats import mean_ci

TEAMS = ("2-brief", "2-trim", "2-end", "2-lean", "2-tidy", "2-trees")
"""The retrained teams' folders, in the order they were trained."""
LABELS = {"shipped": "shipped coding-2", "untrained": "untrained team", "single": "one agent",
          "single_best_of_n": "one agent, best of 2"}


def points() -> dict[str, dict]:
    """Each condition's episodes, pass rate and critical path (mean and CI half-width)."""
    groups: dict[str, list[dict]] = {}
    for row in baseline_rows() + [row for team in TEAMS for row in team_rows(team, team)]:
        groups.setdefault(row["condition"], []).append(row)
    out = {}
    for condition, rows in groups.items():
        out[condition] = {"episodes": len(rows)}
        for metric in ("pass_rate", "critical_path_tokens"):
            interval = mean_ci([r[metric] for r in rows])
            out[condition][metric] = {"mean": interval.mean, "ci95_half_width": interval.half_width}
    return out


def plot(figures: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    for condition, entry in figures.items():
        x, y = entry["critical_path_tokens"], entry["pass_rate"]
        control = condition in BASELINES and condition != "shipped"
        full = entry["episodes"] >= 80
        ax.errorbar(x["mean"], y["mean"], xerr=x["ci95_half_width"], yerr=y["ci95_half_width"],
                    fmt="s" if control else "o", color="grey" if control else "tab:blue",
                    mfc=None if full else "white", capsize=3)
        label = LABELS.get(condition, f"coding-{condition}") + ("" if full else " (40 pairs)")
        ax.annotate(label, (x["mean"], y["mean"]), textcoords="offset points", xytext=(6, 4), fontsize=8)
    single = figures["single"]
    ax.axvline(single["critical_path_tokens"]["mean"], color="grey", lw=0.8, ls="--")
    ax.axhline(single["pass_rate"]["mean"] * 1.217, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("critical-path tokens (sum over turns of the longest reply)")
    ax.set_ylabel("held-out pass rate")
    ax.set_title("Teams of 2 on 80 fresh held-out pairs (bf16, CPU): dashed = one agent's wait,\n"
                 "dotted = 1.217 x one agent's pass rate", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "frontier.png")
    parser.add_argument("--json", type=Path, default=HERE / "frontier.json")
    args = parser.parse_args()
    figures = points()
    print("| condition | episodes | pass rate [95 % CI] | critical-path tokens [95 % CI] |")
    print("|---|---|---|---|")
    for condition, entry in figures.items():
        p, c = entry["pass_rate"], entry["critical_path_tokens"]
        name = LABELS.get(condition, f"coding-{condition}")
        print(f"| {name} | {entry['episodes']} | {p['mean']:.3f} ± {p['ci95_half_width']:.3f} | "
              f"{c['mean']:.0f} ± {c['ci95_half_width']:.0f} |")
    write_figures_json(args.json, figures)
    plot(figures, args.out)


if __name__ == "__main__":
    main()
