"""Faults between evalstudio and a real Label Studio (through tests/faulty_proxy.py): transient failures are
retried without ever duplicating a task; permanent ones stop with a clear message and exact counts."""

from __future__ import annotations

import copy
import secrets

import pytest

from evalstudio.base.errors import ServerError
from evalstudio.base.retry import RetryPolicy
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import Settings
from evalstudio.tasks.importing import ImportIncomplete, import_files
from evalstudio.tasks.order import send_order

from .conftest import free_port
from .faulty_proxy import Fault, FaultyProxy
from .largefile import write_dialogue_file

pytestmark = pytest.mark.server
TASKS, BATCH = 50, 10
FAST = RetryPolicy(attempts=4, delay=0.05)

# one row per fault: what goes wrong, and how often
RECOVERABLE = [
    ("5xx after Label Studio wrote the batch", [Fault("POST", "/import", "status-after", skip=1, status=502)]),
    ("5xx before Label Studio saw the batch", [Fault("POST", "/import", "status-before", skip=1, status=503)]),
    ("connection dropped after the write", [Fault("POST", "/import", "drop-after", skip=2)]),
    ("answer slower than the client waits", [Fault("POST", "/import", "slow-after", skip=1, delay=3)]),
    ("three failures in a row", [Fault("POST", "/import", "status-before", skip=3, times=3, status=500)]),
    ("rate limited", [Fault("POST", "/import", "status-before", skip=1, times=2, status=429)]),
    ("checking what landed fails too", [Fault("POST", "/import", "status-after", skip=1),
                                        Fault("GET", "/api/tasks", "status-before", times=2, status=503)]),
]


def fresh_project(reg):
    return reg.entry("dialogue").model_copy(update={"title": f"faults {secrets.token_hex(3)}"})


def server_ids(client, project_id) -> list[str]:
    """evalstudio ids of every task on the server, duplicates kept."""
    return [t.data["evalstudio_id"] for t in client.tasks(project_id)]


MODES = [(False, 1), (True, 1), (False, 2)]


@pytest.mark.parametrize("prefill, in_flight", MODES, ids=["tasks", "tasks with predictions", "two batches in flight"])
@pytest.mark.parametrize("name, faults", RECOVERABLE, ids=[r[0] for r in RECOVERABLE])
def test_transient_faults_are_retried_and_nothing_is_duplicated(reg, importer_for, label_studio, client, tmp_path, name,
                                                                faults, prefill, in_flight):
    """Each fault, for a plain import, for one that carries the stored model outputs as predictions (prefill
    opt-in) and for one sending two batches at a time (a random-order project): every task lands once, and so does
    its one prediction."""
    expected = write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    project, faults = fresh_project(reg).model_copy(update={"prefill": prefill}), copy.deepcopy(faults)
    if in_flight > 1:
        project = project.model_copy(update={"order": "random"})
    with FaultyProxy(label_studio.url, faults) as proxy:
        flaky = Client(Settings(proxy.url, label_studio.credentials().api_key), timeout=1.5, retry=FAST)
        report = import_files(project, importer_for("dialogue"), [tmp_path / "tasks.jsonl"], flaky, batch_size=BATCH,
                              in_flight=in_flight)
    assert all(f.times == 0 for f in faults), "every fault was exercised"
    assert (report.created, report.already_present) == (TASKS, 0)
    assert report.recovered >= 1
    ids = server_ids(client, report.project_id)
    assert sorted(ids) == sorted(expected)  # each task exactly once
    predictions = client.predictions(report.project_id)
    assert sorted(len(p) for p in predictions.values()) == [1 if prefill else 0] * TASKS  # and its prediction


