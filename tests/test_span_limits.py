"""MQM's "at most five errors per segment" enforced where the server decides (issue 67): projects.yaml's
`max_spans` (validated at its line), the gateway refusing an answer over it (a real gateway in front of a real Label
Studio, and Hypothesis on the check), and an answer made in Label Studio's own editor, which cannot cap spans,
kept whole and flagged by `status` and the exports."""

from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstudio.base.errors import RegistryError
from evalstudio.crowd import study
from evalstudio.exporters.tables.tidy import annotation_frame, span_frame
from evalstudio.gateway.checks import Refused, check_result, controls_of
from evalstudio.protocols import registry

from .test_spans import SCORE, SPANS, TASKS, export_task, shown

ROOT = Path(__file__).resolve().parents[1]
MQM = [json.loads(line) for line in (ROOT / "examples" / "mqm" / "ted_ende.jsonl").read_text(encoding="utf-8").splitlines()]


def capped(cap: int):
    """tests/data/spans' mt_spans with `max_spans: {errors: cap}`."""
    return registry.load(SPANS / "projects.yaml").get("mt_spans").model_copy(update={"max_spans": {"errors": cap}})


def marks_only(count: int, text: str) -> list[dict]:
    """`count` Minor spans of one character each (the first characters of `text`), each with its category."""
    out = []
    for i in range(count):
        where = {"start": i, "end": i + 1, "text": text[i]}
        out += [{"id": f"s{i}", "from_name": "errors", "to_name": "translation", "type": "labels",
                 "value": {**where, "labels": ["Minor"]}},
                {"id": f"s{i}", "from_name": "category", "to_name": "translation", "type": "choices",
                 "value": {**where, "choices": ["Accuracy"]}}]
    return out


@pytest.mark.parametrize("cap, marked, refused", [(5, 5, False), (5, 6, True), (1, 1, False), (1, 2, True),
                                                  (5, 0, False)])
def test_the_gateway_check_refuses_more_spans_than_max_spans(cap, marked, refused):
    record = TASKS[0]
    result = marks_only(marked, record["mt"]) + [SCORE]
    if refused:
        with pytest.raises(Refused, match=f"mark at most {cap} spans .*marks {marked}: remove {marked - cap}"):
            check_result(result, controls_of(capped(cap)), complete=True, data=shown(record))
    else:
        clean = check_result(result, controls_of(capped(cap)), complete=True, data=shown(record))
        assert sum(r["type"] == "labels" for r in clean) == marked


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.integers(1, 8), marked=st.integers(0, 12), other=st.integers(0, 3))
def test_any_number_of_spans_is_kept_whole_or_refused_over_the_cap(cap, marked, other):
    """Under or at the cap every span is kept; over it the answer is refused with the cap named, never cut to it.
    Per-region answers (one per span) and a segment answer do not count as spans."""
    record = TASKS[0]
    result = marks_only(marked, record["mt"]) + [SCORE]
    try:
        clean = check_result(result, controls_of(capped(cap)), complete=True, data=shown(record))
    except Refused as e:
        assert marked > cap and f"at most {cap} spans" in str(e)
        return
    assert marked <= cap and sum(r["type"] == "labels" for r in clean) == marked


def test_the_shipped_mqm_protocol_takes_five_errors():
    """Five errors per segment, those marked in the source counted with those in the translation."""
    assert registry.load(ROOT / "projects.yaml").get("mqm").max_spans == {"errors+source_errors": 5}
    controls = controls_of(registry.load(ROOT / "projects.yaml").get("mqm"))
    assert controls["errors"].max_spans == controls["source_errors"].max_spans == 5


BAD = [
    ("{category: 5}", "max_spans.category: 'category' is not a span control (Labels) of", "its span controls: errors"),
    ("{nope: 5}", "max_spans.nope: 'nope' is not a span control", "errors"),
    ("{errors+nope: 5}", "max_spans.errors+nope: 'nope' is not a span control", "its span controls: errors"),
    ("{errors: 0}", "max_spans.errors: Input should be greater than or equal to 1", ""),
    ("{errors: 101}", "max_spans.errors: Input should be less than or equal to 100", ""),
    ("{errors: five}", "max_spans.errors: Input should be a valid integer", ""),
]


@pytest.mark.parametrize("value, message, hint", BAD, ids=[b[0] for b in BAD])
def test_validate_names_the_line_of_a_wrong_max_spans(tmp_path, value, message, hint):
    shutil.copy(SPANS / "mt_spans.xml", tmp_path)
    text = (SPANS / "projects.yaml").read_text() + f"    max_spans: {value}\n"
    (tmp_path / "projects.yaml").write_text(text)
    with pytest.raises(RegistryError) as e:
        registry.load(tmp_path / "projects.yaml")
    line = text.splitlines().index(f"    max_spans: {value}") + 1
    assert f"projects.yaml:{line}: projects.mt_spans.{message}" in str(e.value) and hint in str(e.value)


