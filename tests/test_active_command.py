"""`evalstudio active` (split from test_active.py, issue 66): the command line runs the whole path on USR's published
ratings with a judge made from the same file (draw, estimate, PAC labels, the gateway's tie rule, what does not fit
refused naming the fix), the estimates figure plots what the tables hold, and a hostile draws file is read or
refused with its line."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.exporters.analyses.active import MAX_PLOTTED, MIN_LABELS, estimates_figure, estimates_page
from evalstudio.protocols.adaptive import Assignment
from evalstudio.stats.active import DEFAULT_MIX
from evalstudio.stats.pac import NO_MAJORITY, pac_threshold

from .conftest import ROOT


@pytest.fixture
def usr_files(tmp_path):
    data = json.loads((ROOT / "tests" / "data" / "usr" / "pc_usr_data.json").read_text(encoding="utf-8"))
    ratings, scores = [], []
    for k, context in enumerate(data):
        for r in context["responses"]:
            for annotator, overall, knowledge in zip(context["annotators"], r["Overall"], r["Uses Knowledge"]):
                ratings += [{"item": f"c{k}", "system": r["model"], "annotator": annotator, "criterion": "Overall",
                             "value": overall},
                            {"item": f"c{k}", "system": r["model"], "annotator": annotator,
                             "criterion": "Knowledge", "value": knowledge}]
            parts = [2 * np.mean(r[c]) - 1 for c in ("Natural", "Maintains Context", "Engaging")]
            scores.append({"item": f"c{k}", "system": r["model"], "metric": "proxy", "criterion": "Overall",
                           "value": np.mean(parts), "confidence": max(0.0, 1 - np.std(parts) / 2)})
            share = np.mean(r["Understandable"])  # a categorical judge's label and confidence, from the file
            scores.append({"item": f"c{k}", "system": r["model"], "metric": "proxy", "criterion": "Knowledge",
                           "value": float(r["Uses Knowledge"][0]), "confidence": share})
    pd.DataFrame(ratings).to_csv(tmp_path / "all.csv", index=False)
    pd.DataFrame(scores).to_csv(tmp_path / "judge.csv", index=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: usr\ncriteria:\n  Overall: {scale: interval, min: 1, max: 5}\n"
                    "  Knowledge: {scale: nominal, labels: ['0', '1']}\n", encoding="utf-8")
    return tmp_path


def _rated(folder, draws: str, name: str):
    ratings, design = pd.read_csv(folder / "all.csv"), pd.read_csv(folder / draws)
    ratings.merge(design[design["drawn"]][["system", "item"]]).to_csv(folder / name, index=False)


def test_draw_then_estimate_from_the_drawn_labels(usr_files):
    runner, f = CliRunner(), usr_files
    drawn = runner.invoke(app, ["active", "draw", str(f / "judge.csv"), "--metric", "proxy", "--criterion", "Overall",
                                "--budget", "260", "--seed", "3", "-o", str(f / "draws.csv")])
    assert drawn.exit_code == 0, drawn.output
    design = pd.read_csv(f / "draws.csv")
    assert len(design) == 300 and design["probability"].sum() == pytest.approx(260)
    # the measured default (stats.active.DEFAULT_MIX), the same in a projects.yaml assignment
    assert set(design["design"]) == {f"active (mix {DEFAULT_MIX:g}), by system"}
    assert Assignment(strategy="active", judge="j", budget=10).mix == DEFAULT_MIX
    # the surer the judge, the rarer the label
    assert np.corrcoef(design["uncertainty"], design["probability"])[0, 1] > 0.5
    _rated(f, "draws.csv", "drawn.csv")
    result = runner.invoke(app, ["active", "estimate", str(f / "drawn.csv"), "--draws", str(f / "draws.csv"),
                                 "--spec", str(f / "spec.yaml"), "-o", str(f / "out")])
    assert result.exit_code == 0, result.output
    systems = pd.read_csv(f / "out" / "active_systems.csv")
    overall = systems[systems["criterion"] == "Overall"]
    truth = pd.read_csv(f / "all.csv").query("criterion == 'Overall'").groupby(["system", "item"])["value"].mean()
    for row in overall.itertuples():
        if row.labels >= MIN_LABELS:
            assert row.lo < row.estimate < row.hi and row.hi - row.lo < 1.0
            assert abs(row.estimate - truth[row.system].mean()) < 0.3  # near the published mean
        else:
            assert math.isnan(row.estimate)
    assert (f / "out" / "active_pairs.csv").exists()
    page = (f / "out" / "index.html").read_text()  # a figure per criterion, then the tables
    assert page.count("<img") == systems["criterion"].nunique() and "active_systems.csv" in page
    # every rating, drawn or not: the undrawn ones are left out and said so
    again = runner.invoke(app, ["active", "estimate", str(f / "all.csv"), "--draws", str(f / "draws.csv"),
                                "--spec", str(f / "spec.yaml"), "-o", str(f / "out2")])
    assert again.exit_code == 0 and "left out" in again.output
    assert pd.read_csv(f / "out2" / "active_systems.csv")["estimate"].equals(systems["estimate"])


@pytest.mark.parametrize("design, seed", [("active", 0), ("active", 1), ("uniform", 2)])
def test_active_draw_gives_every_system_its_share_of_the_budget(usr_files, design, seed):
    """Issue 65.14: drawn over all systems at once, a system the judge is surer of got fewer labels (USR with the
    proxy judge, 40 per system expected: 'New Human Generated' 35.9 on average and fewer than 30, the size
    `active estimate` prints from, in 4.6% of draws). Drawn system by system, each gets its share, 40, exactly."""
    runner, f = CliRunner(), usr_files
    result = runner.invoke(app, ["active", "draw", str(f / "judge.csv"), "--metric", "proxy", "--criterion",
                                 "Overall", "--budget", "200", "--design", design, "--seed", str(seed),
                                 "-o", str(f / "d.csv")])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(f / "d.csv")
    per_system = table.groupby("system").agg(expected=("probability", "sum"), drawn=("drawn", "sum"))
    assert len(per_system) == 5
    assert per_system["expected"].to_numpy() == pytest.approx(40)
    assert (per_system["drawn"] == 40).all(), per_system


def test_the_estimates_figure_plots_what_the_tables_hold():
    """`active estimate`'s figure: each system's point and interval are the table's, top to bottom in its order,
    a system with too few labels is named without a point, each difference is drawn against zero; names from the
    data are text in the figure and escaped in the page."""
    systems = pd.DataFrame({"criterion": "overall", "system": ["A", "$B$", "<script>C</script>"],
                            "segments": 60, "labels": [40, 35, 12], "estimate": [3.1, 2.4, np.nan],
                            "lo": [2.8, 2.0, np.nan], "hi": [3.5, 2.7, np.nan], "lambda": [0.5, 0.2, np.nan]})
    pairs = pd.DataFrame({"criterion": "overall", "system_a": ["A"], "system_b": ["$B$"], "items": [60],
                          "difference": [0.7], "lo": [0.2], "hi": [1.1]})
    fig = estimates_figure(systems, pairs, "overall", alpha=0.025)
    try:
        left, right = fig.axes
        assert left.get_xlabel() == "overall: mean human score, 97.5% interval"  # the level as given, not rounded
        (points, _, (bars,)), = left.containers
        assert points.get_xdata().tolist() == [3.1, 2.4] and points.get_ydata().tolist() == [2, 1]
        assert [tuple(s[:, 0]) for s in bars.get_segments()] == [(2.8, 3.5), (2.0, 2.7)]
        assert [t.get_text() for t in left.get_yticklabels()] == [
            "A (40 labels)", "$B$ (35 labels)", "<script>C</script> (12 labels: too few)"]
        (points, _, (bars,)), = right.containers
        assert points.get_xdata().tolist() == [0.7] and [tuple(s[:, 0]) for s in bars.get_segments()] == [(0.2, 1.1)]
        assert [line.get_xdata()[0] for line in right.lines if line.get_linestyle() == "--"] == [0]
        fig.canvas.draw()  # "$B$" is drawn as text: no mathtext to parse
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    page = estimates_page(systems, pairs, ["a note <b>"], "Active <estimates>")
    assert "<script>" not in page and "&lt;script&gt;C&lt;/script&gt;" in page and "a note &lt;b&gt;" in page
    # a study of many systems: the systems plotted, their 1,225 differences only in the table
    many = pd.DataFrame({"criterion": "overall", "system": [f"S{i}" for i in range(50)], "segments": 60,
                         "labels": 40, "estimate": 3.0, "lo": 2.5, "hi": 3.5, "lambda": 0.5})
    every_pair = pd.DataFrame([{"criterion": "overall", "system_a": f"S{i}", "system_b": f"S{j}", "items": 60,
                                "difference": 0.0, "lo": -0.5, "hi": 0.5} for i in range(50) for j in range(i + 1, 50)])
    page = estimates_page(many.iloc[:MAX_PLOTTED], every_pair, [], "many")
    assert page.count("<img") == 1 and "1225 pairs of systems: too many to plot" in page
    page = estimates_page(many, every_pair, [], "many")
    assert page.count("<img") == 0 and "50 systems: too many to plot" in page


def test_pac_says_what_to_collect_then_gives_the_labels(usr_files):
    runner, f = CliRunner(), usr_files
    drawn = runner.invoke(app, ["active", "draw", str(f / "judge.csv"), "--metric", "proxy", "--criterion",
                                "Knowledge", "--budget", "80", "--design", "pac", "-o", str(f / "sample.csv")])
    assert drawn.exit_code == 0, drawn.output
    assert pd.read_csv(f / "sample.csv")["drawn"].sum() == 80
    _rated(f, "sample.csv", "sample_rated.csv")
    first = runner.invoke(app, ["active", "pac", str(f / "sample_rated.csv"), "--draws", str(f / "sample.csv"),
                                "--criterion", "Knowledge", "--epsilon", "0.1", "--spec", str(f / "spec.yaml"),
                                "-o", str(f / "pac.csv")])
    assert first.exit_code == 0, first.output
    assert "no human label yet" in first.output
    table = pd.read_csv(f / "pac.csv", keep_default_na=False)
    needed = table[table["needs_human"]]
    ratings = pd.read_csv(f / "all.csv")
    ratings.merge(needed[["system", "item"]]).to_csv(f / "collected.csv", index=False)
    final = runner.invoke(app, ["active", "pac", str(f / "collected.csv"), "--draws", str(f / "sample.csv"),
                                "--criterion", "Knowledge", "--epsilon", "0.1", "--spec", str(f / "spec.yaml"),
                                "-o", str(f / "pac.csv")])
    assert final.exit_code == 0 and "final labels" in final.output, final.output
    labels = pd.read_csv(f / "pac.csv", keep_default_na=False, dtype=str)
    assert set(labels["source"]) <= {"human", "judge"} and (labels["label"] != "").all()
    majority = ratings[ratings.criterion == "Knowledge"].groupby(["system", "item"])["value"].agg(
        lambda v: v.mode()[0] if len(v.mode()) == 1 else None)
    mine = labels.set_index(["system", "item"])
    wrong = np.mean([str(int(majority[k])) != mine.at[k, "label"] for k in mine.index if majority[k] is not None])
    assert wrong <= 0.1


@pytest.mark.parametrize("ties, exit_code, said", [
    ("judge-wrong", 0, "votes tie: labelled '(no majority)', a tie counts as the judge being wrong"),
    ("refuse", 2, "with tied votes"),
])
def test_pac_on_three_raters_of_a_five_point_scale_applies_the_gateways_tie_rule(usr_files, ties, exit_code, said):
    """Issue 65.13: USR's Overall (three raters, 1-5) as an ordinal criterion: every sampled segment is rated, but
    where the three answers differ there is no majority, and `active pac` refused ("label them first"). By default
    it now applies the gateway's rule (`routing.pac_needed`: a tie is "(no majority)", the judge wrong) and says so;
    `--ties refuse` keeps the refusal. The threshold is the one `pac_threshold` gives with that rule."""
    runner, f = CliRunner(), usr_files
    spec = f / "ordinal.yaml"
    spec.write_text("name: usr\ncriteria:\n  Overall: {scale: ordinal, labels: ['1', '2', '3', '4', '5']}\n",
                    encoding="utf-8")
    scores = pd.read_csv(f / "judge.csv").query("criterion == 'Overall'")
    scores.assign(value=scores["value"].round().clip(1, 5)).to_csv(f / "labels.csv", index=False)
    assert runner.invoke(app, ["active", "draw", str(f / "labels.csv"), "--metric", "proxy", "--budget", "120",
                               "--design", "pac", "-o", str(f / "sample.csv")]).exit_code == 0
    ratings = pd.read_csv(f / "all.csv").query("criterion == 'Overall'")
    ratings.to_csv(f / "overall.csv", index=False)
    result = runner.invoke(app, ["active", "pac", str(f / "overall.csv"), "--draws", str(f / "sample.csv"),
                                 "--criterion", "Overall", "--epsilon", "0.3", "--ties", ties, "--spec", str(spec),
                                 "-o", str(f / "pac.csv")])
    assert result.exit_code == exit_code, result.output
    assert said in " ".join(result.output.split()), result.output
    design = pd.read_csv(f / "sample.csv", dtype={"item": str})
    sampled = design[design["drawn"]]
    counts = ratings.groupby(["system", "item"])["value"].agg(lambda v: len(v.mode()))
    tied = [counts[(s, i)] > 1 for s, i in zip(sampled["system"], sampled["item"])]
    assert sum(tied) >= 10  # the published ratings do tie
    if ties == "refuse":
        return
    table = pd.read_csv(f / "pac.csv", keep_default_na=False, dtype=str)
    labels = table.set_index(["system", "item"])
    human = [NO_MAJORITY if t else str(int(ratings[(ratings.system == s) & (ratings.item == i)]["value"].mode()[0]))
             for (s, i), t in zip(zip(sampled["system"], sampled["item"]), tied)]
    expected = pac_threshold([str(int(v)) for v in design["score"]], design["uncertainty"].to_numpy(float),
                             np.flatnonzero(design["drawn"]), human, 0.3, 0.1)
    assert (table["needs_human"] == "True").to_numpy().tolist() == expected.human.tolist()
    for (s, i), t, h in zip(zip(sampled["system"], sampled["item"]), tied, human):
        assert labels.at[(s, i), "label"] == h and labels.at[(s, i), "source"] == "human"


@pytest.mark.parametrize("args, message", [
    (["draw", "{f}/judge.csv", "--metric", "nobody", "--budget", "10"], "--metric nobody: no such metric"),
    (["draw", "{f}/judge.csv", "--metric", "proxy", "--budget", "1000"], "must be between 2 and the 300"),
    (["draw", "{f}/nocon.csv", "--metric", "proxy", "--budget", "10"], "evalstudio judge --samples 5"),
    (["estimate", "{f}/all.csv", "--draws", "{f}/judge.csv", "--spec", "{f}/spec.yaml"], "not a draws file"),
    (["estimate", "{f}/none.csv", "--draws", "{f}/d.csv", "--spec", "{f}/spec.yaml"], "drawn segments have no human"),
    (["estimate", "{f}/all.csv", "--draws", "{f}/bad.csv", "--spec", "{f}/spec.yaml"], "bad.csv:2: probability"),
    (["pac", "{f}/all.csv", "--draws", "{f}/d.csv", "--criterion", "Knowledge", "--spec", "{f}/spec.yaml"],
     "need a uniform calibration sample"),
    (["pac", "{f}/all.csv", "--draws", "{f}/d.csv", "--criterion", "Overall", "--spec", "{f}/spec.yaml"],
     "for a categorical criterion"),
])
def test_what_does_not_fit_is_refused_naming_the_fix(usr_files, args, message):
    f = usr_files
    scores = pd.read_csv(f / "judge.csv")
    scores.drop(columns="confidence").to_csv(f / "nocon.csv", index=False)
    runner = CliRunner()
    assert runner.invoke(app, ["active", "draw", str(f / "judge.csv"), "--metric", "proxy", "--criterion", "Overall",
                               "--budget", "100", "-o", str(f / "d.csv")]).exit_code == 0
    design = pd.read_csv(f / "d.csv")
    design.assign(probability=[0.0] + list(design["probability"][1:])).to_csv(f / "bad.csv", index=False)
    pd.read_csv(f / "all.csv").head(0).to_csv(f / "none.csv", index=False)
    none = pd.read_csv(f / "all.csv").iloc[:2]  # one segment's ratings: the drawn others have none
    none.to_csv(f / "none.csv", index=False)
    result = runner.invoke(app, ["active", *[a.format(f=f) for a in args]])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output


@settings(max_examples=150, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "system": st.text(max_size=5), "item": st.text(max_size=5), "judge": st.just("j"),
    "score": st.one_of(st.floats(allow_nan=True), st.text(max_size=4)),
    "uncertainty": st.one_of(st.floats(allow_nan=True), st.text(max_size=4)),
    "probability": st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4)),
    "drawn": st.one_of(st.booleans(), st.sampled_from(["true", "FALSE", "1", "0", "yes", "", "=1+1"])),
    "design": st.sampled_from(["active (mix 0.5)", "pac sample of 3", "=cmd"]), "seed": st.integers()}),
    min_size=1, max_size=8))
def test_a_hostile_draws_file_is_read_or_refused_with_its_line(rows):
    """The draws file is input like any other: whatever its cells, it is read or refused naming the line and the
    column, never a crash."""
    from evalstudio.base.errors import BadInput
    from evalstudio.exporters.analyses.active import check_draws

    frame = pd.DataFrame(rows).astype(str)
    try:
        checked = check_draws(frame, "draws.csv")
    except BadInput as e:
        assert str(e).startswith("draws.csv")
    else:
        assert ((checked["probability"] > 0) & (checked["probability"] <= 1)).all()
        assert checked["drawn"].dtype == bool
