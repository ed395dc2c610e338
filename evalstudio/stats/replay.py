"""An honest evaluation of adaptive collection by simulation on published labels: the real annotators' labels of
each task are replayed in the order a strategy asks for them (a task's labels in a random order per run), and the
labels a strategy needs to reach a target are counted, over repeated runs.

- The reference is the full data: every published label of every task, aggregated with the shared model
  (categorical: one-coin Dawid-Skene with one accuracy, i.e. the votes; numeric: the mean rating).
- Accuracy: categorical, the share of tasks whose current aggregated label is the reference label; numeric, the
  mean absolute difference between the current and the reference mean ratings (lower is better).
- A strategy collects in rounds of `batch` labels (a gateway serves several participants between two looks at the
  answers): each round the `batch` first tasks of `adaptive.rank` that still have an unused published label get one.
  `uniform` gives every task its next label in turn (overlap 1 for all, then 2, ...), in a random order per round.
- The cost of adaptivity for agreement: adaptive collection gives the uncertain (hard) tasks more labels, so an
  agreement coefficient over all collected labels is computed on a sample tilted towards disagreement. Every task's
  first `min_overlap` labels are collected before any task gets more, whatever the strategy, so agreement over
  those alone is free of that tilt (`first_labels`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import adaptive

STRATEGIES = ("uniform", "uncertainty", "ability")


@dataclass
class Labels:
    """Published labels as codes: task, annotator and value (a class code or a rating) per label."""
    tasks: np.ndarray
    annotators: np.ndarray
    values: np.ndarray
    categorical: bool

    @property
    def n_tasks(self) -> int:
        """How many tasks there are (the highest task index + 1)."""
        return int(self.tasks.max()) + 1

    def certainty(self, keep: np.ndarray | None = None, weighted: bool = False) -> adaptive.Certainty:
        """The adaptive posterior's certainty per task from the labels kept (`keep`: all by default)."""
        keep = np.ones(len(self.tasks), dtype=bool) if keep is None else keep
        args = (self.tasks[keep], self.annotators[keep], self.values[keep])
        if self.categorical:
            return adaptive.categorical_certainty(*args, n_tasks=self.n_tasks, weighted=weighted,
                                                  n_classes=int(self.values.max()) + 1)
        return adaptive.numeric_certainty(*args, n_tasks=self.n_tasks, weighted=weighted)


def _shuffled(labels: Labels, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each task's labels in a random order: (label indices grouped by task, where each task's start, labels per
    task)."""
    shuffled = rng.permutation(len(labels.tasks))
    by_task = shuffled[np.argsort(labels.tasks[shuffled], kind="stable")]
    counts = np.bincount(labels.tasks, minlength=labels.n_tasks)
    return by_task, np.concatenate([[0], np.cumsum(counts)[:-1]]), counts


def accuracy(labels: Labels, current: adaptive.Certainty, reference: adaptive.Certainty) -> float:
    """Agreement of the current labels with the reference (categorical) or their mean absolute error (ratings)."""
    if labels.categorical:
        return float(np.mean(current.label == reference.label))
    return float(np.mean(np.abs(np.nan_to_num(current.label, nan=np.nanmean(reference.label)) - reference.label)))


def better_or_equal(labels: Labels, value: float, target: float) -> bool:
    """Whether `value` reaches `target`: at least it for an accuracy, at most it for an error."""
    return value >= target - 1e-12 if labels.categorical else value <= target + 1e-12


@dataclass
class Run:
    """One replayed collection: labels used and accuracy after each round, which labels were given and in what order."""
    used: list[int]  # labels collected after each round
    accuracy: list[float]  # accuracy after each round
    given: np.ndarray  # which published labels were collected (a mask over the labels), at the end
    position: np.ndarray  # each collected label's place in its task's collection (0: first)


def replay(labels: Labels, strategy: str, rng: np.random.Generator, *, min_overlap: int, batch: int,
           budget: int | None = None, target: float | None = None) -> Run:
    """One run: collect until every published label is used, the `budget` is spent, or the accuracy reaches
    `target` (after which the run stops)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    n_tasks = labels.n_tasks
    by_task, start, available = _shuffled(labels, rng)  # each task's published labels, in a random order
    given_count = np.zeros(n_tasks, dtype=np.int64)
    given = np.zeros(len(labels.tasks), dtype=bool)
    position = np.full(len(labels.tasks), -1)
    reference = labels.certainty()
    budget = len(labels.tasks) if budget is None else min(budget, len(labels.tasks))
    run = Run([], [], given, position)
    used = 0
    while used < budget:
        open_tasks = np.flatnonzero(given_count < available)
        if not len(open_tasks):
            break
        order = rng.permutation(n_tasks)
        if strategy == "uniform":
            level = given_count[open_tasks].min()
            chosen = [int(t) for t in order if given_count[t] == level and given_count[t] < available[t]]
        else:
            current = labels.certainty(given, weighted=strategy == "ability")
            chosen = adaptive.rank(current, order, min_overlap=min_overlap, max_overlap=int(available.max()))
            chosen = [t for t in chosen if given_count[t] < available[t]]
        chosen = chosen[:min(batch, budget - used)]
        for t in chosen:
            label = by_task[start[t] + given_count[t]]
            given[label] = True
            position[label] = given_count[t]
            given_count[t] += 1
        used += len(chosen)
        run.used.append(used)
        run.accuracy.append(accuracy(labels, labels.certainty(given, weighted=strategy == "ability"), reference))
        if target is not None and better_or_equal(labels, run.accuracy[-1], target):
            break
    return run


def labels_to(run: Run, labels: Labels, target: float) -> int | None:
    """The labels a run had collected when its accuracy first reached `target` (None: it never did)."""
    for used, value in zip(run.used, run.accuracy):
        if better_or_equal(labels, value, target):
            return used
    return None


def uniform_target(labels: Labels, overlap: int, rng: np.random.Generator, runs: int) -> float:
    """The accuracy uniform overlap `overlap` reaches (its mean over `runs` draws of which labels each task gets)."""
    values = []
    for _ in range(runs):
        ordered, start, counts = _shuffled(labels, rng)
        rank_in_task = np.empty(len(labels.tasks), dtype=np.int64)
        rank_in_task[ordered] = np.arange(len(ordered)) - np.repeat(start, counts)
        keep = rank_in_task < overlap
        values.append(accuracy(labels, labels.certainty(keep), labels.certainty()))
    return float(np.mean(values))
