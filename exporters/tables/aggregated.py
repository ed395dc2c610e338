"""`analyze`'s aggregated labels: per categorical or ordinal criterion and item, plurality, majority, Dawid-Skene
(and MACE) from crowd-kit, and one-coin Dawid-Skene's label with its posterior and interval; per annotator, the
estimated accuracy with its interval (evalstudio/stats/labels.py)."""

from __future__ import annotations

import pandas as pd

from evalstudio.readers.spec import Spec

from ...stats import aggregation
from ...stats import labels as label_uncertainty
from .tidy import segment


def aggregate(ratings: pd.DataFrame, spec: Spec, why, mace: bool = False,
              n_boot: int = 200) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Aggregated labels of the categorical and ordinal criteria, one row per (criterion, item), with one-coin
    Dawid-Skene's label, its posterior and interval (evalstudio/stats/labels.py); and each annotator's estimated
    accuracy with its interval, one row per (criterion, annotator)."""
    # (why: metaeval's Reasons, the rows of not_computed.csv)
    parts, accuracy = [], []
    methods = ("plurality", "majority", "dawid_skene") + (("mace",) if mace else ())
    if not aggregation.crowdkit_available():
        methods = tuple(m for m in methods if m not in aggregation.NEEDS_CROWD_KIT)
    for name, crit in spec.criteria.items():
        r = ratings[ratings["criterion"] == name]
        if r.empty:
            continue
        if crit.scale == "interval":
            why.add("aggregated_labels", name, "interval scale: labels are aggregated for categorical and ordinal "
                                               "criteria; an interval criterion's mean per system is in systems.csv")
            continue
        if crit.numeric and not crit.labels and r["value"].nunique() > 20:
            why.add("aggregated_labels", name, f"{r['value'].nunique()} distinct values: too many to vote on as "
                                               "labels (give the criterion its labels in the spec to aggregate)")
            continue
        frame = pd.DataFrame({"item": segment(r).to_numpy(), "annotator": r["annotator"].to_numpy(),
                              "value": r["value"].to_numpy()})
        labels = aggregation.aggregate(frame, methods, min_votes=crit.min_votes)
        if frame["value"].nunique() > 1:
            items, annotators = label_uncertainty.one_coin_labels(frame["item"], frame["annotator"], frame["value"],
                                                                  n_boot=min(n_boot, 200))
            if not items.attrs["n_boot"]:
                why.add("annotator_accuracy", name, f"{len(frame):,} labels: the intervals (bootstrap refits) are "
                                                    "left out above 200,000 labels; the estimates are given")
            labels = labels.join(items.set_index("item").rename(columns={"label": "one_coin"})
                                 .drop(columns="labels"))
            accuracy.append(annotators.assign(criterion=name))
        if crit.labels is not None and crit.scale == "ordinal":  # positions back to the labels
            names = {float(i + 1): label for i, label in enumerate(crit.labels)}
            for column in [c for c in labels.columns if not c.startswith("posterior")]:
                labels[column] = labels[column].map(lambda v: names.get(_float(v), v))
        parts.append(labels.rename_axis("item").reset_index().assign(criterion=name))
    cat = lambda frames: pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return cat(parts), cat(accuracy)


def _float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value
