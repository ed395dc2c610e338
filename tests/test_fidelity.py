"""What the protocol-fidelity rules promise, offline: participant ids from accounts, prefilled values flagged,
bad instances and accepted predictions kept out of the statistics, CMV value shift against a hand computation."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from evalstudio.base.errors import EvalstudioError
from evalstudio.exporters.analyses import analysis
from evalstudio.exporters.tables.tidy import annotation_frame, participant_id
from evalstudio.tasks.scanning import iter_tasks, split_task
from evalstudio.values.results import region

from .conftest import EXAMPLES, example_files

PID = "5f1a2b3c4d5e6f7a8b9c0d1e"


@pytest.mark.parametrize("account, expected", [
    (f"{PID}@email.prolific.com", PID),
    (f"{PID.upper()}@email.prolific.com", PID.upper()),
    ("someone@example.com", None),
    (f"{PID}@email.prolific.com.evil.example", None),
    ("", None),
])
def test_prolific_id_comes_from_the_account_email(account, expected):
    assert participant_id(account, "prolific") == expected
    assert participant_id(account, None) is None


def _tasks(reg, importer_for, protocol, n=2):
    project = reg.entry(protocol)
    return project, [{"id": i, **split_task(project, d), "annotations": [], "predictions": []}
                     for i, (_, d) in enumerate(iter_tasks(project, importer_for(protocol), example_files(protocol)))][:n]


def test_sotopia_export_carries_the_prolific_id_on_every_row(reg, importer_for):
    project, tasks = _tasks(reg, importer_for, "sotopia", 1)
    li = project.interface
    result = [region(li, slot.control, 0) for slot in project.slots()]
    tasks[0]["annotations"] = [{"id": 1, "completed_by": 7, "result": result},
                               {"id": 2, "completed_by": 8, "result": result}]
    frame = annotation_frame(tasks, project, {7: f"{PID}@email.prolific.com", 8: "lab-member@example.com"})
    assert len(frame) == 2 * 14
    assert set(frame.loc[frame["annotation_id"] == 1, "prolific_id"]) == {PID}
    assert frame.loc[frame["annotation_id"] == 2, "prolific_id"].isna().all()


def test_values_accepted_from_a_prediction_are_flagged(reg, importer_for):
    """With Label Studio's region origin, and without it (an older export): equal to the parent prediction."""
    project, tasks = _tasks(reg, importer_for, "dialogue", 1)
    li = project.interface
    predicted = [region(li, "appropriateness", 4), region(li, "information_content", 2), region(li, "human_likeness", 5)]
    tasks[0]["predictions"] = [{"id": 50, "result": predicted}]
    with_origin = [{**r, "origin": o} for r, o in zip(
        [region(li, "appropriateness", 4), region(li, "information_content", 3), region(li, "human_likeness", 5)],
        ["prediction", "prediction-changed", "manual"])]
    without_origin = [region(li, "appropriateness", 4), region(li, "information_content", 3), region(li, "human_likeness", 5)]
    tasks[0]["annotations"] = [
        {"id": 1, "completed_by": 1, "result": with_origin, "parent_prediction": 50},
        {"id": 2, "completed_by": 2, "result": without_origin, "parent_prediction": 50},
        {"id": 3, "completed_by": 3, "result": without_origin, "parent_prediction": None},
    ]
    frame = annotation_frame(tasks, project)
    flags = frame.set_index(["annotation_id", "criterion"])["prefilled_unchanged"]
    assert flags[1].to_dict() == {"appropriateness": True, "information_content": False, "human_likeness": False}
    assert flags[2].to_dict() == {"appropriateness": True, "information_content": False, "human_likeness": True}
    assert not flags[3].any()
    assert frame.groupby("annotation_id")["from_prediction"].first().to_dict() == {1: True, 2: True, 3: False}

    with pytest.raises(EvalstudioError, match="3 value\\(s\\) in 2 annotation\\(s\\) were accepted unchanged"):
        analysis.exclusions(frame)
    kept, notes = analysis.exclusions(frame, exclude_prefilled=True)
    assert len(kept) == len(frame) - 3 and not kept["prefilled_unchanged"].any()
    assert notes == ["Left out: 3 value(s) in 2 annotation(s) accepted unchanged from a model prediction (prefill opt-in)."]


def test_bad_instances_are_left_out_by_default_with_the_count(reg, importer_for):
    project, tasks = _tasks(reg, importer_for, "cmv_tom", 3)
    li = project.interface
    answers = [region(li, slot.control, "Yes") for slot in project.slots()]
    for task in tasks:
        task["annotations"] = [{"id": 10 * task["id"] + k, "completed_by": k, "result": list(answers)} for k in (1, 2)]
    tasks[1]["annotations"][0]["result"].append(region(li, "bad_instance", "Bad instance"))
    frame = annotation_frame(tasks, project)
    kept, notes = analysis.exclusions(frame)
    assert set(kept["task_id"]) == {tasks[0]["id"], tasks[2]["id"]}
    assert notes == ["Left out: 1 item(s) marked “Bad instance” by an annotator (keep them with --keep-bad-instances)."]
    everything, notes = analysis.exclusions(frame, keep_bad_instances=True)
    assert len(everything) == len(frame) and notes == []


def test_cmv_value_shift_matches_a_hand_computation():
    records = [json.loads(line) for line in (EXAMPLES / "cmv" / "tom_items.jsonl").read_text().splitlines()]
    tasks = [{"task_id": i, "tom": r["tom"]} for i, r in enumerate(records)]
    human = pd.DataFrame({"task_id": [0, 0, 1], "criterion": ["emotions"] * 3, "value": ["Yes", "No", "Yes"],
                          "cancelled": [False] * 3})
    table = analysis.cmv_value_shift(tasks, human).set_index("category")
    for category in analysis.TOM_CATEGORIES:
        overlaps, added, dropped = [], [], []
        for r in records:
            post = {v.lower() for v in r["tom"]["post"][category]["values"]}
            comment = {v.lower() for v in r["tom"]["comment"][category]["values"]}
            overlaps.append(len(post & comment) / len(post | comment) if post | comment else 1.0)
            added.append(len(comment - post))
            dropped.append(len(post - comment))
        row = table.loc[category]
        assert row["items"] == len(records)
        assert row["jaccard_overlap"] == pytest.approx(np.mean(overlaps))
        assert (row["values_added"], row["values_dropped"]) == pytest.approx((np.mean(added), np.mean(dropped)))
    assert table.loc["emotions", "human_yes_share"] == pytest.approx(2 / 3)
    assert np.isnan(table.loc["beliefs", "human_yes_share"])


def test_circa_study_joins_both_parts_for_the_analysis(reg):
    study = reg.study("circa")
    assert [p.name for p in reg.parts("circa")] == ["circa_part1", "circa_part2_list1", "circa_part2_list2"]
    assert set(study.criteria) == {"interpretation", "explanation_quality"} and study.min_control_accuracy == 0.5
