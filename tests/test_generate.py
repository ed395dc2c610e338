"""The ML backend writes the model outputs annotators judge where an input lacks them (CMV ToM values, Circa
explanations): they land in the displayed item, never in an answer control, and the task's meta names the model.

A real backend process (`evalstudio ml-backend`) with a local OpenAI-compatible LLM (tests/fake_llm.py)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalstudio import importers
from evalstudio.labelstudio.server import wait_healthy
from evalstudio.tasks.importing import import_files
from evalstudio.tasks.scanning import iter_tasks, split_task

from .conftest import ROOT, free_port, only_on_the_last_database
from .fake_llm import FakeLLM

EVALSTUDIO = [sys.executable, "-m", "evalstudio.cli"]
MODEL = "gen-model"
EXAMPLE_THREADS = ROOT / "examples" / "cmv" / "thread.xml"


@pytest.fixture(scope="module")
def thread(tmp_path_factory) -> Path:
    """The first thread of the shipped example (a delta thread without ToM values), alone in a file."""
    text = EXAMPLE_THREADS.read_text()
    first = text[text.index("<thread ID"):text.index("</thread>") + len("</thread>")]
    path = tmp_path_factory.mktemp("thread") / "thread.xml"
    path.write_text(f'<?xml version="1.0"?>\n{first}\n')
    return path
CATEGORIES = ("beliefs", "desires", "intentions", "emotions", "knowledge", "perspective_taking")


@pytest.fixture(scope="module")
def generating_backend(tmp_path_factory):
    """(backend URL, fake LLM): an ML backend whose LLM is the local fake."""
    directory = tmp_path_factory.mktemp("gen-backend")
    with FakeLLM() as llm:
        port = free_port()
        env = {**os.environ, "EVALSTUDIO_PROJECTS": str(ROOT / "projects.yaml"), "EVALSTUDIO_LLM_BASE_URL": llm.url,
               "EVALSTUDIO_LLM_MODEL": MODEL, "EVALSTUDIO_LLM_API_KEY": "test-key"}
        env.pop("EVALSTUDIO_ML_BASIC_AUTH", None)
        log = open(directory / "backend.log", "w")
        process = subprocess.Popen([*EVALSTUDIO, "ml-backend", "--port", str(port), "--workers", "1",
                                    "--model-dir", str(directory / "models")], env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, 60, process, "the ML backend")
            yield url, llm, directory / "ml-backend.auth"
        finally:
            process.terminate()
            process.wait(timeout=20)


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*EVALSTUDIO, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "EVALSTUDIO_PROJECTS": str(ROOT / "projects.yaml"), **(env or {})})


@pytest.mark.server
def test_cmv_tom_values_are_generated_into_the_shown_item(generating_backend, reg, label_studio, client, tmp_path,
                                                          thread):
    """`generate` fills a thread's ToM values, and the import shows them in the item. Once, on the last database:
    what is generated and shown is evalstudio's; the import's storing is tested on both elsewhere."""
    only_on_the_last_database(label_studio)
    url, llm, auth = generating_backend
    out = tmp_path / "threads_tom.jsonl"
    done = run("generate", "cmv", str(thread), "--ml-url", url, "-o", str(out), "--basic-auth-file", str(auth))
    assert done.returncode == 0, done.stderr
    assert "1 of 1 record(s) completed by llm:gen-model" in done.stdout
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["tom_generated_by"] == f"llm:{MODEL}"
    for side, text in (("post", record["post"]["text"]), ("comment", record["comment"]["text"])):
        for category in CATEGORIES:  # every category, from the text of its own side
            entry = record["tom"][side][category]
            assert entry["values"] == [entry["content"]]
            assert entry["content"].startswith("generated from ")
            expected = " ".join((f"Title: {record['post']['title']} {text}" if side == "post" else text).split()[:6])
            assert entry["content"] == f"generated from {expected}"
    prompts = [r["messages"][0]["content"] for r in llm.requests if r["model"] == MODEL]
    assert any("Do not add" in p or "do not add" in p for p in prompts)

    # imported into a real Label Studio: shown in the item (task data), model named in meta, no answer prefilled
    project = reg.entry("cmv_tom").model_copy(update={"title": "cmv generated ToM (test)"})
    report = import_files(project, importers.get("cmv"), [out], client)
    [task] = client.export_tasks(report.project_id)
    shown = task["data"]
    assert shown["comment_beliefs"] == f"Values: {record['tom']['comment']['beliefs']['content']}. " \
                                       f"Content: {record['tom']['comment']['beliefs']['content']}"
    assert "No TOM values were extracted" not in json.dumps(shown)
    assert task["meta"]["tom_generated_by"] == f"llm:{MODEL}"
    assert "tom_generated_by" not in shown
    assert task["predictions"] == [] and task["annotations"] == []


def test_circa_explanations_are_generated_for_empty_cells_only(generating_backend, reg, tmp_path):
    url, llm, auth = generating_backend
    source = tmp_path / "explanations.csv"
    columns = ["context", "question", "answer", "prediction", "target", "explanation"]
    rows = [
        ["X wants to know about Y's weekend.", "Are you free on Saturday?", "I'm working all day.", "No", "No",
         "Working all day means Y is not free."],
        ["Y has just moved to a new city.", "Do you like your new flat?", "It's a bit small for me.", "No", "Yes", ""],
    ]
    with open(source, "w", newline="") as f:
        csv.writer(f).writerows([columns, *rows])
    out = tmp_path / "completed.csv"
    done = run("generate", "circa", str(source), "--ml-url", url, "-o", str(out), "--basic-auth-file", str(auth))
    assert done.returncode == 0, done.stderr
    assert "1 of 2 record(s) completed" in done.stdout
    project = reg.entry("circa_part2")
    tasks = [split_task(project, data) for _, data in iter_tasks(project, importers.get("circa"), [out])]
    by_question = {}
    for task in tasks:
        by_question.setdefault(task["data"]["question"], []).append(task)
    [kept] = by_question["Are you free on Saturday?"]
    assert kept["data"]["explanation"] == rows[0][5] and kept["meta"]["explanation_generated_by"] is None
    written = by_question["Do you like your new flat?"]  # model wrong: its prediction and the gold label shown
    assert {t["data"]["interpretation"] for t in written} == {"No", "Yes"}
    for task in written:
        assert task["data"]["explanation"].startswith("generated from Context: Y has just moved")
        assert task["meta"]["explanation_generated_by"] == f"llm:{MODEL}"
    # the explanation was written for the model's interpretation, as the document's explanations are
    assert "Interpretation: No" in next(r["messages"][1]["content"] for r in llm.requests
                                        if "Do you like your new flat?" in r["messages"][1]["content"])
    said = " ".join(done.stdout.split())
    assert "the LLM was asked 1 time(s), 0 answer(s) came from its cache" in said, said
    # the same again: the backend's cache answers (evalstudio.base.chat), the LLM is asked nothing, the file the same
    asked = len(llm.requests)
    again = run("generate", "circa", str(source), "--ml-url", url, "-o", str(tmp_path / "again.csv"),
                "--basic-auth-file", str(auth), "--price-in", "3", "--price-out", "15")
    assert again.returncode == 0, again.stderr
    assert len(llm.requests) == asked
    assert "the LLM was asked 0 time(s), 1 answer(s) came from its cache" in " ".join(again.stdout.split())
    assert (tmp_path / "again.csv").read_text() == out.read_text()


def test_an_item_the_model_cannot_complete_means_nothing_is_written(generating_backend, tmp_path, thread):
    url, _, auth = generating_backend
    broken = tmp_path / "thread.xml"
    broken.write_text(thread.read_text().replace("Libraries are mostly not about books today.",
                                                 "BROKEN-OUTPUT Libraries are mostly not about books today."))
    out = tmp_path / "out.jsonl"
    done = run("generate", "cmv", str(broken), "--ml-url", url, "-o", str(out), "--basic-auth-file", str(auth))
    assert done.returncode == 2
    assert f"{broken}:" in done.stderr and "tom: the ML backend wrote nothing: the comment ToM answer lacks the " \
                                          "category beliefs" in done.stderr
    assert "nothing was written" in done.stderr
    assert not out.exists() and not list(tmp_path.glob(".*tmp"))


def test_generate_needs_the_backends_credentials(generating_backend, tmp_path, thread):
    url, _, auth = generating_backend
    wrong = tmp_path / "wrong.auth"
    wrong.write_text("evalstudio:not-the-password\n")
    done = run("generate", "cmv", str(thread), "--ml-url", url, "-o", str(tmp_path / "o.jsonl"), "--basic-auth-file", str(wrong))
    assert done.returncode == 1 and "refused the credentials" in done.stderr
    assert "not-the-password" not in done.stderr + done.stdout


@pytest.mark.parametrize("args, code, message", [  # 2: the input given is wrong; 1: connection settings or server
    (["dialogue", "x.jsonl"], 2, "dialogue has nothing for a model to generate; protocols with generated outputs: circa, cmv"),
    (["cmv", str(EXAMPLE_THREADS), "--ml-url", "ftp://127.0.0.1:1"], 1, "--ml-url must be an http:// or https:// URL"),
    (["cmv", str(EXAMPLE_THREADS), "--ml-url", "http://user:s3cret-pw@127.0.0.1:1"], 1, "must not carry credentials"),
    (["cmv", str(EXAMPLE_THREADS), "--ml-url", "http://127.0.0.1:9"], 1, "cannot reach the ML backend at http://127.0.0.1:9"),
])
def test_generate_refuses_clearly(args, code, message, tmp_path):
    (tmp_path / "a.auth").write_text("u:p\n")
    done = run("generate", *args, "-o", str(tmp_path / "out.jsonl"), "--basic-auth-file", str(tmp_path / "a.auth"))
    assert done.returncode == code and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "s3cret-pw" not in done.stderr + done.stdout


@pytest.mark.parametrize("body, status", [
    ("[1]", 400), ("null", 400), ("{}", 400), ('{"project": 5}', 400), ('{"project": "nosuch", "items": []}', 400),
    ('{"project": "dialogue", "items": [{}]}', 400),  # nothing to generate for dialogue
    ('{"project": "cmv", "items": []}', 400), ('{"project": "cmv", "items": [{"post": 1}]}', 400),
    ('{"project": "cmv", "items": "abc"}', 400), ("not json", 400),
    (json.dumps({"project": "cmv", "items": [{"post_title": "t", "post": "p", "comment": "c"}] * 33}), 400),
])
def test_generate_endpoint_answers_bad_bodies_with_400(body, status, tmp_path, monkeypatch):
    from evalstudio.ml_backend.app import create_app

    monkeypatch.setenv("EVALSTUDIO_MODEL_DIR", str(tmp_path / "models"))
    app = create_app("u:p").test_client()
    assert app.post("/generate", data=body, content_type="application/json").status_code == 401
    response = app.post("/generate", data=body, content_type="application/json", headers={"Authorization": "Basic dTpw"})
    assert response.status_code == status
    assert "Traceback" not in response.get_data(as_text=True) and "error" in response.get_json()
