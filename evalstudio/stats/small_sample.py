"""Intervals for a mean at the sizes small studies have, where ratings are skewed.

A Student-t interval assumes the mean is symmetric about the truth. Ratings near a scale's end are not: a dialogue
system whose responses humans rate 4.8 on 1-5, a summary the reviewers give 91 of 100, a class a fifth of the items
have. There the sample's spread shrinks with its distance from the end, and 95% t intervals from 30 labels covered
such a system's published mean 0.90 of the time (benchmarks/active.py, docs/active.md).

Hall's transformation removes the skewness from the studentised mean (P. Hall, "On the removal of skewness by
transformation", JRSS B 54(1), 1992, 221-228; compared with the bootstrap and Johnson's t by X.-H. Zhou & P. Dinh,
"Nonparametric confidence intervals for the one- and two-sample problems", Biostatistics 6(2), 2005, 187-200, who
recommend it for skewed data). With T = (estimate - mean) / se and g the estimator's skewness,

    h(T) = T + g T^2 / 3 + g^2 T^3 / 27 + g / 6 = ((1 + g T / 3)^3 - 1) / g + g / 6

is nearly symmetric, so the interval is every mean with |h(T)| <= q: estimate - se h^-1(q) to estimate - se h^-1(-q),
h^-1(x) = ((1 + g (x - g / 6))^(1/3) - 1) / (g / 3). h is increasing, so its inverse is exact; with g = 0 it is the
interval estimate +- q se. (Hall writes g / sqrt(n) for the skewness of one observation over sqrt(n); here g is the
estimator's own, which covers a weighted or prediction-powered mean too.)

Two rules, each from a measurement (benchmarks/active.py, docs/active.md): the interval is only lengthened on the
skewed side, never shortened on the other (the skewness of a judge's rare big errors follows the ones drawn), and
0/1 labels (a class's share) keep the t interval (the correction over-covered them). On USR's and SQuALITY's
published ratings, per system at 30 labels, the human-only intervals then covered at least 0.94 of the time where t
intervals covered 0.90."""

from __future__ import annotations

import numpy as np
from scipy import stats


def zero_one(labels, axis: int = -1) -> np.ndarray:
    """Whether every label is 0 or 1 (a class's share), per study; missing ones are ignored. A share keeps the
    symmetric t interval: the correction, made for ratings, over-covered 0/1 labels (0.97-0.99 from 10-60 labels,
    where t intervals held from 30; benchmarks/active.py). The test is on the coding, not on how many values a study
    happened to draw: ratings of 4 and 5 only are still ratings.

    >>> zero_one([[0, 1, 1, 0], [4, 5, 5, 4]]).tolist()
    [True, False]
    """
    y = np.asarray(labels, dtype=float)
    return ((y == 0) | (y == 1) | ~np.isfinite(y)).all(axis)


def skewness_of_mean(terms, axis: int = -1) -> np.ndarray:
    """The skewness of the mean of `terms` (iid values along `axis`): their own skewness m3 / m2^1.5 over sqrt(n),
    0 where the terms do not vary.

    >>> round(float(skewness_of_mean([0, 0, 0, 1])), 4)  # a Bernoulli(1/4): (1 - 2p) / sqrt(p (1 - p)) / sqrt(4)
    0.5774
    """
    z = np.asarray(terms, dtype=float)
    return skewness_of_sum([(np.var(z, axis=axis) / z.shape[axis], third_cumulant_of_mean(z, axis))])


