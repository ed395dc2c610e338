"""Active collection through the gateway on a real Label Studio (issue 52): the SQuALITY protocol with
`assignment: {strategy: active}`, 40 of SQuALITY's published questions x 3 systems, a judge's predictions stored on
every task (the reviewers' mean correctness as its score of `overall`, its confidence from their spread: a proxy
judge made from the published file), and three scripted participants who answer with the published reviews. The
gateway draws which tasks humans label from the judge's uncertainty, keeps every probability and draw in the ledger,
serves the drawn tasks only, and `evalstudio active estimate --protocol` gives each system's mean from the ledger's
design: the same numbers as evalstudio.stats.active on the same data, computed here from what the test itself sent.
(The statistics without a server: tests/test_active.py.)"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.crowd import ledger, participants
from evalstudio.exporters.analyses.active import MIN_LABELS
from evalstudio.protocols import registry
from evalstudio.protocols.mapping import importer_for
from evalstudio.stats.active import active_means, label_weights
from evalstudio.tasks.importing import import_files
from evalstudio.values.results import region, task_fields

from .conftest import DATABASES, ROOT, gateway_process
from .test_cli import _projects_file
from .test_gateway import signed_in

pytestmark = pytest.mark.server
PEOPLE = ["A", "B", "C"]
QUESTIONS, BUDGET, MIX = 40, 110, 0.5
PUBLISHED = ROOT / "examples" / "analyze" / "squality" / "ratings.csv"


def _published():
    """The first 40 questions' published reviews: (tasks file rows, reviews per (item, system), judge per (item,
    system))."""
    ratings = pd.read_csv(PUBLISHED)
    items = sorted(set(ratings["item"]))[:QUESTIONS]
    ratings = ratings[ratings["item"].isin(items)]
    wide = ratings.pivot_table(index=["item", "system", "annotator"], columns="criterion", values="value")
    rows = [{"id": item, "story": f"(the story of question {item}: not needed by this test)",
             "question": f"Question {item}", "responses": [{"system": s, "text": f"The {s} response to {item}."}
                                                         for s in sorted(set(ratings["system"]))]} for item in items]
    correctness = ratings[ratings["criterion"] == "correctness"].groupby(["item", "system"])["value"]
    judge = {k: (float(m), max(0.0, 1 - float(sd) / 50)) for (k, m), (_, sd) in
             zip(correctness.mean().items(), correctness.std().fillna(0).items())}
    return rows, wide, judge


def test_the_gateway_serves_the_drawn_tasks_and_the_estimate_uses_the_ledgers_probabilities(
        label_studio, client, tmp_path, monkeypatch):
    if ("postgresql" if label_studio.database_env else "sqlite") != DATABASES[0]:
        pytest.skip(f"independent of the database: runs once, on {DATABASES[0]}")
    rows, reviews, judge = _published()

    def own(raw):
        part = raw["projects"]["squality"]
        part.update(title="AC: SQuALITY active", annotators_per_task=1, crowd={"platform": "mturk"},
                    assignment={"strategy": "active", "judge": "proxy", "budget": BUDGET, "criterion": "overall",
                                "mix": MIX})
    projects_file = _projects_file(tmp_path, own)
    project = registry.load(projects_file).get("squality")
    source = tmp_path / "questions.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    import_files(project, importer_for(project), [source], client)
    project_id = client.require_project(project)
    tasks = {int(t["id"]): t for t in client.export_tasks(project_id)}
    assert len(tasks) == QUESTIONS * 3
    key = {t: (str(task_fields(task)["item_id"]), str(task_fields(task)["system"])) for t, task in tasks.items()}
    for task_id, k in key.items():  # the judge's predictions, as `evalstudio judge --to-label-studio` stores them
        score, confidence = judge[k]
        client.put_prediction(task_id, [region(project.interface, "overall", round(score))], "judge:proxy",
                              confidence)
    folder = tmp_path / "participants"
    ids = {p: f"ACTIVE{p}" for p in PEOPLE}
    participants.add(client, list(ids.values()), folder)
    served: list[tuple[str, int]] = []
    given: dict[int, float] = {}
    with gateway_process(label_studio, "squality", folder, projects_file) as url:
        study = {"url": url, "accounts": participants.load_accounts(folder)}
        webs = {pid: signed_in(study, pid) for pid in ids.values()}
        book = ledger.open_ledger(folder)
        finished: set[str] = set()
        while len(finished) < len(PEOPLE):
            for n, pid in enumerate(ids.values()):
                if pid in finished:
                    continue
                shown = webs[pid].get("/api/next/squality").json()
                if "finished" in shown:
                    finished.add(pid)
                    continue
                task_id = book.ref(pid, shown["ref"]).task_id
                # the first task of the part has the guide open, every later one folded (issue 53)
                assert shown["guide"] == ("folded" if any(p == pid for p, _ in served) else "open"), shown
                served.append((pid, task_id))
                review = reviews.loc[key[task_id]].iloc[n % len(reviews.loc[key[task_id]])]
                result = [region(project.interface, c, int(review[c])) for c in ("correctness", "selection",
                                                                                 "overall")]
                saved = webs[pid].post(f"/api/submit/{shown['ref']}", json={"result": result})
                assert saved.json() == {"ok": True}, saved.text
                given[task_id] = float(review["overall"])
    design = ledger.open_ledger(folder).design("squality")
    # every task's probability and draw are in the ledger; the probabilities sum to the budget, each at least the
    # uniform share's floor, and the less sure the judge the likelier the label
    assert set(design) == set(tasks)
    probability = np.array([design[t][0] for t in sorted(tasks)])
    assert probability.sum() == pytest.approx(BUDGET) and probability.min() >= MIX * BUDGET / len(tasks) - 1e-9
    confidence = np.array([design[t][3] for t in sorted(tasks)])
    ordered = probability[np.argsort(1 - confidence, kind="stable")]
    assert (np.diff(ordered) >= -1e-12).all() and ordered[-1] > ordered[0]  # grows with the judge's uncertainty
    assert all(design[t][2] == round(judge[key[t]][0]) for t in tasks)  # the judge's score, as stored
    # only drawn tasks were served, each once (one answer per task), and every drawn one was
    drawn = {t for t, (_, d, _, _) in design.items() if d}
    assert sorted(t for _, t in served) == sorted(drawn)
    stored = client.export_tasks(project_id)
    assert sum(len(t["annotations"]) for t in stored) == len(drawn)  # Label Studio holds the ledger's answers
    # the estimate from the ledger's design equals the statistics on what the test sent
    for name, value in (("LABEL_STUDIO_URL", label_studio.url),
                        ("LABEL_STUDIO_API_KEY", label_studio.credentials().api_key)):
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["active", "estimate", "--protocol", "squality", "--participants", str(folder),
                                      "--projects", str(projects_file), "-o", str(tmp_path / "estimate")])
    assert result.exit_code == 0, result.output
    systems = pd.read_csv(tmp_path / "estimate" / "active_systems.csv").query("criterion == 'overall'")
    checked = 0
    for row in systems.itertuples():
        mine = [t for t in sorted(tasks) if key[t][1] == row.system]
        y = np.array([given.get(t, np.nan) for t in mine])
        f = np.array([float(design[t][2]) for t in mine])
        w = label_weights(np.array([design[t][0] for t in mine]), np.array([design[t][1] for t in mine]))
        assert row.labels == int((w > 0).sum())
        if row.labels < MIN_LABELS:
            assert np.isnan(row.estimate)
            continue
        expected = active_means(y, f, w)
        assert (row.estimate, row.lo, row.hi) == pytest.approx(
            (expected["estimate"][0], expected["lo"][0], expected["hi"][0]), abs=1e-9)
        checked += 1
    assert checked >= 2, systems
    # `report` reads the same design from the ledger: its page and active_systems.csv give the same estimates
    report = CliRunner().invoke(app, ["report", "squality", "--projects", str(projects_file), "--bootstrap", "20",
                                      "--participants", str(folder), "-o", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    again = pd.read_csv(tmp_path / "report" / "active_systems.csv").query("criterion == 'overall'")
    assert again["estimate"].equals(systems["estimate"]) and again["lo"].equals(systems["lo"])
    assert "Active design: the systems' means" in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
