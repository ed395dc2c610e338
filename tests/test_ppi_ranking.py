"""Prediction-powered Bradley-Terry strengths and rank-sets (evalstudio.stats.ppi_ranking, `analyze --ppi` on
comparisons): the same numbers as the PPI++ authors' package ppi-python, the human-only fit equal to Hunter's MM fit
(ties included), and calibrated on real published data: studies drawn from the comparisons that HANNA's published
ratings imply (Chhun et al. 2022) give 95% intervals that cover the whole population's strengths 95% of the time."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import ppi_py.ppi
import pytest
from ppi_py import ppi_logistic_ci, ppi_logistic_pointestimate  # MIT: test oracle only
from ppi_py.baselines import classical_logistic_ci
from scipy import stats
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.stats.ppi_ranking import (
    ELO_SCALE,
    _design,
    pair_sums,
    ppi_bradley_terry,
    ppi_strengths,
    resampled_strengths,
    verdicts_from_scores,
)
from evalstudio.stats.preference import bradley_terry

from .test_hanna import _prepare

Z = stats.norm.ppf(0.975)


def _comparisons(seed: int, k: int, n: int, big_n: int, accuracy: float):
    """Bradley-Terry comparisons of k systems and a judge right with probability `accuracy` (0.5: useless;
    below: misleading)."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 1, k)
    first = rng.integers(0, k, n + big_n)
    second = (first + rng.integers(1, k, n + big_n)) % k
    won = (rng.random(n + big_n) < 1 / (1 + np.exp(strength[second] - strength[first]))).astype(float)
    judge = np.where(rng.random(n + big_n) < accuracy, won, 1 - won)
    return first, second, won, judge, n


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    # the oracle's own Python code, not compiled by numba (which takes 15 s a process, longer than these tests run)
    monkeypatch.setattr(ppi_py.ppi, "_logistic_get_stats", getattr(ppi_py.ppi._logistic_get_stats, "py_func",
                                                                    ppi_py.ppi._logistic_get_stats))
    with warnings.catch_warnings():  # ppi-python passes penalty=None, which scikit-learn 1.8 deprecates
        warnings.simplefilter("ignore", FutureWarning)
        yield


@pytest.mark.parametrize("seed, k, n, big_n, accuracy", [
    (0, 6, 300, 3000, 0.85), (1, 4, 120, 400, 0.7), (2, 8, 500, 5000, 0.5), (3, 5, 200, 2000, 0.3),
    (4, 3, 60, 100, 0.95)])  # good, fair, useless, misleading and near-perfect judges
def test_the_estimates_and_intervals_are_ppi_pythons(seed, k, n, big_n, accuracy):
    """The fit from the pairs' sums (Newton's method) against ppi-python's from the units (scikit-learn's start and
    L-BFGS): the same coefficients and intervals to 1e-6, for the tuned lambda and fixed ones."""
    first, second, won, judge, n = _comparisons(seed, k, n, big_n, accuracy)
    X, Xu = _design(first[:n], second[:n], k), _design(first[n:], second[n:], k)
    args = (X, won[:n], judge[:n], Xu, judge[n:])
    sums = pair_sums(first[:n], second[:n], won[:n], judge[:n], first[n:], second[n:], judge[n:], k)
    for lam in (None, 0.0, 0.5, 1.0):
        fit = ppi_bradley_terry(sums, k, lam)
        theta, cov, tuned = fit["theta"][0], fit["cov"][0], fit["lam"][0]
        lo, hi = ppi_logistic_ci(*args, alpha=0.05, lam=lam)
        se = np.sqrt(np.diag(cov))
        assert np.abs(theta - Z * se - lo).max() < 1e-6 and np.abs(theta + Z * se - hi).max() < 1e-6, lam
        if lam is not None:
            assert tuned == lam
            assert np.abs(theta - ppi_logistic_pointestimate(*args, lam=lam)).max() < 1e-6
    lo, hi = classical_logistic_ci(X, won[:n], alpha=0.05)  # lambda 0 is the human-only fit and its sandwich
    fit = ppi_bradley_terry(sums, k, 0.0)
    assert np.abs(fit["classical"][0] - Z * np.sqrt(np.diag(fit["classical_cov"][0])) - lo).max() < 1e-6
    if accuracy <= 0.5:  # a useless or misleading judge is not trusted: lambda near 0, the human-only interval
        assert ppi_bradley_terry(sums, k)["lam"][0] < 0.1


