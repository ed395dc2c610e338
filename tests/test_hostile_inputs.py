"""The import contract against hostile and odd input: every problem is `file:line: field: message`, never a
traceback, and nothing is imported (or the project is left as it was) when anything is wrong.

Hand-picked regressions first (each found by trying), then Hypothesis fuzzing of every importer. The fuzz suite
runs HYPOTHESIS_PROFILE=ci (150 cases per target, well under the CI budget) unless set to `long` (profiles in
conftest.py). The command-line targets run the real `evalstudio` app (typer's runner, in-process)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evalstudio import importers
from evalstudio.base.errors import Problem
from evalstudio.tasks.importing import FileChanged, import_files
from evalstudio.tasks.scanning import scan

from .conftest import CLI_FUZZ_EXAMPLES, LIVE_FUZZ_EXAMPLES, PROJECTS, ROOT, example_files, with_absolute_files

EPISODE = {"episode_id": "e1", "scenario": "Two friends talk.", "agents_background": {"A": "a", "B": "b"},
           "social_goals": {"A": "g1", "B": "g2"},
           "raw_messages": [[["A", "Environment", 'said: "hi"'], ["B", "Environment", 'said: "hello"']]]}


def fresh_dir(tmp_path_factory):
    """A new empty folder for one fuzz case. Not tmp_path_factory.mktemp per case: it lists every earlier folder to
    number the next, which makes 10,000 cases quadratic."""
    return Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))


def problems_of(project_name, reg, tmp_path, name, content) -> list[str]:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    project = reg.entry(project_name)
    return [str(p) for p in scan(project, importers.get(project.importer), [path]).problems]


CASES = [
    # (project, file name, content, expected substring of one problem)
    ("dialogue", "nul.jsonl", json.dumps({"context": ["A: hi\u0000"], "responses": [{"system": "s", "text": "x"}]}),
     "nul.jsonl:1: context: contains a NUL character"),
    ("dialogue", "deep.jsonl", "[" * 10_000 + "]" * 10_000, "deep.jsonl:1: invalid JSON: nested too deeply"),
    ("dialogue", "digits.jsonl", '{"context": "A: hi", "responses": [], "n": ' + "9" * 5001 + "}",
     "digits.jsonl:1: invalid JSON: Exceeds the limit"),
    ("dialogue", "huge.jsonl", json.dumps({"context": "A: hi", "responses": [{"system": "s", "text": "x",
                                                                            "model_ratings": {"appropriateness": 10**400}}]}),
     "huge.jsonl:1: responses[0].model_ratings.appropriateness: expected a rating, got a number with over 30 digits"),
    ("dialogue", "inf.jsonl", '{"context": "A: hi", "responses": [{"system": "s", "text": "x", "model_ratings": '
                              '{"appropriateness": 1e400}}]}', "responses[0].model_ratings.appropriateness: expected a rating, got inf"),
    ("dialogue", "underscore.jsonl", json.dumps({"context": "A: hi", "responses": [
        {"system": "s", "text": "x", "model_ratings": {"appropriateness": "1_0"}}]}), "expected a number, got '1_0'"),
    ("dialogue", "arabic.jsonl", json.dumps({"context": "A: hi", "responses": [
        {"system": "s", "text": "x", "model_ratings": {"appropriateness": "٧"}}]}), "expected a number, got '٧'"),
    ("dialogue", "every.jsonl", json.dumps({"context": "A: hi", "responses": [
        {"system": "s", "text": ""}, {"text": "ok"}, {"system": "t", "text": "y", "model_ratings": {"appropriateness": 9}}]}),
     "every.jsonl:1: responses[1].system: missing"),
    ("sotopia", "reasoning.jsonl", json.dumps({**EPISODE, "reasoning": 5}), "reasoning.jsonl:1: reasoning: expected the "
                                                                            "evaluator's text, got int"),
    ("sotopia", "step.jsonl", json.dumps({**EPISODE, "rewards": [{d: 7.5 if d == "goal" else 0 for d in (
        "believability", "relationship", "knowledge", "secret", "social_rules", "financial_and_material_benefits", "goal")},
        {d: 0 for d in ("believability", "relationship", "knowledge", "secret", "social_rules",
                        "financial_and_material_benefits", "goal")}]}),
     "step.jsonl:1: rewards[0].goal: 7.5 is not on agent1_goal's step 1"),
    ("cmv_tom", "tomlist.jsonl", json.dumps({"post": {"title": "t", "text": "p"}, "comment": {"text": "c"},
                                         "delta_reply": {"text": "∆"}, "tom": {"post": [1]}}),
     "tomlist.jsonl:1: tom.post: expected {category"),
    ("cmv_tom", "enc.xml", '<?xml version="1.0" encoding="bogus-enc"?>\n<thread ID="a"></thread>\n',
     "enc.xml:1: invalid XML: cannot decode the file (unknown encoding: bogus-enc)"),
    ("cmv_threads", "lines.xml", '<?xml version="1.0"?>\n<threads>\n<thread ID="t1">\n<title>x</title>\n<OP author="o">p</OP>\n'
                         '</thread>\n</threads>\n', "lines.xml:3: thread t1: no comment by another author than the OP"),
    ("cmv_tom", "broken.xml", '<?xml version="1.0"?>\n<thread ID="a">\n<OP author="o">t\n</thread>\n',
     "broken.xml:4: invalid XML: mismatched tag (column 3)"),
    ("dialogue", "gold_range.jsonl", json.dumps({"context": "A: hi", "responses": [{"system": "s", "text": "x"}],
                                                 "gold": {"appropriateness": 7}}),
     "gold_range.jsonl:1: gold.appropriateness: 7 is outside appropriateness's range 1..5"),
    ("cmv_threads", "gold_name.jsonl", json.dumps({"post": {"title": "t", "text": "p"}, "comment": {"text": "c"},
                                                   "delta_reply": {"text": "∆ thanks"}, "gold": {"beliefs": "Yes"}}),
     "gold_name.jsonl:1: gold.beliefs: not a criterion of cmv_threads (persuasiveness)"),
    ("sotopia", "gold_shape.jsonl", json.dumps({**EPISODE, "gold": ["goal", 3]}),
     "gold_shape.jsonl:1: gold: expected {criterion: known answer}"),
    ("health", "surrogate.jsonl", '{"scenario_id": "s1", "scenario": "x\\ud800", "system": "v1", "exchanges": []}',
     "surrogate.jsonl:1:"),
]


@pytest.mark.parametrize("project, name, content, expected", CASES, ids=[c[1] for c in CASES])
def test_hostile_records_are_reported_as_file_line_field_message(reg, tmp_path, project, name, content, expected):
    found = problems_of(project, reg, tmp_path, name, content)
    assert any(expected in p for p in found), found
    assert not any("at at" in p or "Traceback" in p for p in found)


def test_double_escaped_delta_entities_count_as_deltas(reg, tmp_path):
    """46 of 100 real delta threads in the Change My View corpus write the delta as `&amp;#8710;`."""
    thread = ('<?xml version="1.0"?>\n<thread ID="t9">\n<title>CMV: x</title>\n<OP author="op">My view.</OP>\n'
              '<reply id="r1" author="other">A reason.</reply>\n'
              '<reply id="r2" author="op">Good point &amp;#8710; and &amp;amp; more</reply>\n</thread>\n')
    path = tmp_path / "t.xml"
    path.write_text(thread)
    project = reg.entry("cmv_threads")  # a delta thread without ToM values: Q1 only
    [record] = [r for _, r in importers.get("cmv").read(path)]
    assert record["delta_reply"]["text"] == "Good point ∆ and & more"  # shown as the author wrote it
    assert record.get("delta", True) is True
    assert scan(project, importers.get("cmv"), [path]).tasks == 1


def test_non_delta_threads_are_imported_for_q1_without_saying_so(reg, tmp_path):
    """A thread where the OP awarded no delta is the "not persuasive" contrast: imported into cmv_threads with the
    OP's reply (if any); the view shows neither (an OP's reply in a delta thread awards the ∆): both are kept in the
    task's meta, and no text of the view speaks of a delta."""
    from evalstudio.tasks.scanning import iter_tasks, split_task

    threads = ('<?xml version="1.0"?>\n<threads>\n'
               '<thread ID="n1">\n<title>CMV: x</title>\n<OP author="op">My view.</OP>\n'
               '<reply id="c1" author="other">A weak reason.</reply>\n<reply id="c2" author="op">Not convinced.</reply>\n'
               '</thread>\n<thread ID="n2">\n<title>CMV: y</title>\n<OP author="op">Another view.</OP>\n'
               '<reply id="c3" author="someone">Have you considered z?</reply>\n</thread>\n</threads>\n')
    path = tmp_path / "negative.xml"
    path.write_text(threads)
    project = reg.entry("cmv_threads")
    tasks = [split_task(project, d) for _, d in iter_tasks(project, importers.get("cmv"), [path])]
    assert [(t["data"]["comment"], t["meta"]["op_reply"], t["meta"]["delta"]) for t in tasks] == [
        ("A weak reason.", "Not convinced.", False),
        ("Have you considered z?", "(The OP did not reply to this comment.)", False)]
    assert all("op_reply" not in t["data"] for t in tasks)
    assert scan(reg.entry("cmv_tom"), importers.get("cmv"), [path]).tasks == 0  # no Q2-Q7 about values that do not exist
    import re

    shown = " ".join(re.findall(r'value="([^"$]*)"', re.sub(r"<!--.*?-->", "", project.label_config, flags=re.S)))
    assert not re.search(r"delta|∆|designated", shown, re.I)  # no text of the view speaks of a delta


