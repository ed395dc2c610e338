"""Adaptive collection: how certain each task's aggregated label is, which task should get the next label, and
whether a study has collected enough. Pure, vectorised functions on integer-coded arrays (task, annotator, value);
the gateway (evalstudio/crowd/routing.py) and the simulation on published labels (evalstudio/stats/replay.py)
call the same ones.

Categorical criteria, one-coin Dawid-Skene (Zhang, Chen, Zhou & Jordan 2016, "Spectral methods meet EM", JMLR 17;
the one-coin form of Dawid & Skene 1979), fitted by EM as crowd-kit's OneCoinDawidSkene fits it (majority-vote
start, class priors, skills clipped to [1e-10, 1 - 1e-10]), so that its posteriors are crowd-kit's `predict_proba`
(tests/test_adaptive.py checks them to 1e-9):

- `ability`: every annotator has an accuracy of their own (their skill), and a label weighs by it;
- `uncertainty`: one accuracy shared by all annotators (the same model with every label from one annotator), so
  a task's posterior depends on its votes only.

A task's certainty is the posterior probability of its most probable label. Routing and stopping fit the model
with weak priors (SKILL_PRIOR pseudo-labels on each skill, CLASS_PRIOR on each class): maximum likelihood on the
first few labels of a study takes every annotator as perfect (skill 1), and two labels that disagree would then be
settled by the class frequencies alone; with the priors a 1:1 split stays uncertain. Without them (`one_coin`'s
defaults) the fit is crowd-kit's.

Numeric criteria (ratings), a task's uncertainty is the half-width of a 95% normal interval of its mean rating:

- `uncertainty`: the task's own standard deviation, shrunk towards the pooled one with PRIOR_DF degrees of freedom
  (a task with two ratings that happen to agree is not taken as certain), over the square root of its ratings;
- `ability`: each annotator's residual variance around the task means (shrunk the same way) weighs their ratings
  by its inverse; the task's standard error is 1 / sqrt(sum of the weights).

What is served next (`rank`): tasks below the minimum overlap first (most started first: breadth first, so every
task reaches the overlap agreement needs before any gets more), then the least certain tasks; a task at the
maximum overlap, or already at the stopping target, gets no more labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = 1e-10  # crowd-kit's clipping of probabilities
ITERATIONS = 50  # EM iterations (crowd-kit's default tolerance stops it earlier on most data; the fit is the same)
SKILL_PRIOR = (2.0, 2.0)  # Beta pseudo-counts (right, wrong) added to each skill's labels when routing
CLASS_PRIOR = 1.0  # Dirichlet pseudo-count added to each observed class when routing
PRIOR_DF = 4.0  # degrees of freedom of the pooled variance in a task's (or annotator's) shrunk variance
Z95 = 1.959963984540054


@dataclass
class Certainty:
    """Per task (index = task code): its labels so far, its aggregated label (class code, or mean rating), and how
    certain that is: `posterior` (categorical; NaN for numeric) and `half_width` (numeric; NaN for categorical)."""
    counts: np.ndarray
    label: np.ndarray
    posterior: np.ndarray
    half_width: np.ndarray
    skills: np.ndarray  # per annotator code: accuracy (categorical) or 1/sd (numeric); NaN where unknown


def _codes(values: np.ndarray, size: int | None) -> tuple[np.ndarray, int]:
    values = np.asarray(values, dtype=np.int64)
    if values.size and values.min() < 0:
        raise ValueError("codes are non-negative integers")
    n = int(values.max()) + 1 if values.size else 0
    return values, max(n, size or 0)


def e_step(t, a, y, skills, priors, n_tasks: int, n_classes: int, observed: np.ndarray | None = None) -> np.ndarray:
    """Each task's class probabilities from its labels (codes t, a, y), given the annotators' skills and the class
    priors: a label adds log(right) to the class it names and log(wrong) to every other, wrong = (1 - skill) /
    (k - 1) over the k possible classes (`observed`; default all). Tasks without labels get the priors' shape."""
    observed = np.ones(n_classes, dtype=bool) if observed is None else observed
    k = max(int(observed.sum()), 2)
    right = np.log2(np.clip(skills, EPS, 1 - EPS))
    wrong = np.log2(np.clip((1 - skills) / (k - 1), EPS, 1 - EPS))
    # each label adds log(wrong) to every class and (right - wrong) to the class it names
    log_like = np.bincount(t * n_classes + y, weights=(right - wrong)[a], minlength=n_tasks * n_classes).reshape(
        n_tasks, n_classes)
    log_like += np.bincount(t, weights=wrong[a], minlength=n_tasks)[:, None]
    log_like += np.log2(np.clip(priors, EPS, None))[None, :]
    log_like[:, ~observed] = -np.inf
    log_like -= log_like.max(axis=1, keepdims=True)
    scaled = np.exp2(log_like)
    return scaled / scaled.sum(axis=1, keepdims=True)


