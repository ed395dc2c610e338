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


def _answer(li, task, kind):
    """One answer's result: a span of the translation, a rated criterion (MQM's Non-translation, ESA's score)."""
    target = task["data"]["target"]
    span = [{"id": f"s{task['id']}", "from_name": "errors", "to_name": "target", "type": "labels",
             "value": {"start": 0, "end": 3, "text": target[:3], "labels": ["Minor"]}}]
    rated = [region(li, "non_translation", ["Non-translation"]) if "non_translation" in {c.name for c in li.controls} else
             region(li, "score", 40)] if "rating" in kind else []
    return (span if "span" in kind else []) + rated


HEADLINES = [  # protocol, (annotator, what the answer holds) per task: the headline counts every submitted answer
    ("mqm", [(1, "span"), (1, "span"), (2, "span"), (2, "span+rating"), (1, "skipped"), (3, "nothing")]),
    ("esa", [(1, "span+rating"), (2, "rating"), (3, "skipped")]),
]


@pytest.mark.parametrize("protocol, answers", HEADLINES, ids=[h[0] for h in HEADLINES])
def test_the_headline_counts_every_submitted_annotation_spans_included(reg, tmp_path, protocol, answers):
    """index.html's "N tasks, A annotations by P annotators": an MQM answer of spans only (or none: no error found)
    is an annotation; a skipped one is not (the counts are those of the answers given, not of the rated criteria)."""
    from evalstudio.protocols.mapping import importer_for

    project = reg.get(protocol)
    li = project.interface
    tasks = [{"id": i, **split_task(project, data), "annotations": []}
             for i, (_, data) in enumerate(iter_tasks(project, importer_for(project), example_files(protocol)), 1)]
    for task, (who, kind) in zip(tasks, answers):
        task["annotations"].append({"id": task["id"] * 10, "completed_by": who, "result": _answer(li, task, kind),
                                    "was_cancelled": kind == "skipped"})
    page = build_report(project, tasks, tmp_path, {}, n_boot=10)
    given = [(who, kind) for who, kind in answers if kind != "skipped"]
    assert f"{len(tasks)} tasks, {len(given)} annotations by {len({w for w, _ in given})} annotators" in page.read_text()
