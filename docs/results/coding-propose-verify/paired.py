"""Paired held-out comparison of a trained coding team with its untrained team, one agent and one agent's best of n.

The rows come from study folders played with one design (split, seed, pairs, scheme): ``SIZE/base/`` (untrained,
single, single_best_of_n) and ``SIZE/trained/`` (the trained condition needs the team's run folder, so it ran on its
own with the same design), or one folder holding all four (``2-turn1/study``). Pairs are (task, seed).
``python paired.py 2`` prints each comparison with its 95 % CI and p (pass rate also as a ratio), and writes
``SIZE/paired.json``; ``python paired.py 2-40 2-40-seed2`` pools the folders' pairs and writes ``pooled.json`` in the
folder that holds them (here, this one; ``2-turn1/pooled.json`` for ``2-turn1/study 2-turn1/study-seed6``). Per
condition it also gives the share of episodes whose program passes any held-out test, and for a team each agent's
credit > 0 among those episodes: a coder's credit is its own candidate's held-out pass rate, so the first share bounds
the passenger target's reach.

A pooled file names the folders it pools (``"folders"``), and the script will not overwrite one that another set of
folders wrote: pooling two folders whose common folder is this one would otherwise replace the 2-40 pooling's
``pooled.json``. ``--out PATH`` writes elsewhere. A file written before pooled files named their folders counts as
this pooling's when every figure in it is one computed now (older versions of this script wrote fewer), and is left
as it is.
"""

import argparse
import json
import os
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study.report import compare_pairs, read_episodes

ROOT = Path(__file__).resolve().parent  # the study folders beside this script
CONDITIONS = ("trained", "untrained", "single", "single_best_of_n")
METRICS = ("pass_rate", "success", "turns", "critical_path_tokens", "completion_tokens")


def load(folder: Path) -> list[dict]:
    """The study log's episodes in ``folder`` (none when it holds no log), read as the study reads them."""
    path = folder / "episodes.jsonl"
    return [dict(row) for row in read_episodes(path).rows] if path.exists() else []


def credit_shares(rows: list[dict], agents: Iterable[str] | None = None) -> dict[str, float]:
    """Per agent (``agents``, else every agent credited in ``rows``), the share of ``rows`` in which its
    counterfactual credit is > 0; empty when there are no rows."""
    if not rows:
        return {}
    names = sorted(agents if agents is not None else {a for r in rows for a in r["contributions"]})
    return {a: sum((r["contributions"].get(a) or 0) > 0 for r in rows) / len(rows) for a in names}


def team_credit(name: str, played: list[dict], figures: dict) -> None:
    """Into ``figures``, under ``name``: each agent's share of ``played`` with credit > 0, and the share of episodes
    whose program passes any held-out test (what bounds the first); printed as a line."""
    shares = credit_shares(played)
    passes_any = sum(float(r["pass_rate"]) > 0 for r in played) / max(len(played), 1)
    figures[f"{name}, credit > 0"] = shares
    figures[f"{name}, passes any held-out test"] = passes_any
    print(f"{name} ({len(played)} episodes): credit > 0 {shares}; passes any held-out test {passes_any:.0%}")


def comparison_entry(result: Any, a: str = "a", b: str = "b", count: str | None = None) -> dict:
    """A paired comparison (:class:`~llm_marl_benchmarks.study.stats.Comparison`) as the figures files keep it: the
    two means under ``a`` and ``b``, ``diff``, its 95 % ``ci``, ``p``, and the pairs counted under ``count`` if
    given."""
    entry = {a: result.mean_a, b: result.mean_b, "diff": result.diff, "ci": [result.diff_ci_low, result.diff_ci_high],
             "p": result.p}
    if count is not None:
        entry[count] = result.n_a
    return entry


def phi(first: Sequence[bool], second: Sequence[bool]) -> float:
    """The phi coefficient (Pearson's r of two yes/no series, Cramer 1946) of two candidates' "passes any held-out
    test" over the same pairs; nan when either never varies."""
    x, y = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    return float(np.corrcoef(x, y)[0, 1]) if x.std() and y.std() else float("nan")


