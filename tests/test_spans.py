"""Error spans as data (issue 67): the spans table of the tidy export, validate's refusal of controls that no table
holds, and the gateway's check of a participant's spans, on the span study of tests/data/spans (docs/own-protocol.md's
example with per-region answers). The result shapes are those Label Studio's editor stored in
tests/test_spans_browser.py (code-point offsets; `text` with line breaks as backslash-n and spaces collapsed)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstudio.base.errors import RegistryError
from evalstudio.exporters.tables.tidy import annotation_frame, span_frame
from evalstudio.gateway.checks import MAX_SPANS, Refused, check_result, controls_of
from evalstudio.protocols import registry

SPANS = Path(__file__).parent / "data" / "spans"
TASKS = [json.loads(line) for line in (SPANS / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def project():
    return registry.load(SPANS / "projects.yaml").get("mt_spans")


def editor_text(text: str) -> str:
    """A span's text as Label Studio's editor stores it (seen in tests/test_spans_browser.py): each line break as
    backslash-n, each run of spaces or tabs as one space."""
    return re.sub(r"[ \t]+", " ", re.sub(r"[\r\n]", r"\\n", text))


def span(ident: str, shown: str, piece: str, label: str = "Minor") -> list[dict]:
    """A labels region and its per-region category, as the editor serialises them."""
    start = shown.index(piece)
    where = {"start": start, "end": start + len(piece), "text": editor_text(piece)}
    return [{"id": ident, "from_name": "errors", "to_name": "translation", "type": "labels",
             "value": {**where, "labels": [label]}, "origin": "manual"},
            {"id": ident, "from_name": "category", "to_name": "translation", "type": "choices",
             "value": {**where, "choices": ["Accuracy"]}, "origin": "manual"}]


SCORE = {"from_name": "score", "to_name": "translation", "type": "number", "value": {"number": 70}}
PIECES = {"de": "über die Brücke", "zh": "北京的会议", "emoji": "an der 🇩🇪 Flagge", "combining": "nai\u0308ve re\u0301sume\u0301",
          "lines": "zweite  Zeile\n\ndritte\tZeile <b>x</b>"}


def export_task(number: int, record: dict, result: list[dict]) -> dict:
    return {"id": number, "data": {"translation": record["mt"], "source_text": record["src"], "item_id": record["id"],
                                   "system": record["sys"]},
            "annotations": [{"id": 100 + number, "completed_by": 7, "result": result, "was_cancelled": False}]}


@pytest.mark.parametrize("record", TASKS, ids=[t["id"] for t in TASKS])
def test_a_span_is_a_row_with_its_text_and_answers(project, record):
    piece = PIECES[record["id"]]
    comment = {"id": "r1", "from_name": "comment", "to_name": "translation", "type": "textarea",
               "value": {"start": 0, "end": 1, "text": ["=HYPERLINK(1)"]}}
    task = export_task(1, record, span("r1", record["mt"], piece, "Major") + [comment, SCORE])
    spans = span_frame([task], project, {7: "ann@x"})
    assert len(spans) == 1
    row = spans.iloc[0]
    assert row["text"] == piece == record["mt"][row["start"]:row["end"]]
    assert (row["control"], row["labels"], row["category"], row["comment"]) == ("errors", "Major", "Accuracy", "=HYPERLINK(1)")
    assert (row["annotator"], row["item_id"], row["system"], row["region_id"]) == ("ann@x", record["id"], record["sys"], "r1")
    assert row["ls_text"] == editor_text(piece)
    frame = annotation_frame([task], project, {7: "ann@x"})
    assert list(frame["errors"]) == [1] and "category" not in frame and list(frame["value"]) == [70]


def test_a_span_whose_text_changed_keeps_its_offsets_but_claims_no_text(project):
    record = {**TASKS[0], "mt": "Ganz anderer Text, der nicht übersetzt wurde."}
    task = export_task(1, record, span("r1", TASKS[0]["mt"], PIECES["de"]))
    row = span_frame([task], project).iloc[0]
    assert row["text"] is None and row["ls_text"] == PIECES["de"] and row["start"] == TASKS[0]["mt"].index(PIECES["de"])


def test_a_per_region_answer_without_its_span_is_kept(project):
    answer = span("r9", TASKS[0]["mt"], PIECES["de"])[1]
    row = span_frame([export_task(1, TASKS[0], [answer])], project).iloc[0]
    assert row["control"] is None and row["category"] == "Accuracy" and row["text"] == PIECES["de"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_writes_the_spans_beside_the_annotations_and_reads_back(project, tmp_path, fmt):
    """`evalstudio export --from-export` (the CLI, as a user runs it) writes annotations.FORMAT and
    annotations.spans.FORMAT; read back, the spans are the ones annotated."""
    import pandas as pd
    from typer.testing import CliRunner

    from evalstudio.cli import app

    tasks = [export_task(i, r, span("r1", r["mt"], PIECES[r["id"]]) + [SCORE]) for i, r in enumerate(TASKS, 1)]
    tasks[1]["annotations"][0]["parent_prediction"] = 9  # (started from a prediction: from_prediction, per span too)
    (tmp_path / "export.json").write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / f"annotations.{fmt}"
    result = CliRunner().invoke(app, ["export", "mt_spans", "--from-export", str(tmp_path / "export.json"), "-o", str(out),
                                      "--format", fmt, "--projects", str(SPANS / "projects.yaml")])
    assert result.exit_code == 0, result.output
    assert "5 spans written" in result.output
    path = tmp_path / f"annotations.spans.{fmt}"
    back = (pd.read_csv(path, keep_default_na=False) if fmt == "csv" else pd.read_json(path, lines=True) if fmt == "jsonl"
            else pd.read_parquet(path))
    by_item = dict(zip(back["item_id"], zip(back["start"], back["end"], back["text"])))
    for record in TASKS:
        start, end, text = by_item[record["id"]]
        assert record["mt"][int(start):int(end)] == text == PIECES[record["id"]]
    rated = (pd.read_csv(out) if fmt == "csv" else pd.read_json(out, lines=True) if fmt == "jsonl"
             else pd.read_parquet(out))
    assert dict(zip(back["annotation_id"], back["from_prediction"].astype(str))) == dict(
        zip(rated["annotation_id"], rated["from_prediction"].astype(str))) == {
        101: "False", 102: "True", 103: "False", 104: "False", 105: "False"}


CONDITIONS = [  # an answer as read -> from_prediction, in the tidy table and the spans table alike
    ("typed by hand, no parent", {}, "manual", False),
    ("started from a prediction (its parent)", {"parent_prediction": 3}, "manual", True),
    ("its parent deleted in Label Studio, its spans kept as predicted", {}, "prediction", True),
    ("its parent deleted, a span changed", {}, "prediction-changed", True),
    ("the ledger: shown the prediction, which Label Studio no longer has", {"ledger": True}, "manual", True),
    ("the ledger: shown without it (the ledger decides)", {"ledger": False, "parent_prediction": 3}, "prediction",
     False),
]


@pytest.mark.parametrize("why, extra, origin, expected", CONDITIONS, ids=[row[0] for row in CONDITIONS])
def test_the_spans_table_says_whether_each_answer_was_shown_the_prediction(project, why, extra, origin, expected):
    from evalstudio.crowd.reconcile import CONDITION

    task = export_task(1, TASKS[0], [{**r, "origin": origin} for r in span("r1", TASKS[0]["mt"], PIECES["de"])]
                       + [SCORE])
    if "ledger" in extra:  # what a live read with the study's ledger puts in (operations/waiting.LedgerCheck)
        extra = {**{k: v for k, v in extra.items() if k != "ledger"}, CONDITION: extra["ledger"]}
    task["annotations"][0].update(extra)
    assert list(span_frame([task], project)["from_prediction"]) == [expected]
    assert list(annotation_frame([task], project)["from_prediction"]) == [expected]


def test_an_export_file_cannot_claim_the_ledgers_record(project, tmp_path):
    """The ledger's record of an answer's condition is put in by a live read only: the same key in an export file is
    dropped as it is read."""
    from evalstudio.crowd.reconcile import CONDITION
    from evalstudio.exporters.tables.tidy import read_export

    task = export_task(1, TASKS[0], span("r1", TASKS[0]["mt"], PIECES["de"]) + [SCORE])
    task["annotations"][0][CONDITION] = True
    (tmp_path / "export.json").write_text(json.dumps([task], ensure_ascii=False), encoding="utf-8")
    assert list(span_frame(read_export(tmp_path / "export.json"), project)["from_prediction"]) == [False]


BAD_CONFIGS = [
    ('<RectangleLabels name="box" toName="translation"><Label value="x"/></RectangleLabels>', "box",
     "cannot put the answers of a RectangleLabels in a table"),
    ('<Ranker name="rank" toName="translation"/>', "rank", "use one of Choices, Number, Rating, TextArea, Labels"),
    ('<Labels name="marks" toName="pic"><Label value="x"/></Labels><Image name="pic" value="$image"/>', "marks",
     "marks spans of one Text"),
]


@pytest.mark.parametrize("extra, name, message", BAD_CONFIGS, ids=[b[1] for b in BAD_CONFIGS])
def test_validate_refuses_a_control_no_table_holds(tmp_path, extra, name, message):
    shutil.copy(SPANS / "projects.yaml", tmp_path)
    config = (SPANS / "mt_spans.xml").read_text().replace("</View>", extra + "\n</View>")
    (tmp_path / "mt_spans.xml").write_text(config)
    (tmp_path / "projects.yaml").write_text((SPANS / "projects.yaml").read_text().replace(
        "[errors, category, comment]", f"[errors, category, comment, {name}]"))
    with pytest.raises(RegistryError) as e:
        registry.load(tmp_path / "projects.yaml").get("mt_spans").interface  # noqa: B018
        registry.load(tmp_path / "projects.yaml")
    line = config[:config.index(f'name="{name}"')].count("\n") + 1
    assert f"mt_spans.xml:{line}: control '{name}': " in str(e.value) and message in str(e.value)


# --- the gateway -------------------------------------------------------------------------------------------------

def shown(record: dict) -> dict:
    return {"translation": record["mt"], "source_text": record["src"]}


@pytest.mark.parametrize("record", TASKS, ids=[t["id"] for t in TASKS])
def test_the_gateway_takes_a_span_answer_and_stores_the_shown_text(project, record):
    piece = PIECES[record["id"]]
    clean = check_result(span("r1", record["mt"], piece) + [SCORE], controls_of(project), complete=True,
                         data=shown(record))
    spans = [r for r in clean if r["type"] == "labels"]
    assert [r["value"]["text"] for r in spans] == [piece]
    assert {r["id"] for r in clean if r["from_name"] == "category"} == {"r1"}


def _break(result: list[dict], key: str, value) -> list[dict]:
    out = json.loads(json.dumps(result))
    out[0]["value"][key] = value
    return out


GOOD = span("r1", TASKS[0]["mt"], PIECES["de"]) + [SCORE]
HOSTILE = [
    ("negative offset", _break(GOOD, "start", -1), "outside the text"),
    ("overlong offset", _break(GOOD, "end", 10_000), "outside the text"),
    ("reversed", _break(_break(GOOD, "start", 20), "end", 10), "empty or reversed"),
    ("other text", _break(GOOD, "text", "über die Brücke nach"), "covers other text"),
    ("offset as text", _break(GOOD, "start", "17"), "not a whole number"),
    ("offset true", _break(GOOD, "start", True), "not a whole number"),
    ("unknown label", _break(GOOD, "labels", ["Critical"]), "not one of Minor, Major"),
    ("two labels", _break(GOOD, "labels", ["Minor", "Major"]), "a span has one label; this one has 2$"),
    ("one label twice", _break(GOOD, "labels", ["Minor", "Minor"]), "a span has one label; this one has 2$"),
    ("a known and an unknown label", _break(GOOD, "labels", ["Minor", "Critical"]), "not one of Minor, Major"),
    ("labels as text", _break(GOOD, "labels", "Minor"), "not one of Minor, Major"),
    ("10,000 regions", span("r1", TASKS[0]["mt"], PIECES["de"]) * 5_000, "not a list of results"),
    ("too many spans", [r for i in range(MAX_SPANS + 1) for r in span(f"r{i}", TASKS[0]["mt"], "die")[:1]],
     "more than"),
    ("Major thrice", [r for i in range(3) for r in span(f"r{i}", TASKS[0]["mt"], "die", "Major")] + [SCORE],
     "at most 2 spans"),
    ("no category", span("r1", TASKS[0]["mt"], PIECES["de"])[:1] + [SCORE], "answer category for every marked span"),
    ("category of no span", span("r1", TASKS[0]["mt"], PIECES["de"])[1:] + [SCORE], "a span that is not in the answer"),
    ("one id twice", span("r1", TASKS[0]["mt"], "die") + span("r1", TASKS[0]["mt"], "Köln") + [SCORE], "id of its own"),
    ("id not a string", [{**GOOD[0], "id": 5}] + GOOD[1:], "id of its own"),
    ("spans of the source", [{**GOOD[0], "to_name": "source"}] + GOOD[1:], "does not match the control"),
]


@pytest.mark.parametrize("name, result, message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_the_gateway_refuses_a_hostile_span_with_a_reason(project, name, result, message):
    with pytest.raises(Refused, match=message):
        check_result(result, controls_of(project), complete=True, data=shown(TASKS[0]))


offsets = st.one_of(st.integers(-5, 60), st.text(max_size=3), st.none(), st.booleans(), st.floats())


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "id": st.one_of(st.sampled_from(["a", "b", "c"]), st.integers(), st.text(max_size=70)),
    "from_name": st.sampled_from(["errors", "category", "comment", "score", "nope"]),
    "to_name": st.sampled_from(["translation", "source"]),
    "type": st.sampled_from(["labels", "choices", "textarea", "number"]),
    "value": st.fixed_dictionaries({"start": offsets, "end": offsets, "text": st.one_of(st.text(max_size=20), st.none()),
                                    "labels": st.lists(st.sampled_from(["Minor", "Major", "x"]), max_size=3),
                                    "choices": st.lists(st.sampled_from(["Accuracy", "Fluency", "x"]), max_size=2),
                                    "number": st.integers(-5, 200)})}), max_size=12))
def test_any_span_payload_is_refused_or_marks_the_shown_text(project, result):
    """Whatever a scripted participant sends, the gateway refuses it with a reason, or every span it keeps marks
    the shown text with a label of the config."""
    record = TASKS[0]
    try:
        clean = check_result(result, controls_of(project), complete=True, data=shown(record))
    except Refused as e:
        assert str(e)
        return
    for region in clean:
        if region["type"] == "labels":
            value = region["value"]
            assert 0 <= value["start"] < value["end"] <= len(record["mt"])
            assert value["text"] == record["mt"][value["start"]:value["end"]]
            assert value["labels"] in (["Minor"], ["Major"])


def test_report_writes_every_span(project, tmp_path):
    """`evalstudio report --from-export`: spans.csv beside annotations.csv, and a Spans section counting them."""
    import pandas as pd
    from typer.testing import CliRunner

    from evalstudio.cli import app

    tasks = [export_task(i, r, span("r1", r["mt"], PIECES[r["id"]], "Major") + [SCORE]) for i, r in enumerate(TASKS, 1)]
    tasks[1]["annotations"][0]["parent_prediction"] = 9
    (tmp_path / "export.json").write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf-8")
    result = CliRunner().invoke(app, ["report", "mt_spans", "--from-export", str(tmp_path / "export.json"), "-o",
                                      str(tmp_path / "report"), "--bootstrap", "0",
                                      "--projects", str(SPANS / "projects.yaml")])
    assert result.exit_code == 0, result.output
    spans = pd.read_csv(tmp_path / "report" / "spans.csv", keep_default_na=False)
    assert sorted(spans["text"]) == sorted(PIECES.values()) and set(spans["category"]) == {"Accuracy"}
    assert dict(zip(spans["task_id"], spans["from_prediction"])) == {1: False, 2: True, 3: False, 4: False, 5: False}
    assert list(pd.read_csv(tmp_path / "report" / "annotations.csv")["errors"]) == [1] * len(TASKS)
    assert "<h2>Spans</h2>" in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")


def test_publish_releases_the_counted_spans_under_pseudonyms(project):
    """The release's spans table: the counted answers' spans (a skipped annotation's and a surplus one's left out),
    annotators as the ratings' pseudonyms, the shown text's own slice; the dataset card names the spans config."""
    from evalstudio.exporters.publication import release

    def annotated(number, ident, who, cancelled=False):
        task = export_task(number, TASKS[0], span("r1", TASKS[0]["mt"], PIECES["de"]) + [SCORE])
        task["annotations"][0].update(id=ident, completed_by=who, was_cancelled=cancelled)
        return task

    tasks = [annotated(1, 11, 7), annotated(2, 12, 8, cancelled=True)]
    tasks[0]["annotations"] += annotated(1, 13, 9)["annotations"] + annotated(1, 14, 7)["annotations"]  # 14: a repeat
    spans = span_frame(tasks, project, {7: "a@x", 8: "b@x", 9: "c@x"})
    key = b"k" * 32
    released = release.spans_table(spans, key, counted_annotations=[11, 13])
    assert sorted(released["annotator"]) == sorted([release.pseudonym(key, "a@x"), release.pseudonym(key, "c@x")])
    assert list(released.columns) == release.SPAN_COLUMNS + ["category", "comment"]
    assert set(released["text"]) == {PIECES["de"]} and "a@x" not in released.to_csv()
    card = release.dataset_card("mt_spans", "t", released, {"items": 1, "systems": 1, "annotators": 2,
                                                            "spans": {"count": 2, "columns": list(released.columns)}},
                                "CC-BY-4.0", 0)
    assert "data/spans.parquet" in card and "`category` (the annotator's answer about this span" in card


@pytest.mark.parametrize("assisted", [set(), {102}], ids=["no answer prefilled", "one answer prefilled"])
def test_publish_keeps_whether_each_answer_was_shown_the_prediction(project, assisted):
    """A prefilled study's release says per answer, in the ratings and the spans alike, whether it was made with the
    prediction shown (the tidy tables' from_prediction), typed boolean in croissant.json; a study without prefilled
    answers has no such column (it would say false everywhere)."""
    from evalstudio.exporters.publication import release

    tasks = [export_task(i, r, span("r1", r["mt"], PIECES[r["id"]]) + [SCORE]) for i, r in enumerate(TASKS, 1)]
    for task in tasks:
        if task["annotations"][0]["id"] in assisted:
            task["annotations"][0]["parent_prediction"] = 9
    key, counted = b"k" * 32, [101, 102, 103, 104, 105]
    spans = release.spans_table(span_frame(tasks, project, {7: "a@x"}), key, counted)
    ratings = release.ratings_table(annotation_frame(tasks, project, {7: "a@x"}), key, [], project.criteria)
    if not assisted:
        assert "from_prediction" not in spans and "from_prediction" not in ratings
        return
    assert list(spans.columns[:6]) == release.SPAN_COLUMNS[:5] + ["from_prediction"]
    assert dict(zip(spans["task_id"], spans["from_prediction"])) == dict(zip(ratings["task_id"],
                                                                             ratings["from_prediction"]))
    assert sorted(spans.loc[spans["from_prediction"], "task_id"]) == [2]
    fields = release.record_set("spans", "", spans, "spans-csv", release.COLUMN_MEANING)["field"]
    fields = {f["name"]: f for f in fields}
    assert fields["from_prediction"]["dataType"] == "sc:Boolean"
    assert "prediction shown" in fields["from_prediction"]["description"]


def test_an_llm_judge_is_asked_spans_as_annotators_mark_them(project):
    """The judge's instrument asks for the spans of the text annotators mark (issue 68: judge/spans.py), with the
    per-region questions inside the span question, never as questions about the whole text."""
    from evalstudio.judge.instrument import Instrument

    instrument = Instrument(project)
    assert set(instrument.schema["properties"]) == {"errors", "score"}  # category and comment: per span
    span = instrument.schema["properties"]["errors"]["items"]["properties"]
    assert {"text", "label", "category", "comment"} <= set(span)
    page = "\n".join(m["content"] for m in instrument.prompt(TASKS[0] | {"translation": TASKS[0]["mt"]}).messages)
    assert '"category": exactly one of: "Accuracy"; "Fluency"' in page and '"comment": your text (optional)' in page


def test_croissant_lists_the_spans_table_with_its_columns_typed(project, tmp_path):
    """The release's croissant.json names data/spans.csv and .parquet with their SHA-256 and a `spans` record set
    whose fields are typed from the table (offsets integers, over_max boolean); mlcroissant reads every span back as
    released, as it reads the ratings."""
    import mlcroissant
    import pandas as pd

    from evalstudio.exporters.publication import release

    tasks = [export_task(i, r, span("r1", r["mt"], PIECES[r["id"]], "Major") + [SCORE]) for i, r in enumerate(TASKS, 1)]
    key = b"k" * 32
    spans = release.spans_table(span_frame(tasks, project, {7: "a@x"}), key, counted_annotations=[101, 102, 103, 104, 105])
    ratings = release.ratings_table(annotation_frame(tasks, project, {7: "a@x"}), key, [], project.criteria)
    data = tmp_path / "data_release"
    files = release.write_data(data, ratings, pd.DataFrame(columns=["row"]))
    metadata = release.croissant("mt_spans", "t", ratings, files, data, "CC-BY-4.0", spans,
                                 release.write_spans(data, spans))
    release.write_croissant(data / "croissant.json", metadata)
    listed = {f["contentUrl"]: f["sha256"] for f in metadata["distribution"]}
    assert listed["data/spans.csv"] == release.sha256_of(data / "data" / "spans.csv") and "data/spans.parquet" in listed
    [spans_set] = [r for r in metadata["recordSet"] if r["name"] == "spans"]
    types = {f["name"]: f["dataType"] for f in spans_set["field"]}
    assert list(types) == list(spans.columns)
    assert (types["start"], types["end"], types["over_max"], types["text"], types["category"]) == (
        "sc:Integer", "sc:Integer", "sc:Boolean", "sc:Text", "sc:Text")
    dataset = mlcroissant.Dataset(jsonld=str(data / "croissant.json"))
    read = [{k.split("/")[-1]: v for k, v in r.items()} for r in dataset.records(record_set="spans")]
    assert len(read) == len(spans) == len(TASKS)
    assert sorted((r["start"], r["end"], r["text"].decode()) for r in read) == sorted(
        zip(spans["start"], spans["end"], spans["text"]))
    assert [r["over_max"] for r in read] == [False] * len(TASKS)  # a boolean, as typed
    assert len(list(dataset.records(record_set="ratings"))) == len(ratings)
