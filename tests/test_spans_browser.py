"""Error spans made in a real browser (Playwright + Debian chromium): in Label Studio's own labeling view, and by a
participant through the gateway. What Label Studio stores for them is read back through its export and the tidy
spans table (issue 67), on German, Chinese, emoji (a skin tone, a flag), combining accents and line breaks with runs
of spaces and a tab (tests/data/spans/tasks.jsonl).

What this found (evalstudio/values/spans.py): Label Studio's offsets count code points, as Python does; its `text`
writes each line break as backslash-n and a run of spaces or a tab as one space."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from evalstudio.exporters.tables.tidy import span_frame
from evalstudio.protocols import registry
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.importing import import_files

from .conftest import gateway_process
from .test_browser import browser, open_task, session  # noqa: F401 (fixtures)
from .test_spans import PIECES, SPANS, TASKS, editor_text

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("database_independent")]

# selects `target` in the shown translation (the last text that has it: a source can hold it too, "Caf" of Café) as a participant does with the mouse, then lets the editor see the
# mouse-up it reacts to (the line breaks of the text are elements, not characters, in the page)
SELECT = """(target) => {
  for (const root of [...document.querySelectorAll('.lsf-richtext')].reverse()) {  // the translation (after the source)
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let full = '', nodes = [];
    while (walker.nextNode()) { nodes.push([walker.currentNode, full.length]); full += walker.currentNode.nodeValue; }
    const at = full.indexOf(target);
    if (at < 0) continue;
    const find = (k, end) => { for (let i = nodes.length - 1; i >= 0; i--)
      if (end ? nodes[i][1] < k : nodes[i][1] <= k) return [nodes[i][0], k - nodes[i][1]]; };
    const [sn, so] = find(at, false), [en, eo] = find(at + target.length, true);
    const range = document.createRange(); range.setStart(sn, so); range.setEnd(en, eo);
    const selection = document.getSelection(); selection.removeAllRanges(); selection.addRange(range);
    const box = sn.parentElement.getBoundingClientRect();
    sn.parentElement.dispatchEvent(new MouseEvent('mouseup', {bubbles: true, clientX: box.left, clientY: box.top}));
    return true;
  }
  return false;
}"""


def on_screen(piece: str) -> str:
    """The piece as the page's text nodes hold it (line breaks are elements there)."""
    return piece.replace("\r", "").replace("\n", "")


def mark(page, piece: str, label: str = "Major", category: str = "Accuracy") -> None:
    """Mark `piece` with `label` and answer the span's per-region category, as a participant does: choose the label,
    select the text, select the new span in the list of spans, tick the category."""
    spans = page.locator(".lsf-tree__node_type_richtextregion")
    before = spans.count()
    # a label stays chosen after a span, and the editor may let go of it on its own a moment later (after a span is
    # removed): let go of what the page shows chosen until nothing is, then choose `label` alone
    page.keyboard.press("Escape")  # no span selected (the labels then show and change that span's)
    page.wait_for_function("() => !document.querySelector('.lsf-tree__node_type_richtextregion.lsf-tree-treenode-selected')")
    chosen = page.locator(".lsf-label.lsf-label_selected")
    while chosen.count():
        name = chosen.first.text_content()
        chosen.first.click()
        page.wait_for_function("""(name) => ![...document.querySelectorAll('.lsf-label.lsf-label_selected')]
                                  .some(e => e.textContent === name)""", arg=name)
    page.locator(".lsf-label", has_text=label).first.click()
    page.wait_for_function("""(label) => {
      const chosen = [...document.querySelectorAll('.lsf-label.lsf-label_selected')].map(e => e.textContent);
      return chosen.length === 1 && chosen[0].includes(label);
    }""", arg=label)
    assert page.evaluate(SELECT, on_screen(piece)), f"{piece!r} is not on the page"
    page.wait_for_function("(n) => document.querySelectorAll('.lsf-tree__node_type_richtextregion').length > n",
                           arg=before)
    spans.nth(before).click()
    page.locator(".lsf-choice", has_text=category).first.wait_for(state="visible")
    page.locator(".lsf-choice", has_text=category).first.click()
    made = spans.nth(before).inner_text()
    if label not in made:
        raise AssertionError(f"the span made is {made!r}, not {label}")


def check_spans(exported: list[dict], project, stored=editor_text) -> None:
    """Label Studio's export, read as the spans table: each task's span is its piece, at Python's offsets, with
    the text as stored kept (`stored`: Label Studio's editor's form of it; the gateway stores the shown text's own),
    and its category tied to it by the span's id."""
    spans = span_frame(exported, project)
    by_item = {record["id"]: record for record in TASKS}
    assert sorted(spans["item_id"]) == sorted(by_item), spans[["item_id", "text"]]
    for row in spans.itertuples():
        record, piece = by_item[row.item_id], PIECES[row.item_id]
        assert (row.start, row.end) == (record["mt"].index(piece), record["mt"].index(piece) + len(piece))
        assert row.text == piece == record["mt"][row.start:row.end]
        assert row.ls_text == stored(piece)
        assert (row.labels, row.category) == ("Major", "Accuracy")
    for task in exported:
        for annotation in task["annotations"]:
            ids = {(r["type"], r["id"]) for r in annotation["result"] if r["type"] in ("labels", "choices")}
            assert {i for _, i in ids if _ == "labels"} == {i for _, i in ids if _ == "choices"}, ids


def span_project(folder: Path, title: str):
    """The span study of tests/data/spans under a title of its own (a project of its own on the shared server)."""
    for name in ("projects.yaml", "mt_spans.xml"):
        shutil.copy(SPANS / name, folder / name)
    entry = folder / "projects.yaml"
    entry.write_text(entry.read_text(encoding="utf-8").replace('"MT: error spans and a score"', f'"{title}"'),
                     encoding="utf-8")
    return entry, registry.load(entry).get("mt_spans")