# --- fuzzing: any bytes, any JSON shape -> a clean result, never an exception ---------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25)
FIELDS = ["context", "responses", "system", "text", "response", "model_ratings", "post", "comment", "delta_reply",
          "tom", "episode_id", "raw_messages", "rewards", "reasoning", "scenario_id", "scenario", "exchanges", "id",
          "agents_background", "social_goals", "appropriateness", "title", "values", "content", "beliefs", "gold"]
records = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=8)


def _clean(project_name, reg, path) -> list[Problem]:
    project = reg.entry(project_name)
    result = scan(project, importers.get(project.importer), [path])
    for problem in result.problems:
        assert isinstance(problem, Problem) and str(problem).startswith(str(path))
    return result.problems


@pytest.mark.parametrize("project", [p for p in PROJECTS if p in ("sotopia", "cmv_tom", "dialogue", "health")])
@given(lines=st.lists(records, min_size=1, max_size=3))
def test_fuzzed_jsonl_records_never_crash(reg, tmp_path_factory, project, lines):
    path = fresh_dir(tmp_path_factory) / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines), encoding="utf-8")
    _clean(project, reg, path)


@pytest.mark.parametrize("project, suffix", [("sotopia", ".jsonl"), ("cmv_tom", ".jsonl"), ("cmv_threads", ".xml"),
                                             ("circa_part2", ".csv"), ("circa_part1", ".csv"), ("dialogue", ".csv"),
                                             ("health", ".csv"), ("dialogue", ".jsonl")])
