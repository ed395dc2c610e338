"""Prediction-powered estimates for `analyze --ppi METRIC`: when a metric or an LLM judge has scored every segment
and humans rated only some, each system's mean human score and each difference between two systems, with the
PPI++ interval (valid however poor the predictor) beside the classical human-only one, and the number of human
labels the predictor is worth (evalstudio.stats.ppi).

A segment's human score is the mean of its annotators' ratings. Per system, the labelled segments are those with
a human score and a prediction, the unlabelled ones those with a prediction only; a rated segment the predictor
did not score is left out of both estimates (and counted), so that the two intervals estimate the same mean."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput
from evalstudio.readers.spec import Spec

from ..stats.ppi import ppi_mean, resampled_studies
from .tidy import segment_means

COLUMNS = ["criterion", "metric", "n_labelled", "n_unlabelled", "left_out", "classical", "classical_lo",
           "classical_hi", "ppi", "ppi_lo", "ppi_hi", "lambda", "effective_n", "width_ratio"]


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
    e = ppi_mean(y, f, f_u, alpha=alpha)
    width = (e.hi - e.lo) / (e.classical_hi - e.classical_lo) if e.classical_hi > e.classical_lo else np.nan
    return {"n_labelled": e.n, "n_unlabelled": e.N, "left_out": left_out, "classical": e.classical,
            "classical_lo": e.classical_lo, "classical_hi": e.classical_hi, "ppi": e.estimate, "ppi_lo": e.lo,
            "ppi_hi": e.hi, "lambda": e.lam, "effective_n": e.effective_n, "width_ratio": width}


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
            if labelled[i].sum() >= 2 and unlabelled[i].any():
                systems_rows.append(base | {"system": system} | _row(
                    h[i, labelled[i]], p[i, labelled[i]], p[i, unlabelled[i]], int(left_out[i].sum()), alpha))
        for a, b in combinations(range(len(human.index)), 2):
            both = labelled[a] & labelled[b]  # the pair's items rated by humans for both systems
            scored = ~np.isnan(p[a]) & ~np.isnan(p[b])
            rest = scored & ~both
            if both.sum() >= 2 and rest.any():
                dh, dp = h[a] - h[b], p[a] - p[b]
                pair_rows.append(base | {"system_a": human.index[a], "system_b": human.index[b]} | _row(
                    dh[both], dp[both], dp[rest], int((~np.isnan(dh) & ~scored).sum()), alpha))
        if why is not None and not any(r["criterion"] == criterion for r in systems_rows):
            why.add("ppi_systems", criterion, f"no system has 2 or more rated segments that {metric} scored and a "
                                              f"segment it scored that no human rated (PPI adds the unrated ones)")
    systems = pd.DataFrame(systems_rows, columns=["criterion", "metric", "system"] + COLUMNS[2:])
    pairs = pd.DataFrame(pair_rows, columns=["criterion", "metric", "system_a", "system_b"] + COLUMNS[2:])
    return systems, pairs


def calibration(ratings: pd.DataFrame, metrics: pd.DataFrame, criteria, rated: int, scored: int, studies: int,
                seed: int = 2022) -> pd.DataFrame:
    """The calibration of the prediction-powered means on a wide ratings table (item, system, one column per
    criterion, as HANNA's prepare.py writes it) and its metrics (item, system, metric, value): for every criterion,
    with the metric that correlates best with it over segments (`r`), and every system, `studies` studies drawn
    from that system's items with `rated` rated and `scored` scored-only items each (resampled_studies)."""
    rng = np.random.default_rng(seed)
    rows = []
    for criterion in criteria:
        table = metrics.pivot_table(index=["system", "item"], columns="metric", values="value", observed=True).join(
            ratings.set_index(["system", "item"])[criterion])
        segment_r = table.drop(columns=criterion).corrwith(table[criterion])
        best = segment_r.idxmax()
        for system, g in table.groupby(level="system", observed=True):
            rows.append({"criterion": criterion, "metric": best, "r": segment_r[best], "system": system}
                        | resampled_studies(g[criterion].to_numpy(), g[best].to_numpy(), rated, scored, studies, rng))
    return pd.DataFrame(rows)
