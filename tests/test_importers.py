"""Importers on real data, and bad input reported as file:line: field: message (offline dry runs)."""

from __future__ import annotations

import csv
import json
import re

import pytest

from evalstudio import importers
from evalstudio.base.errors import Problem
from evalstudio.tasks.scanning import iter_tasks, scan, split_task

from .conftest import DATA, EXAMPLES, PROTOCOLS, example_files


def tasks_of(reg, importer_for, protocol, files, part=None):
    """Task data of every project of the protocol (Circa: both parts), or of one part."""
    entries = {}  # one project per entry: without versions, a list's project yields the tasks of every list
    for project in reg.parts(protocol):
        if part in (None, project.name, project.entry):
            entries.setdefault(project.entry, project)
    items = [item for project in entries.values() for item in iter_tasks(project, importer_for(protocol), files)]
    problems = [i for i in items if isinstance(i, Problem)]
    assert not problems, problems
    return [data for _, data in items]


# what an annotator must never see in the task data (it goes to the task's meta): model outputs and ratings,
# gold labels and which interpretation is which, system / version names
HIDDEN = {"model_ratings", "model_reasoning", "model_answers", "model_version", "prediction", "gold_label",
          "shown_label_is", "is_control", "system", "tom", "goldstandard1", "judgements"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_examples_are_valid_and_carry_what_the_config_shows(reg, importer_for, protocol):
    for project in reg.parts(protocol):
        tasks = tasks_of(reg, importer_for, protocol, example_files(protocol), part=project.name)
        assert tasks
        for data in tasks:
            assert project.data_fields() <= data.keys()
            assert {"evalstudio_id", "item_id", "system"} <= data.keys()
            task = split_task(project, data)
            assert task["data"].keys() == project.data_fields() | {"evalstudio_id", "item_id"}
            assert not HIDDEN & task["data"].keys() and {**task["meta"], **task["data"]} == data
            assert task["meta"]["system"] not in task["data"]["evalstudio_id"] or protocol in {"sotopia", "cmv", "circa"}
        assert len({t["evalstudio_id"] for t in tasks}) == len(tasks)


def test_sotopia_keeps_evaluator_ratings_and_reasoning(reg, importer_for):
    path = EXAMPLES / "sotopia" / "episodes.jsonl"
    tasks = tasks_of(reg, importer_for, "sotopia", [path])
    episodes = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(tasks) == len(episodes) == 20
    dims = list(reg.entry("sotopia").criteria)
    for data, episode in zip(tasks, episodes):
        assert data["item_id"] == episode["episode_id"]
        for i, agent in enumerate(("agent1", "agent2")):
            assert data["model_ratings"][agent] == {d: episode["rewards"][i][d] for d in dims}
            assert set(data["model_reasoning"][agent]) == set(dims)  # a rationale per dimension
            assert data[f"{agent}_name"] == list(episode["agents_background"])[i]
        said = sum(1 for turn in episode["raw_messages"] for s, r, text in turn
                   if r == "Environment" and text.startswith("said:"))
        turns = data["dialogue"].split("\n\n")  # plain "Name: text" paragraphs
        assert sum(1 for t in turns if not t.split(": ", 1)[1].startswith("[")) == said
        assert all(t.split(": ", 1)[0] in episode["agents_background"] for t in turns)
        assert "<p" not in data["scenario"] and "<" not in data["agent1_goal"]
        assert data["model_version"] == episode["experiment_model_name_pairs"][0]


def test_circa_model_outputs_expand_to_the_published_mturk_batch(reg, importer_for):
    """60 model outputs -> the 90 items of the real MTurk batch: prediction shown, plus gold shown when it differs."""
    assert tasks_of(reg, importer_for, "circa", [EXAMPLES / "circa" / "model_explanations.csv"], part="circa_part1") == []
    tasks = tasks_of(reg, importer_for, "circa", [EXAMPLES / "circa" / "model_explanations.csv"], part="circa_part2")
    ours = sorted((t["context"], t["question"], t["answer"], t["explanation"], t["interpretation"]) for t in tasks)
    with open(DATA / "circa_mturk_batch.csv", encoding="utf-8", newline="") as f:
        published = sorted((r["context"].strip(), r["question"].strip(), r["answer"].strip(), r["explanation"].strip(),
                            r["interpretation"].strip()) for r in csv.DictReader(f))
    assert ours == published
    roles = [tuple(t["shown_label_is"]) for t in tasks]
    assert roles.count(("prediction", "gold")) == roles.count(("prediction",)) == roles.count(("gold",)) == 30
    assert all(t["is_control"] for t in tasks)


def test_circa_batch_form_joins_gold_from_the_tsv(reg, importer_for):
    files = [DATA / "circa_mturk_batch.csv", DATA / "circa_gold_slice.tsv"]
    tasks = tasks_of(reg, importer_for, "circa", files, part="circa_part2")
    with open(DATA / "circa_gold_slice.tsv", encoding="utf-8", newline="") as f:
        gold = {(r["context"], r["question-X"], r["answer-Y"]): r for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)}
    joined = [t for t in tasks if (t["context"], t["question"], t["answer"]) in gold]
    assert joined, "the slice holds rows of the batch"
    for t in joined:
        row = gold[(t["context"], t["question"], t["answer"])]
        assert t["circa_id"] == row["id"] and t["judgements"] == row["judgements"]
        assert t["is_control"] == (row["goldstandard2"] != "NA")
    assert not any(t["is_control"] for t in tasks if t not in joined)


