"""The study report on synthetic episode rows with known differences: every file is written, the CSV numbers equal
values recomputed here independently (numpy/scipy, not the report's code path), the paired/Welch choice follows
the episodes present, single-agent consistency is excluded, and the headline matches hand arithmetic."""

from __future__ import annotations

import csv
import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from llm_marl_benchmarks.study import render, report

TASKS = ("t0", "t1", "t2")
SEEDS = (0, 1)
SIZES = (2, 3)
ENVS = ("writing", "coding")
CONDITIONS = ("trained", "untrained", "single")


def episode(condition: str, env: str, size: int, t: int, s: int) -> dict[str, Any]:
    """One synthetic episode; the formulas fix each condition's means (worked out in ``test_headline_by_hand``)."""
    parity = (t + s) % 2  # over the 3 tasks x 2 seeds: 0,1,1,0,0,1 -> mean 0.5
    if condition == "trained":
        turns = 2 + parity + (size - 2)
        success = not (t == 2 and s == 1)  # 5 of 6
        pass_rate = 0.75 + 0.05 * t  # mean 0.80
        sim, contrib, dup = 0.6 + 0.05 * t, 0.7 - 0.1 * s, 0.1 + 0.01 * t  # means 0.65, 0.65, 0.11
        team_return, quality = 1.0 + 0.1 * t - 0.05 * s, 0.7 + 0.02 * s
    elif condition == "untrained":
        turns = 8 + parity + (size - 2)
        success = t == 0  # 2 of 6
        pass_rate = 0.45 + 0.1 * s  # mean 0.50
        sim, contrib, dup = 0.48 + 0.04 * s, 0.4 + 0.05 * t, 0.2 + 0.05 * s  # means 0.50, 0.45, 0.225
        team_return, quality = 0.5 + 0.1 * t, 0.6 + 0.03 * t
    else:  # single: one agent, so no consistency at all
        turns = 11 + t + (size - 2)
        success = t == 0 and s == 0
        pass_rate = 0.3 + 0.1 * t
        sim = contrib = dup = None
        team_return, quality = 0.3 + 0.05 * s, 0.55 + 0.01 * t
    if env == "coding":
        quality += 0.05  # an env offset, so pooled and per-env figures differ
    # Latency in tokens: the longest reply per turn, summed (trained 40 a turn, untrained 60 + 10·s, single 100).
    per_turn = {"trained": 40, "untrained": 60 + 10 * s, "single": 100}[condition]
    return {
        "key": f"{condition}/{env}/{size}/{TASKS[t]}/{s}",
        "config_hash": "abc123",
        "condition": condition,
        "env": env,
        "team_size": size,
        "num_agents": 1 if condition == "single" else size,
        "task": TASKS[t],
        "seed": s,
        "turns": turns,
        "team_return": team_return,
        "quality": quality,
        "success": success,
        "pass_rate": pass_rate if env == "coding" else None,
        "consistency_similarity": sim,
        "consistency_contribution": contrib,
        "duplication": dup,
        "empty_parts": 0.0 if condition == "trained" else 0.5 * parity,
        "protocol_only_actions": 0.1 * s,
        "echoed_scaffolding": 0.0 if condition == "trained" else 0.5 * (t % 2),
        "helper_load_bearing": (1.0 if condition == "trained" else float(t == 0))
        if env == "coding" and condition != "single" else None,
        "end_reason": "done",
        "turn_budget": 12,
        "critical_path_tokens": per_turn * turns,
        "completion_tokens": per_turn * turns * (1 if condition == "single" else size),
        "wall_time_s": 0.1 * turns + (0.02 * s if condition == "untrained" else 0.01 * t),
        "texts": {"agent_0": "draft"},
    }


def synthetic_rows() -> list[dict[str, Any]]:
    """3 tasks x 2 seeds x 2 sizes x 3 conditions x 2 envs = 72 episodes."""
    return [
        episode(c, e, size, t, s)
        for c in CONDITIONS
        for e in ENVS
        for size in SIZES
        for t in range(len(TASKS))
        for s in SEEDS
    ]


# The coding/untrained episode dropped from the log: coding's size-3 and pooled trained-vs-untrained comparisons lose
# a partner and must fall back to Welch; everything else stays paired.
DROPPED = "untrained/coding/3/t2/1"


def canonical_rows() -> list[dict[str, Any]]:
    """The rows the report should end up with (the log below adds noise the reader must remove)."""
    return [r for r in synthetic_rows() if r["key"] != DROPPED]


