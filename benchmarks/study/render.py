"""The study report's rendering: the Markdown report, the printed headline, the CSV and JSON files and the plots.

Everything here presents figures that :mod:`~llm_marl_benchmarks.study.report` computes from the episode log (its
reading and statistics); nothing here estimates or tests anything (the scatter plots only rescale their axes).
:func:`build_report` (and ``llm-marl bench report DIR``, :func:`main`) writes every file of a report next to the log:

- ``report.md``      headline (ours next to the seeds' paper), summary, tests, regression, how to read them;
- ``summary.csv``    per condition × env × team size (and pooled over sizes, ``team_size = all``): episodes and
                     mean with 95 % CI of every metric;
- ``tests.csv``      every comparison of ``trained`` against each other condition, per env and team size and pooled
                     over sizes: paired t-test (d_z) when every episode has its partner, else Welch (Cohen's d);
- ``regression.csv`` ``T = α + β·C + ε`` on min–max normalised turns and each consistency column;
- ``bars_<env>.png`` means with 95 % CI per condition and team size; ``scatter_<env>.png`` T against C with the fit.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_marl_benchmarks.figures_json import write_figures_json
from llm_marl_benchmarks.study import stats
from llm_marl_benchmarks.study.episode_log import LOG_NAME
from llm_marl_benchmarks.study.report import (
    BEST_OF_N,
    CANDIDATE_TERMS,
    CONDITION_ORDER,
    CONSISTENCY_COLUMNS,
    FEW_EPISODES,
    FEW_MARK,
    HEADLINE_CONDITIONS,
    LABELS,
    METRICS,
    POOLED,
    REFERENCE,
    TEAM_ONLY_METRICS,
    EmptyLogError,
    LogContents,
    candidate_split,
    clean_rows,
    compare_conditions,
    conditions_of,
    decoding_stops,
    envs_of,
    headline,
    in_order,
    is_few,
    mixed_decoding,
    mixed_dtypes,
    mixed_sandboxes,
    precisions,
    read_episodes,
    regressions,
    sandboxes,
    select_rows,
    sizes_of,
    summarise,
    three_way,
    turn_distribution,
)

__all__ = [
    "DEGENERACY_METRICS",
    "EFFECT_METRICS",
    "HOW_TO_READ",
    "build_report",
    "format_effects",
    "format_headline",
    "format_three_way",
    "main",
    "print_headline",
    "write_report",
]

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


# ---------------------------------------------------------------------------------------------------------------
# Numbers as text


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


def _mean_text(mean: stats.MeanCI) -> str:
    if mean.n == 0:
        return "—"
    if mean.n < 2:
        return f"{_num(mean.mean)} (n=1) {FEW_MARK}"
    return f"{_num(mean.mean)} [{_num(mean.low)}, {_num(mean.high)}]" + (f" {FEW_MARK}" if is_few(mean.n) else "")


def _pair_text(result: stats.Comparison) -> str:
    text = f"{result.diff:+.3f}"
    if not math.isnan(result.diff_ci_low):
        text += f" [{result.diff_ci_low:+.3f}, {result.diff_ci_high:+.3f}]"
    if math.isnan(result.p):
        text += ", every pair equal" if result.diff_ci_low == result.diff_ci_high else f" ({result.note})"
    else:
        text += ", p < 0.001" if result.p < 0.001 else f", p = {result.p:.3f}"
    return text + (f" {FEW_MARK}" if is_few(min(result.n_a, result.n_b)) else "")


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
    return text + (f" {FEW_MARK}" if is_few(n) else "")


# ---------------------------------------------------------------------------------------------------------------
# The headline (printed at the end of a study and at the top of report.md)


def print_headline(rows: Sequence[Mapping[str, Any]]) -> None:
    """Print the headline of ``rows`` (the runner calls this at the end of a study): per env and team size, trained vs
    untrained vs single (vs single_best_of_n where it ran) on what they share, each pair a difference with its 95 %
    CI and p (:func:`format_three_way`), then the seeds' three figures beside ours (:func:`format_headline`), and the
    precision the policies ran in."""
    rows = clean_rows(rows).rows
    print(format_three_way(rows), flush=True)
    print("\nAgainst the seeds' figures (trained vs each condition, pooled over envs and team sizes):\n", flush=True)
    print(format_headline(headline(rows)), flush=True)
    print(f"\nPolicies ran in: {_precision_text(rows)}."
          + (" Warning: the figures pool several precisions." if mixed_dtypes(rows) else ""), flush=True)
    print(f"Replies: {_decoding_text(rows)}.", flush=True)
    if sandboxes(rows):
        print(f"Tests ran in: {_sandbox_text(rows)}."
              + (" Warning: the figures pool several sandboxes." if mixed_sandboxes(rows) else ""), flush=True)


def format_three_way(rows: Sequence[Mapping[str, Any]]) -> str:
    """:func:`~llm_marl_benchmarks.study.report.three_way` as one Markdown table per env and team size: a row per
    metric, a column per condition (mean [95 % CI]) and per pair (``a − b`` [95 % CI], p)."""
    records = three_way(rows)
    if not records:
        return f"(no headline: fewer than two of {list(HEADLINE_CONDITIONS)} in the log)"
    parts = []
    for (env, size) in dict.fromkeys((r["env"], r["team_size"]) for r in records):
        block = [r for r in records if r["env"] == env and r["team_size"] == size]
        conditions = [c for c in HEADLINE_CONDITIONS if any(c in r["means"] for r in block)]
        pairs = [(a, b) for i, a in enumerate(conditions) for b in conditions[i + 1:]]
        header = ["metric", *conditions, *(f"{a} − {b}" for a, b in pairs)]
        counts = {c: len(select_rows(select_rows(rows, env=env), c, size=size)) for c in conditions}
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


def _three_way_json(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`~llm_marl_benchmarks.study.report.three_way` as plain data (the ``--json`` file)."""
    return [{"env": r["env"], "team_size": r["team_size"], "metric": r["metric"],
             "means": {c: dataclasses.asdict(m) for c, m in r["means"].items()},
             "pairs": {f"{a} - {b}": dataclasses.asdict(c) for (a, b), c in r["pairs"].items()}}
            for r in three_way(rows)]


