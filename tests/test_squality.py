"""SQuALITY's published human evaluation (Wang et al., EMNLP 2022; examples/analyze/squality/SOURCE.md) through
`evalstudio analyze`: the release's own aggregates and an independent Bradley-Terry fit (choix) are reproduced."""

from __future__ import annotations

from pathlib import Path

import choix  # test oracle
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalstudio.cli import app

from .test_preference import _choix_data

DATA = Path(__file__).resolve().parents[1] / "examples" / "analyze" / "squality"


def _analyze(*args) -> str:
    result = CliRunner().invoke(app, ["analyze", *map(str, args)])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_the_release_aggregates_are_the_means_of_the_reviews():
    ratings = pd.read_csv(DATA / "ratings.csv")
    published = pd.read_csv(DATA / "published_means.csv").set_index(["item", "system"])
    means = ratings.pivot_table(index=["item", "system"], columns="criterion", values="value", aggfunc="mean")
    assert len(means) == len(published) == 300
    for criterion in ("correctness", "selection", "overall"):
        assert np.allclose(means[criterion], published.loc[means.index, f"{criterion}_mean"], atol=1e-9)
    assert (ratings.groupby(["item", "system", "criterion"]).size() == 3).all()  # three reviewers each


def test_system_means_of_the_published_ratings_equal_the_release_aggregates(tmp_path):
    out = tmp_path / "ratings"
    text = _analyze(DATA / "ratings.csv", "-o", out, "--bootstrap", "50")
    assert "2700 ratings of 300 segments (3 systems x 100 items) by 4 annotators" in text
    systems = pd.read_csv(out / "systems.csv").set_index(["criterion", "system"])
    published = pd.read_csv(DATA / "published_means.csv")
    for criterion in ("correctness", "selection", "overall"):
        expected = published.groupby("system")[f"{criterion}_mean"].mean()
        for system, value in expected.items():
            assert systems.loc[(criterion, system), "mean"] == pytest.approx(value, abs=1e-9)
        ranking = systems.loc[criterion].sort_values("rank").index.tolist()
        assert ranking == expected.sort_values(ascending=False).index.tolist() == ["human", "bart-dpr", "bart"]


def test_bradley_terry_and_win_rates_of_the_published_rankings_agree_with_choix_and_counting(tmp_path):
    out = tmp_path / "rankings"
    text = _analyze(DATA / "rank_comparisons.csv", "--spec", DATA / "rank_comparisons.yaml", "-o", out,
                    "--bootstrap", "100")
    assert "900 comparisons of 3 systems on 100 items by 4 annotators" in text
    assert "Position bias" not in text and "position_bias" in (out / "not_computed.csv").read_text()
    frame = pd.read_csv(DATA / "rank_comparisons.csv")
    strengths = pd.read_csv(out / "bradley_terry.csv").set_index("system").sort_index()
    theirs = choix.mm_pairwise(3, _choix_data(frame, list(strengths.index)), tol=1e-12, max_iter=100_000)
    assert np.allclose(np.log(strengths["strength"]), theirs - theirs.mean(), atol=1e-6)
    rates = pd.read_csv(out / "win_rates.csv").set_index("system")
    winners = np.where(frame["outcome"] == "left", frame["left"], frame["right"])
    for system in rates.index:
        played = ((frame["left"] == system) | (frame["right"] == system)).sum()
        assert rates.loc[system, "win_rate"] == pytest.approx((winners == system).sum() / played)