def test_an_answer_over_the_cap_made_in_label_studio_is_kept_and_flagged():
    """Label Studio's own editor cannot cap spans: its answer with six is exported whole, each span flagged over_max,
    and `status` names the annotator and the task; an answer with five is not flagged."""
    project = capped(5)
    six = export_task(1, TASKS[0], marks_only(6, TASKS[0]["mt"]) + [SCORE])
    five = export_task(2, TASKS[1], marks_only(5, TASKS[1]["mt"]) + [SCORE])
    users = {7: "ann@x"}
    spans = span_frame([six, five], project, users)
    assert spans.groupby("task_id")["over_max"].agg(["size", "all", "any"]).to_dict("index") == {
        1: {"size": 6, "all": True, "any": True}, 2: {"size": 5, "all": False, "any": False}}
    warnings = study.span_limit_warnings(annotation_frame([six, five], project, users), [project])
    assert list(warnings) == ["ann@x"]
    assert "more than 5 spans with errors (max_spans of mt_spans) in 1 answer(s), tasks 1:" in warnings["ann@x"]


def test_status_and_export_of_an_export_say_so(tmp_path):
    """As a user runs them: `status --from-export` warns, `export` keeps all six spans with over_max."""
    import pandas as pd
    from typer.testing import CliRunner

    from evalstudio.cli import app

    shutil.copy(SPANS / "mt_spans.xml", tmp_path)
    (tmp_path / "projects.yaml").write_text((SPANS / "projects.yaml").read_text() + "    max_spans: {errors: 5}\n")
    (tmp_path / "export.json").write_text(json.dumps([export_task(1, TASKS[0], marks_only(6, TASKS[0]["mt"]) + [SCORE])]))
    common = ["--from-export", str(tmp_path / "export.json"), "--projects", str(tmp_path / "projects.yaml")]
    status = CliRunner().invoke(app, ["status", "mt_spans", *common, "--participants", str(tmp_path / "none")],
                                terminal_width=400)
    assert status.exit_code == 0, status.output
    assert "more than 5 spans with errors" in " ".join(status.output.split())
    exported = CliRunner().invoke(app, ["export", "mt_spans", *common, "-o", str(tmp_path / "a.csv")])
    assert exported.exit_code == 0, exported.output
    back = pd.read_csv(tmp_path / "a.spans.csv")
    assert len(back) == 6 and back["over_max"].all()


@contextmanager
def one_mqm_task_behind_a_gateway(label_studio, client, tmp_path, title: str, record: dict, participant: str):
    """(project, its id, a participant's signed-in web client, their first task) of the shipped mqm protocol with one
    task (`record`), behind a running `evalstudio gateway`."""
    from evalstudio.crowd import participants
    from evalstudio.protocols.mapping import importer_for
    from evalstudio.tasks.importing import import_files

    from .conftest import gateway_process
    from .test_cli import _projects_file

    projects_file = _projects_file(tmp_path, lambda raw: raw["projects"]["mqm"].update(title=title))
    project = registry.load(projects_file).get("mqm")
    items = tmp_path / "one.jsonl"
    items.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    project_id = import_files(project, importer_for(project), [items], client).project_id
    folder = tmp_path / "participants"
    participants.add(client, [participant], folder)
    account = participants.load_accounts(folder)[participant]
    with gateway_process(label_studio, "mqm", folder, projects_file) as url:
        web = httpx.Client(base_url=url, timeout=60)
        assert web.get(f"/s/{participant}/{account.access}").status_code == 303
        web.headers["X-Evalstudio"] = "1"
        yield project, project_id, web, web.get("/api/next/mqm").json()


@pytest.mark.server
@pytest.mark.usefixtures("database_independent")
def test_a_real_gateway_refuses_six_mqm_errors_and_takes_five(label_studio, client, tmp_path):
    """The shipped mqm protocol behind `evalstudio gateway`: a participant's answer with six error spans is refused
    with the reason and nothing is stored; the same answer with five is taken and reaches Label Studio whole."""
    with one_mqm_task_behind_a_gateway(label_studio, client, tmp_path, "MQM five errors", MQM[0], "MQM5") as (
            _, project_id, web, task):
        text = task["data"]["target"]

        def answer(count):
            words = text.split()[:count]
            result, at = [], 0
            for i, word in enumerate(words):
                start = text.index(word, at)
                at = start + len(word)
                where = {"start": start, "end": at, "text": word}
                result += [{"id": f"e{i}", "from_name": "errors", "to_name": "target", "type": "labels",
                            "value": {**where, "labels": ["Minor"]}},
                           {"id": f"e{i}", "from_name": "category", "to_name": "target", "type": "choices",
                            "value": {**where, "choices": ["Fluency/Grammar"]}}]
            return web.post(f"/api/submit/{task['ref']}", json={"result": result})

        six = answer(6)
        assert six.status_code == 400 and "errors: mark at most 5 spans" in six.json()["error"], six.text
        again = web.get("/api/next/mqm").json()
        assert again["ref"] == task["ref"] and not again.get("update"), again  # still unanswered
        five = answer(5)
        assert five.json() == {"ok": True}, five.text
    [stored] = [t for page in client.full_task_pages(project_id) for t in page]
    [annotation] = stored["annotations"]
    assert sum(r["type"] == "labels" for r in annotation["result"]) == 5


