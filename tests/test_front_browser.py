"""The front matter of a study (issue 70) in a real browser through a real gateway and Label Studio, for the worked
example (squality_pairwise): one participant declines consent, one fails the practice round, one goes through
consent, practice, background, a task and the exit survey to the completion code. (The routes, the ledger's record
and every part ordering: tests/test_front_gateway.py, in process.)"""

from __future__ import annotations

import json

import pytest

from evalstudio.crowd import ledger, participants
from evalstudio.protocols import registry
from evalstudio.protocols.front_matter import practice_items
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.importing import import_files

from .conftest import example_files, gateway_process, only_on_the_first_database
from .test_gateway import annotations_of, playwright_with_chromium

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("database_independent")]

EXAMPLE = "squality_pairwise"
DONE, NO_CONSENT = "FMDONE70", "FMNOCONSENT70"


def test_consent_declined_practice_failed_and_a_full_run_in_a_browser(label_studio, client, tmp_path):
    """One gateway, three participants, each in their own browser context. Waits on the page's states (the editor's
    data-task, the explanation box, the pages' headings), never on a duration. About 55 s on a shared 2-core machine
    (over the suite's 20 s): Label Studio's editor renders seven times (six practice items, one task), each a
    round of the gateway and the browser; one test for the three paths keeps it to one gateway and one browser."""
    from .test_browser import CHROMIUM, CHROMIUM_ARGS, fill
    from .test_cli import _projects_file

    only_on_the_first_database(label_studio)
    sync_playwright = playwright_with_chromium()

    def own(raw):  # a project of its own, one task a participant, Prolific's codes set
        entry = raw["projects"][EXAMPLE]
        entry["title"] = "front matter study"
        entry["crowd"].update(platform="prolific", per_participant=1, completion_code=DONE)
        entry["crowd"]["consent"]["declined_code"] = NO_CONSENT
    projects_file = _projects_file(tmp_path, own)
    project = registry.load(projects_file).get(EXAMPLE)
    project_id = import_files(project, importer_for(project), example_files(EXAMPLE), client).project_id
    items = practice_items(project)
    labels = project.criteria["preference"].labels
    folder = tmp_path / "participants"
    participants.add(client, ["FMDECLINE", "FMFAIL", "FMFULL"], folder)
    accounts = participants.load_accounts(folder)
    with gateway_process(label_studio, EXAMPLE, folder, projects_file) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def open_as(pid):
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(f"{url}/s/{pid}/{accounts[pid].access}")
            page.locator("#consent").wait_for()
            return page

        def consent(page):
            for box in page.locator(".statement").all():
                box.check()
            page.locator("#yes").click()
            page.wait_for_url(f"{url}/practice")

        def practice(page, right: bool):
            for number, item in enumerate(items, 1):
                page.wait_for_selector(f'#editor[data-task="{number}"]', timeout=180_000)
                page.locator("button", has_text="Submit").first.wait_for(timeout=180_000)
                want = item["expected"]["preference"]
                fill(page, project, {"preference": want if right else next(x for x in labels if x != want)})
                page.locator("button", has_text="Submit").first.click()
                box = page.locator("#explanation")
                box.locator("#continue").wait_for()
                told = box.inner_text()
                assert item["explanation"] in told and ("matches" in told) == right, told
                box.locator("#continue").click()

        # 1. consent declined: told so, Prolific's no-consent code, no task, no completion code
        page = open_as("FMDECLINE")
        page.locator("#no").click()
        page.locator("#ended").wait_for()
        text = page.inner_text("body")
        assert "You did not give your consent" in text and NO_CONSENT in text and DONE not in text
        page.goto(f"{url}/label/{EXAMPLE}")  # the task page sends them back to the end
        page.locator("#ended").wait_for()

        # 2. practice failed: every explanation shown, then screened out (no screened-out code set: Prolific's return)
        page = open_as("FMFAIL")
        consent(page)
        practice(page, right=False)
        page.locator("#ended").wait_for()
        text = page.inner_text("body")
        assert "did not reach the number of correct answers" in text and "Return" in text and DONE not in text

        # 3. the full run: consent, practice, background, one task, exit survey, completion code
        page = open_as("FMFULL")
        consent(page)
        practice(page, right=True)
        page.get_by_text("A few questions about you").wait_for()
        page.locator("#q0").fill("34")
        page.locator('input[name="q1"][value="No"]').check()
        page.locator('input[name="q2"][value="Every week"]').check()
        page.locator("#send").click()
        page.locator("a.button", has_text="Start").click()
        page.wait_for_selector('#editor[data-task="1"]', timeout=180_000)
        page.locator("button", has_text="Submit").first.wait_for(timeout=180_000)
        fill(page, project, {"preference": labels[0]})
        page.locator("button", has_text="Submit").first.click()
        [(task, annotation)] = annotations_of(client, page, [project_id], accounts["FMFULL"].user_id)
        page.locator("#status", has_text="done").wait_for(timeout=60_000)
        page.goto(url)
        page.get_by_text("Before you go").wait_for()
        assert DONE not in page.inner_text("body")
        page.locator('input[name="q0"][value="Easy"]').check()
        page.locator("#send").click()
        page.get_by_text(DONE).wait_for()
        browser.close()
    book = ledger.open_ledger(folder)
    steps = {pid: sorted(book.steps_of(pid)) for pid in ("FMDECLINE", "FMFAIL", "FMFULL")}
    assert steps == {"FMDECLINE": ["consent"], "FMFAIL": ["consent", "practice:1", "practice:2", "practice:3"],
                     "FMFULL": ["background", "consent", "exit", "practice:1", "practice:2", "practice:3"]}
    assert json.loads(book.steps_of("FMFULL")["background"].answer) == {"age": 34, "english": "No",
                                                                         "reading": "Every week"}
    # practice answers never reach Label Studio nor the ledger's answers: one annotation in all, FMFULL's task
    answered = [r for r in book.answers() if r.answered is not None]
    assert [r.participant for r in answered] == ["fmfull"] and annotation["result"]
    every = [a for page_ in client.full_task_pages(project_id) for t in page_ for a in t["annotations"]]
    assert len(every) == 1