@given(data=st.binary(max_size=400))
def test_fuzzed_bytes_never_crash(reg, tmp_path_factory, project, suffix, data):
    path = fresh_dir(tmp_path_factory) / f"in{suffix}"
    path.write_bytes(data)
    _clean(project, reg, path)


@pytest.mark.parametrize("project", ["sotopia", "cmv_tom", "circa_part2", "dialogue", "health"])
@given(cut=st.integers(min_value=0, max_value=10_000), junk=st.text(max_size=20))
def test_truncated_or_altered_examples_never_crash(reg, tmp_path_factory, project, cut, junk):
    """Real example files cut anywhere and with text spliced in: a clean report or valid tasks."""
    source = example_files(project)[0]
    raw = source.read_text(encoding="utf-8")
    position = cut % (len(raw) + 1)
    path = fresh_dir(tmp_path_factory) / source.name
    path.write_text(raw[:position] + junk + raw[position + len(junk) // 2:], encoding="utf-8")
    _clean(project, reg, path)


# --- a file that changes while it is imported: the project is left as it was ---------------------------------

@pytest.mark.server
def test_a_file_appended_during_the_import_leaves_the_project_as_it_was(reg, importer_for, client, tmp_path):
    project = reg.entry("dialogue").model_copy(update={"title": "dialogue appended mid-import"})
    source = example_files("dialogue")[0]
    path = tmp_path / f"items{source.suffix}"
    path.write_bytes(source.read_bytes())
    project_id, _ = client.ensure_project(project)
    before = client.task_ids(project_id)
    appended = {"done": False}

    def append_once(done, total):
        if not appended["done"] and done > 0:
            appended["done"] = True
            with open(path, "a", encoding="utf-8") as f:
                f.write("\n" + json.dumps({"context": "A: new", "responses": [{"system": "late", "text": "hi"}]}) + "\n"
                        if path.suffix == ".jsonl" else "\nA: new,hi,late\n")

    with pytest.raises(FileChanged) as error:
        import_files(project, importer_for("dialogue"), [path], client, batch_size=2, on_progress=append_once)
    assert "changed after it was validated" in str(error.value) and "were removed again" in str(error.value)
    assert client.task_ids(project_id) == before


@pytest.mark.server
def test_skip_invalid_imports_the_valid_records_and_writes_the_rejected_ones(reg, client, label_studio, tmp_path):
    import yaml

    from .test_cli import run

    raw = yaml.safe_load((ROOT / "projects.yaml").read_text())
    with_absolute_files(raw)
    raw["projects"]["dialogue"]["title"] = "dialogue skip-invalid"
    (tmp_path / "projects.yaml").write_text(yaml.safe_dump(raw))
    lines = [{"id": f"d{i}", "context": f"A: hello {i}", "responses": [{"system": "s", "text": f"reply {i}"}]}
             for i in range(5)]
    lines[1]["responses"][0]["text"] = ""  # invalid
    lines[3]["context"] = "A: nul \u0000"  # invalid
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(tmp_path / "projects.yaml")}

    refused = run("import", "dialogue", str(path), env=env)
    assert refused.returncode == 2 and "nothing was imported" in refused.stderr
    assert client.find_project("dialogue skip-invalid") is None

    rejected = tmp_path / "rejected.jsonl"
    done = run("import", "dialogue", str(path), "--skip-invalid", "--rejected", str(rejected), env=env)
    assert done.returncode == 0, done.stderr
    assert "2 invalid record(s) left out" in done.stderr and "3 task(s) created" in done.stdout
    records = [json.loads(line) for line in rejected.read_text().splitlines()]
    assert [(r["line"], json.loads(r["text"])["id"]) for r in records] == [(2, "d1"), (4, "d3")]
    assert records[0]["problems"] == ["responses[0].text: is empty"]
    project_id = client.find_project("dialogue skip-invalid")
    assert sorted(t["data"]["item_id"] for page in client.full_task_pages(project_id) for t in page) == ["d0", "d2", "d4"]


# --- the ML backend's endpoints: any JSON body -> an answer below 500, never a traceback ----------------------

AUTH = {"Authorization": "Basic dTpw"}  # u:p
task_shapes = st.fixed_dictionaries({"id": st.integers(), "data": json_values}, optional={"meta": json_values})
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={"tasks": st.lists(task_shapes | json_values, max_size=3), "label_config":
                                        st.sampled_from(["", "<View/>", "<View><Text name='t' value='$t'/></View>"]) | json_values,
                                        "project": json_values, "params": json_values}),
    st.fixed_dictionaries({"action": st.sampled_from(["ANNOTATION_CREATED", "PROJECT_UPDATED"]) | json_values},
                          optional={"project": st.fixed_dictionaries({}, optional={"id": json_values, "label_config": json_values})}),
)