def one_coin_fit(tasks, annotators, labels, *, n_tasks: int | None = None, n_classes: int | None = None,
                 shared: bool = False, iterations: int = ITERATIONS, skill_prior: tuple[float, float] = (0.0, 0.0),
                 class_prior: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One-coin Dawid-Skene by EM on integer codes. Returns (posteriors: n_tasks x n_classes, skills per annotator
    code, class priors). `shared`: one skill for all annotators. Tasks without labels get the class priors; the
    classes are those observed (a class nobody chose has posterior 0, as in crowd-kit). `skill_prior` (right,
    wrong) and `class_prior` are pseudo-counts (MAP instead of maximum likelihood); zero, as by default, is
    crowd-kit's fit. With a class prior every one of the `n_classes` classes is possible, chosen or not."""
    t, n_tasks = _codes(tasks, n_tasks)
    a, n_annotators = _codes(annotators, None)
    y, n_classes = _codes(labels, n_classes)
    if not (len(t) == len(a) == len(y)):
        raise ValueError("tasks, annotators and labels have different lengths")
    if shared:
        a = np.zeros_like(a)
        n_annotators = 1 if len(a) else 0
    observed = np.zeros(n_classes, dtype=bool)
    observed[y] = True
    if class_prior > 0:  # with priors, every class of the scale is possible (the first answers may all agree)
        observed[:] = True
    # (task, class) as one index: np.bincount is much faster than np.add.at
    counts = np.bincount(t * n_classes + y, minlength=n_tasks * n_classes).reshape(n_tasks, n_classes).astype(float)
    labelled = counts.sum(axis=1) > 0
    probas = np.zeros((n_tasks, n_classes))
    probas[labelled] = counts[labelled] / counts[labelled].sum(axis=1, keepdims=True)
    if not len(t):
        uniform = np.full(n_classes, 1.0 / max(n_classes, 1))
        return np.tile(uniform, (n_tasks, 1)), np.full(n_annotators, np.nan), uniform

    def m_step(p):
        per_label = p[t, y]
        total = np.bincount(a, weights=per_label, minlength=n_annotators) + skill_prior[0]
        return total / np.maximum(np.bincount(a, minlength=n_annotators) + sum(skill_prior), 1e-300)

    def class_priors(p):
        counts_by_class = p[labelled].sum(axis=0) + class_prior * observed
        return counts_by_class / counts_by_class.sum()

    priors = class_priors(probas)
    skills = m_step(probas)
    for _ in range(iterations):
        probas = e_step(t, a, y, skills, priors, n_tasks, n_classes, observed)
        probas[~labelled] = 0.0
        priors = class_priors(probas)
        skills = m_step(probas)
    probas[~labelled] = priors
    return probas, skills, priors


def one_coin(tasks, annotators, labels, **options) -> tuple[np.ndarray, np.ndarray]:
    """`one_coin_fit`'s (posteriors, skills)."""
    probas, skills, _ = one_coin_fit(tasks, annotators, labels, **options)
    return probas, skills


def _shrunk(sum_squares: np.ndarray, dof: np.ndarray, pooled: float) -> np.ndarray:
    return (PRIOR_DF * pooled + sum_squares) / (PRIOR_DF + dof)


def numeric_certainty(tasks, annotators, values, *, n_tasks: int | None = None,
                      weighted: bool = False) -> Certainty:
    """Mean rating per task and the half-width of its 95% interval (see the module). Tasks without ratings have
    NaN mean and an infinite half-width."""
    t, n_tasks = _codes(tasks, n_tasks)
    a, n_annotators = _codes(annotators, None)
    x = np.asarray(values, dtype=float)
    if not (len(t) == len(a) == len(x)) or not np.all(np.isfinite(x)):
        raise ValueError("tasks, annotators and values must have one length, and the values be finite numbers")
    n = np.bincount(t, minlength=n_tasks).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(t, weights=x, minlength=n_tasks) / n
        residual = x - mean[t]
        ss = np.bincount(t, weights=residual ** 2, minlength=n_tasks)
        dof = np.maximum(n - 1, 0)
        pooled = ss.sum() / dof.sum() if dof.sum() > 0 else 1.0
        pooled = pooled if pooled > 0 else 1.0
        skills = np.full(n_annotators, np.nan)
        if not weighted:
            variance = _shrunk(ss, dof, pooled)
            half = Z95 * np.sqrt(variance / n)
        else:
            # an annotator's residuals around the task means (of tasks with at least two ratings: with one rating
            # the residual is 0 by construction), shrunk towards the pooled variance
            shared = n[t] > 1
            a_ss = np.bincount(a[shared], weights=(residual[shared] ** 2) * (n[t][shared] / (n[t][shared] - 1)),
                               minlength=n_annotators)
            a_n = np.bincount(a[shared], minlength=n_annotators).astype(float)
            a_var = _shrunk(a_ss, a_n, pooled)
            w = 1.0 / a_var[a]
            wsum = np.bincount(t, weights=w, minlength=n_tasks)
            mean = np.bincount(t, weights=w * x, minlength=n_tasks) / wsum
            half = Z95 / np.sqrt(wsum)
            skills = 1.0 / np.sqrt(a_var)
    half = np.where(n > 0, half, np.inf)
    return Certainty(n, mean, np.full(n_tasks, np.nan), half, skills)


def categorical_certainty(tasks, annotators, labels, *, n_tasks: int | None = None, n_classes: int | None = None,
                          weighted: bool = False) -> Certainty:
    """Aggregated label, its posterior and the annotators' skills (one-coin Dawid-Skene; `weighted`: per
    annotator, else shared). Tasks without labels have posterior 0 (nothing is known of them yet)."""
    t, n_tasks = _codes(tasks, n_tasks)
    probas, skills = one_coin(t, annotators, labels, n_tasks=n_tasks, n_classes=n_classes, shared=not weighted,
                              skill_prior=SKILL_PRIOR, class_prior=CLASS_PRIOR)
    n = np.bincount(t, minlength=n_tasks).astype(float)
    posterior = np.where(n > 0, probas.max(axis=1), 0.0)
    if not weighted:
        skills = np.full(_codes(annotators, None)[1], skills[0] if len(skills) else np.nan)
    return Certainty(n, probas.argmax(axis=1), posterior, np.full(n_tasks, np.nan), skills)


def met(certainty: Certainty, posterior: float | None = None, width: float | None = None) -> np.ndarray:
    """Per task: whether it is at the target (posterior at least `posterior`, or a 95% interval at most `width`
    wide); without a target, never."""
    if posterior is not None:
        return certainty.posterior >= posterior
    if width is not None:
        return 2 * certainty.half_width <= width
    return np.zeros(len(certainty.counts), dtype=bool)


def uncertainty(certainty: Certainty) -> np.ndarray:
    """How uncertain each task's label is (higher: needs a label more): 1 - posterior, or the half-width."""
    if np.all(np.isnan(certainty.posterior)):
        return certainty.half_width
    return 1.0 - certainty.posterior


def sort_keys(certainty: Certainty, codes, min_overlap: int) -> tuple[np.ndarray, np.ndarray]:
    """(group, score) of each task code, what `rank` sorts by (ascending, then the participant's order): tasks
    below `min_overlap` labels are group 0 with score minus their labels (the most labels first: breadth first),
    the rest group 1 with score minus their uncertainty (most uncertain first), rounded so that uncertainties equal
    but for floating-point noise are ties."""
    codes = np.asarray(codes, dtype=np.int64)
    counts = certainty.counts[codes]
    below = counts < min_overlap
    uncertain = np.round(np.nan_to_num(uncertainty(certainty)[codes], nan=0.0, posinf=1e200), 12)
    return np.where(below, 0, 1), np.where(below, -counts, -uncertain)


def rank(certainty: Certainty, order: list[int] | np.ndarray, *, min_overlap: int, max_overlap: int,
         done: np.ndarray | None = None) -> list[int]:
    """Task codes in the order they should get their next label, from `order` (a participant's own order, which
    breaks ties): tasks below `min_overlap` labels first, those with the most labels first (breadth first), then
    tasks at or above it by uncertainty, most uncertain first (`sort_keys`). Left out: tasks at `max_overlap` and
    tasks `done` (at the stopping target) once they have the minimum overlap."""
    order = np.asarray(order, dtype=np.int64)
    counts = certainty.counts[order]
    keep = counts < max_overlap
    if done is not None:
        keep &= ~(done[order] & (counts >= min_overlap))
    group, score = sort_keys(certainty, order, min_overlap)
    chosen = np.lexsort((np.arange(len(order)), score, group))  # (np.lexsort: the last key is the primary one)
    return [int(order[i]) for i in chosen if keep[i]]


def settled(certainty: Certainty, *, min_overlap: int, max_overlap: int, posterior: float | None = None,
            width: float | None = None) -> np.ndarray:
    """Per task: it has the minimum overlap and is at the target or at the maximum overlap (no label it could get
    would be asked for)."""
    counts = certainty.counts
    return (counts >= min_overlap) & (met(certainty, posterior, width) | (counts >= max_overlap))


def study_done(certainty: Certainty, *, min_overlap: int, max_overlap: int, posterior: float | None = None,
               width: float | None = None) -> bool:
    """Whether every task is `settled`. Without a target, never."""
    if posterior is None and width is None:
        return False
    return bool(np.all(settled(certainty, min_overlap=min_overlap, max_overlap=max_overlap, posterior=posterior,
                               width=width)))
