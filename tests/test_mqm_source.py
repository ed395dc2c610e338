"""MQM errors marked in the SOURCE (an omission: content of the source missing from the translation; a Source
error), as Freitag et al.'s published files mark them (the TED en-de file's 14 Accuracy/Omission rows have their
<v>...</v> in the source): the shipped mqm protocol's source_errors spans with their source_category, checked by
the gateway against the source text, counted in the segment's five errors, weighed as any error of their severity
(the same score as the published file's row), and exported with their control and offsets into the source."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evalstudio.exporters.analyses.span_analysis import project_span_study
from evalstudio.exporters.tables.tidy import annotation_frame, span_frame
from evalstudio.gateway.checks import Refused, check_result, controls_of
from evalstudio.protocols import registry
from evalstudio.readers.spans import read_span_study
from evalstudio.readers.spec import Spec

from .test_browser import browser, session  # noqa: F401 (fixtures: the browser test below)

ROOT = Path(__file__).resolve().parents[1]
MQM = registry.load(ROOT / "projects.yaml").get("mqm")
SOURCE = "And they can repair themselves for longevity."  # the TED file's line with an omission marked in the source
TARGET = "Und sie können sich für die Langlebigkeit reparieren."
DATA = {"source_text": SOURCE, "target": TARGET, "context": ""}


def span(ident, text, word, label="Major", category="Accuracy/Omission", on="source", claimed=None, asked=None):
    """A span of `word` in `text` (the source or the target) with its per-region category, as the editor sends it."""
    start = text.index(word)
    where = {"start": start, "end": start + len(word), "text": word if claimed is None else claimed}
    labels, question = ("source_errors", "source_category") if on == "source" else ("errors", "category")
    return [{"id": ident, "from_name": labels, "to_name": on, "type": "labels", "value": {**where, "labels": [label]}},
            {"id": ident, "from_name": asked or question, "to_name": on, "type": "choices",
             "value": {**where, "choices": [category]}}]


def target_errors(count):
    """`count` Minor errors on the first words of the translation."""
    return [r for i, word in enumerate(TARGET.split()[:count])
            for r in span(f"t{i}", TARGET, word, "Minor", "Fluency/Grammar", on="target")]


CHECKS = [  # (why, the answer, refused with)
    ("an omission marked in the source", span("s1", SOURCE, "themselves"), None),
    ("a Source error, Minor", span("s1", SOURCE, "longevity", "Minor", "Source error"), None),
    ("with four errors in the translation: five in all", target_errors(4) + span("s1", SOURCE, "themselves"), None),
    ("its text is the translation's, not the source's",
     span("s1", SOURCE, "themselves", claimed=TARGET[20:30]), "source_errors: the span 20..30 covers other text"),
    ("offsets past the source's end", [dict(r, value={**r["value"], "end": len(SOURCE) + 5})
                                       for r in span("s1", SOURCE, "longevity")], "outside the text"),
    ("a category of the translation's list", span("s1", SOURCE, "themselves", category="Style/Awkward"),
     "source_category: not one of the choices"),
    ("the translation's category question asked of a source span",
     [r if r["type"] == "labels" else dict(r, to_name="target")
      for r in span("s1", SOURCE, "themselves", asked="category")], "category: answers a span of another text"),
    ("no category", span("s1", SOURCE, "themselves")[:1], "please answer source_category for every marked span"),
    ("six errors, one of them in the source", target_errors(5) + span("s1", SOURCE, "themselves"),
     "errors\\+source_errors: mark at most 5 spans .*marks 6: remove 1"),
]


@pytest.mark.parametrize("why, result, refused", CHECKS, ids=[c[0] for c in CHECKS])
def test_the_gateway_checks_a_source_side_span_against_the_source(why, result, refused):
    controls = controls_of(MQM)
    if refused:
        with pytest.raises(Refused, match=refused):
            check_result(result, controls, complete=True, data=DATA)
        return
    clean = check_result(result, controls, complete=True, data=DATA)
    marked = {r["id"]: r for r in clean if r["type"] == "labels"}
    assert marked["s1"]["to_name"] == "source" and SOURCE[marked["s1"]["value"]["start"]:marked["s1"]["value"]["end"]] \
        == marked["s1"]["value"]["text"]
    assert len(marked) == sum(r["type"] == "labels" for r in result)


TSV = ("system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\tcomment\n"
       + f"A\td\t1\t1\tr1\t{SOURCE.replace('themselves', '<v>themselves</v>')}\t{TARGET}\tAccuracy/Omission\tMajor\t\n"
       + f"A\td\t1\t1\tr1\t{SOURCE}\t{TARGET.replace('Langlebigkeit', '<v>Langlebigkeit</v>')}\tFluency/Grammar\tMinor\t\n"
       + f"B\td\t1\t1\tr1\t{SOURCE.replace('longevity', '<v>longevity</v>')}\t{TARGET}\tAccuracy/Omission\tMinor\t\n")
ANSWERS = {"A": span("s1", SOURCE, "themselves") + span("t1", TARGET, "Langlebigkeit", "Minor", "Fluency/Grammar",
                                                          on="target"),
           "B": span("s2", SOURCE, "longevity", "Minor")}


def exported_tasks():
    """The TSV's answers as a Label Studio export of the mqm protocol holds them (one task per system)."""
    return [{"id": 10 + i, "data": {**DATA, "item_id": "1", "system": system},
             "annotations": [{"id": 1 + i, "completed_by": {"id": 1, "email": "r1"}, "result": result,
                              "was_cancelled": False}]} for i, (system, result) in enumerate(ANSWERS.items())]


