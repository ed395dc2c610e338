"""Against a real Label Studio server: projects from projects.yaml, real samples imported, no duplicates."""

from __future__ import annotations

import json

import pytest

from evalstudio import importers
from evalstudio.base.errors import InvalidInput, ServerError
from evalstudio.tasks.importing import import_files
from evalstudio.tasks.scanning import iter_tasks, scan
from evalstudio.values.results import task_fields

from .conftest import PROJECTS, example_files
from .test_importers import BAD_INPUTS

pytestmark = pytest.mark.server


def task_count(client, project_id):
    return client.project(project_id).task_number or 0


@pytest.mark.parametrize("protocol", PROJECTS)
def test_project_is_created_from_projects_yaml_and_setup_is_idempotent(reg, client, protocol):
    project = reg.entry(protocol)
    project_id, _ = client.ensure_project(project)
    assert client.ensure_project(project) == (project_id, "unchanged")
    remote = client.project(project_id)
    assert remote.title == project.title
    assert remote.label_config == project.config_for("label-studio")  # (the gateway's lines left out)
    assert remote.expert_instruction == project.instructions_for("label-studio") and remote.show_instruction
    assert remote.maximum_annotations == project.annotators_per_task
    # no anchoring: Label Studio neither prefills nor fetches predictions for the shipped protocols
    assert remote.show_collab_predictions is False and remote.evaluate_predictions_automatically is False
    # order: random (the default, evalstudio/tasks/order.py): each annotator draws the next task at random from those not
    # yet done (Label Studio's uniform sampling), so no system has a fixed place in anyone's order
    assert project.order == "random" and remote.sampling == "Uniform sampling"
    # the server's own validator accepts the config
    client.sdk.projects.validate_label_config(id=project_id, label_config=project.label_config)


def test_a_drifted_project_is_put_back_and_counted_in_one_lookup(reg, client, tmp_path):
    """ensure_project_counted reads the settings and the task count from the project list: a setting changed in
    Label Studio (here prefilling turned on, an anchoring risk) is found and written back, and the count is the
    project's, before and after an import."""
    project = reg.entry("dialogue").model_copy(update={"title": "drift and count"})
    project_id, status, count = client.ensure_project_counted(project)
    assert (status, count) == ("created", 0)
    assert client.ensure_project_counted(project) == (project_id, "unchanged", 0)
    client.sdk.projects.update(id=project_id, show_collab_predictions=True, maximum_annotations=7,
                               sampling="Sequential sampling")
    assert client.ensure_project_counted(project) == (project_id, "updated", 0)
    remote = client.project(project_id)
    assert (remote.show_collab_predictions, remote.maximum_annotations, remote.sampling) == (
        False, project.annotators_per_task, "Uniform sampling")
    data = tmp_path / "three.jsonl"
    data.write_text("".join(json.dumps({"id": f"d{k}", "context": ["A: hi", "B: hello"], "system": "s",
                                        "response": f"reply {k}"}) + "\n" for k in range(3)), encoding="utf-8")
    import_files(project, importers.get("dialogue"), [data], client)
    assert client.ensure_project_counted(project) == (project_id, "unchanged", 3) and task_count(client, project_id) == 3


def test_projects_are_found_by_exact_title(reg, client):
    # Label Studio's title filter is a case-insensitive "contains": "title lookup" also matches the other two
    titles = ["title lookup", "Title Lookup", "title lookup 2"]
    ids = [client.ensure_project(reg.entry("dialogue").model_copy(update={"title": t}))[0] for t in titles]
    assert len(set(ids)) == 3
    assert [client.find_project(t) for t in titles] == ids
    assert client.find_project("title look") is None


def test_server_rejects_an_invalid_config(reg, client):
    broken = reg.entry("dialogue").model_copy(update={"title": "broken config"})
    broken.__dict__["label_config"] = broken.label_config.replace('toName="response"', 'toName="nowhere"', 1)
    with pytest.raises(ServerError, match="HTTP 400.*nowhere"):
        client.ensure_project(broken)


@pytest.mark.parametrize("protocol", PROJECTS)
def test_real_samples_are_imported_once(reg, importer_for, client, protocol):
    """Each project gets exactly the converted records, once; an entry with counterbalanced lists (Circa Part II)
    gets one project per list, each holding exactly one version of every item, every version in some list."""
    parts, importer, files = reg.parts(protocol), importer_for(protocol), example_files(protocol)
    expected = {data["evalstudio_id"]: data for _, data in iter_tasks(parts[0], importer, files)}  # every list's
    held = {}
    for project in parts:
        first = import_files(project, importer, files, client, batch_size=7)
        remote = {t["data"]["evalstudio_id"]: t for page in client.full_task_pages(first.project_id) for t in page}
        assert {k: task_fields(t) for k, t in remote.items()} == {k: expected[k] for k in remote}
        assert first.created + first.already_present == len(remote)
        for key, task in remote.items():  # annotators see the view's fields only; the rest is in meta
            assert task["data"].keys() == project.data_fields() | {"evalstudio_id", "item_id"}
        again = import_files(project, importer, files, client)
        assert (again.created, again.already_present) == (0, len(remote))
        assert task_count(client, first.project_id) == len(remote)
        held[project.name] = remote
    assert set().union(*held.values()) == set(expected)
    assert (len(parts) > 1) == (protocol == "circa_part2")
    if len(parts) > 1:
        items = {data["item_id"] for data in expected.values()}
        for remote in held.values():
            shown = [t["data"]["item_id"] for t in remote.values()]
            assert sorted(shown) == sorted(items)  # one version of every item in each list


@pytest.mark.parametrize("protocol, defect, name, content, line, field, message", BAD_INPUTS,
                         ids=[f"{r[0]}-{r[1]}" for r in BAD_INPUTS])
def test_bad_input_creates_no_task(reg, importer_for, client, tmp_path, protocol, defect, name, content, line, field, message):
    project = reg.parts(protocol)[0]
    project_id, _ = client.ensure_project(project)
    before = task_count(client, project_id)
    path = tmp_path / name
    path.write_bytes(content)
    good = [f for f in example_files(protocol)]  # valid files in the same call are not imported either
    with pytest.raises(InvalidInput) as e:
        import_files(project, importer_for(protocol), good + [path], client)
    assert str(path) in str(e.value)
    assert task_count(client, project_id) == before


def test_scan_count_matches_import_for_large_batches(reg, importer_for, client):
    """Batches smaller than the file exercise the batching path with real data (Circa Part II's list 1: 60 tasks,
    the 30 conversations the model got right and one of the two versions of the 30 it got wrong; batch 8)."""
    project, importer = reg.entry("circa_part2"), importer_for("circa")
    files = example_files("circa")
    assert scan(project, importer, files).tasks == 60
    report = import_files(project, importer, files, client, batch_size=8)
    assert task_count(client, report.project_id) == 60
