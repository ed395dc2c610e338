"""What annotators see: each protocol in a real browser (Playwright + Debian chromium) on the real Label Studio.

Open a task, check the text, rubric and every control with its range are on screen, fill every control, submit,
and read the annotation back through the API with exactly the values entered.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalstudio.exporters.tidy import result_values
from evalstudio.importing import import_files
from evalstudio.registry import control_range

from .conftest import PROTOCOLS, ROOT, example_files

pytestmark = pytest.mark.server
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "test-output" / "screenshots"


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
            step = float(control.attr.get("step", 1))
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
        if tag == "Number":
            page.locator(f'input[name="{name}"]').fill(str(value))
        elif tag == "Rating":
            page.locator("ul.ant-rate").nth(ratings.index(name)).locator("li").nth(int(value) - 1).click()
        elif tag == "Choices":
            page.locator(".lsf-choices").nth(choices.index(name)).locator(f'input[name="{value}"]').check()
        elif tag == "TextArea":
            box = text_box(page, name)
            box.fill(str(value))
            box.press("Shift+Enter")


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
    raise AssertionError(f"no annotation arrived for task {task_id}")


def fresh_task(client, project_id: int, offset: int = 1):
    return sorted(client.tasks(project_id), key=lambda t: t.id)[-offset]


SNIPPETS = {  # what the annotator must read, from the task data
    "sotopia": lambda d: [d["scenario"][:60], d["dialogue"][0]["text"][:60], d["agent1_name"]],
    "cmv": lambda d: [d["post_title"], d["comment"][:50], d["delta_reply"][:40]],
    "circa": lambda d: [d["question"], d["answer"], d["explanation"][:50]],
    "dialogue": lambda d: [d["context"][0]["text"][:50], d["response"][:50]],
    "health": lambda d: [d["scenario"][:60], d["dialogue"][0]["text"], d["dialogue"][-1]["text"][:50]],
}
RUBRIC = {"sotopia": ("Rubric: what each dimension means", "Secret [-10 to 0]"),
          "cmv": ("Instructions (click to open)", "Q1 asks whether YOU find the comment persuasive"),
          "circa": ("Instructions (click to open)", "Part II. A model read the same dialogue"),
          "dialogue": ("Instructions (click to open)", "Rate the response as the next turn"),
          "health": ("Instructions (click to open)", "Contractual trust: You can rely on the assistant")}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_annotator_sees_everything_fills_every_control_and_submits(reg, importer_for, client, label_studio, session, protocol):
    page, dialogs = session
    project = reg.get(protocol)
    report = import_files(project, importer_for(protocol), example_files(protocol), client)
    task = fresh_task(client, report.project_id)
    open_task(page, label_studio.url, report.project_id, task.id)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{protocol}.png"))

    body = page.inner_text("body")
    for snippet in SNIPPETS[protocol](task.data):
        assert " ".join(snippet.split()) in " ".join(body.split()), snippet
    header, line = RUBRIC[protocol]
    page.get_by_text(header).first.click()  # open the collapsible rubric
    assert line in page.inner_text("body")
    import re

    paragraph = re.sub(r"<[^>]+>", "", re.search(r"<p>(.*?)</p>", project.instructions, re.S).group(1))
    title = " ".join(paragraph.split())[:45]
    assert title not in page.inner_text("body")
    page.locator("button", has_text="Instructions").first.click()  # the project's instructions
    page.get_by_text(title).first.wait_for()
    page.keyboard.press("Escape")
    page.wait_for_timeout(300)
    if page.get_by_text(title).first.is_visible():
        page.locator("button", has_text="Instructions").first.click()

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
    got = submit_and_read_back(page, client, task.id, before=0)
    assert got == values
    assert dialogs == []


def test_health_accepts_decimals_and_sotopia_negative_ranges(reg):
    """The designed values used above exercise what the protocols demand."""
    health, sotopia = designed_values(reg.get("health")), designed_values(reg.get("sotopia"))
    assert any(v != int(v) for k, v in health.items() if k in {"explainability", "controllability"})
    assert min(v for k, v in sotopia.items() if k.endswith("_secret")) < 0


def test_untrusted_html_renders_as_text_and_runs_nothing(reg, importer_for, client, label_studio, session):
    page, dialogs = session
    project = reg.get("cmv").model_copy(update={"title": "cmv untrusted html"})  # its own, unannotated tasks
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


def test_prefilled_predictions_show_and_can_be_changed(reg, importer_for, client, label_studio, ml_backend, session):
    page, dialogs = session
    url, _ = ml_backend
    project = reg.get("sotopia").model_copy(update={"title": "sotopia prefilled"})  # its own, unannotated tasks
    report = import_files(project, importer_for("sotopia"), example_files("sotopia"), client)
    client.connect_ml_backend(report.project_id, url)
    task = fresh_task(client, report.project_id, offset=2)
    client.request_predictions(report.project_id, [task.id])
    [prediction] = client.predictions(report.project_id)[task.id]
    predicted = result_values(prediction["result"])
    open_task(page, label_studio.url, report.project_id, task.id)
    ratings = task.data["model_ratings"]
    for agent in ("agent1", "agent2"):
        for dim, value in ratings[agent].items():
            assert float(page.locator(f'input[name="{agent}_{dim}"]').input_value()) == value
    assert task.data["model_reasoning"]["agent1"]["goal"][:40] in page.inner_text("body")
    lo, hi = control_range(project.interface.get_control("agent1_goal"))
    changed = lo if ratings["agent1"]["goal"] != lo else hi
    page.locator('input[name="agent1_goal"]').fill(str(int(changed)))
    text_box(page, "prolific_id").fill("PROLIFIC-PREFILL-TEST")
    text_box(page, "prolific_id").press("Shift+Enter")
    got = submit_and_read_back(page, client, task.id, before=0)
    assert got["agent1_goal"] == changed
    assert got["prolific_id"] == "PROLIFIC-PREFILL-TEST"
    assert {k: v for k, v in got.items() if k not in {"agent1_goal", "prolific_id"}} == \
        {k: v for k, v in predicted.items() if k != "agent1_goal"}
    assert dialogs == []


def test_docs_screenshots_exist_for_every_protocol():
    """README shows docs/<protocol>.png; refresh them with: cp test-output/screenshots/*.png docs/"""
    for protocol in PROTOCOLS:
        assert (ROOT / "docs" / f"{protocol}.png").is_file()
