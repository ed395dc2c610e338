"""A crowd study in real browsers: three participants, their own accounts and browsers, at the same time."""

from __future__ import annotations

import contextlib
import csv
import os
from pathlib import Path

import pytest

from evalstudio.tasks.importing import import_files

from .conftest import gateway_process
from .test_browser import CHROMIUM, CHROMIUM_ARGS, SHOTS, designed_values, fill, flat

# what the browser does does not depend on Label Studio's database: one run, on the first one
pytestmark = [pytest.mark.server, pytest.mark.usefixtures("database_independent")]


def _user_id(completed_by):
    """The annotating user's id (Label Studio returns the user as an object, or as its id)."""
    return completed_by.get("id") if isinstance(completed_by, dict) else completed_by


def test_three_participants_work_through_a_crowd_study_in_parallel(client, label_studio, tmp_path):
    """Three participants (their own accounts, browsers and threads) label a small dialogue study with gold items
    at the same time through the participant gateway (their personal links; Label Studio's labeling stream behind
    it). Each meets the tasks, as the browser shows them, in an order of their own, never the two responses to one
    context back to back, and the human reference not always first. At the end every task has exactly N
    annotations, nobody annotated a task twice, the participant who failed the gold items is flagged by `status`,
    rejected in the approvals file, and left out of the report when asked."""
    with contextlib.ExitStack() as stack:
        _three_participants(client, label_studio, tmp_path, stack)


