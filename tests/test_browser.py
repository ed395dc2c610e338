"""What annotators see: each protocol in a real browser (Playwright + Debian chromium) on the real Label Studio.

Open a task, check the text, rubric and every control with its range are on screen, fill every control, submit,
and read the annotation back through the API with exactly the values entered.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalstudio.exporters.tables.tidy import result_values
from evalstudio.tasks.importing import import_files
from evalstudio.values.controls import control_range, control_step

from .checklists import CHECKLISTS
from .conftest import PROJECTS, ROOT, example_files, only_on_the_first_database
from .test_documents import missing_on_screen

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "test-output" / "screenshots"
# what the browser shows does not depend on Label Studio's database: one run, on the first one
pytestmark = [pytest.mark.server, pytest.mark.usefixtures("database_independent")]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def session(browser, label_studio):
    """A logged-in page; every script dialog (alert, confirm, prompt) it raises is recorded and dismissed."""
    only_on_the_first_database(label_studio)
    creds = label_studio.credentials()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog):
        if dialog.type == "beforeunload":  # Label Studio's "leave with unsaved changes?" when moving on
            dialog.accept()
        else:  # alert / confirm / prompt: only a script can raise these
            dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(f"{label_studio.url}/user/login")
    page.fill("input[name=email]", creds.username)
    page.fill("input[name=password]", creds.password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    yield page, dialogs
    context.close()


def open_task(page, url: str, project_id: int, task_id: int):
    """Open a task that has no annotation yet in the labeling view; say what the page showed if it does not load."""
    page.goto(f"{url}/projects/{project_id}/data?task={task_id}")
    submit = page.locator("button", has_text="Submit").first
    try:
        submit.wait_for(timeout=60_000)
    except Exception as exc:
        SHOTS.mkdir(parents=True, exist_ok=True)
        shot = SHOTS / f"open-task-{project_id}-{task_id}-failed.png"
        page.screenshot(path=str(shot))
        buttons = page.locator("button").all_inner_texts()
        raise AssertionError(f"task {task_id} of project {project_id} did not open for labeling at {page.url}; "
                             f"buttons on the page: {buttons}; screenshot: {shot}") from exc
    page.wait_for_timeout(1000)


def controls_in_order(project, tag: str) -> list[str]:
    """Control names of one tag in document order (the order Label Studio renders them)."""
    return [el.get("name") for el in ET.fromstring(project.label_config).iter(tag)]


def designed_values(project) -> dict[str, object]:
    """A value for every control: inside its range and step, negatives and decimals included."""
    values = {}
    for i, control in enumerate(project.interface.controls):
        tag = control.tag
        if tag == "Number":
            lo, hi = control_range(control)
            step = control_step(control)
            if step is None:  # any decimal (health): values such as 5.5, 7.8 and 2.37
                values[control.name] = round(lo + (i * 1.37) % (hi - lo), 2)
            else:
                values[control.name] = round(hi - step * (5 + i % 3) if step < 1 else lo + (i % int(hi - lo + 1)), 1)
        elif tag == "Rating":
            values[control.name] = 1 + i % 5
        elif tag == "Choices":
            values[control.name] = list(control.labels)[i % len(control.labels)]
        elif tag == "TextArea":
            values[control.name] = f"typed by the browser test into {control.name}"
    return values


def fill(page, project, values: dict[str, object]):
    choices, ratings = controls_in_order(project, "Choices"), controls_in_order(project, "Rating")
    for name, value in values.items():
        tag = project.interface.get_control(name).tag
        if tag == "Number" and project.interface.get_control(name).attr.get("slider") == "true":
            move_slider(page, name, value)
        elif tag == "Number":
            page.locator(f'input[name="{name}"]').fill(str(value))
        elif tag == "Rating":
            page.locator("ul.ant-rate").nth(ratings.index(name)).locator("li").nth(int(value) - 1).click()
        elif tag == "Choices":
            page.locator(".lsf-choices").nth(choices.index(name)).locator(f'input[name="{value}"]').check()
        elif tag == "TextArea":
            # typed and left as it is: the form's Submit saves it (the configs hide Label Studio's "Add" step)
            text_box(page, name).fill(str(value))


def move_slider(page, name: str, value) -> None:
    """Move a range input to `value` as a person dragging it would (React sees an input event)."""
    page.locator(f'input[name="{name}"]').evaluate(
        """(el, v) => { const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
                        set.call(el, String(v)); el.dispatchEvent(new Event('input', {bubbles: true}));
                        el.dispatchEvent(new Event('change', {bubbles: true})); }""", value)
    shown = page.locator(f'input[name="{name}"] + output').inner_text().strip()
    if float(shown) != float(value):
        raise AssertionError(f"slider {name} shows {shown!r} after moving it to {value}")


def text_box(page, name: str):
    """A TextArea's input: a <textarea>, or an <input> when the config asks for one row."""
    return page.locator(f'textarea[name="{name}"], input[name="{name}"]')


