"""Each protocol's annotator view as a participant meets it through the gateway (one gateway per study, started when
first asked for): read against its document and its checklist, answered, and the page's source free of the config's
comments. (The gateway's routes, sign-in and answers: tests/test_gateway.py.)"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import httpx
import pytest

from evalstudio import importers
from evalstudio.crowd import participants
from evalstudio.exporters.tables.tidy import result_values
from evalstudio.protocols import registry
from evalstudio.tasks.importing import import_files

from .conftest import PROJECTS, example_files, gateway_process, only_on_the_first_database
from .test_gateway import LABEL_STUDIO_STEPS, annotations_of, playwright_with_chromium

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("database_independent")]


@pytest.fixture(scope="module")
def study_gateways(label_studio, client, reg, tmp_path_factory):
    """One gateway per study (sotopia, cmv, circa, dialogue, health), started when first asked for, after its
    projects' example files are imported, each with one participant per project of the study. Circa's Part I takes
    one task (quota 1), so that Part II, which the gateway opens only after Part I, is reached after one control
    question. The projects are the study's own (titles of their own): other tests on the shared server may have
    given every task of the usual ones its annotations, and the stream would then have nothing left to give.
    Yields study -> (gateway URL, participants folder, {project: project id})."""
    from .test_cli import _projects_file

    only_on_the_first_database(label_studio)

    started: dict[str, tuple[str, Path, dict[str, int]]] = {}
    with contextlib.ExitStack() as stack:
        def gateway(study_name: str) -> tuple[str, Path, dict[str, int]]:
            if study_name not in started:
                base = tmp_path_factory.mktemp(f"views-{study_name}")

                def own_projects(raw):
                    raw["projects"]["circa_part1"]["crowd"]["per_participant"] = 1
                    for entry in raw["projects"].values():
                        entry["title"] = "GV: " + entry["title"][:34]  # (at most 50 characters, " (list 1)" too)
                projects_file = _projects_file(base, own_projects)
                own = registry.load(projects_file)
                importer = importers.get(own.parts(study_name)[0].importer)
                ids = {part.name: import_files(part, importer, example_files(part.name), client).project_id
                       for part in own.parts(study_name)}
                folder = base / "participants"
                participants.add(client, list(dict.fromkeys(viewer(p.entry) for p in reg.parts(study_name))), folder)
                url = stack.enter_context(gateway_process(label_studio, study_name, folder, projects_file))
                started[study_name] = (url, folder, ids)
            return started[study_name]
        yield gateway


def viewer(project_name: str) -> str:
    """The participant id that opens one project's view through the gateway."""
    return "VIEW" + project_name.upper().replace("_", "")


def finish_through_the_api(page, url: str, project) -> None:
    """Answer the participant's tasks of one project through the gateway's API (with the page's own session) until
    the gateway says the part is finished."""
    from evalstudio.values.results import region

    from .test_browser import designed_values

    headers = {"X-Evalstudio": "1", "Content-Type": "application/json"}
    for _ in range(50):
        task = page.request.get(f"{url}/api/next/{project.entry}", headers=headers).json()
        if "finished" in task:
            return
        result = [region(project.interface, name, value) for name, value in designed_values(project).items()]
        saved = page.request.post(f"{url}/api/submit/{task['ref']}", headers=headers, data=json.dumps({"result": result}))
        assert saved.ok, saved.text()
    raise AssertionError(f"{project.name} did not finish through the API")


