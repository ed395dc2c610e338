"""Prediction-powered means (evalstudio.stats.ppi, `analyze --ppi`): the same numbers as the PPI++ authors' package
ppi-python, and calibrated on real published data: on HANNA's ratings and metric scores (Chhun et al. 2022), studies
drawn from the published stories give 95% intervals that cover the published mean 95% of the time, and the number of
human labels the metric is said to be worth is the number it is worth across those studies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ppi_py import crossppi_mean_pointestimate, ppi_mean_ci, ppi_mean_pointestimate  # MIT: test oracle only

from ppi_py.baselines import classical_mean_ci
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.stats.ppi import cross_fitted_lambdas, ppi_mean, ppi_means

from .conftest import ROOT
from .hall_oracle import lengthened, third_moment
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
    ours = ppi_mean(y, f, f_u, alpha=0.05, lam="in-sample", interval="z")  # PPI++ with ppi-python's conventions
    assert ours.estimate == pytest.approx(float(ppi_mean_pointestimate(y, f, f_u)[0]), abs=1e-9)
    lo, hi = ppi_mean_ci(y, f, f_u, alpha=0.05)
    assert (ours.lo, ours.hi) == pytest.approx((float(lo[0]), float(hi[0])), abs=1e-9)
    assert (ours.classical_lo, ours.classical_hi) == pytest.approx(classical_mean_ci(y, alpha=0.05), abs=1e-9)
    for lam in (0.0, 0.5, 1.0):  # fixed lambdas: 0 is the classical interval, 1 is PPI without power tuning
        fixed = ppi_mean(y, f, f_u, alpha=0.1, lam=lam, interval="z")
        lo, hi = ppi_mean_ci(y, f, f_u, alpha=0.1, lam=lam)
        assert (fixed.lo, fixed.hi) == pytest.approx((float(lo[0]), float(hi[0])), abs=1e-9)
    if signal <= 0:  # a useless or misleading predictor is not trusted: lambda 0, the classical interval
        assert ours.lam == 0 and (ours.lo, ours.hi) == pytest.approx((ours.classical_lo, ours.classical_hi))


@pytest.mark.parametrize("seed, n, big_n, signal, shift", [
    (0, 50, 400, 1.0, 0.0), (1, 20, 2000, 3.0, -5.0), (2, 200, 50, 0.1, 1.0), (3, 10, 10, 0.0, 0.0),
    (4, 100, 1000, -1.0, 2.0), (6, 10, 190, 1.0, 0.0)])
def test_the_cross_fitted_estimate_and_interval_are_ppi_pythons_cross_prediction(seed, n, big_n, signal, shift):
    """The default (lambda cross-fitted, leave one out) is Zrnic & Candes's cross-prediction-powered mean with the
    n predictors lambda_i f: ppi-python's crossppi_mean_pointestimate, its column i of the unlabelled predictions
    lambda_i f."""
    y, f, f_u = _arrays(seed, n, big_n, signal, shift)
    ours = ppi_mean(y, f, f_u, alpha=0.05, interval="z")
    lam = cross_fitted_lambdas(y, f, big_n)[0]
    assert ours.estimate == pytest.approx(float(crossppi_mean_pointestimate(y, lam * f, np.outer(f_u, lam))[0]),
                                          abs=1e-9)
    assert ours.lam == pytest.approx(lam.mean())
    # the interval's parts: the spread of y_i - lambda_i (f_i - mean f_u), not of y_i - lambda_i f_i (ppi-python's,
    # the same where every lambda_i is one lambda); with lambda-bar f over the unlabelled items
    terms = y - lam * (f - f_u.mean())
    se = np.sqrt(np.var(lam.mean() * f_u) / big_n + np.var(terms) / n)
    assert (ours.lo, ours.hi) == pytest.approx((ours.estimate - 1.959963985 * se, ours.estimate + 1.959963985 * se),
                                               abs=1e-8)


def _loo_lambda(y, f, i, c):
    """Item i's lambda by hand: cov(y, f) / (c var(f)) over the other labelled items, clipped to [0, 1]."""
    keep = np.arange(len(y)) != i
    covariance = np.cov(y[keep], f[keep])
    return float(np.clip(covariance[0, 1] / (c * covariance[1, 1]), 0, 1))


