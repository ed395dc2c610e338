"""Labels with error bars: each item's aggregated label with its posterior probability and an interval, and each
annotator's accuracy with an interval, from one-coin Dawid-Skene (Zhang, Chen, Zhou & Jordan 2016; the fit in
evalstudio/stats/adaptive.py, crowd-kit's OneCoinDawidSkene with weak priors).

- The posterior is the model's probability that the item's label is right. With the priors (two right and two
  wrong pseudo-labels per annotator, one pseudo-label per class) it is calibrated on simulations from the model
  fitted to Circa's published MTurk ratings: items with posterior p are right about p of the time
  (tests/test_labels.py). Full Dawid-Skene (a confusion matrix per annotator) is not: on the same data its
  posteriors above 0.99 were right 86% of the time, so no posterior is given for it.
- The intervals come from a bootstrap over items (each refit on items drawn with replacement, `n_boot` times):
  an annotator's accuracy interval is the percentile interval of their refitted accuracy (95% intervals covered
  the true accuracy 93% of the time in those simulations); an item's posterior interval is the percentile
  interval of its posterior, its own labels held fixed, under each refit's accuracies and class frequencies.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import adaptive

MAX_BOOTSTRAP_LABELS = 200_000  # above this many labels the refits would take minutes: posteriors, no intervals


def _fit(t, a, y, n_tasks: int, n_annotators: int, n_classes: int):
    probas, skills, priors = adaptive.one_coin_fit(t, a, y, n_tasks=n_tasks, n_classes=n_classes,
                                                   skill_prior=adaptive.SKILL_PRIOR, class_prior=adaptive.CLASS_PRIOR)
    return probas, np.concatenate([skills, np.full(n_annotators - len(skills), np.nan)]), priors


def one_coin_labels(items, annotators, values, n_boot: int = 200, seed: int = 0,
                    level: float = 0.95) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(items, annotators). Items: item, label, posterior, posterior_lo, posterior_hi, labels. Annotators:
    annotator, accuracy, accuracy_lo, accuracy_hi, labels. The intervals are NaN when `n_boot` is 0 or there are
    more than MAX_BOOTSTRAP_LABELS labels; `attrs["n_boot"]` says how many refits gave them."""
    t, item_names = pd.factorize(pd.Series(items), sort=True)
    a, annotator_names = pd.factorize(pd.Series(annotators), sort=True)
    y, label_names = pd.factorize(pd.Series(values), sort=True)
    if len(t) == 0:
        raise ValueError("no labels to aggregate")
    if len(label_names) < 2:
        raise ValueError("one label only: nothing to aggregate")
    n_tasks, n_annotators, n_classes = len(item_names), len(annotator_names), len(label_names)
    probas, skills, priors = _fit(t, a, y, n_tasks, n_annotators, n_classes)
    chosen = probas.argmax(axis=1)
    posterior = probas[np.arange(n_tasks), chosen]
    n_boot = 0 if len(t) > MAX_BOOTSTRAP_LABELS else int(n_boot)
    tail = (1 - level) / 2
    post_lo = post_hi = np.full(n_tasks, np.nan)
    acc_lo = acc_hi = np.full(n_annotators, np.nan)
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        order = np.argsort(t, kind="stable")
        per_item = np.bincount(t, minlength=n_tasks)
        starts = np.concatenate([[0], np.cumsum(per_item)[:-1]])
        boot_skills = np.empty((n_boot, n_annotators))
        boot_posterior = np.empty((n_boot, n_tasks))
        for b in range(n_boot):
            draw = rng.integers(0, n_tasks, n_tasks)
            sizes = per_item[draw]
            offsets = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            rows = order[np.repeat(starts[draw], sizes) + offsets]
            new_t = np.repeat(np.arange(n_tasks), sizes)
            _, s_b, priors_b = _fit(new_t, a[rows], y[rows], n_tasks, n_annotators, n_classes)
            # an annotator none of whose items was drawn: their accuracy is unknown in this refit (the prior's)
            seen = np.bincount(a[rows], minlength=n_annotators) > 0
            s_b = np.where(seen, s_b, adaptive.SKILL_PRIOR[0] / sum(adaptive.SKILL_PRIOR))
            boot_skills[b] = np.where(seen, s_b, np.nan)
            boot_posterior[b] = adaptive.e_step(t, a, y, s_b, priors_b, n_tasks, n_classes)[np.arange(n_tasks), chosen]
        with np.errstate(all="ignore"):
            acc_lo, acc_hi = np.nanpercentile(boot_skills, [100 * tail, 100 * (1 - tail)], axis=0)
        post_lo, post_hi = np.percentile(boot_posterior, [100 * tail, 100 * (1 - tail)], axis=0)
    item_table = pd.DataFrame({"item": item_names, "label": label_names[chosen], "posterior": posterior,
                               "posterior_lo": post_lo, "posterior_hi": post_hi,
                               "labels": np.bincount(t, minlength=n_tasks)})
    annotator_table = pd.DataFrame({"annotator": annotator_names, "accuracy": skills, "accuracy_lo": acc_lo,
                                    "accuracy_hi": acc_hi, "labels": np.bincount(a, minlength=n_annotators)})
    item_table.attrs["n_boot"] = annotator_table.attrs["n_boot"] = n_boot
    return item_table, annotator_table
