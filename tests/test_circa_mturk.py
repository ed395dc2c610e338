"""The real Circa MTurk explanation ratings through the pipeline, against a reference computed by hand
(csv module and plain loops; Krippendorff's alpha from the krippendorff package)."""

from __future__ import annotations

import csv
from collections import defaultdict
from statistics import mean

import krippendorff  # GPL: test oracle only
import numpy as np
import pytest

from evalstudio.exporters.analyses import analysis
from evalstudio.exporters.payments.mturk import read_mturk_results
from evalstudio.exporters.tables.tidy import task_frame
from evalstudio.tasks.scanning import iter_tasks, split_task

from .conftest import DATA, EXAMPLES

RESULTS = DATA / "circa_mturk_final_results.csv"
MODEL_OUTPUTS = EXAMPLES / "circa" / "model_explanations.csv"


@pytest.fixture(scope="module")
def pipeline(reg):
    from evalstudio import importers

    project = reg.entry("circa_part2")  # the explanation ratings (Part II); gold and roles go to the task's meta
    tasks = [{"id": i, **split_task(project, d)}
             for i, (_, d) in enumerate(iter_tasks(project, importers.get("circa"), [MODEL_OUTPUTS]))]
    assert all("gold_label" in t["meta"] and "gold_label" not in t["data"] for t in tasks)
    annotations, unmatched = read_mturk_results(RESULTS, project, tasks, {"explanation_quality": "Answer.explanation-quality.label"})
    return project, tasks, annotations, unmatched


@pytest.fixture(scope="module")
def by_hand():
    """item (context, question, answer, shown interpretation, explanation) -> ratings, and the shown label's role."""
    with open(MODEL_OUTPUTS, encoding="utf-8", newline="") as f:
        outputs = list(csv.DictReader(f))
    role = {}
    for o in outputs:
        key = (o["context"], o["question"], o["answer"], o["explanation"])
        role[key + (o["prediction"],)] = {"prediction"} | ({"gold"} if o["prediction"] == o["target"] else set())
        if o["prediction"] != o["target"]:
            role[key + (o["target"],)] = {"gold"}
    item_ratings = defaultdict(dict)
    with open(RESULTS, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            key = (row["Input.context"], row["Input.question"], row["Input.answer"], row["Input.explanation"], row["Input.interpretation"])
            if key in role and row["AssignmentStatus"] != "Rejected":
                item_ratings[key][row["WorkerId"]] = int(row["Answer.explanation-quality.label"].split(" ")[0])
    return role, item_ratings


def test_every_rating_of_a_batch_item_is_matched(pipeline, by_hand):
    _, _, annotations, unmatched = pipeline
    role, item_ratings = by_hand
    assert len(annotations) == sum(len(r) for r in item_ratings.values()) == 265
    assert annotations["task_id"].nunique() == len(item_ratings) == 90
    assert len(annotations) + len(unmatched) == 359  # the other rows rate items of another batch


def test_agreement_matches_the_krippendorff_package(pipeline, by_hand):
    project, _, annotations, _ = pipeline
    _, item_ratings = by_hand
    workers = sorted({w for r in item_ratings.values() for w in r})
    matrix = np.array([[r.get(w, np.nan) for r in item_ratings.values()] for w in workers], dtype=float)
    table = analysis.agreement_table(annotations, project, n_boot=100).set_index("criterion")
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
    assert table.loc["explanation_quality", "alpha"] == pytest.approx(expected, abs=1e-9)
    assert table.loc["explanation_quality", "alpha_lo"] < expected < table.loc["explanation_quality", "alpha_hi"]
    # pairwise agreement by hand: share of agreeing rating pairs within items, averaged over items rated twice+
    shares = []
    for r in item_ratings.values():
        values = list(r.values())
        if len(values) > 1:
            pairs = [(a, b) for i, a in enumerate(values) for j, b in enumerate(values) if i != j]
            shares.append(mean(a == b for a, b in pairs))
    assert table.loc["explanation_quality", "percent_agreement"] == pytest.approx(mean(shares))


def test_faithfulness_and_plausibility_match_hand_computation(pipeline, by_hand):
    _, tasks, annotations, _ = pipeline
    role, item_ratings = by_hand
    table = analysis.circa_explanation_roles(annotations, task_frame(tasks), n_boot=100).set_index("group")

    def pooled(select):
        return mean(v for key, r in item_ratings.items() if select(role[key]) for v in r.values())

    assert table.loc["faithfulness (shown = prediction)", "mean"] == pytest.approx(pooled(lambda r: "prediction" in r))
    assert table.loc["plausibility (shown = gold)", "mean"] == pytest.approx(pooled(lambda r: "gold" in r))
    assert table.loc["prediction only (model wrong)", "mean"] == pytest.approx(pooled(lambda r: r == {"prediction"}))
    assert table.loc["gold only (model wrong)", "mean"] == pytest.approx(pooled(lambda r: r == {"gold"}))
    assert table.loc["both (model right)", "tasks"] == sum(1 for k in item_ratings if role[k] == {"prediction", "gold"})


def test_control_question_filter_drops_inaccurate_annotators(reg):
    """Part I answers on control items: accuracy per annotator and the threshold filter."""
    import pandas as pd

    tasks = pd.DataFrame({"task_id": [1, 2, 3, 4], "is_control": [True, True, True, False],
                          "gold_label": ["Yes", "No", "Yes", None]})
    answers = [("good", 1, "Yes"), ("good", 2, "No"), ("good", 3, "Yes"), ("good", 4, "No"),
               ("bad", 1, "No"), ("bad", 2, "No"), ("bad", 3, "Other"), ("bad", 4, "Yes")]
    annotations = pd.DataFrame([{"task_id": t, "annotator": a, "criterion": "interpretation", "value": v,
                                 "cancelled": False} for a, t, v in answers])
    accuracy = analysis.circa_control_accuracy(annotations, tasks).set_index("annotator")
    assert accuracy.loc["good", "control_accuracy"] == 1.0 and accuracy.loc["bad", "control_accuracy"] == pytest.approx(1 / 3)
    assert (accuracy["control_items"] == 3).all()
    kept = analysis.drop_low_accuracy_annotators(annotations, accuracy.reset_index(), 0.5)
    assert set(kept["annotator"]) == {"good"}
