"""Chance-corrected agreement for categorical and ordinal ratings with missing data: Gwet's AC1/AC2 and the
generalised (weighted, varying raters per item) Fleiss kappa.

Gwet, K. L. (2008), "Computing inter-rater reliability and its variance in the presence of high agreement",
British Journal of Mathematical and Statistical Psychology 61; Gwet (2014), Handbook of Inter-Rater Reliability,
4th ed., ch. 2-3 (the formulas of the irrCAC package):
  r_ik  = ratings of item i in category k, r_i = sum_k r_ik, r*_ik = sum_l w_kl r_il
  p_a   = mean over items with r_i >= 2 of sum_k r_ik (r*_ik - 1) / (r_i (r_i - 1))
  pi_k  = mean over all rated items of r_ik / r_i
  AC:     p_e = T_w / (q (q - 1)) * sum_k pi_k (1 - pi_k)     (T_w = sum of all weights, q categories)
  Fleiss: p_e = sum_{k,l} w_kl pi_k pi_l
  coefficient = (p_a - p_e) / (1 - p_e)
With identity weights Gwet's coefficient is AC1; with other weights it is AC2.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .agreement import drop_missing

WEIGHTS = ("identity", "linear", "quadratic", "ordinal")


def weight_matrix(categories, weights: str = "identity") -> np.ndarray:
    """q x q agreement weights: identity; linear / quadratic on the category values; Gwet's ordinal weights on
    the ranks (1 - C(|k-l|+1, 2) / max)."""
    q = len(categories)
    if weights == "identity":
        return np.eye(q)
    if weights == "ordinal":
        rank = np.arange(q)
        n = np.abs(rank[:, None] - rank[None, :]) + 1
        w = n * (n - 1) / 2.0
        return 1 - w / w.max() if w.max() > 0 else np.ones((q, q))
    if weights in ("linear", "quadratic"):
        try:
            values = np.asarray(categories, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{weights} weights need numeric categories") from None
        spread = values.max() - values.min()
        if spread == 0:
            return np.ones((q, q))
        d = np.abs(values[:, None] - values[None, :]) / spread
        return 1 - (d if weights == "linear" else d**2)
    raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")


def _counts(frame: pd.DataFrame, categories):
    if categories is None:
        categories = sorted(frame["value"].unique())
    unknown = set(frame["value"]) - set(categories)
    if unknown:
        raise ValueError(f"values outside the categories: {sorted(map(str, unknown))[:5]}")
    codes = pd.Categorical(frame["value"], categories=list(categories)).codes.astype(np.int64)
    item = frame["item"]
    item_codes, items = pd.factorize(item if item.dtype.kind in "iu" else item.astype(str))  # codes are items already
    q = len(categories)
    counts = np.bincount(item_codes * q + codes, minlength=len(items) * q).reshape(len(items), q).astype(float)
    return counts, list(categories)


def chance_corrected(frame: pd.DataFrame, coefficient: str = "gwet", weights: str = "identity", categories=None,
                     missing=()) -> dict:
    """Gwet's AC1/AC2 (`coefficient="gwet"`) or Fleiss' kappa (`"fleiss"`) of a long table (item, annotator,
    value), any number of ratings per item. Returns {value, pa, pe, items}."""
    if coefficient not in ("gwet", "fleiss"):
        raise ValueError(f"coefficient must be gwet or fleiss, got {coefficient!r}")
    frame = drop_missing(frame, missing)
    counts, categories = _counts(frame, categories)
    q = len(categories)
    if q < 2:
        raise ValueError("chance-corrected agreement needs at least two categories")
    w = weight_matrix(categories, weights)
    r = counts.sum(1)
    paired = r >= 2
    if not paired.any():
        raise ValueError("agreement needs at least one item rated twice")
    weighted = counts @ w.T
    pa = float(((counts * (weighted - 1)).sum(1)[paired] / (r[paired] * (r[paired] - 1))).mean())
    pi = (counts[r > 0] / r[r > 0, None]).mean(0)
    if coefficient == "gwet":
        pe = float(w.sum() * np.sum(pi * (1 - pi)) / (q * (q - 1)))
    else:
        pe = float(pi @ w @ pi)
    value = (pa - pe) / (1 - pe) if pe != 1 else float("nan")
    return {"value": float(value), "pa": pa, "pe": pe, "items": int(paired.sum())}
