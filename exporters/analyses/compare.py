"""`evalstudio compare ORIGINAL REPRODUCTION`: how far a reproduction of a human evaluation agrees with the original,
as the reproducibility literature measures it (evalstudio.stats.reproducibility): per criterion and system the
two studies' scores and their CV* (Belz, Popović & Mille 2022), and the correlation of the two studies' system
scores (Pearson with its interval, Spearman and Kendall of the rankings) and of their item-level means.

A system's score is the mean over its items of each item's mean rating, as `analyze` computes it. CV* needs the
scale to start at 0: the criterion's declared minimum is subtracted (1-5 becomes 0-4); a criterion without a
declared minimum gets no CV*, and the reason."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalstudio.readers.spec import Spec

from ...stats.reproducibility import correlation_interval, cv_star
from ..tables.tidy import segment_means

SYSTEM_COLUMNS = ["criterion", "system", "original", "reproduction", "cv_star", "shift"]
CORRELATION_COLUMNS = ["criterion", "level", "n", "pearson", "pearson_lo", "pearson_hi", "spearman", "kendall"]


def compare_studies(original: pd.DataFrame, reproduction: pd.DataFrame, spec: Spec):
    """(per system, correlations, notes) for every numeric criterion both studies rated."""
    systems, correlations, notes = [], [], []
    for criterion, crit in spec.criteria.items():
        if not crit.numeric:
            continue
        if not ((original["criterion"] == criterion).any() and (reproduction["criterion"] == criterion).any()):
            notes.append(f"{criterion}: rated in one study only")
            continue
        a, b = segment_means(original, criterion), segment_means(reproduction, criterion)
        score_a, score_b = a.mean(axis=1), b.mean(axis=1)  # per system: the mean of its items' means
        common = sorted(set(score_a.dropna().index) & set(score_b.dropna().index), key=str)
        if crit.min is None:
            notes.append(f"{criterion}: no CV* (its scale's minimum is not declared: give min in the spec, so that "
                         "the scale can be shifted to start at 0 as CV* needs)")
        for system in common:
            row = {"criterion": criterion, "system": system, "original": float(score_a[system]),
                   "reproduction": float(score_b[system]), "cv_star": np.nan, "shift": crit.min}
            if crit.min is not None:
                try:
                    row["cv_star"] = cv_star([row["original"], row["reproduction"]], shift=crit.min)["cv_star"]
                except ValueError as e:
                    notes.append(f"{criterion}, {system}: no CV* ({e})")
            systems.append(row)
        correlations.append({"criterion": criterion, "level": "system"}
                            | correlation_interval(score_a[common].to_numpy(), score_b[common].to_numpy()))
        # the (system, item) pairs both studies rated: stack() keeps a system's unrated items as NaN (pandas 3),
        # which would count as pairs and make every correlation NaN
        items = a.stack().rename("a").to_frame().join(b.stack().rename("b"), how="inner").dropna()
        correlations.append({"criterion": criterion, "level": "item"}
                            | correlation_interval(items["a"].to_numpy(), items["b"].to_numpy()))
        if len(common) < 3:
            notes.append(f"{criterion}: {len(common)} system(s) in both studies: the system-level correlation needs 3")
    return (pd.DataFrame(systems, columns=SYSTEM_COLUMNS), pd.DataFrame(correlations, columns=CORRELATION_COLUMNS),
            notes)
