"""`report` on studies in odd states: nothing annotated yet, every annotator gated out, annotations without a
rating, odd metadata. Each gives a report (with notes), never a crash. Built from the shipped examples."""

from __future__ import annotations

import pandas as pd
import pytest

from evalstudio import importers
from evalstudio.exporters.analyses.report import build_report
from evalstudio.exporters.tables.tidy import annotation_frame, model_frame
from evalstudio.tasks.scanning import iter_tasks, split_task
from evalstudio.values.results import region

from .conftest import example_files


def tasks_for(reg, name, base):
    project = reg.entry(name)
    files = example_files(name)
    return [{"id": base + i, **split_task(project, data), "annotations": []}
            for i, (_, data) in enumerate(iter_tasks(project, importers.get(project.importer), files))]


def annotate(task, li, annotator, control, value):
    result = [region(li, control, value)] if value is not None else []
    task["annotations"].append({"id": task["id"] * 10 + annotator, "completed_by": annotator, "result": result,
                                "was_cancelled": False})


def circa(reg, state):
    part1, part2 = tasks_for(reg, "circa_part1", 1000), tasks_for(reg, "circa_part2", 2000)
    li1, li2 = reg.entry("circa_part1").interface, reg.entry("circa_part2").interface
    if state in ("gated out", "no rating"):
        for task in part1[:6]:  # both annotators always wrong on the control questions
            wrong = "Other" if task["meta"]["gold_label"] != "Other" else "No"
            for annotator in (1, 2):
                annotate(task, li1, annotator, "interpretation_choice", wrong)
        for task in part2[:6]:
            for annotator in (1, 2):
                annotate(task, li2, annotator, "explanation_rating", None if state == "no rating" else 3)
    return [("circa_part1", part1), ("circa_part2", part2)]


def sotopia_odd_tag(reg, state):
    tasks = tasks_for(reg, "sotopia", 3000)
    tasks[0]["meta"]["system"] = {"tag": "an object, not a name"}
    return [("sotopia", tasks)]


CASES = [("circa", circa, "nothing annotated", {}), ("circa", circa, "gated out", {"min_control_accuracy": 0.5}),
         ("circa", circa, "no rating", {"min_control_accuracy": 0}), ("sotopia", sotopia_odd_tag, "odd tag", {})]


@pytest.mark.parametrize("study, build, state, options", CASES, ids=[c[2] for c in CASES])
def test_report_handles_a_study_in_any_state(reg, tmp_path, study, build, state, options):
    parts = build(reg, state)
    tasks = [t for _, ts in parts for t in ts]
    frames = [annotation_frame(ts, reg.entry(name), {}) for name, ts in parts]
    models = [model_frame(ts, reg.entry(name)) for name, ts in parts]
    page = build_report(reg.study(study), tasks, tmp_path, {}, n_boot=10, annotations=pd.concat(frames, ignore_index=True),
                        model=pd.concat(models, ignore_index=True), **options)
    html = page.read_text()
    assert "<h1>" in html and (tmp_path / "agreement.csv").is_file()
    if state == "gated out":
        assert "were left out: 1, 2" in html
