"""The shipped protocols defined as data (projects.yaml `input:`, no importer module): SQuALITY's ratings and
pairwise comparisons, in a real Label Studio and a real browser: their texts on screen, their systems not, answers
taken. Protocols as data in general: tests/test_protocol_as_data.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.importing import import_files

from .test_browser import browser, session  # noqa: F401 - the logged-in browser page of the browser tests

DATA_PROTOCOLS = ["squality", "squality_pairwise", "mqm", "esa"]  # shipped protocols defined as data (projects.yaml input:)
# answered here by the browser tests' generic filling of criteria; mqm's only criterion sits below a per-region
# Choices (a span's category) that the generic filling does not tell apart: its spans are the span tests' part
ANSWERED_HERE = ["squality", "squality_pairwise", "esa"]


@pytest.mark.server
@pytest.mark.usefixtures("database_independent")
@pytest.mark.parametrize("protocol", ANSWERED_HERE)
def test_a_shipped_data_protocol_shows_its_texts_hides_its_systems_and_takes_answers(reg, protocol, client,
                                                                                      label_studio, session):
    from .conftest import example_files
    from .test_browser import SHOTS, designed_values, fill, flat, open_task, submit_and_read_back

    project = reg.entry(protocol)
    report = import_files(project, importer_for(project), example_files(protocol), client, record=False)
    page, dialogs = session
    task = sorted(client.tasks(report.project_id), key=lambda t: t.id)[0]
    full = client.sdk.tasks.get(id=task.id)
    open_task(page, label_studio.url, report.project_id, task.id)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{protocol}.png"))
    body = flat(page.inner_text("body"))
    for key in project.data_fields():
        assert flat(str(full.data[key]))[:60] in body, key
    # what annotators see anyway: the data of the project's tasks (the Data Manager's grid beside the editor shows
    # other tasks' texts too; a system name that is a word of one of them is no leak)
    shown_text = " ".join(str(v) for t in client.tasks(report.project_id) for v in t.data.values())
    for system in full.meta.get("candidates") or [full.meta["system"]]:
        word = re.compile(rf"(?<![\w-]){re.escape(system)}(?![\w-])")  # bart, not bartender
        if not word.search(shown_text):  # a system name that is also a word of the story is no leak
            found = word.search(body)
            assert found is None, f"the system {system!r} is on the annotator's screen: {body[found.start() - 150:found.end() + 60]}"
    values = designed_values(project)
    fill(page, project, values)
    assert submit_and_read_back(page, client, task.id, 0) == values
    assert dialogs == []


@pytest.mark.parametrize("protocol", DATA_PROTOCOLS)
def test_a_shipped_data_protocol_has_no_importer_module_and_a_screenshot(reg, protocol):
    project = reg.entry(protocol)
    assert project.importer is None and project.input is not None
    assert (Path(__file__).resolve().parents[1] / "docs" / f"{protocol}.png").is_file()