@pytest.mark.server
@pytest.mark.usefixtures("database_independent")
def test_a_live_mqm_study_is_analysed_and_published_with_its_spans(label_studio, client, tmp_path):
    """An mqm project annotated in Label Studio itself (one answer of two errors, one of six: over the cap, which
    its editor cannot enforce, and one Non-translation): `analyze --protocol mqm` reads it live into the MQM tables
    (scores from the spans' weights and the Non-translation box), and `publish mqm` releases every span, the six
    flagged over_max, listed in croissant.json (mlcroissant reads them back) and named in the datasheet with the cap."""
    import pandas as pd

    from evalstudio.protocols.mapping import importer_for
    from evalstudio.tasks.importing import import_files
    from evalstudio.values.results import region

    from .conftest import only_on_the_last_database
    from .test_cli import _projects_file, run

    only_on_the_last_database(label_studio)
    projects_file = _projects_file(tmp_path, lambda raw: raw["projects"]["mqm"].update(title="MQM published live"))
    project = registry.load(projects_file).get("mqm")
    items = tmp_path / "three.jsonl"
    items.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in MQM[:3]), encoding="utf-8")
    project_id = import_files(project, importer_for(project), [items], client).project_id
    admin = next(iter(client.users()))
    tasks = sorted(client.tasks(project_id), key=lambda t: t.id)

    def errors(text: str, count: int, severity: str) -> list[dict]:
        out, at = [], 0
        for i, word in enumerate(text.split()[:count]):
            start = text.index(word, at)
            at = start + len(word)
            where = {"start": start, "end": at, "text": word}
            out += [{"id": f"e{i}", "from_name": "errors", "to_name": "target", "type": "labels",
                     "value": {**where, "labels": [severity]}},
                    {"id": f"e{i}", "from_name": "category", "to_name": "target", "type": "choices",
                     "value": {**where, "choices": ["Accuracy/Mistranslation"]}}]
        return out

    answers = [errors(tasks[0].data["target"], 2, "Major"), errors(tasks[1].data["target"], 6, "Minor"),
               [region(project.interface, "non_translation", ["Non-translation"])]]
    for task, result in zip(tasks, answers):
        client.sdk.annotations.create(id=task.id, completed_by=admin, result=result, lead_time=30.0)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file), "EVALSTUDIO_RECORDS": str(tmp_path / "records")}
    analysed = run("analyze", "--protocol", "mqm", "-o", str(tmp_path / "analysis"), "--bootstrap", "0",
                   "--resamples", "100", env=env)
    assert analysed.returncode == 0, analysed.stderr + analysed.stdout
    segments = pd.read_csv(tmp_path / "analysis" / "mqm_segments.csv").set_index("item")["score"]
    items = [task.data["item_id"] for task in tasks]  # (imported in an order of its own)
    assert segments.to_dict() == dict(zip(items, [10.0, 6.0, 25.0]))  # 2 Major x 5, 6 Minor x 1, Non-translation
    out = tmp_path / "pub"
    done = run("publish", "mqm", "-o", str(out), "--participants", str(tmp_path / "no-ledger"), "--key-file",
               str(tmp_path / "key"), "--bootstrap", "0", env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    import mlcroissant

    data = out / "data_release"
    spans = pd.read_parquet(data / "data" / "spans.parquet")
    assert len(spans) == 8
    assert spans.groupby("task_id")["over_max"].all().to_dict() == {tasks[0].id: False, tasks[1].id: True}
    read = list(mlcroissant.Dataset(jsonld=str(data / "croissant.json")).records(record_set="spans"))
    assert sorted(r["spans/over_max"] for r in read) == sorted(spans["over_max"])
    sheet = (out / "datasheet.md").read_text(encoding="utf-8")
    assert ("Evaluators mark spans of the shown text: source_errors (Major, Minor, Neutral; at most 5 per answer of "
            "errors and source_errors together; per span: source_category); errors (Major, Minor, Neutral; at most 5 "
            "per answer of errors and source_errors together; per span: category)") in sheet
