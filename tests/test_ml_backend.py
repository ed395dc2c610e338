"""The ML backend as a real process next to a real Label Studio: predictions for every protocol."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import httpx
import numpy as np
import pytest

from evalstudio.ml_backend.model import predict_tasks
from evalstudio.ml_backend.predictors import LearnerPredictor, LLMPredictor
from evalstudio.tasks.importing import import_files
from evalstudio.values.controls import control_range
from evalstudio.values.results import dotted_get, task_fields

from .conftest import PROJECTS, example_files, only_on_the_first_database, with_absolute_files
from .fake_llm import FakeLLM


def check_prediction(project, prediction):
    """Valid for the config (SDK) and inside every numeric control's range (which the SDK does not check)."""
    li = project.interface
    assert li.validate_prediction({"result": prediction["result"]}, return_errors=True) == []
    for region in prediction["result"]:
        control = li.get_control(region["from_name"])
        if control.tag in ("Number", "Rating"):
            lo, hi = control_range(control)
            assert lo <= next(iter(region["value"].values())) <= hi


def stored_values(project, data) -> dict:
    """What the stored predictor should prefill, read independently from projects.yaml paths."""
    out = {}
    for criterion, spec in project.criteria.items():
        for agent, control in project.controls(criterion):
            if spec.model_output:
                value = dotted_get(data, spec.model_output.format(agent=agent) if agent else spec.model_output)
                if value is not None:
                    out[control] = value
    return out


@pytest.mark.server
@pytest.mark.parametrize("protocol", PROJECTS)
def test_label_studio_gets_stored_predictions_from_the_backend(reg, importer_for, label_studio, client, request,
                                                               protocol):
    """With model-assisted labelling opted in (prefill: true), the stored model outputs of tasks imported earlier
    (before the opt-in) become predictions through the ML backend. Once, on the first database: the backend's
    answers and Label Studio's requests for them do not depend on the database; storing tasks with predictions,
    where the database could matter, is tested on both (tests/test_faults.py)."""
    only_on_the_first_database(label_studio)
    url, log, auth = request.getfixturevalue("ml_backend")
    project = reg.entry(protocol).model_copy(update={"prefill": True, "title": f"{protocol} prefill by the backend"})
    study = project.study_name
    earlier = project.model_copy(update={"prefill": False})  # imported before the opt-in: no predictions yet
    report = import_files(earlier, importer_for(study), example_files(study), client)
    assert all(p == [] for p in client.predictions(report.project_id).values())
    client.connect_ml_backend(report.project_id, url, auth)  # Label Studio then sends the backend's basic auth
    assert client.connect_ml_backend(report.project_id, url, auth)[1] is False  # again: credentials renewed, no copy
    tasks = {t["id"]: task_fields(t) for page in client.full_task_pages(report.project_id) for t in page}
    client.prefill(report.project_id, batch_size=7)
    client.prefill(report.project_id)  # a second run adds no duplicates
    predictions = client.predictions(report.project_id)
    served = 0
    for task_id, data in tasks.items():
        expected = stored_values(project, data)
        if not expected:  # e.g. the CMV thread read from XML carries no ToM extraction
            assert predictions[task_id] == []
            continue
        [prediction] = predictions[task_id]
        check_prediction(project, prediction)
        got = {r["from_name"]: next(iter(r["value"].values())) for r in prediction["result"]}
        for control, value in expected.items():
            assert got[control] in (value, [value]), control
        assert prediction["model_version"] == str(data.get("model_version") or "stored")
        served += 1
    if protocol.startswith("circa"):  # Part I control questions carry no model output, and in Part II the model's
        assert served == 0            # output is what is judged: neither has a model answer to prefill
        return
    if protocol == "cmv_threads":  # the threads read from XML have no automated persuasiveness answer; the JSONL
        # threads (every thread is in cmv_threads) have one
        assert 0 < served < len(tasks) and "carries none of the model fields" in log.read_text()
        return
    assert served == len(tasks) > 0