def test_cmv_reads_thread_xml(reg, importer_for):
    tasks = {t["item_id"]: t for t in tasks_of(reg, importer_for, "cmv", [EXAMPLES / "cmv" / "thread.xml"])}
    assert sorted(tasks) == ["es4-es4a", "es6-es6a", "es7-es7a", "es8-es8a"]
    task = tasks["es4-es4a"]
    assert task["post_title"].startswith("CMV: Public libraries")
    assert task["comment"].startswith("Libraries are mostly not about books")  # inline <claim> markup removed
    assert "∆" in task["delta_reply"] and task["op_reply"] == task["delta_reply"]
    assert {i: (t["delta"], t["part"]) for i, t in tasks.items()} == {  # no ToM values: Q1 only, delta or not
        "es4-es4a": (True, "cmv_threads"), "es6-es6a": (False, "cmv_threads"), "es7-es7a": (False, "cmv_threads"),
        "es8-es8a": (True, "cmv_threads")}
    assert tasks["es7-es7a"]["op_reply"] == "(The OP did not reply to this comment.)"


@pytest.mark.parametrize("text, speakers", [
    ("Hi there\nHello! How can I help?\nI need a refund", ["A", "B", "A"]),
    ("User: Hi there\nBot: Hello!", ["User", "Bot"]),
])
def test_dialogue_accepts_newline_separated_context(reg, importer_for, tmp_path, text, speakers):
    path = tmp_path / "d.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([["context", "response", "system"], [text, "Sure.", "sys-a"]])
    [task] = tasks_of(reg, importer_for, "dialogue", [path])
    assert [t["speaker"] for t in task["context_turns"]] == speakers
    # shown as the document's two people, A and B, in order of appearance
    assert [turn.split(": ", 1)[0] for turn in task["context"].split("\n\n")] == ["AB"[speakers.index(x) % 2] for x in speakers]


def test_health_csv_and_jsonl_agree(reg, importer_for, tmp_path):
    record = json.loads((EXAMPLES / "health" / "assistant_versions.jsonl").read_text().splitlines()[0])
    path = tmp_path / "h.csv"
    header = ["scenario_id", "scenario", "system"] + [f"{w}_{i}" for i in range(1, 9) for w in ("user", "assistant")]
    row = [record["scenario_id"], record["scenario"], record["system"]] + [
        e[w] for e in record["exchanges"] for w in ("user", "assistant")]
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([header, row])
    [from_csv] = tasks_of(reg, importer_for, "health", [path])
    from_jsonl = tasks_of(reg, importer_for, "health", [EXAMPLES / "health" / "assistant_versions.jsonl"])[0]
    assert from_jsonl.pop("model_ratings") and from_jsonl.pop("model_version")  # the CSV carries no model outputs
    assert from_csv == from_jsonl
    assert len(from_csv["dialogue"].split("\n\n")) == 16


# ---- bad input: one row per protocol and defect -------------------------------------------------------------

def _first_record(protocol):
    path = next(p for p in example_files(protocol) if p.suffix == ".jsonl")
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])


def _jsonl(*records):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def _mutate(protocol, change):
    record = _first_record(protocol)
    change(record)
    return record


