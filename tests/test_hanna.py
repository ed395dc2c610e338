"""A published multi-system, multi-metric file analysed end to end: HANNA (Chhun et al. 2022).

The HANNA authors published, beside their scores, the correlations their own code computed with scipy
(`rankings/{system,story}_{pearson,spearman,kendall}.csv`, absolute values). `evalstudio analyze`, run on the
tables `examples/analyze/hanna/prepare.py` makes from the published scores, must reproduce every one of them:
system level (correlation of the 10 system means) and story level (per-prompt correlation across the 10 systems,
averaged over prompts: grouping `item`). The same run must give the report's significance clusters and ranking.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalstudio.cli import app

HANNA = Path(__file__).resolve().parents[1] / "examples" / "analyze" / "hanna"
LEVELS = {"system": ("system", "none"), "story": ("segment", "item")}
METHODS = {"pearson": "pearson", "spearman": "spearman", "kendall": "kendall_b"}


def _prepare():
    spec = importlib.util.spec_from_file_location("hanna_prepare", HANNA / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the whole module in one worker under `make test` (xdist's loadgroup): its module fixture (the HANNA analysis, 8 s)
# is computed once, not once in each worker that draws one of its tests
pytestmark = pytest.mark.xdist_group("test_hanna")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("hanna")
    _prepare().main(["-o", str(out)])
    result = CliRunner().invoke(app, ["analyze", str(out / "ratings.csv"), "--metrics", str(out / "metrics.csv"),
                                      "--spec", str(HANNA / "hanna.yaml"), "-o", str(out / "report"),
                                      "--bootstrap", "100", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    return out / "report", result.output


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("published_method", METHODS)
def test_correlations_match_the_published_hanna_values(report, level, published_method):
    folder, _ = report
    name = _prepare().metric_name
    published = pd.read_csv(HANNA / "published" / f"{level}_{published_method}.csv", index_col="Model")
    published.index = [name(i) for i in published.index]
    ours_level, grouping = LEVELS[level]
    ours = pd.read_csv(folder / "correlations.csv")
    ours = ours[(ours.level == ours_level) & (ours.grouping == grouping) & (ours.method == METHODS[published_method])]
    paper_metrics = _prepare().PAPER_METRICS
    assert sorted(ours.metric.unique()) == sorted(paper_metrics) and ours.criterion.nunique() == 6
    for row in ours.itertuples():
        expected = published.loc[row.metric, f"{row.criterion}_{level}_{published_method}"]
        assert abs(row.value) == pytest.approx(expected, abs=1e-12), (row.criterion, row.metric)


def test_the_hanna_report_has_clusters_ranking_and_says_there_is_no_agreement(report):
    folder, output = report
    assert "10 systems x 96 items" in output and "no agreement statistics" in output
    # the spec's lower_is_better distances are negated: their correlations come out positive
    corr = pd.read_csv(folder / "correlations.csv")
    distances = corr[corr.metric.isin(["BaryScore-W", "DepthScore", "InfoLM-FisherRao"]) & (corr.level == "system")
                     & (corr.method == "pearson")]
    assert len(distances) == 18 and (distances.value > 0).all()
    assert "Lower is better, scores negated: BaryScore-W, DepthScore, InfoLM-FisherRao" in (folder / "index.html").read_text()
    clusters = pd.read_csv(folder / "clusters.csv")
    assert set(clusters.criterion) == {"Relevance", "Coherence", "Empathy", "Surprise", "Engagement", "Complexity"}
    best = clusters[(clusters.level == "system") & (clusters.method == "pearson")].groupby("criterion").first()
    assert (best.cluster == 1).all()
    systems = pd.read_csv(folder / "systems.csv")
    assert systems.system.nunique() == 10
    page = (folder / "index.html").read_text()
    assert "BERTScore Recall" in page and "Complexity" in page
    assert page.count("One rating per item:") == 6  # no empty agreement table, one sentence per criterion
