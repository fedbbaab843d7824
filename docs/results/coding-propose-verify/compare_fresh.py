"""A team of 2 retrained from the shipped coding-2 against the other conditions of the shipped team's fresh headline,
on its 80 pairs (each folder's RULE.md): ``python compare_fresh.py 2-trim 2-brief``.

The first folder's team is ``trained``: its rows are that folder's study logs (``study-seed4``, ``study-seed6``: the
trained condition only). Each further folder's trained rows come in under the folder's name (``2-brief``). The
untrained team, one agent, one agent's best of 2 and the shipped team (``shipped``) are the rows of
``../fresh-turn-noise/coding-2`` and ``coding-2-seed6``, played with the same design. Pairs are (task, seed). Prints
each comparison with its 95 % CI and p and writes ``paired.json`` into the first folder. A team played on one seed's
pairs only (``2-end``) is compared with that seed's rows of the other conditions.
"""

import dataclasses
import sys
from pathlib import Path

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pair, read_episodes

HERE = Path(__file__).resolve().parent
FRESH = HERE.parent / "fresh-turn-noise"
BASELINES = ("shipped", "untrained", "single", "single_best_of_n")
METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")


def rows_of(folder: Path, rename: dict[str, str] | None = None, keep: tuple[str, ...] = ()) -> list[dict]:
    """The study log's episodes in ``folder``, conditions renamed by ``rename`` and kept if in ``keep`` (all if
    empty)."""
    rows = []
    for row in read_episodes(folder / "episodes.jsonl").rows:
        row = dict(row)
        row["condition"] = (rename or {}).get(row["condition"], row["condition"])
        if not keep or row["condition"] in keep:
            rows.append(row)
    return rows


def team_rows(folder: str, name: str) -> list[dict]:
    """The trained rows of a retrained team's study logs (``folder``'s ``study-seed4`` and ``study-seed6``, those
    present), under condition ``name``."""
    rows = []
    for seed_folder in ("study-seed4", "study-seed6"):
        if (HERE / folder / seed_folder / "episodes.jsonl").exists():
            rows += rows_of(HERE / folder / seed_folder, {"trained": name}, (name,))
    return rows


def baseline_rows(seeds: set[int] | None = None) -> list[dict]:
    """The shipped team's fresh headline: its trained rows (as ``shipped``) and the other conditions of ``BASELINES``,
    of ``seeds`` only when given."""
    rows = []
    for seed_folder in ("coding-2", "coding-2-seed6"):
        rows += [row for row in rows_of(FRESH / seed_folder, {"trained": "shipped"}, BASELINES)
                 if seeds is None or row["seed"] in seeds]
    return rows


def main(team: str, *others: str) -> None:
    rows = team_rows(team, "trained")
    for other in others:
        rows += team_rows(other, other)
    # A team played on one seed's pairs only is compared with the baselines of that seed, so every pair is complete.
    rows += baseline_rows({row["seed"] for row in rows if row["condition"] == "trained"})
    figures: dict = {"conditions": {}, "comparisons": {}}
    print(f"| condition | episodes | {' | '.join(METRICS)} | credit > 0 (share of episodes, per coder) |")
    print("|---" * (len(METRICS) + 3) + "|")
    for condition in ("trained", *others, *BASELINES):
        values = [r for r in rows if r["condition"] == condition]
        if not values:
            continue
        entry = {m: sum(float(r[m]) for r in values) / len(values) for m in METRICS}
        credits = [r["contributions"] for r in values if r.get("contributions")]
        if credits:
            agents = sorted({a for c in credits for a in c})
            entry["contribution_positive"] = {a: sum((c.get(a) or 0) > 0 for c in credits) / len(credits)
                                              for a in agents}
        figures["conditions"][condition] = {"episodes": len(values), **entry}
        shares = ", ".join(f"{a} {v:.0%}" for a, v in entry.get("contribution_positive", {}).items()) or "—"
        print(f"| {condition} | {len(values)} | " + " | ".join(f"{entry[m]:.3f}" for m in METRICS) + f" | {shares} |")
    print()
    for other in (*BASELINES, *others):
        for metric in ("pass_rate", "critical_path_tokens", "turns"):
            result = compare_pair(rows, "trained", other, metric, "coding")
            if result is None:
                continue
            name = f"trained - {other}: {metric}"
            figures["comparisons"][name] = dataclasses.asdict(result)
            print(f"{name} ({result.n_a} pairs): {result.mean_a:.3f} vs {result.mean_b:.3f}, "
                  f"{result.diff:+.3f} [{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3f}")
    write_figures_json(HERE / team / "paired.json", figures)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python compare_fresh.py TEAM_FOLDER [OTHER_TEAM_FOLDER ...]")
    main(*sys.argv[1:])
