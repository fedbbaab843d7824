"""The study's statistics against examples worked by hand (arithmetic in the comments).

The p-values use t distributions with 2 or 3 degrees of freedom because those have closed-form CDFs, so the
expected values below come from arithmetic, not from the scipy call under test:

- df = 2: F(t) = 1/2 + t / (2·√(2 + t²)), so the two-sided p = 1 − |t| / √(2 + t²) and the 97.5 % quantile solves
  t/√(2 + t²) = 0.95, i.e. t² = 0.9025·2 / 0.0975 = 18.5128..., t = 4.302653.
- df = 3: with θ = atan(|t|/√3), the two-sided p = 1 − (2/π)·(θ + sin θ cos θ); the 97.5 % quantile is the table
  value 3.182446.
"""

from __future__ import annotations

import math

import pytest
from scipy import stats as sps

from llm_marl_benchmarks.study import stats

T_975_DF2 = math.sqrt(0.9025 * 2 / 0.0975)  # 4.302653, see the module docstring
T_975_DF3 = 3.182446  # Student t table, df = 3, two-sided 95 %


def p_df2(t: float) -> float:
    """Two-sided p for df = 2 from the closed-form CDF."""
    return 1 - abs(t) / math.sqrt(2 + t * t)


def p_df3(t: float) -> float:
    """Two-sided p for df = 3 from the closed-form CDF."""
    theta = math.atan(abs(t) / math.sqrt(3))
    return 1 - (2 / math.pi) * (theta + math.sin(theta) * math.cos(theta))


def test_closed_form_helpers_agree_with_the_t_table() -> None:
    # Table values: df=2 two-sided 0.05 at t=4.303; df=3 two-sided 0.05 at t=3.182, 0.10 at t=2.353.
    assert abs(T_975_DF2 - 4.302653) < 1e-6
    assert p_df2(4.302653) == pytest.approx(0.05, abs=1e-6)
    assert p_df3(3.182446) == pytest.approx(0.05, abs=1e-6)
    assert p_df3(2.353363) == pytest.approx(0.10, abs=1e-6)


def test_mean_ci_by_hand() -> None:
    # [1, 2, 3]: mean 2, s² = (1 + 0 + 1)/2 = 1, s = 1, se = 1/√3 = 0.577350;
    # half-width = t_{0.975, 2} · se = 4.302653 · 0.577350 = 2.484138 -> [-0.484138, 4.484138].
    ci = stats.mean_ci([1, 2, 3])
    assert (ci.n, ci.mean, ci.sd) == (3, 2.0, 1.0)
    assert ci.low == pytest.approx(2 - T_975_DF2 / math.sqrt(3), abs=1e-9)
    assert ci.high == pytest.approx(2 + T_975_DF2 / math.sqrt(3), abs=1e-9)
    assert ci.low == pytest.approx(-0.484138, abs=1e-6)
    assert ci.half_width == pytest.approx(2.484138, abs=1e-6)


def test_mean_ci_edge_cases_and_missing_values() -> None:
    # n = 1: a mean but no variance, so no interval.
    one = stats.mean_ci([0.7])
    assert one.n == 1 and one.mean == 0.7
    assert math.isnan(one.low) and math.isnan(one.high) and math.isnan(one.sd)
    # n = 0 (everything missing): nothing at all.
    none = stats.mean_ci([None, None])
    assert none.n == 0 and math.isnan(none.mean)
    # Zero spread: the interval collapses onto the mean instead of crashing.
    flat = stats.mean_ci([0.5, 0.5, 0.5])
    assert (flat.low, flat.mean, flat.high) == (0.5, 0.5, 0.5)
    # None is dropped, not counted as 0: mean of [1, 3] is 2 (it would be 4/3 with a zero).
    assert stats.mean_ci([1.0, None, 3.0]).mean == 2.0
    assert stats.mean_ci([1.0, None, 3.0]).n == 2
    # Booleans average as rates: 2 successes out of 4.
    assert stats.mean_ci([True, False, True, False]).mean == 0.5
    with pytest.raises(ValueError):
        stats.mean_ci([1, 2], confidence=1.0)


