"""The vectorised statistics against straightforward implementations on random data (Hypothesis): grouped
correlations against scipy group by group, Kendall variants and tie calibration against counting pairs one by one,
the large-group path against the pair-counting path, Fleiss' kappa against statsmodels."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from evalstudio.stats import coefficients
from evalstudio.stats import correlation as corr
from evalstudio.stats import significance as sig

# small integer scores: many ties; NaN = missing
cells = st.one_of(st.integers(1, 4).map(float), st.just(np.nan))
matrices = st.integers(2, 6).flatmap(lambda g: st.integers(2, 7).flatmap(
    lambda m: st.tuples(arrays(float, (g, m), elements=cells), arrays(float, (g, m), elements=cells))))
SCIPY = {"pearson": lambda x, y: stats.pearsonr(x, y)[0], "spearman": lambda x, y: stats.spearmanr(x, y)[0],
         "kendall_b": lambda x, y: stats.kendalltau(x, y)[0],
         "kendall_c": lambda x, y: stats.kendalltau(x, y, variant="c")[0]}


def _pairs(x, y):
    """(concordant, discordant, tied in x only, tied in y only, tied in both), counted one pair at a time."""
    c = d = tx = ty = tb = 0
    for i, j in combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            tb += 1
        elif dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif dx == dy:
            c += 1
        else:
            d += 1
    return c, d, tx, ty, tb


@settings(max_examples=150, deadline=None)
@given(data=matrices, method=st.sampled_from(list(SCIPY)))
def test_grouped_correlation_equals_scipy_group_by_group(data, method):
    h, m = data
    got = corr.batch_correlation(h, m, method)
    for g in range(h.shape[0]):
        ok = ~np.isnan(h[g]) & ~np.isnan(m[g])
        x, y = h[g][ok], m[g][ok]
        if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
            assert np.isnan(got[g])
        else:
            assert got[g] == pytest.approx(SCIPY[method](x, y), abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(data=matrices)
def test_kendall_23_and_acc_23_count_pairs_like_the_definition(data):
    h, m = data
    tau = corr.batch_correlation(h, m, "kendall_23")
    acc = corr.batch_correlation(h, m, "acc_23")
    for g in range(h.shape[0]):
        ok = ~np.isnan(h[g]) & ~np.isnan(m[g])
        c, d, th, tm, tb = _pairs(h[g][ok], m[g][ok])
        n = c + d + th + tm + tb
        if n == 0:
            assert np.isnan(tau[g]) and np.isnan(acc[g])
        else:
            assert tau[g] == pytest.approx((c + tb - d - th - tm) / n, abs=1e-12)
            assert acc[g] == pytest.approx((c + tb) / n, abs=1e-12)


@pytest.mark.parametrize("search_all_up_to, blocks, pair_cells", [(4096, 64, 1_000_000), (2, 2, 1_000_000),
                                                                  (2, 3, 1_000_000), (4096, 64, 1), (2, 3, 7)],
                         ids=["one search", "in 2 blocks", "in 3 blocks", "one group at a time", "blocks and chunks"])
@settings(max_examples=100, deadline=None)
@given(data=matrices, noise=st.lists(st.floats(-0.6, 0.6), min_size=42, max_size=42))
def test_tie_calibration_is_the_best_threshold_tried_one_by_one(data, noise, search_all_up_to, blocks, pair_cells):
    """With many thresholds the concordant gaps are placed block by block, and blocks that cannot hold the maximum
    are skipped (`_SEARCH_ALL_UP_TO`, `_BLOCKS`); the pairs are made a few groups at a time (`_PAIR_CELLS`). Forced
    here on small data, the answer must not change."""
    before = corr._SEARCH_ALL_UP_TO, corr._BLOCKS, corr._PAIR_CELLS
    corr._SEARCH_ALL_UP_TO, corr._BLOCKS, corr._PAIR_CELLS = search_all_up_to, blocks, pair_cells
    try:
        _tie_calibration_is_the_best_threshold(data, noise)
    finally:
        corr._SEARCH_ALL_UP_TO, corr._BLOCKS, corr._PAIR_CELLS = before


def test_tie_calibration_refuses_infinite_scores():
    """Missing is NaN; an infinity would make a pair's difference NaN and drop it unseen."""
    h = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 1.0]])
    with pytest.raises(ValueError, match="finite"):
        corr.tie_calibrated_accuracy(h, np.array([[1.0, np.inf, 3.0], [1.0, 2.0, 3.0]]), "system")


def test_sign_flips_are_mt_metrics_evals_permutations_in_bytes():
    """The permutations of soft pairwise accuracy, drawn 64 at a time into 8-bit integers, are the rounded 32-bit
    uniforms of mt-metrics-eval's compute_pairwise_p_values, drawn at once; and the p-values from them, 64
    permutations at a time, are those of the 32-bit product of the whole table."""
    flips = corr.sign_flips(300, 130, seed=4)
    rng = np.random.default_rng(4)
    drawn = rng.random(size=(130, 300), dtype=np.float32)
    np.rint(drawn, out=drawn, casting="same_kind")
    assert flips.dtype == np.int8 and np.array_equal(flips, drawn * 2.0 - 1.0)
    # whole numbers: their 32-bit sums are exact in any order, so the comparison holds with any BLAS
    scores = np.random.default_rng(2).integers(-20, 20, size=(5, 300)).astype(np.float32)
    partial = (drawn * 2.0 - 1.0) @ scores.T
    i, j = np.triu_indices(5, 1)
    expected = ((partial[:, i] - partial[:, j]) >= (scores.sum(1)[i] - scores.sum(1)[j])).mean(0)
    assert np.array_equal(corr.pairwise_p_values(scores, 130, flips=flips)[i, j], expected)


