"""`evalstudio judge` on the span protocols (MQM, ESA; issue 68): the judge reads the annotators' instrument (their
guidelines, the label hints, the per-region questions), answers with quotes of the shown text, and evalstudio gives
each quote the offsets Label Studio stores; a quote that is not in the text is refused with its reason and, asked
again in vain, recorded as missing. The judge's spans are a spans table as the annotators' are, and Label Studio
predictions whose export gives the same spans."""

from __future__ import annotations

import csv
import json

import httpx
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstudio.gateway.checks import Refused
from evalstudio.judge.instrument import Instrument

from .conftest import ROOT
from .test_cli import run
from .judge_server import llm  # noqa: F401 (fixture)

TARGET = "Die Brücke führt über die Brücke nach Köln 🇩🇪, nai\u0308ve 北京的会议.\nZweite Zeile"  # (ï: i + combining)
MQM_DATA = {"target": TARGET, "source_text": "The bridge leads over the bridge to Cologne.", "context": "Vorher."}


@pytest.fixture(scope="module")
def mqm(reg):
    return Instrument(reg.get("mqm"))


@pytest.fixture(scope="module")
def esa(reg):
    return Instrument(reg.get("esa"))


def span(text, label="Major", category="Accuracy/Mistranslation", **more):
    return {"text": text, "label": label, "category": category, **more}


# one row per answer: the spans asked, and (start, end) of each as Label Studio would store them
LOCATED = [
    ("a word", [span("führt")], [(11, 16)]),
    ("the same words twice: two errors, in the order quoted", [span("Brücke"), span("Brücke", "Minor")],
     [(4, 10), (26, 32)]),
    ("the second occurrence asked for", [span("Brücke", occurrence=2)], [(26, 32)]),
    ("a flag of two code points", [span("Köln 🇩🇪")], [(38, 45)]),
    ("a combining accent kept as written", [span("nai\u0308ve")], [(47, 53)]),
    ("Chinese", [span("北京的会议")], [(54, 59)]),
    ("across a line break", [span(".\nZweite")], [(59, 67)]),
    ("no error", [], []),
]


@pytest.mark.parametrize("why, asked, where", LOCATED, ids=[row[0] for row in LOCATED])
def test_a_quote_becomes_the_offsets_label_studio_stores(mqm, why, asked, where):
    answer = mqm.check(json.dumps({"errors": asked}), mqm.shown(MQM_DATA, (0,)))
    marked = answer.get("errors", [])
    assert [(s["start"], s["end"]) for s in marked] == where
    for s in marked:
        assert TARGET[s["start"]:s["end"]] == s["text"]
        assert s["category"] in mqm.controls["category"].labels and s["label"] in ("Major", "Minor", "Neutral")


REFUSED = [
    ("words that are not in the text", {"errors": [span("Bridge")]}, "'Bridge' is not in the text"),
    ("words from the source, not the translation", {"errors": [span("The bridge")]}, "is not in the text"),
    ("an occurrence the text does not have", {"errors": [span("Brücke", occurrence=3)]}, "occurs 2 time(s), not 3"),
    ("an occurrence that is no whole number", {"errors": [span("Brücke", occurrence=True)]}, "not a whole number"),
    ("a label of no severity", {"errors": [span("führt", "Critical")]}, "not one of Major, Minor, Neutral"),
    ("a span without its category", {"errors": [{"text": "führt", "label": "Major"}]}, "category for every"),
    ("a category of no list", {"errors": [span("führt", category="Wrong")]}, "category"),
    ("a key of no span", {"errors": [span("führt", system="X")]}, "no part of a span"),
    ("an empty quote", {"errors": [span("")]}, "quotes no text"),
    ("spans that are no list", {"errors": "führt"}, "not a list of spans"),
    ("a span that is no object", {"errors": ["führt"]}, "not an object"),
    ("the per-region question on its own", {"category": "Other"}, "no question of the form"),
]


@pytest.mark.parametrize("why, answer, reason", REFUSED, ids=[row[0] for row in REFUSED])
def test_a_span_answer_that_does_not_fit_is_refused_with_its_reason(mqm, why, answer, reason):
    with pytest.raises(Refused, match=None) as refused:
        mqm.check(json.dumps(answer), mqm.shown(MQM_DATA, (0,)))
    assert reason in str(refused.value), str(refused.value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({"text": st.one_of(st.text(max_size=8), st.sampled_from(
    ["Brücke", "🇩🇪", "e", "\n", " ", "die", TARGET])), "label": st.sampled_from(["Major", "Minor", "Neutral", "x"]),
    "category": st.sampled_from(["Other", "Source error", ""])}, optional={"occurrence": st.integers(-1, 4)}),
    max_size=6))
def test_any_span_answer_is_refused_with_a_reason_or_marks_exactly_its_quotes(mqm, asked):
    try:
        answer = mqm.check(json.dumps({"errors": asked}), mqm.shown(MQM_DATA, (0,)))
    except Refused as e:
        assert str(e)
        return
    marked = answer.get("errors", [])
    assert len(marked) == len(asked)
    assert sorted(s["text"] for s in marked) == sorted(s["text"] for s in asked)
    assert all(TARGET[s["start"]:s["end"]] == s["text"] for s in marked)


