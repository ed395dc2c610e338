"""How far a reproduction of a human evaluation agrees with the original: the small-sample coefficient of variation
of a score measured by several studies, and the agreement of their system scores and item-level means.

CV* (Belz, Popović & Mille, "Quantified Reproducibility Assessment of NLP Results", ACL 2022): for n measurements of
one score (one per study), CV* = (1 + 1/(4n)) x 100 x s' / mean, where s' = s / c4(n) is the unbiased standard
deviation (s with n - 1, c4(n) = sqrt(2 / (n - 1)) Gamma(n / 2) / Gamma((n - 1) / 2)). The measurements must be on a
scale that starts at 0 (a 1-5 rating is shifted to 0-4 first), or CV is not comparable across studies; a mean of 0
or below has no CV.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .alignment import fisher_ci


def c4(n: int) -> float:
    """The bias of the sample standard deviation of n normal values: E[s] = c4(n) sigma."""
    if n < 2:
        raise ValueError("c4 needs 2 or more values")
    return math.sqrt(2 / (n - 1)) * math.exp(math.lgamma(n / 2) - math.lgamma((n - 1) / 2))


def cv_star(measurements, shift: float = 0.0) -> dict[str, float]:
    """CV* of one score measured by several studies (`measurements`, on the score's scale), after subtracting
    `shift` (the scale's minimum, so that it starts at 0). Returns cv_star, mean, sd (unbiased, s / c4) and n.

    Belz, Popović & Mille (2022), Table 4: BLEU of NTS_def in 7 reproductions, SARI in 5, BLEU of NTS-w2v_def in 6,
    SARI in 4 have CV* 1.562, 2.487, 4.176 and 3.572:

    >>> [round(cv_star(m)["cv_star"], 3) for m in ([84.51, 84.50, 87.46, 85.60, 84.20, 86.61, 86.20],
    ...                                            [30.65, 30.65, 29.13, 30.65, 29.96],
    ...                                            [87.50, 80.75, 89.36, 88.10, 89.64, 88.80],
    ...                                            [31.11, 30.28, 31.11, 29.12])]
    [1.562, 2.487, 4.176, 3.572]
    """
    values = np.asarray(measurements, dtype=float) - shift
    if values.ndim != 1 or len(values) < 2 or not np.isfinite(values).all():
        raise ValueError("CV* needs two or more finite measurements of one score")
    mean = float(values.mean())
    if mean <= 0:
        raise ValueError(f"CV* needs a positive mean on a scale that starts at 0 (mean {mean:g} after the shift)")
    n = len(values)
    sd = float(values.std(ddof=1)) / c4(n)
    return {"cv_star": (1 + 1 / (4 * n)) * 100 * sd / mean, "mean": mean, "sd": sd, "n": n}


def correlation_interval(x, y, alpha: float = 0.05) -> dict[str, float]:
    """Pearson's r with its Fisher-z interval, Spearman's rho and Kendall's tau-b of paired values (two studies'
    scores of the same systems, or of the same items). NaN where fewer than 3 pairs (4 for an interval)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    out = {"n": n, "pearson": np.nan, "pearson_lo": np.nan, "pearson_hi": np.nan, "spearman": np.nan,
           "kendall": np.nan}
    if n < 3 or np.std(x) == 0 or np.std(y) == 0:
        return out
    r = float(np.corrcoef(x, y)[0, 1])
    lo, hi = fisher_ci(r, n, "pearson", 1 - alpha)  # NaN below 4 pairs or at |r| = 1
    out.update(pearson=r, pearson_lo=lo, pearson_hi=hi, spearman=float(stats.spearmanr(x, y)[0]),
               kendall=float(stats.kendalltau(x, y)[0]))
    return out
