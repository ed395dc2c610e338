"""An independent form of Hall's (1992) skewness-corrected interval, the tests' oracle for evalstudio.stats.
small_sample: Hall's transformation h(T) = T + g T^2 / 3 + g^2 T^3 / 27 + g / 6 of the studentised mean, solved
for |h(T)| = q by root finding (scipy's brentq) instead of the closed-form inverse the package uses, and the
estimator's skewness from its definition (third cumulant over the variance to the power 1.5). evalstudio keeps the
symmetric interval's end where Hall's is shorter (`lengthened`)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq


def third_moment(values) -> float:
    v = np.asarray(values, dtype=float)
    return float(np.mean((v - v.mean()) ** 3))


def hall_interval(estimate: float, se: float, skewness: float, q: float,
                  constant: float | None = None) -> tuple[float, float]:
    """`constant`: the skewness in the constant term g / 6 where it is not `skewness` (drawn without replacement)."""
    constant = skewness if constant is None else constant

    def h(t):
        return t + skewness * t ** 2 / 3 + skewness ** 2 * t ** 3 / 27 + constant / 6

    upper_t = brentq(lambda t: h(t) - q, -1e6, 1e6, xtol=1e-13)
    lower_t = brentq(lambda t: h(t) + q, -1e6, 1e6, xtol=1e-13)
    return estimate - se * upper_t, estimate - se * lower_t


def lengthened(estimate: float, se: float, skewness: float, q: float,
               constant: float | None = None) -> tuple[float, float]:
    """Hall's interval, but never shorter than estimate +- q se on either side."""
    lo, hi = hall_interval(estimate, se, skewness, q, constant)
    return min(lo, estimate - q * se), max(hi, estimate + q * se)
