"""The study's ledger through the gateway, as a hostile, scripted participant meets it: a real Label Studio (SQLite
and PostgreSQL), real gateway processes sharing one participants folder, `participants add/close` running beside
them, and a gateway killed with SIGKILL in the middle of the work: one answer per participant and task, at most
the overlap per task, complete answers only, nothing counted from the browser but the answer, the Circa gate read
from the ledger, nothing lost or doubled by a crash. (Sign-ups, proxies and URLs: tests/test_signup.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from evalstudio import importers
from evalstudio.crowd import ledger, participants
from evalstudio.exporters.tables.tidy import result_values
from evalstudio.gateway.checks import controls_of
from evalstudio.labelstudio.server import wait_healthy
from evalstudio.protocols import registry
from evalstudio.tasks.importing import import_files

from .conftest import example_files, free_port
from .test_cli import _projects_file, run

pytestmark = pytest.mark.server
HEADERS = {"X-Evalstudio": "1"}


@pytest.fixture(autouse=True)
def ledger_beside_label_studio(request, monkeypatch):
    """With Label Studio on PostgreSQL the study's ledger is in PostgreSQL too (a database of its own here; as
    `evalstudio server --database-url` sets it up, EVALSTUDIO_LEDGER_URL), for this process and the gateways and
    commands it starts; on SQLite it is the participants folder's ledger.sqlite3."""
    if "label_studio" in request.fixturenames and request.getfixturevalue("label_studio").database_env:
        url = request.getfixturevalue("postgres").create_database(f"ledger_{os.urandom(4).hex()}")
        monkeypatch.setenv(ledger.URL_ENV, url)


class Gateway:
    """`evalstudio gateway` as a real process on a fixed port: started, killed (SIGKILL) and started again."""

    def __init__(self, label_studio, protocol: str, folder: Path, projects_file: Path, *options: str,
                 upstream: str | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # the sync writer's wait for one write: 10 s, not the product's 30 (a write here takes well under a second),
        # so a write whose answer was lost (a dropped connection, a killed writer) is looked for after 20 s, not 60
        # (SETTLE: evalstudio/gateway/sync.py); the same path, sooner. A test may set its own (test_ledger_faults).
        self.env = {"EVALSTUDIO_SYNC_TIMEOUT": "10", **os.environ, "LABEL_STUDIO_URL": upstream or label_studio.url,
                    "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
                    "EVALSTUDIO_PROJECTS": str(projects_file)}
        self.command = [sys.executable, "-m", "evalstudio.cli", "gateway", protocol, "--port", str(self.port),
                        "--participants", str(folder), *options]
        self.log = folder.parent / f"gateway-{self.port}.log"
        self.folder = folder
        self.process = None

    def start(self) -> "Gateway":
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_healthy(self.url, 120, self.process, "the gateway")
        except Exception as e:
            raise RuntimeError(f"{e}\n{self.log.read_text()}") from None
        return self

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)  # the gateway and any worker it started, without a goodbye
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """Stop it as an operator would: once Label Studio holds what the ledger acknowledged (the gateway's sync
        writer puts it there; a test that reads Label Studio afterwards checks that it did)."""
        if self.process and self.process.poll() is None:
            ledger.open_ledger(self.folder).wait_synced(120)
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)

    def __enter__(self) -> "Gateway":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def dialogue_study(tmp_path, client, title: str, items: int = 6, overlap: int = 1, crowd: dict | None = None):
    """A dialogue project of its own with `items` one-response contexts; returns (projects file, project, id)."""
    def own(raw):
        raw["projects"]["dialogue"].update({"title": title, "annotators_per_task": overlap, "order": "random"})
        if crowd is not None:
            raw["projects"]["dialogue"]["crowd"] = {**raw["projects"]["dialogue"].get("crowd", {}), **crowd}
    projects_file = _projects_file(tmp_path, own)
    project = registry.load(projects_file).get("dialogue")
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"i{i}", "context": f"A: how was day {i}?",
                                        "responses": [{"system": "s", "text": f"fine, day {i} was fine"}]}) + "\n"
                            for i in range(items)), encoding="utf-8")
    project_id = import_files(project, importers.get("dialogue"), [path], client).project_id
    return projects_file, project, project_id


def complete(project, rating: int = 3) -> list[dict]:
    return [{"from_name": c.name, "to_name": c.to_names[0], "type": "rating", "value": {"rating": rating}}
            for c in controls_of(project).values()]


