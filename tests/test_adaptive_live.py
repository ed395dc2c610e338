"""Adaptive collection on a real Label Studio through the gateway (issue 40): three participants of a seeded study
under `uncertainty` routing, Circa Part I's 20 questions, room for three answers per task, at least two each, and
a stopping rule (every label's posterior at least 0.95): two answers per question first, then the split ones
get a third. (The statistics without a server: tests/test_adaptive.py.)"""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest

from evalstudio import importers
from evalstudio.crowd import ledger, participants, routing
from evalstudio.protocols import registry
from evalstudio.stats import adaptive
from evalstudio.tasks.importing import import_files
from evalstudio.tasks.order import participant_order, seed_of

from .conftest import DATABASES, example_files, gateway_process
from .test_cli import _projects_file, run
from .test_gateway import signed_in

pytestmark = pytest.mark.server
PEOPLE = ["A", "B", "C"]
OVERLAP, MIN_OVERLAP, POSTERIOR = 3, 2, 0.95


def _label(labels: list[str], pid: str, item: str) -> str:
    """A participant's scripted answer: mostly the first label, the second on about one question in four (so that
    some questions are split and need more answers)."""
    h = int.from_bytes(hashlib.sha256(f"{pid}/{item}".encode()).digest()[:4], "big")
    return labels[1] if h % 4 == 0 else labels[0]


def _tasks(label_studio, project_id: int) -> dict[int, dict]:
    answer = httpx.get(f"{label_studio.url}/api/tasks", timeout=60, params={"project": project_id, "page_size": 100},
                       headers={"Authorization": f"Token {label_studio.credentials().api_key}"})
    answer.raise_for_status()
    return {t["id"]: t for t in answer.json()["tasks"]}


def _annotations(label_studio, task_ids) -> dict[int, int]:
    """Each task's annotations as Label Studio lists them, counted here: its `total_annotations` field is a counter
    that two annotations saved at once on one task can leave one short (tasks/models.py counts, then saves)."""
    counts = {}
    for task_id in task_ids:
        answer = httpx.get(f"{label_studio.url}/api/tasks/{task_id}/annotations/", timeout=60,
                           headers={"Authorization": f"Token {label_studio.credentials().api_key}"})
        answer.raise_for_status()
        counts[task_id] = sum(1 for a in answer.json() if not a.get("was_cancelled"))
    return counts


