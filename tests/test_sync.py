"""Label Studio receives the study behind the ledger (evalstudio/gateway/sync.py), against a real Label Studio
(SQLite and PostgreSQL) and real gateway processes: a launch while Label Studio is stopped, the sync writer's process
killed in the middle of a write, a task changed in Label Studio while the study runs. (The ledger's own rules, as a
hostile participant meets them: tests/test_study_ledger.py; sign-up storms: tests/test_signup.py.)"""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import pytest

from evalstudio.crowd import ledger, participants

from .test_cli import run
from .test_study_ledger import (HEADERS, Gateway, annotations_by, complete, dialogue_study,  # noqa: F401
                                ledger_beside_label_studio, signed_in, synced)

pytestmark = pytest.mark.server


def test_a_launch_while_label_studio_is_stopped_loses_no_one(label_studio, client, tmp_path):
    """Issue 50: the ledger is the study's system of record. With Label Studio stopped (SIGSTOP), five people sign up
    through the study link, get a task and answer it: every request is answered from the ledger (no error, no wait
    for Label Studio), and the ledger says how far behind Label Studio is. Once Label Studio runs again (SIGCONT),
    the sync writer catches up, including the writes Label Studio received while stopped and answered too late:
    every participant has exactly one Label Studio account and one annotation per answer, with the ledger's
    measured time."""
    projects_file, project, project_id = dialogue_study(tmp_path, client, "stopped server", items=6)
    folder = tmp_path / "participants"
    ids = [f"STOP{i}" for i in range(5)]
    with Gateway(label_studio, "dialogue", folder, projects_file) as gateway:
        key = ledger.open_ledger(folder).setting("join_key")
        os.killpg(label_studio.process.pid, signal.SIGSTOP)
        try:
            for pid in ids:
                with httpx.Client(base_url=gateway.url, timeout=60, headers=HEADERS) as web:
                    joined = web.post("/api/join", json={"key": key, "participant": pid})
                    assert joined.status_code == 200, joined.text
                    task = web.get("/api/next/dialogue").json()
                    assert "ref" in task, task
                    saved = web.post(f"/api/submit/{task['ref']}", json={"result": complete(project)})
                    assert saved.json() == {"ok": True}, saved.text
            lag = ledger.open_ledger(folder).lag()
            assert (lag.accounts, lag.answers) == (5, 5) and lag.oldest > 0
        finally:
            os.killpg(label_studio.process.pid, signal.SIGCONT)
        synced(folder)
    accounts = participants.load_accounts(folder)
    emails = [e for e in client.users().values() if e.endswith("@participants.invalid") and e.startswith("stop")]
    assert sorted(emails) == sorted(participants.email_for(pid) for pid in ids)  # one account each
    stored = annotations_by(client, project_id, folder)
    assert sorted(user for _, user, _ in stored) == sorted(accounts[pid].user_id for pid in ids)
    seconds = ledger.open_ledger(folder).times()
    assert all(a["lead_time"] == pytest.approx(seconds[a["id"]], abs=0.001) for _, _, a in stored)


