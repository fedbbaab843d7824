"""The study's statistics: means with t-based confidence intervals, two-sided t-tests with effect sizes, the
turns-on-consistency regression and the relative changes the headline reports.

Small pure functions over plain sequences of numbers; nothing here reads the episode log (``report.py`` does).
``None`` and NaN values are *missing* (a single agent has no consistency) and are dropped, never counted as 0.
Where a statistic is undefined (fewer than two values, zero variance) it is NaN and the result's ``note`` says why,
so a report can print the reason instead of crashing or silently showing a number.

Formula sources, cited again where each is used:

- Student's t interval for a mean: any statistics text, e.g. NIST/SEMATECH e-Handbook of Statistical Methods,
  §7.2.2.1 "Confidence limits for the mean".
- Welch's t-test and the Welch–Satterthwaite degrees of freedom: B. L. Welch (1947), "The generalization of
  'Student's' problem when several different population variances are involved", Biometrika 34(1/2):28–35;
  F. E. Satterthwaite (1946), Biometrics Bulletin 2(6):110–114.
- Paired t-test: Student (1908), "The probable error of a mean", Biometrika 6(1):1–25 (the test on differences).
- Cohen's d with the pooled standard deviation and Cohen's d_z for paired designs: J. Cohen (1988), Statistical
  Power Analysis for the Behavioral Sciences, 2nd ed., §2.2 and §2.3; D. Lakens (2013), "Calculating and reporting
  effect sizes to facilitate cumulative science", Frontiers in Psychology 4:863 (d_s and d_z).
- Ordinary least squares, coefficient standard errors and R²: statsmodels' ``OLS`` (Seabold & Perktold, 2010).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

__all__ = [
    "PAPER_CONSISTENCY_CHANGE_PCT",
    "PAPER_PASS_RATE_CHANGE_PCT",
    "PAPER_TURN_REDUCTION",
    "Comparison",
    "MeanCI",
    "Regression",
    "compare",
    "consistency_change_pct",
    "mean_ci",
    "min_max_normalise",
    "pass_rate_change",
    "present",
    "regression_turns_on_consistency",
    "relative_change",
    "turn_reduction_factor",
]

# The seeds' paper's headline figures (trained team against its baselines), reported next to ours.
PAPER_TURN_REDUCTION = 3.1  # "3.1x fewer turns"
PAPER_CONSISTENCY_CHANGE_PCT = 19.4  # "+19.4 % coordination consistency" (similarity-based consistency)
PAPER_PASS_RATE_CHANGE_PCT = 21.7  # "+21.7 % unit-test pass rate"

NAN = float("nan")


def _is_missing(value: object) -> bool:
    """True for ``None`` and NaN: values a statistic must skip rather than count."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def present(values: Sequence[float | bool | None]) -> list[float]:
    """The values that are not ``None``/NaN, as floats (``True``/``False`` become 1.0/0.0 so success rates average).

    Missing values are dropped, never replaced by 0: a single agent's consistency is undefined, not zero.
    """
    return [float(v) for v in values if not _is_missing(v)]


@dataclass(frozen=True)
class MeanCI:
    """A sample mean with its two-sided t-based confidence interval.

    ``low``/``high`` are NaN when ``n < 2`` (no sample variance), and ``mean`` is NaN when ``n == 0``.
    """

    n: int
    mean: float
    sd: float
    low: float
    high: float
    confidence: float

    @property
    def half_width(self) -> float:
        """Half the interval's width (NaN when the interval is undefined)."""
        return (self.high - self.low) / 2.0