def write_log(path: Path) -> None:
    """The canonical rows plus the damage a real log can carry: a duplicated key (the first row counts, as in the
    episode log), a line that is not JSON, a row missing required fields, a row with a non-numeric metric, and a
    torn last line."""
    rows = canonical_rows()
    lines = [json.dumps(r) for r in rows]
    lines.append(json.dumps({**rows[0], "turns": 999}))  # a second row for rows[0]'s key: ignored
    lines.insert(5, "this is not json")
    lines.insert(9, json.dumps({"condition": "trained", "env": "writing"}))
    lines.insert(12, json.dumps({**rows[3], "key": "x/y", "turns": "many"}))
    lines.append("")  # a blank line is not malformed
    text = "\n".join(lines) + '\n{"key": "trained/writing/2/t0/0", "condition": "tra'  # torn, no newline
    path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One report over the damaged synthetic log, shared by the checks below (plots are the slow part)."""
    out = tmp_path_factory.mktemp("study")
    write_log(out / "episodes.jsonl")
    assert render.build_report(out) == out / "report.md"
    return out


def read_csv(path: Path) -> list[dict[str, str]]:
    """CSV rows as dicts of strings."""
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def num(text: str) -> float:
    """A CSV cell as a float; empty cells are undefined (NaN)."""
    return float("nan") if text == "" else float(text)


def cell(rows: list[dict[str, Any]], condition: str, env: str, size: int | str) -> list[dict[str, Any]]:
    """The canonical rows of one summary cell."""
    return [
        r
        for r in rows
        if r["condition"] == condition and r["env"] == env and (size == "all" or r["team_size"] == size)
    ]


def present(values: list[Any]) -> list[float]:
    """Non-missing values as floats."""
    return [float(v) for v in values if v is not None]


# ---------------------------------------------------------------------------------------------------------------


def test_every_file_is_written(built: Path) -> None:
    for name in ("report.md", "summary.csv", "tests.csv", "regression.csv"):
        assert (built / name).stat().st_size > 0, name
    for env in ENVS:
        for kind in ("bars", "scatter"):
            png = built / f"{kind}_{env}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    md = (built / "report.md").read_text(encoding="utf-8")
    for section in ("## Headline", "## How to read this", "## Summary", "## Tests", "## Regression", "## Plots"):
        assert section in md
    # The reader's damage report: 4 malformed lines (not JSON, missing fields, non-numeric turns, torn last line)
    # and 1 duplicate key; 71 usable episodes.
    assert "4 malformed line(s) skipped" in md
    assert "1 duplicate episode key(s) ignored, the first row kept" in md
    assert "configurations" not in md  # one config hash: no mixed-study warning
    assert "71 episodes" in md
    # Every cell has 6 (or 5) episodes, fewer than FEW_EPISODES = 10: the report must say so.
    assert report.FEW_EPISODES == 10
    assert "fewer than 10 episodes" in md and report.FEW_MARK in md


def test_reader_counts_malformed_lines_and_keeps_the_first_duplicate(built: Path) -> None:
    log = report.read_episodes(built / "episodes.jsonl")
    assert (log.malformed, log.duplicates, len(log.rows)) == (4, 1, 71)
    first = next(r for r in log.rows if r["key"] == canonical_rows()[0]["key"])
    assert first["turns"] == canonical_rows()[0]["turns"] != 999


def test_summary_numbers_equal_independent_recomputation(built: Path) -> None:
    rows = canonical_rows()
    summary = read_csv(built / "summary.csv")
    # 3 conditions x 2 envs x (2 sizes + pooled) = 18 records.
    assert len(summary) == 18
    checked = 0
    for rec in summary:
        size: int | str = rec["team_size"] if rec["team_size"] == "all" else int(rec["team_size"])
        expected_rows = cell(rows, rec["condition"], rec["env"], size)
        assert int(rec["n"]) == len(expected_rows)
        for metric in report.METRICS:
            xs = present([r[metric] for r in expected_rows])
            assert int(rec[f"{metric}_n"]) == len(xs)
            if not xs:
                # Missing stays missing: single-agent consistency and writing's pass rate are empty, never 0.
                assert rec[f"{metric}_mean"] == rec[f"{metric}_ci_low"] == rec[f"{metric}_ci_high"] == ""
                continue
            mean = float(np.mean(xs))
            half = sps.t.ppf(0.975, len(xs) - 1) * float(np.std(xs, ddof=1)) / math.sqrt(len(xs))
            assert num(rec[f"{metric}_mean"]) == pytest.approx(mean, abs=1e-12)
            assert num(rec[f"{metric}_ci_low"]) == pytest.approx(mean - half, abs=1e-12)
            assert num(rec[f"{metric}_ci_high"]) == pytest.approx(mean + half, abs=1e-12)
            checked += 1
    assert checked > 100
    # Spot values by hand: trained writing size 2 turns = 2 + parity, mean 2.5; untrained success = 2/6.
    by = {(r["condition"], r["env"], r["team_size"]): r for r in summary}
    assert num(by[("trained", "writing", "2")]["turns_mean"]) == 2.5
    assert num(by[("untrained", "writing", "all")]["success_mean"]) == pytest.approx(1 / 3)
    assert by[("single", "coding", "2")]["consistency_similarity_n"] == "0"
    assert by[("trained", "writing", "all")]["pass_rate_n"] == "0"


def test_tests_csv_picks_paired_or_welch_and_matches_scipy(built: Path) -> None:
    rows = canonical_rows()
    tests = read_csv(built / "tests.csv")
    assert tests, "no comparison written"
    seen_tests = set()
    for rec in tests:
        assert rec["condition_a"] == "trained"
        size: int | str = rec["team_size"] if rec["team_size"] == "all" else int(rec["team_size"])
        metric, other, env = rec["metric"], rec["condition_b"], rec["env"]
        a_rows = cell(rows, "trained", env, size)
        b_rows = cell(rows, other, env, size)
        # Expected choice: paired exactly when coding's dropped untrained episode is not in scope.
        welch_expected = other == "untrained" and env == "coding" and size in (3, "all")
        assert rec["test"] == ("Welch t" if welch_expected else "paired t"), rec
        seen_tests.add(rec["test"])
        if rec["test"] == "paired t":
            key = lambda r: (r["task"], r["seed"], r["team_size"])  # noqa: E731
            a = [r[metric] for r in sorted(a_rows, key=key)]
            b = [r[metric] for r in sorted(b_rows, key=key)]
            with warnings.catch_warnings():
                # scipy warns on constant differences (turns: −6 in every pair); the reference is still ±inf.
                warnings.simplefilter("ignore", RuntimeWarning)
                ref = sps.ttest_rel(np.asarray(a, float), np.asarray(b, float))
            diffs = np.asarray(a, float) - np.asarray(b, float)
            effect = diffs.mean() / diffs.std(ddof=1) if diffs.std(ddof=1) > 0 else float("nan")
            assert rec["effect_name"] == "d_z"
            assert int(rec["n_a"]) == int(rec["n_b"]) == len(a)
        else:
            a = present([r[metric] for r in a_rows])
            b = present([r[metric] for r in b_rows])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # as above: a constant metric in both groups
                ref = sps.ttest_ind(a, b, equal_var=False)
            pooled = math.sqrt(((len(a) - 1) * np.var(a, ddof=1) + (len(b) - 1) * np.var(b, ddof=1))
                               / (len(a) + len(b) - 2))
            effect = (np.mean(a) - np.mean(b)) / pooled
            assert rec["effect_name"] == "d"
            assert (int(rec["n_a"]), int(rec["n_b"])) == (len(a), len(b))
        if not math.isfinite(ref.statistic):
            # scipy says ±inf or NaN on zero variance (e.g. turns: trained − untrained = −6 in every pair);
            # the report leaves t and p undefined and says why.
            assert rec["t"] == rec["p"] == "" and rec["significant"] == "" and "zero variance" in rec["note"]
            continue
        assert num(rec["t"]) == pytest.approx(float(ref.statistic), rel=1e-9)
        assert num(rec["p"]) == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-15)
        assert num(rec["effect_size"]) == pytest.approx(float(effect), rel=1e-9)
        assert rec["significant"] == str(float(ref.pvalue) < 0.05)
        # Per-size cells have 6 (or 5) episodes per side, pooled ones 12 (or 11): only the former are "few".
        assert rec["few"] == str(size != "all")
    assert seen_tests == {"paired t", "Welch t"}
    # Single-agent consistency is excluded, so no consistency comparison against single exists at all.
    assert not [r for r in tests if r["condition_b"] == "single" and r["metric"] in report.CONSISTENCY_COLUMNS]
    # Writing has no pass rate, so no pass-rate comparison there; coding has them.
    assert not [r for r in tests if r["env"] == "writing" and r["metric"] == "pass_rate"]
    assert [r for r in tests if r["env"] == "coding" and r["metric"] == "pass_rate"]
    # Every (env, size or pooled, other condition) scope appears.
    scopes = {(r["env"], r["team_size"], r["condition_b"]) for r in tests}
    assert scopes == {(e, s, c) for e in ENVS for s in ("2", "3", "all") for c in ("untrained", "single")}


def test_regression_csv_matches_closed_form_ols(built: Path) -> None:
    rows = canonical_rows()
    fits = read_csv(built / "regression.csv")
    assert fits
    for rec in fits:
        scope = [
            r
            for r in rows
            if (rec["env"] == "all" or r["env"] == rec["env"])
            and (rec["condition"] == "all" or r["condition"] == rec["condition"])
            and r[rec["consistency"]] is not None
        ]
        assert int(rec["n"]) == len(scope)
        assert all(r["condition"] != "single" for r in scope)
        t = np.array([r["turns"] for r in scope], float)
        c = np.array([r[rec["consistency"]] for r in scope], float)
        y = (t - t.min()) / (t.max() - t.min())
        x = (c - c.min()) / (c.max() - c.min())
        # OLS in closed form: β = Sxy/Sxx, α = ȳ − β·x̄, R² = corr(x, y)².
        beta = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
        assert num(rec["beta"]) == pytest.approx(beta, abs=1e-9)
        assert num(rec["alpha"]) == pytest.approx(y.mean() - beta * x.mean(), abs=1e-9)
        assert num(rec["r2"]) == pytest.approx(np.corrcoef(x, y)[0, 1] ** 2, abs=1e-9)
        assert num(rec["beta_ci_low"]) < num(rec["beta"]) < num(rec["beta_ci_high"])
    # Single episodes have no consistency, so no single fit; every other scope is there.
    assert {r["condition"] for r in fits} == {"all", "trained", "untrained"}
    assert {r["env"] for r in fits} == {"writing", "coding", "all"}
    # Pooled over conditions, trained's fewer turns and higher similarity give a negative slope.
    pooled = next(r for r in fits if r["env"] == "writing" and r["condition"] == "all"
                  and r["consistency"] == "consistency_similarity")
    assert num(pooled["beta"]) < 0 and num(pooled["p_beta"]) < 0.05


def test_headline_by_hand() -> None:
    head = report.headline(synthetic_rows())
    assert head["primary"] == "untrained" and head["baselines"] == ["untrained", "single"]
    by = {m["metric"]: m for m in head["metrics"]}
    vs_untrained = {k: m["vs"]["untrained"] for k, m in by.items()}
    # Turns, pooled over envs and sizes: trained 2 + parity + (size − 2) -> 2.5 (size 2), 3.5 (size 3), mean 3.0;
    # untrained 8 + parity + (size − 2) -> mean 9.0; factor 9.0 / 3.0 = 3.0x fewer (the paper: 3.1x).
    assert vs_untrained["turns"]["trained_mean"] == 3.0 and vs_untrained["turns"]["baseline_mean"] == 9.0
    assert vs_untrained["turns"]["value"] == pytest.approx(3.0)
    assert vs_untrained["turns"]["text"] == "3.00x fewer"
    # Single: 11 + t + (size − 2) -> mean 11 + 1 + 0.5 = 12.5; 12.5 / 3.0 = 4.1667x fewer.
    assert by["turns"]["vs"]["single"]["value"] == pytest.approx(12.5 / 3.0)
    # Similarity consistency: trained 0.6 + 0.05t -> 0.65, untrained 0.48 + 0.04s -> 0.50: (0.65 − 0.5)/0.5 = +30 %.
    assert vs_untrained["consistency_similarity"]["value"] == pytest.approx(30.0)
    # Contribution: 0.65 vs 0.45 -> +44.4 %; duplication: 0.11 vs 0.225 -> −51.1 %.
    assert vs_untrained["consistency_contribution"]["value"] == pytest.approx(100 * 0.2 / 0.45)
    assert vs_untrained["duplication"]["value"] == pytest.approx(100 * (0.11 - 0.225) / 0.225)
    # Pass rate (coding only): 0.80 vs 0.50 -> +60 % relative, +30 percentage points, over the 12 coding episodes
    # per side (2 sizes x 3 tasks x 2 seeds).
    pr = vs_untrained["pass_rate"]
    assert pr["value"] == pytest.approx(60.0) and pr["points"] == pytest.approx(30.0)
    assert (pr["n_trained"], pr["n_baseline"]) == (12, 12)
    assert pr["text"] == "+60.0 % (+30.0 pp)"
    # Success: 5/6 vs 2/6 -> (5/6 − 1/3)/(1/3) = +150 %, +50 pp.
    assert vs_untrained["success"]["value"] == pytest.approx(150.0)
    assert vs_untrained["success"]["points"] == pytest.approx(50.0)
    # Single agents have no consistency: n/a, not a change against 0.
    assert by["consistency_similarity"]["vs"]["single"]["text"] == "n/a (no values)"
    assert by["consistency_similarity"]["vs"]["single"]["n_baseline"] == 0
    # The seeds' figures sit next to ours.
    assert by["turns"]["paper_value"] == 3.1 and by["consistency_similarity"]["paper_value"] == 19.4
    assert by["pass_rate"]["paper_value"] == 21.7
    table = render.format_headline(head)
    assert "trained vs untrained" in table and "3.1x fewer" in table and "3.00x fewer" in table
    assert table.index("similarity") < table.index("contribution") < table.index("duplication")


def test_the_printed_headline_is_differences_with_cis_and_p_per_env() -> None:
    rows = synthetic_rows()
    text = render.format_effects(rows)
    assert "writing:" in text and "coding:" in text and "n/a" not in text
    # Team return, writing, trained vs untrained, paired over 2 sizes x 3 tasks x 2 seeds: d = 0.5 − 0.05·s.
    diffs = [0.5 - 0.05 * s for _size in SIZES for _t in range(3) for s in SEEDS]
    mean, sd = float(np.mean(diffs)), float(np.std(diffs, ddof=1))
    half = sps.t.ppf(0.975, len(diffs) - 1) * sd / math.sqrt(len(diffs))
    p = 2 * sps.t.sf(abs(mean / (sd / math.sqrt(len(diffs)))), len(diffs) - 1)
    writing = text.split("coding:")[0]
    line = next(row for row in writing.splitlines() if row.startswith("| team return"))
    untrained_mean = float(np.mean([0.5 + 0.1 * t for _size in SIZES for t in range(3) for _s in SEEDS]))
    assert f"{untrained_mean:.3f} → {mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}], p " in line
    assert p < 0.001 and "p < 0.001" in line
    # A single agent has no consistency: a dash with the reason, not a number against 0.
    line = next(row for row in writing.splitlines() if row.startswith("| consistency: contribution"))
    assert "— (one agent has no teammate)" in line
    # Every pair differing by the same amount: the difference and its (zero-width) interval, no p.
    equal = [{**r, "quality": 0.9 if r["condition"] == "trained" else 0.7} for r in rows
             if r["condition"] != "single"]
    line = next(row for row in render.format_effects(equal).splitlines() if row.startswith("| quality"))
    assert "0.700 → +0.200 [+0.200, +0.200], every pair equal" in line


def test_the_degeneracy_table_compares_trained_with_untrained(built: Path) -> None:
    md = (built / "report.md").read_text(encoding="utf-8")
    section = md.split("## Degenerate strategies?")[1].split("## How to read this")[0]
    coding = section.split("### coding")[1]
    assert "helper load-bearing" in coding and "helper load-bearing" not in section.split("### coding")[0]
    trained = next(row for row in coding.splitlines() if row.startswith("| trained"))
    assert "| 12 | " in trained and "1.000 [1.000, 1.000]" in trained  # every trained coding helper bears load


def test_only_writing_one_size_and_a_missing_condition(tmp_path: Path) -> None:
    # Only writing (pass rate all None), only team size 2, no untrained condition.
    rows = [
        r
        for r in synthetic_rows()
        if r["env"] == "writing" and r["team_size"] == 2 and r["condition"] != "untrained"
    ]
    path = render.build_report(tmp_path, rows=rows)
    md = path.read_text(encoding="utf-8")
    assert (tmp_path / "bars_writing.png").exists() and (tmp_path / "scatter_writing.png").exists()
    assert not (tmp_path / "bars_coding.png").exists()
    summary = read_csv(tmp_path / "summary.csv")
    assert {r["pass_rate_mean"] for r in summary} == {""}
    tests = read_csv(tmp_path / "tests.csv")
    assert {r["condition_b"] for r in tests} == {"single"}
    assert "pass_rate" not in {r["metric"] for r in tests}
    head = report.headline(rows)
    assert head["primary"] == "single"
    assert {m["metric"]: m for m in head["metrics"]}["pass_rate"]["vs"]["single"]["text"] == "n/a (no values)"
    assert "trained vs single" in md
    # Single has no consistency and trained alone is fitted: the regression has only trained/pooled rows.
    assert {r["condition"] for r in read_csv(tmp_path / "regression.csv")} == {"all", "trained"}


def test_no_trained_condition_still_reports(tmp_path: Path) -> None:
    rows = [r for r in synthetic_rows() if r["condition"] != "trained" and r["env"] == "coding"]
    md = render.build_report(tmp_path, rows=rows).read_text(encoding="utf-8")
    assert "No `trained` episodes" in md
    assert read_csv(tmp_path / "tests.csv") == []  # header only
    assert (tmp_path / "tests.csv").read_text(encoding="utf-8").startswith("env,team_size,metric")


def test_zero_variance_comparison_is_reported_as_undefined(tmp_path: Path) -> None:
    # Every trained and every untrained episode has the same turns: the turns test is undefined, not significant.
    rows = [
        {**r, "turns": 3 if r["condition"] == "trained" else 7}
        for r in synthetic_rows()
        if r["condition"] != "single" and r["env"] == "writing"
    ]
    render.build_report(tmp_path, rows=rows)
    turns = [r for r in read_csv(tmp_path / "tests.csv") if r["metric"] == "turns"]
    assert turns and all(r["t"] == "" and r["significant"] == "" and "zero variance" in r["note"] for r in turns)
    assert "n/a (zero variance" in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_print_headline_and_mixed_configurations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = synthetic_rows()
    render.print_headline(rows)
    printed = capsys.readouterr().out
    # Turns differ by exactly −6 in every pair (trained 2, untrained 8, + parity + size − 2): see synthetic rows.
    writing_2 = printed.split("writing, team size 2")[1].split("writing, team size 3")[0]
    turns = next(line for line in writing_2.splitlines() if line.startswith("| turns per episode"))
    assert turns.startswith("| turns per episode (latency) | 2.500 [") and "| -6.000 [-6.000, -6.000], every pair " \
        "equal" in turns
    assert "Against the seeds' figures" in printed and "3.1x fewer" in printed
    mixed = [{**r, "config_hash": "other"} if r["condition"] == "single" else r for r in rows]
    mixed = [{**r, "similarity_backend": "tfidf"} for r in mixed]
    md = render.build_report(tmp_path, rows=mixed).read_text(encoding="utf-8")
    assert "mixes 2 study configurations" in md
    assert "measured with: tfidf (the seeds used MiniLM)" in md


def test_the_precision_the_policies_ran_in_is_shown_and_pooling_two_dtypes_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each row's ``dtype`` and ``device`` reach report.md, the printed headline and the JSON; a log pooling two dtypes
    is flagged as the log pooling two configurations is (a figure can hold in one precision and not the other)."""
    rows = [{**r, "dtype": "float32", "device": "cpu"} for r in synthetic_rows() if r["env"] == "writing"]
    one = tmp_path / "one"
    md = render.build_report(one, rows=rows).read_text(encoding="utf-8")
    n = len(rows) // 3
    assert f"Policies ran in: float32 on cpu: {3 * n} episodes (trained {n}, untrained {n}, single {n})." in md
    assert "different precisions" not in md
    assert report.precisions(rows) == [{"dtype": "float32", "device": "cpu", "episodes": 3 * n,
                                        "conditions": {"trained": n, "untrained": n, "single": n}}]
    # The trained team in bfloat16, the others in float32: two kinds pooled.
    mixed = [{**r, "dtype": "bfloat16"} if r["condition"] == "trained" else r for r in rows]
    two = tmp_path / "two"
    two.mkdir()
    (two / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mixed), encoding="utf-8")
    assert render.main([str(two), "--json", str(two / "head.json")]) == 0
    md = (two / "report.md").read_text(encoding="utf-8")
    assert ("**The log mixes policies run in different precisions (float32 on cpu: 24 episodes (untrained 12, single "
            "12); bfloat16 on cpu: 12 episodes (trained 12)): figures pool episodes sampled differently") in md
    assert "the figures pool several precisions" in capsys.readouterr().out
    head = json.loads((two / "head.json").read_text(encoding="utf-8"))
    assert [(p["dtype"], p["episodes"]) for p in head["precision"]] == [("float32", 24), ("bfloat16", 12)]
    # Rows from before rows recorded it (or a scripted policy) say so; beside recorded rows they are one more kind.
    old = [{k: v for k, v in r.items() if k not in ("dtype", "device")} for r in rows]
    md = render.build_report(tmp_path / "old", rows=old).read_text(encoding="utf-8")
    assert "Policies ran in: not recorded (a scripted or endpoint policy" in md and "different precisions" not in md
    assert report.mixed_dtypes([*old[:n], *rows[n:]]) and not report.mixed_dtypes(old)


