"""Aggregation of categorical labels from several annotators into one label per item.

- `plurality`: the most frequent label, ties to the smallest label (crowd-kit's MajorityVote on sorted labels).
- `majority_vote` (in agreement): a strict majority or none, with Circa's rule (at least 3 of 5 votes).
- `dawid_skene`: Dawid & Skene (1979), "Maximum Likelihood Estimation of Observer Error-Rates Using the EM
  Algorithm", JRSS C 28(1) - per-annotator confusion matrices by EM.
- `mace`: Hovy, Berg-Kirkpatrick, Vaswani & Hovy (2013), "Learning Whom to Trust with MACE", NAACL - annotators
  who spam, by variational Bayes.
Dawid-Skene and MACE are crowd-kit's (Ustalov et al. 2021, Apache-2.0), called with the settings the tests check.
"""

from __future__ import annotations

import pandas as pd

from .agreement import NO_MAJORITY, drop_missing, majority_vote

METHODS = ("plurality", "majority", "dawid_skene", "mace")
NEEDS_CROWD_KIT = ("dawid_skene", "mace")


def crowdkit_available() -> bool:
    """crowd-kit is the extra `evalstudio[crowd]` (it pulls in transformers, which nothing here uses)."""
    import importlib.util

    return importlib.util.find_spec("crowdkit") is not None


def _crowd(frame: pd.DataFrame, missing=()) -> pd.DataFrame:
    frame = drop_missing(frame, missing)
    if frame.empty:
        raise ValueError("no labels to aggregate")
    return pd.DataFrame({"task": frame["item"].to_numpy(), "worker": frame["annotator"].to_numpy(),
                         "label": frame["value"].to_numpy()})


def plurality(frame: pd.DataFrame, missing=()) -> pd.Series:
    """Per item, the label given most often; a tie goes to the smallest label."""
    frame = drop_missing(frame, missing)
    counts = frame.groupby(["item", "value"]).size().rename("votes").reset_index()
    counts = counts.sort_values(["item", "votes", "value"], ascending=[True, False, True])
    return counts.drop_duplicates("item").set_index("item")["value"].rename("plurality")


def dawid_skene(frame: pd.DataFrame, iterations: int = 100, tol: float = 1e-5, missing=()) -> pd.Series:
    """Each item's label by Dawid and Skene's (1979) EM over annotators' confusion matrices (crowd-kit)."""
    from crowdkit.aggregation import DawidSkene

    return DawidSkene(n_iter=iterations, tol=tol).fit_predict(_crowd(frame, missing)).rename("dawid_skene")


def mace(frame: pd.DataFrame, restarts: int = 10, iterations: int = 50, seed: int = 0, missing=()) -> pd.Series:
    """Each item's label by MACE (Hovy et al., NAACL 2013), annotators' competence and spamming estimated (crowd-kit)."""
    from crowdkit.aggregation import MACE

    model = MACE(n_restarts=restarts, n_iter=iterations, method="vb", smoothing=0.1, default_noise=0.5, alpha=0.5,
                 beta=0.5, random_state=seed)
    return model.fit_predict(_crowd(frame, missing)).rename("mace")


def aggregate(frame: pd.DataFrame, methods=METHODS, missing=(), min_votes: int | None = None) -> pd.DataFrame:
    """One column per method, one row per item (`majority` holds NO_MAJORITY where there is none; it needs
    `min_votes` votes, default more than half)."""
    funcs = {"plurality": plurality, "majority": lambda f, missing: majority_vote(f, min_votes, missing),
             "dawid_skene": dawid_skene, "mace": mace}
    unknown = [m for m in methods if m not in funcs]
    if unknown:
        raise ValueError(f"aggregation methods must be among {', '.join(METHODS)}, got {unknown}")
    return pd.concat([funcs[m](frame, missing=missing).rename(m) for m in methods], axis=1)


__all__ = ["METHODS", "NO_MAJORITY", "aggregate", "dawid_skene", "mace", "majority_vote", "plurality"]
