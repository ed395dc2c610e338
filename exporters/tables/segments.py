"""The matrices and codes the analysis reads of the tidy frames: one criterion's ratings with the rated unit and the
annotator as integer codes (agreement), and the human and metric scores as `systems x segments` matrices
(meta-evaluation)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from evalstudio.stats.keys import duplicated_keys

from .tidy import segment, segment_means

_INTEGER = re.compile(r"-?[0-9]+")


def coded_ratings(r: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray | None]:
    """((item, annotator, value) of one criterion's ratings, the annotators' names). The rated unit and the annotator
    are integer codes: the units in order of appearance, the annotators in the order of their names, so that every
    grouping and sorting comes out as it would on the text, which each statistic of `metaeval.agreement` would
    otherwise hash again (1 s for a million keys). Where an annotator rated a unit twice the text stays (and no
    names), so that the messages name them."""
    item, _ = pd.factorize(segment(r))
    who, names = pd.factorize(r["annotator"], sort=True)
    value = r["value"].to_numpy()
    if duplicated_keys(item.astype(np.int64) * len(names) + who, (item.max(initial=-1) + 1) * len(names)).any():
        return pd.DataFrame({"item": segment(r).to_numpy(), "annotator": r["annotator"].to_numpy(), "value": value}), None
    return pd.DataFrame({"item": item, "annotator": who, "value": value}), np.asarray(names, dtype=object)


def score_matrices(ratings: pd.DataFrame, metrics: pd.DataFrame, criterion: str):
    """(systems, items, human matrix, {metric: matrix}) for one numeric criterion (systems x items, NaN missing)."""
    human = segment_means(ratings, criterion)
    human = human[natural_order(human.columns)]
    mine = metrics["criterion"].isin([criterion, ""]).to_numpy()
    m = metrics if mine.all() else metrics[mine]  # (a copy of millions of rows only when some are not)
    # every metric's matrix at once, placed by the human matrix's system and segment positions; a score of a
    # segment the humans did not rate is left out; of two scores of one segment (one for every criterion, one for
    # this) the first in the file counts, as pivot_table(aggfunc="first") counted it
    metric, names = pd.factorize(m["metric"], sort=True)

    def position(column, labels):  # each row's position among the labels (-1: not there), looked up once per value
        codes, uniques = pd.factorize(m[column])
        return pd.Index(labels).get_indexer(uniques)[codes] if len(codes) else codes

    # each score's cell in the metrics x systems x items cube, as one integer, built in place (millions of rows:
    # one 8-byte array at a time, no copy of the positions when every row is kept)
    cell = metric.astype(np.int64)
    del metric
    for column, labels in (("system", human.index), ("item", human.columns)):
        where = position(column, labels)
        cell *= len(labels)
        cell += where
        if (where < 0).any():  # a score of a system or segment the humans did not rate is left out
            cell[where < 0] = -1
        del where
    keep = cell >= 0
    if not keep.all():
        cell = cell[keep]
    unique = ~duplicated_keys(cell, len(names) * human.size)  # the first score of a cell counts
    values = m["value"].to_numpy(dtype=float)
    values = values if keep.all() else values[keep]
    cube = np.full((len(names), *human.shape), np.nan)
    cube.reshape(-1)[cell[unique]] = values[unique]
    out = {name: cube[k] for k, name in enumerate(names)}
    return list(human.index), list(human.columns), human.to_numpy(dtype=float), out


def natural_order(labels) -> list:
    """Item ids in numeric order when they are all integers (0, 1, 2, ... 10), else as text."""
    labels = list(labels)
    if all(_INTEGER.fullmatch(str(x)) for x in labels):  # not str.isdigit(): it takes '²', which int() refuses
        return sorted(labels, key=lambda x: int(x))
    return sorted(labels, key=str)