def submit_and_read_back(page, client, task_id: int, before: int) -> dict:
    page.locator("button", has_text="Submit").first.click()
    for _ in range(60):
        annotations = client.sdk.tasks.get(id=task_id).annotations or []
        if len(annotations) > before:
            last = annotations[-1]
            return result_values(last["result"] if isinstance(last, dict) else last.result)
        page.wait_for_timeout(500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"no-annotation-{task_id}.png"
    page.screenshot(path=str(shot))
    raise AssertionError(f"no annotation arrived for task {task_id}; the page ends with: "
                         f"{flat(page.inner_text('body'))[-600:]} (screenshot {shot})")


def fresh_task(client, project_id: int, offset: int = 1):
    return sorted(client.tasks(project_id), key=lambda t: t.id)[-offset]




def instructions_window(page) -> str:
    """The project's instructions as Label Studio shows them: its Instructions button opens them in a window (which
    also opens by itself at the start of the labeling stream); read, then closed."""
    page.locator("button", has_text="Instructions").first.click()
    window = page.locator(".lsf-modal-ls_visible .lsf-modal-ls__body")  # (Label Studio's own window: no ARIA role)
    window.wait_for(timeout=30_000)
    text = window.inner_text()
    page.locator(".lsf-modal-ls_visible button[aria-label='Close modal']").click()
    window.wait_for(state="hidden", timeout=30_000)
    return text


def rendered_rows(page) -> list[list[str]]:
    """The cells of each table row on screen (the configs' View className="es-tr": one grid row per table row)."""
    rows = page.locator(".es-tr").evaluate_all("els => els.map((e) => [...e.children].map((c) => c.innerText))")
    return [[flat(cell) for cell in row] for row in rows]


def open_panels(page):
    """Open every collapsible panel of the task (instructions, rubric, examples)."""
    headers = page.locator(".ant-collapse-header")
    for i in range(headers.count()):
        header = headers.nth(i)
        if header.get_attribute("aria-expanded") != "true":
            header.click()
    page.wait_for_timeout(300)


def empty_controls(page, project) -> list[str]:
    """Names of answer controls that are not empty (an annotator's controls must start empty: no anchoring)."""
    filled = []
    choices, ratings = controls_in_order(project, "Choices"), controls_in_order(project, "Rating")
    for control in project.interface.controls:
        name, tag = control.name, control.tag
        if tag == "Number" and control.attr.get("slider") == "true":
            # a range input always has a position (browsers put it mid-way); Label Studio's value is its <output>
            if page.locator(f'input[name="{name}"] + output').inner_text().strip() != "":
                filled.append(name)
        elif tag == "Number" and page.locator(f'input[name="{name}"]').input_value() != "":
            filled.append(name)
        elif tag == "Rating" and page.locator("ul.ant-rate").nth(ratings.index(name)).locator("li.ant-rate-star-full").count():
            filled.append(name)
        elif tag == "Choices" and selected(page.locator(".lsf-choices").nth(choices.index(name))):
            filled.append(name)
        elif tag == "TextArea" and text_box(page, name).input_value() != "":
            filled.append(name)
    return filled


def selected(group) -> list[str]:
    """The options shown as chosen in one Choices group. (Not the inputs' `checked`: Label Studio names every radio
    input after its option, so all "Yes" radios of a page form one browser radio group.)"""
    import re

    texts = group.locator(".ant-radio-wrapper-checked, .ant-checkbox-wrapper-checked").all_inner_texts()
    return [re.sub(r"\[\w\]$", "", text.strip()) for text in texts]  # without the hotkey hint, e.g. "Yes[1]"


def flat(text: str) -> str:
    return " ".join(text.split())


def assert_usable(page, project, body: str) -> None:
    """What the configs fix in Label Studio's view: no "(click to open)" in panel titles, no keyboard-shortcut hints
    after choices, every star of a rating shows its number, written answers have no "submissions"/"Add" step."""
    assert "click to open" not in body
    assert page.locator(".lsf-choice .lsf-hint").evaluate_all(
        "els => els.filter((e) => e.offsetParent !== null).length") == 0
    assert "submissions" not in body and "Press Shift + Enter to Add" not in body
    for stars in page.locator("ul.ant-rate").all():
        numbers = stars.evaluate("ul => [...ul.querySelectorAll('li.ant-rate-star')].map("
                                 "(li) => getComputedStyle(li, '::after').content)")
        assert numbers == [f'"{n}"' for n in range(1, len(numbers) + 1)] and numbers, numbers


@pytest.mark.parametrize("protocol", PROJECTS)
def test_annotator_view_follows_the_protocol_document(reg, importer_for, client, label_studio, session, protocol):
    """The rendered task against its document's checklist; every answer control starts empty; model outputs that
    are judged are shown, model ratings and gold labels are not; then every control is filled, submitted and read
    back through the API exactly as entered."""
    page, dialogs = session
    project = reg.entry(protocol)
    report = import_files(project, importer_for(project.study_name), example_files(protocol), client)
    task = full_task(client, report.project_id)
    open_task(page, label_studio.url, report.project_id, task["id"])
    assert empty_controls(page, project) == []  # before anything is touched
    assert client.predictions(report.project_id)[task["id"]] == []  # and no prediction exists to prefill from
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{protocol}.png"))
    open_panels(page)
    page.screenshot(path=str(SHOTS / f"{protocol}-panels.png"), full_page=True)
    body = flat(page.inner_text("body"))
    # every line of the document, read from the document, on this screen or in the instructions window
    assert missing_on_screen(reg, protocol, "label-studio", body + " " + instructions_window(page),
                             rendered_rows(page)) == []
    checklist = CHECKLISTS[protocol]
    missing = [phrase for phrase in checklist["phrases"] + checklist.get("label_studio_only", [])
               if flat(phrase) not in body]
    assert not [p for p in checklist.get("gateway_only", []) if flat(p) in body]  # the gateway's steps, not here
    assert not missing, missing
    for snippet in checklist["shown"](task["data"]):
        assert flat(snippet) in body, snippet
    for secret in checklist["hidden"](task["meta"]):
        assert not secret or flat(secret) not in body, secret
    assert "00:00:00" not in body and "<p viewer" not in body  # no audio-sync timestamps, no markup
    assert "undefined" not in body  # every $field of the config resolved
    assert_usable(page, project, body)

    li = project.interface
    for control in li.controls:  # every control, with its range
        if control.tag == "Number":
            box = page.locator(f'input[name="{control.name}"]')
            assert (float(box.get_attribute("min")), float(box.get_attribute("max"))) == control_range(control)
            assert box.get_attribute("step") == control.attr.get("step", "1")
        elif control.tag == "Rating":
            stars = page.locator("ul.ant-rate").nth(controls_in_order(project, "Rating").index(control.name)).locator("li")
            assert stars.count() == int(control.attr["maxRating"])
        elif control.tag == "Choices":
            group = page.locator(".lsf-choices").nth(controls_in_order(project, "Choices").index(control.name))
            assert [group.locator(f'input[name="{label}"]').count() for label in control.labels] == [1] * len(control.labels)
        elif control.tag == "TextArea":
            assert text_box(page, control.name).count() == 1

    values = designed_values(project)
    fill(page, project, values)
    page.screenshot(path=str(SHOTS / f"{protocol}-filled.png"))
    got = submit_and_read_back(page, client, task["id"], before=0)
    assert got == values
    assert dialogs == []


def full_task(client, project_id: int) -> dict:
    """The newest task nobody has annotated yet (other tests may share the project), with its data and meta."""
    return max((t for page in client.full_task_pages(project_id) for t in page if not t["annotations"]),
               key=lambda t: t["id"])


def test_health_accepts_decimals_and_sotopia_negative_ranges(reg):
    """The designed values used above exercise what the protocols demand."""
    health, sotopia = designed_values(reg.entry("health")), designed_values(reg.entry("sotopia"))
    assert any(v != int(v) for k, v in health.items() if k in {"explainability", "controllability"})
    assert min(v for k, v in sotopia.items() if k.endswith("_secret")) < 0


def test_untrusted_html_renders_as_text_and_runs_nothing(reg, importer_for, client, label_studio, session):
    page, dialogs = session
    project = reg.entry("cmv_tom").model_copy(update={"title": "cmv untrusted html"})  # its own, unannotated tasks
    report = import_files(project, importer_for("cmv"), example_files("cmv"), client)
    [task] = [t for t in client.tasks(report.project_id) if t.data["item_id"] == "es-demo-3"]
    open_task(page, label_studio.url, report.project_id, task.id)
    page.wait_for_timeout(1500)
    body = page.inner_text("body")
    assert "<script>alert('x')</script>" in body and "<img src=x onerror=alert(1)>" in body
    assert "[click me](javascript:alert(1))" in body
    assert page.locator("img[src='x']").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.evaluate("() => [...document.scripts].some(s => s.textContent.includes(\"alert('x')\"))") is False
    assert dialogs == []


def test_prefill_opt_in_shows_predictions_and_the_export_flags_accepted_ones(reg, importer_for, client, label_studio,
                                                                            session, tmp_path):
    """Model-assisted labelling, opted in: the model's ratings fill the controls, the annotator changes one and
    accepts the rest; the export flags the accepted values and the report refuses them unless told to leave them out."""
    from evalstudio.base.errors import EvalstudioError
    from evalstudio.exporters.analyses.report import build_report
    from evalstudio.exporters.tables.tidy import annotation_frame

    page, dialogs = session
    project = reg.entry("health").model_copy(update={"title": "health prefill opt-in", "prefill": True})
    report = import_files(project, importer_for("health"), example_files("health"), client)  # predictions included
    client.ensure_project(project)
    assert client.project(report.project_id).show_collab_predictions is True
    task = full_task(client, report.project_id)
    [prediction] = client.predictions(report.project_id)[task["id"]]  # the one the import brought
    predicted = result_values(prediction["result"])
    ratings = task["meta"]["model_ratings"]
    assert predicted == ratings
    open_task(page, label_studio.url, report.project_id, task["id"])
    for name, value in ratings.items():  # the metric's three ratings fill their controls
        assert float(page.locator(f'input[name="{name}"]').input_value()) == value
    rest = {name: value for name, value in designed_values(project).items() if name not in ratings}
    assert sorted(empty_controls(page, project)) == sorted(ratings)  # the others start empty (key order: see docs/participants.md)
    changed = 9.5 if ratings["explainability"] != 9.5 else 1.5
    fill(page, project, {**rest, "explainability": changed})
    got = submit_and_read_back(page, client, task["id"], before=0)
    assert got == {**ratings, **rest, "explainability": changed}
    assert dialogs == []
    accepted = len(ratings) - 1

    tasks = [t for t in client.export_tasks(report.project_id) if t["annotations"]]
    [annotation] = tasks[0]["annotations"]
    # what Label Studio 1.23.2 stores: the prediction the annotation started from, and each region's origin
    assert annotation["parent_prediction"] == prediction["id"]
    origins = {r["from_name"]: r.get("origin") for r in annotation["result"]}
    assert origins == {**{name: "manual" for name in rest}, **{name: "prediction" for name in ratings},
                       "explainability": "prediction-changed"}
    frame = annotation_frame(tasks, project, client.users())
    assert frame["from_prediction"].all()
    flagged = frame.set_index("criterion")["prefilled_unchanged"]
    assert sorted(flagged[flagged].index) == sorted(set(ratings) - {"explainability"})  # accepted as predicted
    with pytest.raises(EvalstudioError, match=f"{accepted} value\\(s\\) in 1 annotation\\(s\\) were accepted unchanged"):
        build_report(project, tasks, tmp_path / "refused", client.users(), n_boot=20)
    page_html = build_report(project, tasks, tmp_path / "report", client.users(), n_boot=20, exclude_prefilled=True)
    assert f"Left out: {accepted} value(s) in 1 annotation(s) accepted unchanged" in page_html.read_text()


def test_docs_screenshots_exist_for_every_protocol():
    """docs/participants.md shows docs/<project>.png (the task as it opens, answers empty); refresh them after `make test` with
    for p in sotopia cmv_tom cmv_threads circa_part1 circa_part2 dialogue health; do cp test-output/screenshots/$p.png docs/; done"""
    for protocol in PROJECTS:
        assert (ROOT / "docs" / f"{protocol}.png").is_file()


def test_cmv_navigation_resumes_at_the_first_unfinished_sample_and_goes_back(reg, importer_for, client, label_studio,
                                                                             session):
    """Document 001, "How Progress and Resuming Work": answers are saved on submit (Save & Next), the site sends you
    to the first unfinished sample, also when you come back, and you can go back to earlier samples and change
    their answers (Save & Previous)."""
    page, dialogs = session
    project = reg.entry("cmv_tom").model_copy(update={"title": "cmv navigation"})
    report = import_files(project, importer_for("cmv"), example_files("cmv"), client)
    tasks = sorted((t for p in client.full_task_pages(report.project_id) for t in p), key=lambda t: t["id"])

    def shown_sample() -> int:
        body = flat(page.inner_text("body"))
        [task_id] = [t["id"] for t in tasks if flat(t["data"]["comment"])[:60] in body]
        return task_id

    def open_stream():
        page.goto(f"{label_studio.url}/projects/{report.project_id}/data?labeling=1")
        page.locator("button", has_text="Submit").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        close = page.get_by_label("Close modal")  # the project instructions open first
        if close.count() and close.first.is_visible():
            close.first.click()

    open_stream()
    first = shown_sample()
    assert first == tasks[0]["id"]  # the first sample, with every answer empty
    assert empty_controls(page, project) == []
    values = designed_values(project)
    fill(page, project, values)
    assert submit_and_read_back(page, client, first, before=0) == values  # Save & Next
    page.locator("button", has_text="Submit").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1000)
    assert shown_sample() == tasks[1]["id"]

    open_stream()  # coming back later: the first unfinished sample
    assert shown_sample() == tasks[1]["id"]
    page.get_by_label("Previous task").click()  # Save & Previous
    page.locator("button", has_text="Update").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1000)
    assert shown_sample() == first
    group = page.locator(".lsf-choices").nth(controls_in_order(project, "Choices").index("q1_persuasive"))
    assert selected(group) == [values["q1_persuasive"]]  # the saved answer is shown
    other = "No" if values["q1_persuasive"] == "Yes" else "Yes"
    group.locator(f'input[name="{other}"]').check()
    page.locator("button", has_text="Update").first.click()
    for _ in range(60):
        [annotation] = client.sdk.tasks.get(id=first).annotations
        saved = result_values(annotation["result"] if isinstance(annotation, dict) else annotation.result)
        if saved["q1_persuasive"] == other:
            break
        page.wait_for_timeout(500)
    assert saved == {**values, "q1_persuasive": other}  # changed, and still one annotation
    assert dialogs == []


