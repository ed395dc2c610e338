"""Model-assisted labelling in a real browser (Playwright + Debian chromium) through the gateway's page: a study with
`prefill:` starts each answer from the task's prediction, as Label Studio's own app does (issue 68 item 3). ESA-AI
(`prefill: judge:NAME` on ESA): the judge's spans are pre-marked, the participant removes, relabels and adds spans
and submits; the origins the gateway stored (decided server-side by region id) give the post-edit table the paper's
kept / edited / removed / added. A rating protocol with `prefill: true` (health, the model's ratings as the
prediction): the ratings fill their controls, the participant changes one, and each value's origin is stored.

Before this (2026-11-28) the page created the answer in onLabelStudioLoad, before the editor's store held the
predictions: the editor then selected the prediction itself (read only, no Submit button), so no prefilled study
could be answered in a browser through the gateway."""

from __future__ import annotations

import contextlib

import pytest

from exporters.analyses.postedit import post_edits

from .conftest import example_files, gateway_process
from .test_browser import browser, designed_values, fill, move_slider  # noqa: F401 (fixture)
from .test_esa_ai import esa_ai_entry
from .judge_server import llm  # noqa: F401 (fixture)
from .test_judge_spans import judged_esa_study
from .test_spans_browser import SELECT

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("database_independent")]

REGION = ".lsf-tree__node_type_richtextregion"


def next_task(page, shown):
    """Wait for the gateway's page to open its next task (with its Submit button); returns its number."""
    try:
        page.wait_for_function("(shown) => { const t = document.getElementById('editor').dataset.task; "
                               "return t && t !== shown; }", arg=shown, timeout=120_000)
    except Exception:
        raise AssertionError(f"no next task after {shown}; the page says: {page.inner_text('#status')!r}") from None
    page.locator("button", has_text="Submit").first.wait_for(timeout=60_000)
    return page.locator("#editor").get_attribute("data-task")


def region(page, text: str):
    """The pre-marked span of `text` in the editor's list of regions."""
    return page.locator(REGION, has_text=text).first


def relabel(page, text: str, label: str) -> None:
    """Select the span in the list of regions and click the other severity: its label changes (same region)."""
    region(page, text).click()
    page.wait_for_function(f"() => document.querySelector('{REGION}.lsf-tree-treenode-selected')")
    page.locator(".lsf-label", has_text=label).first.click()
    page.wait_for_function("([sel, text, label]) => [...document.querySelectorAll(sel)].some("
                           "e => e.textContent.includes(text) && e.textContent.includes(label))",
                           arg=[REGION, text, label])
    page.keyboard.press("Escape")


def remove(page, text: str) -> None:
    before = page.locator(REGION).count()
    region(page, text).click()
    page.wait_for_function(f"() => document.querySelector('{REGION}.lsf-tree-treenode-selected')")
    page.keyboard.press("Backspace")
    page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length === n", arg=[REGION, before - 1])


def add(page, piece: str, label: str) -> None:
    """Choose the label, then select the text, as a participant marks a new span."""
    before = page.locator(REGION).count()
    page.locator(".lsf-label", has_text=label).first.click()
    assert page.evaluate(SELECT, piece), f"{piece!r} is not on the page"
    page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length === n + 1", arg=[REGION, before])


def unmarked_word(target: str, spans: list[dict]) -> str:
    """A word of the translation no predicted span covers (the participant's own, added span)."""
    taken = {i for s in spans for i in range(s["value"]["start"], s["value"]["end"])}
    at = 0
    for word in target.split(" "):
        if len(word) > 3 and not taken & set(range(at, at + len(word))) and target.count(word) == 1:
            return word
        at += len(word) + 1
    raise AssertionError(f"every word of {target!r} is marked by the judge")