def phi_interval(*series: Sequence[bool], resamples: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """``phi(a, b)`` and its 95 % paired bootstrap interval over the pairs (percentile: resampling pairs keeps each
    pair's two candidates together). With four series, ``phi(a, b) - phi(c, d)`` on the same pairs: two conditions
    compared, each pair resampled once for both. Resamples where a series never varies are left out (nan)."""
    if len(series) not in (2, 4):
        raise ValueError("phi_interval takes two series (one condition) or four (two conditions, a - b)")

    def statistic(*resampled: np.ndarray) -> float:
        value = phi(resampled[0], resampled[1])
        return value - phi(resampled[2], resampled[3]) if len(resampled) == 4 else value

    # By hand, not scipy.stats.bootstrap: that returns a nan interval once any resample is nan, and at a pass rate
    # near 0.2 on 66 pairs a few resamples in 10,000 have a candidate that never passes.
    data = tuple(np.asarray(s, dtype=float) for s in series)
    rng = np.random.default_rng(seed)
    draws = np.array([statistic(*(d[index] for d in data))
                      for index in rng.integers(0, len(data[0]), size=(resamples, len(data[0])))])
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    return statistic(*data), float(low), float(high)


def training_steps(path: Path) -> dict:
    """A training run's ``metrics.jsonl`` summed up: step count, mean completion tokens, completions, seconds and
    generation seconds a step, the median seconds a step (what a few steps slowed by other work on the machine
    barely move), and the mean train reward of its first and last 10 steps."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"steps": len(rows),
            "completion_tokens_per_step": statistics.fmean(r["completion_tokens"] for r in rows),
            "completions_per_step": statistics.fmean(r["completions"] for r in rows),
            "seconds_per_step": statistics.fmean(r["step_time"] for r in rows),
            "median_seconds_per_step": statistics.median(r["step_time"] for r in rows),
            "generation_seconds_per_step": statistics.fmean(r["generation_time"] for r in rows),
            "train_reward_first_10": statistics.fmean(r["reward"] for r in rows[:10]),
            "train_reward_last_10": statistics.fmean(r["reward"] for r in rows[-10:])}


def training_figures(runs: dict[str, Path], figures: dict, prefix: str = "training: ") -> None:
    """Into ``figures``, under ``prefix + name``: :func:`training_steps` of each run in ``runs`` (name -> its
    ``metrics.jsonl``) that exists; printed a line each."""
    for name, path in runs.items():
        if path.exists():
            figures[prefix + name] = summary = training_steps(path)
            print(f"training, {name}: " + ", ".join(f"{k} {v:.3g}" for k, v in summary.items()))


def _within(old: object, new: object) -> bool:
    """Whether every value of ``old`` is in ``new`` at the same place (``new`` may hold more keys)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _within(v, new[k]) for k, v in old.items())
    return old == new


