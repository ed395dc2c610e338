"""Labels with error bars (evalstudio/stats/labels.py): calibrated on simulations from the model fitted to Circa's
published MTurk ratings (12 real workers, 137 items, 5 labels), and written by `analyze`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalstudio.stats import adaptive, labels
from evalstudio.stats.labels import one_coin_labels

from .conftest import DATA, ROOT

RESULTS = DATA / "circa_mturk_final_results.csv"


def _published():
    raw = pd.read_csv(RESULTS, dtype=str)
    return raw["HITId"], raw["WorkerId"], raw["Answer.explanation-quality.label"]


def test_posteriors_and_accuracy_intervals_are_calibrated_on_circa_s_crowd():
    """30 crowds drawn from the model fitted to the published ratings (same items, same workers, same labels per
    item; each worker right with their fitted accuracy, else another label at random): the labels' posteriors say
    how often they are right (mean posterior within 3 points of the share right: measured 0.797 against 0.777;
    expected calibration error over bands of posteriors below 0.04), and the 95% intervals hold the true accuracy and the true posterior (under
    the true accuracies) at least 88% of the time (measured: 92% and 93%; 100 refits each)."""
    items, workers, answers = _published()
    fitted_items, fitted_annotators = one_coin_labels(items, workers, answers, n_boot=0)
    t, _ = pd.factorize(items, sort=True)
    w, _ = pd.factorize(workers, sort=True)
    _, label_names = pd.factorize(answers, sort=True)
    n_items, k = t.max() + 1, len(label_names)
    accuracy = fitted_annotators["accuracy"].to_numpy()
    shares = np.bincount(pd.Categorical(fitted_items["label"], categories=label_names).codes, minlength=k) / n_items
    rng = np.random.default_rng(5)
    posterior, right, accuracy_covered, posterior_covered = [], [], [], []
    for run in range(30):
        truth = rng.choice(k, size=n_items, p=shares)
        correct = rng.random(len(t)) < accuracy[w]
        drawn = np.where(correct, truth[t], (truth[t] + rng.integers(1, k, len(t))) % k)
        got_items, got_annotators = one_coin_labels(t, w, drawn, n_boot=100, seed=run)
        chosen = got_items["label"].to_numpy().astype(int)
        posterior += list(got_items["posterior"])
        right += list(chosen == truth)
        true_accuracy = accuracy[got_annotators["annotator"].to_numpy()]
        accuracy_covered += list((got_annotators["accuracy_lo"] <= true_accuracy)
                                 & (true_accuracy <= got_annotators["accuracy_hi"]))
        true_posterior = adaptive.e_step(t, w, drawn, accuracy, shares, n_items, k)[np.arange(n_items), chosen]
        posterior_covered += list((got_items["posterior_lo"] <= true_posterior)
                                  & (true_posterior <= got_items["posterior_hi"]))
    posterior, right = np.array(posterior), np.array(right)
    assert abs(posterior.mean() - right.mean()) < 0.03
    bands = np.digitize(posterior, [0.6, 0.8, 0.9, 0.95, 0.99])
    gaps = [inside.mean() * abs(posterior[inside].mean() - right[inside].mean())
            for inside in (bands == band for band in np.unique(bands))]
    assert sum(gaps) < 0.04  # expected calibration error over the bands (measured: 0.020)
    assert np.mean(accuracy_covered) >= 0.88
    assert np.mean(posterior_covered) >= 0.88


def test_the_labels_are_one_coin_dawid_skene_s_with_its_priors():
    """The label and posterior are the fit's (adaptive.one_coin with the priors), the accuracies its skills; the
    intervals come from `n_boot` refits and are left out (NaN, n_boot 0) above the size limit."""
    items, workers, answers = _published()
    got_items, got_annotators = one_coin_labels(items, workers, answers, n_boot=50)
    t, _ = pd.factorize(items, sort=True)
    w, _ = pd.factorize(workers, sort=True)
    y, names = pd.factorize(answers, sort=True)
    probas, skills = adaptive.one_coin(t, w, y, n_classes=len(names), skill_prior=adaptive.SKILL_PRIOR,
                                       class_prior=adaptive.CLASS_PRIOR)
    assert list(got_items["label"]) == list(names[probas.argmax(axis=1)])
    np.testing.assert_allclose(got_items["posterior"], probas.max(axis=1))
    np.testing.assert_allclose(got_annotators["accuracy"], skills)
    assert got_items.attrs["n_boot"] == 50 and got_items["posterior_lo"].notna().all()
    assert (got_annotators["accuracy_lo"] <= got_annotators["accuracy_hi"]).all()
    assert got_annotators["labels"].sum() == len(answers)


def test_analyze_writes_each_label_s_posterior_and_each_annotator_s_accuracy(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from evalstudio.cli import app

    spec = ROOT / "examples" / "analyze" / "circa_mturk.yaml"
    result = CliRunner().invoke(app, ["analyze", str(RESULTS), "--spec", str(spec), "-o", str(tmp_path / "a"),
                                      "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    aggregated = pd.read_csv(tmp_path / "a" / "aggregated_labels.csv")
    assert aggregated["posterior"].between(0, 1).all() and aggregated["posterior_lo"].notna().all()
    assert set(aggregated["one_coin"]) <= {"1 - very poor", "2", "3", "4", "5 - very good"}
    accuracy = pd.read_csv(tmp_path / "a" / "annotator_accuracy.csv")
    assert len(accuracy) == 12 and accuracy["accuracy_hi"].notna().all()
    assert "Annotators' estimated accuracy" in (tmp_path / "a" / "index.html").read_text(encoding="utf-8")
    monkeypatch.setattr(labels, "MAX_BOOTSTRAP_LABELS", 100)
    result = CliRunner().invoke(app, ["analyze", str(RESULTS), "--spec", str(spec), "-o", str(tmp_path / "b"),
                                      "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    assert pd.read_csv(tmp_path / "b" / "annotator_accuracy.csv")["accuracy_lo"].isna().all()
    reasons = pd.read_csv(tmp_path / "b" / "not_computed.csv")
    assert reasons["reason"].str.contains("left out above 200,000 labels").any()


def test_the_report_of_a_label_studio_project_gives_labels_with_error_bars(reg, tmp_path):
    """`evalstudio report` (a project's annotations as Label Studio exports them): labels.csv with each task's
    one-coin label, posterior and interval, annotator_accuracy.csv, and the page's section."""
    from evalstudio.exporters.analyses.report import build_report
    from evalstudio.exporters.tables.tidy import annotation_frame

    from .test_report_edges import annotate, tasks_for

    project = reg.entry("circa_part1")
    tasks = tasks_for(reg, "circa_part1", 1000)
    choices = project.criteria["interpretation"].labels
    rng = np.random.default_rng(2)
    for task in tasks:
        for annotator in (1, 2, 3):
            right = task["meta"]["gold_label"] if task["meta"].get("gold_label") in choices else choices[0]
            answer = right if rng.random() < (0.9, 0.9, 0.4)[annotator - 1] else choices[rng.integers(len(choices))]
            annotate(task, project.interface, annotator, "interpretation_choice", answer)
    frame = annotation_frame(tasks, project, {})
    build_report(project, tasks, tmp_path, {}, n_boot=50, annotations=frame)
    got = pd.read_csv(tmp_path / "labels.csv")
    assert len(got) == len(tasks) and got["posterior"].between(0, 1).all() and got["posterior_lo"].notna().all()
    accuracy = pd.read_csv(tmp_path / "annotator_accuracy.csv").set_index("annotator")
    assert len(accuracy) == 3 and accuracy["accuracy"].idxmin() == accuracy.index[2]  # the careless one
    assert "Labels with error bars" in (tmp_path / "index.html").read_text(encoding="utf-8")