def test_paired_t_by_hand() -> None:
    # a = [2, 5, 9], b = [1, 2, 4]: differences d = [1, 3, 5], d̄ = 3,
    # s_d² = ((1-3)² + 0 + (5-3)²)/2 = 4, s_d = 2, t = 3 / (2/√3) = 1.5·√3 = 2.598076, dof = 2,
    # p = 1 − t/√(2 + t²) = 1 − √(6.75/8.75) = 1 − √(27/35) = 0.121690; d_z = d̄ / s_d = 1.5.
    r = stats.compare([2, 5, 9], [1, 2, 4], paired=True)
    assert r.test == "paired t" and r.effect_name == "d_z"
    assert (r.n_a, r.n_b) == (3, 3)
    assert r.mean_a == pytest.approx(16 / 3) and r.mean_b == pytest.approx(7 / 3)
    assert r.diff == pytest.approx(3.0)
    assert r.t == pytest.approx(1.5 * math.sqrt(3), abs=1e-12)
    assert r.dof == 2
    assert r.p == pytest.approx(1 - math.sqrt(27 / 35), abs=1e-9)
    assert r.p == pytest.approx(0.121690, abs=1e-6)
    assert r.effect_size == pytest.approx(1.5)
    assert r.significant() is False  # 0.12 > 0.05
    # An independent implementation agrees (scipy's paired test).
    ref = sps.ttest_rel([2, 5, 9], [1, 2, 4])
    assert r.t == pytest.approx(ref.statistic) and r.p == pytest.approx(ref.pvalue)


def test_welch_t_by_hand_equal_sizes() -> None:
    # a = [0, 2], b = [3, 5]: means 1 and 4, s_a² = s_b² = 2, se = √(2/2 + 2/2) = √2,
    # t = (1 − 4)/√2 = −2.121320; dof = (1 + 1)² / (1²/1 + 1²/1) = 2;
    # p = 1 − |t|/√(2 + t²) = 1 − √(4.5/6.5) = 1 − 3/√13 = 0.167950;
    # pooled s_p = √((1·2 + 1·2)/2) = √2, d = −3/√2 = −2.121320.
    r = stats.compare([0, 2], [3, 5], paired=False)
    assert r.test == "Welch t" and r.effect_name == "d"
    assert r.t == pytest.approx(-3 / math.sqrt(2), abs=1e-12)
    assert r.dof == pytest.approx(2.0)
    assert r.p == pytest.approx(1 - 3 / math.sqrt(13), abs=1e-9)
    assert r.p == pytest.approx(p_df2(r.t), abs=1e-12)
    assert r.effect_size == pytest.approx(-3 / math.sqrt(2))


def test_welch_t_by_hand_unequal_variances() -> None:
    # a = [1, 2, 3] (mean 2, s² = 1), b = [2, 4, 6] (mean 4, s² = 4):
    # s_a²/n_a = 1/3, s_b²/n_b = 4/3, t = −2/√(5/3) = −1.549193;
    # dof = (5/3)² / ((1/3)²/2 + (4/3)²/2) = (25/9)/(17/18) = 50/17 = 2.941176;
    # table: df≈3, |t| = 1.549 < 1.638 (two-sided 0.20) and > 0.765 (two-sided 0.50), so 0.20 < p < 0.50;
    # pooled s_p = √((2·1 + 2·4)/4) = √2.5, d = −2/√2.5 = −1.264911.
    r = stats.compare([1, 2, 3], [2, 4, 6], paired=False)
    assert r.t == pytest.approx(-2 / math.sqrt(5 / 3), abs=1e-12)
    assert r.dof == pytest.approx(50 / 17, abs=1e-12)
    assert 0.20 < r.p < 0.50
    assert r.effect_size == pytest.approx(-2 / math.sqrt(2.5), abs=1e-12)
    ref = sps.ttest_ind([1, 2, 3], [2, 4, 6], equal_var=False)
    assert r.t == pytest.approx(ref.statistic) and r.p == pytest.approx(ref.pvalue)


