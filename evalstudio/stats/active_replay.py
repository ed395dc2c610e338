"""Replaying a study on published labels: the labels are revealed in the order a strategy asks for them, many times,
to measure what each strategy costs and whether its intervals hold (benchmarks/active.py, tests/test_active.py).

Every run draws a study of N items with replacement from the published items (their mean is the truth), with the
judge's score of each, and a budget of B human labels in expectation:

- human only: every item drawn with probability B / N, the human labels' mean (lambda 0);
- uniform PPI++: the same draws, the judge's scores on every item (lambda tuned);
- active, `design="two batches"`: a first third of the budget drawn uniformly, an uncertainty model fitted to its
  errors (`binned_uncertainty`, or the judge's own uncertainty where it has one), the uniform share chosen by
  `robust_mix`, the rest of the budget drawn with `sampling_probabilities`, both batches in one estimate (a design
  `active draw` and the gateway do not offer);
- active, `design="one batch"`: what `active draw` and the gateway do: every item drawn at once with
  `sampling_probabilities` of the judge's own uncertainty and a fixed uniform share `mix`.

All three are `active_means`, so they differ only in which items humans label."""

from __future__ import annotations

import numpy as np

from .active import (DEFAULT_MIX, active_means, binned_uncertainty, label_weights, robust_mix, sampling_probabilities,
                     two_batch_weights)
from .pac import pac_threshold

STRATEGIES = ("human only", "uniform PPI++", "active")


DESIGNS = ("two batches", "one batch")


def replay_means(y, f, budget: int, runs: int, rng, uncertainty=None, alpha: float = 0.05, population: int | None = None,
                 design: str = "two batches", mix: float = DEFAULT_MIX) -> dict[str, dict]:
    """Per strategy: coverage of the (1 - alpha) interval, mean width and mean number of human labels over `runs`
    studies (y: the published human scores, f: the judge's, one per item; `uncertainty`: the judge's own, or None to
    fit one on the first batch; `population`: the items a study has, the judge scoring all of them, default as
    many as published; `design`: the active strategy's, one of DESIGNS, `mix` its uniform share in one batch)."""
    if design not in DESIGNS or (design == "one batch" and uncertainty is None):
        raise ValueError(f"design must be one of {DESIGNS}; one batch needs the judge's own uncertainty")
    y, f = np.asarray(y, dtype=float), np.asarray(f, dtype=float)
    n_items = population or len(y)
    if not 4 <= budget < n_items:
        raise ValueError(f"budget must be in [4, {n_items}), got {budget}")
    truth = y.mean()
    pick = rng.integers(0, len(y), size=(runs, n_items))
    Y, F = y[pick], f[pick]
    U = None if uncertainty is None else np.asarray(uncertainty, dtype=float)[pick]
    uniform = np.full((runs, n_items), budget / n_items)
    drawn = rng.random((runs, n_items)) < uniform
    # at least 4 labels per study (as a study would insist on): a redraw of the rare studies with fewer
    while (few := drawn.sum(1) < 4).any():
        drawn[few] = rng.random((few.sum(), n_items)) < uniform[few]
    results = {"human only": (active_means(Y, F, label_weights(uniform, drawn), alpha, lam=0), drawn.sum(1)),
               "uniform PPI++": (active_means(Y, F, label_weights(uniform, drawn), alpha), drawn.sum(1))}
    if design == "one batch":
        pi = np.stack([sampling_probabilities(U[r], budget, mix) for r in range(runs)])
        drawn = rng.random((runs, n_items)) < pi
        while (few := drawn.sum(1) < 4).any():  # at least 4 labels, as for the other strategies
            drawn[few] = rng.random((few.sum(), n_items)) < pi[few]
        results["active"] = (active_means(Y, F, label_weights(pi, drawn), alpha), drawn.sum(1))
        return _summary(results, truth)
    first_budget = budget / 3
    first_pi = np.full((runs, n_items), first_budget / n_items)
    second_pi = np.ones((runs, n_items))
    first = rng.random((runs, n_items)) < first_pi
    while (few := first.sum(1) < 2).any():
        first[few] = rng.random((few.sum(), n_items)) < first_pi[few]
    second = np.zeros((runs, n_items), dtype=bool)
    for r in range(runs):
        labelled = np.flatnonzero(first[r])
        rest = ~first[r]
        errors = Y[r, labelled] - F[r, labelled]
        u = binned_uncertainty(F[r], labelled, errors) if U is None else U[r]
        left = min(budget - first[r].sum(), rest.sum())
        if left <= 0:
            continue
        chosen = robust_mix(u[rest], left, u[labelled], errors)
        second_pi[r, rest] = sampling_probabilities(u[rest], left, chosen)
        while True:  # at least 4 labels in all, as for the other strategies
            second[r, rest] = rng.random(rest.sum()) < second_pi[r, rest]
            if (first[r] | second[r]).sum() >= 4:
                break
    weights = two_batch_weights((first_pi, first), (second_pi, second))
    results["active"] = (active_means(Y, F, weights, alpha), (first | second).sum(1))
    return _summary(results, truth)


def _summary(results: dict, truth: float) -> dict[str, dict]:
    out = {}
    for name, (r, labels) in results.items():
        out[name] = {"coverage": float(np.mean((r["lo"] <= truth) & (truth <= r["hi"]))),
                     "width": float(np.mean(r["hi"] - r["lo"])), "labels": float(np.mean(labels))}
    return out


def labels_for_width(budgets, widths, target: float) -> float:
    """The budget at which a strategy's mean width reaches `target`, interpolated on log scales between the
    budgets tried (NaN where no budget tried reaches it)."""
    budgets, widths = np.asarray(budgets, dtype=float), np.asarray(widths, dtype=float)
    reached = np.flatnonzero(widths <= target)
    if len(reached) == 0:
        return float("nan")
    j = reached[0]
    if j == 0:
        return float(budgets[0]) if widths[0] == target else float("nan")
    x0, x1, w0, w1 = np.log(budgets[j - 1]), np.log(budgets[j]), np.log(widths[j - 1]), np.log(widths[j])
    return float(np.exp(x0 + (np.log(target) - w0) * (x1 - x0) / (w1 - w0)))


def replay_pac(judge, uncertainty, human, sample: int, epsilon: float, alpha: float, runs: int, rng) -> dict:
    """PAC labels on published labels: `runs` uniform calibration samples of `sample` items; per run the realised
    error of the final labels (judge where it kept the item, humans elsewhere) against the published labels.
    Returns the share of runs whose error exceeded epsilon, the mean and largest error, and the mean share of items
    humans labelled."""
    judge, human = np.asarray(judge, dtype=object), np.asarray(human, dtype=object)
    errors, shares = [], []
    for _ in range(runs):
        sampled = rng.choice(len(judge), size=sample, replace=False)
        result = pac_threshold(judge, uncertainty, sampled, human[sampled], epsilon, alpha)
        errors.append(float(np.mean((judge != human) & ~result.human)))
        shares.append(result.human_share)
    errors = np.asarray(errors)
    return {"over_epsilon": float(np.mean(errors > epsilon)), "mean_error": float(errors.mean()),
            "max_error": float(errors.max()), "human_share": float(np.mean(shares)),
            "judge_error": float(np.mean(judge != human))}
