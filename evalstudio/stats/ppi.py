"""Prediction-powered estimates of a mean: human ratings on some items, a metric's or a judge's scores on all of them.

PPI++ (Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient Prediction-Powered Inference", arXiv:2311.01453; PPI:
Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, Science 2023). With n labelled items (human score y, prediction
f) and N unlabelled ones (prediction only), for any lambda

    theta_hat = lambda * mean(f_unlabelled) + mean(y - lambda * f_labelled)

is unbiased for the human mean, and its interval uses

    se^2 = var(lambda * f_unlabelled) / N + var(y - lambda * f_labelled) / n

with Student's t quantile (n - 1 degrees of freedom) and a correction for skewness by default, or the normal one
(see `ppi_mean`).

lambda = 0 is the classical human-only mean; lambda = 1 is PPI; PPI++ takes the lambda that minimises the variance,
cov(y, f) / ((1 + n/N) var(f)), estimated from the data and clipped to [0, 1], so a useless predictor gives about
the classical interval back and a poor one never makes it wrong. It can make it slightly wider: lambda tuned on the
labelled items costs a degree of freedom (n - 2 with the t interval), which a predictor that tracks little does not
pay back (on HANNA's published metrics at 40 labels: by at most 1% on average, 2.5% in a single study;
docs/analyze.md). With interval="z" the
conventions (the variances with 1/n, var(f) over labelled and unlabelled predictions together with 1/(n+N-1), the
z interval) are those of the authors' package ppi-python, which the tests use as the oracle; the estimate and
lambda are the same either way.

The effective number of human labels a predictor is worth: the n for which the classical interval would be as
narrow as the prediction-powered one, n * se_classical^2 / se_ppi^2.

A difference between two systems rated on the same items is the mean of per-item differences: `ppi_mean` on
y_A - y_B with f_A - f_B. `resampled_studies` checks the intervals' calibration by drawing studies from real data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .small_sample import skew_corrected_interval, skewness_of_mean, skewness_of_sum, third_cumulant_of_mean


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered mean beside the classical one, with their (1 - alpha) intervals."""
    estimate: float
    lo: float
    hi: float
    se: float
    lam: float
    classical: float
    classical_lo: float
    classical_hi: float
    classical_se: float
    n: int
    N: int

    @property
    def effective_n(self) -> float:
        """The human labels a classical interval would need to be as narrow: n * (se_classical / se_ppi)^2."""
        if self.se == 0:
            return float("inf") if self.classical_se > 0 else float(self.n)
        return self.n * (self.classical_se / self.se) ** 2


