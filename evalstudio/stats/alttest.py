"""The alternative annotator test: may an LLM judge replace the human annotators?

Calderon, Reichart & Dror, "The Alternative Annotator Test for LLM-as-a-Judge: How to Statistically Justify
Replacing Human Annotators with LLMs", ACL 2025 (arXiv:2501.10970). Implemented from the paper's description (the
authors' code carries no licence, so none of it is used here); it gives the numbers of their implementation on
USR's ratings (tests/data/alttest, tests/test_alttest.py):

* Leave one annotator j out. On every item j rated that at least one other annotator rated too, score how well the
  judge's answer f_i and j's answer h_ij align with the others' answers: for categorical labels the share of the
  others who gave the same label (accuracy), for numbers minus the root mean squared difference from the others'.
* W^f_ij = 1 when the judge aligns at least as well as j, W^h_ij = 1 when j aligns at least as well as the judge;
  rho^f_j and rho^h_j are their means over j's items (the judge's and j's advantage probabilities).
* Per annotator, a one-sided paired t-test of H0: rho^f_j <= rho^h_j - epsilon against H1: rho^f_j > rho^h_j -
  epsilon, i.e. of the mean of d_i = W^h_ij - W^f_ij being below epsilon. epsilon is the paper's cost-benefit
  margin: the advantage the judge is given for being cheaper and faster, a penalty on the human annotators (0.2
  for crowd workers, 0.1 for skilled annotators or experts, as it suggests).
* The p-values of all annotators are corrected by Benjamini-Yekutieli (false discovery rate q, 0.05); the winning
  rate omega is the share of annotators whose H0 is rejected. The judge passes when omega >= 0.5. The average
  advantage probability is the mean of rho^f_j, for comparing judges.

The paper asks for each annotator to have rated enough items for the t-test (it uses at least 30); annotators with
fewer are left out and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats


@dataclass(frozen=True)
class AltTest:
    """The alternative annotator test's outcome for one judge: winning rate, pass, advantage probability."""
    winning_rate: float
    passes: bool
    advantage_probability: float
    annotators: int
    left_out: int
    epsilon: float
    q: float


def alignment(answers: np.ndarray, others: np.ndarray, numeric: bool) -> np.ndarray:
    """Per item: how well `answers` (items) align with `others` (items x annotators, NaN where missing): the share
    of the others who gave the same answer, or minus the root mean squared difference."""
    present = ~np.isnan(others)
    count = present.sum(axis=1)
    if numeric:
        squared = np.where(present, (others - answers[:, None]) ** 2, 0.0)
        return -np.sqrt(squared.sum(axis=1) / count)
    same = np.where(present, others == answers[:, None], False)
    return same.sum(axis=1) / count


def alt_test(matrix: np.ndarray, judge: np.ndarray, numeric: bool, epsilon: float = 0.2, q: float = 0.05,
             min_items: int = 30, annotator_ids=None) -> tuple[AltTest, pd.DataFrame]:
    """The test on `matrix` (items x annotators, the answers as numbers or label codes, NaN missing) and `judge`
    (items; NaN where it did not answer). Returns the result and one row per annotator: items, rho_f, rho_h, p,
    p_by (corrected), rejected (the judge wins against them); left-out annotators have items below min_items."""
    from statsmodels.stats.multitest import multipletests

    matrix = np.asarray(matrix, dtype=float)
    judge = np.asarray(judge, dtype=float)
    if matrix.ndim != 2 or judge.shape != (matrix.shape[0],):
        raise ValueError("matrix: items x annotators; judge: one answer per item")
    if not 0 <= epsilon < 1 or not 0 < q < 1:
        raise ValueError(f"epsilon in [0, 1) and q in (0, 1), got {epsilon} and {q}")
    ids = list(annotator_ids) if annotator_ids is not None else list(range(matrix.shape[1]))
    rows = []
    for j in range(matrix.shape[1]):
        others = np.delete(matrix, j, axis=1)
        usable = ~np.isnan(matrix[:, j]) & ~np.isnan(judge) & (~np.isnan(others)).any(axis=1)
        n = int(usable.sum())
        row = {"annotator": ids[j], "items": n, "rho_f": np.nan, "rho_h": np.nan, "p": np.nan}
        if n >= max(min_items, 2):
            s_judge = alignment(judge[usable], others[usable], numeric)
            s_human = alignment(matrix[usable, j], others[usable], numeric)
            w_f = (s_judge >= s_human).astype(float)
            w_h = (s_human >= s_judge).astype(float)
            d = w_h - w_f
            row |= {"rho_f": w_f.mean(), "rho_h": w_h.mean(), "p": _t_less(d, epsilon)}
        rows.append(row)
    table = pd.DataFrame(rows)
    tested = table["p"].notna()
    table["p_by"] = np.nan
    table["rejected"] = False
    if tested.any():
        rejected, corrected, _, _ = multipletests(table.loc[tested, "p"].to_numpy(), alpha=q, method="fdr_by")
        table.loc[tested, "p_by"] = corrected
        table.loc[tested, "rejected"] = rejected
    k = int(tested.sum())
    omega = float(table.loc[tested, "rejected"].mean()) if k else float("nan")
    result = AltTest(omega, bool(k and omega >= 0.5), float(table.loc[tested, "rho_f"].mean()) if k else float("nan"),
                     k, int(len(table) - k), epsilon, q)
    return result, table


def _t_less(d: np.ndarray, epsilon: float) -> float:
    """p of the one-sided one-sample t-test of mean(d) < epsilon; with no variance, 0 or 1 by the mean."""
    if np.ptp(d) == 0:
        return 0.0 if d[0] < epsilon else 1.0
    return float(stats.ttest_1samp(d, epsilon, alternative="less").pvalue)