def test_the_human_only_strengths_with_ties_are_hunters_mm_fit():
    """Ties are half a win each way in both: the logistic fit with fractional outcomes equals the MM fit of
    stats.preference.bradley_terry (independent code), centred the same way."""
    rng = np.random.default_rng(7)
    first, second, won, judge, n = _comparisons(7, 5, 400, 600, 0.8)
    share = np.where(rng.random(len(won)) < 0.2, 0.5, won)
    systems = list("abcde")
    fit = ppi_strengths(first[:n], second[:n], share[:n], judge[:n], first[n:], second[n:], judge[n:], systems)
    frame = pd.DataFrame({"left": np.array(systems)[first[:n]], "right": np.array(systems)[second[:n]],
                          "outcome": np.select([share[:n] == 1, share[:n] == 0], ["left", "right"], "tie")})
    mm = bradley_terry(frame, n_boot=0).set_index("system").loc[systems, "strength"]
    assert np.abs(fit.classical - np.log(mm.to_numpy())).max() < 1e-5
    assert fit.strength.sum() == pytest.approx(0, abs=1e-9) and fit.N == len(won) - n


def test_rank_sets_are_single_ranks_when_strengths_are_far_apart_and_shared_when_not():
    first, second, _, judge, n = _comparisons(11, 4, 3000, 3000, 0.9)
    won = (first < second).astype(float)  # a fixed order, mostly: a lower code wins ...
    won[::7] = 1 - won[::7]  # ... except every seventh comparison, so the strengths stay finite
    fit = ppi_strengths(first[:n], second[:n], won[:n], judge[:n], first[n:], second[n:], judge[n:], list("abcd"))
    best, worst = fit.rank_sets()
    assert list(best) == [1, 2, 3, 4] and list(worst) == [1, 2, 3, 4]
    rng = np.random.default_rng(12)
    coin = (rng.random(600) < 0.5).astype(float)  # systems of equal strength: no rank is settled
    near = ppi_strengths(first[:80], second[:80], coin[:80], coin[80:160], first[80:600], second[80:600],
                         coin[80:600], list("abcd"))
    best, worst = near.rank_sets()
    assert (best < worst).all() and (best <= 2).all() and (worst >= 3).all()
    with pytest.raises(ValueError, match="did not converge to finite values"):  # a always wins: no finite strength
        ppi_strengths([0, 0, 1, 1, 2], [1, 2, 2, 3, 3], [1, 1, 1, 0, 1], [1, 1, 1, 1, 1], [0], [3], [1], list("abcd"))


@pytest.mark.parametrize("args, message", [
    (dict(human=[0, 1.5]), "share of wins must be in"),
    (dict(judge_u=[np.nan]), "share of wins must be in"),
    (dict(first=[0], second=[1], human=[1], judge=[1]), "as many human-judged units as systems"),
])
def test_inputs_that_do_not_fit_are_refused(args, message):
    base = dict(first=[0, 1], second=[1, 0], human=[1.0, 0.0], judge=[1.0, 1.0], first_u=[0], second_u=[1],
                judge_u=[1.0], systems=["a", "b"])
    with pytest.raises(ValueError, match=message):
        ppi_strengths(**(base | args))


@pytest.fixture(scope="module")
def hanna(tmp_path_factory):
    out = tmp_path_factory.mktemp("hanna_pairs")
    _prepare().main(["-o", str(out)])
    ratings, metrics = pd.read_csv(out / "ratings.csv"), pd.read_csv(out / "metrics.csv")
    systems = sorted(ratings["system"].unique())
    return ratings, metrics, systems


def _scores(frame, column, systems):
    return frame.pivot(index="item", columns="system", values=column)[systems].to_numpy()


