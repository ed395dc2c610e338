"""Inter-annotator agreement: pure, vectorised functions.

Ratings come as a long table (one row per rating): `item`, `annotator`, `value`. Missing ratings are rows that
are absent or have a NaN value, or whose value is one of the codes given as `missing=` (e.g. "N/A", "cannot
judge"): those are never counted as an extra category.

Krippendorff's alpha is computed in O(N) time and memory from per-unit sums, without the V x V coincidence
matrix (so decimal scales with many distinct values cost nothing extra):
  alpha = 1 - (n - 1) * sum_u D_u / (m_u - 1) / sum_{c,k} n_c n_k delta(c, k)
with n pairable values (in units with >= 2 values), D_u = sum over ordered pairs i != j in unit u of delta.
  interval: sum_{i,j in u} (x_i - x_j)^2 = 2 m S2 - 2 S1^2 per unit (S1, S2: sums of x and x^2)
  ordinal:  the interval metric on each value's cumulative-midpoint rank z_c = sum_{g<c} n_g + n_c / 2
            (Krippendorff's ordinal delta(c, k) = |z_c - z_k|)
  nominal:  pairs that differ = m^2 - sum_c n_uc^2 per unit, from counts of (unit, value) pairs.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score

LEVELS = ("nominal", "ordinal", "interval")
NO_MAJORITY = "no majority"


def _codes(values) -> np.ndarray:
    """Dense integer codes; small non-negative integer ids are used as they are (no hashing)."""
    values = np.asarray(values)
    if values.dtype.kind in "iu" and len(values) and values.min() >= 0 and values.max() < 4 * len(values):
        return values.astype(np.int64, copy=False)
    return pd.factorize(values, sort=False)[0]


def _missing_to_nan(values: np.ndarray, missing) -> np.ndarray:
    if not missing:
        return values
    out = values.astype(object, copy=True)
    out[pd.Series(values, dtype=object).isin(list(missing)).to_numpy()] = np.nan
    return out


def drop_missing(frame: pd.DataFrame, missing=()) -> pd.DataFrame:
    """The rows with a value that is neither NaN nor one of the `missing` codes."""
    keep = frame["value"].notna()
    if missing:
        keep &= ~frame["value"].isin(list(missing))
    return frame[keep]


def _numeric(values: np.ndarray, level: str) -> np.ndarray:
    try:
        return values.astype(float)
    except (TypeError, ValueError):
        odd = next((v for v in values if not _is_number(v)), None)
        raise ValueError(f"{level} alpha needs numbers; got {str(odd)[:40]!r} (declare codes such as 'N/A' as "
                         "missing=, or use the nominal level)") from None


def _is_number(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def krippendorff_alpha(units, values, level: str = "interval", missing=()) -> float:
    """Krippendorff's alpha from parallel arrays of unit ids and values (NaN, or a code in `missing`, = missing).

    Returns NaN when all pairable values are equal (agreement is undefined: no variation to agree on).
    Raises ValueError when no unit has two or more values, or for an unknown level.

    Krippendorff (2011, "Computing Krippendorff's Alpha-Reliability", the example of four coders and twelve units
    with missing values) publishes 0.743 (nominal), 0.815 (ordinal) and 0.849 (interval):

    >>> coders = [[1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    ...           [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]]
    >>> units = [u for coder in coders for u, v in enumerate(coder) if v is not None]
    >>> values = [v for coder in coders for v in coder if v is not None]
    >>> [round(krippendorff_alpha(units, values, level), 3) for level in ("nominal", "ordinal", "interval")]
    [0.743, 0.815, 0.849]
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    units = np.asarray(units)
    values = _missing_to_nan(np.asarray(values), missing)
    if units.shape != values.shape or units.ndim != 1:
        raise ValueError("units and values must be 1-D arrays of the same length")
    if level == "nominal":
        present = ~pd.isna(values)
        value_codes = _codes(values[present])
    else:
        values = _numeric(values, level)
        present = ~np.isnan(values)
    unit_codes = _codes(units[present])
    m = np.bincount(unit_codes)
    pairable = m[unit_codes] >= 2
    if not pairable.any():
        raise ValueError("Krippendorff's alpha needs at least one item rated by two or more annotators")
    kept = m >= 2
    u, m = (np.cumsum(kept) - 1)[unit_codes[pairable]], m[kept]  # renumber the pairable units 0..K-1
    n = float(pairable.sum())

    if level == "nominal":
        v = value_codes[pairable]
        # run lengths of sorted (unit, value) keys = how often each value occurs in each unit
        keys = np.sort(u.astype(np.int64) * (v.max() + 1) + v)
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        pair_counts = np.diff(np.r_[starts, len(keys)]).astype(float)
        same_in_unit = np.bincount(keys[starts] // (v.max() + 1), weights=pair_counts**2, minlength=len(m))
        observed = np.sum((m.astype(float) ** 2 - same_in_unit) / (m - 1))
        expected = n * n - np.sum(np.bincount(v).astype(float) ** 2)
    else:
        x = values[present][pairable]
        if level == "ordinal":
            x = _cumulative_midpoints(x)
        x = x - x.mean()  # numerically stabler sums of squares
        s1 = np.bincount(u, weights=x)
        s2 = np.bincount(u, weights=x * x)
        observed = np.sum((2 * m * s2 - 2 * s1 * s1) / (m - 1))
        expected = 2 * n * np.sum(x * x) - 2 * np.sum(x) ** 2
    if expected <= 0:
        return float("nan")
    return float(1.0 - (n - 1) * observed / expected)


def _cumulative_midpoints(x: np.ndarray) -> np.ndarray:
    """Replace each value by z_c = (count of smaller values) + (count of equal values) / 2."""
    codes, _ = pd.factorize(x, sort=True)
    counts = np.bincount(codes)
    z = np.cumsum(counts) - counts / 2.0
    return z[codes]


def alpha_from_matrix(matrix, level: str = "interval") -> float:
    """Krippendorff's alpha from a raters x units matrix with NaN for missing (the layout of the literature)."""
    matrix = np.asarray(matrix, dtype=float if level != "nominal" else object)
    raters, units = matrix.shape
    return krippendorff_alpha(np.tile(np.arange(units), raters), matrix.ravel(), level)


def _wide(frame: pd.DataFrame) -> pd.DataFrame:
    """item x annotator table of values; duplicate ratings of one annotator are an error."""
    duplicated = frame.duplicated(["item", "annotator"])
    if duplicated.any():
        first = frame[duplicated].iloc[0]
        raise ValueError(f"annotator '{first['annotator']}' rated item '{first['item']}' more than once")
    return frame.pivot(index="item", columns="annotator", values="value")


def cohen_kappa_pairs(frame: pd.DataFrame, weights: str | None = None, labels=None, missing=()) -> pd.DataFrame:
    """Cohen's kappa for every pair of annotators over the items both rated (weights: None, 'linear', 'quadratic')."""
    frame = drop_missing(frame, missing)
    if weights is None and frame["value"].map(type).nunique() > 1:  # labels of mixed types: compare as text
        frame = frame.assign(value=frame["value"].astype(str))
        labels = None if labels is None else [str(label) for label in labels]
    elif weights is not None:
        frame = frame.assign(value=_numeric(frame["value"].to_numpy(), f"{weights}-weighted kappa"))
    wide = _wide(frame)
    rows = []
    for a, b in combinations(wide.columns, 2):
        both = wide[[a, b]].dropna()
        if len(both) < 2:
            continue
        x, y = both[a].to_numpy(), both[b].to_numpy()
        # one label used by both: chance agreement is 1 and kappa is 0/0 (undefined), said as NaN without
        # scikit-learn's warnings
        kappa = cohen_kappa_score(x, y, weights=weights, labels=labels) if len(set(x) | set(y)) > 1 else float("nan")
        rows.append({"annotator_a": a, "annotator_b": b, "items": len(both), "kappa": float(kappa)})
    if not rows:
        raise ValueError("Cohen's kappa needs two annotators with at least two items in common")
    return pd.DataFrame(rows)


def fleiss_kappa(frame: pd.DataFrame, missing=()) -> float:
    """Fleiss' kappa; every item must have the same number of (non-missing) ratings.

    Missing values are dropped first: statsmodels' aggregate_raters would count NaN as a category. The worked
    example of Fleiss' kappa (10 subjects, 14 raters, 5 categories; the one statsmodels tests with) is 0.210:

    >>> counts = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    ...           [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    >>> rows = [(i, category) for i, row in enumerate(counts) for category, n in enumerate(row) for _ in range(n)]
    >>> frame = pd.DataFrame([{"item": i, "annotator": k % 14, "value": v} for k, (i, v) in enumerate(rows)])
    >>> round(fleiss_kappa(frame), 3)
    0.21
    """
    from statsmodels.stats.inter_rater import fleiss_kappa as _fleiss

    frame = drop_missing(frame, missing)
    per_item = frame.groupby("item")["value"].size()
    if per_item.empty or per_item.min() < 2:
        raise ValueError("Fleiss' kappa needs at least two ratings for every item")
    if per_item.nunique() != 1:
        raise ValueError(f"Fleiss' kappa needs the same number of ratings per item (found "
                         f"{', '.join(str(int(n)) for n in sorted(per_item.unique()))}); "
                         "use Krippendorff's alpha for incomplete data")
    counts = pd.crosstab(frame["item"], frame["value"]).to_numpy()
    if counts.shape[1] < 2:
        return float("nan")
    return float(_fleiss(counts, method="fleiss"))


def percent_agreement(frame: pd.DataFrame, missing=()) -> float:
    """Share of agreeing pairs of ratings within items, averaged over items with >= 2 ratings."""
    frame = drop_missing(frame, missing)
    counts = frame.groupby(["item", "value"]).size()
    m = counts.groupby(level="item").sum()
    same = (counts * (counts - 1)).groupby(level="item").sum()
    rated = m >= 2
    if not rated.any():
        raise ValueError("percent agreement needs at least one item rated twice")
    return float((same[rated] / (m[rated] * (m[rated] - 1))).mean())


def majority_vote(frame: pd.DataFrame, min_votes: int | None = None, missing=()) -> pd.Series:
    """Per item, the label with the most votes, or NO_MAJORITY on a tie or when it has fewer than `min_votes`
    (default: more than half of the item's votes). Circa's gold standard: min_votes=3 of 5."""
    frame = drop_missing(frame, missing)
    counts = frame.groupby(["item", "value"]).size().rename("votes").reset_index()
    totals = counts.groupby("item")["votes"].transform("sum")
    top = counts.groupby("item")["votes"].transform("max")
    winners = counts[counts["votes"] == top]
    unique_winner = winners.groupby("item")["value"].transform("size") == 1
    needed = (totals[winners.index] // 2 + 1) if min_votes is None else min_votes
    winners = winners.assign(ok=unique_winner & (winners["votes"] >= needed))
    result = winners.groupby("item").apply(lambda g: g["value"].iloc[0] if g["ok"].iloc[0] else NO_MAJORITY,
                                           include_groups=False)
    return result.rename("majority")


def bootstrap_ci(frame: pd.DataFrame, statistic, n_boot: int = 1000, level: float = 0.95, seed: int = 0):
    """Percentile CI of statistic(frame) resampling items with replacement."""
    items = frame["item"].unique()
    groups = frame.groupby("item").indices
    rng = np.random.default_rng(seed)
    values = frame.reset_index(drop=True)
    stats = []
    for _ in range(n_boot):
        pick = rng.choice(len(items), size=len(items), replace=True)
        rows = np.concatenate([groups[items[i]] for i in pick])
        # resampled copies of an item are distinct units
        sample = values.iloc[rows].assign(item=np.repeat(np.arange(len(pick)), [len(groups[items[i]]) for i in pick]))
        try:
            stats.append(statistic(sample))
        except ValueError:
            continue
    stats = np.asarray(stats, dtype=float)
    stats = stats[~np.isnan(stats)]
    if len(stats) == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    return float(np.percentile(stats, tail)), float(np.percentile(stats, 100 - tail))


def leave_one_annotator_out(frame: pd.DataFrame, methods=("pearson", "spearman", "kendall_b"), missing=(),
                            min_units: int = 3) -> pd.DataFrame:
    """The human ceiling as USR (Mehri & Eskenazi 2020) and FED report it: each annotator's rating against the mean
    of the other annotators' ratings of the same item, correlated over the items both exist for; also each
    annotator's agreement with the rest of the panel.

    frame: item, annotator, value (numeric). Returns one row per annotator with `n` (items) and one column per
    method, plus a final row `annotator="average"` (arithmetic mean of the per-annotator correlations; its `n` is
    the number of annotators averaged; `n_counts` says which). Annotators with fewer than `min_units` usable items
    get NaN."""
    from scipy import stats as sps

    funcs = {"pearson": sps.pearsonr, "spearman": sps.spearmanr, "kendall_b": sps.kendalltau}
    unknown = [m for m in methods if m not in funcs]
    if unknown:
        raise ValueError(f"methods must be among {', '.join(funcs)}, got {unknown}")
    frame = drop_missing(frame, missing)
    _wide(frame)  # one rating per (item, annotator)
    x = _numeric(frame["value"].to_numpy(), "leave-one-out")
    units = _codes(frame["item"].to_numpy())
    total = np.bincount(units, weights=x)
    count = np.bincount(units)
    others = count[units] - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = np.where(others > 0, (total[units] - x) / others, np.nan)
    table = pd.DataFrame({"annotator": frame["annotator"].to_numpy(), "x": x, "rest": rest}).dropna()
    rows = []
    for annotator, g in table.groupby("annotator", sort=True):
        row = {"annotator": annotator, "n": len(g)}
        for method in methods:
            ok = len(g) >= min_units and np.ptp(g["x"]) > 0 and np.ptp(g["rest"]) > 0
            row[method] = float(funcs[method](g["x"], g["rest"])[0]) if ok else float("nan")
        rows.append(row)
    if not rows:
        raise ValueError("leave-one-out needs items rated by two or more annotators")
    result = pd.DataFrame(rows).assign(n_counts="items")
    # the average row's n counts what is averaged: the annotators with a correlation (not a sum of their items)
    mean = {"annotator": "average", "n": int(result[methods[0]].notna().sum()), "n_counts": "annotators",
            **{m: float(result[m].mean()) for m in methods}}
    return pd.concat([result, pd.DataFrame([mean])], ignore_index=True)


def resample_counts(rng, n: int, size: int) -> np.ndarray:
    """`size` bootstrap resamples of n units as counts per unit (size x n). The draws are made 64 resamples at a
    time, which gives the same numbers as one draw of all (the generator's stream is the same) in less memory.
    The counts are held in the smallest unsigned integer type that holds them (one byte each unless a unit is
    drawn 256 times or more): 1,000 resamples of 16,667 items take 17 MB instead of 133 MB of floats. Multiply
    them with `resampled_sums`, which never makes a float copy of the whole table."""
    out = np.empty((size, n), dtype=np.uint8)
    for start in range(0, size, 64):
        draws = rng.integers(0, n, size=(min(64, size - start), n))
        for row, drawn in enumerate(draws, start):
            count = np.bincount(drawn, minlength=n)
            if count.max(initial=0) > np.iinfo(out.dtype).max:
                out = out.astype(np.min_scalar_type(n))
            out[row] = count
    return out


def resampled_sums(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`counts @ values` in floats, 64 resamples at a time: each resample's weighted sums of `values` (n, or
    n x k), from counts of any numeric type, without a float copy of the whole counts table. The same numbers
    as the product of the whole table (checked with this machine's BLAS: a block of rows is summed as it is
    in the whole product)."""
    values = np.asarray(values, dtype=float)
    out = np.empty((len(counts), *values.shape[1:]))
    for start in range(0, len(counts), 64):
        out[start:start + 64] = counts[start:start + 64].astype(float) @ values
    return out


def _unique_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(table, axis=0, return_counts=True)` of a table of counts: each row read as one integer whose
    digits, first column first, are its counts (so the integers sort as the rows do), 20 times faster than
    comparing rows; np.unique itself where the integer would not fit."""
    base = int(table.max(initial=0)) + 1
    if table.min(initial=0) < 0 or not np.array_equal(table, np.round(table)) or base ** table.shape[1] >= 2**62:
        return np.unique(table, axis=0, return_counts=True)
    keys = table.astype(np.int64) @ (base ** np.arange(table.shape[1] - 1, -1, -1, dtype=np.int64))
    _, first, frequency = np.unique(keys, return_index=True, return_counts=True)
    return table[first], frequency


def alpha_bootstrap(units, values, level: str, n_boot: int = 1000, seed: int = 0, counts=None) -> np.ndarray:
    """Krippendorff's alpha of `n_boot` bootstrap resamples of the units (items), all at once: every statistic
    alpha needs is a sum over units, so a resample is a vector of counts per unit (a unit drawn twice counts
    twice, as two units). Exact for every level (ordinal ranks follow each resample's value counts). Units with
    fewer than two values are left out first. `counts` (resamples x pairable units) replaces the random draw."""
    codes, uniq = pd.factorize(pd.Series(units))
    values = np.asarray(values)
    if level == "nominal":
        vcodes, _ = pd.factorize(pd.Series(values))
    else:
        vcodes, cats = pd.factorize(pd.Series(values.astype(float)), sort=True)
    table = np.zeros((len(uniq), vcodes.max() + 1))
    np.add.at(table, (codes, vcodes), 1)
    m = table.sum(1)
    keep = m >= 2
    table, m = table[keep], m[keep]
    if len(m) < 2:
        return np.array([])
    rng = np.random.default_rng(seed)
    n_units = len(m)

    def draw(size: int) -> np.ndarray:
        return resample_counts(rng, n_units, size)

    if counts is None:
        # units with the same value counts contribute alike: resample the patterns instead, the number of units
        # drawn with each pattern being multinomial (n, share of the pattern), the same distribution as counting
        # each of n uniform draws; far fewer columns when the scale is short (35 patterns for 3 ratings on 1-5)
        patterns, frequency = _unique_rows(table)
        if len(patterns) * 4 <= n_units:
            table, m = patterns, patterns.sum(1)

            def draw(size: int) -> np.ndarray:
                return rng.multinomial(n_units, frequency / n_units, size=size).astype(float)
    out = []
    v = None if level == "nominal" else np.asarray(cats, dtype=float)
    if level == "nominal":
        per_unit = (m**2 - (table**2).sum(1)) / (m - 1)
    elif level == "interval":  # the observed disagreement of a unit does not depend on the resample
        v = v - v.mean()
        per_unit = (2 * m * (table @ (v * v)) - 2 * (table @ v) ** 2) / (m - 1)
    total = n_boot if counts is None else len(counts)
    for start in range(0, total, 50):
        c = draw(min(50, n_boot - start)) if counts is None else counts[start:start + 50]
        n_c = c @ table  # resampled value counts
        n = n_c.sum(1)
        if level == "nominal":
            observed = c @ per_unit
            expected = n**2 - (n_c**2).sum(1)
        elif level == "interval":
            observed = c @ per_unit
            expected = 2 * n * (n_c @ (v * v)) - 2 * (n_c @ v) ** 2
        else:  # ordinal: the ranks follow the resampled value counts
            z = np.cumsum(n_c, 1) - n_c / 2
            s1 = z @ table.T
            s2 = (z * z) @ table.T
            observed = (c * (2 * m * s2 - 2 * s1 * s1) / (m - 1)).sum(1)
            expected = 2 * n * (n_c * z * z).sum(1) - 2 * (n_c * z).sum(1) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.where(expected > 0, 1 - (n - 1) * observed / expected, np.nan))
    return np.concatenate(out) if out else np.array([])


def alpha_ci(units, values, level: str, n_boot: int = 1000, level_ci: float = 0.95, seed: int = 0):
    """Percentile bootstrap CI of Krippendorff's alpha over items (vectorised; see alpha_bootstrap)."""
    boot = alpha_bootstrap(units, values, level, n_boot, seed) if n_boot > 0 else np.array([])
    boot = boot[~np.isnan(boot)]
    if not len(boot):
        return float("nan"), float("nan")
    tail = (1 - level_ci) / 2 * 100
    return float(np.percentile(boot, tail)), float(np.percentile(boot, 100 - tail))