def test_a_source_side_span_is_exported_scored_and_read_as_the_published_file_reads_it(tmp_path):
    """The export's spans table says which text (control source_errors) with offsets into the source and its
    source_category; the study made of the export scores a source-side Major omission 5 as any Major error, the same
    segment scores and the same spans (control `source`, offsets into the source) as the published file's rows."""
    tasks = exported_tasks()
    spans = span_frame(tasks, MQM, {})
    source_side = spans[spans["control"] == "source_errors"]
    assert source_side[["task_id", "start", "end", "text", "labels", "source_category"]].values.tolist() == [
        [10, 20, 30, "themselves", "Major", "Accuracy/Omission"], [11, 35, 44, "longevity", "Minor", "Accuracy/Omission"]]
    assert source_side["category"].isna().all()
    _, _, ours = project_span_study("mqm", [MQM], [tasks], [annotation_frame(tasks, MQM, {})], {})
    path = tmp_path / "omission.tsv"
    path.write_text(TSV, encoding="utf-8")
    theirs = read_span_study(path, Spec(layout="spans"))
    key = ["system", "item", "annotator"]
    assert ours.segments.set_index(key)["score"].to_dict() == theirs.segments.set_index(key)["score"].to_dict() == {
        ("A", "1", "r1"): 6.0, ("B", "1", "r1"): 1.0}  # Major 5 + Minor 1; Minor 1 (the README's weights)
    columns = ["system", "control", "start", "end", "text", "labels", "category"]
    assert (ours.spans[columns].sort_values(columns).values.tolist()
            == theirs.spans[columns].sort_values(columns).values.tolist())


@pytest.mark.server
@pytest.mark.usefixtures("database_independent")
def test_a_real_gateway_takes_an_omission_marked_in_the_source(label_studio, client, tmp_path):
    """The shipped mqm protocol behind `evalstudio gateway` in front of Label Studio: an answer whose source span does
    not cover the source's text is refused, as is a sixth error in the source; four errors in the translation and an
    omission in the source are taken, and Label Studio stores the source span (source_errors on `source`, offsets
    into the source) with its source_category under the same region id, as the export then reads it."""
    from .conftest import only_on_the_first_database
    from .test_span_limits import one_mqm_task_behind_a_gateway

    only_on_the_first_database(label_studio)
    record = {"id": "talk.9-1", "system": "A", "doc": "talk.9", "source": SOURCE, "target": TARGET, "context": ""}
    with one_mqm_task_behind_a_gateway(label_studio, client, tmp_path, "MQM source errors", record, "SRC1") as (
            project, project_id, web, task):
        assert task["data"]["source_text"] == SOURCE

        def submit(result):
            return web.post(f"/api/submit/{task['ref']}", json={"result": result})

        wrong = submit(span("s1", SOURCE, "themselves", claimed="sich"))
        assert wrong.status_code == 400 and "source_errors: the span 20..30 covers other text" in wrong.json()["error"]
        six = submit(target_errors(5) + span("s1", SOURCE, "themselves"))
        assert six.status_code == 400 and "mark at most 5 spans" in six.json()["error"], six.text
        taken = submit(target_errors(4) + span("s1", SOURCE, "themselves"))
        assert taken.json() == {"ok": True}, taken.text
    [stored] = [t for page in client.full_task_pages(project_id) for t in page]
    [annotation] = stored["annotations"]
    source = [r for r in annotation["result"] if r["to_name"] == "source"]
    assert sorted((r["from_name"], r["id"], r["value"]["start"], r["value"]["end"], r["value"]["text"]) for r in source) \
        == [("source_category", "s1", 20, 30, "themselves"), ("source_errors", "s1", 20, 30, "themselves")]
    spans = span_frame([stored], project, {})
    assert spans.groupby("control").size().to_dict() == {"errors": 4, "source_errors": 1}
    row = spans[spans["control"] == "source_errors"].iloc[0]
    assert (row["start"], row["end"], row["text"], row["labels"], row["source_category"]) == \
        (20, 30, "themselves", "Major", "Accuracy/Omission")