def _check(name: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a one-dimensional array, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: holds a missing or infinite value")
    return array


def power_tuned_lambda(y, f, f_unlabelled) -> np.ndarray:
    """PPI++'s lambda for a mean: cov(y, f) / ((1 + n/N) var(f over all items)), clipped to [0, 1]; 0 for a constant
    predictor. Vectorised: each row of 2-D arrays is one sample (as many lambdas as rows)."""
    y, f, f_u = np.atleast_2d(y), np.atleast_2d(f), np.atleast_2d(f_unlabelled)
    n, big_n = y.shape[1], f_u.shape[1]
    covariance = np.mean((y - y.mean(1, keepdims=True)) * (f - f.mean(1, keepdims=True)), axis=1)
    variance = np.var(np.concatenate([f, f_u], axis=1), axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(variance > 0, covariance / ((1 + n / big_n) * variance), 0.0)
    return np.clip(lam, 0.0, 1.0)


def ppi_means(y, f, f_unlabelled, alpha: float = 0.05, lam=None, interval: str = "t") -> dict[str, np.ndarray]:
    """`ppi_mean` for many samples at once: each row of the 2-D arrays y, f (R x n) and f_unlabelled (R x N) is one
    sample (a resampled study, say). Returns arrays of length R: estimate, lo, hi, se, lam, classical,
    classical_lo, classical_hi, classical_se. `interval`: "t" (the default) or "z" (see `ppi_mean`)."""
    y, f, f_u = (np.asarray(a, dtype=float) for a in (y, f, f_unlabelled))
    if y.ndim != 2 or f.shape != y.shape or f_u.ndim != 2 or f_u.shape[0] != y.shape[0]:
        raise ValueError(f"expected y and f of one shape (R x n) and f_unlabelled R x N, got {y.shape}, {f.shape}, "
                         f"{f_u.shape}")
    if not (np.isfinite(y).all() and np.isfinite(f).all() and np.isfinite(f_u).all()):
        raise ValueError("the scores hold a missing or infinite value")
    n, big_n = y.shape[1], f_u.shape[1]
    if n < 2 or big_n < 1:
        raise ValueError(f"a prediction-powered mean needs 2 or more labelled items and 1 or more unlabelled ones "
                         f"(got {n} and {big_n})")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if interval not in ("t", "z"):
        raise ValueError(f"interval must be 't' or 'z', got {interval!r}")
    ddof = 1 if interval == "t" else 0
    tuned = lam is None
    lam = power_tuned_lambda(y, f, f_u) if tuned else np.full(len(y), float(lam))
    column = lam[:, None]
    estimate = (column * f_u).mean(1) + (y - column * f).mean(1)
    # t: lambda tuned on the labelled items is one more parameter fitted to them (as the slope of a regression
    # estimator): their residual variance over n - 2 and t with n - 2 degrees of freedom, where lambda is not 0
    fitted = (lam > 0) & tuned & (interval == "t") & (n > 3)
    residual = np.sum((y - column * f - (y - column * f).mean(1, keepdims=True)) ** 2, axis=1) / (n - ddof - fitted)
    se = np.sqrt(np.var(column * f_u, axis=1, ddof=min(ddof, big_n - 1)) / big_n + residual / n)
    classical, classical_se = y.mean(1), y.std(1, ddof=ddof) / np.sqrt(n)
    if interval == "t":
        # corrected for skewness (Hall 1992, `small_sample`): the estimate is lambda x the unlabelled items' mean
        # plus the labelled items' mean of y - lambda f, two independent means
        skew = skewness_of_sum([(np.var(column * f_u, axis=1) / big_n, third_cumulant_of_mean(column * f_u)),
                                (residual / n, third_cumulant_of_mean(y - column * f))])
        lo, hi = skew_corrected_interval(estimate, se, skew, stats.t.ppf(1 - alpha / 2, n - 1 - fitted), labels=y)
        classical_lo, classical_hi = skew_corrected_interval(classical, classical_se, skewness_of_mean(y),
                                                             stats.t.ppf(1 - alpha / 2, n - 1), labels=y)
    else:
        z = stats.norm.ppf(1 - alpha / 2)
        lo, hi, classical_lo, classical_hi = (estimate - z * se, estimate + z * se, classical - z * classical_se,
                                              classical + z * classical_se)
    return {"estimate": estimate, "lo": lo, "hi": hi, "se": se, "lam": lam, "classical": classical,
            "classical_lo": classical_lo, "classical_hi": classical_hi, "classical_se": classical_se}


def ppi_mean(y, f, f_unlabelled, alpha: float = 0.05, lam: float | None = None, interval: str = "t") -> PPIEstimate:
    """The PPI++ estimate of the mean human score (lam None: power-tuned) and the classical one, each with its
    two-sided (1 - alpha) interval. y and f: the n labelled items' human scores and predictions (same order);
    f_unlabelled: the N other items' predictions.

    `interval` "t" (the default): the variances with n - 1 and Student's t quantile with n - 1 degrees of freedom,
    for both intervals, lengthened on the side the estimate is skewed to (Hall 1992, `small_sample`; the t interval
    where the scores are symmetric, and for 0/1 labels). At the sizes small studies have the normal interval is too
    narrow: drawn from HANNA's published ratings, 95% normal intervals from 10 rated stories covered the truth 0.89
    of the time, t intervals 0.94 (benchmarks/ppi_calibration.py, docs/analyze.md); and a system rated near a
    scale's end needs the correction (t intervals from 30 labels covered 0.90, docs/active.md). "z": the normal
    interval with the variances over n, the conventions of the authors' package ppi-python (the tests' oracle),
    which is the same as n grows.

    >>> e = ppi_mean([3.0, 4.0, 5.0, 4.0], [2.9, 4.2, 4.8, 3.9], [3.1, 4.4, 2.8, 3.6, 4.1, 4.9], interval="z")
    >>> round(e.estimate, 4), round(e.lam, 4)
    (3.9332, 0.5009)
    """
    y, f, f_u = _check("y", y), _check("f", f), _check("f_unlabelled", f_unlabelled)
    if len(y) != len(f):
        raise ValueError(f"y and f: {len(y)} human scores but {len(f)} predictions")
    r = {k: float(v[0]) for k, v in ppi_means(y[None], f[None], f_u[None], alpha, lam, interval).items()}
    return PPIEstimate(r["estimate"], r["lo"], r["hi"], r["se"], r["lam"], r["classical"], r["classical_lo"],
                       r["classical_hi"], r["classical_se"], len(y), len(f_u))


def resampled_studies(y: np.ndarray, f: np.ndarray, n: int, big_n: int, draws: int, rng) -> dict[str, float]:
    """A calibration check on real data: `draws` studies drawn from one system's published items (y: human scores,
    f: the predictor's; with replacement: the items are the population, their mean the truth), each with n rated
    and big_n scored-only items. Returns the coverage of both 95% intervals, the mean ratio of their widths, and the
    effective number of labels the predictor is said to be worth (the mean of `PPIEstimate.effective_n`) against
    the number it is worth across the studies (n times the variance of the classical estimates over that of the
    prediction-powered ones)."""
    picked = rng.integers(0, len(y), size=(draws, n + big_n))
    r = ppi_means(y[picked[:, :n]], f[picked[:, :n]], f[picked[:, n:]])
    truth = y.mean()
    with np.errstate(invalid="ignore", divide="ignore"):  # a study whose n labels are all equal: 0 / 0, NaN
        return {"n": n, "N": big_n, "draws": draws,
                "covered_ppi": float(np.mean((r["lo"] <= truth) & (truth <= r["hi"]))),
                "covered_classical": float(np.mean((r["classical_lo"] <= truth) & (truth <= r["classical_hi"]))),
                "claimed_n": float(np.mean(n * (r["classical_se"] / r["se"]) ** 2)),
                "realised_n": float(n * np.var(r["classical"]) / np.var(r["estimate"])),
                "width_ratio": float(np.mean((r["hi"] - r["lo"]) / (r["classical_hi"] - r["classical_lo"])))}
