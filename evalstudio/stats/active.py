"""Active statistical inference for a mean: humans label the items a judge is least sure of, each with a known
probability, and the estimate stays unbiased with a valid interval.

Zrnic & Candès, "Active Statistical Inference", ICML 2024 (arXiv:2403.03208). Every one of the N items has a judge's
(or a metric's) score f_i; item i gets a human label y_i with probability pi_i (an independent draw xi_i), and

    theta_hat = mean_i [ lambda f_i + (y_i - lambda f_i) xi_i / pi_i ]

is unbiased for the mean human score whatever the pi_i (all above 0) and lambda. Its variance is smallest when pi_i
is proportional to the expected size of |y_i - lambda f_i|, which is what the judge's uncertainty stands for: items the
judge is sure of are labelled rarely, the others often. lambda is tuned to minimise the estimated variance and
clipped to [0, 1] (lambda 0: the human labels alone, weighted; the "power tuning" of PPI++). evalstudio uses its
Hájek form (`active_means`: the weights normalised, so a useless judge gives the labels' weighted mean, not a raw
Horvitz-Thompson sum), with intervals checked by replaying real data (benchmarks/active.py).

The uncertainty is a guess, so the probabilities mix it with uniform sampling (Li, Zrnic & Candès, "Robust Sampling
for Active Statistical Inference", 2025, arXiv:2511.08991): pi = (1 - tau) pi_uncertainty + tau budget / N. With
labels already in hand (a first, uniform batch), tau is the one of a grid that minimises the variance those labels
estimate, so an uninformative uncertainty falls back to uniform sampling; without, tau is the fixed `mix`. Every
pi_i is at least tau budget / N: no item is out of reach, and no label weighs more than N / (tau budget).

A study in two batches (uniform first, then active with what the first taught, among the items not yet labelled) is
one estimate: each item's weight is the budget-weighted mean of its weights in the two batches (`two_batch_weights`),
each batch unbiased given the ones before it (the paper's sequential form).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from .small_sample import skew_corrected_interval, skewness_of_mean

# The uniform share of a draw made at once from a judge's own uncertainty (`active draw`, the gateway). Replayed on
# GPT-4o's stance labels with its stated confidence (benchmarks/active.py, docs/active.md), 0.5 saved 11% of the
# labels uniform PPI++ needs where the confidence told the errors and cost up to 16% more than human-only sampling
# where it did not (the judge's scores shuffled); 0.8 saved 7% and cost at most 4%, within the 5% a useless judge
# may cost.
DEFAULT_MIX = 0.8
MIXES = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)  # the uniform shares robust_mix chooses from (1.0: uniform sampling)
ROBUST_GAIN = 0.2


def proportional_probabilities(uncertainty, budget: float) -> np.ndarray:
    """pi_i proportional to `uncertainty` (>= 0) with sum pi = budget and every pi_i <= 1 (the items a cap reaches
    get 1 and the rest of the budget is spread over the others in proportion). All zero uncertainties: uniform.

    >>> proportional_probabilities([1, 1, 2, 4], 2).round(3).tolist()
    [0.25, 0.25, 0.5, 1.0]
    """
    u = np.asarray(uncertainty, dtype=float)
    if u.ndim != 1 or not np.isfinite(u).all() or (u < 0).any():
        raise ValueError("uncertainty: expected one finite value >= 0 per item")
    if not 0 < budget <= len(u):
        raise ValueError(f"budget must be in (0, {len(u)}] (the number of items), got {budget}")
    if not (u > 0).any():
        return np.full(len(u), budget / len(u))
    u = u / u.max()  # the scale is free: this keeps tiny uncertainties from underflowing
    capped = np.zeros(len(u), dtype=bool)
    while True:
        left = budget - capped.sum()
        free = u * ~capped
        if free.sum() == 0:  # every uncertain item capped: the rest of the budget goes uniformly to the others
            pi = np.where(capped, 1.0, 0.0)
            rest = ~capped
            pi[rest] = left / rest.sum() if rest.any() else 0.0
            return np.minimum(pi, 1.0)
        pi = np.where(capped, 1.0, free * left / free.sum())
        over = pi > 1
        if not over.any():
            return pi
        capped |= over


def sampling_probabilities(uncertainty, budget: float, mix: float = DEFAULT_MIX) -> np.ndarray:
    """The active-inference probabilities: (1 - mix) x proportional to `uncertainty` + mix x uniform, summing to
    `budget` (the expected number of human labels), each in [mix x budget / N, 1]."""
    if not 0 < mix <= 1:
        raise ValueError(f"mix must be in (0, 1] (the uniform share keeps every item reachable), got {mix}")
    u = np.asarray(uncertainty, dtype=float)
    return (1 - mix) * proportional_probabilities(u, budget) + mix * np.full(len(u), budget / len(u))


def systematic_draw(pi, rng) -> np.ndarray:
    """Which items are drawn, each with exactly its probability pi_i (in [0, 1]) and, unlike independent draws, as
    many items as sum(pi) to within one (its floor or its ceiling): randomized systematic sampling (Madow 1949;
    Hartley & Rao 1962), the items put in a random order, their probabilities laid end to end on a line and the
    points u, u + 1, u + 2, ... (u uniform in [0, 1)) drawing the items they fall in. An interval of length pi_i <= 1
    holds one such point with probability pi_i, so weights 1 / pi keep the estimate unbiased.

    >>> [int(systematic_draw([0.5, 0.5, 1.0, 0.25, 0.75], np.random.default_rng(s)).sum()) for s in range(4)]
    [3, 3, 3, 3]
    """
    p = np.asarray(pi, dtype=float)
    if p.ndim != 1 or not np.isfinite(p).all() or ((p < 0) | (p > 1)).any():
        raise ValueError("pi: expected one probability in [0, 1] per item")
    order = rng.permutation(len(p))
    upper = np.cumsum(p[order])
    lower = upper - p[order]
    start = rng.random()
    drawn = np.zeros(len(p), dtype=bool)
    # a point start + k falls in (lower, upper] when ceil(lower - start) <= upper - start, i.e. floor(upper - start)
    # > floor(lower - start) (a zero-length interval never holds one)
    drawn[order] = np.floor(upper - start) > np.floor(lower - start)
    return drawn


def robust_mix(uncertainty, budget: float, labelled_uncertainty, errors) -> float:
    """The uniform share (one of MIXES) for drawing `budget` labels among items of `uncertainty`, chosen with the
    labels in hand (a uniform first batch: their uncertainties and errors y - f): the share whose probabilities
    minimise the variance those labels estimate, sum of error^2 x (1 / pi - 1) with pi the probability each would
    have had among the items (Li, Zrnic & Candès 2025), if that is ROBUST_GAIN below uniform sampling's; else 1.0
    (uniform)."""
    u = np.asarray(uncertainty, dtype=float)
    u_seen = np.asarray(labelled_uncertainty, dtype=float)
    e2 = np.asarray(errors, dtype=float) ** 2
    if len(u_seen) == 0 or len(u_seen) != len(e2):
        raise ValueError("robust_mix needs the uncertainty and error of each labelled item, and at least one")
    proportional = proportional_probabilities(u, budget)
    free = (proportional < 1) & (u > 0)
    scale = proportional[free].sum() / u[free].sum() if free.any() else 0.0  # pi = scale x u below the cap
    cost = np.array([float(np.sum(e2 * (1 / np.clip((1 - m) * np.minimum(1, scale * u_seen) + m * budget / len(u),
                                                    1e-12, 1) - 1))) for m in MIXES])
    best = int(np.argmin(cost))
    # a guarded choice (the paper guards with robust optimisation): a few labels' estimate of the variance is noisy,
    # so the uncertainty is trusted only where it promises at least ROBUST_GAIN less variance than uniform sampling
    return MIXES[best] if cost[best] < (1 - ROBUST_GAIN) * cost[-1] else 1.0


def label_weights(pi, drawn) -> np.ndarray:
    """Each item's weight xi / pi: 1 / its probability where drawn, 0 elsewhere."""
    pi, drawn = np.asarray(pi, dtype=float), np.asarray(drawn, dtype=bool)
    if ((pi <= 0) | (pi > 1)).any():
        raise ValueError("every probability must be in (0, 1]")
    return np.where(drawn, 1 / pi, 0.0)