def signed_in(url: str, account, **headers) -> httpx.Client:
    web = httpx.Client(base_url=url, timeout=120, headers={**HEADERS, **headers})
    answer = web.get(f"/s/{account.participant_id}/{account.access}")
    assert answer.status_code == 303, answer.text
    return web


def synced(folder: Path, seconds: float = 300) -> None:
    """Wait until Label Studio holds everything the study's ledger acknowledged (the gateway's sync writer)."""
    lag = ledger.open_ledger(folder).wait_synced(seconds)
    assert lag.behind == 0 and not lag.refused, lag


def annotations_by(client, project_id: int, folder: Path | None = None) -> list[tuple[int, int, dict]]:
    """(task id, user id, annotation) of every annotation in the project, read as the researcher; with the
    participants `folder`, once Label Studio holds everything its ledger acknowledged."""
    if folder is not None:
        synced(folder)
    out = []
    for page in client.full_task_pages(project_id):
        for task in page:
            for a in task["annotations"]:
                user = a["completed_by"]
                out.append((task["id"], user.get("id") if isinstance(user, dict) else user, a))
    return out


def test_one_participant_gives_one_answer_per_task(label_studio, client, tmp_path):
    """Asking for the next task again (on this gateway or on a second one sharing the study) gives the same task
    with the same reference; submitting three times stores one annotation, updated; the overlap of 3 is then
    reached by three distinct participants, not by one participant three times."""
    projects_file, project, project_id = dialogue_study(tmp_path, client, "one answer each", items=1, overlap=3)
    folder = tmp_path / "participants"
    participants.add(client, ["ONCE1", "ONCE2", "ONCE3"], folder)
    accounts = participants.load_accounts(folder)
    with Gateway(label_studio, "dialogue", folder, projects_file) as first, \
            Gateway(label_studio, "dialogue", folder, projects_file) as second:
        web = signed_in(first.url, accounts["ONCE1"])
        served = [web.get("/api/next/dialogue").json() for _ in range(3)]
        other = httpx.Client(base_url=second.url, timeout=120, headers=HEADERS, cookies=web.cookies)
        served.append(other.get("/api/next/dialogue").json())  # the same session through the other process
        assert len({s["ref"] for s in served}) == 1 and {s["number"] for s in served} == {1}, served
        ref = served[0]["ref"]
        for rating in (2, 3, 4):
            assert web.post(f"/api/submit/{ref}", json={"result": complete(project, rating)}).json() == {"ok": True}
        mine = [a for _, user, a in annotations_by(client, project_id, folder) if user == accounts["ONCE1"].user_id]
        assert len(mine) == 1 and set(result_values(mine[0]["result"]).values()) == {4}
        assert "finished" in web.get("/api/next/dialogue").json()  # no second answer to the one task
        for pid in ("ONCE2", "ONCE3"):
            other = signed_in(second.url, accounts[pid])
            task = other.get("/api/next/dialogue").json()
            assert other.post(f"/api/submit/{task['ref']}", json={"result": complete(project)}).json() == {"ok": True}
    users = Counter(user for _, user, _ in annotations_by(client, project_id, folder))
    assert sorted(users.values()) == [1, 1, 1] and len(users) == 3


def test_only_complete_answers_on_the_scale_count(label_studio, client, tmp_path):
    """An empty answer, one of three required ratings, or a value off the scale is refused with a message and
    stores nothing; the complete answer is stored."""
    projects_file, project, project_id = dialogue_study(tmp_path, client, "complete answers", items=2)
    folder = tmp_path / "participants"
    participants.add(client, ["FULL1"], folder)
    account = participants.load_accounts(folder)["FULL1"]
    with Gateway(label_studio, "dialogue", folder, projects_file) as gateway:
        web = signed_in(gateway.url, account)
        ref = web.get("/api/next/dialogue").json()["ref"]
        good = complete(project)
        for result, message in (([], "not answered"), (good[:1], "not answered"),
                                ([{**good[0], "value": {"rating": 6}}] + good[1:], "outside")):
            answer = web.post(f"/api/submit/{ref}", json={"result": result})
            assert answer.status_code == 400 and message in answer.json()["error"], answer.text
        assert annotations_by(client, project_id, folder) == []
        assert "information_content" in web.post(f"/api/submit/{ref}", json={"result": good[:1]}).json()["error"]
        assert web.post(f"/api/submit/{ref}", json={"result": good}).json() == {"ok": True}
    [(_, user, stored)] = annotations_by(client, project_id, folder)
    assert user == account.user_id and result_values(stored["result"]) == result_values(good)