def _three_participants(client, label_studio, tmp_path, stack):
    """The body of the test above (it holds the gateway process open)."""
    import json
    import threading

    from playwright.sync_api import sync_playwright

    from evalstudio import importers
    from evalstudio.crowd import ledger, participants
    from evalstudio.protocols import registry

    from .test_cli import _projects_file, run

    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")

    def rules(raw):
        entry = raw["projects"]["dialogue"]
        entry.update({"title": "crowd browser study", "annotators_per_task": 3, "order": "random"})
        entry["crowd"].update({"min_gold_accuracy": 0.5, "bonus": {"rule": "all_batches", "amounts": [1.0]}})
    projects_file = _projects_file(tmp_path, rules)
    project = registry.load(projects_file).get("dialogue")
    items = tmp_path / "items.jsonl"
    # two contexts, each with the human reference and a model's response: four tasks
    records = [{"id": f"b{i}", "context": f"A: what do you think about topic {i}?",
                "responses": [{"system": system, "text": f"reply number {i} to the topic, by the {system}"}
                              for system in ("human", "model")]} for i in range(2)]
    records[0]["gold"] = {"appropriateness": 5}
    tasks = len(records) * 2
    items.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    project_id = import_files(project, importers.get("dialogue"), [items], client).project_id
    folder = tmp_path / "participants"
    participants.add(client, ["PBROWSER1", "PBROWSER2", "PBROWSER3"], folder)
    ledger.open_ledger(folder).set_setting("order-salt", "a seeded browser study")  # the orders are fixed by it
    accounts = participants.load_accounts(folder)
    gateway = stack.enter_context(gateway_process(label_studio, "dialogue", folder, projects_file))
    listed = [t for page in client.full_task_pages(project_id) for t in page]
    replies = {t["id"]: t["data"]["response"] for t in listed}
    about = {t["id"]: (str(t["data"]["item_id"]), str(t["meta"]["system"])) for t in listed}  # context, system
    served: dict[str, list[int]] = {}  # per participant, the tasks in the order the browser showed them
    failures: list[str] = []

    def participant(pid: str, appropriateness: int) -> None:
        try:
            with sync_playwright() as p:  # one Playwright per thread (its API is not thread-safe)
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.on("dialog", lambda d: d.accept())
                page.goto(f"{gateway}/s/{pid}/{accounts[pid].access}")
                page.goto(f"{gateway}/label/dialogue")
                on_screen = None  # the gateway's number of the task on screen: wait for the next one after a submit
                for done in range(tasks):
                    try:
                        page.wait_for_function("(on_screen) => { const t = document.getElementById('editor')"
                                               ".dataset.task; return t && t !== on_screen; }", arg=on_screen,
                                               timeout=180_000)
                    except Exception:
                        SHOTS.mkdir(parents=True, exist_ok=True)
                        page.screenshot(path=str(SHOTS / f"crowd-{pid}-waiting.png"))
                        raise AssertionError(f"{pid}: task {done + 1} did not open; the page says: "
                                             f"{flat(page.inner_text('main'))[-300:]}") from None
                    on_screen = page.locator("#editor").get_attribute("data-task")
                    page.locator("button", has_text="Submit").first.wait_for(timeout=180_000)
                    page.wait_for_timeout(800)
                    body = flat(page.inner_text("body"))
                    [task_id] = [t for t, reply in replies.items() if reply in body]
                    served.setdefault(pid, []).append(task_id)
                    values = {c: v for c, v in designed_values(project).items()}
                    values["appropriateness"] = appropriateness
                    fill(page, project, values)
                    page.locator("button", has_text="Submit").first.click()
                    for _ in range(120):  # wait until Label Studio has the annotation, then the next task loads
                        mine = [a for a in client.sdk.tasks.get(id=task_id).annotations or []
                                if _user_id(a["completed_by"] if isinstance(a, dict) else a.completed_by)
                                == accounts[pid].user_id]
                        if mine:
                            break
                        page.wait_for_timeout(500)
                    else:
                        SHOTS.mkdir(parents=True, exist_ok=True)
                        page.screenshot(path=str(SHOTS / f"crowd-{pid}-{task_id}.png"))
                        raise AssertionError(f"{pid}: no annotation arrived for task {task_id}; the page ends with: "
                                             f"{flat(page.inner_text('body'))[-300:]}")
                browser.close()
        except Exception as e:  # reported by the main thread
            SHOTS.mkdir(parents=True, exist_ok=True)
            failures.append(f"{pid}: {type(e).__name__}: {str(e)[:400]}")

    threads = [threading.Thread(target=participant, args=(pid, score)) for pid, score in
               (("PBROWSER1", 5), ("PBROWSER2", 5), ("PBROWSER3", 1))]  # the third answers the gold items wrong
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    assert not failures, failures
    orders = {pid: [about[t] for t in shown] for pid, shown in served.items()}
    for pid, order in orders.items():
        assert len(set(order)) == tasks, (pid, order)
        assert all(a[0] != b[0] for a, b in zip(order, order[1:])), (pid, order)  # no context twice in a row
    assert len({tuple(order) for order in orders.values()}) >= 2, orders  # orders of their own
    reference_first = {[s for c, s in order if c == context][0] == "human"
                       for order in orders.values() for context, _ in order}
    assert reference_first == {True, False}, orders  # the reference is met first in some contexts, second in others

    exported = client.export_tasks(project_id)
    for task in exported:
        by = [_user_id(a["completed_by"]) for a in task["annotations"] if not a["was_cancelled"]]
        assert len(by) == 3 and len(set(by)) == 3, (task["id"], by)  # exactly N, nobody twice

    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file)}
    shown = run("status", "dialogue", "--participants", str(folder), "-o", str(tmp_path / "status"), env=env)
    assert shown.returncode == 0, shown.stderr
    table = {row["participant"]: row for row in csv.DictReader(open(tmp_path / "status" / "participants.csv"))}
    assert set(table) == {"PBROWSER1", "PBROWSER2", "PBROWSER3"}
    assert "failed gold" in table["PBROWSER3"]["warnings"] and "failed gold" not in table["PBROWSER1"]["warnings"]
    assert all(int(row["tasks_done"]) == tasks for row in table.values())

    out = tmp_path / "approvals"
    decided = run("approvals", "dialogue", "--participants", str(folder), "-o", str(out), env=env)
    assert decided.returncode == 0, decided.stderr
    upload = {row["WorkerId"]: row for row in csv.DictReader(open(out / "mturk_upload.csv"))}
    assert upload["PBROWSER3"]["Approve"] == "" and upload["PBROWSER3"]["Reject"].startswith("failed attention checks")
    assert upload["PBROWSER1"]["Approve"] == "x" and upload["PBROWSER2"]["Approve"] == "x"

    report = run("report", "dialogue", "--exclude-rejected", "--bootstrap", "5", "-o", str(tmp_path / "report"), env=env)
    assert report.returncode == 0, report.stderr
    kept = {row["annotator"] for row in csv.DictReader(open(tmp_path / "report" / "annotator_qc.csv"))}
    assert kept == {accounts["PBROWSER1"].email, accounts["PBROWSER2"].email}
