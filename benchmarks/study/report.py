"""The study's report: reading the episode log and the statistics behind every figure of the report.

Reads the episode log the runner writes (``DIR/episodes.jsonl``, one JSON object per line) and computes the summary
(means with 95 % CIs), the tests of ``trained`` against each other condition, the three-way headline, the turn
distribution, the turns-on-consistency regression and the relative changes set beside the seeds' figures;
:mod:`~llm_marl_benchmarks.study.render` turns them into ``report.md``, the CSV files and the plots
(its :func:`~llm_marl_benchmarks.study.render.build_report` writes them next to the log; ``llm-marl bench report
DIR`` rebuilds them from a log).

Missing values stay missing: single-agent episodes have no consistency (``None``) and coding is the only env with
a pass rate, so those rows drop out of the statistics of that metric instead of counting as 0.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.study import stats
from llm_marl_benchmarks.study.execution import echoed_scaffolding
from llm_marl_envs.registry import ENV_NAMES

__all__ = [
    "BEST_OF_N",
    "CANDIDATE_TERMS",
    "CONSISTENCY_COLUMNS",
    "FEW_EPISODES",
    "METRICS",
    "EmptyLogError",
    "LogContents",
    "candidate_split",
    "candidate_terms",
    "clean_rows",
    "compare_conditions",
    "compare_pair",
    "conditions_of",
    "decoding_stops",
    "envs_of",
    "headline",
    "in_order",
    "is_few",
    "mixed_decoding",
    "mixed_dtypes",
    "mixed_sandboxes",
    "precisions",
    "read_episodes",
    "regressions",
    "sandboxes",
    "select_rows",
    "sizes_of",
    "summarise",
    "three_way",
    "turn_distribution",
    "turn_one_candidates",
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
# The headline: what the seeds' three conditions share, compared pairwise (paired by task and seed), and the one agent
# with the team's sampling budget where the study ran it (a team that only samples more is not coordinating).
HEADLINE_CONDITIONS: tuple[str, ...] = ("trained", "untrained", "single", "single_best_of_n")
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
    "single_best_of_n",
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


def in_order(values: Iterable[str], order: Sequence[str]) -> list[str]:
    """``values`` deduplicated, known names in ``order`` first, the rest alphabetically."""
    present = set(values)
    known = [v for v in order if v in present]
    return known + sorted(present - set(known))


def conditions_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Conditions present, in report order."""
    return in_order((r["condition"] for r in rows), CONDITION_ORDER)


def envs_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Envs present, in report order."""
    return in_order((r["env"] for r in rows), ENV_ORDER)


def sizes_of(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Team sizes present, ascending."""
    return sorted({int(r["team_size"]) for r in rows})


