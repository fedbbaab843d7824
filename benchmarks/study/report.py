"""The study's report: summary tables, t-tests, the turns-on-consistency regression, plots and the headline.

Reads the episode log the runner writes (``DIR/episodes.jsonl``, one JSON object per line) and writes next to it:

- ``report.md``      headline (ours next to the seeds' paper), summary, tests, regression, how to read them;
- ``summary.csv``    per condition × env × team size (and pooled over sizes, ``team_size = all``): episodes and
                     mean with 95 % CI of every metric;
- ``tests.csv``      every comparison of ``trained`` against each other condition, per env and team size and pooled
                     over sizes: paired t-test (d_z) when every episode has its partner, else Welch (Cohen's d);
- ``regression.csv`` ``T = α + β·C + ε`` on min–max normalised turns and each consistency column;
- ``bars_<env>.png`` means with 95 % CI per condition and team size; ``scatter_<env>.png`` T against C with the fit.

Rebuild from a log: ``python -m llm_marl_benchmarks.study.report DIR``.

Missing values stay missing: single-agent episodes have no consistency (``None``) and coding is the only env with
a pass rate, so those rows drop out of the statistics of that metric instead of counting as 0.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.study import stats
from llm_marl_benchmarks.study.episode_log import LOG_NAME
from llm_marl_benchmarks.study.execution import echoed_scaffolding
from llm_marl_envs.registry import ENV_NAMES

__all__ = [
    "CONSISTENCY_COLUMNS",
    "FEW_EPISODES",
    "METRICS",
    "EmptyLogError",
    "LogContents",
    "build_report",
    "clean_rows",
    "compare_conditions",
    "compare_pair",
    "format_headline",
    "format_three_way",
    "headline",
    "main",
    "print_headline",
    "read_episodes",
    "regressions",
    "summarise",
    "three_way",
    "turn_distribution",
]

REFERENCE = "trained"  # every test compares this condition against each other one
POOLED = "all"  # the team-size (and env/condition) label of pooled rows

# Every per-episode metric the report averages and tests, in table order.
METRICS: tuple[str, ...] = (
    "success",
    "pass_rate",
    "turns",
    "team_return",
    "quality",
    "consistency_similarity",
    "consistency_contribution",
    "duplication",
    "empty_parts",
    "protocol_only_actions",
    "echoed_scaffolding",
    "helper_load_bearing",
    "critical_path_tokens",
    "completion_tokens",
    "wall_time_s",
)
# Drift into a degenerate strategy would show here, trained against untrained (see DEGENERACY_METRICS' labels).
DEGENERACY_METRICS: tuple[str, ...] = ("duplication", "empty_parts", "protocol_only_actions", "echoed_scaffolding",
                                       "helper_load_bearing")
# The printed headline: per env, trained against each condition, each cell a difference with its 95 % CI and p.
EFFECT_METRICS: tuple[str, ...] = (
    "team_return",
    "quality",
    "turns",
    "critical_path_tokens",
    "wall_time_s",
    "consistency_contribution",
    "consistency_similarity",
    "duplication",
    "pass_rate",
    "success",
)
# Shown side by side so a consistency gain is visibly not won by copying (high similarity with high duplication).
CONSISTENCY_COLUMNS: tuple[str, ...] = ("consistency_similarity", "consistency_contribution", "duplication")
LABELS: dict[str, str] = {
    "success": "success rate",
    "pass_rate": "unit-test pass rate (coding)",
    "turns": "turns per episode (latency)",
    "team_return": "team return",
    "quality": "quality",
    "consistency_similarity": "consistency: similarity (seeds' def.)",
    "consistency_contribution": "consistency: contribution (env's credit)",
    "duplication": "duplication (near-identical parts)",
    "empty_parts": "empty parts (share of agents)",
    "protocol_only_actions": "actions with no draft (only messages/done)",
    "echoed_scaffolding": "parts echoing the prompt's scaffolding",
    "helper_load_bearing": "helper load-bearing (coding: a test fails without aux)",
    "critical_path_tokens": "critical-path tokens (longest reply per turn, summed)",
    "completion_tokens": "completion tokens (all replies)",
    "wall_time_s": "wall time in its batch (s)",
}
# Compared only between teams: a solo agent is paid (w_q + w_c)·quality, a team w_q·quality + w_c·consistency.
TEAM_ONLY_METRICS: tuple[str, ...] = ("team_return",)
# The headline: what the seeds' three conditions share, compared pairwise (paired by task and seed).
HEADLINE_CONDITIONS: tuple[str, ...] = ("trained", "untrained", "single")
HEADLINE_METRICS: tuple[str, ...] = (
    "quality",
    "pass_rate",
    "success",
    "turns",
    "critical_path_tokens",
    "wall_time_s",
    "team_return",
)
# A figure resting on fewer episodes than this is flagged (†): its interval is wide and its test weak.
FEW_EPISODES = 10
FEW_MARK = "†"

# Known conditions first, in the order the issue lists them; unknown ones follow alphabetically.
CONDITION_ORDER = (
    "trained",
    "untrained",
    "base",
    "naive_concatenation",
    "sequential_pipeline",
    "one_round_discussion",
    "single",
    "single_oneshot",
)
ENV_ORDER = ENV_NAMES  # the registry's order; envs it does not know sort after them

# Fields every row must carry, with the types they must have; metric fields may be absent or None.
_REQUIRED: dict[str, tuple[type, ...]] = {
    "condition": (str,),
    "env": (str,),
    "team_size": (int,),
    "task": (str, int),
    "seed": (int,),
    "turns": (int, float),
}


class EmptyLogError(ValueError):
    """The episode log has no usable rows (missing, empty, or every line malformed)."""


@dataclass
class LogContents:
    """Valid episode rows plus what was dropped while reading them."""

    rows: list[dict[str, Any]]
    malformed: int = 0  # lines that are not JSON objects with the required fields (a torn last line counts here)
    duplicates: int = 0  # rows whose key was already seen; ignored, the first one counts (as the episode log does)
    source: str = ""


# ---------------------------------------------------------------------------------------------------------------
# Reading


def _valid_metric(value: object) -> bool:
    """A metric value is a number, a bool or missing; anything else makes the row malformed."""
    return value is None or isinstance(value, (bool, int, float))


def _row_ok(row: object) -> bool:
    """True when ``row`` is a mapping with the required fields of the right types and numeric (or None) metrics."""
    if not isinstance(row, Mapping):
        return False
    for name, types in _REQUIRED.items():
        value = row.get(name)
        # bool is an int subclass; a team size or seed of True is a broken row, not 1.
        if isinstance(value, bool) or not isinstance(value, types):
            return False
    if isinstance(row["turns"], float) and math.isnan(row["turns"]):
        return False
    return all(_valid_metric(row.get(m)) for m in METRICS)


def _row_key(row: Mapping[str, Any]) -> str:
    """The planned-episode id; rebuilt from the fields when a row lacks ``key``."""
    key = row.get("key")
    if isinstance(key, str) and key:
        return key
    return f"{row['condition']}/{row['env']}/{row['team_size']}/{row['task']}/{row['seed']}"


def clean_rows(raw: Iterable[object], malformed: int = 0, source: str = "") -> LogContents:
    """Keep the well-formed rows (``task`` as str), dropping malformed ones and all but the first row per key.

    First wins because that is the episode log's rule (``episode_log.LogContents`` ignores a key it has seen), so
    the report counts exactly the episodes the runner counted as done.
    """
    by_key: dict[str, dict[str, Any]] = {}
    duplicates = 0
    for row in raw:
        if not _row_ok(row):
            malformed += 1
            continue
        assert isinstance(row, Mapping)  # narrowed by _row_ok
        row = {**row, "task": str(row["task"])}  # a copy: the caller's rows are never modified
        if "echoed_scaffolding" not in row and isinstance(row.get("texts"), Mapping):
            # Logs written before the column existed: derived from the final parts they logged.
            row["echoed_scaffolding"] = echoed_scaffolding(row["texts"])
        key = _row_key(row)
        if key in by_key:
            duplicates += 1
            continue
        by_key[key] = row
    return LogContents(list(by_key.values()), malformed, duplicates, source)


def read_episodes(path: str | Path) -> LogContents:
    """Read a JSON-lines episode log, skipping (and counting) lines that do not parse or lack required fields.

    Blank lines are ignored. Raises ``FileNotFoundError`` when the log is missing.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no episode log at {path}")
    parsed: list[object] = []
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError:
                bad += 1  # e.g. the torn last line of a run that crashed mid-write
    return clean_rows(parsed, malformed=bad, source=str(path))