@pytest.mark.parametrize("finite", [False, True])
def test_the_interval_from_its_parts_on_a_tiny_table(finite):
    """Five rated items and four scored only, computed by hand: each item's lambda from the other four (Zrnic &
    Candes 2024, c = 1 + n/N for an unlimited population, 1 for the nine items themselves), the estimate, its
    standard error (with the finite-population correction 1 - n/M), and Hall's (1992) interval solved by root
    finding (tests/hall_oracle.py) with t on n - 1 degrees of freedom, its skewness the larger of the estimate's
    and the human scores' mean's."""
    from scipy import stats

    y = np.array([3.0, 4.0, 5.0, 4.0, 2.0])
    f = np.array([2.9, 4.2, 4.8, 3.9, 2.5])
    f_u = np.array([3.1, 4.4, 2.8, 3.6])
    n, big_n, m = 5, 4, 9
    lam = np.array([_loo_lambda(y, f, i, 1 if finite else 1 + n / big_n) for i in range(n)])
    residual = y - lam * (f - f_u.mean())
    theta = residual.mean()
    def skewness_of_mean(values):
        return third_moment(values) / n ** 2 / (np.var(values) / n) ** 1.5

    if finite:
        estimate = (n * y.mean() + big_n * theta) / m
        se = np.sqrt((1 - n / m) * np.var(residual, ddof=1) / n)
        share = n / m  # Hall's g without replacement (Babu & Singh 1985): (3 sqrt(1 - f) - (1 - 2f) / sqrt(1 - f)) / 2
        factor = (3 * np.sqrt(1 - share) - (1 - 2 * share) / np.sqrt(1 - share)) / 2
        skewness, human = factor * skewness_of_mean(residual), factor * skewness_of_mean(y)
    else:
        estimate = theta
        parts = np.var(lam.mean() * f_u, ddof=1) / big_n, np.var(residual, ddof=1) / n
        se = np.sqrt(sum(parts))
        skewness = (third_moment(lam.mean() * f_u) / big_n ** 2 + third_moment(residual) / n ** 2) / (
            np.var(lam.mean() * f_u) / big_n + parts[1]) ** 1.5
        human = skewness_of_mean(y)
    skewness = human if abs(human) > abs(skewness) else skewness  # never less skewed than the human scores' mean
    lo, hi = lengthened(estimate, se, skewness, stats.t.ppf(0.975, n - 1))
    ours = ppi_mean(y, f, f_u, finite=finite)
    assert (ours.estimate, ours.se, ours.lam) == pytest.approx((estimate, se, lam.mean()), abs=1e-12)
    assert (ours.lo, ours.hi) == pytest.approx((lo, hi), abs=1e-9)


@pytest.mark.parametrize("lam, unbiased", [(None, True), ("in-sample", False)])
def test_a_cross_fitted_lambda_does_not_bias_the_estimate(lam, unbiased):
    """Every sample of 5 of a set of 10 items (drawn without replacement, the set's mean the target): the
    estimates average exactly to the set's mean when each item's lambda was chosen without its own label; with
    lambda tuned on the same labels (PPI++ in-sample, the old default) they do not."""
    from itertools import combinations

    rng = np.random.default_rng(11)
    y = np.round(rng.normal(4, 1, 10), 1)
    f = y + rng.normal(0, 0.8, 10)
    estimates = []
    for rated in combinations(range(10), 5):
        rest = [i for i in range(10) if i not in rated]
        estimates.append(ppi_mean(y[list(rated)], f[list(rated)], f[rest], lam=lam, finite=True).estimate)
    bias = np.mean(estimates) - y.mean()
    assert (abs(bias) < 1e-12) == unbiased, bias


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
    ([1.0, 2.0], [1.0, 2.0], [3.0], "3 or more labelled items"),
    ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [], "1 or more unlabelled"),
])
def test_inputs_that_do_not_fit_are_refused(y, f, f_u, message):
    with pytest.raises(ValueError, match=message):
        ppi_mean(y, f, f_u)