def test_welch_t_by_hand_unequal_sizes_uses_the_pooled_sd_for_d() -> None:
    # a = [1, 3] (mean 2, s² = 2), b = [4, 6, 8, 10] (mean 7, s² = (9 + 1 + 1 + 9)/3 = 20/3):
    # se² = 2/2 + (20/3)/4 = 8/3, t = −5/√(8/3) = −3.061862;
    # dof = (8/3)² / (1²/1 + (5/3)²/3) = (64/9)/(52/27) = 1728/468 = 3.692308;
    # pooled s_p² = (1·2 + 3·20/3)/(2 + 4 − 2) = 22/4 = 5.5, d = −5/√5.5 = −2.132007
    # (the unweighted √((2 + 20/3)/2) would give d = −2.402, so unequal sizes tell the two apart).
    r = stats.compare([1, 3], [4, 6, 8, 10], paired=False)
    assert r.t == pytest.approx(-5 / math.sqrt(8 / 3), abs=1e-12)
    assert r.dof == pytest.approx(1728 / 468, abs=1e-12)
    assert r.effect_size == pytest.approx(-5 / math.sqrt(5.5), abs=1e-12)
    assert (r.n_a, r.n_b) == (2, 4)


def test_significance_at_the_table_boundary() -> None:
    # Paired differences [4, 5, 6] -> d̄ = 5, s_d = 1, t = 5·√3 = 8.660 > 4.303 (df 2, 0.05): significant;
    # p = 1 − t/√(2 + t²) = 1 − √(75/77) = 0.013072.
    r = stats.compare([5, 6, 7], [1, 1, 1], paired=True)
    assert r.p == pytest.approx(1 - math.sqrt(75 / 77), abs=1e-9)
    assert r.significant() is True


def test_paired_and_welch_differ_on_the_same_numbers() -> None:
    # Pairing removes the between-task spread. a = [2, 6, 10], b = [0, 4, 7]:
    # paired: d = [2, 2, 3], d̄ = 7/3, s_d = √(((−1/3)² + (−1/3)² + (2/3)²)/2) = √(1/3), se = s_d/√3 = 1/3,
    # t = 7, dof 2, p = 1 − 7/√51 = 0.019804 < 0.05: significant.
    paired = stats.compare([2, 6, 10], [0, 4, 7], paired=True)
    assert paired.t == pytest.approx(7.0) and paired.p == pytest.approx(1 - 7 / math.sqrt(51), abs=1e-9)
    assert paired.significant() is True
    # Welch on the same numbers: s_a² = 16, s_b² = ((11/3)² + (1/3)² + (10/3)²)/2 = 37/3,
    # se² = 16/3 + 37/9 = 85/9, t = (7/3)/√(85/9) = 7/√85 = 0.759257;
    # dof = (85/9)² / ((16/3)²/2 + (37/9)²/2) = 14450/3673 = 3.934; table (df 4): |t| < 1.533 (two-sided 0.20),
    # so p > 0.20: not significant.
    welch = stats.compare([2, 6, 10], [0, 4, 7], paired=False)
    assert welch.t == pytest.approx(7 / math.sqrt(85)) and welch.dof == pytest.approx(14450 / 3673)
    assert welch.p > 0.20 and welch.significant() is False
    # Constant pairwise differences: the paired test is undefined (zero variance), stated in the note.
    flat = stats.compare([5, 6, 7], [0, 1, 2], paired=True)
    assert math.isnan(flat.t) and "zero variance" in flat.note


def test_paired_drops_incomplete_pairs_and_rejects_misaligned_input() -> None:
    # The pair with a None is dropped; what is left is the hand example above (t = 1.5·√3).
    r = stats.compare([2, 5, None, 9], [1, 2, 7, 4], paired=True)
    assert r.n_a == 3 and r.t == pytest.approx(1.5 * math.sqrt(3))
    with pytest.raises(ValueError):
        stats.compare([1, 2, 3], [1, 2], paired=True)


