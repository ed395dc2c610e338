"""How many items and annotators a rating study needs to detect a difference between two systems.

The model of one criterion's ratings (y: annotator k's rating of system s's output for item i):

    y_isk = mu_s + b_is + e_isk

* Paired design (every annotator of an item rates both systems' outputs of it, as in SQuALITY and USR): the test
  is a paired t-test on the items' mean differences d_i = mean_k (y_iAk - y_iBk). With m annotators per item,
  var(d_i) = var_item + var_within / m, where var_item is how much the systems' difference changes from item to
  item and var_within how much one annotator's difference scatters around their item's. The annotator's own
  leniency cancels in y_iAk - y_iBk.
* Unpaired design (each item's output of one system only, rated by m annotators): a two-sample t-test on the item
  means, var(mean of item i) = var_between + var_rating / m per system.

The components are estimated from a pilot by the one-way random-effects analysis of variance (method of moments,
with Searle's n0 for unequal group sizes): groups are items, observations the per-annotator differences (paired) or
the ratings of one system (unpaired, pooled over the two systems). Negative estimates become 0. Where both apply,
statsmodels' mixed model (REML, a random intercept per item) gives the same components (tests/test_power.py).

Power is computed in closed form from the noncentral t distribution, and by simulating `simulations` studies of
each size from the fitted components; the two agree up to the simulation's error. Reference for why this matters:
Card, Henderson, Khandelwal, Jia, Mahowald & Jurafsky, "With Little Power Comes Great Responsibility", EMNLP 2020,
whose simulations found most NLP human evaluations underpowered.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Components:
    """Variance components of a pilot for one design: between items (`between`) and within (`within`), from
    `groups` items with `observations` observations in all."""
    between: float
    within: float
    groups: int
    observations: int


def one_way_components(values, groups, strata=None) -> Components:
    """The one-way random-effects ANOVA estimates (method of moments): within = MS_within; between =
    (MS_between - MS_within) / n0 with n0 = (N - sum n_g^2 / N) / (G - 1), clipped at 0.

    `strata` (one per value, each group inside one stratum): groups nested in strata with a mean of their own (the
    two systems of an unpaired design), so MS_between is around each stratum's mean on G - S degrees of freedom and
    n0 = (N - sum_s sum_g n_g^2 / N_s) / (G - S) (Searle, Casella & McCulloch 1992, the nested design): centring each
    system on its own mean spends one more degree of freedom than the grand mean does."""
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups)
    if values.ndim != 1 or len(values) != len(groups):
        raise ValueError("values and groups: one group per value")
    if not np.isfinite(values).all():
        raise ValueError("values: a missing or infinite value")
    if strata is not None and len(strata) != len(values):
        raise ValueError("values and strata: one stratum per value")
    codes = np.unique(groups, return_inverse=True)[1]
    # one stratum (the grand mean) is the one-way design
    layers = np.zeros(len(values), dtype=int) if strata is None else np.unique(np.asarray(strata),
                                                                              return_inverse=True)[1]
    sizes = np.bincount(codes)
    big_g, big_s, big_n = len(sizes), layers.max() + 1, len(values)
    layer_of = np.zeros(big_g, dtype=int)
    layer_of[codes] = layers
    if (layer_of[codes] != layers).any():
        raise ValueError("strata: a group lies in two strata")
    if big_g - big_s < 1 or big_n - big_g < 1:
        raise ValueError(f"variance components need 2 or more items and a repeated observation within one (got "
                         f"{big_g} items and {big_n} observations)" if strata is None else
                         f"variance components need more items than strata and a repeated observation within one "
                         f"(got {big_g} items in {big_s} strata, {big_n} observations)")
    means = np.bincount(codes, weights=values) / sizes
    layer_means = np.bincount(layers, weights=values) / np.bincount(layers)
    ss_between = float(np.sum(sizes * (means - layer_means[layer_of]) ** 2))
    ss_within = float(np.sum((values - means[codes]) ** 2))
    ms_between, ms_within = ss_between / (big_g - big_s), ss_within / (big_n - big_g)
    squares = np.bincount(layer_of, weights=sizes.astype(float) ** 2) / np.bincount(layers)
    n0 = (big_n - float(squares.sum())) / (big_g - big_s)
    return Components(max((ms_between - ms_within) / n0, 0.0), ms_within, big_g, big_n)


def item_variance(components: Components, annotators) -> np.ndarray:
    """The variance of one item's mean over `annotators` annotators (array-like)."""
    return components.between + components.within / np.asarray(annotators, dtype=float)


def paired_power(delta: float, components: Components, items, annotators, alpha: float = 0.05) -> np.ndarray:
    """Power of the two-sided paired t-test at level alpha to detect a mean difference `delta`, for every
    combination of `items` (rows) and `annotators` per item (columns)."""
    k = np.asarray(items, dtype=float)[:, None]
    sd = np.sqrt(item_variance(components, annotators))[None, :]
    return _t_power(delta * np.sqrt(k) / sd, k - 1, alpha)


def unpaired_power(delta: float, components: Components, items, annotators, alpha: float = 0.05) -> np.ndarray:
    """Power of the two-sided two-sample t-test with `items` items per system (rows) and `annotators` per item
    (columns)."""
    k = np.asarray(items, dtype=float)[:, None]
    sd = np.sqrt(item_variance(components, annotators))[None, :]
    return _t_power(delta / (sd * np.sqrt(2 / k)), 2 * k - 2, alpha)


