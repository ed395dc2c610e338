"""Prediction-powered means (evalstudio.stats.ppi, `analyze --ppi`): the same numbers as the PPI++ authors' package
ppi-python, and calibrated on real published data: on HANNA's ratings and metric scores (Chhun et al. 2022), studies
drawn from the published stories give 95% intervals that cover the published mean 95% of the time, and the number of
human labels the metric is said to be worth is the number it is worth across those studies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate  # MIT: test oracle only
from ppi_py.baselines import classical_mean_ci
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.exporters.ppi import calibration
from evalstudio.stats.ppi import ppi_mean, ppi_means

from .conftest import ROOT
from .test_hanna import _prepare

HANNA = ROOT / "examples" / "analyze" / "hanna"


def _arrays(seed: int, n: int, big_n: int, signal: float, shift: float):
    rng = np.random.default_rng(seed)
    truth = rng.normal(3, 1, n + big_n)
    prediction = signal * truth + rng.normal(shift, 1, n + big_n)  # any scale, any bias
    return truth[:n], prediction[:n], prediction[n:]


@pytest.mark.parametrize("seed, n, big_n, signal, shift", [
    (0, 50, 400, 1.0, 0.0), (1, 20, 2000, 3.0, -5.0), (2, 200, 50, 0.1, 1.0), (3, 10, 10, 0.0, 0.0),
    (4, 100, 1000, -1.0, 2.0)])  # strong, rescaled and biased, weak, useless, anti-correlated predictors
def test_the_estimate_and_interval_are_ppi_pythons(seed, n, big_n, signal, shift):
    y, f, f_u = _arrays(seed, n, big_n, signal, shift)
    ours = ppi_mean(y, f, f_u, alpha=0.05)
    assert ours.estimate == pytest.approx(float(ppi_mean_pointestimate(y, f, f_u)[0]), abs=1e-9)
    lo, hi = ppi_mean_ci(y, f, f_u, alpha=0.05)
    assert (ours.lo, ours.hi) == pytest.approx((float(lo[0]), float(hi[0])), abs=1e-9)
    assert (ours.classical_lo, ours.classical_hi) == pytest.approx(classical_mean_ci(y, alpha=0.05), abs=1e-9)
    for lam in (0.0, 0.5, 1.0):  # fixed lambdas: 0 is the classical interval, 1 is PPI without power tuning
        fixed = ppi_mean(y, f, f_u, alpha=0.1, lam=lam)
        lo, hi = ppi_mean_ci(y, f, f_u, alpha=0.1, lam=lam)
        assert (fixed.lo, fixed.hi) == pytest.approx((float(lo[0]), float(hi[0])), abs=1e-9)
    if signal <= 0:  # a useless or misleading predictor is not trusted: lambda 0, the classical interval
        assert ours.lam == 0 and (ours.lo, ours.hi) == pytest.approx((ours.classical_lo, ours.classical_hi))


def test_many_samples_at_once_are_each_sample_alone():
    rng = np.random.default_rng(5)
    y, f, f_u = rng.normal(size=(7, 30)), rng.normal(size=(7, 30)), rng.normal(size=(7, 90))
    f += y
    batch = ppi_means(y, f, f_u)
    for r in range(7):
        one = ppi_mean(y[r], f[r], f_u[r])
        assert (batch["estimate"][r], batch["lo"][r], batch["lam"][r]) == pytest.approx((one.estimate, one.lo, one.lam))


@pytest.mark.parametrize("y, f, f_u, message", [
    ([1.0, 2.0], [1.0], [3.0], "2 human scores but 1 predictions"),
    ([1.0, np.nan], [1.0, 2.0], [3.0], "missing or infinite"),
    ([1.0], [1.0], [3.0], "2 or more labelled items"),
    ([1.0, 2.0], [1.0, 2.0], [], "1 or more unlabelled"),
])
def test_inputs_that_do_not_fit_are_refused(y, f, f_u, message):
    with pytest.raises(ValueError, match=message):
        ppi_mean(y, f, f_u)


@pytest.fixture(scope="module")
def hanna(tmp_path_factory):
    out = tmp_path_factory.mktemp("hanna")
    _prepare().main(["-o", str(out)])
    return out, pd.read_csv(out / "ratings.csv"), pd.read_csv(out / "metrics.csv")


def test_calibrated_on_hanna_the_intervals_cover_and_the_effective_labels_are_real(hanna):
    """Every criterion and system of HANNA, with the metric that correlates best with the criterion over segments:
    60 rated stories and 600 scored ones per study, 400 studies each (24,000 intervals per criterion)."""
    _, ratings, metrics = hanna
    result = calibration(ratings, metrics, ("Relevance", "Coherence", "Empathy", "Surprise", "Engagement",
                                            "Complexity"), 60, 600, 400, seed=2022)
    per_criterion = result.groupby("criterion")[["covered_ppi", "covered_classical"]].mean()
    assert per_criterion["covered_ppi"].between(0.93, 0.97).all(), per_criterion
    assert per_criterion["covered_classical"].between(0.93, 0.97).all(), per_criterion
    # the labels the metric is said to be worth are the labels it is worth (within 15%), and it is worth some
    ratio = result["claimed_n"] / result["realised_n"]
    assert ratio.between(0.85, 1.15).all(), result[["criterion", "claimed_n", "realised_n"]]
    assert (result["width_ratio"] <= 1.0 + 1e-9).mean() > 0.95 and (result["claimed_n"] > 60).all()


def test_analyze_gives_prediction_powered_means_beside_the_human_only_ones(hanna, tmp_path):
    """`analyze --ppi`: a quarter of HANNA's stories rated, every story scored: per system and per pair of systems
    both intervals, the PPI++ one agreeing with ppi-python on the same segments."""
    out, ratings, _ = hanna
    ratings[ratings["item"] % 4 == 0].to_csv(tmp_path / "quarter.csv", index=False)
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "quarter.csv"), "--metrics", str(out / "metrics.csv"),
                                      "--spec", str(HANNA / "hanna.yaml"), "--ppi", "BARTScore-SH", "--bootstrap",
                                      "20", "--resamples", "20", "-o", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "Prediction-powered means (PPI++ with BARTScore-SH" in result.output
    systems = pd.read_csv(tmp_path / "a" / "ppi_systems.csv")
    pairs = pd.read_csv(tmp_path / "a" / "ppi_pairs.csv")
    assert len(systems) == 6 * 10 and len(pairs) == 6 * 45  # 10 systems
    assert (systems["n_labelled"] == 24).all() and (systems["n_unlabelled"] == 72).all()
    row = systems[(systems["criterion"] == "Coherence") & (systems["system"] == "GPT-2")].iloc[0]
    scores = pd.read_csv(out / "metrics.csv").query("metric == 'BARTScore-SH' and system == 'GPT-2'").set_index("item")
    human = ratings.query("system == 'GPT-2'").set_index("item")["Coherence"]
    rated = sorted(i for i in human.index if i % 4 == 0)
    unrated = sorted(i for i in scores.index if i % 4 != 0)
    lo, hi = ppi_mean_ci(human[rated].to_numpy(), scores.loc[rated, "value"].to_numpy(),
                         scores.loc[unrated, "value"].to_numpy(), alpha=0.05)
    assert (row["ppi_lo"], row["ppi_hi"]) == pytest.approx((float(lo[0]), float(hi[0])), abs=1e-9)
    assert "Prediction-powered estimates" in (tmp_path / "a" / "index.html").read_text()


@pytest.mark.parametrize("options, message", [
    (["--ppi", "NoSuchMetric"], "--ppi NoSuchMetric: no such metric"),
    (["--ppi", "BLEU", "--no-metrics"], "--ppi names a metric whose scores it uses: give --metrics"),
])
def test_ppi_options_that_do_not_fit_are_refused(hanna, tmp_path, options, message):
    out, _, _ = hanna
    metrics = [] if "--no-metrics" in options else ["--metrics", str(out / "metrics.csv")]
    result = CliRunner().invoke(app, ["analyze", str(out / "ratings.csv"), *metrics, "--spec",
                                      str(HANNA / "hanna.yaml"), *[o for o in options if o != "--no-metrics"],
                                      "-o", str(tmp_path / "a")])
    assert result.exit_code == 2 and message in result.output, result.output