def test_the_esa_judge_marks_missing_content_on_its_own_text_and_scores(esa):
    data = {"target": "Die Brücke.", "source_text": "The old bridge.", "missing": "[MISSING]"}
    prompt = "\n".join(m["content"] for m in esa.prompt(data).messages)
    assert "[missing] [MISSING]" in prompt and "[target] Die Brücke." in prompt  # the texts the questions name
    answer = esa.check(json.dumps({"errors": [{"text": "Brücke", "label": "Minor"}],
                                   "missing_errors": [{"text": "[MISSING]", "label": "Major"}], "score": 45}),
                       esa.shown(data, (0,)))
    assert answer == {"errors": [{"start": 4, "end": 10, "text": "Brücke", "label": "Minor"}],
                      "missing_errors": [{"start": 0, "end": 9, "text": "[MISSING]", "label": "Major"}], "score": 45}
    with pytest.raises(Refused, match="score"):  # the score is required, as for annotators
        esa.check(json.dumps({"errors": []}), esa.shown(data, (0,)))


def _read(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("protocol", ["mqm", "esa"])
def test_the_judge_run_gives_a_spans_table_of_the_shown_text(llm, tmp_path, protocol):  # noqa: F811
    """Against the OpenAI-compatible server process: every task answered, each span of spans.csv the piece of the
    task's text its offsets give, the prompt without the hidden system; a judge that misquotes is asked again, then
    recorded as missing with the reason, and no span of it is kept."""
    tasks = [json.loads(line) for line in
             (ROOT / "examples" / protocol / "ted_ende.jsonl").read_text(encoding="utf-8").splitlines()[:6]]
    source = tmp_path / "tasks.jsonl"
    source.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    env = {"OPENAI_API_KEY": "sk-test-secret-never-shown"}
    done = run("judge", protocol, str(source), "--model", "judge", "--base-url", llm.url, "-o", str(tmp_path / "out"),
               "--cache", str(tmp_path / "cache.sqlite3"), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    spans = _read(tmp_path / "out" / "spans.csv")
    by_id = {t["id"]: t for t in tasks}
    assert spans and {s["item_id"] for s in spans} <= set(by_id)
    for s in spans:
        field = {"errors": "target", "source_errors": "source", "missing_errors": "missing"}[s["control"]]
        text = by_id[s["item_id"]][field]
        assert text[int(s["start"]):int(s["end"])] == s["text"] and s["annotator"] == "judge"
    systems = {t["system"] for t in tasks}
    for body in llm.bodies():
        assert not any(system in m["content"] for m in body["messages"] for system in systems)
    summary = _read(tmp_path / "out" / "summary.csv")[0]
    assert (summary["answers"], summary["missing"]) == ("6", "0")

    done = run("judge", protocol, str(source), "--model", "judge+misquote", "--base-url", llm.url, "-o",
               str(tmp_path / "bad"), "--cache", str(tmp_path / "cache.sqlite3"), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = _read(tmp_path / "bad" / "summary.csv")[0]
    answered = json.loads((tmp_path / "bad" / "answers.jsonl").read_text().splitlines()[0])
    if protocol == "mqm" or summary["missing"] != "0":  # (ESA: a task the judge marks no span of is answered)
        assert "is not in the text" in answered["error"] or answered["answer"] is not None
        assert int(summary["missing"]) > 0 and "malformed answer" in summary["why_missing"]
    assert not [s for s in _read(tmp_path / "bad" / "spans.csv") if s["text"] == "WORDS-NOT-IN-THE-TEXT"]


def judged_esa_study(label_studio, client, llm, folder, entry, n: int, out):  # noqa: F811
    """The first `n` ESA example tasks imported into the project of `entry` and judged with --to-label-studio by the
    test server's judge (spans.csv in `out`): (project, project id, the commands' environment)."""
    from evalstudio.protocols import registry
    from evalstudio.protocols.mapping import importer_for
    from evalstudio.tasks.importing import import_files

    project = registry.load(entry).get("esa")
    source = folder / "tasks.jsonl"
    lines = (ROOT / "examples" / "esa" / "ted_ende.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    project_id = import_files(project, importer_for(project), [source], client).project_id
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(entry), "OPENAI_API_KEY": "sk-test"}
    done = run("judge", "esa", "--model", "judge", "--base-url", llm.url, "--to-label-studio", "-o", str(out),
               "--cache", str(folder / "cache.sqlite3"), env=env, cwd=folder)
    assert done.returncode == 0, done.stderr
    return project, project_id, env


@pytest.mark.server
def test_the_judges_spans_are_predictions_and_the_report_scores_them_against_the_annotators(  # noqa: F811
        label_studio, client, llm, tmp_path):
    """--to-label-studio on ESA: the judge's spans become a prediction of pre-marked regions (labels on the text,
    per task and judge); Label Studio's export of the prediction, read as a spans table, gives exactly the spans of
    the judge's spans.csv (the pre-marking ESA-AI shows annotators is what the judge said). Two annotators then
    answer (one marks the judge's spans, the other other spans); the report's LLM judges section gives the judge's
    character precision, recall and F1 against them, equal to counting sets of marked characters, and its line."""
    from evalstudio.exporters.tables.tidy import span_frame

    from .conftest import only_on_the_first_database

    only_on_the_first_database(label_studio)
    entry = tmp_path / "projects.yaml"
    text = (ROOT / "projects.yaml").read_text(encoding="utf-8")
    entry.write_text(text.replace('title: "ESA: mark error spans, then score the translation"\n'
                                  '    config: labeling_configs/esa.xml\n    annotators_per_task: 1',
                                  'title: "ESA judged"\n    config: labeling_configs/esa.xml\n'
                                  '    annotators_per_task: 2'), encoding="utf-8")
    for folder in ("labeling_configs", "examples"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    project, project_id, env = judged_esa_study(label_studio, client, llm, tmp_path, entry, 4, tmp_path / "out")
    exported = [t for page in client.full_task_pages(project_id) for t in page]
    as_annotations = [{**t, "annotations": [{"id": p["id"], "completed_by": "judge", "result": p["result"]}
                                            for p in t.get("predictions") or []]} for t in exported]
    from_label_studio = span_frame(as_annotations, project)
    judged = _read(tmp_path / "out" / "spans.csv")
    key = lambda rows: sorted((str(r["item_id"]), r["control"], int(r["start"]), int(r["end"]), r["labels"])  # noqa
                              for r in rows)
    assert key(from_label_studio.to_dict("records")) == key(judged) and judged
    exported = [t for t in exported if "attention_check" not in t["meta"]]  # (ESA's checks: not in the report)
    # two annotators: H1 marks what the judge marked (the first span relabelled), H2 the first three characters
    from evalstudio.crowd import participants

    folder = tmp_path / "participants"
    participants.add(client, ["H1", "H2"], folder)
    people = participants.load_accounts(folder)
    headers = {"Authorization": f"Token {label_studio.credentials().api_key}"}
    marks: dict[str, set] = {"H1": set(), "H2": set(), "judge": set()}  # (task, control, character, label)
    flip = {"Minor": "Major", "Major": "Minor"}
    for task in exported:
        data = task["data"]
        prediction = next(iter(task["predictions"]))["result"]
        spans_of = {"judge": [r for r in prediction if r["type"] == "labels"]}
        spans_of["H1"] = [{**r, "value": {**r["value"], "labels": [flip[r["value"]["labels"][0]]] if i == 0
                                          else r["value"]["labels"]}} for i, r in enumerate(spans_of["judge"])]
        spans_of["H2"] = [{"id": "h2", "from_name": "errors", "to_name": "target", "type": "labels",
                           "value": {"start": 0, "end": 3, "text": data["target"][:3], "labels": ["Major"]}}]
        for who, regions in spans_of.items():
            for r in regions:
                v = r["value"]
                marks[who] |= {(task["id"], r["from_name"], c, v["labels"][0]) for c in range(v["start"], v["end"])}
            if who == "judge":
                continue
            result = [{k: r[k] for k in ("id", "from_name", "to_name", "type", "value")} for r in regions] + [
                {"from_name": "score", "to_name": "target", "type": "number", "value": {"number": 50}}]
            stored = httpx.post(f"{label_studio.url}/api/tasks/{task['id']}/annotations", headers=headers,
                                json={"result": result, "completed_by": people[who].user_id})
            assert stored.status_code == 201, stored.text
    report = run("report", "esa", "-o", str(tmp_path / "report"), "--bootstrap", "0", env=env, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    table = pd.read_csv(tmp_path / "report" / "judges.csv")
    for control in ("errors", "missing_errors"):
        def chars(who, labelled):  # a character marked twice has the more severe label (Major), as counted
            severest = {}
            for t, c, i, label in marks[who]:
                if c == control and severest.get((t, c, i)) != "Major":
                    severest[(t, c, i)] = label
            return {key + ((label,) if labelled else ()) for key, label in severest.items()}

        for labelled, said in ((False, "any label"), (True, "same label")):
            judge = chars("judge", labelled)
            hits = sum(len(judge & chars(h, labelled)) for h in ("H1", "H2"))
            marked_humans = sum(len(chars(h, labelled)) for h in ("H1", "H2"))
            row = table[(table["criterion"] == f"{control} spans") & table["statistic"].str.contains(said)]
            if not judge and not marked_humans:
                assert row.empty or row["agreement"].isna().all()
                continue
            row = row.iloc[0]
            assert row["segments"] == 2 * len(exported)  # each annotator's tasks the judge judged too
            assert row["precision"] == pytest.approx(hits / (2 * len(judge)), nan_ok=True)
            assert row["recall"] == pytest.approx(hits / marked_humans)
            assert row["agreement"] == pytest.approx(2 * hits / (2 * len(judge) + marked_humans))
    said = " ".join(report.stdout.split())
    assert "judge: " in said and "errors spans: character F1 with the annotators (any label)" in said
