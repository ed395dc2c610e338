"""Prediction-powered Bradley-Terry strengths and rank-sets: humans judged some comparisons, a judge (an LLM, or a
metric's verdicts) all of them.

The Bradley-Terry model is a logistic regression without intercept: for a comparison of systems i and j, the
probability that i wins is expit(theta_i - theta_j), so the design row is e_i - e_j with one reference system's
column dropped (its strength is 0). A tie counts half a win each way, as in `stats.preference.bradley_terry`: the
outcome is a share in [0, 1] and the logistic loss with a fractional outcome is the same estimating equation. When
several annotators judged the same item and pair, the unit is the item and pair, its outcome the annotators' mean, so
that units, not judgements, are the independent draws the intervals assume.

PPI++ for a generalised linear model (Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient Prediction-Powered
Inference", arXiv:2311.01453) minimises the rectified loss

    lambda * L(theta; judge, unlabelled) - lambda * L(theta; judge, labelled) + L(theta; humans, labelled)

and uses the sandwich covariance H^-1 (n/N lambda^2 Cov(judge gradients, unlabelled) + Cov(human gradients - lambda
judge gradients, labelled)) H^-1 / n; lambda is tuned to minimise the trace of that covariance and clipped to [0, 1],
so that a useless judge gives the human-only (classical) estimate back and no judge, however poor, makes the
interval invalid. Every step (the human-only fit as the start, the two rounds of tuning lambda, the Hessian over
labelled and unlabelled units, the covariance) is that of the authors' package ppi-python
(`ppi_logistic_pointestimate`, `ppi_logistic_ci`), which the tests use as the oracle (equal within 1e-6). The
loss, its gradient and Hessian and every covariance of per-unit gradients depend on a unit only through its pair
of systems and its outcomes, so the fits are computed from each pair's sums (`PairSums`) by Newton's method (the
loss is convex for lambda in [0, 1]) and vectorised over studies (`ppi_bradley_terry`): a calibration fits
thousands of studies at once (benchmarks/ppi_ranking.py).

Prediction-powered ranking (Chatzi, Straitouri, Thejaswi & Gomez-Rodriguez 2024, "Prediction-Powered Ranking of
Large Language Models", NeurIPS 2024): a system's rank-set is every rank its strength can take given simultaneous
intervals for all differences between systems; here the region is Bonferroni's over the K(K-1)/2 differences (theirs
is an ellipsoid; Bonferroni's is conservative and as valid).

Assumption, as in every prediction-powered estimate: the human-judged units are a random sample of all units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import expit

ELO_SCALE = 400 / np.log(10)  # Chatbot Arena's Elo scale: 400 log10(strength) + 1000


@dataclass(frozen=True)
class PairSums:
    """What a Bradley-Terry fit needs of a study's units, per ordered pair of systems (columns) and study (rows):
    the labelled units' count and sums of the human share y, the judge's h, y^2, h^2 and y h; the unlabelled units'
    count and sums of h and h^2. The loss, its gradient and Hessian, and every covariance of per-unit gradients that
    PPI++ takes are sums over units of a pair's design row times these, so a fit costs the pairs, not the units."""
    pairs: np.ndarray  # P x 2 system codes (first, second)
    n: np.ndarray
    y: np.ndarray
    h: np.ndarray
    yy: np.ndarray
    hh: np.ndarray
    yh: np.ndarray
    big_n: np.ndarray
    u: np.ndarray
    uu: np.ndarray