@pytest.fixture(scope="module")
def backend_app(tmp_path_factory):
    from evalstudio.ml_backend.app import create_app

    previous = os.environ.get("EVALSTUDIO_MODEL_DIR")
    os.environ["EVALSTUDIO_MODEL_DIR"] = str(tmp_path_factory.mktemp("fuzz-backend") / "models")
    try:
        yield create_app("u:p").test_client()
    finally:
        if previous is None:
            os.environ.pop("EVALSTUDIO_MODEL_DIR", None)
        else:
            os.environ["EVALSTUDIO_MODEL_DIR"] = previous


@pytest.mark.parametrize("route", ["/predict", "/webhook", "/setup", "/generate"])
@given(body=bodies)
# found by the long profile: '²'.isdigit() is True but int('²') fails, so a webhook's project id answered 500
@example(body={"action": "ANNOTATION_CREATED", "project": {"id": "\u00b2"}})
def test_fuzzed_backend_requests_never_fail_inside(backend_app, route, body):
    response = backend_app.post(route, data=json.dumps(body), content_type="application/json", headers=AUTH)
    text = response.get_data(as_text=True)
    assert response.status_code < 500, text
    assert "Traceback" not in text
    if route == "/predict" and response.status_code == 200:
        assert len(response.get_json()["results"]) == len(body["tasks"])