@pytest.mark.parametrize("protocol", PROJECTS)
def test_every_annotator_view_through_the_gateway(reg, client, study_gateways, protocol):
    """Each project's annotator view as a participant meets it through the gateway, read against its document's
    checklist as in test_browser: the document's phrases are on screen, the judged model outputs are shown, model
    ratings, gold labels and system names are not, every answer control starts empty; every control is filled in,
    submitted, and Label Studio holds exactly those values as the participant's annotation."""
    from .checklists import CHECKLISTS
    from .test_browser import (
        CHROMIUM,
        CHROMIUM_ARGS,
        SHOTS,
        assert_usable,
        designed_values,
        empty_controls,
        fill,
        flat,
        rendered_rows,
    )
    from .test_documents import missing_on_screen

    sync_playwright = playwright_with_chromium()

    project = reg.entry(protocol)
    url, folder, ids = study_gateways(project.study_name)
    project_ids = [ids[p.name] for p in reg.parts(protocol)]  # Circa Part II: the list the gateway puts them in
    pid = viewer(protocol)
    account = participants.load_accounts(folder)[pid]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        errors, dialogs = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{url}/s/{pid}/{account.access}")
        # the study's header names it as participants know it (its title), never by its projects.yaml name
        study_header = page.inner_text("header .title")
        # (the test's own projects are titled "GV: " + the title, shortened)
        assert study_header.startswith("GV: ") and project.title.startswith(study_header[4:]), study_header
        if project.crowd and project.crowd.after:  # the part that comes first (Circa's control questions)
            finish_through_the_api(page, url, reg.entry(project.crowd.after))
        page.goto(f"{url}/label/{protocol}")
        try:
            page.wait_for_selector("#editor[data-task]", timeout=180_000)
        except Exception:
            raise AssertionError(f"no task opened; the page says: {flat(page.inner_text('main'))[-300:]}") from None
        page.locator("button", has_text="Submit").first.wait_for(timeout=180_000)
        page.wait_for_timeout(1000)
        # the browser tab names the part once (issue 50: "TITLE: TITLE")
        assert page.title().count(page.inner_text("header .title")) == 1, page.title()
        assert empty_controls(page, project) == []  # no anchoring: nothing answered before the participant does
        if protocol == "dialogue":  # document 003: the HIT note in view, bold; the HIT and the question in it
            note = page.get_by_text("NOTE: THERE ARE A MAXIMUM OF 5 HITs", exact=False).first
            assert note.is_visible() and int(note.evaluate("e => getComputedStyle(e).fontWeight")) >= 700
            assert page.inner_text("#progress") == "HIT 1 of 5, question 1 of 11"
        # nothing opened by the test: the participant's first task has the guide open (issue 53), so every line of
        # the document must be on screen as the page comes
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"gateway-{protocol}.png"), full_page=True)
        body = flat(page.inner_text("body"))
        # every line of the document, read from the document, on the participant's screen (instructions above the view)
        assert missing_on_screen(reg, protocol, "gateway", body, rendered_rows(page)) == []
        checklist = CHECKLISTS[protocol]
        missing = [phrase for phrase in checklist["phrases"] + checklist.get("instructions", [])
                   + checklist.get("gateway_only", []) if flat(phrase) not in body]
        # nothing a participant of the gateway cannot do: no Label Studio step, no Label Studio sign-up
        assert not [p for p in checklist.get("label_studio_only", []) + LABEL_STUDIO_STEPS if flat(p) in body]
        assert not missing, missing
        # what the labeling config shows is not repeated by the instructions above it
        assert [flat(p) for p in checklist.get("once", []) if body.count(flat(p)) != 1] == []
        assert "undefined" not in body and "<p viewer" not in body
        assert_usable(page, project, body)
        values = designed_values(project)
        fill(page, project, values)
        page.locator("button", has_text="Submit").first.click()
        # the participant's annotation, on whichever task Label Studio's stream gave them
        mine = annotations_of(client, page, project_ids, account.user_id)
        browser.close()
    [(task, annotation)] = mine
    for snippet in checklist["shown"](task["data"]):
        assert flat(snippet) in body, snippet
    for secret in checklist["hidden"](task["meta"]):
        assert not secret or flat(secret) not in body, secret
    assert result_values(annotation["result"]) == values
    assert errors == [] and dialogs == []


@pytest.mark.parametrize("protocol", PROJECTS)
def test_no_comment_of_the_config_reaches_the_page(reg, study_gateways, protocol):
    """The labeling page's source carries the config and instructions without their comments (notes for the
    researcher, some of which name the design: where Circa's shown interpretation comes from, which CMV threads are
    mixed in), whether written as <!-- or escaped inside the page's script."""
    project = reg.entry(protocol)
    url, folder, _ = study_gateways(project.study_name)
    account = participants.load_accounts(folder)[viewer(protocol)]
    with httpx.Client(base_url=url, timeout=120) as web:
        assert web.get(f"/s/{account.participant_id}/{account.access}").status_code == 303
        page = web.get(f"/label/{project.entry}")
    assert page.status_code == 200
    comments = re.findall(r"<!--(.*?)-->", project.label_config + project.instructions_for("gateway"), flags=re.S)
    assert "<!--" not in page.text and "\\u003c!--" not in page.text
    for comment in comments:
        words = " ".join(comment.split())
        assert words[:60] not in page.text, words[:60]


@pytest.mark.parametrize("name", ["sotopia", "cmv_tom", "dialogue", "health", "circa_part1", "cmv_threads"])
def test_the_first_task_has_the_guide_open_with_the_same_controls(reg, name):
    """Issue 53: Sotopia's guide and definitions, cmv_tom's and dialogue's instructions sat in closed panels, so a
    participant could rate without reading them. A part's first task gets the config with every panel open (a
    section with the panel's title): a valid config, the same controls and the same text, nothing folded."""
    from label_studio_sdk.label_interface import LabelInterface

    from evalstudio.gateway.setup import panels_open, without_comments

    project = reg.get(name)
    config = without_comments(project.config_for("gateway"))
    opened = panels_open(config)
    assert "<Collapse" in config and "<Collapse" not in opened and "<Panel" not in opened
    before, after = LabelInterface(config), LabelInterface(opened)
    after.validate()
    assert {(c.name, c.tag) for c in before.controls} == {(c.name, c.tag) for c in after.controls}
    texts = lambda li: sorted(o.value for o in li.objects if o.tag == "Text" and not o.value.startswith("$"))
    assert texts(before) == texts(after)
    import xml.etree.ElementTree as ET

    titles = [p.get("value") for p in ET.fromstring(config).iter("Panel")]
    headers = [h.get("value") for h in ET.fromstring(opened).iter("Header")]
    assert all(title in headers for title in titles)
