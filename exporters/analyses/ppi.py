"""Prediction-powered estimates for `analyze --ppi METRIC`: when a metric or an LLM judge has scored every segment
and humans rated only some, each system's mean human score and each difference between two systems, with the
PPI++ interval (lambda cross-fitted, evalstudio.stats.ppi) beside the classical human-only one, and the number of
human labels the predictor is worth, each printed from the size at which it held on published data.

`population`: "finite" (the default): the question is the mean over the study's own segments, the scored-only ones
being the rest of them, and the rated ones a sample drawn without replacement (the finite-population correction);
"infinite": the mean of a population the segments were drawn from (`analyze --population infinite`).

A segment's human score is the mean of its annotators' ratings. Per system, the labelled segments are those with
a human score and a prediction, the unlabelled ones those with a prediction only; a rated segment the predictor
did not score is left out of both estimates (and counted), so that the two intervals estimate the same mean."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput
from evalstudio.readers.spec import Spec

from ...stats.ppi import ppi_mean
from ..tables.tidy import segment_means

COLUMNS = ["criterion", "metric", "population", "n_labelled", "n_unlabelled", "left_out", "classical",
           "classical_lo", "classical_hi", "ppi", "ppi_lo", "ppi_hi", "lambda", "effective_n", "width_ratio"]
POPULATIONS = ("finite", "infinite")

# The sizes from which a number is printed, per population, from its calibration on published ratings
# (benchmarks/ppi_calibration.py: HANNA, USR and SQuALITY, useless, real and good predictors, every system and the
# pairs of systems at 10, 20, 30 and 60 rated segments; docs/analyze.md): the smallest calibrated size from which
# every system's and pair's 95% interval covered the truth at least 0.93 of the time (and effective_n was within 10%
# of what the studies realised), at that size and every larger one. Each reason cites the figure below it.
MIN_RATED = {"finite": 10, "infinite": 10}
MIN_RATED_PPI = {"finite": 10, "infinite": 10}
MIN_RATED_EFFECTIVE_N = {"finite": 60, "infinite": 60}
UNCALIBRATED = ("below, nothing was calibrated (benchmarks/ppi_calibration.py starts at 10 rated segments): "
                "docs/analyze.md")
BELOW_MIN_RATED = {"finite": UNCALIBRATED, "infinite": UNCALIBRATED}
BELOW_MIN_RATED_PPI = {"finite": UNCALIBRATED, "infinite": UNCALIBRATED}
# A criterion whose human scores take two values (a share: yes/no, 0/1) was calibrated on GPT-4o's stance labels
# (Candès, Ilyas & Zrnic 2025; docs/active.md), not on the ratings above: a rare class's t interval fell short at 10
# and 20 labels with every strategy, human-only included.
MIN_RATED_TWO_VALUED = 30
BELOW_MIN_RATED_TWO_VALUED = ("a criterion with two values (a share) is given from 30 rated segments: drawn from "
                              "GPT-4o's stance labels (Candès, Ilyas & Zrnic 2025), the share that disagrees (a fifth) "
                              "was covered 0.843-0.865 at 10 labels and 0.917-0.936 at 20, with every strategy "
                              "(human-only too), 0.934 at least from 30: docs/active.md")
# A criterion whose annotators' labels take two values (yes/no, 0/1) with two or more annotators on a segment: its
# segment score is the share of them that said yes (0, 1/3, 2/3, 1 with three), neither a rating nor a share, and was
# calibrated on its own (benchmarks/ppi_calibration.py --data circa: three of Circa's five judgements of each
# answer, its 10 situations as the systems; docs/analyze.md). Detected on the labels, not the means, so that a
# criterion is one whatever its segments happened to average; a rating whose annotators used two values only is
# counted as one too (it is then printed from this size, the stricter rule).
MIN_RATED_BINARY_MEAN = 60
BELOW_MIN_RATED_BINARY_MEAN = ("the mean of several annotators' two-valued labels (yes/no, 0/1) is given from 60 rated "
                               "segments: drawn from three of Circa's five judgements of each answer (Louis, Roth & "
                               "Radlinski 2020), a rare label's (3-13% of the judgements) mean was covered 0.884 at 30 "
                               "(0.516 at 10), human-only and PPI++ alike, 0.938 at least from 60: docs/analyze.md")
BELOW_MIN_RATED_EFFECTIVE_N = {
    "finite": "below, drawn from HANNA's published ratings, it overstated what a good predictor was worth to one "
              "system by 15% at 30 rated segments (said 150 labels, worth 131): docs/analyze.md",
    "infinite": "below, drawn from HANNA's published ratings, it overstated what a good predictor was worth to one "
                "system by 13% at 30 rated segments (said 101 labels, worth 90): docs/analyze.md"}


def segment_matrices(ratings: pd.DataFrame, metrics: pd.DataFrame, criterion: str, metric: str):
    """(human, prediction): systems x items frames of the criterion's mean human score and the metric's score,
    over every item either has (NaN where missing)."""
    human = segment_means(ratings, criterion)
    m = metrics[(metrics["metric"] == metric) & metrics["criterion"].isin([criterion, ""])]
    prediction = m.pivot_table(index="system", columns="item", values="value", aggfunc="first", observed=True)
    systems = sorted(set(human.index) | set(prediction.index), key=str)
    items = sorted(set(human.columns) | set(prediction.columns), key=str)
    return human.reindex(index=systems, columns=items), prediction.reindex(index=systems, columns=items)


def _row(y, f, f_u, left_out: int, alpha: float, population: str) -> dict:
    """One estimate's columns; below the calibrated sizes (MIN_RATED_PPI, MIN_RATED_EFFECTIVE_N) the numbers that
    did not hold there are left empty (NaN), and `size_notes` says why."""
    e = ppi_mean(y, f, f_u, alpha=alpha, finite=population == "finite")
    width = (e.hi - e.lo) / (e.classical_hi - e.classical_lo) if e.classical_hi > e.classical_lo else np.nan
    row = {"population": population, "n_labelled": e.n, "n_unlabelled": e.N, "left_out": left_out,
           "classical": e.classical, "classical_lo": e.classical_lo, "classical_hi": e.classical_hi,
           "ppi": e.estimate, "ppi_lo": e.lo, "ppi_hi": e.hi, "lambda": e.lam, "effective_n": e.effective_n,
           "width_ratio": width}
    if e.n < MIN_RATED_PPI[population]:
        row.update(ppi=np.nan, ppi_lo=np.nan, ppi_hi=np.nan, width_ratio=np.nan)
    if e.n < MIN_RATED_EFFECTIVE_N[population]:
        row["effective_n"] = np.nan
    return row


def least_rated(ratings: pd.DataFrame, criterion: str, human: np.ndarray, population: str) -> tuple[int, str]:
    """(the fewest rated segments a system needs, the reason below it) for a criterion: a share (its segment scores
    take two values) from MIN_RATED_TWO_VALUED, a mean of several annotators' two-valued labels from
    MIN_RATED_BINARY_MEAN, a rating from MIN_RATED."""
    labels = pd.to_numeric(ratings.loc[ratings["criterion"] == criterion, "value"], errors="coerce").dropna()
    if np.unique(human[~np.isnan(human)]).size <= 2:
        return max(MIN_RATED[population], MIN_RATED_TWO_VALUED), BELOW_MIN_RATED_TWO_VALUED
    if labels.nunique() <= 2:
        return max(MIN_RATED[population], MIN_RATED_BINARY_MEAN), BELOW_MIN_RATED_BINARY_MEAN
    return MIN_RATED[population], BELOW_MIN_RATED[population]


def size_notes(systems: pd.DataFrame, pairs: pd.DataFrame, population: str = "finite") -> list[str]:
    """What was not printed for too few rated segments, and why (the calibration's sizes)."""
    rated = pd.concat([systems["n_labelled"], pairs["n_labelled"]]) if len(systems) or len(pairs) else pd.Series([])
    notes = []
    if (rated < MIN_RATED_PPI[population]).any():
        notes.append(f"PPI++ intervals ({population} population) are given from {MIN_RATED_PPI[population]} rated "
                     f"segments (a system's, or a pair's; {BELOW_MIN_RATED_PPI[population]})")
    if (rated < MIN_RATED_EFFECTIVE_N[population]).any():
        notes.append(f"effective_n (the human labels the predictor is worth) is given from "
                     f"{MIN_RATED_EFFECTIVE_N[population]} rated segments: {BELOW_MIN_RATED_EFFECTIVE_N[population]}")
    return notes


def ppi_tables(ratings: pd.DataFrame, metrics: pd.DataFrame, spec: Spec, metric: str, alpha: float = 0.05,
               why=None, population: str = "finite") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per system, per pair of systems) prediction-powered and classical means for every numeric criterion, of
    the study's own segments (`population` "finite") or of a population they were drawn from ("infinite")."""
    if population not in POPULATIONS:
        raise BadInput(f"--population {population}: expected one of {', '.join(POPULATIONS)}")
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
        least, below = least_rated(ratings, criterion, h, population)
        labelled, unlabelled = ~np.isnan(h) & ~np.isnan(p), np.isnan(h) & ~np.isnan(p)
        left_out = ~np.isnan(h) & np.isnan(p)
        base = {"criterion": criterion, "metric": metric}
        for i, system in enumerate(human.index):
            if labelled[i].sum() >= least and unlabelled[i].any():
                systems_rows.append(base | {"system": system} | _row(
                    h[i, labelled[i]], p[i, labelled[i]], p[i, unlabelled[i]], int(left_out[i].sum()), alpha,
                    population))
        for a, b in combinations(range(len(human.index)), 2):
            both = labelled[a] & labelled[b]  # the pair's items rated by humans for both systems
            scored = ~np.isnan(p[a]) & ~np.isnan(p[b])
            rest = scored & ~both
            if both.sum() >= least and rest.any():
                dh, dp = h[a] - h[b], p[a] - p[b]
                pair_rows.append(base | {"system_a": human.index[a], "system_b": human.index[b]} | _row(
                    dh[both], dp[both], dp[rest], int((~np.isnan(dh) & ~scored).sum()), alpha, population))
        if why is not None and len(human.index) > 1 and not any(r["criterion"] == criterion for r in pair_rows):
            shared = max((int((labelled[a] & labelled[b]).sum()) for a, b in combinations(range(len(human.index)), 2)),
                         default=0)
            why.add("ppi_pairs", criterion, f"no two systems have {least} or more segments rated by humans for "
                                            f"both and scored by {metric} (the most any pair shares: {shared}): a "
                                            "difference is estimated on the items both systems were rated on; "
                                            "each system's own mean is in ppi_systems.csv")
        if why is not None and not any(r["criterion"] == criterion for r in systems_rows):
            why.add("ppi_systems", criterion, f"no system has {least} or more rated segments that {metric} "
                                              f"scored ({below}) and a segment it scored that "
                                              "no human rated (PPI adds the unrated ones)")
    systems = pd.DataFrame(systems_rows, columns=["criterion", "metric", "system"] + COLUMNS[2:])
    pairs = pd.DataFrame(pair_rows, columns=["criterion", "metric", "system_a", "system_b"] + COLUMNS[2:])
    if why is not None:
        for note in size_notes(systems, pairs, population):
            why.add("ppi_systems", "", note)
    return systems, pairs
