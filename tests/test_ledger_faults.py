"""The ledger under faults, second pass (issue 64), against a real Label Studio and real gateway processes: nobody is
told "done" while the study holds tasks for them, one annotation per answer in Label Studio after any stall of it, and
operators told exactly what an output lacks. (The first pass: tests/test_sync.py; the campaign: benchmarks/faults.py,
its short run in tests/test_fault_campaign.py.)"""

from __future__ import annotations

import json

import httpx
import pytest

from evalstudio import importers
from evalstudio.crowd import ledger, participants
from evalstudio.exporters.tables.tidy import result_values
from evalstudio.tasks.importing import import_files

from .test_study_ledger import (HEADERS, Gateway, annotations_by, complete, dialogue_study,  # noqa: F401
                                ledger_beside_label_studio, signed_in, synced)

pytestmark = pytest.mark.server


def import_more(tmp_path, client, project, first: int, count: int) -> None:
    """`count` more one-response contexts (ids from `first` on) into the study's project, as `evalstudio import`."""
    path = tmp_path / f"more-{first}.jsonl"
    path.write_text("".join(json.dumps({"id": f"i{i}", "context": f"A: how was day {i}?",
                                        "responses": [{"system": "s", "text": f"fine, day {i} was fine"}]}) + "\n"
                            for i in range(first, first + count)), encoding="utf-8")
    report = import_files(project, importers.get("dialogue"), [path], client)
    assert report.created == count


def test_nobody_is_told_done_from_a_stale_list_of_tasks(label_studio, client, tmp_path, monkeypatch):
    """Issue 64, defect 1. One gateway, overlap 1: A answers both tasks and is told the part is done; two more tasks
    are imported. The gateway's list of the part's tasks is stale (it would be read again only after an hour here):
    B, who joins now, is served one of the new tasks, not told "done" from that list, and A, recorded as finished,
    is served the other: finished was for the tasks the part held then."""
    monkeypatch.setenv("EVALSTUDIO_CATALOGUE_SECONDS", "3600")
    projects_file, project, project_id = dialogue_study(tmp_path, client, "stale list", items=2)
    folder = tmp_path / "participants"
    participants.add(client, ["STALEA", "STALEB"], folder)
    accounts = participants.load_accounts(folder)
    book = ledger.open_ledger(folder)
    with Gateway(label_studio, "dialogue", folder, projects_file) as gateway:
        a = signed_in(gateway.url, accounts["STALEA"])
        for _ in range(2):
            task = a.get("/api/next/dialogue").json()
            assert a.post(f"/api/submit/{task['ref']}", json={"result": complete(project)}).json() == {"ok": True}
        assert "finished" in a.get("/api/next/dialogue").json()
        assert book.finished("STALEA") == {"dialogue"}
        import_more(tmp_path, client, project, 2, 2)
        b = signed_in(gateway.url, accounts["STALEB"])
        served_b = b.get("/api/next/dialogue").json()
        assert "ref" in served_b, served_b
        served_a = a.get("/api/next/dialogue").json()
        assert "ref" in served_a, served_a
        new = {book.ref("STALEB", served_b["ref"]).task_id, book.ref("STALEA", served_a["ref"]).task_id}
        old = {r.task_id for r in book.answers() if r.answered is not None}
        assert len(new) == 2 and not new & old  # the two new tasks, one each
        assert "finished" not in b.get("/api/next/dialogue").json()  # B's task, again (not answered yet)


def test_a_write_a_frozen_label_studio_takes_in_late_is_not_a_second_annotation(label_studio, client, tmp_path,
                                                                                monkeypatch):
    """Issue 64, defect 2. Label Studio takes in the writer's POST of an answer and stores it only later (the proxy
    holds it, as a frozen server does): the writer's wait ends, its look-up finds nothing and it writes the answer
    again; then the first POST reaches Label Studio. The participant changes their answer afterwards. Label Studio
    ends with one annotation of that participant on the task, with the ledger's latest answer and time: the two
    writes carry one key (unique_id), and Label Studio refuses the late one."""
    from .faulty_proxy import Fault, FaultyProxy

    monkeypatch.setenv("EVALSTUDIO_SYNC_TIMEOUT", "2")  # the writer gives up waiting after 2 s, looks after 4 s
    projects_file, project, project_id = dialogue_study(tmp_path, client, "late write", items=2)
    folder = tmp_path / "participants"
    held = Fault("POST", "/annotations", "hold-before")
    try:
        with FaultyProxy(label_studio.url, [held]) as proxy, \
                Gateway(label_studio, "dialogue", folder, projects_file, upstream=proxy.url) as gateway:
            book = ledger.open_ledger(folder)
            web = httpx.Client(base_url=gateway.url, timeout=60, headers=HEADERS)
            assert web.post("/api/join", json={"key": book.setting("join_key"), "participant": "LATE1"}).status_code \
                == 200
            task = web.get("/api/next/dialogue").json()
            assert web.post(f"/api/submit/{task['ref']}", json={"result": complete(project, 2)}).json() == {"ok": True}
            book.wait_synced(300)  # written again after the first write's wait ended (the first is held)
            assert held.times == 0 and not held.forwarded.is_set()
            held.release.set()  # the first write reaches Label Studio now
            assert held.forwarded.wait(300)
            assert web.post(f"/api/submit/{task['ref']}", json={"result": complete(project, 4)}).json() == {"ok": True}
            synced(folder)
    finally:
        held.release.set()
    stored = annotations_by(client, project_id, folder)
    [ref] = [r for r in book.answers() if r.answered is not None]
    assert [(t, a["id"]) for t, _, a in stored] == [(ref.task_id, ref.annotation_id)]  # one annotation, the ledger's
    assert set(result_values(stored[0][2]["result"]).values()) == {4}
    assert stored[0][2]["lead_time"] == pytest.approx(ref.seconds, abs=0.001)


