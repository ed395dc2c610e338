"""`evalstudio analyze` reproduces the meta-evaluation oracles of tests/data/metaeval/ (computed with mt-metrics-eval,
pingouin, irrCAC, krippendorff and crowd-kit; see its README for the calls and tolerances): one test per statistic.

The analysis runs once per data set through the command line; statistics the report does not print (variants,
other panels) are checked on the same functions the report uses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.stats import agreement as ag
from evalstudio.stats import coefficients
from evalstudio.stats import correlation as corr
from evalstudio.stats import icc as icc_mod
from evalstudio.stats import significance as sig

DATA = Path(__file__).parent / "data" / "metaeval"
EXACT = 1e-9
SYN = json.loads((DATA / "synthetic_expected.json").read_text())
CIRCA = json.loads((DATA / "circa_expected.json").read_text())
METRICS = SYN["data"]["metrics"]


# the whole module in one worker under `make test` (xdist's loadgroup): its module fixtures (analyze on Circa, 20 s)
# is computed once, not once in each worker that draws one of its tests
pytestmark = pytest.mark.xdist_group("test_metaeval")


def run_analyze(*args) -> None:
    result = CliRunner().invoke(app, ["analyze", *map(str, args)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    run_analyze(DATA / "synthetic_ratings.csv", "--metrics", DATA / "synthetic_metrics.csv", "--spec",
                DATA / "synthetic.yaml", "-o", out, "--bootstrap", "100")
    return {p.stem: pd.read_csv(p) for p in out.glob("*.csv") if p.stat().st_size > 1}


@pytest.fixture(scope="module")
def circa(tmp_path_factory):
    """The published Circa ratings as a plain long table (item, worker, rating), MACE included."""
    out = tmp_path_factory.mktemp("circa")
    spec = out / "spec.yaml"
    spec.write_text("columns: {annotator: worker}\ncriteria:\n  quality: {scale: ordinal, min: 1, max: 5}\n")
    run_analyze(DATA / "circa_ratings.csv", "--spec", spec, "-o", out, "--bootstrap", "100", "--mace")
    return {p.stem: pd.read_csv(p) for p in out.glob("*.csv") if p.stat().st_size > 1}


@pytest.fixture(scope="module")
def matrices():
    """Human segment scores (mean of the available ratings) and metric scores, systems x items, packed as the
    oracle packs them."""
    ratings = pd.read_csv(DATA / "synthetic_ratings.csv")
    metrics = pd.read_csv(DATA / "synthetic_metrics.csv")
    human = ratings.groupby(["system", "item"])["rating"].mean().unstack()
    return human.to_numpy(), {m: g.pivot(index="system", columns="item", values="score").to_numpy()
                              for m, g in metrics.groupby("metric")}


def _long(name: str) -> pd.DataFrame:
    frame = pd.read_csv(DATA / f"circa_{name}.csv")
    annotator = "rater" if "rater" in frame else "worker"
    return pd.DataFrame({"item": frame["item"], "annotator": frame[annotator], "value": frame["rating"]})


# --- synthetic set: mt-metrics-eval ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall_b", "kendall_c"])
def test_system_level_correlations(synthetic, method):
    table = synthetic["correlations"].query("level == 'system' and method == @method").set_index("metric")
    for metric in METRICS:
        assert table.loc[metric, "value"] == pytest.approx(SYN["system_level"][metric][method]["value"], abs=EXACT)
        assert table.loc[metric, "lo"] <= table.loc[metric, "value"] <= table.loc[metric, "hi"]


@pytest.mark.parametrize("grouping", ["none", "item", "system"])
@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall_b"])
def test_segment_level_grouped_correlations_in_the_report(synthetic, grouping, method):
    table = synthetic["correlations"].query("level == 'segment' and grouping == @grouping and method == @method")
    assert len(table) == len(METRICS)
    for metric, row in table.set_index("metric").iterrows():
        expected = SYN["segment_level"]["sys" if grouping == "system" else grouping][metric][method]
        assert row["value"] == pytest.approx(expected["value"], abs=EXACT)
        assert row["groups"] == expected["n_groups_averaged"]


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall_b"])
def test_segment_level_grouped_by_system_and_nan_as_zero(matrices, method):
    human, scores = matrices
    for metric in METRICS:
        value, groups = corr.grouped_correlation(human, scores[metric], method, "system")
        expected = SYN["segment_level"]["sys"][metric][method]
        assert (value, groups) == (pytest.approx(expected["value"], abs=EXACT), expected["n_groups_averaged"])
        for grouping, key in (("none", "none"), ("item", "item"), ("system", "sys")):
            zero = SYN["segment_level"][key][metric]["pearson_nan_as_zero"]
            value, groups = corr.grouped_correlation(human, scores[metric], "pearson", grouping, nan_as_zero=True)
            assert (value, groups) == (pytest.approx(zero["value"], abs=EXACT), zero["n_groups_averaged"])


def test_pairwise_accuracy(synthetic):
    table = synthetic["accuracy"].query("statistic == 'pairwise_accuracy_system'").set_index("metric")
    for metric in METRICS:
        expected = SYN["pairwise_accuracy_system"][metric]
        assert table.loc[metric, "value"] == pytest.approx(expected["value"], abs=EXACT)
        assert table.loc[metric, "pairs"] == expected["num_pairs"]


def test_tie_calibrated_pairwise_accuracy(synthetic, matrices):
    human, scores = matrices
    table = synthetic["accuracy"].query("statistic == 'tie_calibrated_accuracy_item'").set_index("metric")
    for metric in METRICS:
        expected = SYN["tie_calibrated_accuracy_segment_item"][metric]
        assert table.loc[metric, "value"] == pytest.approx(expected["acc_eq"]["value"], abs=EXACT)
        assert table.loc[metric, "epsilon"] == pytest.approx(expected["epsilon"]["value"], abs=EXACT)
        assert corr.acc23_at(human, scores[metric], 0.0) == pytest.approx(expected["acc23_at_epsilon0"]["value"], abs=EXACT)
        assert corr.grouped_correlation(human, scores[metric], "acc_23", "item")[0] == pytest.approx(
            expected["acc23_at_epsilon0"]["value"], abs=EXACT)
        epsilon = expected["epsilon"]["value"]
        assert corr.acc23_at(human, scores[metric], epsilon) == pytest.approx(
            expected["acc23_at_optimal_epsilon_check"]["value"], abs=EXACT)
        # every pair is right or wrong, so tau_23 = 2 acc_23 - 1 at any threshold
        assert 2 * table.loc[metric, "value"] - 1 == pytest.approx(expected["tau23_opt"]["value"], abs=EXACT)
        tau23 = synthetic["correlations"].query("grouping == 'item' and method == 'kendall_23'").set_index("metric")
        assert tau23.loc[metric, "value"] == pytest.approx(2 * expected["acc23_at_epsilon0"]["value"] - 1, abs=EXACT)


def test_soft_pairwise_accuracy(synthetic):
    table = synthetic["accuracy"].query("statistic == 'soft_pairwise_accuracy_system'").set_index("metric")
    for metric in METRICS:
        expected = SYN["soft_pairwise_accuracy_system"][metric]
        assert table.loc[metric, "value"] == pytest.approx(expected["value"], abs=expected["tolerance"])


def test_williams_test(synthetic):
    table = synthetic["metric_pairs"].set_index(["metric_better", "metric_worse"])
    for pair in SYN["williams_system_pearson"]["pairs"]:
        args = pair["r_human_metric1"], pair["r_human_metric2"], pair["r_metric1_metric2"], pair["n"]
        assert sig.williams_test(*args) == pytest.approx(pair["p_one_sided"], abs=EXACT)
        assert sig.williams_test(*args, one_sided=False) == pytest.approx(pair["p_two_sided"], abs=EXACT)
        assert table.loc[(pair["metric1"], pair["metric2"]), "p_williams"] == pytest.approx(pair["p_one_sided"], abs=EXACT)


@pytest.mark.parametrize("method", ["pearson", "kendall_b"])
def test_perm_both(synthetic, matrices, method):
    human, scores = matrices
    system = {m: np.nanmean(s, axis=1) for m, s in scores.items()}
    reported = synthetic["metric_pairs"].set_index(["metric_better", "metric_worse"])
    pairs = [p for p in SYN["perm_both_system"]["pairs"] if p["corr"] == method]
    assert pairs
    for pair in pairs:
        better, worse, tolerance = pair["metric_better"], pair["metric_worse"], pair["tolerance"]
        p, delta = sig.perm_both(np.nanmean(human, axis=1), system[worse], system[better],
                                 method, seed=7)
        assert delta == pytest.approx(pair["delta"], abs=EXACT)
        assert abs(p - pair["p_value"]) <= tolerance and abs(p - pair["p_value_exact_enumeration"]) <= tolerance
        if method == "pearson":
            p = reported.loc[(better, worse), "p_perm_both"]
            assert abs(p - pair["p_value"]) <= tolerance and abs(p - pair["p_value_exact_enumeration"]) <= tolerance


def test_significance_clusters_follow_the_p_values(synthetic):
    clusters = synthetic["clusters"].sort_values("correlation", ascending=False)
    pairs = synthetic["metric_pairs"].set_index(["metric_better", "metric_worse"])["p_perm_both"]
    head = clusters["metric"].iloc[0]
    for _, row in clusters.iloc[1:].iterrows():
        new = pairs[(head, row["metric"])] < 0.05
        assert row["cluster"] == clusters.loc[clusters["metric"] == head, "cluster"].iloc[0] + int(new)
        head = row["metric"] if new else head
    assert clusters["cluster"].nunique() > 1  # a, b are indistinguishable; d is far worse


def test_human_ceiling_leave_one_annotator_out(synthetic):
    expected = SYN["human_ceiling_leave_one_annotator_out"]
    table = synthetic["leave_one_out"].set_index("annotator")
    for annotator, values in expected["per_annotator"].items():
        assert table.loc[annotator, "n"] == values["n_segments"]
        for method in ("pearson", "spearman", "kendall_b"):
            assert table.loc[annotator, method] == pytest.approx(values[method], abs=EXACT)
    for method in ("pearson", "spearman", "kendall_b"):
        assert table.loc["average", method] == pytest.approx(expected["average"][method], abs=EXACT)
        assert synthetic["agreement"][f"loo_{method}"].iloc[0] == pytest.approx(expected["average"][method], abs=EXACT)


# --- Circa ratings: krippendorff, pingouin, irrCAC, crowd-kit ---------------------------------------------------

@pytest.mark.parametrize("table", ["full", "panel_slots", "panel_crossed"])
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_alpha(circa, table, level):
    frame = _long("ratings" if table == "full" else table)
    expected = CIRCA["krippendorff_alpha"][table][level]
    assert ag.krippendorff_alpha(frame["item"].to_numpy(), frame["value"].to_numpy(), level) == pytest.approx(expected, abs=EXACT)
    if table == "full" and level == "ordinal":
        assert circa["agreement"]["alpha"].iloc[0] == pytest.approx(expected, abs=EXACT)


@pytest.mark.parametrize("panel", ["panel_slots", "panel_crossed"])
def test_icc_six_forms(circa, panel):
    table = icc_mod.icc(_long(panel)).set_index("type")
    for form, expected in CIRCA["icc_pingouin"][panel].items():
        row = table.loc[form]
        assert row["value"] == pytest.approx(expected["value"], abs=EXACT)
        assert row["F"] == pytest.approx(expected["F"], abs=EXACT)
        assert (row["df1"], row["df2"]) == (expected["df1"], expected["df2"])
        assert row["p"] == pytest.approx(expected["pval"], abs=EXACT)
        assert (row["lo"], row["hi"]) == (pytest.approx(expected["ci95"][0], abs=EXACT), pytest.approx(expected["ci95"][1], abs=EXACT))
    if panel == "panel_slots":  # the report takes the items with 3 ratings as slots: the same panel
        reported = circa["icc"].set_index("type")
        assert reported.loc["ICC1", "value"] == pytest.approx(CIRCA["icc_pingouin"][panel]["ICC1"]["value"], abs=EXACT)
        assert reported.loc["ICC2k", "value"] == pytest.approx(CIRCA["icc_pingouin"][panel]["ICC2k"]["value"], abs=EXACT)
        assert "slots" in reported["design"].iloc[0]


COEFFICIENTS = {"AC1": ("gwet", "identity"), "AC2_ordinal": ("gwet", "ordinal"), "AC2_quadratic": ("gwet", "quadratic"),
                "fleiss_kappa": ("fleiss", "identity"), "fleiss_kappa_ordinal_weights": ("fleiss", "ordinal"),
                "fleiss_kappa_quadratic_weights": ("fleiss", "quadratic")}


@pytest.mark.parametrize("table", ["full_with_missing", "panel_slots", "panel_crossed"])
@pytest.mark.parametrize("key", list(COEFFICIENTS))
def test_gwet_ac_and_fleiss_kappa(circa, table, key):
    frame = _long("ratings" if table == "full_with_missing" else table)
    result = coefficients.chance_corrected(frame, *COEFFICIENTS[key], categories=[1, 2, 3, 4, 5])
    expected = CIRCA["irrCAC"][table][key]
    for field in ("value", "pa", "pe"):
        assert result[field] == pytest.approx(expected[field], abs=EXACT)
    if table == "full_with_missing" and key in ("AC2_ordinal", "fleiss_kappa_ordinal_weights"):
        column = "gwet_ac" if key.startswith("AC") else "fleiss_kappa"
        assert circa["agreement"][column].iloc[0] == pytest.approx(expected["value"], abs=EXACT)


@pytest.mark.parametrize("column, expected", [("plurality", "majority_vote"), ("dawid_skene", "ds_label"),
                                              ("mace", "mace_label")])
def test_label_aggregation(circa, column, expected):
    labels = circa["aggregated_labels"].astype({"item": str}).set_index("item")[column]
    oracle = pd.read_csv(DATA / "circa_aggregates.csv").astype({"item": str}).set_index("item")[expected]
    assert len(labels) == len(oracle) == 137
    assert (labels.reindex(oracle.index).astype(float) == oracle.astype(float)).all()


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["s1", "s2", "ghost"]), st.sampled_from(["1", "2", "10", "nope"]),
                               st.sampled_from(["m", "n"]), st.sampled_from(["", "q", "other"]),
                               st.integers(0, 9)), max_size=40))
def test_score_matrices_equal_a_pivot_table_per_metric(rows):
    """The metric matrices are placed at once by integer positions; they must equal what a pivot table per metric
    (aggfunc 'first') reindexed to the human matrix gives, whatever the scores of unrated systems or segments, the
    criteria and the repeated scores."""
    from evalstudio.exporters.tables.segments import score_matrices

    ratings = pd.DataFrame([{"project": "p", "item": i, "system": s, "agent": "", "annotator": "a", "criterion": "q",
                             "value": float(v), "line": 0} for s, i, v in [("s1", "1", 3), ("s2", "2", 4), ("s1", "10", 5),
                                                                            ("s2", "1", 1)]])
    scores = pd.DataFrame(rows, columns=["system", "item", "metric", "criterion", "value"]).astype(
        {"value": float, "system": str, "item": str, "metric": str, "criterion": str})
    systems, items, human, got = score_matrices(ratings, scores, "q")
    mine = scores[scores["criterion"].isin(["q", ""])]
    assert sorted(got) == sorted(mine["metric"].unique())
    for name, g in mine.groupby("metric"):
        expected = g.pivot_table(index="system", columns="item", values="value", aggfunc="first")
        expected = expected.reindex(index=systems, columns=items).to_numpy(dtype=float)
        assert np.array_equal(got[name], expected, equal_nan=True)


def test_agreement_names_the_annotator_and_item_of_a_repeated_rating():
    """The agreement works on integer codes of units and annotators; where an annotator rated a unit twice (a frame
    not read through `read_ratings`, which refuses it), the reason must still name them, not their codes."""
    from evalstudio.exporters.analyses import metaeval
    from evalstudio.readers.spec import CriterionSpec, Spec

    rows = [{"project": "p", "item": f"item-{i}", "system": "", "agent": "", "annotator": who, "criterion": "q",
             "value": float((i + k) % 5 + 1), "line": 0} for i in range(6) for k, who in enumerate(["ann-x", "ann-y"])]
    rows.append({**rows[2], "value": 3.0})  # ann-x rates item-1 again
    why = metaeval.Reasons()
    metaeval.agreement(pd.DataFrame(rows), Spec(name="p", criteria={"q": CriterionSpec(scale="interval")}), 50, why)
    assert {"table": "leave_one_out", "criterion": "q",
            "reason": "annotator 'ann-x' rated item 'item-1' more than once"} in list(why)