def test_nothing_but_the_answer_comes_from_the_browser(label_studio, client, tmp_path):
    """Origin, lead time, author, ground truth and a skip sent by the participant are ignored: the answer is
    stored as theirs, `manual`, not ground truth, not cancelled, with the time the gateway measured from serving the
    task to the submission (here about two seconds, whatever the browser claims); `report` then runs (a claimed
    `prediction` origin made it refuse the study as prefilled)."""
    projects_file, project, project_id = dialogue_study(tmp_path, client, "server decides", items=2)
    folder = tmp_path / "participants"
    participants.add(client, ["SRV1", "SRV2"], folder)
    accounts = participants.load_accounts(folder)
    with Gateway(label_studio, "dialogue", folder, projects_file) as gateway:
        web = signed_in(gateway.url, accounts["SRV1"])
        ref = web.get("/api/next/dialogue").json()["ref"]
        time.sleep(2)
        hostile = [{**r, "origin": "prediction"} for r in complete(project, 5)]
        answer = web.post(f"/api/submit/{ref}", json={
            "result": hostile, "lead_time": 300, "completed_by": accounts["SRV2"].user_id, "ground_truth": True,
            "was_cancelled": True, "origin": "prediction", "project": 1, "task": 1})
        assert answer.json() == {"ok": True}
    [(_, user, stored)] = annotations_by(client, project_id, folder)
    assert user == accounts["SRV1"].user_id
    assert {r["origin"] for r in stored["result"]} == {"manual"}
    assert stored["ground_truth"] is False and stored["was_cancelled"] is False
    assert 2.0 <= stored["lead_time"] < 30, stored["lead_time"]
    [measured] = ledger.open_ledger(folder).times().values()
    assert measured == pytest.approx(stored["lead_time"], abs=1e-3)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file)}
    reported = run("report", "dialogue", "-o", str(tmp_path / "report"), "--bootstrap", "0", env=env)
    assert reported.returncode == 0, reported.stderr
    assert "prefill" not in reported.stderr


def _circa_study(tmp_path, client, title: str):
    def own(raw):
        raw["projects"]["circa_part1"]["crowd"]["per_participant"] = 1
        for entry in raw["projects"].values():
            entry["title"] = f"{title}: " + entry["title"][:30]
    projects_file = _projects_file(tmp_path, own)
    reg = registry.load(projects_file)
    importer = importers.get(reg.parts("circa")[0].importer)
    for part in reg.parts("circa"):
        import_files(part, importer, example_files(part.name), client)
    return projects_file, reg


def _answer_part(web, reg, entry: str) -> dict:
    from evalstudio.values.results import region

    from .test_browser import designed_values

    project = reg.entry(entry)
    task = web.get(f"/api/next/{entry}").json()
    assert "ref" in task, task
    result = [region(project.interface, name, value) for name, value in designed_values(project).items()]
    assert web.post(f"/api/submit/{task['ref']}", json={"result": result}).json() == {"ok": True}
    return task


def left_by_a_killed_gateway(label_studio, task_id: int, result: list, user_id: int) -> None:
    """The participant's annotation in Label Studio, as a gateway killed after Label Studio stored it and before the
    ledger recorded that leaves it (written as the researcher, completed_by the participant)."""
    stored = httpx.post(f"{label_studio.url}/api/tasks/{task_id}/annotations",
                        headers={"Authorization": f"Token {label_studio.credentials().api_key}"},
                        json={"result": result, "completed_by": user_id})
    assert stored.status_code == 201, stored.text