@pytest.fixture(scope="module")
def hanna(tmp_path_factory):
    out = tmp_path_factory.mktemp("hanna")
    _prepare().main(["-o", str(out)])
    return out, pd.read_csv(out / "ratings.csv"), pd.read_csv(out / "metrics.csv")


CRITERIA = ("Relevance", "Coherence", "Empathy", "Surprise", "Engagement", "Complexity")


@pytest.mark.parametrize("predictor", ["useless", "best", "good"])
def test_calibrated_on_hanna_what_analyze_prints_holds_at_the_sizes_it_prints_it(hanna, predictor):
    """Every criterion and system of HANNA (the stories of a system are the population, their published mean the
    truth), with a useless predictor (the best metric's scores shuffled), the metric that correlates best with the
    criterion, and a good one (r about 0.9), 400 studies per system and size. What analyze prints holds where it
    prints it: the human-only interval from 30 rated segments (MIN_RATED), PPI++ from 40 (MIN_RATED_PPI), the
    labels the predictor is worth from 60 (within 10% of what the studies realise)."""
    from evalstudio.exporters.ppi import MIN_RATED, MIN_RATED_EFFECTIVE_N, MIN_RATED_PPI

    _, ratings, metrics = hanna
    for rated, checked in ((MIN_RATED, "covered_classical"), (MIN_RATED_PPI, "covered_ppi")):
        result = calibration(ratings, metrics, CRITERIA, rated, 600, 400, seed=2022, predictor=predictor)
        per_criterion = result.groupby("criterion")[checked].mean()
        assert per_criterion.between(0.93, 0.97).all(), (rated, per_criterion)
    result = calibration(ratings, metrics, CRITERIA, MIN_RATED_EFFECTIVE_N, 600, 400, seed=2022, predictor=predictor)
    ratio = result.groupby("criterion")["claimed_n"].mean() / result.groupby("criterion")["realised_n"].mean()
    assert ratio.between(0.9, 1.1).all(), ratio
    if predictor == "good":  # and it is worth many labels; a useless one none
        assert (result["claimed_n"] > 2 * MIN_RATED_EFFECTIVE_N).all()
    elif predictor == "useless":
        assert result["realised_n"].mean() < 1.05 * MIN_RATED_EFFECTIVE_N


def test_a_poor_predictor_widens_the_interval_by_no_more_than_the_page_says(hanna):
    """Issue 65.16: the page said a poor predictor never makes the interval wider, yet lambda tuned on the rated
    segments costs a degree of freedom (n - 2) that a predictor tracking little does not pay back. Its sentence now
    gives how much wider it was on HANNA with each of the 17 published metrics at MIN_RATED_PPI rated stories (400
    studies per system, criterion and metric): this measures it again and holds the page to it."""
    import re

    from evalstudio.exporters.ppi import MIN_RATED_PPI

    page = " ".join((ROOT / "docs" / "analyze.md").read_text(encoding="utf-8").split())
    said = re.search(r"wider than the human-only one in (\d+)% of the studies: by at most ([\d.]+)% on average over "
                     r"one system's studies and at most ([\d.]+)% in a single study", page)
    assert said, "docs/analyze.md: the sentence on how much wider a poor predictor makes the interval"
    share, on_average, single = (float(g) / 100 for g in said.groups())
    _, ratings, metrics = hanna
    table = metrics.pivot_table(index=["system", "item"], columns="metric", values="value", observed=True)
    assert table.shape[1] == 17
    rng = np.random.default_rng(2022)
    means, widest, wider = [], [], []
    for criterion in CRITERIA:
        joined = table.join(ratings.groupby(["system", "item"])[criterion].mean())
        for _, g in joined.groupby(level="system"):
            y = g[criterion].to_numpy(float)
            for metric in table.columns:
                f = g[metric].to_numpy(float)
                picked = rng.integers(0, len(y), size=(400, len(y)))
                r = ppi_means(y[picked[:, :MIN_RATED_PPI]], f[picked[:, :MIN_RATED_PPI]], f[picked[:, MIN_RATED_PPI:]])
                ratio = (r["hi"] - r["lo"]) / (r["classical_hi"] - r["classical_lo"])
                means.append(ratio.mean())
                widest.append(ratio.max())
                wider.append((ratio > 1).mean())
    assert 1 < max(means) <= 1 + on_average and max(widest) <= 1 + single  # wider, by no more than it says
    assert abs(np.mean(wider) - share) < 0.01


