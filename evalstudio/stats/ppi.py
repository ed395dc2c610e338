"""Prediction-powered estimates of a mean: human ratings on some items, a metric's or a judge's scores on all of them.

PPI++ (Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient Prediction-Powered Inference", arXiv:2311.01453; PPI:
Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, Science 2023). With n labelled items (human score y, prediction
f) and N unlabelled ones (prediction only), for any lambda

    theta_hat = lambda * mean(f_unlabelled) + mean(y - lambda * f_labelled)

is unbiased for the human mean, with se^2 = var(lambda * f_unlabelled) / N + var(y - lambda * f_labelled) / n.
PPI++ takes the lambda that minimises the variance, cov(y, f) / ((1 + n/N) var(f)), clipped to [0, 1]; estimated
on the same labels it weighs, it biases the estimate. Here (the default) each labelled item's lambda_i is estimated
from the other labelled items only (leave one out), as in cross-prediction-powered inference (Zrnic & Candes 2024,
"Cross-prediction-powered inference", PNAS 121(15)) with the predictors lambda_i f:

    theta_hat = mean_i (y_i - lambda_i (f_i - mean(f_unlabelled)))

which is unbiased at any n (`cross_fitted_lambdas`); its interval takes the spread of those terms, which does not
change when the predictor is shifted by a constant. lam="in-sample" gives PPI++ as published (ppi-python's
ppi_mean_ci, the tests' oracle), a number a fixed lambda (0: the classical mean; 1: PPI).

`finite`: the target is the mean of the n + N items themselves, the n rated ones drawn from them without
replacement: (n mean(y) + N theta_hat) / (n + N), the difference estimator of survey sampling (Sarndal, Swensson
& Wretman 1992, "Model Assisted Survey Sampling", 6.3), with the finite-population correction 1 - n / (n + N) on
its variance; lambda's optimum is then cov(y, f) / var(f).

Intervals: Student's t with n - 1 degrees of freedom, lengthened on the side the estimate is skewed to (Hall 1992,
`small_sample`), or the normal interval with ppi-python's conventions (interval="z"). The effective number of
human labels a predictor is worth: n * se_classical^2 / se_ppi^2. A difference between two systems rated on the same
items is `ppi_mean` on y_A - y_B with f_A - f_B. `resampled_studies` checks the intervals' calibration by drawing
studies from real data (benchmarks/ppi_calibration.py; docs/analyze.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .small_sample import skew_corrected_interval, skewness_of_sum, without_replacement_factors


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


def cross_fitted_lambdas(y, f, big_n: int, finite: bool = False) -> np.ndarray:
    """Leave-one-out lambdas (R x n): for labelled item i, PPI++'s power-tuned lambda from the other n - 1 labelled
    items only, cov(y, f) / (c var(f)), clipped to [0, 1] (0 where f does not vary), with c = 1 + n/N (a mean over
    an unlimited population, Angelopoulos, Duchi & Zrnic 2023) or 1 (the rest of a finite set: the difference
    estimator's optimal coefficient, Sarndal, Swensson & Wretman 1992, section 6.3). Chosen without item i's label,
    the weight item i gets cannot follow its error: cross-fitting as in Zrnic & Candes 2024 ("Cross-prediction-
    powered inference", PNAS 121(15)), with as many folds as labels.

    >>> cross_fitted_lambdas([1.0, 2.0, 3.0, 5.0], [1.0, 2.0, 3.0, 4.0], 4, finite=True).round(4).tolist()
    [[1.0, 1.0, 1.0, 1.0]]
    """
    y, f = np.atleast_2d(np.asarray(y, dtype=float)), np.atleast_2d(np.asarray(f, dtype=float))
    n = y.shape[1]
    yc, fc = y - y.mean(1, keepdims=True), f - f.mean(1, keepdims=True)  # centred: sums without cancellation
    m = n - 1
    mean_y, mean_f = (yc.sum(1, keepdims=True) - yc) / m, (fc.sum(1, keepdims=True) - fc) / m
    covariance = ((yc * fc).sum(1, keepdims=True) - yc * fc) / m - mean_y * mean_f
    variance = ((fc * fc).sum(1, keepdims=True) - fc * fc) / m - mean_f ** 2
    c = 1.0 if finite else 1 + n / big_n
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(variance > 1e-12 * np.maximum((fc * fc).mean(1, keepdims=True), 1e-300),
                       covariance / (c * variance), 0.0)
    return np.clip(lam, 0.0, 1.0)


def ppi_means(y, f, f_unlabelled, alpha: float = 0.05, lam=None, interval: str = "t",
              finite: bool = False) -> dict[str, np.ndarray]:
    """`ppi_mean` for many samples at once: each row of the 2-D arrays y, f (R x n) and f_unlabelled (R x N) is one
    sample (a resampled study, say). Returns arrays of length R: estimate, lo, hi, se, lam, classical,
    classical_lo, classical_hi, classical_se. `interval`: "t" (the default) or "z"; `lam`, `finite`: see
    `ppi_mean`."""
    y, f, f_u = (np.asarray(a, dtype=float) for a in (y, f, f_unlabelled))
    if y.ndim != 2 or f.shape != y.shape or f_u.ndim != 2 or f_u.shape[0] != y.shape[0]:
        raise ValueError(f"expected y and f of one shape (R x n) and f_unlabelled R x N, got {y.shape}, {f.shape}, "
                         f"{f_u.shape}")
    if not (np.isfinite(y).all() and np.isfinite(f).all() and np.isfinite(f_u).all()):
        raise ValueError("the scores hold a missing or infinite value")
    n, big_n = y.shape[1], f_u.shape[1]
    if n < 3 or big_n < 1:
        raise ValueError(f"a prediction-powered mean needs 3 or more labelled items and 1 or more unlabelled ones "
                         f"(got {n} and {big_n})")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if interval not in ("t", "z"):
        raise ValueError(f"interval must be 't' or 'z', got {interval!r}")
    if isinstance(lam, str) and lam != "in-sample":
        raise ValueError(f"lam must be None (cross-fitted), 'in-sample' or a number, got {lam!r}")
    centre = f_u.mean(1, keepdims=True)
    moments = (centre[:, 0], np.mean((f_u - centre) ** 2, axis=1), np.mean((f_u - centre) ** 3, axis=1))
    return _estimates(y, f, big_n, moments, alpha, lam, interval, finite)


def _estimates(y, f, big_n: int, moments, alpha: float, lam, interval: str, finite: bool) -> dict[str, np.ndarray]:
    """`ppi_means` from the unlabelled predictions' (mean, variance, third central moment) per sample: all the
    estimate and its interval need of them (so that a calibration can draw them as counts)."""
    n = y.shape[1]
    mean_u, var_u, m3_u = moments
    ddof = 1 if interval == "t" else 0
    lam_given = lam
    if lam is None:
        per_item = cross_fitted_lambdas(y, f, big_n, finite)
    elif lam == "in-sample":
        # PPI++'s lambda: cov(y, f) / ((1 + n/N) var(f)), var over labelled and unlabelled predictions (n + N - 1)
        covariance = np.mean((y - y.mean(1, keepdims=True)) * (f - f.mean(1, keepdims=True)), axis=1)
        pooled = (n * f.var(1) + big_n * var_u + n * big_n / (n + big_n) * (f.mean(1) - mean_u) ** 2) / (
            n + big_n - 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            tuned = np.clip(np.where(pooled > 0, covariance / ((1 + n / big_n) * pooled), 0.0), 0.0, 1.0)
        per_item = np.repeat(tuned[:, None], n, axis=1)
    else:
        per_item = np.full(y.shape, float(lam))
    lam = per_item.mean(1)
    # Zrnic & Candes 2024: the labelled items' mean of y - lambda_i f (lambda_i chosen without item i) plus the mean
    # of the lambdas' predictions lambda-bar f on the unlabelled items; the same as the labelled items' mean of
    # y_i - lambda_i (f_i - mean f_unlabelled), whose spread is the interval's (not that of y_i - lambda_i f_i, which
    # grows with the predictor's offset where the lambdas differ: a metric on 0-100 made the interval of a
    # predictor that tracks nothing up to 14 times wider than the human-only one on HANNA at 10 labels)
    residual = y - per_item * (f - mean_u[:, None])
    estimate = residual.mean(1)
    (var_r, m3_r), (var_y, m3_y) = _central(residual), _central(y)  # over n
    classical, classical_se = y.mean(1), np.sqrt(var_y * n / (n - ddof)) / np.sqrt(n)
    if finite:
        # the n rated items drawn without replacement from the M = n + N of the set, the set's mean the target:
        # (n ybar + N theta) / M, the difference estimator (Sarndal et al. 1992, 6.3); its variance
        # (1 - n/M) var(y - lambda f) / n, the finite-population correction. Hall's g is the mean's skewness drawn
        # with replacement; drawn without, his quadratic term's g scales by c and his constant's by b
        # (`without_replacement_factors`: b the mean's own skewness's exact ratio, c the studentised mean's first-
        # order one, which also holds the mean's covariance with the variance; docs/analyze.md). With b in both,
        # 30 of USR's 60 responses rated 4.8 of 5 were covered 0.926; with c in both (before h69), c's constant
        # lengthened the interval at f = 3/4 by a quarter more than the expansion says
        share = n / (n + big_n)
        estimate = share * classical + (1 - share) * estimate
        se = np.sqrt((1 - share) * var_r / (n - ddof))
        classical_se = np.sqrt(1 - share) * classical_se
        skew = skewness_of_sum([(var_r / n, m3_r / n ** 2)])
        classical_skew = skewness_of_sum([(var_y / n, m3_y / n ** 2)])
        factor, constant_factor = without_replacement_factors(n, n + big_n)
    else:
        imputed_var = lam ** 2 * var_u  # of lambda-bar f over the unlabelled items
        se = np.sqrt(imputed_var / max(big_n - ddof, 1) + var_r / (n - ddof))
        # the estimate is two independent means (Hall 1992, `small_sample`)
        skew = skewness_of_sum([(imputed_var / big_n, lam ** 3 * m3_u / big_n ** 2),
                                (var_r / (n - ddof), m3_r / n ** 2)])
        classical_skew = skewness_of_sum([(var_y / n, m3_y / n ** 2)])
        factor = constant_factor = 1.0
    if lam_given is None:
        # never less skewed than the human scores' mean: where a rare tail drives both the scores and the errors
        # the residuals' skewness, from few labels, understated it (USR's system rated 4.8 of 5 with a predictor of
        # r 0.83 was covered 0.90 at 20 labels, 0.93 with this; docs/analyze.md)
        skew = np.where(np.abs(classical_skew) > np.abs(skew), classical_skew, skew)
    if interval == "t":
        q = stats.t.ppf(1 - alpha / 2, n - 1)
        lo, hi = skew_corrected_interval(estimate, se, factor * skew, q, y, constant_factor * skew)
        classical_lo, classical_hi = skew_corrected_interval(classical, classical_se, factor * classical_skew, q, y,
                                                             constant_factor * classical_skew)
    else:
        z = stats.norm.ppf(1 - alpha / 2)
        lo, hi, classical_lo, classical_hi = (estimate - z * se, estimate + z * se, classical - z * classical_se,
                                              classical + z * classical_se)
    return {"estimate": estimate, "lo": lo, "hi": hi, "se": se, "lam": lam, "classical": classical,
            "classical_lo": classical_lo, "classical_hi": classical_hi, "classical_se": classical_se}


def _central(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the second and third central moments (over n)."""
    d = z - z.mean(1, keepdims=True)
    square = d * d
    return square.mean(1), (square * d).mean(1)


def ppi_mean(y, f, f_unlabelled, alpha: float = 0.05, lam: float | str | None = None, interval: str = "t",
             finite: bool = False) -> PPIEstimate:
    """The prediction-powered estimate of the mean human score and the classical one, each with its two-sided
    (1 - alpha) interval. y and f: the n labelled items' human scores and predictions (same order); f_unlabelled:
    the N other items' predictions.

    `lam` None (the default): PPI++'s power-tuned lambda cross-fitted, each labelled item's from the other labelled
    items (`cross_fitted_lambdas`; Zrnic & Candes 2024's cross-prediction estimate with the predictions lambda_i f);
    "in-sample": PPI++ as Angelopoulos, Duchi & Zrnic 2023 give it, lambda from all the items, which biases the
    estimate at small n (on USR's system rated 4.8 of 5 a 95% interval covered 0.925 at 30 labels; docs/analyze.md);
    a number: that lambda (0 the classical mean, 1 PPI).

    `finite` False: the mean of an unlimited population the items were drawn from; True: the mean of the n + N
    items themselves, the n rated ones a sample drawn without replacement from them (the finite-population
    correction; `ppi_means`).

    `interval` "t" (the default): the variances with n - 1 and Student's t quantile with n - 1 degrees of freedom,
    for both intervals, lengthened on the side the estimate is skewed to (Hall 1992, `small_sample`; the t interval
    where the scores are symmetric, and for 0/1 labels): at 10 labels normal intervals covered 0.89 on HANNA
    (benchmarks/ppi_calibration.py). "z": the normal interval with the variances over n, the conventions of the
    authors' package ppi-python (the tests' oracle: its ppi_mean_ci with lam "in-sample", and with the default its
    crossppi_mean_pointestimate; its crossppi_mean_ci takes the spread of y_i - lambda_i f_i, which grows with the
    predictor's offset where the lambdas differ, where this takes that of y_i - lambda_i (f_i - mean f_u)).

    >>> y, f, f_u = [3.0, 4.0, 5.0, 4.0], [2.9, 4.2, 4.8, 3.9], [3.1, 4.4, 2.8, 3.6, 4.1, 4.9]
    >>> e = ppi_mean(y, f, f_u, lam="in-sample", interval="z")  # ppi-python's ppi_mean_pointestimate: 3.9332
    >>> round(e.estimate, 4), round(e.lam, 4)
    (3.9332, 0.5009)
    >>> e = ppi_mean(y, f, f_u, interval="z")  # its crossppi_mean_pointestimate with the predictions lambda_i f: 3.9686
    >>> round(e.estimate, 4), round(e.lo, 4), round(e.hi, 4)
    (3.9686, 3.4865, 4.4507)
    """
    y, f, f_u = _check("y", y), _check("f", f), _check("f_unlabelled", f_unlabelled)
    if len(y) != len(f):
        raise ValueError(f"y and f: {len(y)} human scores but {len(f)} predictions")
    r = {k: float(v[0]) for k, v in ppi_means(y[None], f[None], f_u[None], alpha, lam, interval, finite).items()}
    return PPIEstimate(r["estimate"], r["lo"], r["hi"], r["se"], r["lam"], r["classical"], r["classical_lo"],
                       r["classical_hi"], r["classical_se"], len(y), len(f_u))


def resampled_studies(y: np.ndarray, f: np.ndarray, n: int, big_n: int, draws: int, rng,
                      finite: bool = False) -> dict[str, float]:
    """A calibration check on real data: `draws` studies drawn from one system's published items (y: human scores,
    f: the predictor's), their mean the truth. `finite` False: drawn with replacement (the items stand for an
    unlimited population), n rated and big_n scored-only; True: the items are the study's whole set, n of them
    rated (drawn without replacement) and the rest scored only (big_n is ignored). Returns the coverage of both 95%
    intervals, the mean ratio of their widths, and the effective number of labels the predictor is said to be
    worth (the mean of `PPIEstimate.effective_n`) against the number it is worth across the studies (n times the
    variance of the classical estimates over that of the prediction-powered ones)."""
    y, f = np.asarray(y, dtype=float), np.asarray(f, dtype=float)
    size = len(y)
    if finite:  # n drawn without replacement; the unlabelled predictions are the rest
        rated = np.argsort(rng.random((draws, size)), axis=1)[:, :n]
        big_n = size - n
        rest = np.ones((draws, size), dtype=bool)
        np.put_along_axis(rest, rated, False, axis=1)
        counts = rest.astype(float)
    else:  # n drawn with replacement, and the N unlabelled ones as how often each item is drawn
        rated = rng.integers(0, size, size=(draws, n))
        counts = rng.multinomial(big_n, np.full(size, 1 / size), size=draws).astype(float)
    centred = f - f.mean()
    mean_u = counts @ centred / big_n
    second, third = counts @ (centred * centred) / big_n, counts @ (centred * centred * centred) / big_n
    var_u = np.maximum(second - mean_u ** 2, 0.0)
    moments = (mean_u + f.mean(), var_u, third - 3 * mean_u * second + 2 * mean_u ** 3)
    r = _estimates(y[rated], f[rated], big_n, moments, 0.05, None, "t", finite)
    truth = y.mean()
    with np.errstate(invalid="ignore", divide="ignore"):  # a study whose n labels are all equal: 0 / 0, NaN
        return {"n": n, "N": big_n, "draws": draws,
                "covered_ppi": float(np.mean((r["lo"] <= truth) & (truth <= r["hi"]))),
                "covered_classical": float(np.mean((r["classical_lo"] <= truth) & (truth <= r["classical_hi"]))),
                "claimed_n": float(np.mean(n * (r["classical_se"] / r["se"]) ** 2)),
                "realised_n": float(n * np.var(r["classical"]) / np.var(r["estimate"])),
                "width_ratio": float(np.mean((r["hi"] - r["lo"]) / (r["classical_hi"] - r["classical_lo"])))}