def test_a_lasting_failure_stops_with_counts_and_the_rerun_finishes(reg, importer_for, label_studio, client, tmp_path):
    expected = write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    project, importer, files = fresh_project(reg), importer_for("dialogue"), [tmp_path / "tasks.jsonl"]
    down = Fault("POST", "/import", "status-before", skip=2, times=10**6, status=503)
    with FaultyProxy(label_studio.url, [down]) as proxy:
        flaky = Client(Settings(proxy.url, label_studio.credentials().api_key), retry=FAST)
        with pytest.raises(ImportIncomplete) as e:
            import_files(project, importer, files, flaky, batch_size=BATCH)
        assert proxy.count("POST", "/import", "status-before") == FAST.attempts  # gave up after the policy's attempts
    message = str(e.value)
    assert f"HTTP 503" in message and f"gave up after {FAST.attempts} attempts" in message
    assert (e.value.created, e.value.not_written) == (2 * BATCH, TASKS - 2 * BATCH)
    assert f"{2 * BATCH} task(s) written, 0 already present, {TASKS - 2 * BATCH} not written" in message
    project_id = client.require_project(project)
    # the first two batches in the order the import sends the tasks (evalstudio.tasks.order.send_order: each record is a
    # context of its own here, so a shuffle of them, the same in every run)
    sent = [expected[p] for p in send_order([(key, f"scale-{k:07d}") for k, key in enumerate(expected)])]
    assert sorted(server_ids(client, project_id)) == sorted(sent[:2 * BATCH])
    again = import_files(project, importer, files, client, batch_size=BATCH)
    assert (again.created, again.already_present) == (TASKS - 2 * BATCH, 2 * BATCH)
    assert sorted(server_ids(client, project_id)) == sorted(expected)


@pytest.mark.parametrize("in_flight", [1, 2])
def test_a_lasting_failure_with_batches_in_flight_reports_what_landed(reg, importer_for, label_studio, client, tmp_path,
                                                                     in_flight):
    """Label Studio goes down for good while batches are in flight: ImportIncomplete counts exactly the tasks on the
    server (the batches that ended before are settled first), and the rerun adds only the others."""
    expected = write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    project = fresh_project(reg).model_copy(update={"order": "random"})
    importer, files = importer_for("dialogue"), [tmp_path / "tasks.jsonl"]
    down = Fault("POST", "/import", "status-before", skip=3, times=10**6, status=503)
    with FaultyProxy(label_studio.url, [down]) as proxy:
        flaky = Client(Settings(proxy.url, label_studio.credentials().api_key), retry=FAST)
        with pytest.raises(ImportIncomplete) as e:
            import_files(project, importer, files, flaky, batch_size=BATCH, in_flight=in_flight)
    project_id = client.require_project(project)
    on_server = server_ids(client, project_id)
    assert e.value.created == len(on_server) == 3 * BATCH and len(set(on_server)) == len(on_server)
    assert e.value.not_written == TASKS - 3 * BATCH
    again = import_files(project, importer, files, client, batch_size=BATCH, in_flight=in_flight)
    assert (again.created, again.already_present) == (TASKS - 3 * BATCH, 3 * BATCH)
    assert sorted(server_ids(client, project_id)) == sorted(expected)


def test_batches_in_flight_are_refused_for_a_sequential_project(reg, importer_for, tmp_path, monkeypatch):
    """A project shown in order (order: sequential) keeps one batch at a time: concurrent batches would interleave
    the task ids that order follows. Refused before anything is read or sent."""
    from evalstudio.base.errors import BadInput

    write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    project = fresh_project(reg).model_copy(update={"order": "sequential"})
    with pytest.raises(BadInput, match="order: sequential.*--in-flight 1, or set order: random"):
        import_files(project, importer_for("dialogue"), [tmp_path / "tasks.jsonl"], None, in_flight=2)


def test_unreachable_server_writes_nothing_and_says_so(reg, importer_for, tmp_path):
    write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    nowhere = Client(Settings(f"http://127.0.0.1:{free_port()}", "x" * 40), retry=RetryPolicy(attempts=3, delay=0.01))
    with pytest.raises(ImportIncomplete, match=r"(?s)cannot reach Label Studio.*gave up after 3 attempts.*"
                                               rf"0 task\(s\) written, 0 already present, {TASKS} not written"):
        import_files(fresh_project(reg), importer_for("dialogue"), [tmp_path / "tasks.jsonl"], nowhere)