def _table_rows(page: str, cells: int) -> list[list[str]]:
    """The rows of a docs page's Markdown tables that have `cells` cells, as their stripped texts."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]
    return [r for r in rows if len(r) == cells]


def _shipped_design(column: int, *sizes: int) -> float:
    """docs/active.md, "The shipped design at the sizes a system has": the lowest coverage of a column (3: human
    only, 5: active) at these numbers of labels."""
    return min(float(r[column]) for r in _table_rows("active.md", 6) if r[2].isdigit() and int(r[2]) in sizes
               and r[0].startswith(("stance", "misinfo", "sentiment")))


def _good_predictor_at_10() -> tuple[float, float]:
    """docs/analyze.md's calibration table: the labels a good predictor is said to be worth at 10 rated, and worth."""
    row = next(r for r in _table_rows("analyze.md", 7) if r[0].startswith("good") and r[1] == "10")
    return float(row[5]), float(row[6])


@pytest.mark.parametrize("constant, figures", [
    ("ppi.BELOW_MIN_RATED", lambda: [f"{_shipped_design(3, 10):.2f} of the time at 10",
                                     f"{_shipped_design(3, 20):.2f} at 20"]),
    ("ppi.BELOW_MIN_RATED_PPI", lambda: [next(r[2] for r in _table_rows("active.md", 6) if r[0] == "usr, Overall"
                                              and r[1].startswith("proxy")).split()[0] + " of the time at 30"]),
    ("ppi.BELOW_MIN_RATED_EFFECTIVE_N", lambda: [
        f"by {100 * (_good_predictor_at_10()[0] / _good_predictor_at_10()[1] - 1):.0f}% at 10",
        f"said {_good_predictor_at_10()[0]:.0f} labels, worth {_good_predictor_at_10()[1]:.0f}"]),
    ("active.BELOW_MIN_LABELS", lambda: [f"as little as {_shipped_design(5, 10, 20):.2f} of the time"]),
])
def test_each_reason_cites_the_figure_its_calibration_table_gives(constant, figures):
    """Issue 65.15: a refusal below 30 rated segments cited "as little as 0.91 ... docs/analyze.md", a figure of
    neither page for that case. Each reason for not printing a number now cites the figure of its own case, read
    here from the docs' tables: the human-only interval below 30 (a 0/1 share at 10 and 20 labels), PPI++ below 40
    (USR's system at 30), effective_n below 60 (HANNA's good predictor at 10), `active estimate` below 30."""
    from evalstudio.exporters import active, ppi

    module, name = constant.split(".")
    text = getattr({"ppi": ppi, "active": active}[module], name)
    for figure in figures():
        assert figure in text, (figure, text)


def test_the_reasons_are_the_ones_printed():
    """The cited reasons are what `size_notes` and the refusals print."""
    from evalstudio.exporters import ppi

    systems = pd.DataFrame({"n_labelled": [35]})
    notes = " ".join(ppi.size_notes(systems, pd.DataFrame({"n_labelled": []})))
    assert ppi.BELOW_MIN_RATED_PPI in notes and ppi.BELOW_MIN_RATED_EFFECTIVE_N in notes