def format_effects(rows: Sequence[Mapping[str, Any]]) -> str:
    """One Markdown table per env: for each of :data:`EFFECT_METRICS`, ``trained``'s mean [95 % CI] and, against
    each other condition, ``other mean → diff [95 % CI of the diff], p`` — paired by task and seed when every episode
    has its partner (:func:`~llm_marl_benchmarks.study.report.compare_conditions`, pooled over team sizes). A metric
    one side has no value of (a single agent's consistency, writing's pass rate) is shown as ``—`` with the reason;
    an undefined test (every pair equal) keeps its difference and interval."""
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


# ---------------------------------------------------------------------------------------------------------------
# The report's other tables


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


_CANDIDATE_LABELS = {"one_candidate": "one candidate (the candidates' mean)",
                     "best_candidate_gain": "what the best candidate adds to it",
                     "choice_keeps": "what the visible tests' choice gives up (≤ 0)",
                     "sent": "the sent program"}
CANDIDATES_INTRO = (
    "A coding team (its coders' candidates) and one agent's best of n (its samples) each send one candidate, chosen "
    "by the same visible-test rule. "
    "On turn 1 the sent program's score (its share of the held-out tests) is one candidate + what the best "
    "candidate adds + what the choice gives up, so these rows say whether the team's candidates are better one by "
    "one, differ more from each other, or are chosen better (paired by task and seed)."
)