def pooled_file_holds(target: Path, figures: dict, folders: list[str]) -> str:
    """What ``target`` holds, for pooled ``figures`` of ``folders``: ``"nothing"`` (absent), ``"this"`` (it names the
    same folders, in any order), ``"this, unnamed"`` (it names none, written before pooled files did, and every
    figure in it is one of ``figures``: an older paired.py wrote fewer) or ``"another"`` (another pooling's figures,
    which must not be overwritten)."""
    if not target.exists():
        return "nothing"
    existing = json.loads(target.read_text(encoding="utf-8"))
    if "folders" in existing:
        return "this" if sorted(existing["folders"]) == sorted(folders) else "another"
    return "this, unnamed" if _within(existing, json.loads(json.dumps(figures))) else "another"  # JSON: no tuples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", default=["2"], metavar="FOLDER",
                        help="study folders beside this script (default: 2); several are pooled")
    parser.add_argument("--out", type=Path, default=None,
                        help="where to write the figures (default: FOLDER/paired.json; pooled: pooled.json in the "
                             "folder that holds them all)")
    args = parser.parse_args(argv)
    sizes: list[str] = args.sizes
    by_condition: dict[str, dict] = {c: {} for c in CONDITIONS}
    for size in sizes:
        for folder in ("base", "trained", "."):
            for row in load(ROOT / size / folder):
                if row["condition"] in by_condition:
                    by_condition[row["condition"]][(row["task"], row["seed"])] = row
    figures: dict = {"conditions": {}, "comparisons": {}}
    print(f"| condition | episodes | {' | '.join(METRICS)} | contribution > 0 (share of episodes, per agent) |")
    print("|---" * (len(METRICS) + 3) + "|")
    for condition, rows in by_condition.items():
        if not rows:
            continue
        values = list(rows.values())
        entry = {m: sum(float(r[m]) for r in values) / len(values) for m in METRICS}
        credited = [r for r in values if r.get("contributions")]
        if credited:  # the passenger check: each agent's counterfactual credit > 0 in how many episodes
            entry["contribution_positive"] = credit_shares(credited)
            # The passenger target's ceiling: a coder earns credit only when its own candidate passes a held-out
            # test, so the share that matters is among the episodes where the team's program passes one.
            entry["contribution_positive_when_team_passes"] = credit_shares(
                [r for r in credited if float(r["pass_rate"]) > 0], agents=entry["contribution_positive"])
        # Episodes whose program passes at least one held-out test (the most any agent's credit > 0 can reach).
        entry["passes_any"] = sum(float(r["pass_rate"]) > 0 for r in values) / len(values)
        figures["conditions"][condition] = {"episodes": len(values), **entry}
        shares = ", ".join(f"{a} {v:.0%}" for a, v in entry.get("contribution_positive", {}).items()) or "—"
        given = ", ".join(f"{a} {v:.0%}" for a, v in entry.get("contribution_positive_when_team_passes", {}).items())
        print(f"| {condition} | {len(values)} | " + " | ".join(f"{entry[m]:.3f}" for m in METRICS) + f" | {shares} |"
              + f" passes any held-out test: {entry['passes_any']:.0%}"
              + (f"; credit > 0 then: {given}" if given else ""))
    print()
    pairs = [(team, other) for team in ("trained", "untrained") for other in ("untrained", "single", "single_best_of_n")
             if team != other and by_condition[team] and by_condition[other]]
    rows = [row for by_pair in by_condition.values() for row in by_pair.values()]
    # The study's own test: paired by task and seed when every episode has its partner, else Welch.
    figures["comparisons"] = compare_pairs(rows, pairs, METRICS, "coding", echo=False)
    for name, result in figures["comparisons"].items():
        ratio = result["mean_a"] / result["mean_b"] if name.endswith(": pass_rate") and result["mean_b"] else None
        print(f"{name} ({result['n_a']} pairs): {result['mean_a']:.3f} vs {result['mean_b']:.3f}, "
              f"{result['diff']:+.3f} [{result['diff_ci_low']:+.3f}, {result['diff_ci_high']:+.3f}], "
              f"p = {result['p']:.3f}" + (f" ({ratio:.2f}x)" if ratio is not None else ""))
    # One folder: its paired.json; several: pooled.json in the folder that holds them all.
    target = ROOT / sizes[0] / "paired.json" if len(sizes) == 1 else ROOT / os.path.commonpath(sizes) / "pooled.json"
    if args.out is not None:
        target = args.out
    if len(sizes) > 1:
        holds = pooled_file_holds(target, figures, sizes)
        if holds == "another":
            print(f"paired.py: {target} holds another pooling's figures; nothing written. Name a file with --out.",
                  file=sys.stderr)
            return 2
        if holds == "this, unnamed":  # left byte for byte as committed
            print(f"{target}: left as it is (this pooling's figures, written before pooled files named their "
                  "folders); --out PATH writes today's fuller set")
            return 0
        figures = {"folders": list(sizes), **figures}
    write_figures_json(target, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