def pair_sums(first, second, human, judge, first_u, second_u, judge_u, k: int) -> PairSums:
    """One study's `PairSums` from its units: first/second system codes, the human share and the judge's on the
    labelled units, the judge's on the unlabelled ones."""
    key, key_u = np.asarray(first) * k + np.asarray(second), np.asarray(first_u) * k + np.asarray(second_u)
    groups, index = np.unique(np.r_[key, key_u], return_inverse=True)
    lab, unl = index[:len(key)], index[len(key):]
    y, h, u = (np.asarray(a, dtype=float) for a in (human, judge, judge_u))

    def total(at, values):
        return np.bincount(at, values, minlength=len(groups))[None, :]

    ones, ones_u = np.ones(len(y)), np.ones(len(u))
    return PairSums(np.c_[groups // k, groups % k], total(lab, ones), total(lab, y), total(lab, h), total(lab, y * y),
                    total(lab, h * h), total(lab, y * h), total(unl, ones_u), total(unl, u), total(unl, u * u))


def _outer(weights: np.ndarray, design: np.ndarray) -> np.ndarray:
    """sum over pairs of weight x row row^T, per study: (R, d, d) (one matrix product)."""
    d = design.shape[1]
    return (weights @ (design[:, :, None] * design[:, None, :]).reshape(len(design), d * d)).reshape(-1, d, d)


def _fit(design, s: PairSums, lam: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The minimiser of PPI++'s rectified logistic loss, lam/N L(judge, unlabelled) - lam/n L(judge, labelled) +
    1/n L(humans, labelled), per study, by Newton's method from `theta` (the loss is convex for lam in [0, 1]: its
    Hessian is lam/N H_unlabelled + (1 - lam)/n H_labelled). Steps are capped at 2 on the log scale; a study
    whose strengths run off to infinity ends with a value above 50 (`_fits` calls it not finite)."""
    n, big_n = s.n.sum(1, keepdims=True), np.maximum(s.big_n.sum(1, keepdims=True), 1)
    lam = lam[:, None]
    ridge = 1e-12 * np.eye(design.shape[1])  # keeps a diverging study's solve finite; the optimum is the gradient's
    for _ in range(200):
        mu = expit(theta @ design.T)
        gradient = (lam / big_n * (s.big_n * mu - s.u) + ((1 - lam) * s.n * mu + lam * s.h - s.y) / n) @ design
        curvature = (lam / big_n * s.big_n + (1 - lam) / n * s.n) * mu * (1 - mu)
        step = np.nan_to_num(np.linalg.solve(_outer(curvature, design) + ridge, gradient[..., None])[..., 0])
        step *= np.minimum(1, 2 / np.maximum(np.abs(step).max(1, keepdims=True), 1e-300))
        step[np.abs(theta).max(1) > 50] = 0  # run off to infinity: left there
        theta = theta - step
        if np.abs(step).max() < 1e-12:
            break
    return theta


def _statistics(theta, design, s: PairSums, use_unlabelled: np.ndarray):
    """ppi-python's `_logistic_get_stats` from the sums: the inverse Hessian (over labelled and unlabelled units,
    or the labelled only where use_unlabelled is False), and per study the sums (over units, per pair) of the
    gradients' scalars and their products: (s1 human, s1 judge, s1 judge unlabelled), (human^2, judge^2, human
    judge, judge unlabelled^2)."""
    mu = expit(theta @ design.T)
    w = mu * (1 - mu)
    n, big_n = s.n.sum(1), s.big_n.sum(1)
    both = np.where(use_unlabelled[:, None], s.n + s.big_n, s.n) * w
    total = np.where(use_unlabelled, n + big_n, n)
    inverse = np.linalg.pinv(_outer(both, design) / total[:, None, None])
    big = np.where(use_unlabelled[:, None], 1.0, 0.0)
    first = (s.n * mu - s.y, s.n * mu - s.h, big * (s.big_n * mu - s.u))
    second = (s.n * mu ** 2 - 2 * mu * s.y + s.yy, s.n * mu ** 2 - 2 * mu * s.h + s.hh,
              s.n * mu ** 2 - mu * (s.y + s.h) + s.yh, big * (s.big_n * mu ** 2 - 2 * mu * s.u + s.uu))
    return inverse, first, second


def _covariance(mean_sum, square_sum, count, design):
    """np.cov (ddof 1) of per-unit vectors row_p x scalar, from the scalars' sums and squares' sums per pair."""
    mean = (mean_sum @ design) / count[:, None]
    return (_outer(square_sum, design) - count[:, None, None] * mean[:, :, None] * mean[:, None, :]) / (
        count[:, None, None] - 1)


def _trace(inverse, matrix):
    return np.einsum("rij,rjk,rki->r", inverse, matrix, inverse)


def _tuned_lambda(design, s: PairSums, inverse, first, second) -> np.ndarray:
    """ppi-python's `_calc_lam_glm` (overall mode, clipped): the lambda minimising the trace of the covariance."""
    n, big_n = s.n.sum(1), s.big_n.sum(1)
    mean_g, mean_h = (first[0] @ design) / n[:, None], (first[1] @ design) / n[:, None]
    products = mean_g[:, :, None] * mean_h[:, None, :]
    cross = (2 * _outer(second[2], design) - n[:, None, None] * (products + products.transpose(0, 2, 1))) / (
        n[:, None, None])
    var_hat = _covariance(first[1] + first[2], second[1] + second[3], n + big_n, design)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = _trace(inverse, cross) / (2 * (1 + n / big_n) * _trace(inverse, var_hat))
    return np.where(np.isfinite(lam), np.clip(lam, 0, 1), 0.0)