POWER = {"paired": paired_power, "unpaired": unpaired_power}  # design -> its closed-form power


def _t_power(ncp, df, alpha):
    ncp, df = np.broadcast_arrays(np.asarray(ncp, dtype=float), np.asarray(df, dtype=float))
    out = np.full(ncp.shape, np.nan)
    ok = df >= 1
    critical = stats.t.ppf(1 - alpha / 2, df[ok])
    # the lower tail as the upper tail of -T': scipy's nct.cdf(-c, df, ncp) is NaN far out in the tail (ncp 10 with 5
    # degrees of freedom), its nct.sf(c, df, -ncp) is not, and the two agree wherever both are numbers
    out[ok] = stats.nct.sf(critical, df[ok], ncp[ok]) + stats.nct.sf(critical, df[ok], -ncp[ok])
    # should scipy still give NaN somewhere, the same probability integrated over the chi-square of the denominator
    missing = ok & np.isnan(out)
    if missing.any():
        out[missing] = _t_power_by_integration(ncp[missing], df[missing], alpha)
    return out


def _t_power_by_integration(ncp, df, alpha: float, nodes: int = 4000) -> np.ndarray:
    """P(|T'| > t_crit) for T' = (Z + ncp) / sqrt(V / df), V ~ chi2(df): the mean over V of the normal's two tails,
    by the midpoint rule on V's quantiles (vectorised; within 1e-5 of scipy where scipy gives a number)."""
    ncp, df = np.atleast_1d(np.asarray(ncp, dtype=float)), np.atleast_1d(np.asarray(df, dtype=float))
    critical = stats.t.ppf(1 - alpha / 2, df)[:, None]
    scale = np.sqrt(stats.chi2.ppf((np.arange(nodes) + 0.5) / nodes, df[:, None]) / df[:, None])
    tails = stats.norm.sf(critical * scale - ncp[:, None]) + stats.norm.cdf(-critical * scale - ncp[:, None])
    return np.clip(tails.mean(axis=1), 0.0, 1.0)


def simulated_power(delta: float, components: Components, items: int, annotators: int, design: str,
                    simulations: int, rng, alpha: float = 0.05) -> float:
    """The share of `simulations` studies, drawn from the fitted components (normal), in which the design's t-test
    rejects at level alpha."""
    sd_item, sd_within = np.sqrt(components.between), np.sqrt(components.within)

    def item_means():  # per study and item: the item's own deviation plus the mean of its annotators' noise
        return rng.normal(0, sd_item, (simulations, items)) + \
            rng.normal(0, sd_within, (simulations, items, annotators)).mean(2)

    if design == "paired":
        p = stats.ttest_1samp(delta + item_means(), 0.0, axis=1).pvalue
    elif design == "unpaired":
        a = item_means()
        p = stats.ttest_ind(delta + item_means(), a, axis=1).pvalue
    else:
        raise ValueError(f"design: paired or unpaired, not {design!r}")
    return float(np.mean(p < alpha))


def drawn_studies(groups: list[np.ndarray], items: int, annotators: int, simulations: int, rng) -> np.ndarray:
    """simulations x items x annotators, drawn from published ratings: `items` groups (items, or outputs) with
    replacement among those with `annotators` or more observations, and each group's observations without
    replacement."""
    usable = [g for g in groups if len(g) >= annotators]
    if len(usable) < 2:
        raise ValueError(f"fewer than 2 items have {annotators} or more observations")
    width = max(len(g) for g in usable)
    padded = np.full((len(usable), width), np.nan)
    for row, g in enumerate(usable):
        padded[row, :len(g)] = g
    counts = np.array([len(g) for g in usable])
    picked = rng.integers(0, len(usable), (simulations, items))
    keys = rng.random((simulations, items, width))
    keys[np.arange(width)[None, None, :] >= counts[picked][:, :, None]] = np.inf  # never pick the padding
    chosen = np.argsort(keys, axis=2)[:, :, :annotators]
    return np.take_along_axis(padded[picked], chosen, axis=2)


def realised_power(per_item: list[np.ndarray], items: int, annotators: int, design: str, simulations: int, rng,
                   alpha: float = 0.05, second: list[np.ndarray] | None = None) -> float:
    """A calibration check on real data: the share of `simulations` studies drawn from published ratings in which
    the design's t-test rejects. Each study draws `items` items with replacement and, for each, `annotators` of its
    observations without replacement. Paired: `per_item` holds each item's per-annotator differences. Unpaired:
    `per_item` holds each item's ratings of the first system and `second` those of the second (drawn
    independently: other items, other annotators)."""
    def draw(groups: list[np.ndarray]) -> np.ndarray:
        return drawn_studies(groups, items, annotators, simulations, rng).mean(axis=2)

    with warnings.catch_warnings():  # a drawn study whose values are all equal has no t: it does not reject
        warnings.simplefilter("ignore", RuntimeWarning)
        if design == "paired":
            p = stats.ttest_1samp(draw(per_item), 0.0, axis=1).pvalue
        elif design == "unpaired":
            if second is None:
                raise ValueError("the unpaired design needs the second system's ratings")
            p = stats.ttest_ind(draw(second), draw(per_item), axis=1).pvalue
        else:
            raise ValueError(f"design: paired or unpaired, not {design!r}")
    return float(np.mean(np.nan_to_num(p, nan=1.0) < alpha))