def test_a_gateway_killed_mid_task_loses_and_doubles_nothing(label_studio, client, tmp_path):
    """Circa through the gateway: a participant finishes Part I (its quota of one control question), holds a Part
    II task, and the gateway is killed (SIGKILL) and started again. Signed in as before (the session is in the
    ledger), the participant is on the same Part II task; signing in again with the personal link shows Part I
    finished and Part II open (the gate is read from the ledger, not a session); a submission whose answer was
    lost in the kill is stored once."""
    projects_file, reg = _circa_study(tmp_path, client, "restart")
    folder = tmp_path / "participants"
    participants.add(client, ["BACK1"], folder)
    account = participants.load_accounts(folder)["BACK1"]
    gateway = Gateway(label_studio, "circa", folder, projects_file).start()
    try:
        web = signed_in(gateway.url, account)
        # before Part I is done, Part II (two lists, none chosen yet) offers no Start (issue 53), and says why
        home = web.get("/").text
        assert 'href="/label/circa_part2"' not in home and "Starts once you have finished" in home
        _answer_part(web, reg, "circa_part1")
        held = web.get("/api/next/circa_part2").json()
        assert "ref" in held, held
        gateway.kill()
        gateway.start()
        assert web.get("/api/next/circa_part2").json()["ref"] == held["ref"]  # the same task, the same session
        again = signed_in(gateway.url, account)
        home = again.get("/").text
        assert "Start" in home and "after" not in home.lower().replace("after it", "")
        assert again.get("/api/next/circa_part2").json()["ref"] == held["ref"]
        project = reg.entry("circa_part2")
        from evalstudio.values.results import region

        from .test_browser import designed_values

        result = [region(project.interface, n, v) for n, v in designed_values(project).items()]
        # the ledger records the answer, the sync writer sends it to Label Studio, which stores it, and the gateway
        # dies before the writer can record that (made here as the killed gateway leaves it); the page sends the
        # answer again after the restart, and the restarted writer finds the annotation instead of writing another
        gateway.kill()
        book = ledger.open_ledger(folder)
        ref = book.ref("BACK1", held["ref"])
        assert book.record(ref.ref, json.dumps(result)) == "ok"
        left_by_a_killed_gateway(label_studio, ref.task_id, result, account.user_id)
        gateway.start()
        assert again.post(f"/api/submit/{held['ref']}", json={"result": result}).json() == {"ok": True}
    finally:
        gateway.stop()
    mine = [a for part in reg.parts("circa_part2") for _, user, a in annotations_by(client, client.require_project(part), folder)
            if user == account.user_id]
    assert len(mine) == 1


def test_an_answer_lost_in_a_kill_is_not_counted_against_its_own_quota(label_studio, client, tmp_path):
    """Issue 55's cause. Label Studio holds the participant's annotation of a task the ledger served them and has no
    answer for (as a gateway that sent the answer to Label Studio before recording it left it when killed: the
    gateway before this one did). The participant's page sends the answer again to the restarted gateway, which
    must take it as the answer it is: recorded once, acknowledged, the quota reached only then, and the sync
    writer finds the annotation instead of writing a second. (The gateway counted the participant's annotations
    in Label Studio, this one among them, as answers given outside the ledger, and refused the resubmission with
    "You have done every task of this part." while the ledger held one answer fewer than the quota.)"""
    projects_file, project, project_id = dialogue_study(tmp_path, client, "lost at quota", items=4, overlap=1,
                                                        crowd={"per_participant": 2})
    folder = tmp_path / "participants"
    participants.add(client, ["LOST1"], folder)
    account = participants.load_accounts(folder)["LOST1"]
    gateway = Gateway(label_studio, "dialogue", folder, projects_file).start()
    try:
        web = signed_in(gateway.url, account)
        first = web.get("/api/next/dialogue").json()
        assert web.post(f"/api/submit/{first['ref']}", json={"result": complete(project)}).json() == {"ok": True}
        held = web.get("/api/next/dialogue").json()
        assert "ref" in held, held
        gateway.kill()
        book = ledger.open_ledger(folder)
        ref = book.ref("LOST1", held["ref"])
        left_by_a_killed_gateway(label_studio, ref.task_id, complete(project), account.user_id)
        gateway.start()
        again = web.post(f"/api/submit/{held['ref']}", json={"result": complete(project)})
        assert again.json() == {"ok": True}, again.text
        assert "finished" in web.get("/api/next/dialogue").json()
    finally:
        gateway.stop()
    mine = [a for _, user, a in annotations_by(client, project_id, folder) if user == account.user_id]
    assert len(mine) == 2
    assert sorted(r.annotation_id for r in ledger.open_ledger(folder).answers() if r.annotation_id) == \
        sorted(a["id"] for a in mine)


def _work_through(url: str, account, project, quota: int, acknowledged: list, failures: list) -> None:
    """A participant answering until the part is finished, asking again (as the labeling page does) while the
    gateway is down."""
    web = httpx.Client(base_url=url, timeout=60, headers=HEADERS)
    deadline = time.time() + 300

    def ask(method, path, **kwargs):
        while time.time() < deadline:
            try:
                answer = web.request(method, path, **kwargs)
                if answer.status_code < 500:
                    return answer
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(path)
    try:
        assert ask("GET", f"/s/{account.participant_id}/{account.access}").status_code == 303
        while True:
            task = ask("GET", "/api/next/dialogue").json()
            if "finished" in task:
                return
            time.sleep(0.3)
            answer = ask("POST", f"/api/submit/{task['ref']}", json={"result": complete(project)}).json()
            if answer.get("ok"):
                acknowledged.append((account.participant_id, task["ref"]))
            elif not answer.get("next"):
                failures.append(answer)
    except Exception as e:  # noqa: BLE001 - reported by the test
        failures.append(repr(e))