def test_the_sandbox_that_ran_the_tests_is_shown_and_pooling_two_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each coding row's ``sandbox_backend`` reaches report.md, the printed headline and the JSON, counted over the
    rows scored by tests only; a log whose tests ran in two backends is flagged (a test near the time limit can pass
    in one and time out in the other). Writing alone names no sandbox."""
    coding = [{**r, "sandbox_backend": "bwrap"} for r in synthetic_rows() if r["env"] == "coding"]
    writing = [{**r, "sandbox_backend": None} for r in synthetic_rows() if r["env"] == "writing"]
    assert all(r["pass_rate"] is not None for r in coding) and all(r["pass_rate"] is None for r in writing)
    n = len(coding) // 3
    md = render.build_report(tmp_path / "one", rows=[*coding, *writing]).read_text(encoding="utf-8")
    assert f"Tests ran in: bwrap: {3 * n} episodes (trained {n}, untrained {n}, single {n})." in md
    assert "different sandboxes" not in md
    assert "Tests ran in" not in render.build_report(tmp_path / "w", rows=writing).read_text(encoding="utf-8")
    # The trained team's tests in Docker, the others' in bwrap: two kinds pooled.
    mixed = [{**r, "sandbox_backend": "docker"} if r["condition"] == "trained" else r for r in coding]
    two = tmp_path / "two"
    two.mkdir()
    (two / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*mixed, *writing]),
                                        encoding="utf-8")
    assert render.main([str(two), "--json", str(two / "head.json")]) == 0
    md = (two / "report.md").read_text(encoding="utf-8")
    assert (f"**The log mixes episodes whose tests ran in different sandboxes (bwrap: {2 * n} episodes (untrained "
            f"{n}, single {n}); docker: {n} episodes (trained {n})): a test near the time limit") in md
    assert "the figures pool several sandboxes" in capsys.readouterr().out
    head = json.loads((two / "head.json").read_text(encoding="utf-8"))
    assert [(s["sandbox_backend"], s["episodes"]) for s in head["sandbox"]] == [("bwrap", 2 * n), ("docker", n)]
    # Rows from before rows recorded it say so; beside recorded rows they are one more kind.
    old = [{k: v for k, v in r.items() if k != "sandbox_backend"} for r in coding]
    md = render.build_report(tmp_path / "old", rows=old).read_text(encoding="utf-8")
    assert "Tests ran in: not recorded (a log from before rows recorded it)" in md and "different sandboxes" not in md
    assert report.mixed_sandboxes([*old[:n], *coding[n:]]) and not report.mixed_sandboxes(old)


def test_the_stops_the_decoding_applied_are_shown_and_pooling_two_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each row's ``stop_at_reply_end`` and ``role_budgets`` reach report.md, the printed headline and the JSON; an
    env whose rows were decoded under different stops is flagged (a team writes less with a stop on, so its token
    figures differ), while rows that differ only across envs are not (writing has no reply end to stop at)."""
    coding = [{**r, "stop_at_reply_end": True, "role_budgets": False} for r in synthetic_rows()
              if r["env"] == "coding"]
    writing = [{**r, "stop_at_reply_end": False, "role_budgets": False} for r in synthetic_rows()
               if r["env"] == "writing"][:-3]
    n, m = len(coding) // 3, len(writing)
    md = render.build_report(tmp_path / "one", rows=[*coding, *writing]).read_text(encoding="utf-8")
    assert (f"Replies: stopped at their env's reply end: {3 * n} episodes (trained {n}, untrained {n}, single {n}); "
            f"run to a stop token or the budget: {m} episodes") in md
    assert "decoded under different stops" not in md
    assert report.decoding_stops(coding) == [{"stop_at_reply_end": True, "role_budgets": False, "episodes": 3 * n,
                                              "conditions": {"trained": n, "untrained": n, "single": n}}]
    # The trained coding team with both stops, the other coding conditions with none: two kinds pooled in coding.
    mixed = [{**r, "role_budgets": True} if r["condition"] == "trained" else {**r, "stop_at_reply_end": False}
             for r in coding]
    two = tmp_path / "two"
    two.mkdir()
    (two / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*mixed, *writing]), encoding="utf-8")
    assert render.main([str(two), "--json", str(two / "head.json")]) == 0
    md = (two / "report.md").read_text(encoding="utf-8")
    assert "**The log mixes replies decoded under different stops in coding (" in md
    assert f"stopped at their env's reply end and their role's budget: {n} episodes (trained {n})" in md
    assert "Replies: run to a stop token or the budget" in capsys.readouterr().out
    head = json.loads((two / "head.json").read_text(encoding="utf-8"))
    assert sorted((d["stop_at_reply_end"], d["role_budgets"], d["episodes"]) for d in head["decoding"]) == [
        (False, False, 2 * n + m), (True, True, n)]
    # Rows from before rows recorded them (or a scripted policy) say so; beside recorded rows they are one more kind.
    old = [{k: v for k, v in r.items() if k not in ("stop_at_reply_end", "role_budgets")} for r in coding]
    md = render.build_report(tmp_path / "old", rows=old).read_text(encoding="utf-8")
    assert "Replies: stops not recorded (nothing decoded here, or a log from before" in md
    assert report.mixed_decoding([*old[:n], *coding[n:]]) == ["coding"] and not report.mixed_decoding(old)


