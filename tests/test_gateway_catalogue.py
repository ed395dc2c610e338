"""The gateway's list of a part's tasks (its catalogue, evalstudio/gateway/serving.py) read again incrementally,
against a real Label Studio: after the first read, a refresh asks Label Studio only for the tasks it added or saved
since (and for their number), and ends with what a gateway reading every task would hold; a deleted task makes it read
every task again. (Issue 71, item 1. A participant is told "done" only on a read begun after they asked:
tests/test_ledger_faults.py.)"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from evalstudio.crowd import ledger
from evalstudio.gateway import serving
from evalstudio.gateway.app import Gateway
from evalstudio.gateway.setup import GatewayConfig, load_parts

from .test_ledger_faults import import_more
from .test_study_ledger import complete, dialogue_study

pytestmark = pytest.mark.server

ITEMS = 6


def change(name: str, tmp_path, client, label_studio, project, project_id: int) -> set[int] | None:
    """Make the change `name` in Label Studio: the tasks a refresh must read again (None: every task)."""
    web = httpx.Client(base_url=label_studio.url, timeout=60,
                       headers={"Authorization": f"Token {label_studio.credentials().api_key}"})
    ids = client.task_id_list(project_id)
    if name == "nothing":
        return set()
    if name == "import":
        import_more(tmp_path, client, project, ITEMS, 2)
        return set(client.task_id_list(project_id)[ITEMS:])
    if name in ("annotate", "delete an annotation"):
        made = web.post(f"/api/tasks/{ids[1]}/annotations", params={"project": project_id},
                        json={"result": complete(project), "lead_time": 1.0})
        assert made.status_code == 201, made.text
        if name == "delete an annotation":
            assert web.delete(f"/api/annotations/{made.json()['id']}").status_code == 204
        return {ids[1]}
    if name == "edit the data":
        task = web.get(f"/api/tasks/{ids[2]}").json()
        edited = web.patch(f"/api/tasks/{ids[2]}", json={"data": {**task["data"], "response": "edited"}})
        assert edited.status_code == 200, edited.text
        return {ids[2]}
    if name == "delete a task":
        client.delete_tasks(project_id, [ids[3]])
        return None
    raise ValueError(name)


@pytest.mark.parametrize("name", ["nothing", "import", "annotate", "delete an annotation", "edit the data",
                                  "delete a task"])
def test_a_refresh_reads_what_changed_and_holds_what_a_full_read_holds(label_studio, client, tmp_path, monkeypatch,
                                                                       name):
    """A gateway reads a part's tasks (one was annotated in Label Studio before); then `name` happens in Label
    Studio, and the gateway reads the part again as for a participant told "done" (a read begun now). It asks for
    the changed tasks only (every task once one was deleted), and then holds the same tasks, contexts, answer
    counts, annotators and shown fields as a second gateway that reads every task."""
    monkeypatch.delenv(ledger.URL_ENV, raising=False)
    # saves read again before the latest one seen: none here (the import's own saves are seconds old, so the
    # default window would ask for every task again)
    monkeypatch.setattr(serving, "CATALOGUE_WINDOW", 0.0)
    projects_file, project, project_id = dialogue_study(tmp_path, client, f"catalogue {name}", items=ITEMS, overlap=2)
    first_task = client.task_id_list(project_id)[0]
    assert httpx.post(f"{label_studio.url}/api/tasks/{first_task}/annotations", params={"project": project_id},
                      json={"result": complete(project), "lead_time": 1.0},
                      headers={"Authorization": f"Token {label_studio.credentials().api_key}"}).status_code == 201
    [part] = load_parts(client, [project])
    config = GatewayConfig(study="catalogue", parts=[part], label_studio_url=label_studio.url,
                           api_key=label_studio.credentials().api_key, participants_folder=tmp_path / "participants",
                           public_url="http://127.0.0.1:9")
    read: list[int] = []  # the tasks Label Studio's answers carried, the count's one-task page apart

    async def listed(response: httpx.Response) -> None:
        if response.request.url.path == "/api/tasks" and response.request.url.params.get("page_size") != "1":
            await response.aread()
            read.extend(t["id"] for t in response.json().get("tasks") or [])

    async def refreshed():
        gateway = Gateway(config)
        gateway.upstream.event_hooks["response"].append(listed)
        first = await gateway._read_catalogue(part)
        assert sorted(read) == sorted(first.contexts)  # the first read: every task
        expected = await asyncio.to_thread(change, name, tmp_path, client, label_studio, project, project_id)
        read.clear()
        again = await gateway._catalogue(part, since=time.monotonic())
        seen = list(read)
        fresh = Gateway(config)
        full = await fresh._read_catalogue(part)
        for g in (gateway, fresh):
            await g.upstream.aclose()
        return expected, seen, again, full

    expected, seen, again, full = asyncio.run(refreshed())
    assert sorted(seen) == sorted(full.contexts if expected is None else expected)
    assert (again.contexts, again.outside, again.annotators, again.data, again.by_user) == (
        full.contexts, full.outside, full.annotators, full.data, full.by_user)
    assert sum(again.outside.values()) == 1 + (name == "annotate")
    if name == "edit the data":  # seen, noted for the operator, and shown as first recorded
        assert [t for _, t, _ in ledger.Ledger(tmp_path / "participants").changed_tasks()] == sorted(expected)
        assert json.dumps(again.data[min(expected)]).count("edited") == 0