def _circa_rows(rows, header=("context", "question", "answer", "explanation", "prediction", "target")):
    import io
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(header)
    w.writerows(rows)
    return out.getvalue().encode("utf-8")


GOOD_CIRCA = ["X wants to know about Y's food preferences.", "Do you like pizza?", "I love it.", "Loving it means yes.", "Yes", "Yes"]


def _bad_inputs():
    rows = []
    for protocol, missing, out_of_range in [
        ("sotopia", "scenario", lambda r: r["rewards"][1].update(secret=3.0)),
        ("cmv", "comment", lambda r: r["model_answers"].update(persuasiveness="Maybe")),
        ("dialogue", "context", lambda r: r["responses"][1].update(model_ratings={"appropriateness": 7})),
        ("health", "system", lambda r: r.update(model_ratings={"explainability": 10.5})),
    ]:
        good = _first_record(protocol)
        truncated = _jsonl(good) + json.dumps(good)[:200].encode() + b"\n"
        range_field = {"sotopia": "rewards[1].secret", "cmv": "model_answers.persuasiveness",
                       "dialogue": "responses[1].model_ratings.appropriateness",
                       "health": "model_ratings.explainability"}[protocol]
        rows += [
            (protocol, "truncated", "x.jsonl", truncated, 2, None, "invalid JSON"),
            (protocol, "missing", "x.jsonl", _jsonl(good, _mutate(protocol, lambda r: r.pop(missing))), 2, missing, "missing"),
            (protocol, "out_of_range", "x.jsonl", _jsonl(_mutate(protocol, out_of_range)), 1, range_field, "range" if protocol != "cmv" else "not one of"),
            (protocol, "empty", "x.jsonl", b"", None, None, "empty"),
            (protocol, "encoding", "x.jsonl", _jsonl(good) + json.dumps({"note": "café"}, ensure_ascii=False).encode("latin-1") + b"\n", 2, None, "UTF-8"),
        ]
    rows += [
        ("circa", "truncated", "x.csv", _circa_rows([GOOD_CIRCA, GOOD_CIRCA[:3]]), 3, None, "expected 6 columns"),
        ("circa", "missing", "x.csv", _circa_rows([GOOD_CIRCA[:3] + GOOD_CIRCA[4:]], header=("context", "question", "answer", "prediction", "target")), 1, "explanation", "missing column"),
        ("circa", "out_of_range", "x.csv", _circa_rows([GOOD_CIRCA, GOOD_CIRCA[:4] + ["Maybe", "Yes"]]), 3, "prediction", "not one of"),
        ("circa", "empty", "x.csv", b"", None, None, "empty"),
        ("circa", "encoding", "x.csv", _circa_rows([GOOD_CIRCA])[:-2] + "é\n".encode("latin-1"), 2, None, "UTF-8"),
    ]
    return rows


BAD_INPUTS = _bad_inputs()


@pytest.mark.parametrize("protocol, defect, name, content, line, field, message", BAD_INPUTS,
                         ids=[f"{r[0]}-{r[1]}" for r in BAD_INPUTS])
def test_bad_input_is_reported_with_file_line_field(reg, importer_for, tmp_path, protocol, defect, name, content, line, field, message):
    path = tmp_path / name
    path.write_bytes(content)
    result = scan(reg.parts(protocol)[0], importer_for(protocol), [path])
    assert result.problems, "the defect must be found"
    problem = result.problems[0]
    assert (problem.path, problem.line, problem.field) == (str(path), line, field), str(problem)
    assert message in problem.message
    where = f"{path}:{line}: " if line else f"{path}: "
    assert str(problem).startswith(where + (f"{field}: " if field else ""))


def test_all_problems_are_reported_not_just_the_first(reg, importer_for, tmp_path):
    bad = _mutate("dialogue", lambda r: r.pop("context"))
    path = tmp_path / "many.jsonl"
    path.write_bytes(_jsonl(bad, _first_record("dialogue"), bad, bad))
    result = scan(reg.entry("dialogue"), importer_for("dialogue"), [path])
    assert [p.line for p in result.problems] == [1, 3, 4]