def _fitted_covariance(design, s: PairSums, theta, lam) -> np.ndarray:
    """ppi-python's interval covariance at theta: H^-1 (n/N Cov(lam judge gradients, unlabelled) + Cov(human -
    lam judge gradients, labelled)) H^-1 / n, the Hessian over labelled units only where lam is 0."""
    n, big_n = s.n.sum(1), s.big_n.sum(1)
    inverse, first, second = _statistics(theta, design, s, lam != 0)
    lam_ = lam[:, None]
    var_u = lam[:, None, None] ** 2 * _covariance(first[2], second[3], big_n, design)
    var = _covariance(first[0] - lam_ * first[1], second[0] - 2 * lam_ * second[2] + lam_ ** 2 * second[1], n, design)
    return inverse @ ((n / big_n)[:, None, None] * var_u + var) @ inverse / n[:, None, None]


def strongly_connected(s: PairSums, k: int) -> np.ndarray:
    """Per study, Hunter's (2004) condition for finite Bradley-Terry strengths in the humans' labelled comparisons:
    with i -> j when i won a share of a comparison with j (a tie counts both ways), every system reaches every
    other (the condition `stats.preference.bradley_terry` checks)."""
    beats = np.zeros((s.n.shape[0], k, k), dtype=bool)
    first, second = s.pairs[:, 0], s.pairs[:, 1]
    for p in range(len(s.pairs)):  # a pair's (first won, second won) shares
        beats[:, first[p], second[p]] |= s.y[:, p] > 0
        beats[:, second[p], first[p]] |= s.n[:, p] - s.y[:, p] > 0
    reach = beats | np.eye(k, dtype=bool)
    for _ in range(int(np.ceil(np.log2(max(k, 2))))):  # paths of up to 2^steps comparisons
        reach = (reach.astype(np.int32) @ reach.astype(np.int32)) > 0
    return reach.all((1, 2))