def select_rows(
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


def is_few(n: int) -> bool:
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
            for size in [*sizes_of(select_rows(rows, condition, env)), POOLED]:
                cell = select_rows(rows, condition, env, size)
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
        env_rows = select_rows(rows, env=env)
        for size in [*sizes_of(env_rows), POOLED]:
            ours = select_rows(env_rows, REFERENCE, size=size)
            for other in conditions:
                if other == REFERENCE:
                    continue
                theirs = select_rows(env_rows, other, size=size)
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
                            "few": is_few(min(result.n_a, result.n_b)),
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
    env_rows = select_rows(rows, env=env)
    return _compare_rows(select_rows(env_rows, a, size=size), select_rows(env_rows, b, size=size), metric)


def compare_pairs(
    rows: Sequence[Mapping[str, Any]], pairs: Iterable[tuple[str, str]], metrics: Sequence[str], env: str,
    size: int | str = POOLED, echo: bool = True,
) -> dict[str, dict[str, Any]]:
    """Every ``(a, b)`` of ``pairs`` on every metric (:func:`compare_pair`), keyed ``"a - b: metric"`` as a results
    folder's ``figures.json`` keeps them; with ``echo`` each is also printed on a line (means, difference, 95 % CI,
    p, test and pairs). Comparisons that do not apply are left out."""
    out: dict[str, dict[str, Any]] = {}
    for a, b in pairs:
        for metric in metrics:
            result = compare_pair(rows, a, b, metric, env=env, size=size)
            if result is None:
                continue
            out[f"{a} - {b}: {metric}"] = dataclasses.asdict(result)
            if echo:
                print(f"{a} − {b}, {metric}: {result.mean_a:.3f} vs {result.mean_b:.3f}, {result.diff:+.3f} "
                      f"[{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}], p = {result.p:.3g} "
                      f"({result.test}, n = {result.n_a})")
    return out


def finished_agents(row: Mapping[str, Any]) -> frozenset[str]:
    """The agents finished when the episode ended, from the row's ``finished`` column (the turn each finished by the
    env's rule: ``<done/>``, or its part resubmitted unchanged; :func:`episode_row`). Logs written before the column
    existed (5be81ef) lack it: a :class:`ValueError` names the row rather than counting nobody finished."""
    turns = row.get("finished")
    if not isinstance(turns, Mapping):
        raise ValueError(f"{row.get('key', '?')}: no 'finished' column (a study log written before 5be81ef)")
    return frozenset(agent for agent, turn in turns.items() if turn is not None)


def quorum_makeup(rows: Iterable[Mapping[str, Any]], members: Collection[str]) -> dict[int, int]:
    """Among the episodes an ``end_quorum`` ended (``end_reason == "quorum_done"``): how many had 0, 1, 2, ... of
    ``members`` (e.g. a team's coders) among their finished agents (:func:`finished_agents`), as ``{k: episodes}``
    sorted by k. It says whether the agents the quorum counted were the ones whose work is the team's answer."""
    wanted = frozenset(members)
    counts = Counter(len(wanted & finished_agents(r)) for r in rows if r.get("end_reason") == "quorum_done")
    return dict(sorted(counts.items()))


def three_way(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The headline: per env and team size, the seeds' three conditions and ``single_best_of_n``
    (:data:`HEADLINE_CONDITIONS`, those present) on what they share (:data:`HEADLINE_METRICS`), each condition's mean
    [95 % CI] and every pair's difference ``a − b`` [95 % CI], p (paired by task and seed). Team return is compared
    only between teams.

    Returns one record per (env, team size, metric): ``{"env", "team_size", "metric", "means": {condition: MeanCI},
    "pairs": {(a, b): Comparison}}``; a size where fewer than two of the conditions ran is left out.
    """
    rows = clean_rows(rows).rows
    records: list[dict[str, Any]] = []
    for env in envs_of(rows):
        env_rows = select_rows(rows, env=env)
        for size in sizes_of(env_rows):
            present_conditions = [c for c in HEADLINE_CONDITIONS if select_rows(env_rows, c, size=size)]
            if len(present_conditions) < 2:
                continue
            for metric in HEADLINE_METRICS:
                means = {c: stats.mean_ci(_values(select_rows(env_rows, c, size=size), metric))
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
                             if not any(r.get("num_agents") == 1 for r in select_rows(env_rows, c, size=size))}
                records.append({"env": env, "team_size": size, "metric": metric, "means": means, "pairs": pairs})
    return records

def turn_distribution(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Turns to the end per env, team size and condition: how many episodes ended at each turn, the share that ended
    before their turn budget, the mean, and how they ended (``end_reason`` counts)."""
    rows = clean_rows(rows).rows
    records = []
    for env in envs_of(rows):
        for size in sizes_of(select_rows(rows, env=env)):
            for condition in conditions_of(rows):
                cell = select_rows(rows, condition, env, size)
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


BEST_OF_N = "single_best_of_n"
CANDIDATE_TERMS: tuple[str, ...] = ("one_candidate", "best_candidate_gain", "choice_keeps", "sent")
"""The terms :func:`candidate_split` splits a turn-1 program's held-out score into:
``sent = one_candidate + best_candidate_gain + choice_keeps``."""


def turn_one_candidates(row: Mapping[str, Any], held_out_total: int | None = None) -> tuple[list[float], float] | None:
    """A coding row's turn-1 candidates, each scored by the share of the task's held-out tests it passes, and the
    sent program's score; ``None`` when the row does not log them (or logs them malformed). A team's candidates are
    its coders' (``turn_tests`` ``candidates``, by agent name), best of n's its samples
    (``selections[0].held_out_passed``, logged by the study's audit). The held-out total is the row's own
    (``turn_tests`` ``held_out_total``), else ``held_out_total`` (logs from before the study recorded it)."""
    trace = row.get("turn_tests")
    if not isinstance(trace, list) or not trace or not isinstance(trace[0], Mapping):
        return None
    first = trace[0]
    total = first.get("held_out_total", held_out_total)
    if not isinstance(total, int) or total <= 0:
        return None
    if isinstance(first.get("candidates"), Mapping):
        counts = [pair[1] if isinstance(pair, list) and len(pair) == 2 else None
                  for _, pair in sorted(first["candidates"].items())]
    else:
        selections = row.get("selections")
        if not isinstance(selections, list) or not selections or not isinstance(selections[0], Mapping):
            return None
        counts = selections[0].get("held_out_passed")
    sent = first.get("held_out")
    if not isinstance(counts, list) or len(counts) < 2 or not all(
            isinstance(n, int) and 0 <= n <= total for n in [*counts, sent]):
        return None
    return [count / total for count in counts], sent / total


def candidate_terms(scores: Sequence[float], sent: float) -> dict[str, float]:
    """The split of a sent program's score (:data:`CANDIDATE_TERMS`): the candidates' mean, what the best adds to it,
    and what the choice gave up against the best (<= 0 when the best was not sent)."""
    mean, best = sum(scores) / len(scores), max(scores)
    return {"one_candidate": mean, "best_candidate_gain": best - mean, "choice_keeps": sent - best, "sent": sent}


def candidate_split(
    rows: Sequence[Mapping[str, Any]], held_out_totals: Mapping[str, int] | None = None
) -> list[dict[str, Any]]:
    """Why a coding team's program passes more or fewer held-out tests than one agent's best of n: per env, team size
    and team condition, the turn-1 split of both conditions' sent programs (:func:`candidate_terms`), each term
    compared team − best of n over the (task, seed) pairs both played, and how many of each episode's candidates pass
    any held-out test. Both send one of n candidates by the same visible-test rule, so the split says whether the
    team's candidates are better one by one, differ more from each other, or are chosen better.

    ``held_out_totals`` (task id → number of held-out tests) stands in for logs whose ``turn_tests`` lack
    ``held_out_total``. Returns one record per cell: ``{"env", "team_size", "condition", "pairs", "terms": {term:
    Comparison}, "passing": {condition: {k: share of episodes with k candidates passing}}}``; none where the log has no
    such pairs."""
    rows = clean_rows(rows).rows
    totals = held_out_totals or {}
    records = []
    for env in envs_of(rows):
        env_rows = select_rows(rows, env=env)
        for size in sizes_of(env_rows):
            others = {_match_key(r): r for r in select_rows(env_rows, BEST_OF_N, size=size)}
            for condition in conditions_of(env_rows):
                if condition == BEST_OF_N:
                    continue
                pairs: list[tuple[dict[str, float], dict[str, float]]] = []
                passing: dict[str, dict[int, int]] = {condition: {}, BEST_OF_N: {}}
                for row in select_rows(env_rows, condition, size=size):
                    other = others.get(_match_key(row))
                    if other is None:
                        continue
                    read = [turn_one_candidates(r, totals.get(str(r["task"]))) for r in (row, other)]
                    if read[0] is None or read[1] is None:
                        continue
                    pairs.append((candidate_terms(*read[0]), candidate_terms(*read[1])))
                    for name, (scores, _) in zip((condition, BEST_OF_N), read, strict=True):
                        k = sum(score > 0 for score in scores)
                        passing[name][k] = passing[name].get(k, 0) + 1
                if not pairs:
                    continue
                records.append({
                    "env": env, "team_size": size, "condition": condition, "pairs": len(pairs),
                    "terms": {term: stats.compare([a[term] for a, _ in pairs], [b[term] for _, b in pairs],
                                                  paired=True) for term in CANDIDATE_TERMS},
                    "passing": {name: {k: n / len(pairs) for k, n in sorted(counts.items())}
                                for name, counts in passing.items()},
                })
    return records


def regressions(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``T = α + β·C`` per env (and pooled over envs) × condition (and pooled over conditions) × consistency column.

    Only episodes with that consistency column present enter a fit (single-agent episodes drop out). Scopes with
    no such episode are left out; scopes with too few keep their row with a note.
    """
    records: list[dict[str, Any]] = []
    envs = envs_of(rows)
    for env in [*envs, POOLED] if len(envs) > 1 else envs:
        for condition in [POOLED, *conditions_of(rows)]:
            scope = select_rows(rows, None if condition == POOLED else condition, env)
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


def precisions(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The precisions the policies ran in (the rows' ``dtype`` and ``device``), most episodes first: one record per
    distinct pair, ``{"dtype", "device", "episodes", "conditions": {condition: episodes}}``. ``None`` where a row does
    not say (a scripted or endpoint policy, or a log written before rows recorded it). A log that pools episodes of
    several dtypes pools policies that sample differently (:func:`mixed_dtypes`)."""
    return _counted_by(rows, {"dtype": _text_or_none, "device": _text_or_none})


def sandboxes(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The sandbox backends that ran the tests (the rows' ``sandbox_backend``), most episodes first, over the rows
    scored by tests (those with a pass rate): ``{"sandbox_backend", "episodes", "conditions": {condition:
    episodes}}``. ``None`` where a row does not say (a log from before rows recorded it)."""
    tested = [row for row in rows if row.get("pass_rate") is not None]
    return _counted_by(tested, {"sandbox_backend": _text_or_none})


def mixed_sandboxes(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the rows scored by tests pool episodes run in different sandbox backends (a row that does not say
    counts as one more kind when others do)."""
    return len(sandboxes(rows)) > 1


def decoding_stops(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stops the decoding applied (the rows' ``stop_at_reply_end`` and ``role_budgets``), most episodes first:
    one record per distinct pair, ``{"stop_at_reply_end", "role_budgets", "episodes", "conditions": {condition:
    episodes}}``. ``None`` where a row does not say (nothing decoded here, or a log from before rows recorded them,
    when both were off by default). A team writes less with a stop on, so token figures differ between them."""
    return _counted_by(rows, {"stop_at_reply_end": _bool_or_none, "role_budgets": _bool_or_none})


def _counted_by(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, Callable[[object], Any]]
                ) -> list[dict[str, Any]]:
    """One record per distinct combination of ``columns`` (each read with its converter) with its episodes in all and
    per condition, most episodes first (then by the values' text)."""
    counts: dict[tuple[Any, ...], dict[str, int]] = {}
    for row in rows:
        key = tuple(convert(row.get(name)) for name, convert in columns.items())
        by_condition = counts.setdefault(key, {})
        by_condition[row["condition"]] = by_condition.get(row["condition"], 0) + 1
    records = [{**dict(zip(columns, key, strict=True)), "episodes": sum(by_condition.values()),
                "conditions": {c: by_condition[c] for c in in_order(by_condition, CONDITION_ORDER)}}
               for key, by_condition in counts.items()]
    return sorted(records, key=lambda r: (-r["episodes"], *(str(r[name]) for name in columns)))


def mixed_decoding(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The envs in whose rows the decoding stops differ (a row that does not say counts as one more kind when others
    do): their figures pool episodes written under different stops. Across envs they may differ by design (writing
    has no reply end to stop at)."""
    kinds: dict[str, set[tuple[bool | None, bool | None]]] = {}
    for row in rows:
        kinds.setdefault(str(row["env"]), set()).add((_bool_or_none(row.get("stop_at_reply_end")),
                                                      _bool_or_none(row.get("role_budgets"))))
    return sorted(env for env, seen in kinds.items() if len(seen) > 1)


def _bool_or_none(value: object) -> bool | None:
    return None if value is None else bool(value)


def mixed_dtypes(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``rows`` pool episodes whose policies ran in different dtypes (a row that does not say counts as one
    more kind when others do)."""
    return len({_text_or_none(row.get("dtype")) for row in rows}) > 1


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


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
    few = bool(a and b) and is_few(min(len(a), len(b)))
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
    ours = select_rows(rows, REFERENCE)
    metrics = []
    for metric, paper, paper_value, kind in _HEADLINE_SPEC:
        vs = {b: _headline_entry(ours, select_rows(rows, b), metric, kind) for b in baselines} if ours else {}
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