def test_uncertainty_routing_serves_the_least_certain_task_and_stops_at_the_target(label_studio, client, tmp_path):
    """Each next task is the one the strategy gives (below the minimum overlap first, then the least certain label
    among the tasks the participant has not had, ties in their own order); nobody gets a task twice, no task gets
    more than three answers; the gateway stops serving when every task is at the target (or at three answers),
    before every answer the design allows was spent, and `status` says which target, when and at what cost."""
    if ("postgresql" if label_studio.database_env else "sqlite") != DATABASES[0]:
        pytest.skip(f"independent of the database: runs once, on {DATABASES[0]}")

    def own(raw):
        part = raw["projects"]["circa_part1"]
        part.update(title="AD: Circa Part I", annotators_per_task=OVERLAP,
                    assignment={"strategy": "uncertainty", "min_overlap": MIN_OVERLAP},
                    stop_when={"posterior": POSTERIOR, "pay_per_label": 0.1, "money": 100})
        part["crowd"].pop("per_participant", None)
        del raw["projects"]["circa_part2"]  # (Part II's lists need projects of their own; Part I is the study here)
    projects_file = _projects_file(tmp_path, own)
    reg = registry.load(projects_file)
    project = reg.get("circa_part1")
    import_files(project, importers.get(project.importer), example_files("circa_part1"), client)
    project_id = client.require_project(project)
    tasks = _tasks(label_studio, project_id)
    contexts = {t: str(task["data"]["item_id"]) for t, task in tasks.items()}
    labels = list(project.criteria["interpretation"].labels)
    folder = tmp_path / "participants"
    ids = {p: f"ADAPT{p}" for p in PEOPLE}
    participants.add(client, list(ids.values()), folder)
    book = ledger.open_ledger(folder)
    book.set_setting("order-salt", "a seeded adaptive study")
    route = routing.routing_of(project)
    orders = {pid: participant_order(contexts, seed_of("a seeded adaptive study", pid, "circa_part1"))
              for pid in ids.values()}
    served: dict[str, list[int]] = {pid: [] for pid in ids.values()}
    answers: list[tuple[int, str, str]] = []  # (task, participant, label) in the order given
    stopped_after = None
    with gateway_process(label_studio, "circa", folder, projects_file) as url:
        study = {"url": url, "accounts": participants.load_accounts(folder)}
        webs = {pid: signed_in(study, pid) for pid in ids.values()}
        for turn in range(len(tasks) * OVERLAP + len(PEOPLE)):
            pid = ids[PEOPLE[turn % len(PEOPLE)]]
            shown = webs[pid].get("/api/next/circa_part1").json()
            if "finished" in shown:
                assert shown["finished"] == routing.STOP_MESSAGE, shown
                stopped_after = stopped_after or len(answers)
                if all(webs[p].get("/api/next/circa_part1").json().get("finished") == routing.STOP_MESSAGE
                       for p in ids.values()):
                    break
                continue
            task_id = book.ref(pid, shown["ref"]).task_id
            # what the strategy gives, from the answers so far (every answer was given before the next request)
            state = routing.state_of(route, sorted(tasks), [(t, p, json.dumps(v)) for t, p, v in answers])
            counts = {t: sum(1 for a in answers if a[0] == t) for t in tasks}
            open_tasks = [t for t in orders[pid] if t not in served[pid] and counts[t] < OVERLAP]
            certainty = state.certainty
            index = {t: i for i, t in enumerate(sorted(tasks))}
            below = [t for t in open_tasks if counts[t] < MIN_OVERLAP]
            if below:
                assert counts[task_id] == max(counts[t] for t in below), (task_id, counts)
            else:
                done = adaptive.met(certainty, posterior=POSTERIOR)
                candidates = [t for t in open_tasks if not done[index[t]]]
                worst = max(1 - certainty.posterior[index[t]] for t in candidates)
                assert 1 - certainty.posterior[index[task_id]] == pytest.approx(worst, abs=1e-9), task_id
            expected = routing.choose_adaptive(route, state, orders[pid], contexts, {}, {
                t: ledger.Load(n - (t in served[pid]), 0) for t, n in counts.items()}, set(served[pid]), OVERLAP,
                contexts[served[pid][-1]] if served[pid] else None)
            assert task_id == expected, (pid, task_id, expected)
            assert task_id not in served[pid]
            served[pid].append(task_id)
            label = _label(labels, pid, contexts[task_id])
            result = [{"from_name": route.control, "to_name": "answer", "type": "choices",
                       "value": {"choices": [label]}}]
            saved = webs[pid].post(f"/api/submit/{shown['ref']}", json={"result": result})
            assert saved.json() == {"ok": True}, saved.text
            answers.append((task_id, pid, label))
    assert stopped_after is not None, "the gateway never stopped"
    assert len(tasks) * MIN_OVERLAP < stopped_after < len(tasks) * OVERLAP  # adaptive: fewer than the full design
    given = {t: sum(1 for a in answers if a[0] == t) for t in tasks}
    assert set(given.values()) == {MIN_OVERLAP, OVERLAP}, given  # the uncertain ones got more, the others not
    final = routing.state_of(route, sorted(tasks), [(t, p, json.dumps(v)) for t, p, v in answers])
    assert adaptive.study_done(final.certainty, min_overlap=MIN_OVERLAP, max_overlap=OVERLAP, posterior=POSTERIOR)
    before = routing.state_of(route, sorted(tasks), [(t, p, json.dumps(v)) for t, p, v in answers[:-1]])
    assert not adaptive.study_done(before.certainty, min_overlap=MIN_OVERLAP, max_overlap=OVERLAP,
                                   posterior=POSTERIOR)
    in_label_studio = _annotations(label_studio, tasks)
    assert in_label_studio == given  # every answer is one annotation of its task, no more
    assert all(n <= OVERLAP for n in in_label_studio.values())
    status = run("status", "circa", "--participants", str(folder), "--projects", str(projects_file), "-o",
                 str(tmp_path / "status"),
                 env={"LABEL_STUDIO_URL": label_studio.url,
                      "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key})
    assert status.returncode == 0, status.stderr
    line = next(x for x in status.stdout.splitlines() if x.startswith("circa_part1: adaptive collection"))
    print(line)  # (docs/adaptive.md shows one)
    assert f"target reached: every task's label posterior at least {POSTERIOR:g}" in line, line
    assert f"cost: {len(answers)} answers" in line and f"{len(answers) * 0.1:g} in pay" in line, line
    assert "target reached" in (tmp_path / "status" / "status.html").read_text(encoding="utf-8")