def test_duplicate_ids_are_reported(reg, importer_for, tmp_path):
    path = tmp_path / "dup.jsonl"
    path.write_bytes(_jsonl(_first_record("health"), _first_record("health")))
    [problem] = [p for p in scan(reg.entry("health"), importer_for("health"), [path]).problems if p.field == "evalstudio_id"]
    assert problem.line == 2 and problem.field == "evalstudio_id" and re.search(r"first seen at .*dup.jsonl:1", problem.message)


def test_missing_file_is_reported(reg, importer_for, tmp_path):
    [problem] = scan(reg.entry("health"), importer_for("health"), [tmp_path / "nope.jsonl"]).problems
    assert problem.message == "no such file"


@pytest.mark.parametrize("change, message", [
    (lambda records: records[:3], "has 3 version(s)"),
    (lambda records: records + [{**records[0], "system": "v5-extra"}], "has 5 version(s)"),
    (lambda records: records[:3] + [{**records[3], "scenario_id": "other"}], "has 3 version(s)"),
])
def test_health_design_four_versions_of_every_scenario(reg, importer_for, tmp_path, change, message):
    """Document 004: every scenario in 4 versions; a missing or extra version is an error naming file and line."""
    records = [json.loads(line) for line in (EXAMPLES / "health" / "assistant_versions.jsonl").read_text().splitlines()]
    assert not scan(reg.entry("health"), importer_for("health"), [EXAMPLES / "health" / "assistant_versions.jsonl"]).problems
    path = tmp_path / "h.jsonl"
    path.write_bytes(_jsonl(*change(records)))
    problems = [p for p in scan(reg.entry("health"), importer_for("health"), [path]).problems if p.field == "system"]
    assert problems and message in problems[0].message and problems[0].line == 1, problems


def test_circa_instruction_examples_are_excluded(reg, importer_for, tmp_path):
    """Document 002: conversations used as examples in the survey instructions are not survey items."""
    example = ["Y has just told X that he/she is thinking of buying a flat in New York.", "Is a basement flat okay?",
               "I need to be above ground.", "A basement is not above ground.", "No", "No"]
    path = tmp_path / "c.csv"
    path.write_bytes(_circa_rows([GOOD_CIRCA, example]))
    tasks = tasks_of(reg, importer_for, "circa", [path])
    assert {t["question"] for t in tasks} == {GOOD_CIRCA[1]}


def test_circa_part1_questions_are_control_items_left_out_of_part2(reg, importer_for, tmp_path):
    """Document 002: Part I is quality control on its own conversations (no model output), and "the conversations
    used as questions ... are excluded from our main survey"."""
    part1_file = EXAMPLES / "circa" / "part1_questions.csv"
    with open(part1_file, encoding="utf-8", newline="") as f:
        questions = list(csv.DictReader(f))
    part1 = tasks_of(reg, importer_for, "circa", [part1_file], part="circa_part1")
    assert [(t["question"], t["gold_label"]) for t in part1] == [(q["question"], q["gold_label"]) for q in questions]
    assert all(t["is_control"] and "explanation" not in t and "interpretation" not in t for t in part1)
    assert tasks_of(reg, importer_for, "circa", [part1_file], part="circa_part2") == []
    # an explanation item on the conversation of a Part I question gets no Part II task
    q = questions[0]
    path = tmp_path / "explanations.csv"
    path.write_bytes(_circa_rows([GOOD_CIRCA, [q["context"], q["question"], q["answer"], "Some explanation.", "Yes", "Yes"]]))
    part2 = tasks_of(reg, importer_for, "circa", [part1_file, path], part="circa_part2")
    assert {t["question"] for t in part2} == {GOOD_CIRCA[1]}
    # a Part I file is checked like any other: the gold label must be one of the five options
    bad = tmp_path / "bad_part1.csv"
    bad.write_text("context,question,answer,gold_label\nX asks.,Q?,A.,Maybe\n", encoding="utf-8")
    [problem] = scan(reg.entry("circa_part1"), importer_for("circa"), [bad]).problems
    assert (problem.line, problem.field) == (2, "gold_label") and "not one of" in problem.message