def test_below_that_size_the_labels_a_predictor_is_worth_are_overstated(hanna):
    """Why effective_n waits for 60 rated segments: with a good predictor at 10, the labels it is said to be worth
    overstate what the studies realise by more than 20%."""
    _, ratings, metrics = hanna
    at_10 = calibration(ratings, metrics, CRITERIA, 10, 600, 400, seed=2022, predictor="good")
    assert at_10["claimed_n"].mean() > 1.2 * at_10["realised_n"].mean()


def _analyze_ppi(hanna, tmp_path, every: int):
    """`analyze --ppi BARTScore-SH` on HANNA with every `every`-th story rated (all of them scored), into
    tmp_path / "a"."""
    out, ratings, _ = hanna
    ratings[ratings["item"] % every == 0].to_csv(tmp_path / "rated.csv", index=False)
    return CliRunner().invoke(app, ["analyze", str(tmp_path / "rated.csv"), "--metrics", str(out / "metrics.csv"),
                                    "--spec", str(HANNA / "hanna.yaml"), "--ppi", "BARTScore-SH", "--bootstrap", "20",
                                    "--resamples", "20", "-o", str(tmp_path / "a")])


def test_analyze_gives_prediction_powered_means_beside_the_human_only_ones(hanna, tmp_path):
    """`analyze --ppi`: half of HANNA's stories rated, every story scored: per system and per pair of systems
    both intervals, the PPI++ one agreeing with ppi-python on the same segments."""
    out, ratings, _ = hanna
    result = _analyze_ppi(hanna, tmp_path, every=2)
    assert result.exit_code == 0, result.output
    assert "Prediction-powered means (PPI++ with BARTScore-SH" in result.output
    systems = pd.read_csv(tmp_path / "a" / "ppi_systems.csv")
    pairs = pd.read_csv(tmp_path / "a" / "ppi_pairs.csv")
    assert len(systems) == 6 * 10 and len(pairs) == 6 * 45  # 10 systems
    assert (systems["n_labelled"] == 48).all() and (systems["n_unlabelled"] == 48).all()
    from scipy import stats

    assert (systems["population"] == "finite").all()  # the default: the mean of the study's own 96 stories
    tuned = systems[systems["lambda"] > 0].iloc[0]
    untuned = systems[systems["lambda"] == 0].iloc[0]
    for row in (tuned, untuned):  # lambda cross-fitted on the labelled items, and lambda clipped to 0
        scores = pd.read_csv(out / "metrics.csv").query("metric == 'BARTScore-SH' and system == @row.system")
        scores = scores.set_index("item")
        human = ratings[ratings["system"] == row["system"]].groupby("item")[row["criterion"]].mean()
        rated = sorted(i for i in human.index if i % 2 == 0)
        unrated = sorted(i for i in scores.index if i % 2 != 0)
        y, f, f_u = (human[rated].to_numpy(), scores.loc[rated, "value"].to_numpy(),
                     scores.loc[unrated, "value"].to_numpy())
        # the finite set's mean: (n ybar + N theta) / (n + N), theta ppi-python's cross-prediction estimate with
        # each item's lambda from the other rated items (c = 1: the difference estimator's coefficient)
        n, big_n = len(y), len(f_u)
        lam = np.array([_loo_lambda(y, f, i, 1) for i in range(n)])
        theta = float(crossppi_mean_pointestimate(y, lam * f, np.outer(f_u, lam))[0])
        assert row["ppi"] == pytest.approx((n * y.mean() + big_n * theta) / (n + big_n), abs=1e-9)
        assert row["lambda"] == pytest.approx(lam.mean(), abs=1e-12)
        se = np.sqrt((1 - n / (n + big_n)) * np.var(y - lam * (f - f_u.mean()), ddof=1) / n)
        assert (row["ppi_hi"] - row["ppi_lo"]) >= 2 * stats.t.ppf(0.975, n - 1) * se - 1e-9
    # 48 rated stories a system: the PPI++ interval is given (from 40), the labels it is worth are not (from 60)
    assert systems["ppi_lo"].notna().all() and systems["effective_n"].isna().all()
    assert "effective_n (the human labels the predictor is worth) is given from 60" in result.output
    assert "Prediction-powered estimates" in (tmp_path / "a" / "index.html").read_text()