def test_welch_excludes_none_rather_than_counting_zero() -> None:
    # b = [2, None, 4, None, 6] is b = [2, 4, 6] (the unequal-variance example), not [2, 0, 4, 0, 6].
    r = stats.compare([1, 2, 3], [2, None, 4, None, 6], paired=False)
    assert r.n_b == 3 and r.mean_b == 4.0
    assert r.t == pytest.approx(-2 / math.sqrt(5 / 3))


def test_undefined_cases_are_nan_with_a_reason() -> None:
    # Zero variance in both groups (e.g. every episode succeeded in one condition, none in the other).
    flat = stats.compare([1, 1, 1], [0, 0, 0], paired=False)
    assert flat.diff == 1.0 and math.isnan(flat.t) and math.isnan(flat.p) and math.isnan(flat.effect_size)
    assert "zero variance" in flat.note
    assert flat.significant() is None  # unknown, not "not significant"
    # Too few values.
    small = stats.compare([1.0], [2.0, 3.0], paired=False)
    assert math.isnan(small.p) and "too few" in small.note
    pair = stats.compare([1.0, None], [2.0, 3.0], paired=True)
    assert pair.n_a == 1 and math.isnan(pair.p) and "too few" in pair.note
    empty = stats.compare([None], [None], paired=False)
    assert empty.n_a == 0 and math.isnan(empty.mean_a)
    # Differences constant up to rounding (0.3 − 0.1 = 0.19999999999999998 but 1.3 − 1.1 = 0.19999999999999996):
    # s_d ≈ 3e-17 is noise, not variance; without the tolerance t would be ~1e16 and p = 0.
    noisy = stats.compare([0.3, 0.7, 1.3], [0.1, 0.5, 1.1], paired=True)
    assert math.isnan(noisy.t) and "zero variance" in noisy.note
    # One group constant, the other not: still defined.
    one_flat = stats.compare([1, 1, 1], [0, 1, 2], paired=False)
    assert not math.isnan(one_flat.p)


def test_min_max_normalise() -> None:
    # (x − 2)/(10 − 2): 10 -> 1, 8 -> 0.75, 9 -> 0.875, 4 -> 0.25, 2 -> 0.
    assert stats.min_max_normalise([10, 8, 9, 4, 2]) == [1.0, 0.75, 0.875, 0.25, 0.0]
    assert stats.min_max_normalise([3, 3]) == [0.0, 0.0]
    assert stats.min_max_normalise([]) == []


def test_regression_by_hand() -> None:
    # Raw C = [0, 1, 2, 3, 4] -> x = [0, .25, .5, .75, 1]; raw T = [10, 8, 9, 4, 2] -> y = [1, .75, .875, .25, 0].
    # x̄ = 0.5, ȳ = 2.875/5 = 0.575; Sxx = .25 + .0625 + 0 + .0625 + .25 = 0.625;
    # Sxy = (−.5)(.425) + (−.25)(.175) + 0 + (.25)(−.325) + (.5)(−.575) = −0.625;
    # β = Sxy/Sxx = −1, α = ȳ − β·x̄ = 1.075.
    # Residuals y − (1.075 − x) = [−.075, −.075, .3, −.075, −.075]; SSE = 4·.005625 + .09 = 0.1125;
    # SST = .180625 + .030625 + .09 + .105625 + .330625 = 0.7375; R² = 1 − .1125/.7375 = 0.847458.
    # s² = SSE/(n − 2) = 0.0375; se(β) = √(s²/Sxx) = √0.06 = 0.244949; se(α) = √(s²·(1/5 + .25/.625)) = 0.15.
    # 95 % CIs with t_{0.975,3} = 3.182446: β ∈ −1 ± 0.779537, α ∈ 1.075 ± 0.477367.
    # t_β = −1/0.244949 = −4.082483, p (df 3) = 0.026548.
    fit = stats.regression_turns_on_consistency([10, 8, 9, 4, 2], [0, 1, 2, 3, 4])
    assert fit.n == 5 and fit.note == ""
    assert fit.beta == pytest.approx(-1.0, abs=1e-12)
    assert fit.alpha == pytest.approx(1.075, abs=1e-12)
    assert fit.r2 == pytest.approx(1 - 0.1125 / 0.7375, abs=1e-12)
    assert fit.beta_ci == pytest.approx((-1 - T_975_DF3 * math.sqrt(0.06), -1 + T_975_DF3 * math.sqrt(0.06)), abs=1e-5)
    assert fit.alpha_ci == pytest.approx((1.075 - T_975_DF3 * 0.15, 1.075 + T_975_DF3 * 0.15), abs=1e-5)
    assert fit.p_beta == pytest.approx(p_df3(-1 / math.sqrt(0.06)), abs=1e-9)
    assert fit.p_beta == pytest.approx(0.026548, abs=1e-6)