@pytest.mark.server
@pytest.mark.parametrize("protocol", PROJECTS)
def test_stored_predictions_arrive_with_the_import(reg, importer_for, label_studio, client, protocol):
    """prefill: true with the stored predictor: every task goes in with its model outputs as its one prediction, in
    the import itself (no ML backend is running here); a second import adds no task and no prediction. Once, on the
    first database: which predictions a task gets is evalstudio's; an import of tasks with predictions, retried
    and checked for duplicates, runs on both databases in tests/test_faults.py."""
    only_on_the_first_database(label_studio)
    project = reg.entry(protocol).model_copy(update={"prefill": True, "title": f"{protocol} predictions at import"})
    study = project.study_name
    report = import_files(project, importer_for(study), example_files(study), client, batch_size=7)
    tasks = {t["id"]: task_fields(t) for page in client.full_task_pages(report.project_id) for t in page}
    predictions = client.predictions(report.project_id)
    expected = {task_id: stored_values(project, data) for task_id, data in tasks.items()}
    assert report.predicted == sum(1 for values in expected.values() if values) == report.created - sum(
        1 for values in expected.values() if not values)
    for task_id, data in tasks.items():
        if not expected[task_id]:
            assert predictions[task_id] == []
            continue
        [prediction] = predictions[task_id]
        check_prediction(project, prediction)
        got = {r["from_name"]: next(iter(r["value"].values())) for r in prediction["result"]}
        assert all(got[control] in (value, [value]) for control, value in expected[task_id].items())
        assert prediction["model_version"] == str(data.get("model_version") or "stored")
    again = import_files(project, importer_for(study), example_files(study), client)
    assert (again.created, again.predicted) == (0, 0)
    assert client.predictions(report.project_id) == predictions
    if protocol in ("sotopia", "dialogue", "health", "cmv_tom"):
        assert report.predicted == len(tasks) > 0


@pytest.mark.server
def test_bad_tasks_get_no_prediction_and_never_a_500(reg, ml_backend):
    url, log, auth = ml_backend
    config = reg.entry("dialogue").label_config
    tasks = [{"id": 991, "data": {"context": [], "response": "hi"}},  # no model outputs
             {"id": 992, "data": {"model_ratings": {"appropriateness": 9}}},  # out of range: skipped, not sent
             {"id": 993, "data": "not a dict"},
             {"id": 994}]  # no data at all
    user, _, password = auth.partition(":")
    response = httpx.post(f"{url}/predict", json={"tasks": tasks, "label_config": config, "project": "1.1"},
                          auth=(user, password), timeout=30)
    assert response.status_code == 200
    assert response.json()["results"] == [[], [], [], []]
    unknown = httpx.post(f"{url}/predict", json={"tasks": tasks[:1], "label_config": "<View><Text name='t' value='$t'/></View>"},
                         auth=(user, password), timeout=30)
    assert httpx.post(f"{url}/predict", json={"tasks": tasks}, timeout=30).status_code == 401  # no credentials
    assert unknown.status_code == 200 and unknown.json()["results"] == [[]]
    text = log.read_text()
    assert "task 991 (dialogue): no prediction: the task carries none of the model fields" in text
    assert "9 is outside appropriateness's range 1..5" in text
    assert "task 993 (dialogue): no prediction" in text
    assert "task 994 (dialogue): no prediction" in text  # a task without data: a reason, never a 500
    assert "matches no protocol" in text


AUTH = {"Authorization": "Basic bGFiZWxzdHVkaW86czNjcmV0"}  # labelstudio:s3cret


@pytest.fixture
def guarded_app(tmp_path, monkeypatch):
    """The backend's Flask app in this process, with basic auth and its own model folder."""
    from evalstudio.ml_backend.app import create_app

    monkeypatch.setenv("EVALSTUDIO_MODEL_DIR", str(tmp_path / "models"))
    return create_app("labelstudio:s3cret").test_client()


@pytest.mark.parametrize("method, route", [("post", "/predict"), ("post", "/setup"), ("post", "/webhook"),
                                           ("post", "/generate"), ("get", "/is_training"), ("post", "/train"),
                                           ("get", "/metrics"), ("get", "/nosuch")])
def test_basic_auth_guards_every_route(guarded_app, method, route):
    assert getattr(guarded_app, method)(route, json={}).status_code == 401
    wrong = {"Authorization": "Basic bGFiZWxzdHVkaW86d3Jvbmc="}  # labelstudio:wrong
    assert getattr(guarded_app, method)(route, json={}, headers=wrong).status_code == 401
    assert getattr(guarded_app, method)(route, json={}, headers=AUTH).status_code != 401


