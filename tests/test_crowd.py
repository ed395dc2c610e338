"""A crowd study on Label Studio Community: participant accounts, and what its labeling stream guarantees when
several participants work at once (and what evalstudio enforces where it does not)."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import Counter, defaultdict

import httpx
import numpy as np
import pandas as pd
import pytest

from evalstudio import importers
from evalstudio.crowd import participants
from evalstudio.exporters.tables.tidy import annotation_frame
from evalstudio.tasks.importing import import_files
from evalstudio.values.results import region

from .test_cli import run


def env_for(label_studio) -> dict:
    return {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key}


@pytest.mark.server
def test_participants_get_accounts_once_and_their_passwords_stay_private(client, label_studio, tmp_path):
    ids = tmp_path / "prolific_export.csv"  # Prolific's export: a participant_id column among others
    ids.write_text("submission_id,participant_id,status\ns1,60a7f3c2d1e4b5a6c7d8e9f0,APPROVED\n"
                   "s2,60a7f3c2d1e4b5a6c7d8e9f1,APPROVED\n", encoding="utf-8")
    folder = tmp_path / "participants"
    first = run("participants", "add", str(ids), "A1B2C3WORKER", "--folder", str(folder), env=env_for(label_studio))
    assert first.returncode == 0, first.stderr
    assert "3 account(s) created, 0 already present" in first.stdout
    again = run("participants", "add", str(ids), "A1B2C3WORKER", "NEW-ONE", "--folder", str(folder),
                env=env_for(label_studio))
    assert again.returncode == 0 and "1 account(s) created, 3 already present" in again.stdout, again.stderr

    accounts = participants.load_accounts(folder)
    assert sorted(accounts) == ["60a7f3c2d1e4b5a6c7d8e9f0", "60a7f3c2d1e4b5a6c7d8e9f1", "A1B2C3WORKER", "NEW-ONE"]
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    for name in (participants.ACCOUNTS_FILE, participants.SHEET_FILE):
        assert stat.S_IMODE(os.stat(folder / name).st_mode) == 0o600
    for result in (first, again):
        assert not any(a.password in result.stdout + result.stderr for a in accounts.values())

    emails = {email: uid for uid, email in client.users().items()}
    sheet = (folder / participants.SHEET_FILE).read_text()
    for pid, account in accounts.items():
        assert emails[account.email] == account.user_id  # one account each, none twice
        assert participants.participant_of(account.email) == pid.lower()
        assert account.password in sheet and account.email in sheet
    # the sheet's password signs the participant in, as that participant
    worker = accounts["A1B2C3WORKER"]
    token = client.log_in(worker.email, worker.password)
    me = httpx.get(f"{label_studio.url}/api/current-user/whoami", headers={"Authorization": f"Token {token}"}).json()
    assert me["email"] == "a1b2c3worker@participants.invalid"


def test_bad_participant_ids_create_nothing(tmp_path):
    listed = tmp_path / "ids.txt"
    listed.write_text("OK1\nnot an id\n# a comment\nok1\n", encoding="utf-8")
    done = run("participants", "add", str(listed), "--folder", str(tmp_path / "p"),
               env={"LABEL_STUDIO_URL": "http://127.0.0.1:9", "LABEL_STUDIO_API_KEY": "unused"})
    assert done.returncode == 2, done.stderr
    assert f"{listed}:2: participant id: 'not an id' is not an id" in done.stderr
    assert f"{listed}:4: participant id: 'ok1' differs from 'OK1' only in upper/lower case" in done.stderr
    assert not (tmp_path / "p").exists()


PER_TASK = 2
PARTICIPANTS = 5
ITEMS = 16


def _answer(project, rng) -> list[dict]:
    li = project.interface
    result = []
    for criterion, spec in project.criteria.items():
        for _, control in project.controls(criterion):
            value = float(rng.integers(spec.min, spec.max + 1)) if spec.is_numeric else str(rng.choice(spec.labels))
            result.append(region(li, control, value))
    return result


@pytest.mark.server
def test_concurrent_participants_and_what_the_stream_guarantees(reg, client, label_studio, tmp_path):
    """Five participants request and submit tasks at the same time through Label Studio's labeling stream
    (`/api/projects/ID/next`, what "Label All Tasks" uses) until it has nothing left for them.

    Label Studio guarantees: no participant is given a task they already annotated, and every task reaches the
    overlap. It does not guarantee at most N per task (SQLite runs the stream without a transaction, and a lock
    can expire), nor anything for annotations submitted outside the stream. evalstudio counts the first N
    participants' first annotations of each task and flags the rest as surplus."""
    project = reg.entry("dialogue").model_copy(update={"title": "crowd distribution", "annotators_per_task": PER_TASK,
                                                     "order": "random"})
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"c{i}", "context": f"A: question {i}?",
                                         "responses": [{"system": "s", "text": f"answer {i}"}]}) + "\n"
                             for i in range(ITEMS)), encoding="utf-8")
    project_id = import_files(project, importers.get("dialogue"), [items], client).project_id
    assert client.project(project_id).sampling == "Uniform sampling"
    added = participants.add(client, [f"crowd{i}" for i in range(PARTICIPANTS)], tmp_path / "accounts")
    accounts = participants.load_accounts(tmp_path / "accounts")
    tokens = {pid: client.log_in(a.email, a.password) for pid, a in accounts.items()}
    assert len(added.created) + len(added.present) == PARTICIPANTS

    served: dict[str, list[int]] = defaultdict(list)
    failures: list[str] = []
    start = threading.Barrier(PARTICIPANTS)

    def participant(pid: str, seed: int) -> None:
        rng = np.random.default_rng(seed)
        with httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {tokens[pid]}"}, timeout=120) as web:
            start.wait()
            while True:
                nxt = web.get(f"/api/projects/{project_id}/next")
                if nxt.status_code == 404:  # nothing left for this participant
                    return
                if nxt.status_code != 200:
                    failures.append(f"{pid}: next {nxt.status_code}")
                    return
                task_id = nxt.json()["id"]
                served[pid].append(task_id)
                sent = web.post(f"/api/tasks/{task_id}/annotations/", json={"result": _answer(project, rng),
                                                                            "lead_time": float(rng.uniform(3, 30))})
                if sent.status_code != 201:
                    failures.append(f"{pid}: submit {sent.status_code} {sent.text[:200]}")
                    return

    threads = [threading.Thread(target=participant, args=(pid, i)) for i, pid in enumerate(tokens)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not failures, failures

    # Label Studio: nobody is served a task twice, and every task reaches N annotations
    for pid, tasks in served.items():
        assert len(tasks) == len(set(tasks)), f"{pid} was given a task twice"
    exported = client.export_tasks(project_id)
    per_task = Counter({t["id"]: len([a for a in t["annotations"] if not a["was_cancelled"]]) for t in exported})
    assert len(per_task) == ITEMS and min(per_task.values()) >= PER_TASK, per_task
    stream_surplus = sum(n - PER_TASK for n in per_task.values())
    print(f"labeling stream on {'PostgreSQL' if label_studio.database_env else 'SQLite'}: {stream_surplus} annotation(s) beyond {PER_TASK} per task")

    # a participant submits again to a task they already did, outside the stream (Label Studio accepts it): one
    # whose first annotation counts (with a stream surplus on the task, a participant's first may already be the
    # surplus one, and then both are, as designed)
    before = annotation_frame(exported, project, client.users())
    counts = {(a, t) for a, t in before.loc[~before["surplus"], ["annotator", "task_id"]].itertuples(index=False)}
    repeat_pid, repeat_task = next((pid, task) for pid, tasks in served.items() for task in tasks
                                   if (accounts[pid].email, task) in counts)
    again = httpx.post(f"{label_studio.url}/api/tasks/{repeat_task}/annotations/", headers={
        "Authorization": f"Token {tokens[repeat_pid]}"}, json={"result": _answer(project, np.random.default_rng(9))})
    assert again.status_code == 201

    # evalstudio: exactly N participants per task count, each once, the first ones submitted
    frame = annotation_frame(client.export_tasks(project_id), project, client.users())
    counted = frame[~frame["surplus"] & ~frame["cancelled"]].drop_duplicates("annotation_id")
    assert (counted.groupby("task_id")["annotator"].nunique() == PER_TASK).all()
    assert (counted.groupby("task_id").size() == PER_TASK).all() and counted["task_id"].nunique() == ITEMS
    surplus = frame[frame["surplus"]].drop_duplicates("annotation_id")
    assert len(surplus) == stream_surplus + 1
    repeat = frame[(frame["task_id"] == repeat_task) & frame["annotator"].eq(accounts[repeat_pid].email)]
    assert repeat.drop_duplicates("annotation_id").sort_values("annotation_id")["surplus"].tolist() == [False, True]  # the first one counts
    assert set(counted["annotator"]) <= {a.email for a in accounts.values()}


@pytest.mark.server
def test_a_participant_who_reached_the_quota_is_closed_out_of_the_stream(client, label_studio, tmp_path):
    """Label Studio Community cannot stop one user's stream at a quota; `status --close-finished` takes an
    evalstudio-made account that has done its quota out of the organisation: the stream gives it nothing more,
    its annotations stay and count, and the other participants go on. Once, on the last database: who is in the
    organisation is one row either way; the stream under concurrent participants runs on both (above)."""
    from .conftest import only_on_the_last_database

    only_on_the_last_database(label_studio)
    from .test_cli import _projects_file

    def mutate(raw):
        entry = raw["projects"]["dialogue"]
        entry["title"] = "crowd quota"
        entry["annotators_per_task"] = 2
        entry["crowd"] = {"platform": "mturk", "per_participant": 2}

    projects = _projects_file(tmp_path, mutate)
    env = env_for(label_studio)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"q{i}", "context": f"A: question {i}?",
                                         "responses": [{"system": "s", "text": f"answer {i}"}]}) + "\n"
                             for i in range(4)), encoding="utf-8")
    imported = run("import", "dialogue", str(items), "--projects", str(projects), env=env)
    assert imported.returncode == 0, imported.stderr
    folder = tmp_path / "accounts"
    added = run("participants", "add", "QUOTA1", "QUOTA2", "--folder", str(folder), env=env)
    assert added.returncode == 0, added.stderr
    accounts = participants.load_accounts(folder)
    tokens = {pid: client.log_in(a.email, a.password) for pid, a in accounts.items()}
    project_id = next(p.id for p in client.sdk.projects.list() if p.title == "crowd quota")
    from evalstudio.protocols.registry import load

    project = load(projects).get("dialogue")

    def work(pid: str, tasks: int) -> list[int]:
        done = []
        with httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {tokens[pid]}"}) as web:
            for _ in range(tasks):
                nxt = web.get(f"/api/projects/{project_id}/next")
                if nxt.status_code != 200:
                    break
                task_id = nxt.json()["id"]
                sent = web.post(f"/api/tasks/{task_id}/annotations/",
                                json={"result": _answer(project, np.random.default_rng(len(done))), "lead_time": 9.0})
                assert sent.status_code == 201, sent.text[:200]
                done.append(task_id)
        return done

    assert len(work("QUOTA1", 2)) == 2 and len(work("QUOTA2", 1)) == 1
    status = run("status", "dialogue", "--projects", str(projects), "--participants", str(folder),
                 "--close-finished", env=env)
    assert status.returncode == 0, status.stderr
    assert "closed 1 participant(s) who reached the quota of 2: QUOTA1" in status.stdout
    assert participants.load_accounts(folder)["QUOTA1"].closed and not participants.load_accounts(folder)["QUOTA2"].closed

    with httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {tokens['QUOTA1']}"}) as web:
        assert web.get(f"/api/projects/{project_id}/next").status_code in (403, 404)
        assert web.get(f"/api/projects/{project_id}/").status_code in (403, 404)
    assert len(work("QUOTA2", 1)) == 1  # the others go on

    again = run("status", "dialogue", "--projects", str(projects), "--participants", str(folder),
                "--close-finished", "-o", str(tmp_path / "status"), env=env)
    assert again.returncode == 0, again.stderr
    assert "closed 1 participant(s) who reached the quota of 2: QUOTA2" in again.stdout  # QUOTA1 not again
    assert sum(len(t["annotations"]) for t in client.export_tasks(project_id)) == 4  # every annotation stays
    # Label Studio shows a removed member as "Deleted"; evalstudio still names the closed participants' work
    # (the server is shared with other tests: these two are among the removed members)
    removed = {uid for uid, e in client.users().items() if e.startswith("removed user")}
    assert {participants.load_accounts(folder)[p].user_id for p in ("QUOTA1", "QUOTA2")} <= removed
    done = pd.read_csv(tmp_path / "status" / "participants.csv").set_index("participant")["tasks_done"]
    assert done.to_dict() == {"QUOTA1": 2, "QUOTA2": 2}
    close_unknown = run("participants", "close", "NOSUCH", "--folder", str(folder), env=env)
    assert close_unknown.returncode == 2 and "no account created by evalstudio for NOSUCH" in close_unknown.stderr


