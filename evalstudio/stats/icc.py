"""Intraclass correlation: the six forms of Shrout & Fleiss (1979), "Intraclass correlations: uses in assessing
rater reliability", Psychological Bulletin 86(2), with McGraw & Wong's (1996) names, F tests and confidence
intervals (the formulas pingouin's `intraclass_corr` uses, checked against it in the tests).

  ICC1  one-way random, single rater        (MSR - MSW) / (MSR + (k-1) MSW)
  ICC2  two-way random, absolute, single    (MSR - MSE) / (MSR + (k-1) MSE + k (MSC - MSE) / n)
  ICC3  two-way mixed, consistency, single  (MSR - MSE) / (MSR + (k-1) MSE)
  ICC1k, ICC2k, ICC3k: the same for the mean of k raters (ICC2k is the reliability of averaged raters).

Needs a complete design: n items x k raters, every item rated once by every rater. With crowd data, raters are
usually slots (different people per item): then ICC1 is the model that matches the design.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import f as f_dist

from .keys import duplicated_keys

FORMS = ("ICC1", "ICC2", "ICC3", "ICC1k", "ICC2k", "ICC3k")


def icc(frame: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """All six ICC forms of a long table (item, annotator, value) with a complete design.

    Returns one row per form: type, value, F, df1, df2, p, lo, hi."""
    # the items x annotators table, both sorted as a pivot table sorts them (so that every sum runs in its order),
    # placed from integer codes: a pivot table of a million ratings took 70 MB more
    item, items = pd.factorize(frame["item"], sort=True)
    who, annotators = pd.factorize(frame["annotator"], sort=True)
    cell = item.astype(np.int64) * len(annotators) + who
    if (item < 0).any() or (who < 0).any():
        raise ValueError("ICC needs an item and an annotator for every rating; some are missing")
    if duplicated_keys(cell, len(items) * len(annotators)).any():
        raise ValueError("ICC needs one rating per (item, annotator); some item was rated twice by one annotator")
    x = np.full((len(items), len(annotators)), np.nan)
    x.reshape(-1)[cell] = frame["value"].to_numpy(dtype=float)
    if np.isnan(x).any():
        raise ValueError(f"ICC needs every item rated by every annotator ({int(np.isnan(x).any(1).sum())} of "
                         f"{len(x)} items are not); use Krippendorff's alpha for incomplete data")
    n, k = x.shape
    if n < 2 or k < 2:
        raise ValueError("ICC needs at least two items and two annotators")
    grand = x.mean()
    ss_rows = k * ((x.mean(1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(0) - grand) ** 2).sum()
    ss_total = ((x - grand) ** 2).sum()
    ss_err = ss_total - ss_rows - ss_cols
    msr = ss_rows / (n - 1)
    msc = ss_cols / (k - 1)
    mse = ss_err / ((n - 1) * (k - 1))
    msw = (ss_cols + ss_err) / (n * (k - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        values = {
            "ICC1": (msr - msw) / (msr + (k - 1) * msw),
            "ICC2": (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n),
            "ICC3": (msr - mse) / (msr + (k - 1) * mse),
            "ICC1k": (msr - msw) / msr,
            "ICC2k": (msr - mse) / (msr + (msc - mse) / n),
            "ICC3k": (msr - mse) / msr,
        }
        a = 1 - level
        df1, df1kd, df2kd = n - 1, n * (k - 1), (n - 1) * (k - 1)
        f1, f3 = msr / msw, msr / mse
        f1l, f1u = f1 / f_dist.ppf(1 - a / 2, df1, df1kd), f1 * f_dist.ppf(1 - a / 2, df1kd, df1)
        f3l, f3u = f3 / f_dist.ppf(1 - a / 2, df1, df2kd), f3 * f_dist.ppf(1 - a / 2, df2kd, df1)
        icc2 = values["ICC2"]
        fj = msc / mse
        vn = df2kd * (k * icc2 * fj + n * (1 + (k - 1) * icc2) - k * icc2) ** 2
        vd = df1 * k**2 * icc2**2 * fj**2 + (n * (1 + (k - 1) * icc2) - k * icc2) ** 2
        v = vn / vd
        f2u, f2l = f_dist.ppf(1 - a / 2, n - 1, v), f_dist.ppf(1 - a / 2, v, n - 1)
        l2 = n * (msr - f2u * mse) / (f2u * (k * msc + (k * n - k - n) * mse) + n * msr)
        u2 = n * (f2l * msr - mse) / (k * msc + (k * n - k - n) * mse + n * f2l * msr)
        bounds = {
            "ICC1": ((f1l - 1) / (f1l + k - 1), (f1u - 1) / (f1u + k - 1)),
            "ICC2": (l2, u2),
            "ICC3": ((f3l - 1) / (f3l + k - 1), (f3u - 1) / (f3u + k - 1)),
            "ICC1k": (1 - 1 / f1l, 1 - 1 / f1u),
            "ICC2k": (l2 * k / (1 + l2 * (k - 1)), u2 * k / (1 + u2 * (k - 1))),
            "ICC3k": (1 - 1 / f3l, 1 - 1 / f3u),
        }
    tests = {"1": (f1, df1, df1kd), "2": (f3, df1, df2kd), "3": (f3, df1, df2kd)}
    rows = []
    for form in FORMS:
        F, d1, d2 = tests[form[3]]
        rows.append({"type": form, "value": float(values[form]), "F": float(F), "df1": int(d1), "df2": int(d2),
                     "p": float(f_dist.sf(F, d1, d2)), "lo": float(bounds[form][0]), "hi": float(bounds[form][1])})
    return pd.DataFrame(rows)
