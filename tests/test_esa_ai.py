"""ESA-AI through the gateway (issue 68 item 3), with a scripted participant: an ESA study with `prefill: judge:judge`
serves each task with the judge's spans to start from (the judge's prediction only, made by `evalstudio judge
--to-label-studio` against the OpenAI-compatible test server; its score is not shown: no anchoring); the participant
keeps them on one task, removes one on another and adds one on a third; Label Studio then holds each span with the
origin the gateway decided, and the post-edit table (exporters/analyses/postedit.py) counts what the participant did.

The same in a real browser, through the gateway's page: tests/test_prefill_browser.py."""

from __future__ import annotations

import contextlib

import pytest

from evalstudio.protocols import registry

from .conftest import ROOT, gateway_process
from .test_cli import run
from .test_gateway import signed_in
from .judge_server import llm  # noqa: F401 (fixture)
from .test_judge_spans import judged_esa_study

pytestmark = [pytest.mark.server]


def esa_ai_entry(folder, title: str = "ESA-AI scripted"):
    """projects.yaml with the ESA protocol under a title of its own (a project of its own on the shared server),
    prefilled with the judge's spans."""
    text = (ROOT / "projects.yaml").read_text(encoding="utf-8")
    old = 'title: "ESA: mark error spans, then score the translation"\n    config: labeling_configs/esa.xml\n'
    if old not in text:
        raise AssertionError("projects.yaml's esa entry moved: update this test")
    entry = folder / "projects.yaml"
    entry.write_text(text.replace(old, f'title: "{title}"\n    config: labeling_configs/esa.xml\n'
                                       '    prefill: judge:judge\n'), encoding="utf-8")
    for name in ("labeling_configs", "examples"):
        (folder / name).symlink_to(ROOT / name)
    return entry