def test_the_sync_writer_killed_in_the_middle_of_a_write(label_studio, client, tmp_path):
    """Issue 50's fault test. Two gateway workers; answers are written into Label Studio behind the ledger by the
    worker holding the study's sync lease, here through a proxy that holds Label Studio's answers to annotation
    writes back (Label Studio has stored the annotation; the writer waits). The writer's process is killed with
    SIGKILL while it waits: the other worker takes the lease over at once, looks for the write that went out before
    writing it again, and Label Studio ends with every acknowledged answer once, with the ledger's measured time."""
    from .faulty_proxy import Fault, FaultyProxy

    projects_file, project, project_id = dialogue_study(tmp_path, client, "writer killed", items=12)
    folder = tmp_path / "participants"
    held = Fault("POST", "/annotations", "slow-after", times=1, skip=2, delay=600)  # the third write's answer
    with FaultyProxy(label_studio.url, [held]) as proxy, \
            Gateway(label_studio, "dialogue", folder, projects_file, "--workers", "2", upstream=proxy.url) as gateway:
        key = ledger.open_ledger(folder).setting("join_key")
        for i in range(4):
            with httpx.Client(base_url=gateway.url, timeout=60, headers=HEADERS) as web:
                assert web.post("/api/join", json={"key": key, "participant": f"KILLW{i}"}).status_code == 200
                for _ in range(2):
                    task = web.get("/api/next/dialogue").json()
                    assert web.post(f"/api/submit/{task['ref']}", json={"result": complete(project)}).json() == {
                        "ok": True}
        book = ledger.open_ledger(folder)
        while held.times:  # (until the held write has reached the proxy: a state, asked of the proxy)
            time.sleep(0.05)
        holder = book.setting("sync-lease:dialogue").rpartition("@")[0]
        os.kill(int(holder.rpartition(":")[2]), signal.SIGKILL)  # the writer, in the middle of its write
        synced(folder)
        assert book.setting("sync-lease:dialogue").rpartition("@")[0] != holder  # another process took it over
    stored = annotations_by(client, project_id, folder)
    assert len(stored) == 8 and len({(t, u) for t, u, _ in stored}) == 8  # every answer, none twice
    seconds = book.times()
    assert sorted(seconds) == sorted(a["id"] for _, _, a in stored)
    assert all(a["lead_time"] == pytest.approx(seconds[a["id"]], abs=0.001) for _, _, a in stored)


def test_a_task_changed_in_label_studio_during_the_study(label_studio, client, tmp_path, monkeypatch):
    """Issue 50: what a task shows is the ledger's record, the same for every participant. The researcher changes a
    task's text in Label Studio while the study runs: the gateway notices it when it reads the tasks again (in the
    background), keeps showing what the study started with, and `status` tells the operator; started with
    --accept-changed-tasks, it shows the new text."""
    # the gateway reads a part's tasks again after 3 s here, not the product's 30 (a setting; the read and what it
    # notices are the same): the test waits for the change to be noticed, a state, for a tenth of the time
    monkeypatch.setenv("EVALSTUDIO_CATALOGUE_SECONDS", "3")
    projects_file, project, project_id = dialogue_study(tmp_path, client, "changed task", items=1, overlap=2)
    folder = tmp_path / "participants"
    participants.add(client, ["CHG1", "CHG2"], folder)
    accounts = participants.load_accounts(folder)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file)}
    book = ledger.open_ledger(folder)
    with Gateway(label_studio, "dialogue", folder, projects_file) as gateway:
        first = signed_in(gateway.url, accounts["CHG1"]).get("/api/next/dialogue").json()
        task_id = book.ref("CHG1", first["ref"]).task_id
        [original] = [t for page in client.full_task_pages(project_id) for t in page]
        changed = {**original["data"], "response": "a response the participants never saw"}
        answer = httpx.patch(f"{label_studio.url}/api/tasks/{task_id}/", json={"data": changed},
                             headers={"Authorization": f"Token {label_studio.credentials().api_key}"})
        assert answer.status_code == 200, answer.text
        two = signed_in(gateway.url, accounts["CHG2"])
        deadline = time.time() + 300
        while not book.changed_tasks():  # (the gateway reads the tasks again every 3 s here, when asked for one)
            assert time.time() < deadline, "the change was never noticed"
            shown = two.get("/api/next/dialogue").json()
            time.sleep(0.5)
        shown = two.get("/api/next/dialogue").json()
        assert shown["data"] == first["data"] and "never saw" not in json.dumps(shown)
    status = run("status", "dialogue", "--participants", str(folder), env=env)
    assert status.returncode == 0, status.stderr
    said = " ".join(status.stderr.split())
    assert "1 task(s) changed in Label Studio after the gateway recorded what they show" in said
    assert f"dialogue task {task_id}" in said and "--accept-changed-tasks" in said
    with Gateway(label_studio, "dialogue", folder, projects_file, "--accept-changed-tasks") as gateway:
        again = signed_in(gateway.url, accounts["CHG2"]).get("/api/next/dialogue").json()
        assert "never saw" in json.dumps(again) and book.changed_tasks() == []