def two_batch_weights(first: tuple, second: tuple) -> np.ndarray:
    """The weights of a study in two batches, (pi, drawn) each (R x N arrays); the second batch is drawn among the
    items the first did not draw (its pi is read for those only: the first batch's items are already labelled, a
    certainty in the second). Each batch alone gives an unbiased estimate (the second given the first), the two are
    uncorrelated, and they are averaged with the batches' budgets as shares: as efficient as one batch of the whole
    budget, and no label is drawn twice."""
    (pi1, drawn1), (pi2, drawn2) = first, second
    pi1, pi2 = np.asarray(pi1, dtype=float), np.asarray(pi2, dtype=float)
    drawn1, drawn2 = np.asarray(drawn1, dtype=bool), np.asarray(drawn2, dtype=bool)
    if (drawn1 & drawn2).any():
        raise ValueError("the second batch must be drawn among the items the first did not draw")
    b1 = np.sum(pi1, -1, keepdims=True)
    b2 = np.sum(np.where(drawn1, 0.0, pi2), -1, keepdims=True)
    share = b1 / (b1 + b2)
    second_weight = np.where(drawn1, 1.0, label_weights(np.where(drawn1, 1.0, pi2), drawn2))
    return share * label_weights(pi1, drawn1) + (1 - share) * second_weight