def test_kill_9_while_participants_work(label_studio, client, tmp_path):
    """Six participants work at once (quota 4 each, overlap 2) through two gateway workers; the gateway is killed
    with SIGKILL twice while they work and started again (its sync writer with it, while it writes to Label Studio).
    Every participant finishes their quota and is never told they are done before it; annotations stored =
    submissions acknowledged = answers in the ledger, each with the ledger's measured time; no task has a
    participant twice or more than its overlap."""
    projects_file, project, project_id = dialogue_study(tmp_path, client, "kill nine", items=14, overlap=2,
                                                        crowd={"per_participant": 4})
    folder = tmp_path / "participants"
    ids = [f"NINE{i}" for i in range(6)]
    participants.add(client, ids, folder)
    accounts = participants.load_accounts(folder)
    gateway = Gateway(label_studio, "dialogue", folder, projects_file, "--workers", "2").start()
    acknowledged, failures = [], []
    try:
        threads = [threading.Thread(target=_work_through, args=(gateway.url, accounts[pid], project, 4, acknowledged,
                                                                 failures)) for pid in ids]
        for t in threads:
            t.start()
        for kills in (3, 12):
            while len(acknowledged) < kills and any(t.is_alive() for t in threads):
                time.sleep(0.05)
            gateway.kill()  # (its sync writer with it, in the middle of its writes to Label Studio)
            gateway.start()
        for t in threads:
            t.join(timeout=600)
    finally:
        gateway.stop()
    assert failures == []
    everything = annotations_by(client, project_id, folder)
    stored = [(t, u, a) for t, u, a in everything if not a["was_cancelled"]]
    assert len(stored) == len(everything)  # the gateway chooses the tasks: nothing to skip in Label Studio's stream
    book = ledger.open_ledger(folder)
    assert Counter(user for _, user, _ in stored) == Counter({accounts[pid].user_id: 4 for pid in ids})
    assert len(stored) == len(set(acknowledged)) == len(acknowledged) == 24
    per_task = Counter(task for task, _, _ in stored)
    assert max(per_task.values()) <= 2 and len({(t, u) for t, u, _ in stored}) == len(stored)
    answered = [r for r in book.answers() if r.annotation_id is not None]
    assert sorted(r.annotation_id for r in answered) == sorted(a["id"] for _, _, a in stored)
    # each annotation's time on the task is the one the ledger measured (Label Studio's lead_time)
    seconds = book.times()
    assert all(a["lead_time"] == pytest.approx(seconds[a["id"]], abs=0.001) for _, _, a in stored)


def test_a_task_that_others_filled_is_not_answered_beyond_its_overlap(label_studio, client, tmp_path):
    """A task can be served to one participant too many (a hold that expired while its participant was away, or an
    earlier version's stream). Made here through the ledger: two participants hold the one-annotation task. The
    first answer counts; the second is refused with a polite "next" (nothing stored, not even a skip), and they go
    on to another task."""
    projects_file, project, project_id = dialogue_study(tmp_path, client, "over served", items=2, overlap=1)
    folder = tmp_path / "participants"
    participants.add(client, ["OVER1", "OVER2"], folder)
    accounts = participants.load_accounts(folder)
    with Gateway(label_studio, "dialogue", folder, projects_file) as gateway:
        first = signed_in(gateway.url, accounts["OVER1"])
        task = first.get("/api/next/dialogue").json()
        book = ledger.open_ledger(folder)
        over = book.serve("OVER2", "dialogue", book.ref("OVER1", task["ref"]).task_id)  # one participant too many
        second = signed_in(gateway.url, accounts["OVER2"])
        assert second.get("/api/next/dialogue").json()["ref"] == over.ref
        assert first.post(f"/api/submit/{task['ref']}", json={"result": complete(project)}).json() == {"ok": True}
        refused = second.post(f"/api/submit/{over.ref}", json={"result": complete(project)})
        assert refused.status_code == 409 and refused.json()["next"] is True
        after = second.get("/api/next/dialogue").json()
        assert "ref" in after and after["ref"] != over.ref, after
        assert second.post(f"/api/submit/{after['ref']}", json={"result": complete(project)}).json() == {"ok": True}
    stored = annotations_by(client, project_id, folder)
    answers = [(t, u) for t, u, a in stored if not a["was_cancelled"]]
    assert len(answers) == 2 and len({t for t, _ in answers}) == 2  # one answer per task: the overlap holds
    assert [(t, u) for t, u, a in stored if a["was_cancelled"]] == []