def ppi_bradley_terry(s: PairSums, k: int, lam=None) -> dict[str, np.ndarray]:
    """PPI++ Bradley-Terry coefficients (system 0 the reference, its strength 0) for many studies at once, exactly
    the steps of ppi-python's `ppi_logistic_ci` (the human-only fit as the start, PPI with lambda 1, lambda tuned at
    it, refitted, tuned again, refitted; the covariance at the last fit) on the design rows e_first - e_second:
    {theta, cov, lam, classical, classical_cov, finite}. `lam` None: power-tuned; a number: that lambda. `finite`:
    the studies whose humans' comparisons have finite strengths (`strongly_connected`) and whose fits converged to
    them; the others hold NaN (analyze refuses them)."""
    design = _design(s.pairs[:, 0], s.pairs[:, 1], k)
    studies = s.n.shape[0]
    zero = np.zeros(studies)
    classical = _fit(design, s, zero, np.zeros((studies, k - 1)))  # the human-only fit, ppi-python's start
    if lam is None:
        lam = np.ones(studies)
        for _ in range(2):
            theta = _fit(design, s, lam, classical)
            lam = _tuned_lambda(design, s, *_statistics(theta, design, s, np.ones(studies, dtype=bool)))
    else:
        lam = np.full(studies, float(lam))
    theta = _fit(design, s, lam, classical)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        cov = _fitted_covariance(design, s, theta, lam)
        classical_cov = _fitted_covariance(design, s, classical, zero)
    finite = (strongly_connected(s, k) & (np.abs(theta) < 50).all(1) & (np.abs(classical) < 50).all(1)
              & np.isfinite(cov).all((1, 2)) & np.isfinite(classical_cov).all((1, 2)))
    nan = np.where(finite, 1.0, np.nan)
    return {"theta": theta * nan[:, None], "cov": cov * nan[:, None, None], "lam": lam,
            "classical": classical * nan[:, None], "classical_cov": classical_cov * nan[:, None, None],
            "finite": finite}


