"""A gateway on a host cut off from what it stands on (issue 64): its participants are told so at once, in a 503 the
labeling page shows and asks again after, never left waiting until their own timeout, and nothing is acknowledged
that the ledger does not hold. The cut is a real one: the gateway runs in a network namespace of its own whose
link to the ledger's PostgreSQL and to Label Studio is taken down (tests/partition.py); Label Studio silent is a
real SIGSTOP of its processes. States are waited for, never durations."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys

import httpx
import pytest

from evalstudio import importers
from evalstudio.crowd import ledger, participants
from evalstudio.gateway.app import NO_LABEL_STUDIO, NO_LEDGER
from evalstudio.labelstudio.server import wait_healthy
from evalstudio.protocols import registry
from evalstudio.tasks.importing import import_files

from . import partition
from .conftest import free_port

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("database_independent")]
# far beyond what a gateway that says "unreachable" takes (its ledger timeout: 3 s here), far below what one that
# waits for the network takes (TCP gives up after about 15 minutes): only bounds a failure
PATIENCE = 120


@pytest.fixture
def host():
    why = partition.available()
    if why is not None:
        pytest.skip(f"no network namespaces for this user: {why}")
    made = partition.Host()
    yield made
    made.remove()


@pytest.fixture
def far_gateway(label_studio, client, postgres, host, tmp_path, monkeypatch):
    """A dialogue study of 3 tasks whose ledger is in PostgreSQL, its gateway on the cut-able host, one participant
    signed in there: (participant's client, host, folder, project, participant id)."""
    from .test_cli import _projects_file

    def own(raw):
        raw["projects"]["dialogue"]["title"] = f"partition {tmp_path.name}"
        raw["projects"]["dialogue"]["annotators_per_task"] = 1
    projects_file = _projects_file(tmp_path, own)
    project = registry.load(projects_file).get("dialogue")
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"c{i}", "context": f"A: question {i}?",
                                         "responses": [{"system": "s", "text": f"answer {i}"}]}) + "\n"
                             for i in range(3)), encoding="utf-8")
    import_files(project, importers.get("dialogue"), [items], client)
    url = postgres.create_database(f"ledger_{secrets.token_hex(4)}")
    monkeypatch.setenv(ledger.URL_ENV, url)  # this process reaches the ledger directly
    folder = tmp_path / "participants"
    pid = f"CUT{secrets.token_hex(3).upper()}"  # (the server is shared: a participant of this test only)
    participants.add(client, [pid], folder)
    access = participants.load_accounts(folder)[pid].access
    host.forward(postgres.port)
    host.forward(label_studio.port)
    port = free_port()
    env = {**os.environ, "LABEL_STUDIO_URL": f"http://{host.back_machine}:{label_studio.port}",
           "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key, "EVALSTUDIO_PROJECTS": str(projects_file),
           ledger.URL_ENV: url.replace("@127.0.0.1:", f"@{host.back_machine}:"), "EVALSTUDIO_LEDGER_TIMEOUT": "3",
           "EVALSTUDIO_UPSTREAM_WAIT": "3"}
    log = open(tmp_path / "gateway.log", "w")
    process = subprocess.Popen(host.command(sys.executable, "-m", "evalstudio.cli", "gateway", "dialogue", "--host",
                                            host.front_host, "--port", str(port), "--participants", str(folder)),
                               env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://{host.front_host}:{port}"
    try:
        wait_healthy(base, 300, process, "the gateway on the second host")
        with httpx.Client(base_url=base, timeout=PATIENCE, headers={"X-Evalstudio": "1"}) as web:
            assert web.get(f"/s/{pid}/{access}").status_code == 303
            yield web, host, folder, project, pid
    finally:
        host.cut(False)
        process.terminate()
        process.wait(timeout=60)
        log.close()


def result_of(project, rating: int) -> dict:
    return {"result": [{"from_name": c.name, "to_name": c.to_name[0], "type": "rating", "value": {"rating": rating}}
                       for c in project.interface.controls]}


@pytest.mark.parametrize("asked", ["a submission", "a next task", "the start page"])
def test_a_gateway_cut_off_from_its_ledger_says_so_and_acknowledges_nothing(far_gateway, asked):
    web, host, folder, project, pid = far_gateway
    first = web.get("/api/next/dialogue").json()
    assert web.post(f"/api/submit/{first['ref']}", json=result_of(project, 4)).json() == {"ok": True}
    second = web.get("/api/next/dialogue").json()
    book = ledger.open_ledger(folder)  # the machine's side of the cut
    assert book.answered_count(pid, "dialogue") == 1

    host.cut(True)
    if asked == "a submission":
        answer = web.post(f"/api/submit/{second['ref']}", json=result_of(project, 2))
    elif asked == "a next task":
        answer = web.get("/api/next/dialogue")
    else:  # a page: the message as text
        answer = web.get("/")
    said = answer.json()["error"] if answer.headers["content-type"].startswith("application/json") else answer.text
    assert answer.status_code == 503 and said == NO_LEDGER, answer.text
    assert book.answered_count(pid, "dialogue") == 1  # nothing acknowledged, nothing recorded

    host.cut(False)  # the same request again, as the page asks it, until the gateway has its ledger back
    again = partition.wait_until(
        lambda: (lambda a: a if a.status_code != 503 else None)(
            web.post(f"/api/submit/{second['ref']}", json=result_of(project, 2))), "the answer acknowledged")
    assert again.json() == {"ok": True}
    assert book.answered_count(pid, "dialogue") == 2


def test_a_participant_waiting_on_a_silent_label_studio_is_told_so(far_gateway, label_studio):
    """With nothing left in the list in hand, "done" waits for Label Studio's tasks; Label Studio frozen, the
    participant is told the study server cannot reach it, and their answers stay acknowledged."""
    web, host, folder, project, pid = far_gateway
    for rating in (1, 2, 3):  # every task of the study answered: nothing left in the list in hand
        task = web.get("/api/next/dialogue").json()
        assert web.post(f"/api/submit/{task['ref']}", json=result_of(project, rating)).json() == {"ok": True}
    os.killpg(label_studio.process.pid, signal.SIGSTOP)
    try:  # (the gateway's own reads of Label Studio give up after 60 s: a participant is told well before)
        answer = web.get("/api/next/dialogue", timeout=45)
    finally:
        os.killpg(label_studio.process.pid, signal.SIGCONT)
    assert answer.status_code == 503 and answer.json()["error"] == NO_LABEL_STUDIO, answer.text
    assert ledger.open_ledger(folder).answered_count(pid, "dialogue") == 3
    done = partition.wait_until(lambda: (lambda a: a if a.status_code != 503 else None)(
        web.get("/api/next/dialogue")), "Label Studio's tasks read again")
    assert "finished" in done.json(), done.text