def test_a_participant_corrects_the_judges_spans_in_the_browser(label_studio, client, llm, tmp_path,  # noqa: F811
                                                                browser):  # noqa: F811
    """ESA-AI through the gateway's page: each task opens with the judge's spans pre-marked (its score not shown: the
    slider starts unset) and a Submit button; on one task the participant removes a span, on one relabels a span,
    on one adds a span; Label Studio's export then holds the origins the gateway decided, and the post-edit table
    counts each task's kept / edited / removed / added as the participant did them. (About 25 s on a quiet machine:
    the judge's run and three tasks answered in a browser, the fewest that show all four post-edits.)"""
    from evalstudio.crowd import ledger, participants

    entry = esa_ai_entry(tmp_path, "ESA-AI in the browser")  # (not test_esa_ai's project, answered there)
    project, project_id, _ = judged_esa_study(label_studio, client, llm, tmp_path, entry, 3, tmp_path / "judged")
    tasks = [t for p in client.full_task_pages(project_id) for t in p]
    predicted = {t["data"]["target"]: [r for r in t["predictions"][0]["result"] if r["from_name"] == "errors"]
                 for t in tasks}
    folder = tmp_path / "participants"
    participants.add(client, ["PESAAIB"], folder)
    access = participants.load_accounts(folder)["PESAAIB"].access
    did = {}
    with gateway_process(label_studio, "esa", folder, entry) as url:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{url}/s/PESAAIB/{access}")
        page.goto(f"{url}/label/esa")
        shown = None
        for action in ("remove", "edit", "add"):
            shown = next_task(page, shown)
            body = page.inner_text("#editor")
            [target] = [t for t in predicted if t in body]
            spans = predicted[target]
            assert spans, f"the judge marked nothing in {target!r} (the test server marks one or two words)"
            listed = page.locator(REGION).all_inner_texts()
            assert len(listed) == len([r for t in tasks if t["data"]["target"] == target
                                       for r in t["predictions"][0]["result"] if r["type"] == "labels"]), listed
            for span in spans:  # each pre-marked span is on screen, highlighted, with the judge's label
                assert any(span["value"]["text"] in e and span["value"]["labels"][0] in e for e in listed), listed
            assert page.locator("input[name='score'] + output").inner_text().strip() == ""  # no anchoring
            first = spans[0]["value"]
            if action == "remove":
                remove(page, first["text"])
            elif action == "edit":
                relabel(page, first["text"], "Minor" if first["labels"] == ["Major"] else "Major")
            else:
                add(page, unmarked_word(target, spans), "Minor")
            move_slider(page, "score", 60)
            page.locator("button", has_text="Submit").first.click()
            did[target] = action
        page.wait_for_function("() => !document.getElementById('editor').dataset.task", timeout=120_000)
        ledger.open_ledger(folder).wait_synced(120)
    exported = client.export_tasks(project_id)
    edits = post_edits(exported, project, "judge:judge").set_index("task_id")
    for task in exported:
        [annotation] = task["annotations"]
        n = len([r for r in task["predictions"][0]["result"] if r["type"] == "labels"])
        action = did[task["data"]["target"]]
        expected = {"remove": (n - 1, 0, 1, 0), "edit": (n - 1, 1, 0, 0), "add": (n, 0, 0, 1)}[action]
        row = edits.loc[task["id"]]
        assert (row["kept"], row["edited"], row["removed"], row["added"]) == expected, (action, row.to_dict())
        origins = sorted(r.get("origin") for r in annotation["result"] if r["type"] == "labels")
        assert origins == sorted(["prediction"] * expected[0] + ["prediction-changed"] * expected[1]
                                 + ["manual"] * expected[3]), (action, origins)
        assert [r.get("origin") for r in annotation["result"] if r["from_name"] == "score"] == ["manual"]


def test_a_participant_starts_from_the_models_ratings_in_the_browser(reg, importer_for, label_studio, client,
                                                                     tmp_path, browser):  # noqa: F811
    """A rating protocol opted in to prefill (health, `prefill: true`: the model's ratings as the prediction)
    through the gateway's page: the model's ratings fill their controls and the others start empty, Submit is
    there; the participant changes one rating and answers the rest; Label Studio holds each value with the origin
    the gateway decided (prediction, prediction-changed, manual)."""
    from evalstudio import importers
    from evalstudio.crowd import ledger, participants
    from evalstudio.exporters.tables.tidy import result_values
    from evalstudio.protocols import registry
    from evalstudio.tasks.importing import import_files

    from .test_browser import empty_controls
    from .test_cli import _projects_file

    text = _projects_file(tmp_path, lambda raw: raw["projects"]["health"].update(
        title="health prefilled through the gateway", prefill=True))
    project = registry.load(text).entry("health")
    project_id = import_files(project, importers.get(project.importer), example_files("health"), client).project_id
    folder = tmp_path / "participants"
    participants.add(client, ["PPREFILL1"], folder)
    access = participants.load_accounts(folder)["PPREFILL1"].access
    with gateway_process(label_studio, "health", folder, text) as url:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{url}/s/PPREFILL1/{access}")
        with page.expect_response(lambda r: "/api/next/" in r.url) as served:
            page.goto(f"{url}/label/health")
        ratings = result_values(served.value.json()["predictions"][0]["result"])  # the model's, as the gateway sent
        assert ratings and set(ratings) < set(designed_values(project)), ratings
        shown = next_task(page, None)
        for name, value in ratings.items():  # the model's ratings fill their controls, the others start empty
            assert float(page.locator(f'input[name="{name}"]').input_value()) == value
        assert sorted(empty_controls(page, project)) == sorted(ratings)
        changed = 9.5 if ratings["explainability"] != 9.5 else 1.5
        fill(page, project, {**{n: v for n, v in designed_values(project).items() if n not in ratings},
                             "explainability": changed})
        page.locator("button", has_text="Submit").first.click()
        page.wait_for_function("(t) => document.getElementById('editor').dataset.task !== t", arg=shown,
                               timeout=120_000)
        ledger.open_ledger(folder).wait_synced(120)
    [annotation] = [a for t in client.export_tasks(project_id) for a in t["annotations"]]
    origins = {r["from_name"]: r.get("origin") for r in annotation["result"]}
    assert origins == {**{n: "manual" for n in designed_values(project) if n not in ratings},
                       **{n: "prediction" for n in ratings}, "explainability": "prediction-changed"}, origins