def test_health_is_open_and_says_nothing_else(guarded_app, tmp_path):
    response = guarded_app.get("/health")
    assert response.status_code == 200 and response.get_json() == {"status": "UP"}  # no model folder path


@pytest.mark.parametrize("body", ["[1]", "null", "{}", '{"tasks": "x"}', '{"tasks": [1]}', '{"tasks": null}',
                                  '{"tasks": [], "label_config": 5}', '{"tasks": [], "params": [1]}', "not json", ""])
def test_malformed_predict_bodies_get_a_short_4xx(guarded_app, body):
    response = guarded_app.post("/predict", data=body, content_type="application/json", headers=AUTH)
    text = response.get_data(as_text=True)
    assert 400 <= response.status_code < 500, text
    assert "Traceback" not in text and "site-packages" not in text and len(text) < 300


def test_request_bodies_are_bounded(tmp_path, monkeypatch):
    from evalstudio.ml_backend.app import create_app

    monkeypatch.setenv("EVALSTUDIO_MODEL_DIR", str(tmp_path / "models"))
    app = create_app("labelstudio:s3cret", max_body=64 * 1024).test_client()
    try:
        big = json.dumps({"action": "ANNOTATION_CREATED", "project": {"id": 1}, "pad": "x" * 200_000})
        for route in ("/webhook", "/predict", "/setup"):
            response = app.post(route, data=big, content_type="application/json", headers=AUTH)
            assert response.status_code == 413 and "larger than 65536 bytes" in response.get_json()["error"]
    finally:
        create_app("labelstudio:s3cret")  # the app is label-studio-ml's module global: restore the default bound
    assert not any(p.is_dir() for p in (tmp_path / "models").iterdir())  # nothing of a request written to disk


