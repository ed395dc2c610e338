"""`evalstudio judge` with a live Label Studio (each once, on the first database: what is checked is the judge's
and the report's, not the database's): the judge's answers as predictions out of the participants' reach, and the
report's verdict on whether to trust a judge. (The prompt and the runs: tests/test_judge.py.)"""

from __future__ import annotations

import httpx
import pytest

from .judge_server import llm  # noqa: F401 (fixture)
from .test_cli import run


@pytest.mark.server
def test_the_judges_answers_as_predictions_stay_out_of_participants_reach(label_studio, client, llm, tmp_path):
    """--to-label-studio: one prediction per task and judge (model version judge:NAME), replaced and never doubled
    by a second run, and never replaced on a task that has an answer (it may have started from it);
    `analyze --protocol` reads it as a metric; a participant of the gateway gets the task without
    it and reaches no prediction."""
    from .conftest import only_on_the_first_database
    from .test_study_ledger import HEADERS, Gateway, dialogue_study

    only_on_the_first_database(label_studio)
    projects_file, project, project_id = dialogue_study(tmp_path, client, "judged study", items=4, overlap=1)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file), "OPENAI_API_KEY": "sk-test"}
    for _ in range(2):
        done = run("judge", "dialogue", "--model", "judge", "--base-url", llm.url, "--to-label-studio", "-o",
                   str(tmp_path / "out"), "--cache", str(tmp_path / "cache.sqlite3"), env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        predictions = client.predictions(project_id)
        assert len(predictions) == 4
        assert all([p["model_version"] for p in found] == ["judge:judge"] for found in predictions.values())
    assert llm.stats()["requests"] == 4  # the second run asked nothing
    # a task with an answer keeps the prediction it was answered with (a prefilled answer started from it): two
    # predictions made to differ from the judge's answer, one of the two tasks answered, the judge run again
    answered, open_ = sorted(predictions)[:2]
    other = {}
    for task_id in (answered, open_):
        stored = predictions[task_id][0]
        other[task_id] = [{**r, "value": {**r["value"], "rating": r["value"]["rating"] % 5 + 1}}
                          if "rating" in r.get("value", {}) else r for r in stored["result"]]
        assert other[task_id] != stored["result"]
        client.sdk.predictions.update(stored["id"], result=other[task_id])
    client.sdk.annotations.create(id=answered, result=other[answered])
    done = run("judge", "dialogue", "--model", "judge", "--base-url", llm.url, "--to-label-studio", "-o",
               str(tmp_path / "out"), "--cache", str(tmp_path / "cache.sqlite3"), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "1 prediction(s) stored or replaced" in said and "1 earlier prediction(s) kept" in said, said
    again = client.predictions(project_id)
    assert again[answered][0]["result"] == other[answered]  # kept: its answer started from it
    assert again[open_][0]["result"] == predictions[open_][0]["result"]  # replaced by the judge's answer
    assert llm.stats()["requests"] == 4
    # what `analyze --protocol` reads as the metric "prediction judge:judge": every criterion of every task, on scale
    from evalstudio.exporters.tables.tidy import prediction_frame

    frame = prediction_frame([t for page in client.full_task_pages(project_id) for t in page], project)
    assert len(frame) == 4 * 3 and set(frame["model_version"]) == {"judge:judge"}
    assert frame["value"].between(1, 5).all()
    folder = tmp_path / "participants"
    with Gateway(label_studio, "dialogue", folder, projects_file) as gateway:
        from evalstudio.crowd import ledger

        key = ledger.open_ledger(folder).setting("join_key")
        with httpx.Client(base_url=gateway.url, timeout=120, headers=HEADERS) as web:
            assert web.post("/api/join", json={"key": key, "participant": "JUDGED1"}).status_code == 200
            page = web.get("/api/next/dialogue")
            assert page.status_code == 200 and "ref" in page.json()
            assert "judge" not in page.text and "prediction" not in page.text
            for path in ("/api/predictions", f"/api/projects/{project_id}/predictions", "/api/tasks"):
                assert web.get(path).status_code in (401, 403, 404), path


@pytest.mark.server
def test_the_report_says_whether_to_trust_each_judge(label_studio, client, llm, tmp_path):
    """A project whose human answers are known: two annotators give every task the judge's answer, a third another
    one. The report's LLM judges section gives the judge's kappa with the humans' plurality (here every plurality
    is the judge's answer: kappa 1, accuracy 1, as sklearn computes them) and a verdict line citing the
    alternative annotator test (40 segments per annotator, above the 30 it needs)."""
    from sklearn.metrics import cohen_kappa_score

    from evalstudio.crowd import participants

    from .conftest import only_on_the_first_database
    from .test_study_ledger import dialogue_study

    only_on_the_first_database(label_studio)
    projects_file, project, project_id = dialogue_study(tmp_path, client, "trusted judge", items=40, overlap=3)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file), "OPENAI_API_KEY": "sk-test"}
    done = run("judge", "dialogue", "--model", "judge", "--base-url", llm.url, "--to-label-studio", "-o",
               str(tmp_path / "out"), "--cache", str(tmp_path / "cache.sqlite3"), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "participants"
    participants.add(client, ["H1", "H2", "H3"], folder)
    people = participants.load_accounts(folder)
    judged = {}
    for task_id, predictions in client.predictions(project_id).items():
        values = {r["from_name"]: r["value"]["rating"] for r in predictions[0]["result"]}
        judged[task_id] = values
        for pid in ("H1", "H2", "H3"):
            given = values if pid != "H3" else {k: v % 5 + 1 for k, v in values.items()}
            result = [{"from_name": k, "to_name": "response", "type": "rating", "value": {"rating": v}}
                      for k, v in given.items()]
            stored = httpx.post(f"{label_studio.url}/api/tasks/{task_id}/annotations",
                                headers={"Authorization": f"Token {label_studio.credentials().api_key}"},
                                json={"result": result, "completed_by": people[pid].user_id})
            assert stored.status_code == 201, stored.text
    report = run("report", "dialogue", "-o", str(tmp_path / "report"), "--bootstrap", "0", env=env, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    said = " ".join(report.stdout.split())  # the terminal names the section and gives its verdict lines (issue 65.6)
    assert "LLM judges" in said and "judge: appropriateness: quadratic-weighted kappa 1.00 over 40 segments" in said
    import pandas as pd

    table = pd.read_csv(tmp_path / "report" / "judges.csv")
    row = table[table["criterion"] == "appropriateness"].iloc[0]
    humans = [judged[t]["appropriateness"] for t in sorted(judged)]
    expected = cohen_kappa_score(humans, humans, weights="quadratic")
    assert (row["judge"], row["segments"], row["accuracy"]) == ("judge", 40, 1.0)
    assert row["agreement"] == pytest.approx(expected)
    assert row["alt_test"] in ("passes", "fails") and 0 <= row["winning_rate"] <= 1
    page = (tmp_path / "report" / "index.html").read_text()
    assert "LLM judges" in page and "judge: appropriateness: quadratic-weighted kappa 1.00 over 40 segments" in page
    assert "Verdict:" in page and f"winning rate {row['winning_rate']:.2f}" in page