def test_ppi_intervals_wait_for_40_rated_segments_because_one_published_system_needs_them(hanna, tmp_path):
    """USR's "New Human Generated" responses (rated 4.8 of 5) with a predictor as good as r 0.91 (the raters' other
    criteria, benchmarks/active.py): the PPI++ interval covered under 0.93 of 8,000 studies at 30 rated segments (lambda
    tuned on few labels biases it) and at least 0.93 from MIN_RATED_PPI. So `analyze --ppi` on 32 rated stories a
    system gives the human-only interval and, for PPI++, the reason."""
    import importlib.util

    from evalstudio.exporters.ppi import MIN_RATED, MIN_RATED_PPI
    from evalstudio.stats.ppi import resampled_studies

    spec = importlib.util.spec_from_file_location("active_benchmark", ROOT / "benchmarks" / "active.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    d = next(d for d in benchmark.datasets("usr") if d["judge"].startswith("proxy"))
    mine = d["system"] == "New Human Generated"
    covered = {rated: resampled_studies(d["y"][mine], d["f"][mine], rated, 200 - rated, 8000,
                                        np.random.default_rng(5))["covered_ppi"]
               for rated in (MIN_RATED, MIN_RATED_PPI)}
    assert MIN_RATED < MIN_RATED_PPI and covered[MIN_RATED] < 0.93 <= covered[MIN_RATED_PPI], covered

    result = _analyze_ppi(hanna, tmp_path, every=3)
    assert result.exit_code == 0, result.output
    systems = pd.read_csv(tmp_path / "a" / "ppi_systems.csv")
    assert (systems["n_labelled"] == 32).all()
    assert systems["classical_lo"].notna().all() and systems["ppi_lo"].isna().all()
    assert f"PPI++ intervals are given from {MIN_RATED_PPI} rated segments" in result.output


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


def test_systems_rated_on_different_items_get_means_and_the_reason_there_is_no_difference(tmp_path):
    """Issue 53: `ppi_pairs.csv` for systems that share no rated items said "nothing to compute from these ratings"
    under an empty criterion. It now names the criterion, how many items the closest pair shares, and where each
    system's mean is."""
    from .test_analyze_input import invoke, write

    rng = np.random.default_rng(3)
    ratings, scores = [], []
    for s, system in enumerate(("a", "b")):
        for i in range(80):
            truth = rng.normal(3 + s, 0.7)
            scores.append({"item": f"i{i}", "system": system, "metric": "m", "value": truth + rng.normal(0, 0.3)})
            if (i < 40) == (s == 0):  # a rated on items 0-39, b on 40-79
                ratings += [{"item": f"i{i}", "system": system, "annotator": k, "criterion": "q",
                             "value": float(np.clip(np.round(truth + rng.normal(0, 0.5)), 1, 5))} for k in "xy"]
    pd.DataFrame(ratings).to_csv(tmp_path / "r.csv", index=False)
    pd.DataFrame(scores).to_csv(tmp_path / "m.csv", index=False)
    spec = write(tmp_path, "spec.yaml", "criteria:\n  q: {scale: interval, min: 1, max: 5}\n")
    result = invoke(tmp_path / "r.csv", "--metrics", tmp_path / "m.csv", "--spec", spec, "--ppi", "m",
                    "--bootstrap", "10", "--resamples", "10", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(tmp_path / "out" / "ppi_systems.csv")) == 2
    pairs = pd.read_csv(tmp_path / "out" / "ppi_pairs.csv", keep_default_na=False)
    assert list(pairs["criterion"]) == ["q"]
    assert "the most any pair shares: 0" in pairs["reason"].iat[0] and "ppi_systems.csv" in pairs["reason"].iat[0]
