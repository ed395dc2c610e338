"""Protocols as data (issue 30): a projects.yaml entry with `input:` and a labeling config, no Python.

`evalstudio new` writes each template into a temporary folder; the entry is checked against its XML when loaded,
its records become tasks that show annotators only what the config shows (pairwise and best-worst sides drawn per
task and kept hidden), and the protocol runs in a real Label Studio, in a real browser, through export and
`evalstudio analyze`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalstudio.base.errors import BadInput, Problem, RegistryError
from evalstudio.cli import app
from evalstudio.operations.creating import TEMPLATE_NAMES, create
from evalstudio.protocols import registry
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.importing import import_files
from evalstudio.tasks.scanning import convert_record, iter_tasks, scan, split_task
from evalstudio.values.results import region, task_fields

TEMPLATES = list(TEMPLATE_NAMES)
from .test_browser import browser, session  # noqa: E402,F401 - the logged-in browser page of the browser tests


def made(folder: Path, template: str, name: str | None = None):
    """(registry, project, example file) of a template written into `folder` by `evalstudio new`."""
    name = name or "my_" + template.replace("-", "_")
    written = create(name, template, folder)
    reg = registry.load(folder / "projects.yaml")
    return reg, reg.get(name), written[-1]


def tasks_of(project, path: Path) -> list[dict]:
    return [split_task(project, data) for _, data in iter_tasks(project, importer_for(project), [path])]


# ---- the templates -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("template", TEMPLATES)
def test_a_template_validates_and_its_tasks_show_only_what_the_config_shows(tmp_path, template):
    reg, project, example = made(tmp_path, template)
    result = scan(project, importer_for(project), [example])
    assert result.problems == [] and result.tasks >= 2
    records = [json.loads(line) for line in example.read_text().splitlines()] if example.suffix == ".jsonl" else []
    systems = {json.dumps(s) for r in records for s in _systems(r)} | ({'"sys-1"', '"sys-2"'} if not records else set())
    for task in tasks_of(project, example):
        assert set(task["data"]) == project.data_fields() | {"evalstudio_id", "item_id"}
        shown = json.dumps(task["data"])
        assert not any(s in shown for s in systems), "a system name is in what annotators see"
        assert task["meta"].get("system") or task["meta"].get("candidates")


def _systems(record: dict) -> list[str]:
    found = [record[k] for k in ("model_a", "model_b") if k in record]
    for key in ("responses", "summaries"):
        found += [e["system"] for e in record.get(key, [])]
    return found


def test_new_appends_to_a_projects_file_refuses_to_overwrite_and_leaves_nothing_on_failure(tmp_path):
    made(tmp_path, "likert", "first")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(BadInput, match="has an entry 'first' already"):
        create("first", "pairwise", tmp_path)
    with pytest.raises(BadInput, match="valid names: likert, slider, pairwise, best-worst"):
        create("second", "ranking", tmp_path)
    with pytest.raises(BadInput, match="lower-case letters"):
        create("Second", "likert", tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    _, project, _ = made(tmp_path, "pairwise", "second")
    assert set(registry.load(tmp_path / "projects.yaml").names()) == {"first", "second"}
    assert (tmp_path / "projects.yaml").stat().st_mode & 0o077 == 0
    # a template whose result does not load is rolled back: nothing written, the projects file as it was
    (tmp_path / "labeling_configs" / "third.xml").mkdir()
    before = (tmp_path / "projects.yaml").read_bytes()
    with pytest.raises(BadInput, match="exists already"):
        create("third", "slider", tmp_path)
    assert (tmp_path / "projects.yaml").read_bytes() == before and not (tmp_path / "examples" / "third").exists()


def test_new_refused_by_a_linked_projects_file_leaves_nothing_behind(tmp_path):
    """A projects.yaml that is a symbolic link is refused before anything is written (it left the XML and the
    example behind, which then blocked the next try)."""
    real = tmp_path / "real.yaml"
    real.write_text("projects: {}\n", encoding="utf-8")
    (tmp_path / "projects.yaml").symlink_to(real)
    with pytest.raises(BadInput, match="is a symbolic link"):
        create("linked", "likert", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["projects.yaml", "real.yaml"]
    assert real.read_text() == "projects: {}\n"


def test_evalstudio_new_on_the_command_line(tmp_path):
    result = CliRunner().invoke(app, ["new", "cli_study", "--template", "best-worst", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "evalstudio validate cli_study examples/cli_study/example.jsonl" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["validate", "cli_study", str(tmp_path / "examples/cli_study/example.jsonl"),
                                      "--projects", str(tmp_path / "projects.yaml")])
    assert result.exit_code == 0 and "2 valid task(s)" in result.output


# ---- an entry is checked against its labeling config when it is loaded ------------------------------------------

BAD_ENTRIES = [  # (template, text replaced in the entry, replacement, message)
    ("likert", "data: {context: context, response: each.text}", "data: {context: context}",
     "the labeling config shows $response but nothing fills it"),
    ("likert", "data: {context: context,", "data: {context: context, extra: id,",
     "input.data.extra: the labeling config shows no $extra; a hidden field belongs in input.meta"),
    ("likert", "    input:\n", "    importer: dialogue\n    input:\n", "give importer:"),
    ("likert", "system: each.system", "system: each..system", "is not a path"),
    ("slider", "system: system", "system: each.system", "nothing is expanded"),
    ("slider", "data: {document: source, summary: summary}", "data: {document: source, summary: summary, item_id: x}",
     "item_id: set by evalstudio"),
    ("pairwise", 'tie: "Tie", ', "", "what does 'Tie' mean?"),
    ("pairwise", 'both_bad: "Both are bad"', 'both_bad: "Both bad"', "'Both bad' is not a label of preference"),
    ("pairwise", "    compare:\n      criterion: preference\n", "    compare:\n      criterion: nothing\n",
     "'nothing' is not a categorical criterion"),
    ("pairwise", "    compare:\n", "    xcompare:\n", "Extra inputs are not permitted"),
    ("best-worst", "per_task: 4 ", "per_task: 3 ", "shows $summary_d but nothing fills it"),
    ("best-worst", 'best: {scale: nominal, labels: ["A", "B", "C", "D"]}',
     'best: {scale: nominal, labels: ["A", "B", "C"]}', "labels"),
    ("best-worst", "source: summaries ", "source: summaries\n        each: [{system: a, summary: b}]\n        #",
     "give source"),
    ("pairwise", "      data: {prompt: prompt}", "      expand: turns\n      data: {prompt: prompt}",
     "expand and candidates both decide a record's tasks"),
]


@pytest.mark.parametrize("template, old, new, message", BAD_ENTRIES)
def test_a_wrong_entry_is_refused_with_where_and_what(tmp_path, template, old, new, message):
    _, project, _ = made(tmp_path, template, "mine")
    text = (tmp_path / "projects.yaml").read_text()
    assert old in text, old
    (tmp_path / "projects.yaml").write_text(text.replace(old, new, 1))
    with pytest.raises(RegistryError) as error:
        registry.load(tmp_path / "projects.yaml")
    assert message in str(error.value)
    assert str(tmp_path / "projects.yaml") in str(error.value)


def test_a_config_that_shows_source_is_refused_as_it_would_show_the_hidden_fields(tmp_path):
    """Label Studio's editor replaces $source with the whole task JSON, its meta included (seen in a browser: the
    systems of a slider study on screen): no entry may show it."""
    made(tmp_path, "slider", "mine")
    config = tmp_path / "labeling_configs" / "mine.xml"
    config.write_text(config.read_text().replace("$document", "$source"))
    text = (tmp_path / "projects.yaml").read_text()
    (tmp_path / "projects.yaml").write_text(text.replace("data: {document: source,", "data: {source: source,"))
    with pytest.raises(RegistryError) as caught:
        registry.load(tmp_path / "projects.yaml")
    line = next(n for n, text in enumerate(config.read_text().splitlines(), 1) if "$source" in text)
    assert f"{config}:{line}: $source: Label Studio's own variable" in str(caught.value)  # the XML's file and line


# ---- records that do not fit: file:line: field: message, nothing imported ----------------------------------------

BAD_RECORDS = [  # (template, record, field, message)
    ("likert", {"id": "x", "context": "c", "responses": "not a list"}, "responses", "expected a non-empty list"),
    ("likert", {"id": "x", "context": "c", "responses": [{"system": "s", "text": ["a", "list"]}]},
     "each.text", "shows $response as text"),
    ("likert", {"id": "x", "context": "c", "responses": [{"system": "s", "text": "t", "metric_score": 4.5}]},
     "model_ratings.quality", "takes whole stars, got 4.5"),
    ("likert", {"id": "x", "context": "c", "responses": [{"system": "s", "text": "t", "metric_score": "4,0"}]},
     "model_ratings.quality", "4,0"),
    ("likert", {"id": "x", "responses": [{"system": "s", "text": "t"}]}, "context", "missing"),
    ("likert", {"id": "x", "context": "c", "responses": [{"text": "t"}]}, "responses[0].system", "missing"),
    ("pairwise", {"id": "x", "prompt": "p", "model_a": "s", "response_a": "a", "model_b": "s", "response_b": "b"},
     "each", "system 's' is among the candidates twice"),
    ("pairwise", {"id": "x", "prompt": "p", "model_a": "s", "response_a": "a", "model_b": "t"}, "response_b", "missing"),
    ("pairwise", {"id": "", "prompt": "p", "model_a": "s", "response_a": "a", "model_b": "t", "response_b": "b"},
     "id", "is empty"),
    ("best-worst", {"id": "x", "article": "a", "summaries": [{"system": s, "text": s} for s in "abc"]},
     "summaries", "3 candidate(s); a task shows 4"),
    ("best-worst", {"id": "x", "article": "a", "summaries": [{"system": s, "text": s} for s in "abcd"] + [7]},
     "summaries[4].system", "missing"),
]


@pytest.mark.parametrize("template, record, field, message", BAD_RECORDS)
def test_a_record_that_does_not_fit_is_reported_at_its_line(tmp_path, template, record, field, message):
    _, project, example = made(tmp_path, template, "mine")
    path = tmp_path / "input.jsonl"
    good = example.read_text().splitlines()[0] if example.suffix == ".jsonl" else None
    path.write_text((good + "\n" if good else "") + json.dumps(record) + "\n")
    problems = scan(project, importer_for(project), [path]).problems
    assert any(p.line == (2 if good else 1) and p.field == field and message in p.message for p in problems), problems


def test_a_csv_cell_that_does_not_fit_is_reported_and_nothing_is_imported(tmp_path):
    _, project, example = made(tmp_path, "slider", "mine")
    path = tmp_path / "input.csv"
    path.write_text(example.read_text() + 'd3,,"a source","a summary"\n')
    result = scan(project, importer_for(project), [path])
    assert [(p.line, p.field, p.message) for p in result.problems] == [(6, "system", "is empty")]
    other = tmp_path / "input.jsonl"
    other.write_text('{"doc_id": "d1"}\n')
    result = scan(project, importer_for(project), [other])
    assert "the mine protocol reads .csv, .tsv, .tab files" in str(result.problems[0])


# ---- sides drawn per task, stable, hidden; balanced best-worst tuples ---------------------------------------------

def test_pairwise_sides_are_drawn_per_task_the_same_on_every_run_and_balanced(tmp_path):
    _, project, _ = made(tmp_path, "pairwise", "mine")
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"prompt {i}", "model_a": "alpha",
                                        "response_a": f"alpha says {i}", "model_b": "beta",
                                        "response_b": f"beta says {i}"}) + "\n" for i in range(400)))
    first, again = tasks_of(project, path), tasks_of(project, path)
    assert first == again
    left = [t["meta"]["candidates"][0] for t in first]
    assert 0.43 < left.count("alpha") / len(left) < 0.57  # 400 fair coin flips: outside this 1 in 100
    for task in first:  # the text on each side is its system's
        for side, system in zip("ab", task["meta"]["candidates"]):
            assert task["data"][f"response_{side}"].startswith(system)
    assert len({t["data"]["evalstudio_id"] for t in first}) == 400


def test_best_worst_tuples_are_balanced_over_the_candidates_of_an_item(tmp_path):
    _, project, _ = made(tmp_path, "best-worst", "mine")
    path = tmp_path / "many.jsonl"
    systems = [f"system-{k}" for k in range(8)]
    path.write_text(json.dumps({"id": "doc", "article": "text", "summaries": [
        {"system": s, "text": f"summary by {s}"} for s in systems]}) + "\n")
    tasks = tasks_of(project, path)
    assert len(tasks) == 16  # 2N tuples of 4 (Kiritchenko & Mohammad), each candidate in 8
    appearances = Counter(s for t in tasks for s in t["meta"]["candidates"])
    assert set(appearances.values()) == {8} and set(appearances) == set(systems)
    pairs = Counter(frozenset((a, b)) for t in tasks for a in t["meta"]["candidates"] for b in t["meta"]["candidates"]
                    if a < b)
    assert len(pairs) == 28 and max(pairs.values()) - min(pairs.values()) <= 2


# ---- hostile records never crash the mapping ----------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                     max_leaves=20)


@pytest.mark.parametrize("template", TEMPLATES)
def test_any_record_becomes_tasks_or_problems_never_an_exception(tmp_path_factory, template):
    _, project, _ = made(tmp_path_factory.mktemp(template), template, "mine")
    importer = importer_for(project)
    keys = sorted(importer.FIELDS)

    @settings(max_examples=int(os.environ.get("MAPPING_FUZZ_EXAMPLES", 200)), deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.dictionaries(st.sampled_from(keys) | st.text(max_size=8), _json, max_size=8))
    def check(record):
        tasks, problems = convert_record(importer, record, project, {}, "input.jsonl", 1)
        assert bool(tasks) != bool(problems)
        assert all(isinstance(p, Problem) and "unexpected value" not in p.message for p in problems), problems

    check()


# ---- a real Label Studio, a real browser, export and analysis ---------------------------------------------------

@pytest.fixture
def own_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("protocol")


@pytest.mark.server
@pytest.mark.usefixtures("database_independent")
@pytest.mark.parametrize("template", TEMPLATES)
def test_a_template_protocol_is_annotated_in_a_real_browser(own_folder, template, client, label_studio, session):
    from .test_browser import designed_values, fill, open_task, submit_and_read_back

    name = f"browser_{template.replace('-', '_')}"
    _, project, example = made(own_folder, template, name)
    report = import_files(project, importer_for(project), [example], client, record=False)
    assert report.created >= 2
    page, dialogs = session
    task = sorted(client.tasks(report.project_id), key=lambda t: t.id)[0]
    full = client.sdk.tasks.get(id=task.id)
    open_task(page, label_studio.url, report.project_id, task.id)
    body = page.inner_text("body")
    for key in project.data_fields():
        assert " ".join(str(full.data[key]).split())[:40] in " ".join(body.split()), key
    hidden = full.meta.get("candidates") or [full.meta["system"]]
    for system in hidden:
        at = body.find(system)
        assert at < 0, f"the system name {system!r} is on the annotator's screen: ...{body[max(0, at - 200):at + 50]}"
    values = designed_values(project)
    fill(page, project, values)
    assert submit_and_read_back(page, client, task.id, 0) == values
    systems = {full.meta.get("system"): values}
    if project.compare is None:  # a rating study: a second task, another system, other values
        second = next(t for t in sorted(client.tasks(report.project_id), key=lambda t: t.id)
                      if client.sdk.tasks.get(id=t.id).meta["system"] != full.meta["system"])
        other = {k: (v + 1 if k in ("quality", "fluency") else v + 37) for k, v in values.items()}
        open_task(page, label_studio.url, report.project_id, second.id)
        fill(page, project, other)
        assert submit_and_read_back(page, client, second.id, 0) == other
        systems[client.sdk.tasks.get(id=second.id).meta["system"]] = other
        assert len(systems) == 2
    assert dialogs == []

    # the answers given in the browser, through Label Studio's export and `evalstudio analyze`
    export = client.download_export(report.project_id, own_folder / "export.json")
    out = own_folder / "analysis"
    result = CliRunner().invoke(app, ["analyze", str(export), "--protocol", name, "--projects",
                                      str(own_folder / "projects.yaml"), "-o", str(out), "--bootstrap", "20"])
    if project.compare is None:  # a rating: one annotator's values are the systems' means
        assert result.exit_code == 0, result.output
        means = pd.read_csv(out / "systems.csv").set_index(["criterion", "system"])["mean"]
        for system, entered in systems.items():
            for criterion in project.criteria:
                assert means[(criterion, system)] == pytest.approx(float(entered[criterion]))
    elif project.compare.kind == "pairwise":  # the choice, through the hidden sides, is the one comparison
        assert result.exit_code == 0, result.output
        rates = pd.read_csv(out / "win_rates.csv").set_index("system")
        outcome = {v: k for k, v in project.compare.outcomes.items()}[values["preference"]]
        left, right = full.meta["candidates"]
        won = {"left": {left: 1.0, right: 0.0}, "right": {left: 0.0, right: 1.0}}.get(outcome, {left: 0.5, right: 0.5})
        assert rates["win_rate"].to_dict() == won
    else:  # best and worst, through the hidden positions, are the tuple's counting scores
        if values["best"] == values["worst"]:
            assert result.exit_code == 2 and "same output as best and worst" in result.output
        else:
            assert result.exit_code == 0, result.output
            scores = pd.read_csv(out / "bws_scores.csv").set_index("item")["score"]
            labels = project.criteria["best"].labels
            shown = full.meta["candidates"]
            assert scores[shown[labels.index(values["best"])]] == 1 and scores[shown[labels.index(values["worst"])]] == -1


@pytest.mark.server
@pytest.mark.usefixtures("database_independent")
@pytest.mark.parametrize("template", ["pairwise", "best-worst"])
def test_a_comparison_protocol_goes_from_label_studio_through_export_to_its_analysis(own_folder, template, client,
                                                                                     label_studio, tmp_path,
                                                                                     monkeypatch):
    import tempfile

    import numpy as np

    name = f"analysed_{template.replace('-', '_')}"
    _, project, example = made(own_folder, template, name)
    spools = tmp_path / "spools"
    spools.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spools))
    report = import_files(project, importer_for(project), [example], client, record=False)
    assert list(spools.iterdir()) == []  # the import's spool of validated tasks is removed
    assert import_files(project, importer_for(project), [example], client,
                        record=False).already_present == report.created  # and a re-run adds nothing
    known = {email: uid for uid, email in client.users().items()}
    people = {}
    for email in ("cmp-a@example.com", "cmp-b@example.com", "cmp-c@example.com"):
        people[email] = known.get(email) or client.sdk.users.create(
            username=email.split("@")[0], email=email, password="not-used-1234").id
    rng = np.random.default_rng(7)
    entered = []  # (task id, annotator, {control: label})
    tasks = sorted(client.export_tasks(report.project_id), key=lambda t: t["id"])
    for task in tasks:
        for email, uid in people.items():
            if template == "pairwise":
                answer = {"preference": str(rng.choice(project.criteria["preference"].labels))}
            else:
                best, worst = rng.choice(4, size=2, replace=False)
                answer = {"best": "ABCD"[best], "worst": "ABCD"[worst]}
            result = [region(project.interface, control, label) for control, label in answer.items()]
            client.sdk.annotations.create(id=task["id"], completed_by=uid, result=result)
            entered.append((task["id"], email, answer))
    shown = {t["id"]: task_fields(t)["candidates"] for t in tasks}
    judge_units = None
    if template == "pairwise":  # an LLM judge's verdicts stored as predictions (as the ML backend stores them)
        meaning = {v: k for k, v in project.compare.outcomes.items()}
        label_of = {"left": "A is better", "right": "B is better", "tie": "Tie"}
        judge_units, missed = 0, False
        for task in tasks:
            winners = []
            for task_id, _, answer in entered:
                if task_id == task["id"]:
                    outcome = meaning[answer["preference"]]
                    winners.append(dict(zip(("left", "right"), shown[task_id])).get(outcome, "tie"))
            top = Counter(winners).most_common()
            plurality = top[0][0] if len(top) == 1 or top[0][1] > top[1][1] else None
            verdict = "tie" if plurality in (None, "tie") else "left" if plurality == shown[task["id"]][0] else "right"
            if plurality is not None:
                judge_units += 1
                if not missed:  # the judge disagrees with the humans on exactly one item and pair
                    verdict, missed = ("left" if verdict != "left" else "right"), True
            client.sdk.predictions.create(task=task["id"], model_version="judge-x",
                                          result=[region(project.interface, "preference", label_of[verdict])])
    out = tmp_path / "analysis"
    source, env = [], {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key}
    if template != "pairwise":  # from Label Studio's export file; pairwise live (the export names predictions by id)
        source = [str(client.download_export(report.project_id, tmp_path / "export.json"))]
    ppi = ["--ppi", "judge-x"] if template == "pairwise" else []  # the judge named by its model version
    result = CliRunner().invoke(app, ["analyze", *source, "--protocol", name, "--projects",
                                      str(own_folder / "projects.yaml"), "-o", str(out), "--bootstrap", "50", *ppi],
                                env=env)
    assert result.exit_code == 0, result.output
    if judge_units:
        judged = pd.read_csv(out / "judge_agreement.csv").set_index("judge").loc["judge-x"]
        assert judged["units"] == judge_units
        assert judged["agreement"] == pytest.approx((judge_units - 1) / judge_units)
        # every task has human answers, so the judge adds no unit: said, not computed
        why = pd.read_csv(out / "not_computed.csv").set_index("table")["reason"]
        assert "judged no item and pair that the humans did not" in why["ppi_bradley_terry"]
    if template == "pairwise":  # win rates by hand from the answers and the hidden sides
        meaning = {v: k for k, v in project.compare.outcomes.items()}
        wins, games = Counter(), Counter()
        for task_id, _, answer in entered:
            left, right = shown[task_id]
            outcome = meaning[answer["preference"]]
            games.update([left, right])
            wins.update({"left": [left], "right": [right]}.get(outcome, []))
            if outcome in ("tie", "both_bad"):
                wins.update({left: 0.5, right: 0.5})
        rates = pd.read_csv(out / "win_rates.csv").set_index("system")
        for system in games:
            assert rates.loc[system, "win_rate"] == pytest.approx(wins[system] / games[system]), system
        assert "comparisons of 3 systems on 4 items by 3 annotators" in " ".join(result.output.split())
    else:  # counting scores by hand: best minus worst over appearances
        best, worst, seen = Counter(), Counter(), Counter()
        for task_id, _, answer in entered:
            systems = shown[task_id]
            seen.update(systems)
            best[systems["ABCD".index(answer["best"])]] += 1
            worst[systems["ABCD".index(answer["worst"])]] += 1
        scores = pd.read_csv(out / "bws_scores.csv").set_index("item")
        for system in seen:
            assert scores.loc[system, "score"] == pytest.approx((best[system] - worst[system]) / seen[system])
    assert (out / "index.html").is_file()


def test_an_answer_that_means_no_comparison_is_counted_not_guessed(tmp_path):
    from evalstudio.exporters.analyses.preference import best_worst_from_annotations, comparisons_from_annotations

    _, pairwise, _ = made(tmp_path, "pairwise", "pw")
    rows = pd.DataFrame({"task_id": [1, 1, 2, 3], "item_id": ["i"] * 4, "annotator": ["a", "b", "a", "a"],
                         "criterion": "preference", "cancelled": False,
                         "value": ["A is better", None, "Tie", "B is better"]})
    frame, notes = comparisons_from_annotations(rows, {1: ["x", "y"], 2: ["y", "x"]}, pairwise)
    assert frame[["left", "right", "outcome"]].values.tolist() == [["x", "y", "left"], ["y", "x", "tie"]]
    assert notes == ["Left out: 1 empty answer(s).",
                     "Left out: 1 answer(s) on tasks without their hidden positions (imported without candidates?)."]
    _, best_worst, _ = made(tmp_path, "best-worst", "bw")
    rows = pd.DataFrame({"task_id": [1, 1, 2, 2], "annotation_id": [10, 10, 11, 11], "annotator": "a",
                         "criterion": ["best", "worst"] * 2, "cancelled": False, "value": ["A", "D", "B", "B"]})
    frame, notes = best_worst_from_annotations(rows, {1: list("wxyz"), 2: list("wxyz")}, best_worst)
    assert frame.set_index("item")["choice"].to_dict() == {"w": "best", "x": "", "y": "", "z": "worst"}
    assert notes == ["Left out: 1 annotation(s) that chose the same output as best and worst."]


_path = st.one_of(st.sampled_from(["id", "context", "each.text", "each.system", "turns.0.text", "a.b?", "each.", "",
                                   "x..y", "?", "responses"]), st.text(max_size=12))
_mapping = st.dictionaries(st.one_of(st.sampled_from(["context", "response", "item_id", "a.b", "response_a"]),
                                     st.text(max_size=8)), _path, max_size=4)


@settings(max_examples=int(os.environ.get("MAPPING_FUZZ_EXAMPLES", 150)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(input_=st.fixed_dictionaries({}, optional={
    "expand": _path, "item_id": st.one_of(_path, st.lists(_path, max_size=3)), "system": _path,
    "data": _mapping, "meta": _mapping, "formats": st.lists(st.sampled_from(["jsonl", "csv", "xml"]), max_size=3),
    "candidates": st.fixed_dictionaries({}, optional={
        "source": _path, "system": _path, "fields": _mapping, "per_task": st.integers(-1, 12),
        "per_item": st.integers(-1, 200), "each": st.lists(_mapping, max_size=3)})}))
def test_any_input_mapping_loads_or_is_refused_with_where_and_what(tmp_path, input_):
    """A hostile or mistaken `input:` never crashes the registry: it loads, or a RegistryError names the file."""
    import yaml

    if not (tmp_path / "labeling_configs" / "mine.xml").exists():
        made(tmp_path, "likert", "mine")
    text = (tmp_path / "projects.yaml").read_text()
    raw = yaml.safe_load(text)
    raw["projects"]["mine"]["input"] = input_
    path = tmp_path / "fuzzed.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        project = registry.load(path).get("mine")
    except RegistryError as error:
        assert str(path) in str(error)
    else:
        assert project.input is not None and importer_for(project).FIELDS is not None