JUDGED = [  # (why, the judge's answer, (control, start, end, category) of each span, or the reason it is refused)
    ("an omission quoted from the source, asked in the source's question",
     {"source_errors": [{"text": "themselves", "label": "Major", "source_category": "Accuracy/Omission"}]},
     [("source_errors", 20, 30, "Accuracy/Omission")]),
    ("one error in each text", {"errors": [{"text": "Langlebigkeit", "label": "Minor", "category": "Style/Awkward"}],
                                "source_errors": [{"text": "longevity", "label": "Minor",
                                                   "source_category": "Source error"}]},
     [("errors", 28, 41, "Style/Awkward"), ("source_errors", 35, 44, "Source error")]),
    ("words of the source quoted as an error of the translation: refused with the reason, never moved or dropped",
     {"errors": [{"text": "themselves", "label": "Major", "category": "Accuracy/Omission"}]},
     "errors: 'themselves' is not in the text"),
    ("six errors, one of them in the source", {
        "errors": [{"text": w, "label": "Minor", "category": "Fluency/Grammar"} for w in TARGET.split()[:5]],
        "source_errors": [{"text": "themselves", "label": "Major", "source_category": "Accuracy/Omission"}]},
     "mark at most 5 spans"),
]


@pytest.mark.parametrize("why, answer, expected", JUDGED, ids=[j[0] for j in JUDGED])
def test_the_judge_marks_the_source_in_the_source_question(why, answer, expected):
    """The judge gets the source's span question as annotators get the source's labels: a quote found in the source
    is located there; a source quote given as a translation error is refused with its reason (asked again, then
    missing), as any quote not in its text."""
    from evalstudio.judge.instrument import Instrument

    judge = Instrument(MQM)
    if isinstance(expected, str):
        with pytest.raises(Refused, match=expected):
            judge.check(json.dumps({**answer, "non_translation": []}), judge.shown(DATA, (0,)))
        return
    got = judge.check(json.dumps({**answer, "non_translation": []}), judge.shown(DATA, (0,)))
    assert sorted((name, s["start"], s["end"], s.get("category") or s.get("source_category"))
                  for name in ("errors", "source_errors") for s in got.get(name, [])) == expected


@pytest.mark.parametrize("target, source, over", [(4, 1, False), (5, 1, True), (5, 0, False)])
def test_an_answer_made_in_label_studio_over_five_with_the_source_is_flagged(target, source, over):
    """Label Studio's editor cannot cap spans: an answer with five errors in the translation and one in the source is
    kept whole, every span of both texts flagged over_max, and `status` names its annotator."""
    from evalstudio.crowd import study

    result = target_errors(target) + (span("s1", SOURCE, "themselves") if source else [])
    task = {"id": 10, "data": {**DATA, "item_id": "1", "system": "A"},
            "annotations": [{"id": 1, "completed_by": {"id": 1, "email": "r1"}, "result": result, "was_cancelled": False}]}
    spans = span_frame([task], MQM, {})
    assert len(spans) == target + source and spans["over_max"].tolist() == [over] * len(spans)
    warnings = study.span_limit_warnings(annotation_frame([task], MQM, {}), [MQM])
    assert ("more than 5 spans with errors+source_errors" in warnings.get("r1", "")) == over, warnings


@pytest.mark.server
@pytest.mark.usefixtures("database_independent")
def test_label_studio_s_editor_marks_an_omission_in_the_source(session, label_studio, client, tmp_path):  # noqa: F811
    """In Label Studio's own view (a real browser) of the shipped mqm config: text selected in the source with the
    source's Major becomes a span, its category is asked with the source's two choices, the answer is submitted (the
    translation's required category does not ask for it), and Label Studio stores it as source_errors on `source`
    at Python's offsets into the source, with its source_category under the same region id."""
    from evalstudio.protocols.mapping import importer_for
    from evalstudio.tasks.importing import import_files

    from .test_browser import open_task
    from .test_cli import _projects_file
    from .test_spans_browser import mark

    page, dialogs = session
    projects_file = _projects_file(tmp_path, lambda raw: raw["projects"]["mqm"].update(title="MQM source in LS"))
    project = registry.load(projects_file).get("mqm")
    items = tmp_path / "one.jsonl"
    record = {"id": "talk.9-2", "system": "A", "doc": "talk.9", "source": SOURCE, "target": TARGET, "context": ""}
    items.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    project_id = import_files(project, importer_for(project), [items], client).project_id
    [task] = [t for p in client.full_task_pages(project_id) for t in p]
    open_task(page, label_studio.url, project_id, task["id"])
    mark(page, "themselves", "Major", "Accuracy/Omission")  # the source's labels come first on the page
    page.locator("button", has_text="Submit").first.click()
    page.wait_for_function("() => !document.querySelector('.lsf-tree__node_type_richtextregion')", timeout=60_000)
    assert not dialogs, dialogs
    [stored] = client.export_tasks(project_id)
    [annotation] = stored["annotations"]
    assert sorted((r["from_name"], r["to_name"], r["value"]["start"], r["value"]["end"]) for r in annotation["result"]
                  if r["type"] in ("labels", "choices")) == [("source_category", "source", 20, 30),
                                                             ("source_errors", "source", 20, 30)]
    assert len({r["id"] for r in annotation["result"] if r["type"] in ("labels", "choices")}) == 1
    row = span_frame([stored], project, {}).iloc[0]
    assert (row["control"], row["start"], row["end"], row["text"], row["labels"], row["source_category"]) == \
        ("source_errors", 20, 30, "themselves", "Major", "Accuracy/Omission")
