"""Human-metric alignment: pure functions on paired arrays or tidy frames.

Confidence intervals: Fisher z with the standard errors of Fieller, Hartley & Pearson (1957)
(Pearson 1/sqrt(n-3), Spearman sqrt(1.06/(n-3)), Kendall sqrt(0.437/(n-4))), and a paired percentile bootstrap
over items.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score

METHODS = {
    "pearson": (lambda x, y: stats.pearsonr(x, y), lambda n: 1 / np.sqrt(n - 3), 4),
    "spearman": (lambda x, y: stats.spearmanr(x, y), lambda n: np.sqrt(1.06 / (n - 3)), 4),
    "kendall": (lambda x, y: stats.kendalltau(x, y), lambda n: np.sqrt(0.437 / (n - 4)), 5),
}


def fisher_ci(r: float, n: int, method: str = "pearson", level: float = 0.95) -> tuple[float, float]:
    """The confidence interval of a correlation by Fisher's z (Spearman's and Kendall's with the standard errors of
    Fieller, Hartley and Pearson 1957); NaN below the least n."""
    _, se, min_n = METHODS[method]
    if n < min_n or np.isnan(r) or abs(r) >= 1:
        return float("nan"), float("nan")
    z, q = np.arctanh(r), stats.norm.ppf(0.5 + level / 2)
    return float(np.tanh(z - q * se(n))), float(np.tanh(z + q * se(n)))


def correlations(human, model, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Pearson, Spearman and Kendall tau of paired values, with p-values, Fisher and bootstrap CIs.

    Pairs with a missing side are dropped. Fewer than 3 pairs, or a constant side, give NaN."""
    x, y = np.asarray(human, dtype=float), np.asarray(model, dtype=float)
    if x.shape != y.shape:
        raise ValueError("human and model must have the same length")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = len(x)
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, n, size=(n_boot, n)) if n >= 3 else None
    rows = []
    for name, (func, _, _) in METHODS.items():
        r, p = (np.nan, np.nan) if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0 else map(float, func(x, y))
        lo, hi = fisher_ci(r, n, name, level)
        b_lo = b_hi = np.nan
        if samples is not None and not np.isnan(r):
            boot = np.array([_stat(func, x[s], y[s]) for s in samples])
            boot = boot[~np.isnan(boot)]
            if len(boot):
                b_lo, b_hi = np.percentile(boot, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
        rows.append({"method": name, "n": n, "r": r, "p": p, "fisher_lo": lo, "fisher_hi": hi,
                     "boot_lo": float(b_lo), "boot_hi": float(b_hi)})
    return pd.DataFrame(rows)


def _stat(func, x, y) -> float:
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.nan
    return float(func(x, y)[0])


def paired_means(human: pd.DataFrame, model: pd.DataFrame, by: str = "item") -> pd.DataFrame:
    """Join mean human value and mean model value per `by` (item for segment level, system for system level).

    human: columns item, system, value (one row per rating); model: item, system, value (one row per item)."""
    h = human.groupby(by)["value"].mean().rename("human")
    m = model.groupby(by)["value"].mean().rename("model")
    return pd.concat([h, m], axis=1, join="inner").reset_index()


def categorical_agreement(human_labels, model_labels) -> dict:
    """Accuracy, macro F1 and Cohen's kappa of model labels against human (e.g. majority) labels."""
    h, m = np.asarray(human_labels, dtype=object), np.asarray(model_labels, dtype=object)
    keep = pd.notna(h) & pd.notna(m)
    h, m = h[keep], m[keep]
    if len(h) == 0:
        raise ValueError("no items with both a human and a model label")
    kappa = cohen_kappa_score(h, m) if len(set(h) | set(m)) > 1 else float("nan")
    return {"n": int(len(h)), "accuracy": float(accuracy_score(h, m)),
            "macro_f1": float(f1_score(h, m, average="macro", zero_division=0)), "kappa": float(kappa)}


def judge_agreement(human_labels, judge_labels, weights: str | None = None, labels=None) -> tuple[dict, pd.DataFrame]:
    """An LLM judge (or any labeller) against the human labels of the same items (e.g. their majority): Cohen's
    kappa (Cohen 1960; weighted, Cohen 1968, with weights None / 'linear' / 'quadratic'), accuracy and the
    confusion matrix (rows: human, columns: judge)."""
    h, j = np.asarray(human_labels, dtype=object), np.asarray(judge_labels, dtype=object)
    keep = pd.notna(h) & pd.notna(j)
    h, j = h[keep], j[keep]
    if len(h) == 0:
        raise ValueError("no items with both a human and a judge label")
    try:  # numbers as numbers, anything else as text (scikit-learn refuses mixed object arrays)
        h, j = h.astype(float), j.astype(float)
        labels = None if labels is None else [float(x) for x in labels]
    except (TypeError, ValueError):
        h, j = h.astype(str), j.astype(str)
        labels = None if labels is None else [str(x) for x in labels]
    labels = list(labels) if labels is not None else sorted(set(h) | set(j))
    kappa = cohen_kappa_score(h, j, weights=weights, labels=labels) if len(set(h) | set(j)) > 1 else float("nan")
    confusion = pd.crosstab(pd.Categorical(h, categories=labels), pd.Categorical(j, categories=labels),
                            rownames=["human"], colnames=["judge"], dropna=False)
    return {"n": int(len(h)), "accuracy": float(np.mean(h == j)), "kappa": float(kappa),
            "weights": weights or "none"}, confusion


def expected_calibration_error(confidence, correct, bins: int = 10) -> tuple[float, pd.DataFrame]:
    """ECE (Naeini et al. 2015; Guo et al. 2017, "On Calibration of Modern Neural Networks"): the judge's stated
    confidence vs how often it is right, over `bins` equal-width bins of confidence (0, 1]:
    ECE = sum_b (n_b / n) |accuracy_b - mean confidence_b|. Returns (ECE, the reliability table)."""
    c = np.asarray(confidence, dtype=float)
    y = np.asarray(correct, dtype=float)
    keep = ~np.isnan(c) & ~np.isnan(y)
    c, y = c[keep], y[keep]
    if len(c) == 0:
        raise ValueError("no confidences to calibrate")
    if ((c < 0) | (c > 1)).any():
        raise ValueError("confidences must lie in [0, 1]")
    which = np.clip(np.ceil(c * bins).astype(int) - 1, 0, bins - 1)  # (k/bins, (k+1)/bins]; 0 goes to the first bin
    n = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.bincount(which, weights=y, minlength=bins) / n
        conf = np.bincount(which, weights=c, minlength=bins) / n
    used = n > 0
    ece = float(np.sum(n[used] / len(c) * np.abs(acc[used] - conf[used])))
    table = pd.DataFrame({"bin_low": np.arange(bins) / bins, "bin_high": np.arange(1, bins + 1) / bins, "n": n,
                          "accuracy": acc, "confidence": conf})
    return ece, table[used].reset_index(drop=True)