def test_main_rebuilds_and_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing"
    assert render.main([str(missing)]) == 2
    assert "no episode log" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "episodes.jsonl").write_text("", encoding="utf-8")
    assert render.main([str(empty)]) == 2
    assert "no usable episode rows" in capsys.readouterr().err
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "episodes.jsonl").write_text('{"condition": "tr', encoding="utf-8")
    assert render.main([str(torn)]) == 2
    assert "1 malformed line(s) skipped" in capsys.readouterr().err
    good = tmp_path / "good"
    good.mkdir()
    rows = [r for r in synthetic_rows() if r["env"] == "writing" and r["team_size"] == 2]
    (good / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert render.main([str(good)]) == 0
    out = capsys.readouterr().out
    # Size 2 only: trained turns 2 + parity -> 2.5, untrained 8 + parity -> 8.5; 8.5 / 2.5 = 3.4x fewer.
    assert "trained vs untrained" in out and "3.40x fewer" in out
    assert (good / "report.md").exists()


def test_echoed_scaffolding_is_logged_or_derived_from_the_logged_parts() -> None:
    """A part that copies an observation label (``Feedback on your draft:``) on a line of its own echoes the prompt;
    the same words inside a sentence do not. Logs written before the column existed get it from their texts."""
    from llm_marl_benchmarks.study.execution import echoed_scaffolding
    from llm_marl_envs.core.observation import CONTEXT_LABELS, FEEDBACK_LABEL, echoes_scaffolding

    echo = f"The council closed the bridge.\n\n{FEEDBACK_LABEL}\nThe council closed the bridge."
    assert echoes_scaffolding(echo) and all(echoes_scaffolding(f"x\n  {label}  \ny") for label in CONTEXT_LABELS)
    assert not echoes_scaffolding("The feedback on your draft: it was short.")
    # The cue's own sentences, wherever they sit, are copied prompt too (the untrained team's commonest echo).
    for copied in ("The bridge closed.\n\nWhen your part is final, end your reply with:",
                   "A detail. Turn 4 of 4. Notes to teammates go in . Your reply replaces your draft.",
                   "Turn 2 of 3. The bridge closed."):
        assert echoes_scaffolding(copied), copied
    assert not echoes_scaffolding("The last turn of the match came at 4 of 4 games; the final part was his.")
    assert echoed_scaffolding({"a": echo, "b": "A plain part."}) == 0.5 and echoed_scaffolding({}) is None
    old = episode("trained", "writing", 2, 0, 0)
    del old["echoed_scaffolding"]
    old["texts"] = {"concise": echo, "detailed": "Fine."}
    new = {**episode("trained", "writing", 2, 1, 0), "echoed_scaffolding": 0.0}
    rows = report.clean_rows([old, new]).rows
    assert [r["echoed_scaffolding"] for r in rows] == [0.5, 0.0] and "echoed_scaffolding" not in old
    assert "echoed_scaffolding" in render.DEGENERACY_METRICS


def test_the_three_way_headline_pairs_by_task_and_seed_and_keeps_team_return_between_teams() -> None:
    rows = synthetic_rows()
    records = {(r["env"], r["team_size"], r["metric"]): r for r in report.three_way(rows)}
    # Critical-path tokens, writing, size 2: trained 40·turns, single 100·turns, paired over 3 tasks x 2 seeds.
    cp = records[("writing", 2, "critical_path_tokens")]
    key = [(t, s) for t in range(3) for s in SEEDS]
    trained = [40 * (2 + (t + s) % 2) for t, s in key]
    single = [100 * (11 + t) for t, s in key]
    ref = sps.ttest_rel(trained, single)
    result = cp["pairs"][("trained", "single")]
    assert result.test == "paired t" and result.n_a == 6
    assert result.diff == pytest.approx(np.mean(np.subtract(trained, single)))
    assert result.t == pytest.approx(ref.statistic) and result.p == pytest.approx(ref.pvalue)
    assert cp["means"]["single"].mean == pytest.approx(np.mean(single))
    assert set(cp["pairs"]) == {("trained", "untrained"), ("trained", "single"), ("untrained", "single")}
    # Team return: a solo agent is paid another formula, so only the two teams are compared.
    team_return = records[("coding", 3, "team_return")]
    assert set(team_return["pairs"]) == {("trained", "untrained")} and set(team_return["means"]) == {
        "trained", "untrained"}
    # Writing has no pass rate: no row for it there; coding has.
    assert ("writing", 2, "pass_rate") not in records and ("coding", 2, "pass_rate") in records
    text = render.format_three_way(rows)
    assert "writing, team size 2 (episodes: trained 6, untrained 6, single 6):" in text
    line = next(r for r in text.split("coding, team size 3")[1].splitlines() if r.startswith("| team return"))
    assert line.count("— (teams only)") == 3  # single's mean, trained − single, untrained − single
    assert "| trained − untrained | trained − single | untrained − single |" in text


def test_the_headline_sets_the_trained_team_against_single_and_single_best_of_n(tmp_path: Path) -> None:
    """Where the study ran the one agent with the team's sampling budget (coding), the headline shows the trained team
    against it beside ``single``, paired by task and seed, and team return stays between teams."""
    coding = [r for r in synthetic_rows() if r["env"] == "coding"]
    # The best-of-n agent: single's episodes with a higher pass rate (+0.1 on every task and seed).
    best = [{**r, "condition": "single_best_of_n", "key": r["key"].replace("single/", "single_best_of_n/"),
             "pass_rate": r["pass_rate"] + 0.1} for r in coding if r["condition"] == "single"]
    rows = coding + best
    records = {(r["team_size"], r["metric"]): r for r in report.three_way(rows)}
    pass_rate = records[(2, "pass_rate")]
    assert list(pass_rate["means"]) == ["trained", "untrained", "single", "single_best_of_n"]
    result = pass_rate["pairs"][("trained", "single_best_of_n")]
    single = pass_rate["pairs"][("trained", "single")]
    assert result.test == "paired t" and result.n_a == 6
    assert result.diff == pytest.approx(single.diff - 0.1)
    assert pass_rate["pairs"][("single", "single_best_of_n")].diff == pytest.approx(-0.1)
    assert set(records[(2, "team_return")]["pairs"]) == {("trained", "untrained")}
    md = render.build_report(tmp_path, rows=rows).read_text(encoding="utf-8")
    assert "## Headline: trained vs untrained vs single vs single_best_of_n (mean" in md
    assert "| trained − single | trained − single_best_of_n |" in md
    assert "coding, team size 2 (episodes: trained 6, untrained 6, single 6, single_best_of_n 6):" in md
    head = report.headline(rows)
    assert "single_best_of_n" in head["baselines"] and head["primary"] == "untrained"
    # Without it, the headline is the seeds' three, as before.
    assert "## Headline: trained vs untrained vs single (mean" in render.build_report(
        tmp_path / "seeds", rows=coding).read_text(encoding="utf-8")


def test_a_size_without_a_trained_team_compares_the_others_and_pools_only_where_both_ran(tmp_path: Path) -> None:
    rows = [r for r in synthetic_rows() if not (r["condition"] == "trained" and r["team_size"] == 3)]
    records = [r for r in report.three_way(rows) if r["team_size"] == 3]
    assert records and all(set(r["pairs"]) <= {("untrained", "single")} for r in records)
    assert all("trained" not in r["means"] for r in records)
    # Trained vs untrained, pooled over sizes: only size 2 is shared, so the test stays paired on its 6 pairs
    # instead of mixing in untrained's size-3 episodes (a Welch test on unmatched cells).
    pooled = [r for r in report.compare_conditions(rows)
              if r["team_size"] == report.POOLED and r["condition_b"] == "untrained" and r["env"] == "writing"]
    assert pooled and all(r["test"] == "paired t" and r["n_a"] == 6 for r in pooled)
    md = render.build_report(tmp_path, rows=rows).read_text(encoding="utf-8")
    assert "No `trained` episodes for writing with 3 agents, coding with 3 agents" in md


def test_the_turn_distribution_counts_endings_per_condition() -> None:
    rows = [r for r in synthetic_rows() if r["env"] == "writing" and r["team_size"] == 2]
    rows = [{**r, "turn_budget": 3, "end_reason": "converged" if r["turns"] < 3 else "max_turns"} for r in rows]
    by = {r["condition"]: r for r in report.turn_distribution(rows)}
    # Trained: 2 + parity over (t, s): parity 0,1,1,0,0,1 -> three episodes of 2 turns, three of 3.
    assert by["trained"]["counts"] == {1: 0, 2: 3, 3: 3} and by["trained"]["ended_early"] == pytest.approx(0.5)
    assert by["trained"]["end_reasons"] == {"converged": 3, "max_turns": 3} and by["trained"]["mean"] == 2.5
    assert by["untrained"]["ended_early"] == 0.0 and by["untrained"]["budget"] == 3
    md = render._turns_markdown(rows)
    assert "| 2 | trained | 6 | 0 | 3 | 3 |" in md and "50 % (budget 3)" in md


def test_the_candidate_split_explains_a_team_against_best_of_n_term_by_term(tmp_path: Path) -> None:
    """Turn 1 of a coding team of 2 and of one agent's best of 2, each task with 4 held-out tests. Over the six pairs
    the team's coders score (1, 1), best of 2's samples (2, 0): the same mean, but the team's second candidate adds
    nothing and best of 2's adds 1/4 a pair. The team sends its better (tie) candidate, best of 2 the worse sample on
    t0 (its visible tests missed): the sent program's difference is the sum of the three terms' differences, and
    the shares of episodes with 0, 1 or 2 passing candidates are counted."""
    coding = [r for r in synthetic_rows() if r["env"] == "coding" and r["team_size"] == 2]
    rows = []
    for r in coding:
        if r["condition"] == "trained":
            rows.append({**r, "turn_tests": [{"turn": 1, "visible": 1, "held_out": 1, "held_out_total": 4,
                                              "candidates": {"coder_2": [1, 1], "coder_1": [1, 1]}}]})
        elif r["condition"] == "single":
            sent = 0 if r["task"] == "t0" else 2
            rows.append({**r, "condition": "single_best_of_n", "key": r["key"].replace("single/", "bo2/"),
                         "selections": [{"turn": 1, "chosen": 1 if sent == 0 else 0, "visible_passed": [1, 1],
                                         "held_out_passed": [2, 0]}],
                         "turn_tests": [{"turn": 1, "visible": 1, "held_out": sent, "held_out_total": 4}]})
    (record,) = report.candidate_split(rows)
    assert (record["env"], record["team_size"], record["condition"], record["pairs"]) == ("coding", 2, "trained", 6)
    terms = record["terms"]
    assert terms["one_candidate"].mean_a == pytest.approx(0.25) and terms["one_candidate"].mean_b == pytest.approx(0.25)
    assert terms["best_candidate_gain"].diff == pytest.approx(-0.25)
    # Best of 2 sent the 0-test sample on t0's two seeds: it gave up 2/4 there, 0 elsewhere.
    assert terms["choice_keeps"].mean_a == 0 and terms["choice_keeps"].mean_b == pytest.approx(-0.5 * 2 / 6)
    assert terms["sent"].diff == pytest.approx(sum(terms[t].diff for t in report.CANDIDATE_TERMS[:3]))
    assert terms["sent"].mean_a == pytest.approx(0.25) and terms["sent"].mean_b == pytest.approx(0.5 * 4 / 6)
    assert record["passing"] == {"trained": {2: 1.0}, "single_best_of_n": {1: 1.0}}
    # The report shows it; a log without per-candidate counts (older best-of-n rows) shows no such section.
    md = render.build_report(tmp_path / "with", rows=rows).read_text(encoding="utf-8")
    assert "## Candidates on turn 1: a team against one agent's best of n" in md
    assert "| the sent program | 0.250 | 0.333 |" in md
    bare = [{**r, "selections": [{k: v for k, v in s.items() if k != "held_out_passed"} for s in r["selections"]]}
            if r["condition"] == "single_best_of_n" else r for r in rows]
    assert report.candidate_split(bare) == []
    assert "## Candidates on turn 1" not in render.build_report(tmp_path / "bare", rows=bare).read_text("utf-8")
    # Malformed counts are skipped, not a crash: a row whose candidates are not [visible, held_out] pairs, or whose
    # counts exceed the total, reads as no candidates.
    assert report.turn_one_candidates({"turn_tests": [{"held_out": 1, "held_out_total": 4,
                                                       "candidates": {"a": 1, "b": [1, 1]}}]}) is None
    assert report.turn_one_candidates({"turn_tests": [{"held_out": 1, "held_out_total": 4}],
                                       "selections": [{"held_out_passed": [5, 0]}]}) is None
    assert report.turn_one_candidates({"turn_tests": "broken"}) is None
    # An older log without held_out_total reads with the totals given.
    untotalled = [{**r, "turn_tests": [{k: v for k, v in t.items() if k != "held_out_total"} for t in r["turn_tests"]]}
                  for r in rows]
    assert report.candidate_split(untotalled) == []
    (again,) = report.candidate_split(untotalled, {task: 4 for task in TASKS})
    assert again["terms"]["sent"].diff == pytest.approx(terms["sent"].diff)


def test_compare_pairs_keys_every_applicable_comparison_and_prints_a_line_each(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``compare_pairs`` (the results folders' compare scripts): each (a, b) × metric as ``compare_pair`` gives it,
    keyed ``"a - b: metric"``; a comparison that does not apply (writing has no pass rate) is left out, not filled."""
    rows = synthetic_rows()
    pairs = (("trained", "single"), ("trained", "untrained"))
    out = report.compare_pairs(rows, pairs, ("critical_path_tokens", "pass_rate"), env="writing", size=2)
    assert set(out) == {"trained - single: critical_path_tokens", "trained - untrained: critical_path_tokens"}
    key = [(t, s) for t in range(3) for s in SEEDS]
    trained = [40 * (2 + (t + s) % 2) for t, s in key]
    single = [100 * (11 + t) for t, s in key]
    result = out["trained - single: critical_path_tokens"]
    assert result["test"] == "paired t" and result["n_a"] == 6
    assert result["diff"] == pytest.approx(np.mean(np.subtract(trained, single)))
    assert result["p"] == pytest.approx(sps.ttest_rel(trained, single).pvalue)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and printed[0].startswith("trained − single, critical_path_tokens: ")
    assert report.compare_pairs(rows, pairs, ("pass_rate",), env="coding", size=2, echo=False).keys() == {
        "trained - single: pass_rate", "trained - untrained: pass_rate"}
    assert capsys.readouterr().out == ""


def test_quorum_makeup_counts_the_members_finished_in_each_quorum_ending() -> None:
    """``quorum_makeup`` (who made up a team of 4's quorum): only episodes ended by the quorum count, an agent counts
    once it has a finishing turn (None: not finished), and a log without the ``finished`` column is an error that
    names the row, not a quiet "nobody finished"."""
    coders = ("coder_1", "coder_2")

    def row(key: str, end: str, **turns: int | None) -> dict[str, Any]:
        every = dict.fromkeys(("coder_1", "coder_2", "tester", "verifier"))
        return {"key": key, "end_reason": end, "finished": {**every, **turns}}

    rows = [
        row("a", "quorum_done", coder_1=2, coder_2=2),
        row("b", "quorum_done", coder_1=1, tester=2),
        row("c", "quorum_done", tester=2, verifier=3),
        row("d", "quorum_done", coder_2=3, verifier=1),
        row("e", "solved", coder_1=1, coder_2=1),  # ended by the tests, not the quorum: not counted
        row("f", "max_turns"),
    ]
    assert report.finished_agents(rows[1]) == frozenset({"coder_1", "tester"})
    assert report.quorum_makeup(rows, coders) == {0: 1, 1: 2, 2: 1}
    assert list(report.quorum_makeup(rows, coders)) == [0, 1, 2]
    assert report.quorum_makeup(rows, ("tester", "verifier")) == {0: 1, 1: 2, 2: 1}
    assert report.quorum_makeup(rows[4:], coders) == {}
    old = {"key": "g", "end_reason": "quorum_done"}
    with pytest.raises(ValueError, match="g: no 'finished' column"):
        report.quorum_makeup([*rows, old], coders)
    assert report.quorum_makeup([*rows, {**old, "end_reason": "max_turns"}], coders) == {0: 1, 1: 2, 2: 1}