def _parts(y, f, w):
    """The Hájek estimate's terms as z = b + lambda a (every item's influence on the estimate), per row."""
    total = w.sum(1, keepdims=True)
    scale = w * (w.shape[1] / total)
    y0 = np.where(w > 0, y, 0.0)
    y_w, f_w = (w * y0).sum(1, keepdims=True) / total, (w * f).sum(1, keepdims=True) / total
    return scale * (y0 - y_w) + y_w, f - scale * (f - f_w) - f_w


def tuned_lambda(y, f, weights) -> np.ndarray:
    """The lambda in [0, 1] per row that minimises the sample variance of the terms: -cov(a, b) / var(a)."""
    b, a = _parts(np.asarray(y, dtype=float), np.asarray(f, dtype=float), np.asarray(weights, dtype=float))
    a_c, b_c = a - a.mean(1, keepdims=True), b - b.mean(1, keepdims=True)
    var_a = (a_c ** 2).mean(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(var_a > 1e-12 * np.maximum((b_c ** 2).mean(1), 1e-300), -(a_c * b_c).mean(1) / var_a, 0.0)
    return np.clip(np.nan_to_num(lam), 0.0, 1.0)


def active_means(y, f, weights, alpha: float = 0.05, lam=None, return_terms: bool = False) -> dict[str, np.ndarray]:
    """The active estimate of the mean human score and its interval, for many studies at once: each row of the
    R x N arrays is one study (y: human scores, read only where the weight is above 0; f: the judge's scores;
    weights: `label_weights` or `two_batch_weights`). `lam` None: tuned per row; a number: fixed (0: the human
    labels alone). Returns estimate, lo, hi, se, lam and n (labels drawn) per row, and with `return_terms` each
    item's term (the estimate is their mean; a difference between two systems on the same items is the mean of
    their terms' differences).

    The estimate is the paper's in its Hájek (ratio) form: lambda x the mean judge score over all items + the
    weighted mean of y - lambda f over the labelled ones, weights normalised to sum to one. For a fixed lambda it
    differs from the paper's unbiased form by O(1/n) and is never noisier than it; at uniform sampling it is PPI++
    (lambda 0: the labels' mean). The variance is that of the items' influence terms, scaled by n / (n - fitted) for
    the parameters fitted to the n labels (the weighted mean, and lambda where tuned and above 0), with a t quantile
    on n - fitted degrees of freedom: without the scaling, 95% intervals from 10-20 labels covered USR's published
    mean 0.90-0.92 of the time. The interval is lengthened on the side the terms are skewed to (`small_sample`,
    Hall 1992; not for 0/1 labels): t intervals covered the mean of a system rated near a scale's end 0.90 of the
    time from 30 labels.

    >>> r = active_means([[4.0, 0, 2.0, 0, 3.0]], [[3.5, 1.0, 2.5, 2.0, 2.0]], [[2.0, 0, 2.0, 0, 1.0]], lam=1)
    >>> round(float(r["estimate"][0]), 4)  # mean(f) + (2 x 0.5 + 2 x -0.5 + 1 x 1.0) / 5 = 2.2 + 0.2
    2.4
    """
    y, f, w = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (y, f, weights))
    if not (y.shape == f.shape == w.shape):
        raise ValueError(f"y, f and weights must have one shape, got {y.shape}, {f.shape}, {w.shape}")
    drawn = w > 0
    if not (np.isfinite(f).all() and np.isfinite(w).all() and np.isfinite(y[drawn]).all()) or (w < 0).any():
        raise ValueError("the judge's scores, the weights (>= 0) and the human scores of drawn items must be finite")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n_items, n = y.shape[1], drawn.sum(1)
    if n_items < 2 or (n < 3).any():
        raise ValueError("an active estimate needs 2 or more items and 3 or more human labels in every study")
    tuned = lam is None
    lam = tuned_lambda(y, f, w) if tuned else np.full(len(y), float(lam))
    b, a = _parts(y, f, w)
    terms = b + lam[:, None] * a
    estimate = terms.mean(1)
    fitted = 1 + (tuned & (lam > 0))
    se = terms.std(1, ddof=1) / np.sqrt(n_items) * np.sqrt(n / (n - fitted))
    lo, hi = skew_corrected_interval(estimate, se, skewness_of_mean(terms), stats.t.ppf(1 - alpha / 2, n - fitted),
                                     labels=np.where(drawn, y, np.nan))
    out = {"estimate": estimate, "lo": lo, "hi": hi, "se": se, "lam": lam, "n": n}
    return out | ({"terms": terms} if return_terms else {})


def binned_uncertainty(f, labelled, errors, bins: int = 5, prior: float = 3.0) -> np.ndarray:
    """A model of |y - f| fitted on the labels in hand, for judges that give no uncertainty of their own: the
    items are cut into `bins` groups by their judge score (quantiles of all items' scores), and each item's
    uncertainty is its group's mean |error| over the labelled items, shrunk towards the overall mean as if `prior`
    labels had that mean (a group with few labels stays near it). Zrnic & Candès fit such a model on a first batch."""
    f = np.asarray(f, dtype=float)
    labelled = np.asarray(labelled, dtype=int)
    size = np.abs(np.asarray(errors, dtype=float))
    if len(labelled) == 0 or len(size) != len(labelled):
        raise ValueError("binned_uncertainty needs one error per labelled item, and at least one")
    edges = np.unique(np.quantile(f, np.linspace(0, 1, bins + 1))[1:-1])
    group = np.searchsorted(edges, f, side="right")
    overall = size.mean()
    total = np.bincount(group[labelled], weights=size, minlength=len(edges) + 1)
    count = np.bincount(group[labelled], minlength=len(edges) + 1)
    return ((total + prior * overall) / (count + prior))[group]
