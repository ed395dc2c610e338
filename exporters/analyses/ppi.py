"""Prediction-powered estimates for `analyze --ppi METRIC`: when a metric or an LLM judge has scored every segment
and humans rated only some, each system's mean human score and each difference between two systems, with the
PPI++ interval (its coverage held from 40 rated segments per system, whatever the predictor) beside the classical
human-only one (from 30), and the number of human labels the predictor is worth (evalstudio.stats.ppi).

A segment's human score is the mean of its annotators' ratings. Per system, the labelled segments are those with
a human score and a prediction, the unlabelled ones those with a prediction only; a rated segment the predictor
did not score is left out of both estimates (and counted), so that the two intervals estimate the same mean."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput
from evalstudio.readers.spec import Spec

from ...stats.ppi import ppi_mean, resampled_studies
from ..tables.tidy import segment_means

COLUMNS = ["criterion", "metric", "n_labelled", "n_unlabelled", "left_out", "classical", "classical_lo",
           "classical_hi", "ppi", "ppi_lo", "ppi_hi", "lambda", "effective_n", "width_ratio"]

# The sizes below which a number is not printed, from its calibration on published ratings: HANNA (useless, weak and
# good predictors, 10 systems x 6 criteria, benchmarks/ppi_calibration.py) and USR's and SQuALITY's ratings per system
# (benchmarks/active.py, the per-system tables; docs/analyze.md). The 95% intervals are t intervals (with lambda's
# degree of freedom) lengthened where the scores are skewed (stats.small_sample). The human-only ones covered at least
# 0.943 of the time on every system from 10 rated segments. The PPI++ ones covered at least 0.939 on average over
# each data set's systems from 10, but one system's, USR's rated 4.8 on 1-5 with a good predictor (r 0.91), only
# 0.925 at 30 (8,000 studies); from 40 every system's held (at least 0.936): lambda tuned on a few labels biases the
# estimate there. The labels a predictor is said to be worth were what the studies realised (within 10%) only from
# 60 (at 10 a good predictor was said to be worth 44 labels and was worth 32).
MIN_RATED = 30
MIN_RATED_PPI = 40
MIN_RATED_EFFECTIVE_N = 60
# Why, each with the figure its calibration table gives for that case (tests/test_ppi.py holds them to the tables)
BELOW_MIN_RATED = ("below, a human-only 95% interval of a 0/1 share near a fifth covered the truth 0.86 of the time "
                   "at 10 rated segments and 0.92 at 20: docs/active.md")
BELOW_MIN_RATED_PPI = ("below, one system's PPI++ 95% interval (USR's rated 4.8 of 5, a predictor of r 0.91) covered "
                       "the truth 0.925 of the time at 30: docs/analyze.md")
BELOW_MIN_RATED_EFFECTIVE_N = ("below, drawn from HANNA's published ratings, it overstated what a good predictor was "
                               "worth by 40% at 10 rated segments (said 43 labels, worth 31): docs/analyze.md")


def segment_matrices(ratings: pd.DataFrame, metrics: pd.DataFrame, criterion: str, metric: str):
    """(human, prediction): systems x items frames of the criterion's mean human score and the metric's score,
    over every item either has (NaN where missing)."""
    human = segment_means(ratings, criterion)
    m = metrics[(metrics["metric"] == metric) & metrics["criterion"].isin([criterion, ""])]
    prediction = m.pivot_table(index="system", columns="item", values="value", aggfunc="first", observed=True)
    systems = sorted(set(human.index) | set(prediction.index), key=str)
    items = sorted(set(human.columns) | set(prediction.columns), key=str)
    return human.reindex(index=systems, columns=items), prediction.reindex(index=systems, columns=items)


def _row(y, f, f_u, left_out: int, alpha: float) -> dict:
    """One estimate's columns; below the calibrated sizes (MIN_RATED_PPI, MIN_RATED_EFFECTIVE_N) the numbers that
    did not hold there are left empty (NaN), and `notes` says why."""
    e = ppi_mean(y, f, f_u, alpha=alpha)
    width = (e.hi - e.lo) / (e.classical_hi - e.classical_lo) if e.classical_hi > e.classical_lo else np.nan
    row = {"n_labelled": e.n, "n_unlabelled": e.N, "left_out": left_out, "classical": e.classical,
           "classical_lo": e.classical_lo, "classical_hi": e.classical_hi, "ppi": e.estimate, "ppi_lo": e.lo,
           "ppi_hi": e.hi, "lambda": e.lam, "effective_n": e.effective_n, "width_ratio": width}
    if e.n < MIN_RATED_PPI:
        row.update(ppi=np.nan, ppi_lo=np.nan, ppi_hi=np.nan, width_ratio=np.nan)
    if e.n < MIN_RATED_EFFECTIVE_N:
        row["effective_n"] = np.nan
    return row


def size_notes(systems: pd.DataFrame, pairs: pd.DataFrame) -> list[str]:
    """What was not printed for too few rated segments, and why (the calibration's sizes)."""
    rated = pd.concat([systems["n_labelled"], pairs["n_labelled"]]) if len(systems) or len(pairs) else pd.Series([])
    notes = []
    if (rated < MIN_RATED_PPI).any():
        notes.append(f"PPI++ intervals are given from {MIN_RATED_PPI} rated segments (a system's, or a pair's; "
                     f"{BELOW_MIN_RATED_PPI})")
    if (rated < MIN_RATED_EFFECTIVE_N).any():
        notes.append(f"effective_n (the human labels the predictor is worth) is given from {MIN_RATED_EFFECTIVE_N} "
                     f"rated segments: {BELOW_MIN_RATED_EFFECTIVE_N}")
    return notes


def ppi_tables(ratings: pd.DataFrame, metrics: pd.DataFrame, spec: Spec, metric: str, alpha: float = 0.05,
               why=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per system, per pair of systems) prediction-powered and classical means for every numeric criterion."""
    known = sorted(set(metrics["metric"]))
    if metric not in known:
        raise BadInput(f"--ppi {metric}: no such metric in the metrics file (it has: {', '.join(known[:20])})")
    systems_rows, pair_rows = [], []
    for criterion, crit in spec.criteria.items():
        if not (ratings["criterion"] == criterion).any():
            continue
        if not crit.numeric:
            if why is not None:
                why.add("ppi_systems", criterion, f"{crit.scale} scale: a mean human score needs numbers")
            continue
        human, prediction = segment_matrices(ratings, metrics, criterion, metric)
        h, p = human.to_numpy(dtype=float), prediction.to_numpy(dtype=float)
        labelled, unlabelled = ~np.isnan(h) & ~np.isnan(p), np.isnan(h) & ~np.isnan(p)
        left_out = ~np.isnan(h) & np.isnan(p)
        base = {"criterion": criterion, "metric": metric}
        for i, system in enumerate(human.index):
            if labelled[i].sum() >= MIN_RATED and unlabelled[i].any():
                systems_rows.append(base | {"system": system} | _row(
                    h[i, labelled[i]], p[i, labelled[i]], p[i, unlabelled[i]], int(left_out[i].sum()), alpha))
        for a, b in combinations(range(len(human.index)), 2):
            both = labelled[a] & labelled[b]  # the pair's items rated by humans for both systems
            scored = ~np.isnan(p[a]) & ~np.isnan(p[b])
            rest = scored & ~both
            if both.sum() >= MIN_RATED and rest.any():
                dh, dp = h[a] - h[b], p[a] - p[b]
                pair_rows.append(base | {"system_a": human.index[a], "system_b": human.index[b]} | _row(
                    dh[both], dp[both], dp[rest], int((~np.isnan(dh) & ~scored).sum()), alpha))
        if why is not None and len(human.index) > 1 and not any(r["criterion"] == criterion for r in pair_rows):
            shared = max((int((labelled[a] & labelled[b]).sum()) for a, b in combinations(range(len(human.index)), 2)),
                         default=0)
            why.add("ppi_pairs", criterion, f"no two systems have {MIN_RATED} or more segments rated by humans for "
                                            f"both and scored by {metric} (the most any pair shares: {shared}): a "
                                            "difference is estimated on the items both systems were rated on; "
                                            "each system's own mean is in ppi_systems.csv")
        if why is not None and not any(r["criterion"] == criterion for r in systems_rows):
            why.add("ppi_systems", criterion, f"no system has {MIN_RATED} or more rated segments that {metric} "
                                              f"scored ({BELOW_MIN_RATED}) and a segment it scored that no human "
                                              "rated (PPI adds the unrated ones)")
    systems = pd.DataFrame(systems_rows, columns=["criterion", "metric", "system"] + COLUMNS[2:])
    pairs = pd.DataFrame(pair_rows, columns=["criterion", "metric", "system_a", "system_b"] + COLUMNS[2:])
    if why is not None:
        for note in size_notes(systems, pairs):
            why.add("ppi_systems", "", note)
    return systems, pairs


def calibration(ratings: pd.DataFrame, metrics: pd.DataFrame, criteria, rated: int, scored: int, studies: int,
                seed: int = 2022, predictor: str = "best") -> pd.DataFrame:
    """The calibration of the prediction-powered means on a wide ratings table (item, system, one column per
    criterion, as HANNA's prepare.py writes it) and its metrics (item, system, metric, value): for every criterion,
    with the metric that correlates best with it over segments (`r`), and every system, `studies` studies drawn
    from that system's items with `rated` rated and `scored` scored-only items each (resampled_studies).

    `predictor`: "best" (that metric), "useless" (its scores shuffled among the system's items: real values that
    carry nothing), or "good" (the human score plus normal noise of half its standard deviation, r about 0.9: the
    real ratings' distribution, a predictor better than any published metric here)."""
    rng = np.random.default_rng(seed)
    rows = []
    for criterion in criteria:
        table = metrics.pivot_table(index=["system", "item"], columns="metric", values="value", observed=True).join(
            ratings.groupby(["system", "item"])[criterion].mean())
        segment_r = table.drop(columns=criterion).corrwith(table[criterion])
        best = segment_r.idxmax()
        for system, g in table.groupby(level="system", observed=True):
            y, f = g[criterion].to_numpy(dtype=float), g[best].to_numpy(dtype=float)
            if predictor == "useless":
                f = rng.permutation(f)
            elif predictor == "good":
                f = y + rng.normal(0, 0.5 * y.std(), len(y))
            rows.append({"criterion": criterion, "metric": best if predictor == "best" else predictor,
                         "r": float(np.corrcoef(y, f)[0, 1]) if predictor != "best" else segment_r[best],
                         "system": system} | resampled_studies(y, f, rated, scored, studies, rng))
    return pd.DataFrame(rows)