def test_a_participant_corrects_the_judges_spans_and_every_edit_is_counted(label_studio, client, llm,  # noqa: F811
                                                                       tmp_path):
    from evalstudio.crowd import ledger, participants
    from evalstudio.exporters.analyses.postedit import post_edit_shares, post_edits

    from .conftest import only_on_the_first_database

    only_on_the_first_database(label_studio)
    entry = esa_ai_entry(tmp_path)
    project, project_id, env = judged_esa_study(label_studio, client, llm, tmp_path, entry, 3, tmp_path / "judged")
    folder = tmp_path / "participants"
    participants.add(client, ["PESAAI1"], folder)
    did = {}
    with gateway_process(label_studio, "esa", folder, entry) as url:
        with contextlib.closing(signed_in({"url": url, "accounts": participants.load_accounts(folder)}, "PESAAI1")) as web:
            for number, action in enumerate(("keep", "remove", "add")):
                shown = web.get("/api/next/esa").json()
                start = shown["predictions"][0]["result"]
                assert start and all(r["type"] == "labels" for r in start), start  # spans only: no score shown
                spans = [{k: r[k] for k in ("id", "from_name", "to_name", "type", "value")} for r in start]
                if action == "remove":
                    spans = spans[1:]
                elif action == "add":
                    target = shown["data"]["target"]
                    spans.append({"id": "mine-1", "from_name": "errors", "to_name": "target", "type": "labels",
                                  "value": {"start": len(target) - 3, "end": len(target), "text": target[-3:],
                                            "labels": ["Minor"]}})
                score = {"from_name": "score", "to_name": "target", "type": "number", "value": {"number": 60 + number}}
                saved = web.post(f"/api/submit/{shown['ref']}", json={"result": spans + [score]})
                assert saved.json() == {"ok": True}, saved.text
                did[60 + number] = (action, len(start))
        ledger.open_ledger(folder).wait_synced(120)
    exported = client.export_tasks(project_id)
    edits = post_edits(exported, project, "judge:judge")
    assert len(edits) == 3
    for task in exported:
        [annotation] = task["annotations"]
        score = next(r["value"]["number"] for r in annotation["result"] if r["from_name"] == "score")
        action, predicted = did[score]
        row = edits[edits["task_id"] == task["id"]].iloc[0]
        assert row["predicted"] == predicted
        expected = {"keep": (predicted, 0, 0, 0), "remove": (predicted - 1, 0, 1, 0),
                    "add": (predicted, 0, 0, 1)}[action]
        assert (row["kept"], row["edited"], row["removed"], row["added"]) == expected, (action, row.to_dict())
        origins = sorted(r.get("origin") for r in annotation["result"] if r["type"] == "labels")
        assert origins == sorted(["prediction"] * expected[0] + ["manual"] * expected[3]), (action, origins)
        assert next(r.get("origin") for r in annotation["result"] if r["from_name"] == "score") == "manual"
    report = run("report", "esa", "-o", str(tmp_path / "report"), "--bootstrap", "0", env=env, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    total = edits["predicted"].sum()
    said = " ".join(report.stdout.split())  # the judge's verdict line says what the annotators did with its spans
    assert (f"Its spans shown to annotators ({total} in 3 answers): {(total - 1) / total:.0%} kept, 0% edited, "
            f"{1 / total:.0%} removed; 0.33 spans added per answer.") in said, said
    shares = post_edit_shares(edits).iloc[0]
    assert shares["removed"] == pytest.approx(1 / total) and shares["added_per_annotation"] == pytest.approx(1 / 3)


EDITS = [  # one annotation: predicted spans, the answer's spans -> kept, edited, removed, added
    ("kept under its id", [("p1", 0, 4, "Major")], [("p1", 0, 4, "Major")], (1, 0, 0, 0)),
    ("relabelled", [("p1", 0, 4, "Major")], [("p1", 0, 4, "Minor")], (0, 1, 0, 0)),
    ("extent changed", [("p1", 0, 4, "Major")], [("p1", 0, 6, "Major")], (0, 1, 0, 0)),
    ("removed", [("p1", 0, 4, "Major"), ("p2", 5, 7, "Minor")], [("p2", 5, 7, "Minor")], (1, 0, 1, 0)),
    ("added", [], [("a1", 0, 2, "Minor")], (0, 0, 0, 1)),
    ("the same span under a new id", [("p1", 0, 4, "Major")], [("x9", 0, 4, "Major")], (1, 0, 0, 0)),
    ("removed, and another added", [("p1", 0, 4, "Major")], [("x9", 1, 4, "Major")], (0, 0, 1, 1)),
]


@pytest.mark.parametrize("why, predicted, given, expected", EDITS, ids=[row[0] for row in EDITS])
def test_each_post_edit_is_told_apart(reg, why, predicted, given, expected):
    from evalstudio.exporters.analyses.postedit import post_edits

    def regions(spans):
        return [{"id": i, "from_name": "errors", "to_name": "target", "type": "labels",
                 "value": {"start": s, "end": e, "text": "x", "labels": [label]}} for i, s, e, label in spans]

    task = {"id": 1, "data": {"target": "Die Brücke.", "item_id": "s1", "system": "A"},
            "predictions": [{"model_version": "judge:other", "result": regions([("o1", 0, 11, "Major")])},
                            {"model_version": "judge:j", "result": regions(predicted)}],
            "annotations": [{"id": 5, "completed_by": 3, "result": regions(given), "was_cancelled": False}]}
    row = post_edits([task], reg.get("esa"), "judge:j").iloc[0]
    assert (row["kept"], row["edited"], row["removed"], row["added"]) == expected


@pytest.mark.parametrize("value, ok", [("judge:judge", True), ("true", True), ("judge:gpt-4o", True), ("gpt", False),
                                       ("'judge:'", False), ("'judge:a b'", False)])
def test_prefill_is_a_switch_or_a_judges_predictions(tmp_path, value, ok):
    from evalstudio.base.errors import EvalstudioError

    text = (ROOT / "projects.yaml").read_text(encoding="utf-8")
    old = '    config: labeling_configs/esa.xml\n'
    (tmp_path / "projects.yaml").write_text(text.replace(old, old + f"    prefill: {value}\n"), encoding="utf-8")
    for name in ("labeling_configs", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    if ok:
        assert registry.load(tmp_path / "projects.yaml").get("esa").prefill in (True, value)
        return
    with pytest.raises(EvalstudioError, match="neither true/false nor judge:NAME"):
        registry.load(tmp_path / "projects.yaml")
