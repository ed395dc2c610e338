"""Significance of differences between metrics and between systems: pure, vectorised functions.

- Williams test for two dependent correlations sharing the human side (Williams 1959; recommended for metric
  comparison by Graham & Baldwin 2014, "Testing for Significance of Increased Correlation with Human Judgment").
- PERM-BOTH permutation test (Deutsch, Dror & Roth 2021, "A Statistical Analysis of Summarization Evaluation
  Metrics using Resampling Methods", TACL), as mt-metrics-eval implements it: both metrics are z-scored, and
  each resample swaps every unit's two metric scores with probability 1/2. All resamples are drawn at once and
  their correlations computed as one batch.
- Significance clusters (the WMT metrics-task ranking): metrics sorted by correlation; a new cluster starts at a
  metric that is significantly worse than the best one of the current cluster.
- System ranking from human ratings with a paired bootstrap over items (Koehn 2004, "Statistical Significance
  Tests for Machine Translation Evaluation").
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from .agreement import resample_counts, resampled_sums
from .correlation import arrange, batch_correlation


def williams_test(r12: float, r13: float, r23: float, n: int, one_sided: bool = True) -> float:
    """p-value of Williams' t for r12 (human, metric 1) vs r13 (human, metric 2) given r23 (metric 1, metric 2):
    t = (r12 - r13) sqrt((n-1)(1+r23)) / sqrt(2K(n-1)/(n-3) + ((r12+r13)/2)^2 (1-r23)^3),
    K = 1 - r12^2 - r13^2 - r23^2 + 2 r12 r13 r23; one-sided p = t.sf(|t|, n-3) (the observed direction)."""
    if n <= 3:
        raise ValueError("the Williams test needs more than 3 paired values")
    k = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    rbar = (r12 + r13) / 2
    denominator = np.sqrt(max(2 * (n - 1) / (n - 3) * k + rbar**2 * (1 - r23) ** 3, 0.0))
    if not denominator > 0:  # the two metrics are perfectly correlated (r23 = 1, so r12 = r13): no difference
        return 0.5 if one_sided else 1.0
    t = (r12 - r13) * np.sqrt((n - 1) * (1 + r23)) / denominator
    p = float(stats.t.sf(np.abs(t), n - 3))
    return p if one_sided else 2 * p


def _zscore(x: np.ndarray) -> np.ndarray:
    """z-score over the present values (population sd, as scipy.stats.zscore)."""
    present = x[~np.isnan(x)]
    sd = present.std()
    return (x - present.mean()) / (sd if sd > 0 else 1.0)


def perm_both(human, metric_1, metric_2, method: str = "pearson", group_by: str = "none",
              resamples: int = 1000, seed: int = 0, chunk: int = 100) -> tuple[float, float]:
    """(p, delta): one-sided PERM-BOTH p-value for H1 "metric 2 correlates better than metric 1", and the observed
    delta = corr(metric 2) - corr(metric 1). Inputs are `systems x items` matrices (or vectors of system scores);
    the correlation is `method` averaged over `group_by` groups. p = share of resamples with delta >= observed
    (the observed configuration is not added)."""
    h = arrange(np.atleast_2d(np.asarray(human, float)), group_by)
    a = arrange(np.atleast_2d(np.asarray(metric_1, float)), group_by)
    b = arrange(np.atleast_2d(np.asarray(metric_2, float)), group_by)
    present = ~np.isnan(h)
    a = np.where(present, a, np.nan)
    b = np.where(present, b, np.nan)
    a, b = _zscore(a), _zscore(b)

    def corr(scores):
        values = batch_correlation(h, scores, method)
        kept = ~np.isnan(values)
        counts = kept.sum(-1)
        with np.errstate(invalid="ignore"):
            return np.where(counts > 0, np.where(kept, values, 0).sum(-1) / counts, 0.0)

    delta = float(corr(b[None])[0] - corr(a[None])[0])
    rng = np.random.default_rng(seed)
    larger = 0
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        swap = rng.random((size,) + a.shape) < 0.5
        m1 = np.where(swap, b, a)
        m2 = np.where(swap, a, b)
        larger += int(np.count_nonzero(corr(m2) - corr(m1) >= delta))
    return larger / resamples, delta


def significance_clusters(correlations: pd.Series, p_values: pd.DataFrame, alpha: float = 0.05) -> pd.Series:
    """Cluster rank (1 = best) per metric. `correlations`: metric -> value; `p_values.loc[a, b]`: p-value of
    "a correlates better than b". Metrics are taken best first; a metric opens a new cluster when it is
    significantly worse than the best metric of the current cluster (mt-metrics-eval's greedy ranking)."""
    order = correlations.sort_values(ascending=False).index
    ranks, rank, head = {}, 1, None
    for name in order:
        if head is None:
            head = name
        elif p_values.loc[head, name] < alpha:
            rank, head = rank + 1, name
        ranks[name] = rank
    return pd.Series(ranks, name="cluster")


def system_scores(matrix, counts=None):
    """Each system's mean over its segments (NaN missing) of a `systems x segments` matrix; with `counts`
    (resamples x segments, `resample_counts`), the means of every bootstrap resample of the segments (resamples x
    systems)."""
    present = ~np.isnan(matrix)
    filled = np.where(present, matrix, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if counts is None:
            return filled.sum(1) / present.sum(1)
        return resampled_sums(counts, filled.T) / resampled_sums(counts, present.T)


def system_ranking(scores: np.ndarray, systems, resamples: int = 1000, level: float = 0.95, seed: int = 0):
    """System means with paired-bootstrap CIs and pairwise win rates, from `systems x items` segment scores.

    Items are resampled together for all systems (paired); items missing for a system are left out of that
    system's mean. Returns (table: system, mean, lo, hi, rank; wins: `p_better[a, b]` = share of resamples in
    which a's mean is not above b's, i.e. the one-sided bootstrap p-value of "a is better than b")."""
    scores = np.asarray(scores, dtype=float)
    if scores.shape[1] == 0:
        raise ValueError("no items to rank systems on")
    means = system_scores(scores)
    boot = system_scores(scores, resample_counts(np.random.default_rng(seed), scores.shape[1], resamples))
    tail = (1 - level) / 2 * 100
    lo, hi = np.nanpercentile(boot, [tail, 100 - tail], axis=0)
    not_better = (boot[:, :, None] <= boot[:, None, :]).mean(0)
    np.fill_diagonal(not_better, np.nan)
    table = pd.DataFrame({"system": list(systems), "mean": means, "lo": lo, "hi": hi})
    table["rank"] = table["mean"].rank(ascending=False, method="min").astype(int)
    return table.sort_values("rank").reset_index(drop=True), pd.DataFrame(not_better, index=list(systems),
                                                                           columns=list(systems))