@dataclass(frozen=True)
class PPIStrengths:
    """Bradley-Terry strengths (log scale, centred on the systems' mean) by PPI++ and from the humans alone, with
    their covariances; n labelled and N judge-only units."""
    systems: list
    strength: np.ndarray
    cov: np.ndarray
    classical: np.ndarray
    classical_cov: np.ndarray
    lam: float
    n: int
    N: int

    @property
    def effective_n(self) -> float:
        """The human-judged units the human-only fit would need for the same total variance of the strengths."""
        ppi, classical = np.trace(self.cov), np.trace(self.classical_cov)
        return self.n * classical / ppi if ppi > 0 else float("inf")

    def intervals(self, alpha: float = 0.05, classical: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Normal (1 - alpha) intervals (lo, hi) of the strengths, PPI++'s or (classical) the humans' alone."""
        centre, cov = (self.classical, self.classical_cov) if classical else (self.strength, self.cov)
        half = stats.norm.ppf(1 - alpha / 2) * np.sqrt(np.clip(np.diag(cov), 0, None))
        return centre - half, centre + half

    def rank_sets(self, alpha: float = 0.05, classical: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(best, worst) rank each system can hold (1 = strongest) given Bonferroni-simultaneous (1 - alpha)
        intervals for every difference of strengths (Chatzi et al. 2024's rank-sets)."""
        centre, cov = (self.classical, self.classical_cov) if classical else (self.strength, self.cov)
        best, worst = rank_sets(centre[None], cov[None], alpha)
        return best[0], worst[0]


def rank_sets(centre, cov, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(best, worst) rank of each system (1 = strongest) per study, from strengths (R x K) and their covariances
    (R x K x K): every rank a system can hold given Bonferroni-simultaneous (1 - alpha) intervals for all K(K-1)/2
    differences of strengths (Chatzi et al. 2024's rank-sets, with Bonferroni's region)."""
    k = centre.shape[1]
    z = stats.norm.ppf(1 - alpha / (k * (k - 1))) if k > 1 else 0.0  # alpha / 2 over K(K-1)/2 differences
    difference = centre[:, :, None] - centre[:, None, :]
    diagonal = np.diagonal(cov, axis1=1, axis2=2)
    variance = diagonal[:, :, None] + diagonal[:, None, :] - 2 * cov
    above = difference - z * np.sqrt(np.clip(variance, 0, None)) > 0  # above[r, i, j]: i surely stronger than j
    return 1 + above.sum(1), k - above.sum(2)


def _design(first: np.ndarray, second: np.ndarray, k: int) -> np.ndarray:
    """Rows e_first - e_second without the reference system's (code 0) column."""
    rows = np.arange(len(first))
    X = np.zeros((len(first), k))
    X[rows, first] += 1
    X[rows, second] -= 1
    return X[:, 1:]


def ppi_strengths(first, second, human, judge, first_u, second_u, judge_u, systems) -> PPIStrengths:
    """PPI++ Bradley-Terry strengths. first/second: system codes (indices into `systems`) of the n labelled units,
    `human` the share of the humans' judgements the first won (a tie half), `judge` the judge's share on the same
    units; first_u/second_u/judge_u: the N units only the judge judged. Strengths are centred on their mean."""
    k = len(systems)
    first, second, first_u, second_u = (np.asarray(a, dtype=int) for a in (first, second, first_u, second_u))
    human, judge, judge_u = (np.asarray(a, dtype=float) for a in (human, judge, judge_u))
    for name, share in (("human", human), ("judge", judge), ("judge_u", judge_u)):
        if not (np.isfinite(share).all() and ((share >= 0) & (share <= 1)).all()):
            raise ValueError(f"{name}: a share of wins must be in [0, 1]")
    if k < 2 or len(human) < k or len(judge_u) < 1:
        raise ValueError(f"prediction-powered strengths need 2 or more systems, as many human-judged units as "
                         f"systems and a unit only the judge judged (got {k}, {len(human)} and {len(judge_u)})")
    fit = ppi_bradley_terry(pair_sums(first, second, human, judge, first_u, second_u, judge_u, k), k)
    if not fit["finite"][0]:
        raise ValueError(f"the strengths did not converge to finite values with {len(human)} human-judged units "
                         f"of {k} systems: too few, or some system always wins or always loses")
    centre = _centring(k)
    return PPIStrengths(list(systems), centre @ fit["theta"][0], centre @ fit["cov"][0] @ centre.T,
                        centre @ fit["classical"][0], centre @ fit["classical_cov"][0] @ centre.T,
                        float(fit["lam"][0]), len(human), len(judge_u))


def _centring(k: int) -> np.ndarray:
    """theta (system 0 the reference) -> strengths centred on the systems' mean."""
    return np.eye(k)[:, 1:] - 1 / k


def resampled_strengths(first, second, human, judge, k: int, n: int, big_n: int, draws: int, rng,
                        finite: bool = False, alpha: float = 0.05) -> dict[str, np.ndarray]:
    """A calibration check on real data, per system: `draws` studies drawn from a population of units (item and
    pair) whose human share and judge's share are both known, every pair of systems with the same number M of
    units. Each study has n human-judged units of every pair; `finite` False: drawn with replacement, and big_n
    judge-only units per pair (an unlimited population); True: the n drawn without replacement from the pair's M,
    the other M - n judge-only (the study's own set; big_n ignored). The truth is the human-only fit of the whole
    population. Returns per system (arrays of K) the share of studies whose (1 - alpha) interval covers the truth
    (PPI++ and human-only) and the median width ratio; and the share of studies whose rank-sets hold every true rank,
    the share with finite strengths (the rest, which analyze refuses, are left out of everything else), the
    human-judged units the judge is said to be worth (mean `effective_n`) and what it is worth across the studies
    (n times the total variance of the human-only strengths over that of the PPI++ ones)."""
    first, second = np.asarray(first, dtype=int), np.asarray(second, dtype=int)
    key = first * k + second
    pairs, index, size = np.unique(key, return_inverse=True, return_counts=True)
    if len(set(size)) != 1:
        raise ValueError(f"every pair needs as many units: {dict(zip(pairs.tolist(), size.tolist()))}")
    order = np.argsort(index, kind="stable")
    y, h = (np.asarray(a, dtype=float)[order].reshape(len(pairs), -1) for a in (human, judge))
    big_m = y.shape[1]
    full = PairSums(np.c_[pairs // k, pairs % k], *(v[None] for v in (
        np.full(len(pairs), float(big_m)), y.sum(1), h.sum(1), (y * y).sum(1), (h * h).sum(1), (y * h).sum(1),
        np.full(len(pairs), float(big_m)), h.sum(1), (h * h).sum(1))))
    if not strongly_connected(full, k)[0]:
        raise ValueError("in the population some group of systems never beats (or never loses to) the rest: its "
                         "strengths are not finite, so there is no truth to cover")
    centre = _centring(k)
    truth = centre @ ppi_bradley_terry(full, k, lam=0.0)["classical"][0]
    true_rank = np.argsort(np.argsort(-truth)) + 1
    parts = []
    for chunk in np.array_split(np.arange(draws), max(1, draws // 250)):
        shape = (len(chunk), len(pairs), big_m)
        if finite:
            rated = np.argsort(rng.random(shape), axis=2)[:, :, :n]
            counts = np.zeros(shape)
            np.put_along_axis(counts, rated, 1.0, axis=2)
            rest = 1 - counts
        else:
            uniform = np.full(big_m, 1 / big_m)
            counts = rng.multinomial(n, uniform, size=shape[:2]).astype(float)
            rest = rng.multinomial(big_n, uniform, size=shape[:2]).astype(float)
        s = PairSums(full.pairs, counts.sum(2), np.einsum("rpm,pm->rp", counts, y),
                     np.einsum("rpm,pm->rp", counts, h), np.einsum("rpm,pm->rp", counts, y * y),
                     np.einsum("rpm,pm->rp", counts, h * h), np.einsum("rpm,pm->rp", counts, y * h), rest.sum(2),
                     np.einsum("rpm,pm->rp", rest, h), np.einsum("rpm,pm->rp", rest, h * h))
        parts.append(ppi_bradley_terry(s, k))
    fit = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    ok = fit["finite"]
    if not ok.any():
        raise ValueError(f"no study of {n} human-judged units a pair of {k} systems had finite strengths")
    z = stats.norm.ppf(1 - alpha / 2)
    out = {"n": n, "N": big_m - n if finite else big_n, "draws": draws, "finite": float(ok.mean())}
    widths = {}
    for kind, theta, cov in (("ppi", fit["theta"][ok], fit["cov"][ok]),
                             ("classical", fit["classical"][ok], fit["classical_cov"][ok])):
        strength, covariance = theta @ centre.T, centre @ cov @ centre.T
        half = z * np.sqrt(np.clip(np.diagonal(covariance, axis1=1, axis2=2), 0, None))
        out[f"covered_{kind}"] = (np.abs(strength - truth) <= half).mean(0)
        best, worst = rank_sets(strength, covariance, alpha)
        out[f"rank_sets_hold_{kind}"] = float(((best <= true_rank) & (true_rank <= worst)).all(1).mean())
        widths[kind], out[f"variance_{kind}"] = half, np.var(strength, axis=0).sum()
        out[f"trace_{kind}"] = np.trace(covariance, axis1=1, axis2=2)
    with np.errstate(invalid="ignore", divide="ignore"):  # the median: a human-only width near 0 makes any ratio
        out["width_ratio"] = np.nanmedian(np.where(widths["classical"] > 0, widths["ppi"] / widths["classical"],
                                                   np.nan), axis=0)
    out["claimed_n"] = float(np.mean(n * len(pairs) * out.pop("trace_classical") / out.pop("trace_ppi")))
    out["realised_n"] = float(n * len(pairs) * out.pop("variance_classical") / out.pop("variance_ppi"))
    return out


def verdicts_from_scores(scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The comparisons that scores imply: for an items x systems array (NaN where a system has no score), every
    item and pair of scored systems i < j as (first i, second j, share the first won: 1 higher, 0 lower, 1/2 equal).
    Turns ratings, or a metric's scores, into a judge's verdicts."""
    scores = np.asarray(scores, dtype=float)
    i, j = np.triu_indices(scores.shape[1], k=1)
    difference = scores[:, i] - scores[:, j]
    kept = ~np.isnan(difference)
    first, second = np.broadcast_to(i, difference.shape)[kept], np.broadcast_to(j, difference.shape)[kept]
    return first, second, (np.sign(difference[kept]) + 1) / 2