def mean_ci(values: Sequence[float | bool | None], confidence: float = 0.95) -> MeanCI:
    """Mean and Student-t confidence interval ``x̄ ± t_{(1+c)/2, n-1} · s / √n`` of the present values.

    Source: NIST/SEMATECH e-Handbook of Statistical Methods, §7.2.2.1 (confidence limits for the mean), with ``s``
    the sample standard deviation (denominator ``n - 1``). ``None``/NaN values are dropped first. With one value the
    interval is NaN (the variance needs two); with zero spread it collapses to the mean (half-width 0).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    xs = present(values)
    n = len(xs)
    if n == 0:
        return MeanCI(0, NAN, NAN, NAN, NAN, confidence)
    mean = float(np.mean(xs))
    if n == 1:
        return MeanCI(1, mean, NAN, NAN, NAN, confidence)
    sd = float(np.std(xs, ddof=1))
    half = _t_quantile(n - 1, confidence) * sd / math.sqrt(n)
    return MeanCI(n, mean, sd, mean - half, mean + half, confidence)


@dataclass(frozen=True)
class Comparison:
    """The result of a two-sided t-test of ``a`` against ``b``.

    ``diff`` is ``mean_a - mean_b`` (for a paired test this equals the mean of the pairwise differences).
    ``effect_size`` is Cohen's d (pooled SD) for Welch's test and Cohen's d_z for the paired test; its name is in
    ``effect_name``. ``t``, ``p``, ``dof`` and ``effect_size`` are NaN when undefined, with the reason in ``note``.
    For a paired test ``n_a == n_b`` is the number of complete pairs.
    """

    test: str  # "paired t" or "Welch t"
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    diff: float
    t: float
    p: float
    dof: float
    effect_size: float
    effect_name: str  # "d_z" or "d"
    note: str = ""
    diff_ci_low: float = NAN
    """Lower end of the 95 % t interval of ``diff`` (paired: ``d̄ ± t_{n−1} s_d/√n``; Welch: ``± t_dof·SE``); equal to
    ``diff`` when every difference is the same (zero variance), NaN with fewer than two values."""
    diff_ci_high: float = NAN

    def significant(self, alpha: float = 0.05) -> bool | None:
        """``p < alpha``, or ``None`` when the test is undefined (NaN p): unknown is not "not significant"."""
        return None if math.isnan(self.p) else self.p < alpha


# Spread below this fraction of the data's magnitude is rounding noise, not variance: 0.3 − 0.1 and 1.3 − 1.1 differ
# in the last bits, and a paired test on such "constant" differences would report t ~ 1e16 and p = 0.
_REL_TOL = 1e-12


def _negligible(sd: float, values: Sequence[float]) -> bool:
    """True when ``sd`` is zero up to floating-point rounding relative to the largest magnitude in ``values``."""
    scale = max((abs(v) for v in values), default=0.0)
    return sd <= _REL_TOL * scale


def _two_sided_p(t: float, dof: float) -> float:
    """Two-sided p-value ``2·(1 − F_t(|t|; dof))`` from Student's t distribution (scipy's survival function)."""
    return float(2.0 * sps.t.sf(abs(t), dof))


def compare(a: Sequence[float | bool | None], b: Sequence[float | bool | None], paired: bool) -> Comparison:
    """Two-sided t-test of ``a`` against ``b`` with an effect size.

    ``paired=True``: ``a[i]`` and ``b[i]`` are the same episode under two conditions (same env, team size, task and
    seed). Pairs where either side is missing are dropped. With differences ``d_i = a_i − b_i``:
    ``t = d̄ / (s_d / √n)``, ``dof = n − 1`` (Student 1908) and ``d_z = d̄ / s_d`` (Cohen 1988 §2.3; Lakens 2013).

    ``paired=False``: Welch's unequal-variance test (Welch 1947) on the present values of each side:
    ``t = (x̄_a − x̄_b) / √(s_a²/n_a + s_b²/n_b)``, Welch–Satterthwaite
    ``dof = (s_a²/n_a + s_b²/n_b)² / ((s_a²/n_a)²/(n_a−1) + (s_b²/n_b)²/(n_b−1))`` and Cohen's d with the pooled SD
    ``s_p = √(((n_a−1)s_a² + (n_b−1)s_b²) / (n_a+n_b−2))``, ``d = (x̄_a − x̄_b) / s_p``
    (Cohen 1988 §2.2; Lakens 2013 d_s).

    The p-value is two-sided from scipy's t distribution. Undefined cases return NaN with a ``note`` instead of
    raising: fewer than two values (per side, or pairs), or zero variance (then the t statistic divides by zero —
    even when the means differ we report NaN rather than an infinite t, and say so). A spread below 1e-12 of the
    data's magnitude counts as zero: it is floating-point rounding (0.3 − 0.1 vs 1.3 − 1.1), not variance.
    """
    if paired:
        if len(a) != len(b):
            raise ValueError(f"a paired test needs aligned sequences, got {len(a)} and {len(b)} values")
        pairs = [(float(x), float(y)) for x, y in zip(a, b, strict=True) if not (_is_missing(x) or _is_missing(y))]
        n = len(pairs)
        xs = [x for x, _ in pairs]
        ys = [y for _, y in pairs]
        mean_a = float(np.mean(xs)) if n else NAN
        mean_b = float(np.mean(ys)) if n else NAN
        diffs = np.array([x - y for x, y in pairs], dtype=float)
        diff = float(diffs.mean()) if n else NAN
        if n < 2:
            return Comparison("paired t", n, n, mean_a, mean_b, diff, NAN, NAN, NAN, NAN, "d_z",
                              f"too few pairs ({n}): a paired t-test needs at least 2")
        sd = float(diffs.std(ddof=1))
        if _negligible(sd, xs + ys):
            return Comparison("paired t", n, n, mean_a, mean_b, diff, NAN, NAN, float(n - 1), NAN, "d_z",
                              "zero variance of the pairwise differences: t and d_z undefined", diff, diff)
        t = diff / (sd / math.sqrt(n))
        dof = float(n - 1)
        half = _t_quantile(dof) * sd / math.sqrt(n)
        return Comparison("paired t", n, n, mean_a, mean_b, diff, t, _two_sided_p(t, dof), dof, diff / sd, "d_z",
                          "", diff - half, diff + half)

    xs, ys = present(a), present(b)
    n_a, n_b = len(xs), len(ys)
    mean_a = float(np.mean(xs)) if n_a else NAN
    mean_b = float(np.mean(ys)) if n_b else NAN
    diff = mean_a - mean_b
    if n_a < 2 or n_b < 2:
        return Comparison("Welch t", n_a, n_b, mean_a, mean_b, diff, NAN, NAN, NAN, NAN, "d",
                          f"too few values ({n_a} vs {n_b}): Welch's test needs at least 2 per side")
    var_a = float(np.var(xs, ddof=1))
    var_b = float(np.var(ys, ddof=1))
    se2_a, se2_b = var_a / n_a, var_b / n_b
    if _negligible(math.sqrt(var_a), xs) and _negligible(math.sqrt(var_b), ys):
        return Comparison("Welch t", n_a, n_b, mean_a, mean_b, diff, NAN, NAN, NAN, NAN, "d",
                          "zero variance in both groups: t and d undefined", diff, diff)
    t = diff / math.sqrt(se2_a + se2_b)
    dof = (se2_a + se2_b) ** 2 / (se2_a**2 / (n_a - 1) + se2_b**2 / (n_b - 1))
    pooled_sd = math.sqrt(((n_a - 1) * var_a + (n_b - 1) * var_b) / (n_a + n_b - 2))
    half = _t_quantile(dof) * math.sqrt(se2_a + se2_b)
    return Comparison("Welch t", n_a, n_b, mean_a, mean_b, diff, t, _two_sided_p(t, dof), dof, diff / pooled_sd, "d",
                      "", diff - half, diff + half)


def _t_quantile(dof: float, confidence: float = 0.95) -> float:
    """The two-sided ``confidence`` quantile of Student's t with ``dof`` degrees of freedom."""
    return float(sps.t.ppf(0.5 + confidence / 2, dof))


