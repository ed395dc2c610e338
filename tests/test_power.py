"""`evalstudio plan` and evalstudio.stats.power: the variance components are those of statsmodels' mixed model where
both apply, the closed-form power is the simulated one, and the power a plan promises is the power studies of that
size have when drawn from published ratings (SQuALITY's and USR's human evaluations)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.exporters.analyses.plan import calibration
from evalstudio.readers.ratings import read_ratings
from evalstudio.readers.spec import read_spec
from evalstudio.stats.power import (Components, one_way_components, paired_power, simulated_power,
                                    unpaired_power)

from .conftest import DATA, ROOT

SQUALITY = ROOT / "examples" / "analyze" / "squality" / "ratings.csv"


def usr() -> pd.DataFrame:
    return read_ratings(DATA / "usr" / "pc_usr_data.json", read_spec(DATA / "usr" / "overall.yaml"))[0]


def test_the_components_are_the_mixed_models_on_a_balanced_pilot():
    """SQuALITY's paired differences (bart-dpr minus bart, per reviewer: 100 items x 3): the method of moments and
    statsmodels' REML fit of a random intercept per item give the same two variances."""
    r = read_ratings(SQUALITY)[0]
    r = r[r["criterion"] == "overall"]
    wide = r.pivot_table(index=["item", "annotator"], columns="system", values="value")
    d = (wide["bart-dpr"] - wide["bart"]).astype(float).rename("d").reset_index()
    ours = one_way_components(d["d"], d["item"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm("d ~ 1", d, groups="item").fit(reml=True)
    assert ours.within == pytest.approx(fit.scale, rel=1e-4)
    assert ours.between == pytest.approx(float(fit.cov_re.iloc[0, 0]), rel=1e-3)
    assert (ours.groups, ours.observations) == (100, 300)


def test_a_negative_between_item_variance_is_zero_and_bad_input_is_refused():
    assert one_way_components([1, 2, 1, 2], ["a", "a", "b", "b"]).between == 0.0
    with pytest.raises(ValueError, match="2 or more items"):
        one_way_components([1.0, 2.0], ["a", "a"])
    with pytest.raises(ValueError, match="missing or infinite"):
        one_way_components([1.0, np.nan, 2.0], ["a", "a", "b"])


@pytest.mark.parametrize("design, items, annotators", [("paired", 30, 1), ("paired", 12, 3), ("unpaired", 40, 2)])
def test_the_closed_form_power_is_the_simulated_one(design, items, annotators):
    c = Components(between=0.4, within=1.1, groups=0, observations=0)
    closed = (paired_power if design == "paired" else unpaired_power)(0.5, c, [items], [annotators])[0, 0]
    simulated = simulated_power(0.5, c, items, annotators, design, 20_000, np.random.default_rng(1))
    assert simulated == pytest.approx(closed, abs=4 * np.sqrt(closed * (1 - closed) / 20_000))


def test_the_power_is_a_number_where_scipys_noncentral_t_gives_none():
    """scipy's nct.cdf(-c, df, ncp) returns NaN far in the lower tail (ncp 10 with 5 degrees of freedom): a power
    curve read past such a point would skip the smallest design that has the power. The power is a number there,
    the same as a simulation of the t statistic, and the integration kept as a fallback agrees with scipy."""
    from scipy import stats as st

    from evalstudio.stats.power import _t_power, _t_power_by_integration

    ncp, df = np.array([2.0, 3.0, 10.0, 30.0]), np.array([5.0, 20.0, 5.0, 999.0])
    critical = st.t.ppf(0.975, df)
    assert np.isnan(st.nct.cdf(-critical, df, ncp)).any()  # the case exists in this scipy
    got = _t_power(ncp, df, 0.05)
    assert np.isfinite(got).all()
    assert _t_power_by_integration(ncp, df, 0.05) == pytest.approx(got, abs=1e-5)
    rng = np.random.default_rng(0)
    for k in range(len(ncp)):
        t = (rng.normal(size=400_000) + ncp[k]) / np.sqrt(rng.chisquare(df[k], 400_000) / df[k])
        assert got[k] == pytest.approx(np.mean(np.abs(t) > critical[k]), abs=0.003)


@pytest.mark.parametrize("name, load, criterion, pair", [
    ("SQuALITY", lambda: read_ratings(SQUALITY)[0], "overall", ("bart", "bart-dpr")),
    ("USR", usr, "Overall", ("Language Model", "Seq2Seq")),
])
def test_calibrated_on_published_ratings_the_planned_power_is_the_realised_one(name, load, criterion, pair):
    """For 1-3 annotators per item and both designs: studies of the planned size, drawn from the published ratings,
    reject as often as planned (the plan may err on the safe side by up to 0.1, never more than 0.04 the other
    way); plans from pilots of 20 items promise, on average, what the full data's plan promises (within 0.05)."""
    rows = calibration(load(), criterion, pair, simulations=1000, pilots=30, seed=3)
    assert len(rows) == 6
    assert (rows["realised"] >= rows["planned"] - 0.04).all(), rows
    assert (rows["realised"] <= rows["planned"] + 0.10).all(), rows
    assert ((rows["pilot_planned_mean"] - rows["planned"]).abs() <= 0.05).all(), rows


def test_plan_on_the_command_line(tmp_path):
    result = CliRunner().invoke(app, ["plan", str(SQUALITY), "--delta", "10", "--system", "bart", "--system",
                                      "bart-dpr", "--criterion", "overall", "--minutes-per-task", "2",
                                      "--pay-per-hour", "15", "--simulations", "200", "-o", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    cheapest = pd.read_csv(tmp_path / "p" / "cheapest.csv")
    assert set(cheapest["design"]) == {"paired", "unpaired"} and len(cheapest) == 10
    best = cheapest.sort_values(["tasks", "annotators"]).iloc[0]
    assert (best["power"] >= 0.8) and best["tasks"] == 2 * best["items"] * best["annotators"]
    assert best["minutes"] == 2 * best["tasks"] and best["cost"] == pytest.approx(best["minutes"] / 60 * 15)
    assert f"Cheapest: {best['design']}, {int(best['items'])} items" in " ".join(result.output.split())
    assert "<img" in (tmp_path / "p" / "index.html").read_text()
    power = pd.read_csv(tmp_path / "p" / "power.csv")
    # more items, more power (up to the last digits of a power of 1)
    assert power.groupby(["design", "annotators"])["power"].apply(lambda s: (s.diff().dropna() >= -1e-9).all()).all()


@pytest.mark.parametrize("options, message", [
    (["--delta", "10", "--criterion", "overall"], "--system: the pilot has 3 systems"),
    (["--delta", "10", "--system", "bart", "--system", "nope", "--criterion", "overall"], "--system nope"),
    (["--delta", "10", "--system", "bart", "--system", "human"], "--criterion: the pilot has 3 numeric criteria"),
    (["--delta", "0", "--system", "bart", "--system", "human", "--criterion", "overall"], "--delta"),
    (["--delta", "5", "--system", "bart", "--system", "human", "--criterion", "overall", "--annotators", "1,x"],
     "--annotators"),
])
def test_plan_options_that_do_not_fit_are_refused(tmp_path, options, message):
    result = CliRunner().invoke(app, ["plan", str(SQUALITY), *options, "-o", str(tmp_path / "p")])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "p").exists()


def test_two_systems_centred_on_their_own_means_spend_two_degrees_of_freedom():
    """Issue 53: the unpaired design centres each system on its own mean, so the between-item mean square has
    G - 2 degrees of freedom, not G - 1 (a FED pilot gave 0.216 where 0.227 was right). With equal items and
    annotators per system, the nested estimate is the two systems' one-way estimates pooled over their degrees of
    freedom."""
    from evalstudio.stats.power import one_way_components

    rng = np.random.default_rng(12)
    items, raters = 15, 3
    values, groups, strata, per_system = [], [], [], []
    for system, shift in (("a", 0.0), ("b", 1.5)):
        item_effect = rng.normal(0, 0.6, items)
        v = (shift + item_effect[:, None] + rng.normal(0, 0.8, (items, raters))).ravel()
        g = np.repeat([f"{system}{i}" for i in range(items)], raters)
        values.append(v)
        groups.append(g)
        strata.append(np.full(len(v), system))
        per_system.append(one_way_components(v, g))
    values, groups, strata = map(np.concatenate, (values, groups, strata))
    nested = one_way_components(values - pd.Series(values).groupby(strata).transform("mean").to_numpy(), groups,
                                strata)
    ms_between = np.mean([c.between * raters + c.within for c in per_system])  # equal df: the plain mean
    ms_within = np.mean([c.within for c in per_system])
    assert nested.within == pytest.approx(ms_within, rel=1e-12)
    assert nested.between == pytest.approx((ms_between - ms_within) / raters, rel=1e-12)
    flat = one_way_components(values - pd.Series(values).groupby(strata).transform("mean").to_numpy(), groups)
    assert flat.between < nested.between  # G - 1 understated it