def test_a_dialogue_with_a_persona_shows_it_and_one_without_shows_nothing_there(reg, importer_for, client, label_studio,
                                                                               session, tmp_path):
    """The optional knowledge/persona field (not in document 003): shown above the prompt when an item has one."""
    import json

    page, _ = session
    project = reg.entry("dialogue").model_copy(update={"title": "dialogue with persona"})
    path = tmp_path / "persona.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "p1", "context": ["A: hi, what do you do?"], "persona": ["I am a beekeeper.", "I live in Lyon."],
         "topic": "jobs", "responses": [{"system": "s", "text": "I keep bees near Lyon."}]},
        {"id": "p2", "context": ["A: hello"], "responses": [{"system": "s", "text": "hi"}]}]) + "\n")
    report = import_files(project, importer_for("dialogue"), [path], client)
    tasks = {t.data["item_id"]: t for t in client.tasks(report.project_id)}
    open_task(page, label_studio.url, report.project_id, tasks["p1"].id)
    page.wait_for_timeout(1500)
    body = page.inner_text("body")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "dialogue-persona.png"))
    assert "Persona (what the speakers knew)" in body and "I am a beekeeper.\nI live in Lyon." in body
    assert "jobs" not in body  # an unknown field is kept as metadata, not shown
    open_task(page, label_studio.url, report.project_id, tasks["p2"].id)
    page.wait_for_timeout(1500)
    body = page.inner_text("body")
    assert "what the speakers knew" not in body and "$knowledge" not in body and "undefined" not in body
    [exported] = [t for t in client.export_tasks(report.project_id) if t["data"]["item_id"] == "p1"]
    assert exported["meta"]["topic"] == "jobs"