@pytest.mark.parametrize("protocol, suffix, body", [
    ("dialogue", ".jsonl", '{"id": "x", "context": "A: hi", "responses": [{"system": "s", "text": "ok"}], "topic": "t1", '
                           '"split": "test"}\n{"id": "y", "context": "A: yo", "responses": [{"system": "s", "text": "ok"}], '
                           '"topic": "t2"}\n'),
    ("health", ".jsonl", None),
])
def test_unknown_fields_are_kept_as_metadata_and_reported_once_per_file(reg, caplog, tmp_path, protocol, suffix, body):
    import json as _json
    import logging

    from evalstudio.tasks.scanning import scan, split_task

    if body is None:  # health: the shipped example with two extra fields on every record
        lines = [_json.loads(line) for line in example_files(protocol)[0].read_text().splitlines() if line.strip()]
        body = "".join(_json.dumps({**r, "topic": "t1", "split": "test"}) + "\n" for r in lines)
    path = tmp_path / f"items{suffix}"
    path.write_text(body)
    project = reg.entry(protocol)
    with caplog.at_level(logging.WARNING):
        result = scan(project, importers.get(project.importer), [path])
        result.warn_unknown(project)
    assert result.problems == []
    warnings = [r.getMessage() for r in caplog.records if "not used by" in r.getMessage()]
    assert warnings == [f"{path}: field(s) split, topic are not used by the {protocol} protocol; kept with each task as "
                        "metadata (its meta)"]
    tasks = [split_task(project, data) for _, data in iter_tasks(project, importers.get(project.importer), [path])]
    assert tasks[0]["meta"]["topic"] == "t1" and "topic" not in tasks[0]["data"]


def test_cmv_asks_for_tom_values_only_where_they_would_be_shown():
    """`evalstudio generate cmv` extracts ToM values for delta threads without them; a non-delta thread goes to
    cmv_threads (Q1 only), where they would never be shown, so no LLM call is spent on it."""
    cmv = importers.get("cmv")
    thread = {"post": {"title": "CMV: x", "text": "view"}, "comment": {"text": "reason"}}
    assert cmv.generation_input({**thread, "delta_reply": {"text": "∆"}}) == {"post_title": "CMV: x", "post": "view",
                                                                             "comment": "reason"}
    assert cmv.generation_input({**thread, "delta": False}) is None
    assert cmv.generation_input({**thread, "delta_reply": {"text": "∆"}, "tom": {"post": {}}}) is None


@pytest.mark.parametrize("protocol, part", [("dialogue", "dialogue"), ("health", "health"), ("circa", "circa_part2")])
def test_no_id_carries_a_code_of_the_system_across_items(reg, importer_for, protocol, part):
    """The ids Label Studio shows in its task list (evalstudio_id, item_id) hold no code that is the same for one
    system (version, shown interpretation) in every item: the suffix is one hash of item and system together."""
    tasks = tasks_of(reg, importer_for, protocol, example_files(protocol), part=part)
    version = "shown_label_is" if protocol == "circa" else "system"
    suffixes: dict[str, set[str]] = {}
    for task in tasks:
        suffixes.setdefault(task["evalstudio_id"].rsplit(":", 1)[1], set()).add(task["item_id"])
        assert str(task[version]).lower() not in task["evalstudio_id"].lower()
    assert all(len(items) == 1 for items in suffixes.values())  # no suffix is shared by two items


# ESA's [MISSING] word: what the instructions tell annotators to highlight (before: a record without the field was
# refused as `missing: missing`, and "" or "[FEHLT]" made tasks with no [MISSING] word to highlight)
ESA_MISSING = [  # (the record's own field, None: left out; the problem's message, None: valid)
    (None, None),
    ("[MISSING]", None),
    ("", "'': this protocol shows '[MISSING]' here, the word its instructions name; give '[MISSING]' or leave"),
    ("[FEHLT]", "'[FEHLT]': this protocol shows '[MISSING]' here"),
]


@pytest.mark.parametrize("given, message", ESA_MISSING, ids=["left-out", "as-named", "empty", "other-word"])
def test_esa_shows_the_missing_word_its_instructions_name(reg, tmp_path, given, message):
    from evalstudio.protocols.mapping import importer_for

    record = {"id": "1", "system": "A", "source": "s", "target": "t", **({"missing": given} if given is not None else {})}
    path = tmp_path / "esa.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    items = list(iter_tasks(reg.get("esa"), importer_for(reg.get("esa")), [path]))
    problems = [i for i in items if isinstance(i, Problem)]
    if message is None:
        assert not problems and [data["missing"] for _, data in items] == ["[MISSING]"]
    else:
        assert [(p.line, p.field) for p in problems] == [(1, "missing")] and message in problems[0].message, problems
