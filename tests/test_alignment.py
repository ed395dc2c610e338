"""Human-metric alignment against scipy / scikit-learn and the Fisher z formulas."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score, f1_score

from evalstudio.stats import alignment as al


@pytest.fixture
def pairs():
    rng = np.random.default_rng(11)
    human = rng.normal(size=60)
    return human, 0.6 * human + rng.normal(size=60)


def test_coefficients_and_p_values_equal_scipy(pairs):
    x, y = pairs
    table = al.correlations(x, y, n_boot=50).set_index("method")
    for method, func in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        r, p = func(x, y)
        assert table.loc[method, "r"] == pytest.approx(r) and table.loc[method, "p"] == pytest.approx(p)


def test_pearson_fisher_ci_equals_scipy(pairs):
    x, y = pairs
    row = al.correlations(x, y, n_boot=50).set_index("method").loc["pearson"]
    ci = stats.pearsonr(x, y).confidence_interval(0.95)
    assert (row["fisher_lo"], row["fisher_hi"]) == pytest.approx((ci.low, ci.high))


@pytest.mark.parametrize("method, variance", [("spearman", lambda n: 1.06 / (n - 3)), ("kendall", lambda n: 0.437 / (n - 4))])
def test_rank_fisher_ci_uses_fieller_hartley_pearson(pairs, method, variance):
    x, y = pairs
    row = al.correlations(x, y, n_boot=50).set_index("method").loc[method]
    z, half = np.arctanh(row["r"]), 1.959963984540054 * np.sqrt(variance(len(x)))
    assert (row["fisher_lo"], row["fisher_hi"]) == pytest.approx((np.tanh(z - half), np.tanh(z + half)))


def test_bootstrap_ci_agrees_with_scipy_bootstrap(pairs):
    x, y = pairs
    row = al.correlations(x, y, n_boot=2000).set_index("method").loc["spearman"]
    ref = stats.bootstrap((x, y), lambda a, b: stats.spearmanr(a, b)[0], paired=True, vectorized=False,
                          method="percentile", n_resamples=2000, random_state=5).confidence_interval
    assert row["boot_lo"] == pytest.approx(ref.low, abs=0.05) and row["boot_hi"] == pytest.approx(ref.high, abs=0.05)
    assert row["boot_lo"] < row["r"] < row["boot_hi"]


def test_degenerate_inputs_give_nan():
    table = al.correlations([1, 2, 3, 4, 5], [2, 2, 2, 2, 2], n_boot=20)  # constant model
    assert table["r"].isna().all()
    assert al.correlations([1, 2], [1, 2], n_boot=20)["r"].isna().all()  # too few pairs
    missing = al.correlations([1, 2, np.nan, 4, 5, 6], [1, 3, 2, np.nan, 5, 7], n_boot=20)
    assert (missing["n"] == 4).all()


def test_categorical_agreement_equals_sklearn():
    human = ["Yes", "No", "Yes", "Yes", "No", "No", "Yes", None]
    model = ["Yes", "No", "No", "Yes", "No", "Yes", "Yes", "No"]
    result = al.categorical_agreement(human, model)
    h, m = human[:7], model[:7]
    assert result == {"n": 7, "accuracy": pytest.approx(5 / 7), "macro_f1": pytest.approx(f1_score(h, m, average="macro")),
                      "kappa": pytest.approx(cohen_kappa_score(h, m))}


def test_expected_calibration_error_by_hand():
    # bins of width 0.5: (0, .5] holds .2 (right) and .4 (wrong): accuracy .5, confidence .3 -> |.2| * 2/5
    # (.5, 1] holds .6, .8, 1.0 (right, right, wrong): accuracy 2/3, confidence .8 -> |.1333| * 3/5
    ece, table = al.expected_calibration_error([0.2, 0.4, 0.6, 0.8, 1.0], [1, 0, 1, 1, 0], bins=2)
    assert ece == pytest.approx(0.2 * 2 / 5 + (0.8 - 2 / 3) * 3 / 5, abs=1e-12)
    assert table["n"].tolist() == [2, 3]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        al.expected_calibration_error([1.5], [1])


def test_judge_agreement_matches_scikit_learn_and_counts_the_confusion():
    from sklearn.metrics import cohen_kappa_score

    human = [1, 2, 3, 4, 5, 5, 3, 2]
    judge = [1, 3, 3, 4, 4, 5, 2, 2]
    row, confusion = al.judge_agreement(human, judge, "quadratic", labels=[1, 2, 3, 4, 5])
    assert row["kappa"] == pytest.approx(cohen_kappa_score(human, judge, weights="quadratic"), abs=1e-12)
    assert row["accuracy"] == pytest.approx(5 / 8) and row["n"] == 8
    assert confusion.to_numpy().sum() == 8 and confusion.loc[5.0, 4.0] == 1 and confusion.loc[2.0, 3.0] == 1
