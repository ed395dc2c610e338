"""Correlation of human scores with metric scores, as mt-metrics-eval computes it (Freitag et al., WMT metrics tasks).

Scores come as matrices `systems x items` (NaN = missing). A statistic is computed per *group* and then averaged
over the groups with a defined value (macro average):

- `none`: one group, every (system, item) segment (or, at system level, the vector of system scores);
- `item`: one group per item, the systems' scores of that item ("item-grouped", WMT23's segment level);
- `system`: one group per system, its items' scores.

Within a group, a pair of values is used when both sides are present. A group whose human or metric values are
constant has no Pearson/Spearman/Kendall-b correlation; it is left out of the average (or counted as 0 with
`nan_as_zero=True`), as mt-metrics-eval does.

Methods: pearson, spearman, kendall_b, kendall_c (scipy's tau-b and tau-c), kendall_23 and acc_23 (Deutsch,
Foster & Freitag 2023, "Ties Matter: Meta-Evaluating Modern Metrics with Pairwise Accuracy and Tie Calibration",
EMNLP: tau_23 = (C + T_both - D - T_human - T_metric) / pairs, acc_23 = (C + T_both) / pairs).

Everything is vectorised over groups and over a leading batch axis (resamples of a permutation test), so a
permutation test is a few array operations, not a Python loop per resample.
"""

from __future__ import annotations

import threading

import numpy as np
from scipy import stats

METHODS = ("pearson", "spearman", "kendall_b", "kendall_c", "kendall_23", "acc_23")
GROUPINGS = ("none", "item", "system")
# pair-wise (M x M per group) computations are done in chunks of about this many pair cells (8 MB arrays: faster
# than larger ones, which leave the cache, and light on memory); groups past _PAIR_LIMIT cells are not pair-counted
_PAIR_CELLS = 1_000_000
_PAIR_LIMIT = 20_000_000
_COUNT_PAIRS_UP_TO = 256


def arrange(matrix: np.ndarray, group_by: str) -> np.ndarray:
    """A `systems x items` matrix as `groups x members` for a grouping."""
    matrix = np.asarray(matrix, dtype=float)
    if group_by == "none":
        return matrix.reshape(1, -1)
    if group_by == "system":
        return matrix
    if group_by == "item":
        return matrix.T
    raise ValueError(f"group_by must be one of {', '.join(GROUPINGS)}, got {group_by!r}")