def test_regression_is_scale_free_and_drops_missing_consistency() -> None:
    # An affine change of the raw scales leaves the normalised fit unchanged.
    scaled = stats.regression_turns_on_consistency([100, 80, 90, 40, 20], [0.1, 0.2, 0.3, 0.4, 0.5])
    assert scaled.beta == pytest.approx(-1.0) and scaled.alpha == pytest.approx(1.075)
    # A single-agent episode (consistency None) is dropped, not fitted at C = 0.
    with_single = stats.regression_turns_on_consistency([10, 8, 9, 4, 2, 1], [0, 1, 2, 3, 4, None])
    assert with_single.n == 5 and with_single.beta == pytest.approx(-1.0)


def test_regression_undefined_cases() -> None:
    few = stats.regression_turns_on_consistency([1, 2], [0.1, 0.2])
    assert few.n == 2 and math.isnan(few.beta) and "too few" in few.note
    flat_c = stats.regression_turns_on_consistency([1, 2, 3], [0.5, 0.5, 0.5])
    assert math.isnan(flat_c.beta) and "consistency is constant" in flat_c.note
    flat_t = stats.regression_turns_on_consistency([4, 4, 4], [0.1, 0.2, 0.3])
    assert math.isnan(flat_t.beta) and "turns are constant" in flat_t.note
    with pytest.raises(ValueError):
        stats.regression_turns_on_consistency([1, 2, 3], [0.1, 0.2])
    # A perfect fit: β = −1 exactly, R² = 1, no crash on the zero residual variance.
    exact = stats.regression_turns_on_consistency([3, 2, 1], [0, 1, 2])
    assert exact.beta == pytest.approx(-1.0) and exact.r2 == pytest.approx(1.0)


def test_relative_changes_and_headline_helpers() -> None:
    # (0.597 − 0.5)/0.5 = 0.194 -> +19.4 %.
    assert stats.relative_change(0.597, 0.5) == pytest.approx(0.194)
    assert stats.consistency_change_pct(0.597, 0.5) == pytest.approx(19.4)
    # 9.3 turns -> 3 turns is 9.3/3 = 3.1x fewer.
    assert stats.turn_reduction_factor(3.0, 9.3) == pytest.approx(3.1)
    # Pass rate 0.5 -> 0.6085: relative (0.6085 − 0.5)/0.5 = +21.7 %, but only +10.85 percentage points.
    rel, points = stats.pass_rate_change(0.6085, 0.5)
    assert rel == pytest.approx(21.7) and points == pytest.approx(10.85)
    # Undefined: from zero, or with a missing side.
    assert math.isnan(stats.relative_change(1.0, 0.0))
    assert math.isnan(stats.turn_reduction_factor(0.0, 5.0))
    assert math.isnan(stats.consistency_change_pct(None, 0.5))  # type: ignore[arg-type]
    rel0, points0 = stats.pass_rate_change(0.2, 0.0)
    assert math.isnan(rel0) and points0 == pytest.approx(20.0)
    # The paper's figures the headline reports.
    assert (stats.PAPER_TURN_REDUCTION, stats.PAPER_CONSISTENCY_CHANGE_PCT, stats.PAPER_PASS_RATE_CHANGE_PCT) == (
        3.1,
        19.4,
        21.7,
    )