def test_wrong_token_is_not_retried(label_studio):
    with FaultyProxy(label_studio.url) as proxy:
        bad = Client(Settings(proxy.url, "0" * 40), retry=FAST)
        with pytest.raises(ServerError, match="HTTP 401.*Check LABEL_STUDIO_API_KEY") as e:
            bad.find_project("anything")
        assert len(proxy.seen) == 1
    assert "0" * 40 not in str(e.value)


@pytest.mark.parametrize("export_endpoint, path, skip", [
    (True, "/export", 1),  # `evalstudio export`: Label Studio's export endpoint
    (False, "/api/tasks", 3),  # status, report, prefill, the learner: the task API (after its two id probes)
], ids=["export endpoint", "task API"])
def test_export_pages_are_retried(reg, importer_for, label_studio, client, tmp_path, export_endpoint, path, skip):
    write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    report = import_files(fresh_project(reg), importer_for("dialogue"), [tmp_path / "tasks.jsonl"], client)
    # 20 task ids at a time here: after the first chunk, a chunk fails twice with a 502, then one is dropped after
    # Label Studio answered (the second fault counts its skips once the first is spent)
    faults = [Fault("GET", path, "status-before", skip=skip, times=2, status=502),
              Fault("GET", path, "drop-after", skip=1 if export_endpoint else 0)]
    with FaultyProxy(label_studio.url, faults) as proxy:
        flaky = Client(Settings(proxy.url, label_studio.credentials().api_key), retry=FAST)
        flaky_pages = list(flaky.full_task_pages(report.project_id, page_size=20, export_endpoint=export_endpoint))
    assert all(f.times == 0 for f in faults)
    assert [len(p) for p in flaky_pages] == [20, 20, 10]
    assert [t for p in flaky_pages for t in p] == client.export_tasks(report.project_id)


@pytest.mark.usefixtures("database_independent")  # the client's order of requests: one run, on the first database
def test_the_export_endpoint_is_asked_one_chunk_at_a_time(reg, importer_for, label_studio, client, tmp_path):
    """`evalstudio export` never has two export requests at Label Studio at once (two at once cost its one process
    more time for the same tasks, and ended together: evalstudio/labelstudio/relay.py), and the pages are the task API's."""
    write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    report = import_files(fresh_project(reg), importer_for("dialogue"), [tmp_path / "tasks.jsonl"], client)
    with FaultyProxy(label_studio.url) as proxy:
        watched = Client(Settings(proxy.url, label_studio.credentials().api_key), retry=FAST)
        pages = list(watched.full_task_pages(report.project_id, page_size=20, export_endpoint=True))
    assert proxy.count("GET", "/export") == 3
    assert proxy.most_at_once[f"/api/projects/{report.project_id}/export"] == 1
    assert [len(p) for p in pages] == [20, 20, 10]
    assert [t for p in pages for t in p] == client.export_tasks(report.project_id)


def test_an_export_refused_as_too_long_is_asked_for_in_halves(reg, importer_for, label_studio, client, tmp_path):
    """A server or proxy that limits the request line (gunicorn: 4,094 bytes, less than 500 task ids take) answers
    414: the chunk is asked for again in halves, and the pages are the same."""
    write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    report = import_files(fresh_project(reg), importer_for("dialogue"), [tmp_path / "tasks.jsonl"], client)
    faults = [Fault("GET", "/export", "status-before", times=2, status=414)]  # the first chunk, then its first half
    with FaultyProxy(label_studio.url, faults) as proxy:
        limited = Client(Settings(proxy.url, label_studio.credentials().api_key), retry=FAST)
        pages = list(limited.full_task_pages(report.project_id, page_size=20, export_endpoint=True))
    assert faults[0].times == 0
    assert [len(p) for p in pages] == [20, 20, 10]
    assert [t for p in pages for t in p] == client.export_tasks(report.project_id)