def test_operators_are_told_what_the_output_lacks_and_a_frozen_server_is_given_up(label_studio, client, tmp_path):
    """Issue 64, defect 3. Label Studio takes the first of a participant's answers and refuses to store the second
    (a proxy answers 503); an annotation of the first is in Label Studio twice (a copy made beside the writer).
    `status` and `export` wait the --wait given, with a line on stderr meanwhile, then say exactly what their
    output lacks (the second answer, named) and the answer held twice, and count the ledger's annotation only.
    With Label Studio stopped (SIGSTOP), `status --wait 3` gives up with a message instead of hanging."""
    import csv
    import os
    import signal

    from .faulty_proxy import Fault, FaultyProxy
    from .test_cli import run

    projects_file, project, project_id = dialogue_study(tmp_path, client, "operators told", items=3)
    folder = tmp_path / ".evalstudio" / "participants"
    participants.add(client, ["OPS1"], folder)
    account = participants.load_accounts(folder)["OPS1"]
    refused = Fault("POST", "/annotations", "status-before", skip=1, times=10**6, status=503)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file)}
    with FaultyProxy(label_studio.url, [refused]) as proxy, \
            Gateway(label_studio, "dialogue", folder, projects_file, upstream=proxy.url) as gateway:
        web = signed_in(gateway.url, account)
        for _ in range(2):
            task = web.get("/api/next/dialogue").json()
            assert web.post(f"/api/submit/{task['ref']}", json={"result": complete(project)}).json() == {"ok": True}
        book = ledger.open_ledger(folder)
        while not any(r.annotation_id for r in book.answers()):  # (until the first is in Label Studio: a state)
            book.wait_synced(1)
        first = next(r for r in book.answers() if r.annotation_id)
        second = next(r for r in book.answers() if r.answered is not None and not r.annotation_id)
        copy = httpx.post(f"{label_studio.url}/api/tasks/{first.task_id}/annotations", params={"project": project_id},
                          json={"result": complete(project, 5), "completed_by": account.user_id},
                          headers={"Authorization": f"Token {label_studio.credentials().api_key}"})
        assert copy.status_code == 201, copy.text
        status = run("status", "dialogue", "--participants", str(folder), "--wait", "2", env=env)
        exported = run("export", "dialogue", "-o", str(tmp_path / "out.csv"), "--wait", "2", env=env, cwd=tmp_path)
        for done in (status, exported):
            assert done.returncode == 0, done.stderr
            said = " ".join(done.stderr.split())
            assert "waiting for Label Studio to receive 1 answer(s)" in said
            assert f"lacks 1 of the 2 answer(s) the gateway acknowledged" in said
            assert f"ops1 on task {second.task_id}" in said
            assert (f"participant ops1 has 2 annotations on task {first.task_id} in Label Studio (ids "
                    f"{first.annotation_id}, {copy.json()['id']})") in said
        with open(tmp_path / "out.csv", encoding="utf-8") as f:
            assert {row["annotation_id"] for row in csv.DictReader(f)} == {str(first.annotation_id)}
        os.killpg(label_studio.process.pid, signal.SIGSTOP)
        try:
            frozen = run("status", "dialogue", "--participants", str(folder), "--wait", "3", env=env)
        finally:
            os.killpg(label_studio.process.pid, signal.SIGCONT)
        refused.times = 0  # the gateway may write the second answer now (stopped once Label Studio holds it)
    said = " ".join(frozen.stderr.split())
    assert frozen.returncode != 0 and "Label Studio has not answered for" in said and "(--wait 3)" in said, said
    assert "waiting for Label Studio" in said
