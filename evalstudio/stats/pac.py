"""Probably approximately correct labels: a judge labels the items it is sure of, humans the rest, and with
probability at least 1 - alpha at most a share epsilon of the final labels differ from what the humans would have
said.

Candès, Ilyas & Zrnic, "Probably Approximately Correct Labels", 2025 (arXiv:2506.10908). Each of the N items has the
judge's label and an uncertainty U_i. For a threshold u, humans label every item with U_i >= u and the judge keeps the
others; the error of the final labels is at most L(u) = (1/N) #{i : U_i < u and the judge is wrong on i}, which grows
with u. L(u) is bounded from a calibration sample: m items drawn uniformly at random without replacement and labelled
by humans. The number of the sample's items with U_i < u on which the judge is wrong is then hypergeometric (N items,
K = N L(u) of them "bad", m drawn), so the largest K under which what was seen is not rarer than alpha is an exact
upper bound of K at that u (no normal approximation: it holds at any m). The threshold is the largest u whose bound,
and the bound of every smaller u, is at most epsilon; since L grows with u, a bound that holds at one fixed u
(the last u with L(u) <= epsilon) is all the guarantee needs (as in Bates, Angelopoulos, Lei, Malik & Jordan 2021,
"Distribution-Free, Risk-Controlling Prediction Sets", for a monotone risk). The calibration sample's items keep
their human labels, which only lowers the error.

The paper also draws the calibration sample with probabilities from the uncertainty and bounds L with betting
confidence sequences; evalstudio uses the uniform sample and the exact hypergeometric bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

GRID = 200  # at most this many thresholds are tried (quantiles of the uncertainty)
# The human label of an item whose most frequent answers tie: never one of a judge's labels, so a tie counts as the
# judge being wrong (the conservative reading: the bound then covers whichever answer the humans meant). The
# gateway's PAC stop and `evalstudio active pac` (its default --ties) both use it.
NO_MAJORITY = "(no majority)"


def hypergeometric_upper(seen: int, population: int, sample: int, alpha: float) -> int:
    """The largest number K of "bad" items among `population` items with P(X <= seen | K) > alpha, X the bad items
    in a uniform sample of `sample` of them drawn without replacement: an upper bound of K that fails with
    probability at most alpha. No sample: every item may be bad.

    >>> hypergeometric_upper(0, population=100, sample=30, alpha=0.05), hypergeometric_upper(1, 100, 30, 0.05)
    (8, 13)
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not (0 <= seen <= sample <= population):
        raise ValueError(f"expected 0 <= seen <= sample <= population, got {seen}, {sample}, {population}")
    if sample == 0:
        return population
    def plausible(k: int) -> bool:  # a probability equal to alpha is not above it (scipy's rounding: 1e-16 above)
        return bool(stats.hypergeom.cdf(seen, population, k, sample) > alpha * (1 + 1e-12))

    # the K that can give `seen` bad and the rest good run from `seen` to `high`; P(X <= seen | K) decreases in K
    # and is 1 at K = seen, so the answer is found by bisection
    low, high = seen, population - (sample - seen)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if plausible(middle) else (low, middle - 1)
    return low


@dataclass(frozen=True)
class PACResult:
    """The threshold, which items humans label, and what the bound says."""
    threshold: float        # humans label every item whose uncertainty is >= threshold (inf: none beyond the sample)
    human: np.ndarray       # booleans per item: labelled by humans (the calibration sample, and uncertainty >= u)
    bound: float            # the upper bound of the error at the threshold (<= epsilon)
    sample: int             # the calibration sample's size
    epsilon: float
    alpha: float

    @property
    def human_share(self) -> float:
        """The share of items labelled by humans."""
        return float(self.human.mean())


def pac_threshold(judge_labels, uncertainty, sampled, human_labels, epsilon: float, alpha: float) -> PACResult:
    """The PAC threshold from a uniform calibration sample. judge_labels, uncertainty: one per item (N);
    sampled: the indices of the calibration sample (drawn uniformly at random without replacement, no repeats);
    human_labels: their human labels, in that order. Returns which items humans must label.

    >>> r = pac_threshold(["a"] * 8, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0, 1, 4, 5], ["a"] * 4, 0.2, 0.1)
    >>> r.threshold, r.human.astype(int).tolist(), r.bound
    (0.4, [1, 1, 0, 1, 1, 1, 1, 1], 0.125)
    """
    judge = np.asarray(judge_labels, dtype=object)
    u = np.asarray(uncertainty, dtype=float)
    sampled = np.asarray(sampled, dtype=int)
    n_items = len(judge)
    if u.shape != (n_items,) or not np.isfinite(u).all():
        raise ValueError("uncertainty: expected one finite number per item")
    if len(sampled) != len(human_labels) or len(set(sampled.tolist())) != len(sampled):
        raise ValueError("sampled and human_labels: one human label per sampled item, each item once")
    if len(sampled) == 0 or sampled.min() < 0 or sampled.max() >= n_items:
        raise ValueError(f"sampled: expected indices of items in 0..{n_items - 1}")
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
    wrong = np.asarray([a != b for a, b in zip(judge[sampled], human_labels)], dtype=bool)
    levels = np.unique(u)
    if len(levels) > GRID:  # a grid fixed by the uncertainties alone (never by the labels)
        levels = np.unique(np.quantile(u, np.linspace(0, 1, GRID)))
    candidates = np.append(levels, np.inf)  # u = min: every item to humans; inf: every item to the judge
    in_sample = np.zeros(n_items, dtype=bool)
    in_sample[sampled] = True
    bounds = np.empty(len(candidates))
    for j, level in enumerate(candidates):
        below = u < level
        # given how many sampled items fall below the threshold, they are a uniform sample of the items below it
        bounds[j] = hypergeometric_upper(int((wrong & (u[sampled] < level)).sum()), int(below.sum()),
                                         int((below & in_sample).sum()), alpha) / n_items
    fails = np.flatnonzero(bounds > epsilon)
    last = (fails[0] - 1) if len(fails) else len(candidates) - 1  # the largest u with every bound up to it held
    threshold = float(candidates[last])
    human = u >= threshold
    human[sampled] = True
    return PACResult(threshold, human, float(bounds[last]), len(sampled), epsilon, alpha)


def pac_labels(judge_labels, result: PACResult, human_labels: dict) -> tuple[np.ndarray, np.ndarray]:
    """The final labels and their source ("human" or "judge"): `human_labels` maps item index -> label and must hold
    every item `result.human` marks."""
    missing = [int(i) for i in np.flatnonzero(result.human) if int(i) not in human_labels]
    if missing:
        raise ValueError(f"{len(missing)} items need a human label and have none (e.g. item index {missing[0]})")
    labels = np.array([human_labels[i] if result.human[i] else judge_labels[i] for i in range(len(result.human))],
                      dtype=object)
    return labels, np.where(result.human, "human", "judge")