def test_webhooks_train_only_connected_projects_in_one_bounded_worker(guarded_app, reg, tmp_path):
    import multiprocessing
    import threading

    config = reg.entry("dialogue").label_config
    event = {"action": "ANNOTATION_CREATED", "project": {"id": 77, "label_config": config}, "pad": "x" * 100_000}
    refused = guarded_app.post("/webhook", json=event, headers=AUTH)
    assert refused.status_code == 403 and "project 77 is not connected" in refused.get_json()["error"]
    assert guarded_app.post("/setup", json={"project": "77.1700000000", "schema": config}, headers=AUTH).status_code == 200
    answers = [guarded_app.post("/webhook", json=event, headers=AUTH) for _ in range(40)]
    assert all(a.status_code == 201 for a in answers)
    assert sum(a.get_json()["queued"] for a in answers) >= 1
    assert sum(t.name == "evalstudio-trainer" for t in threading.enumerate()) == 1  # one worker, not 40 forks
    assert multiprocessing.active_children() == []
    other = {**event, "project": {"id": 78, "label_config": config}}
    assert guarded_app.post("/webhook", json=other, headers=AUTH).status_code == 403
    assert guarded_app.post("/webhook", json={"action": "PROJECT_UPDATED"}, headers=AUTH).status_code == 200
    for bad in ([1], {"action": 5}, {"action": "ANNOTATION_CREATED", "project": [1]},
                {"action": "ANNOTATION_CREATED", "project": {"id": "x"}}):
        assert guarded_app.post("/webhook", json=bad, headers=AUTH).status_code == 400
    files = sorted(p.name for p in (tmp_path / "models").iterdir())
    assert not any((tmp_path / "models" / f).is_dir() for f in files)  # no per-event job folders (event.json)
    assert oct((tmp_path / "models").stat().st_mode & 0o777) == "0o700"
    assert oct((tmp_path / "models" / "connected.json").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("protocol", PROJECTS)
def test_llm_judge_answers_validate_against_the_config(reg, importer_for, protocol):
    from evalstudio.tasks.scanning import iter_tasks, split_task

    project = reg.entry(protocol)
    study = project.study_name
    tasks = [{"id": i, **split_task(project, d)}
             for i, (_, d) in enumerate(iter_tasks(project, importer_for(study), example_files(study)))][:3]
    with FakeLLM() as llm:
        for model in ("judge-ok", "judge-fenced"):
            predictions = predict_tasks(project, tasks, LLMPredictor(llm.url, model, "test-key"))
            for prediction in predictions:
                check_prediction(project, prediction)
                assert prediction["model_version"] == f"llm:{model}"
                rated = {r["from_name"] for r in prediction["result"]}
                assert {c for _, c in sum((project.controls(n) for n in project.criteria), [])} <= rated
        prompt = llm.requests[0]["messages"][0]["content"]  # the protocol's rubric and the answer schema
        import html
        import re

        assert html.unescape(re.search(r"<h3>(.*?)</h3>", project.instructions).group(1)) in prompt
        # the protocol's own wording from the config: its first question or definition text reaches the judge
        first_text = re.search(r'<Text name="\w+" value="([^"$][^"]*)"', project.label_config).group(1)
        assert html.unescape(first_text) in prompt
        assert all(control in prompt for name in project.criteria for _, control in project.controls(name))


def test_malformed_llm_answers_are_reported_not_crashed_on(reg, importer_for, caplog):
    from evalstudio.tasks.scanning import iter_tasks

    project = reg.entry("health")
    tasks = [{"id": 7, "data": d} for _, d in iter_tasks(project, importer_for("health"), example_files("health"))][:1]
    with FakeLLM() as llm, caplog.at_level(logging.INFO, logger="evalstudio.ml_backend"):
        assert predict_tasks(project, tasks, LLMPredictor(llm.url, "judge-broken")) == [[]]
        assert "the LLM answer is not valid JSON" in caplog.text
        retries = LLMPredictor(llm.url, "judge-500", retries=2)
        assert predict_tasks(project, tasks, retries) == [[]]
        assert "the LLM server gave no answer: HTTP 500 after 3 attempts" in caplog.text
        assert sum(1 for r in llm.requests if r["model"] == "judge-500") == 3
    assert predict_tasks(project, tasks, LLMPredictor(None, None)) == [[]]  # not configured: reason, no crash


@pytest.mark.server
def test_learner_beats_a_constant_baseline_on_held_out_tasks(reg, importer_for, client, label_studio, tmp_path,
                                                            database_independent):
    """Circa Part II: three annotators rate explanations of a "Yes" interpretation 5 and others 2; the
    learner, trained through `evalstudio train` on up to 40 tasks of list 1, rates 20 others better than the mean
    rating.

    (Part I is not used here: its 60 items show only context, question and answer - no model output - and 40
    training items are too few for TF-IDF to beat the majority label; the categorical path is exercised by the
    webhook test below.)"""
    _learner_round(reg, importer_for, client, label_studio, tmp_path, "circa_part2", 40)


def _learner_round(reg, importer_for, client, label_studio, tmp_path, part, n_train):
    from evalstudio.values.results import region

    from .test_cli import run

    project = reg.entry(part)
    report = import_files(project, importer_for("circa"), example_files("circa"), client)
    li = project.interface
    users = {email: uid for uid, email in client.users().items()}
    for name in ("learner-a", "learner-b", "learner-c"):
        if f"{name}@example.com" not in users:
            users[f"{name}@example.com"] = client.sdk.users.create(username=name, email=f"{name}@example.com", password="x-12345678").id
    every = [t for page in client.full_task_pages(report.project_id) for t in page]
    annotated = {t["id"] for t in every if t["annotations"]}
    fresh = [t for t in sorted(every, key=lambda t: t["id"]) if t["id"] not in annotated]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(fresh))  # a random held-out split (ids follow the input file's order)
    n_train = min(n_train, len(fresh) - 20)  # other tests on the shared server may have annotated a few tasks
    assert n_train >= 30, len(fresh)
    train, held_out = [fresh[i] for i in order[:n_train]], [fresh[i] for i in order[n_train:]]
    fields = lambda task: task_fields(task)  # gold labels are in the task's meta
    labels = reg.entry("circa_part1").criteria["interpretation"].labels
    for task in train:
        for k, name in enumerate(("learner-a", "learner-b", "learner-c")):
            if part == "circa_part1":
                answer = fields(task)["gold_label"]
                if k == 2 and rng.random() < 0.2:
                    answer = str(rng.choice([l for l in labels if l != answer]))
                result = [region(li, "interpretation_choice", answer)]
            else:
                result = [region(li, "explanation_rating", 5 if task["data"]["interpretation"] == "Yes" else 2)]
            client.sdk.annotations.create(id=task["id"], completed_by=users[f"{name}@example.com"], result=result)

    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key}
    trained = run("train", part, "--model-dir", str(tmp_path), env=env)
    assert trained.returncode == 0, trained.stderr
    learner = LearnerPredictor(tmp_path)
    outputs = [learner.predict(project, t) for t in held_out]
    if part == "circa_part1":
        gold = [fields(t)["gold_label"] for t in held_out]
        learner_accuracy = np.mean([o.values["interpretation_choice"] == g for o, g in zip(outputs, gold)])
        train_gold = [fields(t)["gold_label"] for t in train]
        majority = max(set(train_gold), key=train_gold.count)
        assert learner_accuracy > np.mean([majority == g for g in gold])
    else:
        truth = np.array([5 if t["data"]["interpretation"] == "Yes" else 2 for t in held_out])
        mean_rating = np.mean([5 if t["data"]["interpretation"] == "Yes" else 2 for t in train])
        learner_mse = np.mean((np.array([o.values["explanation_rating"] for o in outputs]) - truth) ** 2)
        assert learner_mse < np.mean((mean_rating - truth) ** 2)
    for output in outputs:
        assert 0 <= output.score <= 1
    check_prediction(project, predict_tasks(project, [held_out[0]], learner)[0])