def skewness_of_sum(parts) -> np.ndarray:
    """The skewness of a sum of independent means, from each one's (variance, third cumulant): sum k3 / (sum
    var)^1.5; 0 where the variance is 0. A prediction-powered mean is one: lambda x the unlabelled items' mean plus
    the labelled items' mean of y - lambda f."""
    var = sum(np.asarray(v, dtype=float) for v, _ in parts)
    k3 = sum(np.asarray(k, dtype=float) for _, k in parts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(np.where(var > 0, k3 / np.maximum(var, 1e-300) ** 1.5, 0.0))


def without_replacement_factors(rated, size) -> tuple[np.ndarray, np.ndarray]:
    """(c, b): the factors on Hall's g when `rated` of a set of `size` are drawn without replacement (g: the mean's
    skewness drawn with replacement). b is the exact ratio of the mean's own standardised skewness: from Cochran's
    (1977, "Sampling Techniques", 3rd ed., Theorem 2.2 and its third-moment analogue; Sukhatme) E(mean - mu)^3 =
    (M - n)(M - 2n) / (n^2 (M - 1)(M - 2)) mu3 and Var(mean) = (M - n) S^2 / (M n), b = sqrt(M - 1)(M - 2n) /
    ((M - 2) sqrt(M - n)), about (1 - 2f) / sqrt(1 - f) for f = n / M: 0 at f = 1/2 and negative above, where the
    mean is skewed the other way. The studentised mean's skewness also holds the mean's covariance with the
    variance, (M - n) M mu3 / ((M - 1)(M - 2) n), whose factor is a = sqrt((M - n)(M - 1)) / (M - 2), about
    sqrt(1 - f); its third cumulant is then -2 c g to first order in 1/sqrt(n), c = (3a - b) / 2, and its mean -a g /
    2. In Hall's transformation c is the factor on g T^2 / 3 (the quadratic term, which makes the interval longer on
    the skewed side) and b the one on the constant g / 6 (derived in this project: docs/analyze.md; the Edgeworth
    polynomial k1 + k3 (x^2 - 1) / 6 with k1 = -a g / 2 and k3 = -2 c g; not compared with Babu & Singh 1985).
    tests/test_ppi.py checks a and b against every sample of small sets.

    >>> c, b = without_replacement_factors([10, 30, 72], 96)
    >>> c.round(4).tolist(), b.round(4).tolist()
    ([1.0175, 1.0338, 1.2699], [0.8498, 0.4595, -1.0159])
    """
    n, big_m = np.asarray(rated, dtype=float), np.asarray(size, dtype=float)
    if np.any(n < 1) or np.any(big_m < n + 1) or np.any(big_m < 3):
        raise ValueError(f"without_replacement_factors: needs 1 <= rated < size and size >= 3, got {rated} of {size}")
    a = np.sqrt((big_m - n) * (big_m - 1)) / (big_m - 2)
    b = a * (big_m - 2 * n) / (big_m - n)
    return (3 * a - b) / 2, b


def third_cumulant_of_mean(values, axis: int = -1) -> np.ndarray:
    """The third cumulant of the mean of `values` (iid along `axis`): m3 / n^2."""
    z = np.asarray(values, dtype=float)
    n = z.shape[axis]
    return ((z - z.mean(axis, keepdims=True)) ** 3).mean(axis) / n ** 2


def skew_corrected_interval(estimate, se, skewness, quantile, labels=None,
                            constant=None) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): Hall's (1992) interval for a mean from its estimate, standard error, the estimator's skewness and
    the symmetric quantile (a t or normal one), lengthened on the skewed side and never shortened on the other (the
    interval estimate +- quantile x se is kept there). Vectorised over studies. `labels`: the human labels behind
    each estimate (a row per study, NaN where none); where they are all 0 or 1 (`zero_one`) the skewness is not
    used: a share keeps the t interval. `constant`: the skewness in Hall's constant term g / 6 where it differs
    from the one in his quadratic term (drawn without replacement: `without_replacement_factors`); by default the
    same.

    Why never shorter: the skewness is estimated from the same sample, and where a few large values dominate it
    (a judge's rare big errors, in a prediction-powered mean) it follows the ones that happened to be drawn, which
    also moved the estimate: Hall's interval, shortened on the other side, covered GPT-4o's stance share 0.91 of the
    time at 50 labels where the symmetric one covered 0.94 (benchmarks/active.py).

    >>> lo, hi = skew_corrected_interval(10.0, 1.0, 0.0, 2.0)  # no skewness: estimate +- quantile x se
    >>> float(lo), float(hi)
    (8.0, 12.0)
    >>> lo, hi = skew_corrected_interval(4.8, 0.1, -0.2, 2.0)  # skewed left (near the top of 1-5): reaches lower
    >>> round(float(4.8 - lo), 3), round(float(hi - 4.8), 3)  # Hall's upper end would be 0.175 above
    (0.24, 0.2)
    """
    constant = skewness if constant is None else constant
    if labels is not None:
        skewness = np.where(zero_one(labels), 0.0, skewness)
        constant = np.where(zero_one(labels), 0.0, constant)
    estimate, se, g, g0, q = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (estimate, se, skewness,
                                                                                      constant, quantile)))

    def inverse(x):
        a = g / 3
        with np.errstate(invalid="ignore", divide="ignore"):
            exact = (np.cbrt(1 + 3 * a * (x - g0 / 6)) - 1) / a
        return np.where(np.abs(a) > 1e-9, exact, x - g0 / 6)

    return np.minimum(estimate - se * inverse(q), estimate - q * se), np.maximum(estimate - se * inverse(-q),
                                                                               estimate + q * se)


def mean_interval(values, df: float, alpha: float = 0.05, labels=None) -> tuple[float, float]:
    """(lo, hi): the (1 - alpha) interval of the mean of `values` (iid: an item's terms, a difference's per-item
    differences), a t quantile on `df` degrees of freedom, lengthened on the side they are skewed to unless the
    `labels` behind them are a share (see `skew_corrected_interval`)."""
    z = np.asarray(values, dtype=float)
    if z.ndim != 1 or len(z) < 2 or not np.isfinite(z).all():
        raise ValueError("mean_interval needs two or more finite values")
    lo, hi = skew_corrected_interval(z.mean(), z.std(ddof=1) / np.sqrt(len(z)), skewness_of_mean(z),
                                     stats.t.ppf(1 - alpha / 2, df), labels)
    return float(lo), float(hi)