@pytest.mark.server
@pytest.mark.parametrize("recorded, other_ids, named", [
    ("this address", False, True),
    # a second gateway host reaches the same server by another address, and the last gateway started records its
    # own (issue 64's fault campaign: `status` counted a closed participant's tasks under "removed user N")
    ("another address", False, True),
    ("another address", True, False),  # another server's ledger: its user ids are other people here
])
def test_closed_participants_keep_their_names_whatever_address_the_ledger_recorded(client, label_studio, tmp_path,
                                                                                   recorded, other_ids, named):
    from evalstudio.crowd import ledger

    folder = tmp_path / "participants"
    stay, leave = f"STAY{tmp_path.name[-6:]}", f"LEAVE{tmp_path.name[-6:]}"
    participants.add(client, [stay, leave], folder)
    participants.close(client, [leave], folder)
    book = ledger.open_ledger(folder)
    if recorded == "another address":  # the same server, as a gateway with LABEL_STUDIO_URL=http://localhost:... saw it
        book.set_setting("label_studio", label_studio.url.replace("127.0.0.1", "localhost"))
    users = client.users()
    if other_ids:  # the ledger's live account is, by user id, someone else on this server
        book.update(stay, user_id=next(uid for uid, e in users.items() if uid != book.account(stay).user_id
                                       and not e.startswith(participants.REMOVED)))
    gone = book.account(leave)
    assert users[gone.user_id].startswith(participants.REMOVED)  # Label Studio no longer names the closed member
    shown = participants.with_closed_named(users, client.url, folder)[gone.user_id]
    assert (shown == gone.email) is named, shown