@pytest.mark.parametrize("judge, finite", [("Engagement", False), ("chrF", False), ("Engagement", True)])
def test_calibrated_on_hanna_the_intervals_cover_and_the_effective_labels_are_real(hanna, judge, finite):
    """Coherence comparisons implied by HANNA's published ratings (96 prompts x 45 pairs of 10 systems) as the
    population; the judge's verdicts from another criterion's ratings (Engagement, a judge that helps) or from a
    metric (chrF, one that barely does). 400 studies of 10 human-judged comparisons a pair, and 190 judge-only ones a
    pair (an unlimited population) or the other 86 of each pair's 96 (the study's own set), per system."""
    ratings, metrics, systems = hanna
    first, second, human = verdicts_from_scores(_scores(ratings, "Coherence", systems))
    source = ratings if judge in ratings else metrics[metrics["metric"] == judge]
    verdict = verdicts_from_scores(_scores(source, judge if judge in ratings else "value", systems))[2]
    result = resampled_strengths(first, second, human, verdict, len(systems), 10, 190, 400, np.random.default_rng(3),
                                 finite=finite)
    assert result["finite"] == 1.0 and len(result["covered_ppi"]) == len(systems), result
    for kind in ("ppi", "classical"):
        covered = result[f"covered_{kind}"]  # per system; 400 studies: a system's within about 0.022 of its own
        assert covered.min() >= 0.9 and (0.925 <= covered.mean() <= 0.99), result
        assert result[f"rank_sets_hold_{kind}"] >= 0.95, result
    if not finite:  # drawn with replacement, the units a judge is said to be worth are what it is worth
        assert 0.85 <= result["claimed_n"] / result["realised_n"] <= 1.15, result
    if judge == "Engagement":  # agreeing with the humans on two units in three, it is worth many human-judged units
        assert result["width_ratio"].mean() < 0.9 and result["claimed_n"] > 1.2 * 450, result
    else:  # agreeing on about half, it is worth almost nothing; never a wider interval on average
        assert result["width_ratio"].mean() <= 1.0 and result["claimed_n"] < 1.1 * 450, result


def _files(hanna, tmp_path):
    """Humans' Coherence comparisons of a quarter of the prompts (human ties left out, so that the oracle, whose
    starting point needs binary outcomes, can be run), and Engagement's verdicts on every prompt as the judge."""
    ratings, _, systems = hanna
    rows = []
    for column, who in (("Coherence", "humans"), ("Engagement", "engagement-judge")):
        table = ratings.pivot(index="item", columns="system", values=column)[systems]
        first, second, share = verdicts_from_scores(table.to_numpy())
        item = np.repeat(table.index.to_numpy(), len(systems) * (len(systems) - 1) // 2)
        rows.append(pd.DataFrame({"item": item, "left": np.array(systems)[first], "right": np.array(systems)[second],
                                  "outcome": np.select([share == 1, share == 0], ["left", "right"], "tie"),
                                  "annotator": who}))
    humans = rows[0][(rows[0]["item"] % 4 == 0) & (rows[0]["outcome"] != "tie")]
    humans.to_csv(tmp_path / "humans.csv", index=False)
    rows[1].to_csv(tmp_path / "judge.csv", index=False)
    return humans, rows[1], systems


def test_analyze_gives_prediction_powered_strengths_beside_the_human_only_ones(hanna, tmp_path):
    humans, judge, systems = _files(hanna, tmp_path)
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "humans.csv"), "--metrics", str(tmp_path / "judge.csv"),
                                      "--ppi", "engagement-judge", "--bootstrap", "20", "-o", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "Prediction-powered Bradley-Terry strengths (PPI++ with engagement-judge" in result.output
    table = pd.read_csv(tmp_path / "a" / "ppi_bradley_terry.csv").set_index("system").loc[systems]
    assert (table["n_labelled"] == len(humans)).all() and (table["n_unlabelled"] == len(judge) - len(humans)).all()
    # the oracle on the same units: labelled = the humans' (item, pair), the judge's verdict on each; the rest
    key = ["item", "left", "right"]
    merged = humans.merge(judge, on=key, suffixes=("", "_judge"))
    rest = judge.merge(humans[key], on=key, how="left", indicator=True).query("_merge == 'left_only'")
    code = {s: i for i, s in enumerate(systems)}
    share = {"left": 1.0, "right": 0.0, "tie": 0.5}

    def design(frame):
        return _design(frame["left"].map(code).to_numpy(), frame["right"].map(code).to_numpy(), len(systems))

    lo, hi = ppi_logistic_ci(design(merged), merged["outcome"].map(share).to_numpy(),
                             merged["outcome_judge"].map(share).to_numpy(), design(rest),
                             rest["outcome"].map(share).to_numpy(), alpha=0.05)
    theta = np.r_[0.0, (lo + hi) / 2]
    expected = ELO_SCALE * (theta - theta.mean()) + 1000
    assert np.abs(table["ppi_elo"].to_numpy() - expected).max() < 1e-6 * ELO_SCALE
    assert (table["ppi_lo"] < table["ppi_elo"]).all() and (table["ppi_rank_best"] <= table["ppi_rank_worst"]).all()
    assert (table["ppi_hi"] - table["ppi_lo"]).mean() < (table["classical_hi"] - table["classical_lo"]).mean()
    assert "Prediction-powered strengths" in (tmp_path / "a" / "index.html").read_text()
    # 20.5 a pair: the strengths are printed, what the judge is worth not yet (from 30 a pair), and the notes say why
    from evalstudio.exporters.analyses.preference import BELOW_MIN_UNITS_EFFECTIVE_N

    assert table["effective_n"].isna().all()
    assert " ".join(BELOW_MIN_UNITS_EFFECTIVE_N.split()) in " ".join(result.output.split())