def batch_correlation(gold: np.ndarray, scores: np.ndarray, method: str = "pearson") -> np.ndarray:
    """Correlation per group of `gold` (G x M) with `scores` (..., G x M); NaN where undefined. Shape (..., G)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    gold = np.asarray(gold, dtype=float)
    scores = np.asarray(scores, dtype=float)
    valid = ~np.isnan(gold) & ~np.isnan(scores)
    x = np.where(valid, gold, np.nan)
    y = np.where(valid, scores, np.nan)
    n = valid.sum(-1)
    constant = (_ptp(x) == 0) | (_ptp(y) == 0) | (n < 2)
    if method in ("pearson", "spearman"):
        if method == "spearman":
            x = stats.rankdata(x, axis=-1, nan_policy="omit")
            y = stats.rankdata(y, axis=-1, nan_policy="omit")
        r = _pearson(x, y, valid, n)
    else:
        r = _kendall(x, y, valid, n, method)
        if method in ("kendall_23", "acc_23"):  # always defined when the group has a pair
            return np.where(n < 2, np.nan, r)
    return np.where(constant, np.nan, np.clip(r, -1.0, 1.0))


def _ptp(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        if x.shape[-1] == 0:
            return np.zeros(x.shape[:-1])
        all_nan = np.isnan(x).all(-1)
        safe = np.where(all_nan[..., None], 0.0, x)
        return np.nanmax(safe, -1) - np.nanmin(safe, -1)


def _pearson(x, y, valid, n):
    with np.errstate(invalid="ignore", divide="ignore"):
        xm = np.nansum(x, -1) / n
        ym = np.nansum(y, -1) / n
        dx = np.where(valid, x - xm[..., None], 0.0)
        dy = np.where(valid, y - ym[..., None], 0.0)
        return (dx * dy).sum(-1) / np.sqrt((dx * dx).sum(-1) * (dy * dy).sum(-1))


def _pair_differences(x: np.ndarray, y: np.ndarray):
    """Each group's within-group pair differences (`groups x members` in, each pair i < j once), a few groups at a
    time so that no array passes _PAIR_CELLS cells: (the groups' rows, x_i - x_j, y_i - y_j), NaN where a side is
    missing."""
    i, j = np.triu_indices(x.shape[1], 1)
    step = max(1, _PAIR_CELLS // max(1, len(i)))
    for start in range(0, x.shape[0], step):
        rows = slice(start, start + step)
        xs, ys = x[rows], y[rows]
        yield rows, xs[:, i] - xs[:, j], ys[:, i] - ys[:, j]


def _kendall(x, y, valid, n, method):
    """Kendall variants from pair counts, in chunks over the group axis (M(M-1)/2 pairs per group); groups too
    large for pair counting (tau-b and tau-c only) go to scipy's O(M log M) kendalltau one by one."""
    shape = x.shape
    members = shape[-1]
    # tau-b and tau-c of groups past a few hundred members: scipy's O(M log M) is faster than counting M x M pairs
    if members * members > _PAIR_LIMIT or (members > _COUNT_PAIRS_UP_TO and method in ("kendall_b", "kendall_c")):
        if method not in ("kendall_b", "kendall_c"):
            raise ValueError(f"{method} counts pairs: groups of {members} values are too large (group by item)")
        flat_x, flat_y, flat_v = x.reshape(-1, members), y.reshape(-1, members), valid.reshape(-1, members)
        out = np.array([stats.kendalltau(a[v], b[v], variant=method[-1])[0] if v.sum() >= 2 else np.nan
                        for a, b, v in zip(flat_x, flat_y, flat_v)], dtype=float)
        return out.reshape(shape[:-1])
    flat_x = x.reshape(-1, members)  # NaN where a pair's side is missing (batch_correlation's x and y)
    flat_y = y.reshape(-1, members)
    flat_v = valid.reshape(-1, members)
    out = np.empty(flat_x.shape[0])
    for sl, dx, dy in _pair_differences(flat_x, flat_y):  # NaN unless both members are present
        xs, ys, vs = flat_x[sl], flat_y[sl], flat_v[sl]
        pairs = (~np.isnan(dx)).sum(1).astype(float)
        sx = (dx > 0).view(np.int8) - (dx < 0).view(np.int8)  # 0 for a tie and for a missing pair
        sy = (dy > 0).view(np.int8) - (dy < 0).view(np.int8)
        s = (sx * sy).sum(1, dtype=np.int64)  # concordant - discordant
        tie_x = (dx == 0).sum(1)
        tie_y = (dy == 0).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            if method == "kendall_b":
                out[sl] = s / np.sqrt((pairs - tie_x) * (pairs - tie_y))
            elif method == "kendall_c":
                m = np.minimum(_distinct(xs, vs), _distinct(ys, vs))
                size = vs.sum(1)
                out[sl] = 2 * s / (size**2 * (m - 1) / m)
            else:
                tie_both = ((dx == 0) & (dy == 0)).sum(1)
                con = (s + (pairs - tie_x - tie_y + tie_both)) / 2  # C + D = pairs with no tie
                if method == "acc_23":
                    out[sl] = (con + tie_both) / pairs
                else:
                    dis = pairs - tie_x - tie_y + tie_both - con
                    out[sl] = (con + tie_both - dis - (tie_x - tie_both) - (tie_y - tie_both)) / pairs
    return out.reshape(shape[:-1])


def _distinct(x, valid):
    ordered = np.sort(np.where(valid, x, np.inf), axis=1)
    new = np.diff(ordered, axis=1) != 0
    return (np.isfinite(ordered[:, 0]).astype(int) + (new & np.isfinite(ordered[:, 1:])).sum(1)).astype(float)


def average(values: np.ndarray, nan_as_zero: bool = False) -> tuple[float, int]:
    """(macro average over the groups, number of groups averaged), over the last axis."""
    values = np.asarray(values, dtype=float)
    if nan_as_zero:
        return float(np.nan_to_num(values).mean()) if values.size else float("nan"), int(values.size)
    kept = values[~np.isnan(values)]
    return (float(kept.mean()) if kept.size else float("nan")), int(kept.size)


def grouped_correlation(human, metric, method: str = "pearson", group_by: str = "none",
                        nan_as_zero: bool = False) -> tuple[float, int]:
    """(average correlation over groups, groups averaged) of two `systems x items` matrices (or two vectors)."""
    human, metric = np.atleast_2d(np.asarray(human, float)), np.atleast_2d(np.asarray(metric, float))
    if human.shape != metric.shape:
        raise ValueError(f"human and metric scores differ in shape: {human.shape} vs {metric.shape}")
    return average(batch_correlation(arrange(human, group_by), arrange(metric, group_by), method), nan_as_zero)


def pairwise_accuracy(human, metric) -> tuple[float, int]:
    """(share of pairs ordered alike, number of pairs): a pair agrees when sign(h_i - h_j) == sign(m_i - m_j)
    (Kocmi et al. 2021, "To Ship or Not to Ship"; a human tie agrees only with an exact metric tie)."""
    h, m = np.asarray(human, float), np.asarray(metric, float)
    keep = ~np.isnan(h) & ~np.isnan(m)
    h, m = h[keep], m[keep]
    i, j = np.triu_indices(len(h), 1)
    if not len(i):
        return float("nan"), 0
    agree = np.sign(h[i] - h[j]) == np.sign(m[i] - m[j])
    return float(agree.mean()), int(len(i))


def _group_pairs(human: np.ndarray, metric: np.ndarray):
    """Every within-group pair with both sides present: (group index, human diff, |metric diff|, metric diff)."""
    groups, members = human.shape
    i, j = np.triu_indices(members, 1)
    h_d = human[:, i] - human[:, j]
    m_d = metric[:, i] - metric[:, j]
    ok = ~np.isnan(h_d) & ~np.isnan(m_d)
    g = np.broadcast_to(np.arange(groups)[:, None], h_d.shape)[ok]
    return g, h_d[ok], m_d[ok]


def tie_calibrated_accuracy(human, metric, group_by: str = "item") -> tuple[float, float]:
    """(acc_eq, epsilon): pairwise accuracy acc_23 with metric ties introduced where |m_i - m_j| <= epsilon, at the
    epsilon that maximises it (Deutsch et al. 2023, "Ties Matter"). The candidates are 0 and every observed
    |metric difference|; the smallest maximising one is returned. acc_23 is averaged over groups with a pair.

    Exact over all thresholds: a pair is right for epsilon >= |dm| when the humans tie it, and for epsilon < |dm|
    when it is concordant. The accuracy only rises at the gap of a pair the humans tie, so the smallest maximising
    threshold is 0 or one of those gaps: the accuracy is evaluated there, from cumulative sums, which needs the
    tied pairs' gaps sorted and every concordant gap placed among them (a binary search), not all P gaps sorted."""
    h, m = arrange(human, group_by), arrange(metric, group_by)
    if np.isinf(h).any() or np.isinf(m).any():
        raise ValueError("tie-calibrated accuracy needs finite scores (NaN where missing), got an infinity")
    present = (~np.isnan(h) & ~np.isnan(m)).sum(1)
    per_group = present * (present - 1) // 2  # pairs with both sides present
    if not per_group.any():
        return float("nan"), float("nan")
    with np.errstate(divide="ignore"):
        group_weight = 1.0 / per_group / np.count_nonzero(per_group)
    # the pairs, a few thousand groups at a time: the gaps and weights of the human-tied and of the concordant
    # pairs, in the order of the groups
    tie_gap, tie_weight, con_gap, con_weight = [], [], [], []
    for rows, h_d, gap in _pair_differences(h, m):  # groups x pairs; NaN where a side is missing
        with np.errstate(invalid="ignore"):
            human_tie = (h_d == 0) & ~np.isnan(gap)
            concordant = (np.sign(h_d) == np.sign(gap)) & (h_d != 0)  # NaN signs are never equal
        np.abs(gap, out=gap)
        weight = np.broadcast_to(group_weight[rows, None], gap.shape)
        tie_gap.append(gap[human_tie])
        tie_weight.append(weight[human_tie])
        con_gap.append(gap[concordant])
        con_weight.append(weight[concordant])
    tie_gap, tie_weight = np.concatenate(tie_gap), np.concatenate(tie_weight)
    thresholds, where = np.unique(np.r_[0.0, tie_gap], return_inverse=True)
    # right when tied by the humans and gap <= eps: the tied pairs' weights with gap <= eps
    tie_w = np.bincount(where[1:], weights=tie_weight, minlength=len(thresholds)).cumsum()
    con_gap = np.concatenate(con_gap)  # each list freed as it is joined
    con_weight = np.concatenate(con_weight)
    acc = _accuracy_at(thresholds, tie_w, con_gap, con_weight)
    # the smallest threshold within rounding of the maximum: cumulative sums of the same weights can differ in the
    # last bit between two thresholds that are equally good
    best = int(np.flatnonzero(acc >= np.nanmax(acc) - 1e-12)[0])
    return float(acc[best]), float(thresholds[best])


_SEARCH_ALL_UP_TO = 4096  # thresholds; past them, in _BLOCKS blocks
_BLOCKS = 64


def _accuracy_at(thresholds, tie_w, con_gap, con_weight) -> np.ndarray:
    """The accuracy at each threshold: `tie_w` (the human-tied weight with gap <= it) plus the concordant weight
    with gap > it (-inf where it cannot be the best). With many thresholds, placing every concordant gap among all
    of them is the slow part, so they are cut into 64 blocks first: the accuracy at the blocks' edges is exact, and
    within a block it is at most the tied weight at its upper edge plus the concordant weight above its lower edge.
    Only the blocks whose bound reaches the best edge are searched in full; the others cannot hold the maximum."""
    total = con_weight.sum()
    k = len(thresholds)
    if k <= _SEARCH_ALL_UP_TO:  # concordant weight with gap <= each threshold: the first threshold >= gap, and after
        first = np.searchsorted(thresholds, con_gap, side="left")
        return tie_w + total - np.bincount(first, weights=con_weight, minlength=k + 1)[:k].cumsum()
    edges = np.unique(np.linspace(0, k - 1, _BLOCKS + 1).astype(np.int64))  # threshold indices, first and last too
    block = np.searchsorted(thresholds[edges], con_gap, side="left")  # gap in (edge b-1, edge b]: block b
    below = np.bincount(block, weights=con_weight, minlength=len(edges) + 1).cumsum()  # gap <= edge b
    acc = np.full(k, -np.inf)
    acc[edges] = tie_w[edges] + total - below[:len(edges)]
    bound = tie_w[edges[1:]] + total - below[:len(edges) - 1]  # thresholds in (edge b-1, edge b]
    for b in np.flatnonzero(bound >= acc[edges].max() - 1e-9) + 1:
        lo, hi = edges[b - 1] + 1, edges[b]  # the thresholds inside the block (hi is an edge, already exact)
        if lo > hi - 1:
            continue
        mine = block == b
        first = np.searchsorted(thresholds[lo:hi], con_gap[mine], side="left")
        inside = below[b - 1] + np.bincount(first, weights=con_weight[mine], minlength=hi - lo + 1)[:hi - lo].cumsum()
        acc[lo:hi] = tie_w[lo:hi] + total - inside
    return acc


def acc23_at(human, metric, epsilon: float, group_by: str = "item") -> float:
    """acc_23 with metric pairs closer than or equal to `epsilon` counted as ties, averaged over groups."""
    h, m = arrange(human, group_by), arrange(metric, group_by)
    g, h_d, m_d = _group_pairs(h, m)
    if not len(g):
        return float("nan")
    per_group = np.bincount(g, minlength=h.shape[0])
    metric_tie = np.abs(m_d) <= epsilon
    right = np.where(h_d == 0, metric_tie, ~metric_tie & (np.sign(h_d) == np.sign(m_d)))
    per = np.bincount(g, weights=right.astype(float), minlength=h.shape[0])
    used = per_group > 0
    return float((per[used] / per_group[used]).mean())


def sign_flips(segments: int, permutations: int = 1000, seed: int = 4) -> np.ndarray:
    """`permutations x segments` of +1/-1 (8-bit integers): the permutations of `pairwise_p_values`, drawn as
    mt-metrics-eval draws them (rounded 32-bit uniforms), 64 permutations at a time (the same stream)."""
    rng = np.random.default_rng(seed)
    flips = np.empty((permutations, segments), dtype=np.int8)
    for start in range(0, permutations, 64):
        block = rng.random(size=(min(64, permutations - start), segments), dtype=np.float32)
        flips[start:start + len(block)] = np.rint(block) * 2 - 1
    return flips


def pairwise_p_values(segment_scores: np.ndarray, permutations: int = 1000, seed: int = 4,
                      flips: np.ndarray | None = None) -> np.ndarray:
    """`p[i, j]` (i < j): one-sided paired permutation p-value that system i is better than system j, from
    `systems x segments` scores (sums over segments; each permutation flips the sign of a segment's pair
    difference). The same permutations serve every pair and both human and metric (Thompson et al. 2024);
    `flips`: `sign_flips(segments, permutations, seed)` when the caller keeps them for several calls. The
    permuted sums are computed in 32-bit floats, as mt-metrics-eval does, 64 permutations at a time."""
    scores = np.asarray(segment_scores, dtype=np.float32)
    if flips is None:
        flips = sign_flips(scores.shape[1], permutations, seed)
    totals = scores.sum(1)
    partial = np.empty((len(flips), scores.shape[0]), dtype=np.float32)  # permutations x systems
    for start in range(0, len(flips), 64):
        partial[start:start + 64] = flips[start:start + 64].astype(np.float32) @ scores.T
    i, j = np.triu_indices(scores.shape[0], 1)
    p = np.full((scores.shape[0],) * 2, np.nan)
    p[i, j] = ((partial[:, i] - partial[:, j]) >= (totals[i] - totals[j])).mean(0)
    return p


def soft_pairwise_accuracy(human, metric, permutations: int = 1000, seed: int = 4, cache: dict | None = None) -> float:
    """1 - pairwise confidence error (Thompson, Mathur, Deutsch & Lipton 2024, "Improving Statistical Significance
    in Human Evaluation of Automatic Metrics via Soft Pairwise Accuracy", WMT): 1 - mean over system pairs of
    |p_human(i > j) - p_metric(i > j)|. `human`, `metric`: `systems x items`; items missing for any system on
    either side are left out. `cache`: a dict kept across calls with the same `human`, so that its p-values (and
    the permutations) are computed once for every set of items, also when several threads share it (the first
    computes them, the others wait)."""
    h, m = np.asarray(human, float), np.asarray(metric, float)
    complete = ~(np.isnan(h) | np.isnan(m)).any(0)
    if complete.sum() == 0 or h.shape[0] < 2:
        return float("nan")
    segments = int(complete.sum())
    cache = {} if cache is None else cache
    with cache.setdefault("lock", threading.Lock()):  # setdefault is atomic: one lock for every thread
        flips = cache.get(("flips", segments, permutations, seed))
        if flips is None:
            flips = cache[("flips", segments, permutations, seed)] = sign_flips(segments, permutations, seed)
        key = (complete.tobytes(), permutations, seed)
        ph = cache.get(key)
        if ph is None:
            ph = cache[key] = pairwise_p_values(h[:, complete], permutations, seed, flips)
    pm = pairwise_p_values(m[:, complete], permutations, seed, flips)
    i, j = np.triu_indices(h.shape[0], 1)
    return float(1.0 - np.abs(ph[i, j] - pm[i, j]).mean())
