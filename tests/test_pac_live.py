"""PAC labels through the gateway on a real Label Studio (issue 52): Circa's Part I instrument with
`stop_when: {pac: ...}`, 100 questions, a judge's label and confidence stored on every task (right and sure on most,
wrong and unsure on every tenth), and three scripted participants who answer with the gold label. The gateway draws
the calibration sample, serves it first, then exactly the tasks the PAC threshold gives to humans (as
evalstudio.stats.pac computes it from what the test sent), and stops, with the threshold and its bound in the ledger
and in `status`. (The statistics without a server: tests/test_active.py, tests/test_doctests.py.)"""

from __future__ import annotations

import csv
import json

import pytest

from evalstudio.crowd import ledger, participants, routing
from evalstudio.protocols import registry
from evalstudio.protocols.mapping import importer_for
from evalstudio.stats.pac import pac_threshold
from evalstudio.tasks.importing import import_files
from evalstudio.values.results import region, task_fields

from .conftest import DATABASES, gateway_process
from .test_cli import _projects_file, run
from .test_gateway import signed_in

pytestmark = pytest.mark.server
N, CALIBRATION, EPSILON, ALPHA = 100, 40, 0.1, 0.1
PEOPLE = ["PACA", "PACB", "PACC"]


def test_the_gateway_serves_the_calibration_sample_then_the_threshold_s_tasks_and_stops(label_studio, client,
                                                                                         tmp_path):
    if ("postgresql" if label_studio.database_env else "sqlite") != DATABASES[0]:
        pytest.skip(f"independent of the database: runs once, on {DATABASES[0]}")

    def own(raw):  # Part I on its own (the importer gives its tasks to the entry circa_part1)
        entry = raw["projects"]["circa_part1"]
        for key in ("study", "crowd"):
            entry.pop(key, None)
        entry.update(title="PAC: Circa questions", annotators_per_task=1,
                     stop_when={"pac": {"judge": "proxy", "epsilon": EPSILON, "alpha": ALPHA,
                                        "calibration": CALIBRATION}})
        del raw["projects"]["circa_part2"]
    projects_file = _projects_file(tmp_path, own)
    project = registry.load(projects_file).get("circa_part1")
    labels = [x for x in project.criteria["interpretation"].labels if x not in project.criteria["interpretation"].missing]
    source = tmp_path / "questions.csv"
    with source.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "context", "question", "answer", "gold_label"])
        for i in range(N):
            writer.writerow([f"pac{i}", f"X asks Y question {i}.", f"Question {i}?", f"Answer {i}.",
                             labels[i % 3]])
    import_files(project, importer_for(project), [source], client)
    project_id = client.require_project(project)
    tasks = {int(t["id"]): t for t in client.export_tasks(project_id)}
    assert len(tasks) == N
    gold = {t: task_fields(task)["gold_label"] for t, task in tasks.items()}
    judge = {}
    for n, task_id in enumerate(sorted(tasks)):  # right and sure, or (every tenth) wrong and unsure
        wrong = n % 10 == 0
        label = labels[(labels.index(gold[task_id]) + 1) % len(labels)] if wrong else gold[task_id]
        judge[task_id] = (label, 0.35 + 0.01 * (n % 7) if wrong else 0.9 + 0.001 * (n % 50))
        client.put_prediction(task_id, [region(project.interface, "interpretation_choice", label)], "judge:proxy",
                              judge[task_id][1])
    folder = tmp_path / "participants"
    participants.add(client, PEOPLE, folder)
    served: list[int] = []
    with gateway_process(label_studio, "circa_part1", folder, projects_file) as url:
        study = {"url": url, "accounts": participants.load_accounts(folder)}
        webs = {pid: signed_in(study, pid) for pid in PEOPLE}
        book = ledger.open_ledger(folder)
        finished: dict[str, str] = {}
        while len(finished) < len(PEOPLE):
            for pid in PEOPLE:
                if pid in finished:
                    continue
                shown = webs[pid].get("/api/next/circa_part1").json()
                if "finished" in shown:
                    finished[pid] = shown["finished"]
                    continue
                task_id = book.ref(pid, shown["ref"]).task_id
                served.append(task_id)
                result = [region(project.interface, "interpretation_choice", gold[task_id])]
                assert webs[pid].post(f"/api/submit/{shown['ref']}", json={"result": result}).json() == {"ok": True}
        assert set(finished.values()) == {routing.STOP_MESSAGE}
        status = run("status", "circa_part1", "--participants", str(folder),
                     env={"LABEL_STUDIO_URL": label_studio.url, "EVALSTUDIO_PROJECTS": str(projects_file),
                          "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key, "COLUMNS": "250"})
    design = ledger.open_ledger(folder).design("circa_part1")
    assert set(design) == set(tasks)
    sample = sorted(t for t, (_, drawn, _, _) in design.items() if drawn)
    assert len(sample) == CALIBRATION and {p for p, _, _, _ in design.values()} == {CALIBRATION / N}
    assert all(labels[int(design[t][2])] == judge[t][0] and design[t][3] == pytest.approx(judge[t][1]) for t in tasks)
    # the calibration sample first, each once; then exactly what the PAC threshold gives to humans
    assert sorted(served[:CALIBRATION]) == sample and len(set(served)) == len(served)
    order = sorted(tasks)
    expected = pac_threshold([judge[t][0] for t in order], [1 - judge[t][1] for t in order],
                             [order.index(t) for t in sample], [gold[t] for t in sample], EPSILON, ALPHA)
    assert sorted(served) == [t for t, human in zip(order, expected.human) if human]
    # the judge kept some tasks (and, unless the random sample happened to hold no task the judge gets wrong, which
    # then lets it keep every other one, the threshold sent tasks beyond the sample to humans)
    assert CALIBRATION <= len(served) < N
    record = json.loads(ledger.open_ledger(folder).stopped()["circa_part1"][1])
    assert record["threshold"] == pytest.approx(expected.threshold) and record["bound"] <= EPSILON
    assert status.returncode == 0, status.stderr
    said = " ".join(status.stdout.split())
    assert "PAC labels with judge proxy (epsilon 0.1, alpha 0.1): stopped at" in said
    assert "0 annotation(s) to go" in said or "to go" not in said  # nothing left: the rest is the judge's
    # (PAC's promise, error over all tasks at most epsilon with probability 1 - alpha, is a statement about the
    # random sample: tests/test_active.py and benchmarks/active.py check it by replay, not one draw here)