export_tasks = st.lists(st.fixed_dictionaries({"id": st.integers(1, 10**6), "data": st.dictionaries(st.sampled_from(
    ["context", "response", "item_id", "system"]), json_values, max_size=4)}, optional={
    "meta": json_values, "annotations": st.lists(st.fixed_dictionaries({}, optional={
        "id": json_values, "completed_by": json_values, "was_cancelled": json_values, "lead_time": json_values,
        "result": st.lists(st.fixed_dictionaries({}, optional={
            "from_name": st.sampled_from(["appropriateness", "information_content", "nosuch"]) | json_values,
            "type": st.sampled_from(["rating", "choices", "textarea"]) | json_values,
            "value": st.fixed_dictionaries({}, optional={"rating": json_values, "choices": json_values})}), max_size=3)}),
        max_size=3)}), max_size=4) | json_values


@given(content=export_tasks)
def test_fuzzed_export_files_give_a_report_or_a_clear_error(reg, tmp_path_factory, content):
    from evalstudio.base.errors import EvalstudioError
    from evalstudio.exporters.analyses.report import build_report
    from evalstudio.exporters.tables.tidy import read_export

    folder = fresh_dir(tmp_path_factory)
    path = folder / "export.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    try:
        tasks = read_export(path)
    except EvalstudioError:
        return
    build_report(reg.entry("dialogue"), tasks, folder / "report", {}, n_boot=5)


# --- the command line: any input file -> exit 0, or exit 2 with a message; never a traceback -----------------

def invoke(*args, env=None):
    """Run the real `evalstudio` app in-process; re-raise anything that escaped it (a traceback for the user)."""
    from typer.testing import CliRunner

    from evalstudio.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args], env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.output
    return result


fuzzed_files = st.one_of(st.binary(max_size=400),
                         st.lists(records, min_size=1, max_size=3).map(lambda rs: "\n".join(map(json.dumps, rs)).encode()))


@pytest.mark.parametrize("protocol, suffix", [("sotopia", ".jsonl"), ("cmv", ".jsonl"), ("cmv", ".xml"), ("circa", ".csv"),
                                              ("dialogue", ".jsonl"), ("dialogue", ".csv"), ("health", ".jsonl")])
@settings(max_examples=CLI_FUZZ_EXAMPLES)
@given(data=fuzzed_files)
def test_fuzzed_files_through_validate_exit_0_or_2(tmp_path_factory, protocol, suffix, data):
    path = fresh_dir(tmp_path_factory) / f"in{suffix}"
    path.write_bytes(data)
    result = invoke("validate", protocol, path)
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert "error:" in result.stderr and str(path) in result.stderr


