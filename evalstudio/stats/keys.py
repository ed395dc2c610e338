"""Integer keys: which of them repeat. Shared by the readers (a second score of one metric for one item), the
placement of metric scores in their matrices, and the statistics that need one answer per (unit, annotator)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def duplicated_keys(key: np.ndarray, size: int) -> np.ndarray:
    """Which integer keys in [0, size) repeat an earlier one (the first of equal keys is not a duplicate). The usual
    case, no repeat, is told by counting each key when `size` is not much larger than the keys; otherwise, and when
    some repeat, by hashing."""
    if size <= 4 * len(key) + 1024 and np.bincount(key, minlength=size).max(initial=0) <= 1:
        return np.zeros(len(key), dtype=bool)
    return pd.Series(key).duplicated(keep="first").to_numpy()
