"""How many outputs and annotators a study needs for an interval to be narrow enough: Krippendorff's alpha, and the
correlation between a metric and the human score.

* **Alpha.** For interval data with every unit rated by k annotators, Krippendorff's alpha is the one-way intraclass
  correlation up to a term of order 1/N (`balanced_alpha` below). The large-sample variance of the one-way ICC over
  n units (Fisher 1925) gives the expected width of its 95% interval,

      w = 2 z sqrt( 2 (1 - rho)^2 (1 + (k - 1) rho)^2 / (k (k - 1) (n - 1)) ),

  which is Bonett's sample-size formula solved for the width: D. G. Bonett, "Sample size requirements for
  estimating intraclass correlations with desired precision", Statistics in Medicine 21:1331-1335, 2002.
* **Correlation.** The Pearson correlation between a metric's score and the mean of k annotators' ratings of the
  same outputs. The mean of k ratings has the reliability R_k = k rho / (1 + (k - 1) rho) (Spearman-Brown), and the
  correlation it can show is attenuated by sqrt(R_k) (Spearman 1904): a pilot's r with k0 annotators per output
  becomes r_k = r sqrt(R_k / R_k0). The interval is Fisher's z interval, tanh(atanh(r_k) +- z / sqrt(n - 3)).

Normal theory is too narrow for real ratings and metrics (bounded scales, outputs of very different quality, skewed
metrics), so each width's variance is multiplied by the pilot's own inflation: its bootstrap range over the normal
one at the pilot's size (never below 1).

Both are checked against real published ratings by drawing studies of the planned size from them
(exporters/analyses/precision.py's calibrations, benchmarks/plan_calibration.py): the central 95% range of the estimates
over those studies is the width an interval that covers 95% of the time must have.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level: a probability between 0 and 1, got {level}")
    return float(stats.norm.ppf(0.5 + level / 2))


def alpha_width(rho: float, units, annotators, level: float = 0.95, inflation: float = 1.0) -> np.ndarray:
    """The expected width of alpha's `level` interval for every combination of `units` rated (rows) and
    `annotators` per unit (columns); NaN where there are fewer than 2 annotators or 2 units (no alpha).
    `inflation` multiplies the normal-theory variance: a pilot's bootstrap variance over its normal-theory one
    (`alpha_inflation`), for ratings that are not normal (bounded scales, outputs of very different quality)."""
    n = np.asarray(units, dtype=float)[:, None]
    k = np.asarray(annotators, dtype=float)[None, :]
    rho = float(np.clip(rho, -0.999, 0.999))
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = inflation * 2 * (1 - rho) ** 2 * (1 + (k - 1) * rho) ** 2 / (k * (k - 1) * (n - 1))
        width = 2 * _z(level) * np.sqrt(variance)
    return np.where((k >= 2) & (n >= 2), width, np.nan)


def alpha_inflation(bootstrapped, rho: float, units: int, annotators: float, level: float = 0.95) -> float:
    """How much wider a pilot's bootstrap range of alpha is than normal theory says for the pilot's own size, as a
    factor on the variance: (central width of the bootstrap alphas / normal-theory width) squared. Real ratings
    give more than 1 (SQuALITY's 0-100 overall scores about 1.5); the plan keeps it for every size. Never below 1: a
    pilot's bootstrap range is itself uncertain, and a plan narrower than normal theory's is not trusted."""
    normal = alpha_width(rho, [units], [annotators], level)[0, 0]
    observed = central_width(bootstrapped, level)
    if not (np.isfinite(normal) and normal > 0 and np.isfinite(observed)):
        return 1.0
    return max(float((observed / normal) ** 2), 1.0)


def balanced_alpha(values: np.ndarray) -> np.ndarray:
    """Krippendorff's alpha (interval) of complete units, vectorised over leading axes: `values` has shape
    (..., units, annotators). With N = units x k pairable values, alpha = 1 - k (N - 1) SS_within /
    ((k - 1) N SS_total), the same number as the pairwise definition (tests/test_precision.py checks it against
    krippendorff_alpha)."""
    values = np.asarray(values, dtype=float)
    units, k = values.shape[-2], values.shape[-1]
    if k < 2 or units < 2:
        raise ValueError("alpha needs 2 or more units with 2 or more ratings each")
    big_n = units * k
    within = ((values - values.mean(axis=-1, keepdims=True)) ** 2).sum(axis=(-2, -1))
    flat = values.reshape(values.shape[:-2] + (big_n,))
    total = ((flat - flat.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - k * (big_n - 1) * within / ((k - 1) * big_n * total)


def reliability(rho: float, annotators) -> np.ndarray:
    """Spearman-Brown: the reliability of the mean of `annotators` ratings when one rating's is rho."""
    k = np.asarray(annotators, dtype=float)
    return k * rho / (1 + (k - 1) * rho)


def correlation_at(r: float, rho: float, pilot_annotators: float, annotators) -> np.ndarray:
    """The correlation a metric shows with the mean of `annotators` ratings, from the pilot's r with the mean of
    `pilot_annotators` (attenuation by the square root of the reliability); kept inside (-0.999, 0.999)."""
    if not rho > 0:
        raise ValueError(f"the annotators' agreement (alpha {rho:.3f}) is not above 0: more annotators would not "
                         "make the human score more reliable")
    scaled = r * np.sqrt(reliability(rho, annotators) / reliability(rho, pilot_annotators))
    return np.clip(scaled, -0.999, 0.999)


def correlation_width(r, units, level: float = 0.95, inflation: float = 1.0) -> np.ndarray:
    """The width of Fisher's z interval of a correlation r (columns, one per number of annotators) over `units`
    outputs (rows); NaN below 4 outputs. `inflation` multiplies the variance of z (`correlation_inflation`)."""
    n = np.asarray(units, dtype=float)[:, None]
    z = np.arctanh(np.asarray(r, dtype=float))[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        half = _z(level) * np.sqrt(inflation / (n - 3))
        width = np.tanh(z + half) - np.tanh(z - half)
    return np.where(n >= 4, width, np.nan)


def pearson_bootstrap(x, y, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Pearson's r of `resamples` bootstrap resamples of the pairs (x, y)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    picked = np.random.default_rng(seed).integers(0, len(x), (resamples, len(x)))
    a, b = x[picked], y[picked]
    a, b = a - a.mean(1, keepdims=True), b - b.mean(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))


def correlation_inflation(bootstrapped, units: int, level: float = 0.95) -> float:
    """How much wider a pilot's bootstrap range of z = atanh(r) is than Fisher's 1 / sqrt(n - 3) says, as a factor
    on the variance (a skewed metric such as HANNA's Repetition-1 gives about 1.5); never below 1."""
    observed = central_width(np.arctanh(np.clip(np.asarray(bootstrapped, dtype=float), -0.999999, 0.999999)), level)
    if units < 4 or not np.isfinite(observed):
        return 1.0
    return max(float((observed / (2 * _z(level) / np.sqrt(units - 3))) ** 2), 1.0)


def central_width(estimates, level: float = 0.95) -> float:
    """The width of the central `level` range of estimates over simulated or resampled studies."""
    estimates = np.asarray(estimates, dtype=float)
    estimates = estimates[np.isfinite(estimates)]
    if len(estimates) < 2:
        return float("nan")
    low, high = np.quantile(estimates, [0.5 - level / 2, 0.5 + level / 2])
    return float(high - low)
