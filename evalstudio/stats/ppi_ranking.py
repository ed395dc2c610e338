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
interval invalid. Every step (the starting point, the optimiser and its tolerance, the two rounds of tuning lambda,
the Hessian over labelled and unlabelled units) is that of the authors' package ppi-python
(`ppi_logistic_pointestimate`, `ppi_logistic_ci`), which the tests use as the oracle.

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
from scipy.optimize import minimize
from scipy.special import expit

ELO_SCALE = 400 / np.log(10)  # Chatbot Arena's Elo scale: 400 log10(strength) + 1000


def _log1pexp(x: np.ndarray) -> np.ndarray:
    return np.where(x > 10, x, np.log1p(np.exp(np.minimum(x, 10))))


def _start(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """ppi-python's starting point: scikit-learn's unpenalised logistic regression on the labelled units. A
    fractional outcome (a tie, or annotators who differ) is fitted as a weighted win and loss, the same loss."""
    from sklearn.linear_model import LogisticRegression

    # C = inf: unpenalised (ppi-python's penalty=None, which scikit-learn 1.8 deprecates; the same fit)
    model = LogisticRegression(C=np.inf, solver="lbfgs", max_iter=10000, tol=1e-15, fit_intercept=False)
    binary = np.isin(Y, (0.0, 1.0)).all() and len(set(Y)) == 2
    if binary:
        return model.fit(X, Y).coef_.reshape(-1)
    return model.fit(np.vstack([X, X]), np.r_[np.ones(len(Y)), np.zeros(len(Y))],
                     sample_weight=np.r_[Y, 1 - Y]).coef_.reshape(-1)


def _fit(X, Y, Yhat, Xu, Yhat_u, lam: float, start: np.ndarray) -> np.ndarray:
    n, big_n = len(Y), len(Yhat_u)

    def loss_and_gradient(theta):  # one pass over the units for both (the same values as two functions)
        a, b = X @ theta, Xu @ theta
        loss = (lam / big_n * np.sum(-Yhat_u * b + _log1pexp(b)) - lam / n * np.sum(-Yhat * a + _log1pexp(a))
                + 1 / n * np.sum(-Y * a + _log1pexp(a)))
        mu, mu_u = expit(a), expit(b)
        return loss, lam / big_n * Xu.T @ (mu_u - Yhat_u) - lam / n * X.T @ (mu - Yhat) + 1 / n * X.T @ (mu - Y)

    return minimize(loss_and_gradient, start, jac=True, method="L-BFGS-B", tol=1e-15, options={"ftol": 1e-15}).x


def _statistics(theta, X, Y, Yhat, Xu, Yhat_u, use_unlabelled: bool):
    """Per-unit gradients (humans and judge on the labelled units, judge on the unlabelled) and the inverse Hessian,
    over labelled and unlabelled units together (over the labelled only when lambda is 0)."""
    n, big_n = len(Y), len(Yhat_u)
    mu, mu_u = expit(X @ theta), expit(Xu @ theta)
    hessian = (X * (mu * (1 - mu))[:, None]).T @ X
    if use_unlabelled:
        hessian = (hessian + (Xu * (mu_u * (1 - mu_u))[:, None]).T @ Xu) / (n + big_n)
    else:
        hessian = hessian / n
    return (X * (mu - Y)[:, None], X * (mu - Yhat)[:, None], Xu * (mu_u - Yhat_u)[:, None] if use_unlabelled
            else np.zeros_like(Xu), np.linalg.inv(hessian))


def _tuned_lambda(grads, grads_hat, grads_hat_u, inverse) -> float:
    """ppi-python's `_calc_lam_glm` (overall mode, clipped): the lambda minimising the trace of the covariance."""
    n, big_n = len(grads), len(grads_hat_u)
    centred, centred_hat = grads - grads.mean(0), grads_hat - grads_hat.mean(0)
    cov = (centred.T @ centred_hat + centred_hat.T @ centred) / n
    var_hat = np.atleast_2d(np.cov(np.concatenate([grads_hat, grads_hat_u]).T))
    lam = np.trace(inverse @ cov @ inverse) / (2 * (1 + n / big_n) * np.trace(inverse @ var_hat @ inverse))
    return float(np.clip(lam, 0, 1)) if np.isfinite(lam) else 0.0


def ppi_logistic(X, Y, Yhat, X_unlabelled, Yhat_unlabelled, lam: float | None = None, start=None):
    """(coefficients, their covariance, lambda) of PPI++ logistic regression, exactly as ppi-python's
    `ppi_logistic_ci` computes them (lam None: power-tuned; 0: the human-only fit and its sandwich covariance).
    `start`: the starting point if already computed (`_start(X, Y)`)."""
    X, Xu = np.asarray(X, dtype=float), np.asarray(X_unlabelled, dtype=float)
    Y, Yhat, Yhat_u = (np.asarray(a, dtype=float) for a in (Y, Yhat, Yhat_unlabelled))
    start = _start(X, Y) if start is None else start
    data = (X, Y, Yhat, Xu, Yhat_u)
    if lam is None:  # ppi_logistic_pointestimate tunes lambda at the PPI fit and refits; the interval tunes again
        first = _fit(*data, 1.0, start)
        theta = _fit(*data, _tuned_lambda(*_statistics(first, *data, True)), start)
        lam = _tuned_lambda(*_statistics(theta, *data, True))
    theta = _fit(*data, lam, start)
    grads, grads_hat, grads_hat_u, inverse = _statistics(theta, *data, lam != 0)
    n, big_n, d = len(Y), len(Yhat_u), X.shape[1]
    var_u = np.atleast_2d(np.cov((lam * grads_hat_u).T)).reshape(d, d)
    var = np.atleast_2d(np.cov((grads - lam * grads_hat).T)).reshape(d, d)
    return theta, inverse @ (n / big_n * var_u + var) @ inverse / n, float(lam)


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
        k = len(centre)
        z = stats.norm.ppf(1 - alpha / (k * (k - 1))) if k > 1 else 0.0  # alpha / 2 over K(K-1)/2 differences
        difference = centre[:, None] - centre[None, :]
        variance = np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov
        above = difference - z * np.sqrt(np.clip(variance, 0, None)) > 0  # above[i, j]: i surely stronger than j
        return 1 + above.sum(0), k - above.sum(1)


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
    X, Xu = _design(first, second, k), _design(first_u, second_u, k)
    start = _start(X, human)
    try:
        theta, cov, lam = ppi_logistic(X, human, judge, Xu, judge_u, start=start)
        classical, classical_cov, _ = ppi_logistic(X, human, judge, Xu, judge_u, lam=0.0, start=start)
    except np.linalg.LinAlgError:
        theta = np.full(k - 1, np.nan)
    if not (np.isfinite(theta).all() and np.isfinite(cov).all() and np.isfinite(classical_cov).all()):
        raise ValueError(f"the strengths did not converge to finite values with {len(human)} human-judged units "
                         f"of {k} systems: too few, or some system always wins or always loses")
    centre = np.eye(k)[:, 1:] - 1 / k  # theta (reference 0) -> strengths centred on their mean
    return PPIStrengths(list(systems), centre @ theta, centre @ cov @ centre.T, centre @ classical,
                        centre @ classical_cov @ centre.T, lam, len(human), len(judge_u))


def resampled_strengths(first, second, human, judge, systems, n: int, big_n: int, draws: int, rng,
                        alpha: float = 0.05) -> dict[str, float]:
    """A calibration check on real data: `draws` studies drawn (with replacement) from a population of units whose
    human share and judge's share are both known, each with n human-judged and big_n judge-only units. The truth is
    the human-only fit on the whole population. Returns the share of the systems' (1 - alpha) intervals that cover
    the truth (PPI++ and human-only), the share of studies whose rank-sets all hold the true ranks, the mean ratio
    of the interval widths, and the human-judged units the judge is said to be worth (mean `effective_n`) against
    what it is worth across the studies (n times the total variance of the human-only strengths over that of the
    PPI++ ones); the studies without finite strengths (which analyze refuses) are counted (`finite`: the share
    with) and left out of the rest."""
    first, second = np.asarray(first, dtype=int), np.asarray(second, dtype=int)
    human, judge = np.asarray(human, dtype=float), np.asarray(judge, dtype=float)
    k = len(systems)
    centre = np.eye(k)[:, 1:] - 1 / k
    X = _design(first, second, k)
    truth = centre @ ppi_logistic(X, human, judge, X, judge, lam=0.0)[0]  # the human-only fit of the population
    true_rank = np.argsort(np.argsort(-truth)) + 1
    covered, covered_classical, ranks_hold, ranks_hold_classical, width, claimed = [], [], [], [], [], []
    estimates, classical_estimates = [], []
    infinite = 0
    for _ in range(draws):
        picked = rng.integers(0, len(human), size=n + big_n)
        lab, unl = picked[:n], picked[n:]
        try:
            fit = ppi_strengths(first[lab], second[lab], human[lab], judge[lab], first[unl], second[unl],
                                judge[unl], systems)
        except ValueError:  # no finite strengths in this study: analyze refuses it, so it is counted, not scored
            infinite += 1
            continue
        lo, hi = fit.intervals(alpha)
        c_lo, c_hi = fit.intervals(alpha, classical=True)
        covered.append((lo <= truth) & (truth <= hi))
        covered_classical.append((c_lo <= truth) & (truth <= c_hi))
        best, worst = fit.rank_sets(alpha)
        c_best, c_worst = fit.rank_sets(alpha, classical=True)
        ranks_hold.append(((best <= true_rank) & (true_rank <= worst)).all())
        ranks_hold_classical.append(((c_best <= true_rank) & (true_rank <= c_worst)).all())
        width.append(np.mean((hi - lo) / (c_hi - c_lo)))
        claimed.append(fit.effective_n)
        estimates.append(fit.strength)
        classical_estimates.append(fit.classical)
    if not estimates:
        raise ValueError(f"no study of {n} human-judged units of {k} systems had finite strengths")
    realised = n * np.var(classical_estimates, axis=0).sum() / np.var(estimates, axis=0).sum()
    return {"n": n, "N": big_n, "draws": draws, "finite": 1 - infinite / draws, "covered_ppi": float(np.mean(covered)),
            "covered_classical": float(np.mean(covered_classical)), "rank_sets_hold_ppi": float(np.mean(ranks_hold)),
            "rank_sets_hold_classical": float(np.mean(ranks_hold_classical)), "width_ratio": float(np.mean(width)),
            "claimed_n": float(np.mean(claimed)), "realised_n": float(realised)}


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