@settings(max_examples=CLI_FUZZ_EXAMPLES)
@given(content=st.one_of(st.binary(max_size=200), st.builds(lambda d: json.dumps(d).encode(), json_values)))
def test_fuzzed_projects_yaml_through_the_command_line_exit_0_or_2(tmp_path_factory, content):
    path = fresh_dir(tmp_path_factory) / "projects.yaml"
    path.write_bytes(content)
    result = invoke("projects", "--projects", path)
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert str(path) in result.stderr


@pytest.fixture(scope="module")
def fuzz_projects(tmp_path_factory):
    """projects.yaml with its own dialogue project title, for the live import fuzzing."""
    import yaml

    raw = yaml.safe_load((ROOT / "projects.yaml").read_text())
    with_absolute_files(raw)
    raw["projects"]["dialogue"]["title"] = "dialogue fuzzed import"
    path = tmp_path_factory.mktemp("fuzz-projects") / "projects.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.mark.server
@settings(max_examples=LIVE_FUZZ_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(st.one_of(records, st.just({"context": "A: fine", "responses": [{"system": "s", "text": "ok"}]})),
                      min_size=1, max_size=4))
def test_fuzzed_imports_through_the_command_line_leave_the_project_as_it_was(client, label_studio, fuzz_projects,
                                                                             tmp_path_factory, lines):
    """`evalstudio import` with fuzzed records into the real Label Studio: exit 0 and every record is a task, or
    exit 2 and the project holds exactly what it held before."""
    ids = [f"f{i}-{abs(hash(json.dumps(r, sort_keys=True))) % 10**8}" for i, r in enumerate(lines)]
    path = fresh_dir(tmp_path_factory) / "in.jsonl"
    path.write_text("\n".join(json.dumps({**r, "id": i}) for r, i in zip(lines, ids)) + "\n", encoding="utf-8")
    project_id = client.find_project("dialogue fuzzed import")
    before = client.task_ids(project_id) if project_id else {}
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(fuzz_projects)}
    result = invoke("import", "dialogue", path, env=env)
    assert result.exit_code in (0, 2), result.output
    project_id = client.find_project("dialogue fuzzed import")
    if result.exit_code == 2:
        assert "nothing was imported" in result.stderr
        assert (client.task_ids(project_id) if project_id else {}) == before
    else:
        assert set(ids) <= {t["data"]["item_id"] for page in client.full_task_pages(project_id) for t in page}


@settings(max_examples=CLI_FUZZ_EXAMPLES)
@given(content=export_tasks)
# found by the long profile: a choices result whose value is {} made every answer text, and the numeric
# conversion of a rating column of pandas' string dtype failed
@example(content=[{"id": 1, "data": {}, "meta": None, "annotations": [
    {"was_cancelled": None, "result": [{"value": {}, "from_name": "appropriateness", "type": "choices"}]}]}])
# found by the long profile: every annotation skipped left the quota rule comparing an empty text column
@example(content=[{"id": 1, "data": {}, "annotations": [
    {"id": 1, "was_cancelled": True, "result": [{"value": {"rating": 3}, "from_name": "appropriateness", "type": "rating"}]}]}])
def test_fuzzed_exports_through_report_exit_0_or_2(tmp_path_factory, content):
    folder = fresh_dir(tmp_path_factory)
    path = folder / "export.json"
    path.write_text(json.dumps(content), encoding="utf-8")
    result = invoke("report", "dialogue", "--from-export", path, "-o", folder / "report", "--bootstrap", "5")
    assert result.exit_code in (0, 2), result.output


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=40))
def test_the_fast_storable_check_never_passes_what_the_exact_one_refuses(value):
    """`storable` (json in C, for the import's speed) may send a task to the exact walk without need, never the
    other way round: whatever it passes has no problem the exact check would report."""
    from evalstudio.values.sources import storable, storable_problems

    data = {"field": value}
    if storable(data):
        assert storable_problems(data) == []
