"""Tamper evidence (`status`): a participant who reaches Label Studio with their own token (a study run without the
gateway) changes a gold answer, the labeling config and another participant's annotation; `status` names each
change and how to restore it, and `setup` restores the settings. On both databases: the task records are compared
with what each database gives back."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from evalstudio.crowd import participants
from evalstudio.protocols import registry

from .conftest import example_files, only_on_the_last_database
from .test_cli import _projects_file, run
from .test_crowd import _answer

pytestmark = pytest.mark.server


def test_status_names_every_change_made_behind_the_studys_back(client, label_studio, tmp_path):
    # once, on the last database: what status compares (the digests of the tasks Label Studio returns) is the same
    # on both, and the import's own record is a file of evalstudio's
    only_on_the_last_database(label_studio)

    def own_title(raw):
        raw["projects"]["dialogue"]["title"] = "tamper evidence study"
    projects_file = _projects_file(tmp_path, own_title)
    project = registry.load(projects_file).get("dialogue")
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file), "EVALSTUDIO_RECORDS": str(tmp_path / "records")}
    imported = run("import", "dialogue", *map(str, example_files("dialogue")), env=env)
    assert imported.returncode == 0, imported.stderr
    [record] = (tmp_path / "records").iterdir()
    assert oct(record.stat().st_mode & 0o777) == "0o600"

    def status():
        shown = run("status", "dialogue", env=env)
        assert shown.returncode == 0, shown.stderr
        return " ".join(shown.stderr.split())

    assert "CHANGED SINCE SETUP" not in status()  # what import made reads back identical from this database

    project_id = client.find_project(project.title)
    tasks = sorted(client.export_tasks(project_id), key=lambda t: t["id"])
    folder = tmp_path / "participants"
    participants.add(client, ["TAMPER1", "TAMPER2"], folder)
    accounts = participants.load_accounts(folder)
    tokens = {pid: client.log_in(a.email, a.password) for pid, a in accounts.items()}

    def as_participant(pid: str) -> httpx.Client:
        return httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {tokens[pid]}"}, timeout=60)

    gold_task, data_task, answered = tasks[0], tasks[1], tasks[2]
    with as_participant("TAMPER1") as one, as_participant("TAMPER2") as two:
        changed_meta = {**gold_task["meta"], "gold": {"appropriateness": 1}}
        assert one.patch(f"/api/tasks/{gold_task['id']}/", json={"meta": changed_meta}).status_code == 200
        changed_data = {**data_task["data"], "response": "a response the researcher never imported"}
        assert one.patch(f"/api/tasks/{data_task['id']}/", json={"data": changed_data}).status_code == 200
        config = project.label_config.replace("</View>", "<Header value='injected'/></View>", 1)
        assert one.patch(f"/api/projects/{project_id}/", json={"label_config": config}).status_code == 200
        made = one.post(f"/api/tasks/{answered['id']}/annotations/",
                        json={"result": _answer(project, np.random.default_rng(1))})
        assert made.status_code == 201
        annotation_id = made.json()["id"]
        other = two.patch(f"/api/annotations/{annotation_id}/", json={"result": _answer(project, np.random.default_rng(2))})
        assert other.status_code == 200

    said = status()
    assert "CHANGED SINCE SETUP" in said
    assert f"task {gold_task['id']} " in said and "meta field(s) gold changed since import" in said
    assert f"task {data_task['id']} " in said and "its data (what annotators see) changed since import" in said
    assert "label_config" in said and "`evalstudio setup dialogue` writes projects.yaml's settings back" in said
    assert (f"annotation {annotation_id} on task {answered['id']} (by user {accounts['TAMPER1'].user_id}) was last "
            f"changed by user {accounts['TAMPER2'].user_id}") in said
    assert "delete the changed task(s) in Label Studio and run the same `evalstudio import` again" in said

    restored = run("setup", "dialogue", env=env)
    assert restored.returncode == 0, restored.stderr
    after = status()
    assert "label_config" not in after and f"task {gold_task['id']} " in after  # settings back; the task still told
    written = run("status", "dialogue", "-o", str(tmp_path / "status"), env=env)
    page = (tmp_path / "status" / "status.html").read_text(encoding="utf-8")
    assert written.returncode == 0 and "Changed since setup" in page and "meta field(s) gold" in page


def test_the_record_keeps_digests_given_as_the_spools_json_text_and_as_dicts(tmp_path):
    """The import hands the record its digests as the spool's JSON text (five times smaller in memory than dicts);
    the file holds the same record either way, added to what it held before, and stays private."""
    import hashlib
    import json

    from evalstudio.tasks import integrity

    tasks = [{"data": {"evalstudio_id": f"t{k}", "text": "é\u2028\"x\""}, "meta": {"system": f"s{k}", "ratings": [k, 1.5]}}
             for k in range(4)]
    digests = {task["data"]["evalstudio_id"]: integrity.task_digest(task) for task in tasks}
    canonical = lambda value: hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                                             .encode("utf-8")).hexdigest()[:integrity.DIGEST_CHARS]
    for task in tasks:  # the digest is each part's canonical JSON hashed, and the text sent is those parts
        text, digest = integrity.encode_task(task)
        assert digest == {"data": canonical(task["data"]), "meta": {k: canonical(v) for k, v in task["meta"].items()}}
        assert json.loads(text) == task
    path = tmp_path / "records" / "server-project-7.json"
    integrity.save_record(path, "http://127.0.0.1:8080/", 7, {k: v for k, v in list(digests.items())[:2]})
    integrity.save_record(path, "http://127.0.0.1:8080/", 7, {k: json.dumps(v) for k, v in list(digests.items())[2:]})
    record = integrity.load_record(path)
    assert record == {"url": "http://127.0.0.1:8080", "project_id": 7, "tasks": digests}
    assert path.stat().st_mode & 0o777 == 0o600
    assert integrity.changed_tasks([{**t, "id": n} for n, t in enumerate(tasks)], record, "evalstudio_id") == []