def _candidates_markdown(records: Sequence[Mapping[str, Any]]) -> str:
    """:func:`~llm_marl_benchmarks.study.report.candidate_split` as one Markdown table per cell."""
    parts = []
    for r in records:
        name = r["condition"]
        lines = [f"### {r['env']}, {r['team_size']} agents: {name} against {BEST_OF_N} ({r['pairs']} pairs)", "",
                 f"| turn 1, share of held-out tests passed | {name} | {BEST_OF_N} | difference [95 % CI], p |",
                 "|---|---|---|---|"]
        for term in CANDIDATE_TERMS:
            result = r["terms"][term]
            lines.append(f"| {_CANDIDATE_LABELS[term]} | {_num(result.mean_a)} | {_num(result.mean_b)} | "
                         f"{_pair_text(result)} |")
        shares = {side: ", ".join(f"{k} passing {100 * v:.0f} %" for k, v in counts.items())
                  for side, counts in r["passing"].items()}
        lines += ["", "Episodes by how many candidates pass any held-out test: "
                  + "; ".join(f"{side}: {text}" for side, text in shares.items()) + "."]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _summary_markdown(summary: Sequence[Mapping[str, Any]], envs: Sequence[str]) -> str:
    """One summary table per env: every metric's mean and 95 % CI per condition and team size."""
    parts = []
    for env in envs:
        records = [r for r in summary if r["env"] == env]
        metrics = [m for m in METRICS if any(r[f"{m}_n"] for r in records)]
        header = ["condition", "team size", "n", *(LABELS[m] for m in metrics)]
        lines = [f"### {env}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in records:
            n_text = f"{r['n']} {FEW_MARK}" if is_few(r["n"]) else str(r["n"])
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
        n = f"{r['n']} {FEW_MARK}" if is_few(r["n"]) else str(r["n"])
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
  with that budget (it may refine and end early). `single_best_of_n` (coding) is `single` sampling as many candidates
  a turn as the team has agents and sending the one that passes the most visible tests (ties: the first): about the
  team's completion tokens, so a team ahead of `single` but not of `single_best_of_n` gains by sampling more, not by
  coordinating. Team return is compared only between teams: one agent is paid `(w_q + w_c)·quality`, a team
  `w_q·quality + w_c·consistency`.
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
- **Precision.** The dtype and device the policies' weights ran in, as each episode's row records them. Sampling
  differs between precisions, and a figure can hold in one and not in another: compare within one precision, and
  say which when quoting a figure.
- **Sandbox.** The backend that ran the coding tests (`docker`, `bwrap` or `local`), as each episode's row records
  it. The backends give one program one verdict, except for a test near the time limit, which the machine's load
  can tip.
- **Degenerate strategies?** What a team that gamed the reward would show: near-identical parts (`duplication`),
  agents with an empty final part, actions that carry only messages or `<done/>`, and (coding) a helper no test
  depends on. Read trained against untrained.
- **{FEW_MARK}** marks a figure resting on fewer than {FEW_EPISODES} episodes (per side for tests): its interval is
  wide and its test has little power, so do not read much into it."""


# ---------------------------------------------------------------------------------------------------------------
# Plots


def _plot_bars(summary: Sequence[Mapping[str, Any]], env: str, path: Path) -> None:
    """Grouped bars (team sizes × conditions) with 95 % CI error bars, one panel per headline metric."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    records = [r for r in summary if r["env"] == env]
    metrics = [m for m in ("success", "pass_rate", "turns", *CONSISTENCY_COLUMNS) if any(r[f"{m}_n"] for r in records)]
    conditions = in_order((r["condition"] for r in records), CONDITION_ORDER)
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

    env_rows = select_rows(rows, env=env)
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


# ---------------------------------------------------------------------------------------------------------------
# The files


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


def _headline_title(rows: Sequence[Mapping[str, Any]]) -> str:
    """``trained vs untrained vs single``, and ``vs single_best_of_n`` when the log has it."""
    shown = [*HEADLINE_CONDITIONS[:3], *(c for c in HEADLINE_CONDITIONS[3:] if select_rows(rows, c))]
    return " vs ".join(shown)


def _counted_text(records: Sequence[Mapping[str, Any]], describe: Callable[[Mapping[str, Any]], str]) -> str:
    """``WHAT: 120 episodes (trained 40, ...); ...`` for records of ``report._counted_by`` (``describe`` names the
    WHAT of each)."""
    return "; ".join(f"{describe(record)}: {record['episodes']} episodes ("
                     + ", ".join(f"{c} {n}" for c, n in record["conditions"].items()) + ")" for record in records)


def _precision_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """``float32 on cpu: 120 episodes (trained 40, ...)`` for each precision of :func:`precisions`."""
    return _counted_text(precisions(rows), lambda r: (
        "not recorded (a scripted or endpoint policy, or a log from before rows recorded it)"
        if r["dtype"] is None else f"{r['dtype']} on {r['device']}"))


def _sandbox_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """``bwrap: 80 episodes (trained 40, single 40)`` for each backend of :func:`sandboxes`; empty when no row was
    scored by tests (writing)."""
    return _counted_text(sandboxes(rows),
                         lambda r: r["sandbox_backend"] or "not recorded (a log from before rows recorded it)")


def _decoding_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """``stopped at their env's reply end: 64 episodes (trained 16, ...); ...`` for each record of
    :func:`decoding_stops`."""
    def how(record: Mapping[str, Any]) -> str:
        if record["stop_at_reply_end"] is None:
            return ("stops not recorded (nothing decoded here, or a log from before rows recorded them, when replies "
                    "ran to a stop token or the budget)")
        stops = [what for what, on in (("their env's reply end", record["stop_at_reply_end"]),
                                       ("their role's budget", record["role_budgets"])) if on]
        return ("stopped at " + " and ".join(stops)) if stops else "run to a stop token or the budget"

    return _counted_text(decoding_stops(rows), how)


def write_report(out_dir: Path, log: LogContents) -> Path:
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
    candidates = candidate_split(rows)
    _write_csv(out_dir / "summary.csv", summary, SUMMARY_COLUMNS)
    _write_csv(out_dir / "tests.csv", tests, TESTS_COLUMNS)
    _write_csv(out_dir / "regression.csv", fits, REGRESSION_COLUMNS)
    plots = []
    for env in envs:
        _plot_bars(summary, env, out_dir / f"bars_{env}.png")
        plots.append(f"bars_{env}.png")
        if any(stats.present([r.get(c)]) for r in select_rows(rows, env=env) for c in CONSISTENCY_COLUMNS):
            _plot_scatter(rows, fits, env, out_dir / f"scatter_{env}.png")
            plots.append(f"scatter_{env}.png")

    counts = ", ".join(f"{c}: {len(select_rows(rows, c))}" for c in conditions_of(rows))
    dropped = []
    if log.malformed:
        dropped.append(f"{log.malformed} malformed line(s) skipped")
    if log.duplicates:
        dropped.append(f"{log.duplicates} duplicate episode key(s) ignored, the first row kept")
    few_cells = [r for r in summary if r["team_size"] != POOLED and is_few(r["n"])]
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
    if mixed_dtypes(rows):
        # Like pooled configurations: a figure can hold in one precision and not in another (sampling differs).
        warnings_md.append(
            "**The log mixes policies run in different precisions (" + _precision_text(rows) + "): figures pool "
            "episodes sampled differently; compare within one precision.**"
        )
    mixed_stops = mixed_decoding(rows)
    if mixed_stops:
        warnings_md.append(
            f"**The log mixes replies decoded under different stops in {', '.join(mixed_stops)} ("
            + _decoding_text(rows) + "): token and critical-path figures pool episodes written differently.**"
        )
    if mixed_sandboxes(rows):
        # The backends agree on a program's verdict except near the time limit, where the machine's load decides.
        warnings_md.append(
            "**The log mixes episodes whose tests ran in different sandboxes (" + _sandbox_text(rows) + "): a test "
            "near the time limit can pass in one and time out in another.**"
        )
    if REFERENCE not in conditions_of(rows):
        warnings_md.append(f"**No `{REFERENCE}` episodes in the log: no comparison with a trained team.**")
    else:
        untrained_only = [f"{env} with {size} agents" for env in envs for size in sizes_of(select_rows(rows, env=env))
                          if not select_rows(rows, REFERENCE, env, size)]
        if untrained_only:
            warnings_md.append(f"No `{REFERENCE}` episodes for {', '.join(untrained_only)} (no trained team of that "
                               "size): the other conditions are compared there without it.")
    sections = [
        "# Study report",
        "",
        f"Source: `{log.source or out_dir / LOG_NAME}` — {len(rows)} episodes ({counts}); envs: {', '.join(envs)}; "
        f"team sizes: {', '.join(map(str, sizes_of(rows)))}."
        + (f" {'; '.join(dropped)}." if dropped else ""),
        "",
        f"Policies ran in: {_precision_text(rows)}.",
        "",
        f"Replies: {_decoding_text(rows)}.",
        *(["", f"Tests ran in: {_sandbox_text(rows)}."] if sandboxes(rows) else []),
        *(["", *warnings_md] if warnings_md else []),
        "",
        f"## Headline: {_headline_title(rows)} (mean [95 % CI]; differences [95 % CI], p)",
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
        *(["## Candidates on turn 1: a team against one agent's best of n", "", CANDIDATES_INTRO, "",
            _candidates_markdown(candidates), ""] if candidates else []),
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
    return write_report(out_dir, log)


def main(argv: Sequence[str] | None = None) -> int:
    """``llm-marl bench report DIR``: rebuild the report from ``DIR/episodes.jsonl``; print the headline."""
    parser = argparse.ArgumentParser(
        prog="llm-marl bench report",
        description="Rebuild the study report (report.md, summary.csv, tests.csv, regression.csv, plots) from "
        "DIR/episodes.jsonl.",
    )
    parser.add_argument("dir", type=Path, help="the study's output folder (holds episodes.jsonl)")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the headline as JSON")
    args = parser.parse_args(argv)
    try:
        log = read_episodes(args.dir / LOG_NAME)
        path = write_report(args.dir, log)
    except (FileNotFoundError, EmptyLogError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    head = headline(log.rows)
    print_headline(log.rows)
    if args.json is not None:
        effects = [r for r in compare_conditions(log.rows) if r["team_size"] == POOLED]
        write_figures_json(args.json, {**head, "effects": effects, "three_way": _three_way_json(log.rows),
                                       "turns": turn_distribution(log.rows), "precision": precisions(log.rows),
                                       "decoding": decoding_stops(log.rows), "sandbox": sandboxes(log.rows)},
                           default=str)
    skipped = f" ({log.malformed} malformed line(s) skipped)" if log.malformed else ""
    print(f"\nreport: {path}{skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