def hostile(page, url: str) -> None:
    """Span answers no page sends, posted with the participant's own session to the task on screen: each refused
    with its reason (the gateway's checks: tests/test_spans.py), and the task stays unanswered."""
    import json

    headers = {"X-Evalstudio": "1", "Content-Type": "application/json"}
    task = page.request.get(f"{url}/api/next/mt_spans", headers=headers).json()
    text = task["data"]["translation"]
    score = {"from_name": "score", "to_name": "translation", "type": "number", "value": {"number": 50}}
    for value, reason in (({"start": -1, "end": 3, "text": text[:3], "labels": ["Major"]}, "outside the text"),
                          ({"start": 0, "end": 3, "text": "xyz", "labels": ["Major"]}, "covers other text"),
                          ({"start": 0, "end": 3, "text": text[:3], "labels": ["Critical"]}, "not one of Minor")):
        result = [{"id": "h1", "from_name": "errors", "to_name": "translation", "type": "labels", "value": value},
                  {"id": "h1", "from_name": "category", "to_name": "translation", "type": "choices",
                   "value": {"choices": ["Accuracy"]}}, score]
        answer = page.request.post(f"{url}/api/submit/{task['ref']}", headers=headers, data=json.dumps({"result": result}))
        assert answer.status == 400 and reason in answer.json()["error"], (answer.status, answer.text())
    again = page.request.get(f"{url}/api/next/mt_spans", headers=headers).json()
    assert again["ref"] == task["ref"] and not again.get("update"), again  # still the open, unanswered task


def test_label_studio_stores_spans_at_python_offsets(session, label_studio, client, tmp_path):  # noqa: F811
    """Spans marked in Label Studio's own view, on every script of the sample, come back through its export with
    offsets that index the shown text as Python does, and the text they cover."""
    page, dialogs = session
    _, project = span_project(tmp_path, "Spans in Label Studio's view")
    project_id = import_files(project, importer_for(project), [SPANS / "tasks.jsonl"], client).project_id
    for task in [t for p in client.full_task_pages(project_id) for t in p]:
        open_task(page, label_studio.url, project_id, task["id"])
        mark(page, PIECES[task["data"]["item_id"]])
        page.locator('input[name="score"]').fill("70")
        page.locator("button", has_text="Submit").first.click()
        page.wait_for_function("() => !document.querySelector('.lsf-tree__node_type_richtextregion')",
                               timeout=60_000)  # saved: the next view has no span
    assert not dialogs, dialogs
    exported = client.export_tasks(project_id)
    assert all(len(t["annotations"]) == 1 for t in exported), [len(t["annotations"]) for t in exported]
    check_spans(exported, project)


def test_a_participant_marks_spans_through_the_gateway(label_studio, client, tmp_path, browser):  # noqa: F811
    """A participant marks a span in each task through the gateway's page (on the first task one more, which they
    remove), answers its category and scores the translation; the ledger's answers reach Label Studio in its own
    result format (labels and per-region choices under one id), and its export gives the same spans."""
    from evalstudio.crowd import ledger, participants

    entry, project = span_project(tmp_path, "Spans through the gateway")
    project_id = import_files(project, importer_for(project), [SPANS / "tasks.jsonl"], client).project_id
    folder = tmp_path / "participants"
    participants.add(client, ["PSPANS1"], folder)
    access = participants.load_accounts(folder)["PSPANS1"].access
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(gateway_process(label_studio, "mt_spans", folder, entry))
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{url}/s/PSPANS1/{access}")
        page.goto(f"{url}/label/mt_spans")
        shown = None
        for number in range(len(TASKS)):
            page.wait_for_function("(shown) => { const t = document.getElementById('editor').dataset.task; "
                                   "return t && t !== shown; }", arg=shown, timeout=120_000)
            shown = page.locator("#editor").get_attribute("data-task")
            page.locator("button", has_text="Submit").first.wait_for(timeout=120_000)
            if number == 0:  # the editor laid out as in Label Studio: its utility styles are on the page (without
                # them the span list's "Manual" button, Label Studio's flex, was a block with its label under its icon)
                assert page.locator("button", has_text="Manual").evaluate("(b) => getComputedStyle(b).display") == "flex"
            text = page.inner_text(".lsf-richtext >> nth=1")
            [item] = [i for i, piece in PIECES.items() if on_screen(piece).split()[0] in text.replace("\n", "")]
            if number == 0:  # a scripted participant's hostile spans are refused with a reason, and not kept
                hostile(page, url)
            if number == 0:  # a span marked, then removed: it is in no answer
                # (with the label the kept span gets: Label Studio's editor gives the next span made after a removal
                # the removed span's label, whichever label the page shows chosen; a participant sees it in the list)
                mark(page, TASKS[[t["id"] for t in TASKS].index(item)]["mt"][:3], "Major", "Fluency")
                page.keyboard.press("Backspace")
                page.wait_for_function("() => !document.querySelector('.lsf-tree__node_type_richtextregion')")
            mark(page, PIECES[item])
            page.locator('input[name="score"]').fill("70")
            page.locator("button", has_text="Submit").first.click()
        page.wait_for_function("() => !document.getElementById('editor').dataset.task || "
                               "document.getElementById('status').textContent", timeout=120_000)
        ledger.open_ledger(folder).wait_synced(120)
    exported = client.export_tasks(project_id)
    assert all(len(t["annotations"]) == 1 for t in exported), [len(t["annotations"]) for t in exported]
    check_spans(exported, project, stored=lambda piece: piece)  # the gateway stores the shown text's own slice