@pytest.mark.server
def test_learner_retrains_on_label_studio_annotation_webhooks(reg, importer_for, client, label_studio, tmp_path):
    """A backend whose projects.yaml sets `predictor: learner` for circa: annotations submitted in Label Studio
    reach it as webhooks, it trains, saves the model, and Label Studio then gets the learner's predictions. Once,
    on the first database: the webhooks and the learner do not depend on the database."""
    only_on_the_first_database(label_studio)
    import subprocess
    import sys
    import time

    import yaml

    from evalstudio.labelstudio.server import wait_healthy
    from evalstudio.values.results import region

    from .conftest import ROOT, free_port

    raw = yaml.safe_load((ROOT / "projects.yaml").read_text())
    raw["projects"]["circa_part1"].update(predictor="learner", prefill=True)
    with_absolute_files(raw)
    (tmp_path / "projects.yaml").write_text(yaml.safe_dump(raw))
    port, models = free_port(), tmp_path / "models"
    env = {**os.environ, "EVALSTUDIO_PROJECTS": str(tmp_path / "projects.yaml"),
           "LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key}
    env.pop("EVALSTUDIO_ML_BASIC_AUTH", None)
    log = open(tmp_path / "backend.log", "w")
    backend = subprocess.Popen([sys.executable, "-m", "evalstudio.cli", "ml-backend", "--port", str(port),
                                "--model-dir", str(models)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, 60, backend, "the learner backend")
        auth_file = tmp_path / "ml-backend.auth"  # written by the backend on first start, for this user only
        assert oct(auth_file.stat().st_mode & 0o777) == "0o600"
        auth = auth_file.read_text().strip()
        assert not any(auth.split(":")[1] in cmdline for cmdline in all_command_lines())  # nothing in `ps`
        project = reg.entry("circa_part1").model_copy(update={"title": "Circa (learner webhook test)", "prefill": True})
        report = import_files(project, importer_for("circa"), example_files("circa"), client)
        client.connect_ml_backend(report.project_id, url, auth)  # webhooks carry the auth header too
        tasks = sorted((t for page in client.full_task_pages(report.project_id) for t in page), key=lambda t: t["id"])
        li = project.interface
        admin = next(uid for uid, email in client.users().items() if email == label_studio.credentials().username)
        for task in tasks[:8]:
            result = [region(li, "interpretation_choice", task_fields(task)["gold_label"])]
            client.sdk.annotations.create(id=task["id"], completed_by=admin, result=result)
        saved = models / "circa_part1" / "learner.joblib"
        for _ in range(120):  # webhooks are handled in background jobs
            if saved.is_file():
                break
            time.sleep(0.5)
        assert saved.is_file(), (tmp_path / "backend.log").read_text()[-3000:]
        # a retraining still under way is harmless: the model file is replaced atomically (ml_backend/predictors.py)
        client.request_predictions(report.project_id, [tasks[-1]["id"]])
        [prediction] = client.predictions(report.project_id)[tasks[-1]["id"]]
        assert prediction["model_version"].startswith("learner-")
        check_prediction(project, prediction)
    finally:
        backend.terminate()
        backend.wait(timeout=30)


def all_command_lines() -> list[str]:
    """Every process's command line, as `ps` shows it to any local user."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            out.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return out