@pytest.mark.parametrize("options, message", [
    (["--ppi", "nobody"], "--ppi nobody: no such judge (the judges are: engagement-judge)"),
    (["--ppi", "engagement-judge", "--no-metrics"], "--ppi names a judge whose verdicts it uses: give --metrics"),
    (["--alt-test", "engagement-judge"], "--alt-test work on ratings"),
])
def test_ppi_options_on_comparisons_that_do_not_fit_are_refused(hanna, tmp_path, options, message):
    _files(hanna, tmp_path)
    metrics = [] if "--no-metrics" in options else ["--metrics", str(tmp_path / "judge.csv")]
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "humans.csv"), *metrics,
                                      *[o for o in options if o != "--no-metrics"], "-o", str(tmp_path / "a")])
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("prompts", [3, 12])
def test_below_the_calibrated_size_no_strengths_but_the_reason(hanna, tmp_path, prompts):
    """3 or 12 prompts' comparisons (about 115 or 460 units of 10 systems' 45 pairs: 2.6 or 10 a pair, under the
    calibrated 20; 12 prompts were printed under the earlier rule of 15 per system): the human-only strengths are
    still analysed, the prediction-powered ones are not printed, and the notes say from how many they are and the
    figure below."""
    from evalstudio.exporters.analyses.preference import BELOW_MIN_UNITS, MIN_UNITS_PER_PAIR

    humans, _, systems = _files(hanna, tmp_path)
    few = humans[humans["item"].isin(sorted(set(humans["item"]))[:prompts])]
    assert len(few) < MIN_UNITS_PER_PAIR * 45
    few.to_csv(tmp_path / "few.csv", index=False)
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "few.csv"), "--metrics", str(tmp_path / "judge.csv"),
                                      "--ppi", "engagement-judge", "--bootstrap", "20", "-o", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "a" / "ppi_bradley_terry.csv").exists()
    assert (tmp_path / "a" / "bradley_terry.csv").exists()
    said = " ".join(result.output.split()) + (tmp_path / "a" / "index.html").read_text()
    assert f"given from {MIN_UNITS_PER_PAIR} per pair of systems ({MIN_UNITS_PER_PAIR * 45} for 10 systems)" in said
    assert " ".join(BELOW_MIN_UNITS.split()) in said