def min_max_normalise(values: Sequence[float]) -> list[float]:
    """Rescale to [0, 1]: ``(x − min) / (max − min)``.

    Constant input (``max == min``) has no spread to rescale and maps to all zeros; callers that need a spread
    (the regression) check for it themselves. Empty input gives an empty list.
    """
    xs = [float(v) for v in values]
    if not xs:
        return []
    lo, hi = min(xs), max(xs)
    if hi == lo:
        return [0.0] * len(xs)
    return [(x - lo) / (hi - lo) for x in xs]


@dataclass(frozen=True)
class Regression:
    """OLS fit of ``T = α + β·C + ε`` on min–max normalised turns ``T`` and consistency ``C``.

    ``alpha_ci``/``beta_ci`` are 95 % intervals; everything is NaN with a ``note`` when the fit is undefined.
    """

    n: int
    alpha: float
    beta: float
    alpha_ci: tuple[float, float]
    beta_ci: tuple[float, float]
    p_beta: float
    r2: float
    note: str = ""


_NAN_PAIR = (NAN, NAN)


def regression_turns_on_consistency(
    turns: Sequence[float | None], consistency: Sequence[float | None]
) -> Regression:
    """Fit ``T = α + β·C + ε`` by ordinary least squares (statsmodels ``OLS``) on min–max normalised values.

    Episodes whose turns or consistency is missing are dropped first (single-agent episodes have no consistency).

    Why min–max normalisation: turns and consistency live on unrelated scales (a turn count vs a score in [0, 1]),
    and the writing and coding envs have different turn budgets. Rescaling each to [0, 1] over the fitted episodes
    makes β read the same everywhere — the change in normalised turns across the full observed range of
    consistency (β = −1: the most consistent episodes take the fewest turns observed) — and α the normalised turns
    at the lowest observed consistency. An affine rescaling changes neither R² nor β's t statistic or p-value, so
    the test of "more consistent teams finish faster" is the same as on raw values.

    Needs at least 3 episodes (two coefficients plus one residual degree of freedom for the intervals) and a spread
    in both variables; otherwise every figure is NaN and ``note`` says why.
    """
    if len(turns) != len(consistency):
        raise ValueError(f"turns and consistency must be aligned, got {len(turns)} and {len(consistency)} values")
    pairs = [
        (float(t), float(c))
        for t, c in zip(turns, consistency, strict=True)
        if not (_is_missing(t) or _is_missing(c))
    ]
    n = len(pairs)
    if n < 3:
        return Regression(n, NAN, NAN, _NAN_PAIR, _NAN_PAIR, NAN, NAN, f"too few episodes ({n}): OLS needs at least 3")
    t_raw = [t for t, _ in pairs]
    c_raw = [c for _, c in pairs]
    if max(c_raw) == min(c_raw):
        return Regression(n, NAN, NAN, _NAN_PAIR, _NAN_PAIR, NAN, NAN, "consistency is constant: β undefined")
    if max(t_raw) == min(t_raw):
        return Regression(n, NAN, NAN, _NAN_PAIR, _NAN_PAIR, NAN, NAN, "turns are constant: nothing to explain")
    # statsmodels is imported here, not at module level: it takes about a second to import and only this needs it.
    import statsmodels.api as sm

    y = np.asarray(min_max_normalise(t_raw))
    x = sm.add_constant(np.asarray(min_max_normalise(c_raw)))
    with warnings.catch_warnings():
        # A perfect fit (zero residuals) makes statsmodels warn while dividing by zero; the NaN/0 it yields is kept.
        warnings.simplefilter("ignore", RuntimeWarning)
        fit = sm.OLS(y, x).fit()
        ci = np.asarray(fit.conf_int(alpha=0.05))
        p_beta = float(np.asarray(fit.pvalues)[1])
    params = np.asarray(fit.params)
    return Regression(
        n=n,
        alpha=float(params[0]),
        beta=float(params[1]),
        alpha_ci=(float(ci[0, 0]), float(ci[0, 1])),
        beta_ci=(float(ci[1, 0]), float(ci[1, 1])),
        p_beta=p_beta,
        r2=float(fit.rsquared),
    )


