"""`evalstudio compare` (issue 54, item 3): a reproduction against the original. CV* reproduces the published values
of Belz, Popović & Mille (2022, Table 4; the doctest in evalstudio.stats.reproducibility and here), and on USR's
published ratings split into two "studies" (each context's first annotator, then its second) every number of the
command equals the same computation done here with numpy and scipy."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.stats.reproducibility import cv_star

from .conftest import ROOT


@pytest.mark.parametrize("measurements, published", [
    ([84.51, 84.50, 87.46, 85.60, 84.20, 86.61, 86.20], 1.562), ([30.65, 30.65, 29.13, 30.65, 29.96], 2.487),
    ([87.50, 80.75, 89.36, 88.10, 89.64, 88.80], 4.176), ([31.11, 30.28, 31.11, 29.12], 3.572)])
def test_cv_star_is_the_published_one(measurements, published):
    assert round(cv_star(measurements)["cv_star"], 3) == published


def test_cv_star_refuses_what_has_no_cv():
    with pytest.raises(ValueError, match="two or more"):
        cv_star([3.0])
    with pytest.raises(ValueError, match="positive mean"):
        cv_star([1.0, 1.0], shift=1.0)


@pytest.fixture
def two_studies(tmp_path):
    data = json.loads((ROOT / "tests" / "data" / "usr" / "pc_usr_data.json").read_text(encoding="utf-8"))
    studies = {0: [], 1: []}
    for k, context in enumerate(data):
        for r in context["responses"]:
            for which in (0, 1):
                studies[which].append({"item": f"c{k}", "system": r["model"], "annotator": context["annotators"][which],
                                       "criterion": "Overall", "value": r["Overall"][which]})
    for which, rows in studies.items():
        pd.DataFrame(rows).to_csv(tmp_path / f"study{which}.csv", index=False)
    (tmp_path / "spec.yaml").write_text("criteria:\n  Overall: {scale: interval, min: 1, max: 5}\n", encoding="utf-8")
    return tmp_path


def test_compare_gives_what_numpy_and_scipy_give(two_studies):
    f = two_studies
    result = CliRunner().invoke(app, ["compare", str(f / "study0.csv"), str(f / "study1.csv"), "--spec",
                                      str(f / "spec.yaml"), "-o", str(f / "out")])
    assert result.exit_code == 0, result.output
    systems = pd.read_csv(f / "out" / "compare_systems.csv").set_index("system")
    correlations = pd.read_csv(f / "out" / "compare_correlations.csv").set_index("level")
    a, b = pd.read_csv(f / "study0.csv"), pd.read_csv(f / "study1.csv")
    score_a, score_b = a.groupby("system")["value"].mean(), b.groupby("system")["value"].mean()  # one rating an item
    assert len(systems) == 5
    for system, row in systems.iterrows():
        assert row["original"] == pytest.approx(score_a[system]) and row["reproduction"] == pytest.approx(score_b[system])
        x = np.array([score_a[system], score_b[system]]) - 1  # the 1-5 scale shifted to 0-4
        c4 = math.sqrt(2 / 1) * math.gamma(1) / math.gamma(0.5)
        assert row["cv_star"] == pytest.approx((1 + 1 / 8) * 100 * (x.std(ddof=1) / c4) / x.mean())
    common = sorted(score_a.index)
    r = np.corrcoef(score_a[common], score_b[common])[0, 1]
    half = stats.norm.ppf(0.975) / math.sqrt(5 - 3)
    assert correlations.loc["system", "pearson"] == pytest.approx(r)
    assert correlations.loc["system", "pearson_lo"] == pytest.approx(math.tanh(math.atanh(r) - half))
    assert correlations.loc["system", "kendall"] == pytest.approx(stats.kendalltau(score_a[common], score_b[common])[0])
    items = a.set_index(["system", "item"])["value"].to_frame("a").join(b.set_index(["system", "item"])["value"])
    assert correlations.loc["item", "n"] == 300
    assert correlations.loc["item", "pearson"] == pytest.approx(np.corrcoef(items["a"], items["value"])[0, 1])


def test_a_scale_without_a_minimum_gets_no_cv_star_and_the_reason(two_studies):
    f = two_studies
    (f / "nomin.yaml").write_text("criteria:\n  Overall: {scale: interval}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["compare", str(f / "study0.csv"), str(f / "study1.csv"), "--spec",
                                      str(f / "nomin.yaml"), "-o", str(f / "out")])
    assert result.exit_code == 0, result.output
    assert pd.read_csv(f / "out" / "compare_systems.csv")["cv_star"].isna().all()
    assert "its scale's minimum is not declared" in " ".join(result.output.split())


def test_the_item_level_counts_only_the_pairs_both_studies_rated(two_studies):
    """Issue 65, item 12: the original rated 4 systems x 5 items; the reproduction rated 3 of those systems on the
    same items and the fourth only on an item of its own: 15 shared (system, item) pairs, over which the item-level
    correlation is what scipy.stats.pearsonr gives, never "too few to correlate"."""
    f = two_studies
    a = pd.read_csv(f / "study0.csv")
    four = sorted(a["system"].unique())[:4]
    a = a[a["system"].isin(four) & a["item"].isin([f"c{k}" for k in range(5)])]
    b = pd.read_csv(f / "study1.csv")
    b = b[(b["system"].isin(four[:3]) & b["item"].isin([f"c{k}" for k in range(5)]))
          | ((b["system"] == four[3]) & (b["item"] == "c5"))]
    a.to_csv(f / "original.csv", index=False)
    b.to_csv(f / "reproduction.csv", index=False)
    result = CliRunner().invoke(app, ["compare", str(f / "original.csv"), str(f / "reproduction.csv"), "--spec",
                                      str(f / "spec.yaml"), "-o", str(f / "out")])
    assert result.exit_code == 0, result.output
    shared = a.set_index(["system", "item"])["value"].to_frame("a").join(b.set_index(["system", "item"])["value"],
                                                                         how="inner")
    assert len(shared) == 15
    r = stats.pearsonr(shared["a"], shared["value"]).statistic
    correlations = pd.read_csv(f / "out" / "compare_correlations.csv").set_index("level")
    assert correlations.loc["item", "n"] == 15 and correlations.loc["item", "pearson"] == pytest.approx(r)
    assert f"item level (15): r {r:.3f}" in " ".join(result.output.split())