def _tie_calibration_is_the_best_threshold(data, noise):
    h, m = data
    m = m + np.resize(np.round(noise, 2), m.shape)  # metric scores with small gaps to tie
    acc, eps = corr.tie_calibrated_accuracy(h, m, "system")  # groups = rows here
    g_h, g_m = corr.arrange(h, "system"), corr.arrange(m, "system")
    gaps = sorted({0.0} | {abs(a - b) for row_h, row_m in zip(g_h, g_m) for (i, j) in combinations(range(len(row_m)), 2)
                           for a, b in [(row_m[i], row_m[j])] if not np.isnan(row_h[i] - row_h[j]) and not np.isnan(a - b)})
    if len(gaps) == 1 and np.isnan(acc):
        return
    tried = [corr.acc23_at(h, m, e, "system") for e in gaps]
    best = int(np.flatnonzero(np.array(tried) >= max(tried) - 1e-12)[0])  # the smallest of the equally good ones
    assert acc == pytest.approx(tried[best], abs=1e-12) and eps == pytest.approx(gaps[best], abs=1e-12)


@pytest.mark.parametrize("method", ["kendall_b", "kendall_c"])
def test_large_groups_go_through_scipy_with_the_same_result(monkeypatch, method):
    rng = np.random.default_rng(0)
    h = rng.integers(1, 6, (3, 40)).astype(float)
    m = rng.integers(1, 6, (3, 40)).astype(float)
    h[0, :5] = np.nan
    pairs = corr.batch_correlation(h, m, method)
    monkeypatch.setattr(corr, "_PAIR_CELLS", 1)  # one group per chunk: the same counts
    assert corr.batch_correlation(h, m, method) == pytest.approx(pairs, abs=1e-12)
    monkeypatch.setattr(corr, "_COUNT_PAIRS_UP_TO", 39)  # 40 members: scipy's tau, which is faster there
    assert corr.batch_correlation(h, m, method) == pytest.approx(pairs, abs=1e-12)
    monkeypatch.setattr(corr, "_COUNT_PAIRS_UP_TO", 256)
    monkeypatch.setattr(corr, "_PAIR_LIMIT", 100)  # 40 x 40 > 100: the scipy path
    assert corr.batch_correlation(h, m, method) == pytest.approx(pairs, abs=1e-12)
    with pytest.raises(ValueError, match="group by item"):
        corr.batch_correlation(h, m, "acc_23")


def test_soft_pairwise_accuracy_of_a_metric_equal_to_the_humans_is_one():
    rng = np.random.default_rng(1)
    human = rng.normal(size=(6, 50))
    assert corr.soft_pairwise_accuracy(human, human) == 1.0
    assert 0.0 <= corr.soft_pairwise_accuracy(human, rng.normal(size=(6, 50))) <= 1.0


def test_perm_both_of_a_metric_against_itself_is_not_significant():
    rng = np.random.default_rng(2)
    human = rng.normal(size=12)
    metric = human + rng.normal(scale=0.5, size=12)
    p, delta = sig.perm_both(human, metric, metric.copy(), resamples=200)
    assert delta == 0.0 and p == 1.0  # every resample ties the observed delta of 0


def test_system_ranking_means_and_intervals():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(4, 30)) + np.arange(4)[:, None]
    scores[1, :3] = np.nan
    table, p = sig.system_ranking(scores, ["a", "b", "c", "d"], resamples=300)
    means = table.set_index("system")["mean"]
    assert means.to_dict() == pytest.approx(dict(zip("abcd", np.nanmean(scores, axis=1))))
    assert (table["lo"] <= table["mean"]).all() and (table["mean"] <= table["hi"]).all()
    assert table["system"].tolist() == ["d", "c", "b", "a"] and p.loc["d", "a"] < 0.05


@settings(max_examples=60, deadline=None)
@given(counts=arrays(int, st.tuples(st.integers(2, 12), st.just(3)), elements=st.integers(0, 3)))
def test_fleiss_identity_equals_statsmodels_on_complete_data(counts):
    from statsmodels.stats.inter_rater import fleiss_kappa

    counts = counts[counts.sum(1) > 0]
    counts[:, 0] += 4 - counts.sum(1).clip(max=4)  # every item: at least 4 ratings...
    counts = counts[counts.sum(1) == 4]  # ...exactly 4, as statsmodels requires
    if len(counts) < 2:
        return
    rows = [{"item": i, "annotator": f"r{k}", "value": c} for i, row in enumerate(counts)
            for k, c in enumerate(np.repeat(np.arange(3), row))]
    frame = pd.DataFrame(rows)
    ours = coefficients.chance_corrected(frame, "fleiss", "identity", categories=[0, 1, 2])["value"]
    with np.errstate(invalid="ignore", divide="ignore"):  # every rating in one category: statsmodels divides 0 by 0
        theirs = fleiss_kappa(counts, method="fleiss")
    if np.isnan(theirs):
        assert np.isnan(ours) or not np.isfinite(theirs)
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)