# ---------------------------------------------------------------------------------------------------------------
# Grouping helpers


def _ordered(values: Iterable[str], order: Sequence[str]) -> list[str]:
    """``values`` deduplicated, known names in ``order`` first, the rest alphabetically."""
    present = set(values)
    known = [v for v in order if v in present]
    return known + sorted(present - set(known))


def conditions_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Conditions present, in report order."""
    return _ordered((r["condition"] for r in rows), CONDITION_ORDER)


def envs_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Envs present, in report order."""
    return _ordered((r["env"] for r in rows), ENV_ORDER)


def sizes_of(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Team sizes present, ascending."""
    return sorted({int(r["team_size"]) for r in rows})


def _select(
    rows: Sequence[Mapping[str, Any]], condition: str | None = None, env: str | None = None, size: int | str = POOLED
) -> list[Mapping[str, Any]]:
    """Rows of one condition/env/team size; ``None`` or ``POOLED`` means any."""
    return [
        r
        for r in rows
        if (condition is None or r["condition"] == condition)
        and (env is None or env == POOLED or r["env"] == env)
        and (size == POOLED or r["team_size"] == size)
    ]


def _values(rows: Iterable[Mapping[str, Any]], metric: str) -> list[float | None]:
    """The metric's values (``None`` where absent); bools become floats later in ``stats.present``."""
    return [r.get(metric) for r in rows]


def _match_key(row: Mapping[str, Any]) -> tuple[str, int, str, int]:
    """Episodes of two conditions are the same experiment when env, team size, task and seed agree."""
    return (row["env"], int(row["team_size"]), str(row["task"]), int(row["seed"]))


def _is_few(n: int) -> bool:
    """A figure resting on fewer than ``FEW_EPISODES`` episodes is flagged (callers skip empty cells first)."""
    return n < FEW_EPISODES


# ---------------------------------------------------------------------------------------------------------------
# Statistics over rows


def summarise(rows: Sequence[Mapping[str, Any]], confidence: float = 0.95) -> list[dict[str, Any]]:
    """One record per condition × env × team size, plus one pooled over sizes (``team_size = "all"``).

    Each record has ``n`` (episodes) and, per metric, ``<metric>_n`` (episodes with a value), ``_mean``,
    ``_ci_low`` and ``_ci_high`` (t-based interval, :func:`stats.mean_ci`).
    """
    records = []
    for condition in conditions_of(rows):
        for env in envs_of(rows):
            for size in [*sizes_of(_select(rows, condition, env)), POOLED]:
                cell = _select(rows, condition, env, size)
                if not cell:
                    continue
                record: dict[str, Any] = {"condition": condition, "env": env, "team_size": size, "n": len(cell)}
                for metric in METRICS:
                    ci = stats.mean_ci(_values(cell, metric), confidence)
                    record[f"{metric}_n"] = ci.n
                    record[f"{metric}_mean"] = ci.mean
                    record[f"{metric}_ci_low"] = ci.low
                    record[f"{metric}_ci_high"] = ci.high
                records.append(record)
    return records


def _compare_rows(
    a_rows: Sequence[Mapping[str, Any]], b_rows: Sequence[Mapping[str, Any]], metric: str
) -> stats.Comparison | None:
    """Paired test when every episode with a value has its partner (same env, size, task, seed), else Welch.

    Only the (env, team size) cells both sides ran are compared (a condition missing at a team size, such as a trained
    team that does not ship at that size, is not compared with the other side's episodes there). Within them, a
    partial run (some episodes without a partner) falls back to Welch on all episodes rather than silently dropping
    the unmatched ones. ``None`` when either side has no value at all (e.g. a single agent's consistency), or for a
    team-only metric (:data:`TEAM_ONLY_METRICS`) when either side is one agent.
    """
    if metric in TEAM_ONLY_METRICS and any(r.get("num_agents") == 1 for r in (*a_rows, *b_rows)):
        return None
    shared = {(r["env"], r["team_size"]) for r in a_rows} & {(r["env"], r["team_size"]) for r in b_rows}
    a_rows = [r for r in a_rows if (r["env"], r["team_size"]) in shared]
    b_rows = [r for r in b_rows if (r["env"], r["team_size"]) in shared]
    a = {_match_key(r): r.get(metric) for r in a_rows if stats.present([r.get(metric)])}
    b = {_match_key(r): r.get(metric) for r in b_rows if stats.present([r.get(metric)])}
    if not a or not b:
        return None
    if a.keys() == b.keys():
        keys = sorted(a)
        return stats.compare([a[k] for k in keys], [b[k] for k in keys], paired=True)
    return stats.compare(list(a.values()), list(b.values()), paired=False)


def compare_conditions(rows: Sequence[Mapping[str, Any]], alpha: float = 0.05) -> list[dict[str, Any]]:
    """``trained`` against every other condition, per env, per team size and pooled over sizes, for every metric.

    Comparisons where one side has no value of the metric (a single agent's consistency, writing's pass rate)
    are left out; so is everything when ``trained`` is absent.
    """
    records: list[dict[str, Any]] = []
    conditions = conditions_of(rows)
    if REFERENCE not in conditions:
        return records
    for env in envs_of(rows):
        env_rows = _select(rows, env=env)
        for size in [*sizes_of(env_rows), POOLED]:
            ours = _select(env_rows, REFERENCE, size=size)
            for other in conditions:
                if other == REFERENCE:
                    continue
                theirs = _select(env_rows, other, size=size)
                for metric in METRICS:
                    result = _compare_rows(ours, theirs, metric)
                    if result is None:
                        continue
                    records.append(
                        {
                            "env": env,
                            "team_size": size,
                            "metric": metric,
                            "condition_a": REFERENCE,
                            "condition_b": other,
                            "test": result.test,
                            "n_a": result.n_a,
                            "n_b": result.n_b,
                            "mean_a": result.mean_a,
                            "mean_b": result.mean_b,
                            "diff": result.diff,
                            "t": result.t,
                            "dof": result.dof,
                            "p": result.p,
                            "effect_name": result.effect_name,
                            "effect_size": result.effect_size,
                            "diff_ci_low": result.diff_ci_low,
                            "diff_ci_high": result.diff_ci_high,
                            "significant": result.significant(alpha),
                            "few": _is_few(min(result.n_a, result.n_b)),
                            "note": result.note,
                        }
                    )
    return records


def compare_pair(
    rows: Sequence[Mapping[str, Any]], a: str, b: str, metric: str, env: str, size: int | str = POOLED
) -> stats.Comparison | None:
    """Condition ``a`` against ``b`` on ``metric`` in ``env`` (one team size, or pooled over the sizes both ran):
    paired by task and seed when every episode has its partner, else Welch; ``None`` when it does not apply (see
    :func:`_compare_rows`)."""
    env_rows = _select(rows, env=env)
    return _compare_rows(_select(env_rows, a, size=size), _select(env_rows, b, size=size), metric)


def three_way(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The headline: per env and team size, the seeds' three conditions (:data:`HEADLINE_CONDITIONS`, those present)
    on what they share (:data:`HEADLINE_METRICS`), each condition's mean [95 % CI] and every pair's difference
    ``a − b`` [95 % CI], p (paired by task and seed). Team return is compared only between teams.

    Returns one record per (env, team size, metric): ``{"env", "team_size", "metric", "means": {condition: MeanCI},
    "pairs": {(a, b): Comparison}}``; a size where fewer than two of the conditions ran is left out.
    """
    rows = clean_rows(rows).rows
    records: list[dict[str, Any]] = []
    for env in envs_of(rows):
        env_rows = _select(rows, env=env)
        for size in sizes_of(env_rows):
            present_conditions = [c for c in HEADLINE_CONDITIONS if _select(env_rows, c, size=size)]
            if len(present_conditions) < 2:
                continue
            for metric in HEADLINE_METRICS:
                means = {c: stats.mean_ci(_values(_select(env_rows, c, size=size), metric))
                         for c in present_conditions}
                if not any(m.n for m in means.values()):
                    continue
                pairs = {}
                for i, a in enumerate(present_conditions):
                    for b in present_conditions[i + 1:]:
                        result = compare_pair(rows, a, b, metric, env, size)
                        if result is not None:
                            pairs[(a, b)] = result
                if metric in TEAM_ONLY_METRICS:
                    means = {c: m for c, m in means.items()
                             if not any(r.get("num_agents") == 1 for r in _select(env_rows, c, size=size))}
                records.append({"env": env, "team_size": size, "metric": metric, "means": means, "pairs": pairs})
    return records


def format_three_way(rows: Sequence[Mapping[str, Any]]) -> str:
    """:func:`three_way` as one Markdown table per env and team size: a row per metric, a column per condition
    (mean [95 % CI]) and per pair (``a − b`` [95 % CI], p)."""
    records = three_way(rows)
    if not records:
        return f"(no headline: fewer than two of {list(HEADLINE_CONDITIONS)} in the log)"
    parts = []
    for (env, size) in dict.fromkeys((r["env"], r["team_size"]) for r in records):
        block = [r for r in records if r["env"] == env and r["team_size"] == size]
        conditions = [c for c in HEADLINE_CONDITIONS if any(c in r["means"] for r in block)]
        pairs = [(a, b) for i, a in enumerate(conditions) for b in conditions[i + 1:]]
        header = ["metric", *conditions, *(f"{a} − {b}" for a, b in pairs)]
        counts = {c: len(_select(_select(rows, env=env), c, size=size)) for c in conditions}
        lines = [f"{env}, team size {size} (episodes: "
                 + ", ".join(f"{c} {counts[c]}" for c in conditions) + "):", "",
                 "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for record in block:
            cells = [LABELS[record["metric"]]]
            for condition in conditions:
                mean = record["means"].get(condition)
                cells.append(_mean_text(mean) if mean is not None else "— (teams only)")
            for pair in pairs:
                result = record["pairs"].get(pair)
                cells.append(_pair_text(result) if result is not None
                             else ("— (teams only)" if record["metric"] in TEAM_ONLY_METRICS else "—"))
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _mean_text(mean: stats.MeanCI) -> str:
    if mean.n == 0:
        return "—"
    if mean.n < 2:
        return f"{_num(mean.mean)} (n=1) {FEW_MARK}"
    return f"{_num(mean.mean)} [{_num(mean.low)}, {_num(mean.high)}]" + (f" {FEW_MARK}" if _is_few(mean.n) else "")


def _pair_text(result: stats.Comparison) -> str:
    text = f"{result.diff:+.3f}"
    if not math.isnan(result.diff_ci_low):
        text += f" [{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}]"
    if math.isnan(result.p):
        text += ", every pair equal" if result.diff_ci_low == result.diff_ci_high else f" ({result.note})"
    else:
        text += ", p < 0.001" if result.p < 0.001 else f", p = {result.p:.3f}"
    return text + (f" {FEW_MARK}" if _is_few(min(result.n_a, result.n_b)) else "")


def turn_distribution(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Turns to the end per env, team size and condition: how many episodes ended at each turn, the share that ended
    before their turn budget, the mean, and how they ended (``end_reason`` counts)."""
    rows = clean_rows(rows).rows
    records = []
    for env in envs_of(rows):
        for size in sizes_of(_select(rows, env=env)):
            for condition in conditions_of(rows):
                cell = _select(rows, condition, env, size)
                if not cell:
                    continue
                turns = [int(r["turns"]) for r in cell]
                budgets = [r.get("turn_budget") for r in cell]
                early = [t < b for t, b in zip(turns, budgets, strict=True) if isinstance(b, int)]
                reasons: dict[str, int] = {}
                for r in cell:
                    reasons[str(r.get("end_reason"))] = reasons.get(str(r.get("end_reason")), 0) + 1
                records.append({
                    "env": env, "team_size": size, "condition": condition, "n": len(cell),
                    "counts": {t: turns.count(t) for t in range(1, max(turns) + 1)},
                    "budget": max((b for b in budgets if isinstance(b, int)), default=None),
                    "ended_early": sum(early) / len(early) if early else None,
                    "mean": sum(turns) / len(turns),
                    "end_reasons": dict(sorted(reasons.items(), key=lambda item: -item[1])),
                })
    return records


def _turns_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The turn distribution as one Markdown table per env."""
    records = turn_distribution(rows)
    parts = []
    for env in dict.fromkeys(r["env"] for r in records):
        block = [r for r in records if r["env"] == env]
        most = max(max(r["counts"]) for r in block)
        header = ["team size", "condition", "n", *(f"{t} turn{'s' * (t > 1)}" for t in range(1, most + 1)),
                  "ended before the budget", "mean", "how they ended"]
        lines = [f"### {env}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in block:
            early = "—" if r["ended_early"] is None else f"{100 * r['ended_early']:.0f} % (budget {r['budget']})"
            reasons = ", ".join(f"{reason} {count}" for reason, count in r["end_reasons"].items())
            lines.append("| " + " | ".join([str(r["team_size"]), r["condition"], str(r["n"]),
                                             *(str(r["counts"].get(t, 0)) for t in range(1, most + 1)),
                                             early, f"{r['mean']:.2f}", reasons]) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) if parts else "No episodes."


def regressions(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``T = α + β·C`` per env (and pooled over envs) × condition (and pooled over conditions) × consistency column.

    Only episodes with that consistency column present enter a fit (single-agent episodes drop out). Scopes with
    no such episode are left out; scopes with too few keep their row with a note.
    """
    records: list[dict[str, Any]] = []
    envs = envs_of(rows)
    for env in [*envs, POOLED] if len(envs) > 1 else envs:
        for condition in [POOLED, *conditions_of(rows)]:
            scope = _select(rows, None if condition == POOLED else condition, env)
            for column in CONSISTENCY_COLUMNS:
                fitted = [r for r in scope if stats.present([r.get(column)])]
                if not fitted:
                    continue
                fit = stats.regression_turns_on_consistency(_values(fitted, "turns"), _values(fitted, column))
                records.append(
                    {
                        "env": env,
                        "condition": condition,
                        "consistency": column,
                        "n": fit.n,
                        "alpha": fit.alpha,
                        "alpha_ci_low": fit.alpha_ci[0],
                        "alpha_ci_high": fit.alpha_ci[1],
                        "beta": fit.beta,
                        "beta_ci_low": fit.beta_ci[0],
                        "beta_ci_high": fit.beta_ci[1],
                        "p_beta": fit.p_beta,
                        "r2": fit.r2,
                        "note": fit.note,
                    }
                )
    return records


# ---------------------------------------------------------------------------------------------------------------
# Headline

# (metric, what the seeds' paper reports, its value, how the change is expressed)
_HEADLINE_SPEC: tuple[tuple[str, str, float | None, str], ...] = (
    ("turns", f"{stats.PAPER_TURN_REDUCTION:g}x fewer", stats.PAPER_TURN_REDUCTION, "factor"),
    ("consistency_similarity", f"+{stats.PAPER_CONSISTENCY_CHANGE_PCT:g} %", stats.PAPER_CONSISTENCY_CHANGE_PCT,
     "relative"),
    ("consistency_contribution", "— (not in the paper)", None, "relative"),
    ("duplication", "— (not in the paper)", None, "relative"),
    ("pass_rate", f"+{stats.PAPER_PASS_RATE_CHANGE_PCT:g} %", stats.PAPER_PASS_RATE_CHANGE_PCT, "rate"),
    ("success", "— (not in the paper)", None, "rate"),
)


def _change_text(kind: str, value: float, points: float | None) -> str:
    """Human form of one headline change."""
    if math.isnan(value) and (points is None or math.isnan(points)):
        return "n/a"
    if kind == "factor":
        if math.isnan(value):
            return "n/a"
        return f"{value:.2f}x fewer" if value >= 1 else f"{1 / value:.2f}x more"
    text = "n/a" if math.isnan(value) else f"{value:+.1f} %"
    if kind == "rate" and points is not None and not math.isnan(points):
        text += f" ({points:+.1f} pp)"
    return text


def _headline_entry(
    ours: Sequence[Mapping[str, Any]], theirs: Sequence[Mapping[str, Any]], metric: str, kind: str
) -> dict[str, Any]:
    """Trained vs one baseline on one metric, over the (env, team size) cells both conditions ran."""
    cells = {(r["env"], r["team_size"]) for r in ours} & {(r["env"], r["team_size"]) for r in theirs}
    a = stats.present(_values((r for r in ours if (r["env"], r["team_size"]) in cells), metric))
    b = stats.present(_values((r for r in theirs if (r["env"], r["team_size"]) in cells), metric))
    mean_a = sum(a) / len(a) if a else float("nan")
    mean_b = sum(b) / len(b) if b else float("nan")
    points: float | None = None
    if kind == "factor":
        value = stats.turn_reduction_factor(mean_a, mean_b)
    elif kind == "rate":
        value, points = stats.pass_rate_change(mean_a, mean_b)
    else:
        value = stats.consistency_change_pct(mean_a, mean_b)
    few = bool(a and b) and _is_few(min(len(a), len(b)))
    text = _change_text(kind, value, points) if a and b else "n/a (no values)"
    return {
        "trained_mean": mean_a,
        "baseline_mean": mean_b,
        "n_trained": len(a),
        "n_baseline": len(b),
        "value": value,
        "points": points,
        "few": few,
        "text": text + (f" {FEW_MARK}" if few else ""),
    }


def headline(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The headline figures: ``trained`` against every other condition, pooled over envs and team sizes.

    Returns ``{"reference": "trained", "baselines": [...], "primary": <the baseline shown first>, "episodes": N,
    "metrics": [{"metric", "label", "paper", "paper_value", "kind", "vs": {baseline: entry}}]}`` where each entry
    has the two means, their episode counts, ``value`` (turns: ``baseline/trained`` "x fewer"; rates: relative
    change in %, with ``points`` the change in percentage points; consistency columns: relative change in %),
    ``few`` (rests on fewer than ``FEW_EPISODES`` episodes) and ``text``. Means are taken over the (env, team size)
    cells both conditions ran, so a baseline missing an env is not compared against trained's other env.
    Rows are validated and deduplicated as the report does (:func:`clean_rows`), so a runner may pass its raw rows.
    """
    rows = clean_rows(rows).rows
    conditions = conditions_of(rows)
    baselines = [c for c in conditions if c != REFERENCE]
    # The seeds' figures compare a trained team with prompt-based collaboration, so untrained leads when present.
    primary = "untrained" if "untrained" in baselines else (baselines[0] if baselines else None)
    ours = _select(rows, REFERENCE)
    metrics = []
    for metric, paper, paper_value, kind in _HEADLINE_SPEC:
        vs = {b: _headline_entry(ours, _select(rows, b), metric, kind) for b in baselines} if ours else {}
        metrics.append(
            {"metric": metric, "label": LABELS[metric], "paper": paper, "paper_value": paper_value, "kind": kind,
             "vs": vs}
        )
    return {
        "reference": REFERENCE,
        "baselines": baselines,
        "primary": primary,
        "episodes": len(rows),
        "metrics": metrics,
    }


def print_headline(rows: Sequence[Mapping[str, Any]]) -> None:
    """Print the headline of ``rows`` (the runner calls this at the end of a study): per env and team size, trained vs
    untrained vs single on what they share, each pair a difference with its 95 % CI and p (:func:`format_three_way`),
    then the seeds' three figures beside ours (:func:`format_headline`)."""
    rows = clean_rows(rows).rows
    print(format_three_way(rows), flush=True)
    print("\nAgainst the seeds' figures (trained vs each condition, pooled over envs and team sizes):\n", flush=True)
    print(format_headline(headline(rows)), flush=True)


def format_effects(rows: Sequence[Mapping[str, Any]]) -> str:
    """One Markdown table per env: for each of :data:`EFFECT_METRICS`, ``trained``'s mean [95 % CI] and, against
    each other condition, ``other mean → diff [95 % CI of the diff], p`` — paired by task and seed when every episode
    has its partner (:func:`compare_conditions`, pooled over team sizes). A metric one side has no value of (a single
    agent's consistency, writing's pass rate) is shown as ``—`` with the reason; an undefined test (every pair
    equal) keeps its difference and interval."""
    conditions = conditions_of(rows)
    if REFERENCE not in conditions:
        return f"(no headline: the log has no `{REFERENCE}` episodes)"
    others = [c for c in conditions if c != REFERENCE]
    if "untrained" in others:  # the seeds compare the trained team with prompt-based collaboration first
        others.insert(0, others.pop(others.index("untrained")))
    tests = {(r["env"], r["metric"], r["condition_b"]): r for r in compare_conditions(rows)
             if r["team_size"] == POOLED}
    means = {(r["env"], r["condition"]): r for r in summarise(rows) if r["team_size"] == POOLED}
    parts = []
    for env in envs_of(rows):
        ours = means.get((env, REFERENCE))
        if ours is None:
            continue
        header = ["metric", f"{REFERENCE} (n = {ours['n']})",
                  *(f"vs {o} (n = {means[(env, o)]['n'] if (env, o) in means else 0})" for o in others)]
        lines = [f"{env}:", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for metric in EFFECT_METRICS:
            if not ours[f"{metric}_n"]:
                continue
            cells = [LABELS[metric], _cell_text(ours, metric)]
            for other in others:
                cells.append(_effect_text(tests.get((env, metric, other)), metric, other))
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _effect_text(test: Mapping[str, Any] | None, metric: str, other: str) -> str:
    """``other mean → diff [low, high], p`` for one headline cell."""
    if test is None:
        if metric in TEAM_ONLY_METRICS:
            return "— (teams only: one agent is paid another formula)"
        team_only = metric.startswith(("consistency", "duplication", "helper"))
        return f"— ({'one agent has no teammate' if team_only else 'no values'})"
    text = (f"{_num(test['mean_b'])} → {test['diff']:+.3f} [{test['diff_ci_low']:+.3f}, {test['diff_ci_high']:+.3f}]"
            if not math.isnan(test["diff_ci_low"]) else f"{_num(test['mean_b'])} → {test['diff']:+.3f}")
    if math.isnan(test["p"]):
        text += ", every pair equal" if test["diff_ci_low"] == test["diff_ci_high"] else f" ({test['note']})"
    else:
        text += ", p < 0.001" if test["p"] < 0.001 else f", p = {test['p']:.3f}"
    return text + (f" {FEW_MARK}" if test["few"] else "")


def _three_way_json(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`three_way` as plain data."""
    return [{"env": r["env"], "team_size": r["team_size"], "metric": r["metric"],
             "means": {c: dataclasses.asdict(m) for c, m in r["means"].items()},
             "pairs": {f"{a} - {b}": dataclasses.asdict(c) for (a, b), c in r["pairs"].items()}}
            for r in three_way(rows)]


def format_headline(head: Mapping[str, Any]) -> str:
    """The headline as a Markdown table (also readable printed to a terminal at the end of a run)."""
    baselines: list[str] = list(head["baselines"])
    if head["primary"] in baselines:
        baselines.remove(head["primary"])
        baselines.insert(0, head["primary"])
    if not baselines:
        return f"(no headline: the log has no condition to compare `{head['reference']}` with)"
    header = ["metric", "seeds' paper", *(f"{head['reference']} vs {b}" for b in baselines)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for m in head["metrics"]:
        cells = [m["label"], m["paper"]]
        for b in baselines:
            entry = m["vs"].get(b)
            cells.append(entry["text"] if entry else "n/a (no trained episodes)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _headline_means_table(head: Mapping[str, Any]) -> str:
    """The means behind the headline's changes, with their episode counts."""
    header = ["metric", "vs", f"{head['reference']} mean (n)", "baseline mean (n)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for m in head["metrics"]:
        for b, e in m["vs"].items():
            if not (e["n_trained"] and e["n_baseline"]):
                continue
            lines.append(
                f"| {m['label']} | {b} | {_num(e['trained_mean'])} ({e['n_trained']}) | "
                f"{_num(e['baseline_mean'])} ({e['n_baseline']}) |"
            )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Writing


def _num(x: object, digits: int = 3) -> str:
    """A number for Markdown: NaN/None as an em dash."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, float):
        if abs(x) >= 1000:
            return f"{x:.{digits}g}"
        text = f"{x:.{digits}f}"
        # Rounding noise such as β = −2e-16 prints as 0.000, not as "-0.000" or in scientific notation.
        return text[1:] if text.startswith("-") and float(text) == 0 else text
    return str(x)


def _p_text(p: float) -> str:
    """A p-value for Markdown."""
    if math.isnan(p):
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _csv_value(x: object) -> object:
    """NaN and None become empty CSV cells (pandas and spreadsheets read them as missing)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return x


def _write_csv(path: Path, records: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """Write records with a fixed header (written even when there are no records)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for record in records:
            writer.writerow([_csv_value(record.get(c)) for c in columns])


SUMMARY_COLUMNS: tuple[str, ...] = (
    "condition",
    "env",
    "team_size",
    "n",
    *(f"{m}_{s}" for m in METRICS for s in ("n", "mean", "ci_low", "ci_high")),
)
TESTS_COLUMNS: tuple[str, ...] = (
    "env", "team_size", "metric", "condition_a", "condition_b", "test", "n_a", "n_b", "mean_a", "mean_b", "diff",
    "diff_ci_low", "diff_ci_high", "t", "dof", "p", "effect_name", "effect_size", "significant", "few", "note",
)
REGRESSION_COLUMNS: tuple[str, ...] = (
    "env", "condition", "consistency", "n", "alpha", "alpha_ci_low", "alpha_ci_high", "beta", "beta_ci_low",
    "beta_ci_high", "p_beta", "r2", "note",
)


def _cell_text(record: Mapping[str, Any], metric: str) -> str:
    """``mean [low, high]`` for one summary cell, flagged when it rests on few episodes."""
    n = record[f"{metric}_n"]
    if n == 0:
        return "—"
    mean = _num(record[f"{metric}_mean"])
    if n < 2:
        return f"{mean} (n=1, no CI) {FEW_MARK}"
    text = f"{mean} [{_num(record[f'{metric}_ci_low'])}, {_num(record[f'{metric}_ci_high'])}]"
    if n != record["n"]:
        text += f" (n={n})"
    return text + (f" {FEW_MARK}" if _is_few(n) else "")


def _summary_markdown(summary: Sequence[Mapping[str, Any]], envs: Sequence[str]) -> str:
    """One summary table per env: every metric's mean and 95 % CI per condition and team size."""
    parts = []
    for env in envs:
        records = [r for r in summary if r["env"] == env]
        metrics = [m for m in METRICS if any(r[f"{m}_n"] for r in records)]
        header = ["condition", "team size", "n", *(LABELS[m] for m in metrics)]
        lines = [f"### {env}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in records:
            n_text = f"{r['n']} {FEW_MARK}" if _is_few(r["n"]) else str(r["n"])
            cells = [r["condition"], str(r["team_size"]), n_text, *(_cell_text(r, m) for m in metrics)]
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _degeneracy_markdown(summary: Sequence[Mapping[str, Any]], envs: Sequence[str]) -> str:
    """Per env and condition (pooled over sizes), the signs of a degenerate team: duplicated parts, empty parts,
    actions with no draft, and (coding) whether the helper is load-bearing at all."""
    parts = []
    for env in envs:
        records = [r for r in summary if r["env"] == env and r["team_size"] == POOLED]
        metrics = [m for m in DEGENERACY_METRICS if any(r[f"{m}_n"] for r in records)]
        header = ["condition", "n", *(LABELS[m] for m in metrics)]
        lines = [f"### {env}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in records:
            lines.append("| " + " | ".join([r["condition"], str(r["n"]), *(_cell_text(r, m) for m in metrics)])
                         + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _tests_markdown(tests: Sequence[Mapping[str, Any]], envs: Sequence[str]) -> str:
    """One tests table per env, pooled-over-sizes comparisons first, then each team size."""
    if not tests:
        return f"No comparison: the log has no `{REFERENCE}` episodes or no other condition to compare them with."
    parts = []
    header = ["team size", "metric", "vs", "test", "n", f"{REFERENCE} mean", "other mean", "diff", "t", "dof", "p",
              "effect size", "p < 0.05"]
    for env in envs:
        records = [r for r in tests if r["env"] == env]
        if not records:
            continue
        # Pooled rows first: they carry the most episodes; per-size rows then show where an effect comes from.
        records.sort(key=lambda r: (r["team_size"] != POOLED, str(r["team_size"])))
        lines = [f"### {env}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in records:
            n = f"{r['n_a']} pairs" if r["test"] == "paired t" else f"{r['n_a']} vs {r['n_b']}"
            if r["few"]:
                n += f" {FEW_MARK}"
            sig = {True: "yes", False: "no", None: f"n/a ({r['note']})"}[r["significant"]]
            effect = "—" if math.isnan(r["effect_size"]) else f"{r['effect_name']} = {r['effect_size']:.2f}"
            cells = [str(r["team_size"]), LABELS[r["metric"]], r["condition_b"], r["test"], n, _num(r["mean_a"]),
                     _num(r["mean_b"]), _num(r["diff"]), _num(r["t"], 2), _num(r["dof"], 1), _p_text(r["p"]),
                     effect, sig]
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _regression_markdown(fits: Sequence[Mapping[str, Any]]) -> str:
    """The regression table."""
    if not fits:
        return "No episode has a consistency value (single-agent episodes have none), so no fit."
    header = ["env", "condition", "C", "n", "α [95 % CI]", "β [95 % CI]", "p(β)", "R²", "note"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in fits:
        n = f"{r['n']} {FEW_MARK}" if _is_few(r["n"]) else str(r["n"])
        alpha = f"{_num(r['alpha'])} [{_num(r['alpha_ci_low'])}, {_num(r['alpha_ci_high'])}]"
        beta = f"{_num(r['beta'])} [{_num(r['beta_ci_low'])}, {_num(r['beta_ci_high'])}]"
        lines.append(
            f"| {r['env']} | {r['condition']} | {r['consistency']} | {n} | {alpha} | {beta} | {_p_text(r['p_beta'])} "
            f"| {_num(r['r2'])} | {r['note']} |"
        )
    return "\n".join(lines)


HOW_TO_READ = f"""\
- **Headline.** Per env and team size, the seeds' three conditions on what they share: quality, pass rate and
  success, turns to the end, critical-path tokens (per turn the longest reply among the agents who acted, since
  teammates write in parallel, summed over turns: a latency that does not depend on the hardware) and wall time
  (seconds until the episode ended within its lockstep batch: episodes of a batch share each turn's time, so read
  it as turns at the batch's pace). Each condition's mean [95 % CI], then each pair's difference `a − b` [its 95 %
  CI], p: paired by task and seed (the same episodes played under both conditions) when every episode has its
  partner, else Welch. "every pair equal": the difference is the same in every pair (e.g. both pass no test), so no
  test applies. Every multi-turn condition has the same turn budget, feedback and endings; `single` is one agent
  with that budget (it may refine and end early). Team return is compared only between teams: one agent is paid
  `(w_q + w_c)·quality`, a team `w_q·quality + w_c·consistency`.
- **Trained against each condition.** The same differences for every condition the study ran (`base`,
  `single_oneshot`...), pooled over the team sizes both ran.
- **Turns to the end.** How many episodes of each condition ended at each turn, the share that ended before their
  turn budget, and how they ended (`end_reason`: e.g. `converged`, `solved`, `max_turns`). The seeds' "3.1x fewer
  turns" needs endings before the budget: with every episode at the budget, no condition can take fewer turns.
- **Against the seeds' figures.** Each cell is `{REFERENCE}` against one other condition, pooled over envs and team
  sizes (only the env × team-size cells both ran). Turns: `baseline / trained` ("x fewer"). Consistency columns:
  relative change `(trained − baseline) / baseline`. Rates: relative change and, in brackets, percentage points
  (pp) — the seeds' "+21.7 %" does not say which. The seeds' consistency is MiniLM similarity between agents' outputs
  (`consistency_similarity`); similarity rewards resemblance, so read it next to `consistency_contribution` (the
  env's counterfactual credit) and `duplication` (near-identical parts): a similarity gain that comes with more
  duplication and no contribution gain was won by copying, not by coordinating.
- **Summary.** Mean with a two-sided 95 % Student-t interval. Single-agent episodes have no consistency and writing
  has no pass rate: those episodes are left out of that column (shown as `(n=…)`), never counted as 0. For the
  success rate (a mean of 0/1 outcomes) the t interval is an approximation and can reach past [0, 1] when a cell
  has few episodes or a rate near 0 or 1.
- **Tests.** Two-sided t-tests of `{REFERENCE}` against each condition. *paired t* (effect size Cohen's d_z) when
  every episode has its partner with the same env, team size, task and seed; otherwise *Welch t* (Cohen's d with
  the pooled SD). |d| ≈ 0.2 small, 0.5 medium, 0.8 large (Cohen 1988). "p < 0.05" is per test with no correction
  for the many tests here: about 1 in 20 true-null comparisons comes out significant by chance. "n/a" means the
  test is undefined (fewer than 2 values, or zero variance — e.g. every episode succeeded in both conditions).
- **Regression.** `T = α + β·C + ε` by OLS, with turns T and consistency C each min–max normalised to [0, 1] over
  the fitted episodes, so β is the change in normalised turns across the observed consistency range (negative:
  more consistent teams finish in fewer turns) and α the normalised turns at the lowest consistency. Pooled-env
  rows mix the envs' turn budgets; read the per-env rows first.
- **Conditions.** `untrained` is the seeds' prompt-only team (teammates' drafts visible, collaboration rules in the
  prompt); `base` is the trained team's own prompts and schedule with the adapters off, so `trained` vs `base` is
  what training alone changed and `trained` vs `untrained` also includes the difference in prompts.
- **Degenerate strategies?** What a team that gamed the reward would show: near-identical parts (`duplication`),
  agents with an empty final part, actions that carry only messages or `<done/>`, and (coding) a helper no test
  depends on. Read trained against untrained.
- **{FEW_MARK}** marks a figure resting on fewer than {FEW_EPISODES} episodes (per side for tests): its interval is
  wide and its test has little power, so do not read much into it."""


def _plot_bars(summary: Sequence[Mapping[str, Any]], env: str, path: Path) -> None:
    """Grouped bars (team sizes × conditions) with 95 % CI error bars, one panel per headline metric."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    records = [r for r in summary if r["env"] == env]
    metrics = [m for m in ("success", "pass_rate", "turns", *CONSISTENCY_COLUMNS) if any(r[f"{m}_n"] for r in records)]
    conditions = _ordered((r["condition"] for r in records), CONDITION_ORDER)
    sizes = [s for s in dict.fromkeys(r["team_size"] for r in records) if s != POOLED]
    sizes = [*sorted(sizes), POOLED]
    # The object-oriented API with the Agg canvas: no pyplot global state, no display needed.
    ncols = min(3, max(len(metrics), 1))
    nrows = max(1, math.ceil(len(metrics) / ncols))
    fig = Figure(figsize=(4.4 * ncols, 3.4 * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    width = 0.8 / max(len(conditions), 1)
    for i, metric in enumerate(metrics):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        for j, condition in enumerate(conditions):
            xs, heights, errs = [], [], []
            for k, size in enumerate(sizes):
                rec = next((r for r in records if r["condition"] == condition and r["team_size"] == size), None)
                if rec is None or rec[f"{metric}_n"] == 0:
                    continue  # no value (e.g. a single agent's consistency): no bar rather than a zero bar
                xs.append(k + (j - (len(conditions) - 1) / 2) * width)
                heights.append(rec[f"{metric}_mean"])
                half = (rec[f"{metric}_ci_high"] - rec[f"{metric}_ci_low"]) / 2
                errs.append(0.0 if math.isnan(half) else half)
            if xs:
                # A fixed colour per condition, so a condition missing from one panel does not shift the others.
                ax.bar(xs, heights, width=width, yerr=errs, capsize=2, label=condition, color=f"C{j}")
        ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
        ax.set_xlabel("team size")
        ax.set_title(LABELS[metric], fontsize=9)
    if metrics:
        fig.axes[0].legend(fontsize=7)
    fig.suptitle(f"{env}: mean with 95 % CI")
    fig.savefig(path, dpi=90)


def _plot_scatter(rows: Sequence[Mapping[str, Any]], fits: Sequence[Mapping[str, Any]], env: str, path: Path) -> None:
    """Normalised turns against each consistency column, coloured by condition, with the pooled OLS line."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    env_rows = _select(rows, env=env)
    colours = {c: f"C{j}" for j, c in enumerate(conditions_of(env_rows))}  # the same colours as the bar plots
    columns = [c for c in CONSISTENCY_COLUMNS if any(stats.present([r.get(c)]) for r in env_rows)]
    fig = Figure(figsize=(4.2 * max(len(columns), 1), 3.8), layout="constrained")
    FigureCanvasAgg(fig)
    for i, column in enumerate(columns):
        ax = fig.add_subplot(1, len(columns), i + 1)
        fitted = [r for r in env_rows if stats.present([r.get(column)])]
        # Normalise over the same episodes the pooled fit used, so the points and the line share axes.
        t_norm = stats.min_max_normalise([float(r["turns"]) for r in fitted])
        c_norm = stats.min_max_normalise([float(r[column]) for r in fitted])
        for condition in conditions_of(fitted):
            idx = [k for k, r in enumerate(fitted) if r["condition"] == condition]
            ax.scatter([c_norm[k] for k in idx], [t_norm[k] for k in idx], s=12, alpha=0.6, label=condition,
                       color=colours[condition])
        fit = next((f for f in fits if f["env"] == env and f["condition"] == POOLED and f["consistency"] == column),
                   None)
        if fit is not None and not math.isnan(fit["beta"]):
            ax.plot([0, 1], [fit["alpha"], fit["alpha"] + fit["beta"]], color="black",
                    label=f"α={fit['alpha']:.2f}, β={fit['beta']:.2f}, R²={fit['r2']:.2f}")
        ax.set_xlabel(f"{column} (min–max)")
        ax.set_ylabel("turns (min–max)")
        ax.legend(fontsize=7)
    fig.suptitle(f"{env}: T = α + β·C")
    fig.savefig(path, dpi=90)


def _write_report(out_dir: Path, log: LogContents) -> Path:
    """Write every report file for ``log`` into ``out_dir``; return the path of ``report.md``."""
    rows = log.rows
    if not rows:
        raise EmptyLogError(
            f"no usable episode rows in {log.source or out_dir}"
            + (f" ({log.malformed} malformed line(s) skipped)" if log.malformed else "")
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    envs = envs_of(rows)
    summary = summarise(rows)
    tests = compare_conditions(rows)
    fits = regressions(rows)
    head = headline(rows)
    _write_csv(out_dir / "summary.csv", summary, SUMMARY_COLUMNS)
    _write_csv(out_dir / "tests.csv", tests, TESTS_COLUMNS)
    _write_csv(out_dir / "regression.csv", fits, REGRESSION_COLUMNS)
    plots = []
    for env in envs:
        _plot_bars(summary, env, out_dir / f"bars_{env}.png")
        plots.append(f"bars_{env}.png")
        if any(stats.present([r.get(c)]) for r in _select(rows, env=env) for c in CONSISTENCY_COLUMNS):
            _plot_scatter(rows, fits, env, out_dir / f"scatter_{env}.png")
            plots.append(f"scatter_{env}.png")

    counts = ", ".join(f"{c}: {len(_select(rows, c))}" for c in conditions_of(rows))
    dropped = []
    if log.malformed:
        dropped.append(f"{log.malformed} malformed line(s) skipped")
    if log.duplicates:
        dropped.append(f"{log.duplicates} duplicate episode key(s) ignored, the first row kept")
    few_cells = [r for r in summary if r["team_size"] != POOLED and _is_few(r["n"])]
    warnings_md = []
    if few_cells:
        warnings_md.append(
            f"**{len(few_cells)} of {sum(r['team_size'] != POOLED for r in summary)} condition × env × team-size "
            f"cells rest on fewer than {FEW_EPISODES} episodes ({FEW_MARK}); their figures are not reliable.**"
        )
    backends = sorted({str(r["similarity_backend"]) for r in rows if r.get("similarity_backend")})
    if backends:
        # The seeds measured similarity with MiniLM; a TF-IDF run's similarity column is a different instrument.
        warnings_md.append(
            f"`consistency_similarity` was measured with: {', '.join(backends)} (the seeds used MiniLM)."
        )
    hashes = sorted({str(r.get("config_hash")) for r in rows})
    if len(hashes) > 1:
        warnings_md.append(
            f"**The log mixes {len(hashes)} study configurations (config hashes {', '.join(hashes)}): figures pool "
            "episodes run under different settings.**"
        )
    if REFERENCE not in conditions_of(rows):
        warnings_md.append(f"**No `{REFERENCE}` episodes in the log: no comparison with a trained team.**")
    else:
        untrained_only = [f"{env} with {size} agents" for env in envs for size in sizes_of(_select(rows, env=env))
                          if not _select(rows, REFERENCE, env, size)]
        if untrained_only:
            warnings_md.append(f"No `{REFERENCE}` episodes for {', '.join(untrained_only)} (no trained team of that "
                               "size): the other conditions are compared there without it.")
    sections = [
        "# Study report",
        "",
        f"Source: `{log.source or out_dir / LOG_NAME}` — {len(rows)} episodes ({counts}); envs: {', '.join(envs)}; "
        f"team sizes: {', '.join(map(str, sizes_of(rows)))}."
        + (f" {'; '.join(dropped)}." if dropped else ""),
        *(["", *warnings_md] if warnings_md else []),
        "",
        "## Headline: trained vs untrained vs single (mean [95 % CI]; differences [95 % CI], p)",
        "",
        format_three_way(rows),
        "",
        "## Against the seeds' figures (relative changes, pooled over envs and team sizes)",
        "",
        format_headline(head),
        "",
        "Means behind the changes (episodes in parentheses):",
        "",
        _headline_means_table(head),
        "",
        "## Turns to the end",
        "",
        _turns_markdown(rows),
        "",
        "## Trained against each condition (difference [95 % CI], p; pooled over the team sizes both ran)",
        "",
        format_effects(rows),
        "",
        "## Degenerate strategies? (mean [95 % CI] per condition)",
        "",
        _degeneracy_markdown(summary, envs),
        "",
        "## How to read this",
        "",
        HOW_TO_READ,
        "",
        "## Summary (mean [95 % CI])",
        "",
        _summary_markdown(summary, envs),
        "",
        f"## Tests: {REFERENCE} vs each condition (two-sided, α = 0.05)",
        "",
        _tests_markdown(tests, envs),
        "",
        "## Regression: T = α + β·C + ε (min–max normalised)",
        "",
        _regression_markdown(fits),
        "",
        "## Plots",
        "",
        *(f"![{name}]({name})" for name in plots),
        "",
        "Files: `summary.csv`, `tests.csv`, `regression.csv` (empty cells are undefined values).",
        "",
    ]
    report = out_dir / "report.md"
    report.write_text("\n".join(sections), encoding="utf-8")
    return report


def build_report(out_dir: str | Path, rows: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """Write ``report.md``, ``summary.csv``, ``tests.csv``, ``regression.csv`` and the plots into ``out_dir``.

    ``rows``: episode rows; when ``None`` they are read from ``out_dir/episodes.jsonl`` (malformed lines skipped
    and counted in the report). Given rows are validated the same way. Returns the path of ``report.md``. Raises
    ``FileNotFoundError`` when the log is missing and :class:`EmptyLogError` when no usable row is left.
    """
    out_dir = Path(out_dir)
    log = read_episodes(out_dir / LOG_NAME) if rows is None else clean_rows(rows, source="rows given in memory")
    return _write_report(out_dir, log)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llm_marl_benchmarks.study.report DIR``: rebuild the report from ``DIR/episodes.jsonl``; print the
    headline."""
    parser = argparse.ArgumentParser(
        prog="python -m llm_marl_benchmarks.study.report",
        description="Rebuild the study report (report.md, summary.csv, tests.csv, regression.csv, plots) from "
        "DIR/episodes.jsonl.",
    )
    parser.add_argument("dir", type=Path, help="the study's output folder (holds episodes.jsonl)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the headline as JSON")
    args = parser.parse_args(argv)
    try:
        log = read_episodes(args.dir / LOG_NAME)
        path = _write_report(args.dir, log)
    except (FileNotFoundError, EmptyLogError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    head = headline(log.rows)
    print_headline(log.rows)
    if args.json is not None:
        effects = [r for r in compare_conditions(log.rows) if r["team_size"] == POOLED]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**head, "effects": effects, "three_way": _three_way_json(log.rows),
                                         "turns": turn_distribution(log.rows)}, indent=2, default=str) + "\n",
                             encoding="utf-8")
    skipped = f" ({log.malformed} malformed line(s) skipped)" if log.malformed else ""
    print(f"\nreport: {path}{skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