def relative_change(new: float, old: float) -> float:
    """``(new − old) / old``: the relative change from ``old`` to ``new`` (0.194 means +19.4 %).

    NaN when ``old`` is 0 or either value is missing (a relative change from nothing is undefined).
    """
    if _is_missing(new) or _is_missing(old) or old == 0:
        return NAN
    return (float(new) - float(old)) / float(old)


def turn_reduction_factor(new_turns: float, old_turns: float) -> float:
    """``old_turns / new_turns``: how many times fewer turns the new condition takes ("3.1x fewer" is 3.1).

    NaN when ``new_turns`` is 0 or either value is missing.
    """
    if _is_missing(new_turns) or _is_missing(old_turns) or new_turns == 0:
        return NAN
    return float(old_turns) / float(new_turns)


def consistency_change_pct(new: float, old: float) -> float:
    """Relative consistency change in percent, ``100 · (new − old) / old`` (the seeds' "+19.4 %" is 19.4)."""
    return 100.0 * relative_change(new, old)


def pass_rate_change(new: float, old: float) -> tuple[float, float]:
    """Pass-rate change as ``(relative %, percentage points)``: ``100·(new − old)/old`` and ``100·(new − old)``.

    Both are returned because "+21.7 %" on a rate is ambiguous: from 0.50 to 0.6085 is +21.7 % relative but
    +10.85 points. The points are NaN only when a value is missing; the relative change also when ``old`` is 0.
    """
    points = NAN if _is_missing(new) or _is_missing(old) else 100.0 * (float(new) - float(old))
    return 100.0 * relative_change(new, old), points
