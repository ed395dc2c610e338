"""Crowd-study bookkeeping: status, attention checks, approvals and bonuses, on a study whose numbers are known
by construction (each participant's behaviour is set below and the expected values are counted by hand)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest

from evalstudio.crowd import study
from evalstudio.exporters.tables.tidy import annotation_frame
from evalstudio.protocols.registry import Bonus, Crowd
from evalstudio.values.results import region

from .test_cli import _projects_file, run

N_TASKS = 60
GOLD = range(1, 7)  # tasks 1..6 carry a known answer: appropriateness 5
BEHAVIOUR = {  # participant: (tasks 1..n, lead time in seconds, how they answer)
    "w1": (55, 30.0, "careful"),  # all 5 HITs of 11: earns the bonus
    "w2": (20, 2.0, "careful"),  # a speeder
    "w3": (12, 25.0, "straight"),  # the same value for everything
    "w4": (10, 28.0, "wrong_gold"),  # fails the attention checks; also the 4th annotator of tasks 1..10 (surplus)
}


def email(pid: str) -> str:
    return f"{pid}@participants.invalid"


def make_tasks(project) -> list[dict]:
    rng = np.random.default_rng(0)
    li = project.interface
    tasks = [{"id": t, "data": {"item_id": f"i{t}", "system": "s", "context": "A: hi", "response": "hello"},
              "meta": {"gold": {"appropriateness": 5}} if t in GOLD else {}, "annotations": []} for t in range(1, N_TASKS + 1)]
    next_id = 1
    for p, (n, seconds, how) in BEHAVIOUR.items():  # in this order: ids (and so submission order) grow per participant
        for task in tasks[:n]:
            result = []
            for criterion, spec in project.criteria.items():
                for _, control in project.controls(criterion):
                    if how == "straight":
                        value = 5
                    elif how == "wrong_gold" and task["id"] in GOLD and criterion == "appropriateness":
                        value = 1
                    elif task["id"] in GOLD and criterion == "appropriateness":
                        value = 5
                    else:
                        value = int(rng.integers(1, 6))
                    result.append(region(li, control, value))
            minute = next_id  # one annotation a minute
            task["annotations"].append({"id": next_id, "completed_by": {"id": 100 + int(p[1]), "email": email(p)},
                                        "result": result, "lead_time": seconds, "was_cancelled": False,
                                        "created_at": f"2026-11-20T{10 + minute // 60:02d}:{minute % 60:02d}:00Z"})
            next_id += 1
    return tasks


@pytest.fixture
def dialogue(reg):
    project = reg.entry("dialogue")
    crowd = project.crowd.model_copy(update={"min_gold_accuracy": 0.5, "bonus": Bonus(rule="all_batches", amounts=[2.5])})
    return project.model_copy(update={"crowd": crowd})


def test_participant_table_matches_what_each_participant_did(dialogue):
    tasks = make_tasks(dialogue)
    frame = annotation_frame(tasks, dialogue)
    gold = study.gold_answers(tasks, dialogue)
    assert len(gold) == len(GOLD)
    table = study.participant_table(frame, dialogue.crowd, gold, N_TASKS, study.numeric_criteria([dialogue]),
                                    {email(p): p.upper() for p in BEHAVIOUR}).set_index("participant")
    for p, (n, seconds, how) in BEHAVIOUR.items():
        row = table.loc[p.upper()]
        assert row["tasks_done"] == n and row["median_seconds"] == seconds and row["quota"] == 55
        assert row["batches_done"] == n // 11
        assert row["gold_items"] == len(GOLD)
        assert row["gold_accuracy"] == (0.0 if how == "wrong_gold" else 1.0)
        assert row["surplus"] == (10 if p == "w4" else 0)  # tasks 1..10 already had 3 annotators
    assert "speeder (median 2.0s < 10.0s)" in table.loc["W2", "warnings"]  # a third of everyone's median (30 s)
    assert "straight-liner (100% of tasks with one value)" in table.loc["W3", "warnings"]
    assert "failed gold (0% < 50%)" in table.loc["W4", "warnings"]
    assert table.loc["W1", "warnings"] == ""

    coverage = study.coverage(frame, [t["id"] for t in tasks], dialogue.annotators_per_task)
    # tasks 1..10: 3 counted (w4 is surplus); 11,12: 3; 13..20: 2; 21..55: 1; 56..60: 0
    assert coverage.set_index("annotations")["tasks"].to_dict() == {0: 5, 1: 35, 2: 8, 3: 12}
    remaining = 5 * 3 + 35 * 2 + 8 * 1
    rate, hours = study.time_left(frame, remaining)
    assert rate == pytest.approx(60.0)  # one a minute (w4's ten surplus ones are not progress)
    assert hours == pytest.approx(remaining / 60.0)


def test_decisions_reject_only_failed_gold_and_pay_the_announced_bonuses(dialogue):
    tasks = make_tasks(dialogue)
    table = study.participant_table(annotation_frame(tasks, dialogue), dialogue.crowd,
                                    study.gold_answers(tasks, dialogue), N_TASKS, study.numeric_criteria([dialogue]))
    decided = study.decisions(table, dialogue.crowd).set_index("annotator")
    assert decided["decision"].to_dict() == {email("w1"): "approve", email("w2"): "approve", email("w3"): "approve",
                                             email("w4"): "reject"}
    assert decided.loc[email("w4"), "reason"] == "failed attention checks: 0% correct on 6 gold item(s), below 50%"
    assert decided["bonus"].to_dict() == {email("w1"): 2.5, email("w2"): 0.0, email("w3"): 0.0, email("w4"): 0.0}
    # a threshold between whole percentages is said as set: 41 of 50 (82%) is below 82.5%, not "below 82%"
    strict = dialogue.crowd.model_copy(update={"min_gold_accuracy": 0.825})
    near = pd.DataFrame({"participant": ["P"], "annotator": ["a"], "tasks_done": [50], "gold_accuracy": [41 / 50],
                         "gold_items": [50]})
    assert study.decisions(near, strict).loc[0, "reason"] == ("failed attention checks: 82% correct on 50 gold "
                                                              "item(s), below 82.5%")

    ranked = Crowd(platform="mturk", bonus=Bonus(rule="most_tasks", amounts=[25, 15, 10], currency="EUR"))
    tie = pd.DataFrame({"participant": list("abcde"), "annotator": list("abcde"), "tasks_done": [40, 70, 40, 10, 0]})
    paid = study.decisions(tie, ranked).set_index("participant")["bonus"].to_dict()
    assert paid == {"b": 25, "a": 15, "c": 15, "d": 0, "e": 0}  # a and c share rank 2; rank 4 gets nothing


# (answers, minutes from the first to the last): a rate only from 5 answers over 10 minutes (a scripted participant's
# 2 answers 2 ms apart were said "1,776,900/hour")
BURSTS = [(2, 0.00004, None), (4, 60, None), (5, 9.9, None), (5, 10, 24.0), (30, 29, 60.0)]


@pytest.mark.parametrize("answers, minutes, rate", BURSTS)
def test_no_rate_from_a_burst_of_answers(answers, minutes, rate):
    start = pd.Timestamp("2026-11-29 04:00", tz="UTC")
    times = [start + pd.Timedelta(minutes=minutes * i / (answers - 1)) for i in range(answers)]
    frame = pd.DataFrame({"annotation_id": range(answers), "task_id": range(answers), "annotator": "a",
                          "cancelled": False, "surplus": False, "created_at": times})
    got, hours = study.time_left(frame, 10)
    assert (got is None and hours is None) if rate is None else got == pytest.approx(rate)


@pytest.mark.parametrize("hours, said", [(0.001, "1 min"), (0.5, "30 min"), (0.999, "60 min"), (1.0, "1.0 hours"),
                                         (1.55, "1.6 hours"), (36.0, "36.0 hours")])
def test_time_left_is_said_in_minutes_under_an_hour(hours, said):
    from evalstudio.operations.reading import _duration
    assert _duration(hours) == said


@pytest.mark.parametrize("rate, said", [(0.25, "0.2"), (9.94, "9.9"), (9.96, "10"), (10.0, "10"), (17547.5, "17,548")])
def test_the_rate_is_said_in_whole_annotations_per_hour_from_ten_on(rate, said):
    from evalstudio.operations.reading import _rate
    assert _rate(rate) == said


def _crowd_rules(raw):
    """The dialogue study with attention-check rejections and a bonus for every batch."""
    raw["projects"]["dialogue"]["crowd"].update({"min_gold_accuracy": 0.5, "bonus": {"rule": "all_batches",
                                                                                       "amounts": [2.5]}})


def test_status_and_approvals_through_the_command_line(dialogue, tmp_path):
    tasks = make_tasks(dialogue)
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks), encoding="utf-8")

    env = {"EVALSTUDIO_PROJECTS": str(_projects_file(tmp_path, _crowd_rules))}

    shown = run("status", "dialogue", "--from-export", str(export), "-o", str(tmp_path / "status"), env=env)
    assert shown.returncode == 0, shown.stderr
    assert "4 participant(s)" in shown.stdout and "failed gold" in shown.stdout and "speeder" in shown.stdout
    assert "93 annotation(s) to go at 60/hour: about 1.6 hours left" in shown.stdout
    written = pd.read_csv(tmp_path / "status" / "participants.csv").set_index("participant")
    narrow = run("status", "dialogue", "--from-export", str(export), env={**env, "COLUMNS": "80"})
    words = {w for text in written["warnings"].dropna() for w in text.split()}
    assert words and all(w in narrow.stdout for w in words), narrow.stdout  # wrapped between words, never cut
    assert written.loc["w1", "tasks_done"] == 55
    page = (tmp_path / "status" / "status.html").read_text(encoding="utf-8")  # what the console says, readable
    assert "93 annotation(s) to go at 60/hour: about 1.6 hours left" in page and "0% of 6" in page
    assert "NaN" not in page and "{'" not in page and "bonus: rule all_batches, amounts 2.5" in page

    out = tmp_path / "prolific"
    done = run("approvals", "dialogue", "--from-export", str(export), "--platform", "prolific", "-o", str(out), env=env)
    assert done.returncode == 0, done.stderr
    assert "3 approved, 1 rejected, 1 bonus(es)" in done.stdout
    assert (out / "prolific_approve.txt").read_text().split() == ["w1", "w2", "w3"]
    assert (out / "prolific_bonus.csv").read_text() == "w1,2.50\n"
    assert "failed attention checks" in (out / "prolific_reject.csv").read_text()

    # MTurk without its batch results: files written, and the researcher told they cannot be uploaded as they are
    bare = run("approvals", "dialogue", "--from-export", str(export), "--platform", "mturk", "-o",
               str(tmp_path / "bare"), env=env)
    assert bare.returncode == 0, bare.stderr
    assert "without --mturk-results the MTurk files have no AssignmentId" in " ".join(bare.stderr.split())

    results = tmp_path / "Batch_1_results.csv"  # MTurk's batch results: one assignment per worker
    with open(results, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["HITId", "AssignmentId", "WorkerId", "Answer.code"])
        for i, p in enumerate(["W1", "W2", "W3", "W4"]):
            writer.writerow([f"H{i}", f"A{i}", p, "done"])
    out = tmp_path / "mturk"
    done = run("approvals", "dialogue", "--from-export", str(export), "--mturk-results", str(results), "-o", str(out),
               env=env)
    assert done.returncode == 0, done.stderr
    upload = pd.read_csv(out / "mturk_upload.csv", keep_default_na=False).set_index("WorkerId")
    assert upload["Approve"].to_dict() == {"W1": "x", "W2": "x", "W3": "x", "W4": ""}
    assert upload.loc["W4", "Reject"].startswith("failed attention checks") and upload.loc["W1", "Answer.code"] == "done"
    bonus = pd.read_csv(out / "mturk_bonus.csv")
    assert bonus[["WorkerId", "AssignmentId", "BonusAmount"]].values.tolist() == [["W1", "A0", 2.5]]  # as MTurk spells it

    no_rule = run("report", "dialogue", "--from-export", str(export), "--exclude-rejected", "-o", str(tmp_path / "x"))
    assert no_rule.returncode == 2 and "set it (and import gold items)" in " ".join(no_rule.stderr.split())

    report = run("report", "dialogue", "--from-export", str(export), "--exclude-rejected", "--bootstrap", "5",
                 "-o", str(tmp_path / "report"), env=env)
    assert report.returncode == 0, report.stderr
    assert "left out 1 rejected participant(s)" in report.stderr
    kept = pd.read_csv(tmp_path / "report" / "annotator_qc.csv")
    assert email("w4") not in set(kept["annotator"]) and email("w1") in set(kept["annotator"])
    # the report of a crowd study carries its status page, with every participant (rejected ones too)
    assert "href='status.html'" in (tmp_path / "report" / "index.html").read_text()
    status_page = (tmp_path / "report" / "status.html").read_text()
    assert all(p in status_page for p in BEHAVIOUR) and "failed gold" in status_page


def test_status_and_approvals_run_without_the_command_line(dialogue, tmp_path, monkeypatch):
    """Issue 66: what `status` and `approvals` do is an operation of evalstudio.operations, called here without typer:
    the same participants and decisions as the crowd study's own tables of the same export."""
    from evalstudio.operations import status as study_status

    tasks = make_tasks(dialogue)
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks), encoding="utf-8")

    projects = _projects_file(tmp_path, _crowd_rules)
    seen = study_status.look("dialogue", export, None, tmp_path / "participants", tmp_path / "status", False,
                             projects)
    table = study.participant_table(annotation_frame(tasks, dialogue), dialogue.crowd,
                                    study.gold_answers(tasks, dialogue), N_TASKS, study.numeric_criteria([dialogue]))
    assert sorted(seen.table["annotator"]) == sorted(table["annotator"])
    assert seen.table.set_index("annotator")["tasks_done"].to_dict() == table.set_index("annotator")["tasks_done"].to_dict()
    assert seen.closed == [] and (tmp_path / "status" / "participants.csv").is_file()
    decided, platform, written = study_status.approve("dialogue", tmp_path / "approvals", "prolific", None, export,
                                                      None, tmp_path / "participants", 5, projects)
    expected = study.decisions(table, dialogue.crowd).set_index("annotator")["decision"].to_dict()
    assert decided.set_index("annotator")["decision"].to_dict() == expected and platform == "prolific"
    assert all(path.is_file() for path in written)


def test_the_operations_import_without_the_command_line():
    """Issue 66: evalstudio.operations is importable without typer (the commands' library is not below it)."""
    import subprocess
    import sys

    code = ("import sys; import evalstudio.operations.status, evalstudio.operations.reading, "
            "evalstudio.operations.analyzing, evalstudio.operations.planning, evalstudio.operations.judging, "
            "evalstudio.operations.serving, evalstudio.operations.publishing, evalstudio.operations.reporting; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'typer' or m.startswith('evalstudio.cli')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("hostile", ['"[/x]"@x.com', "[bold]w@x.com", "[link=javascript:x]w[/link]@x.com",
                                     "=1+2@x.com", "w3\x1b]0;title\x07@x.com"])
def test_participant_text_that_looks_like_markup_is_printed_as_it_is(dialogue, tmp_path, hostile):
    """A participant can sign up with an address rich would read as markup, a spreadsheet as a formula or a terminal
    as an escape sequence; `status` (which `--watch` repeats to keep quotas) and `approvals` print it as text
    instead of crashing on it, and the platform files leave out what is not a platform id instead of changing it."""
    tasks = make_tasks(dialogue)
    for task in tasks:
        for annotation in task["annotations"]:
            if annotation["completed_by"]["email"] == email("w3"):
                annotation["completed_by"]["email"] = hostile
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks), encoding="utf-8")
    shown = run("status", "dialogue", "--from-export", str(export), "-o", str(tmp_path / "status"))
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    # shown literally, brackets included, control characters written out (ESC as \x1b)
    assert hostile.split("@")[0].encode("unicode_escape").decode() in shown.stdout.replace("\n", "")
    done = run("approvals", "dialogue", "--from-export", str(export), "--platform", "prolific", "-o", str(tmp_path / "a"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "\x1b" not in done.stdout + done.stderr + shown.stdout  # no escape sequence reaches the terminal
    said = " ".join(done.stderr.split())
    assert "1 participant(s) have an id that is not a prolific id and are left out of the prolific files" in said
    for name in ("prolific_approve.txt", "prolific_bonus.csv", "prolific_reject.csv"):
        assert "@x.com" not in (tmp_path / "a" / name).read_text(), name  # left out, not rewritten
    assert (tmp_path / "a" / "prolific_approve.txt").read_text().split() == ["w1", "w2", "w4"]  # (no gold rule here)
    table = (tmp_path / "a" / "approvals.csv").read_text()
    assert not any(c in table for c in "\x1b\x07")  # control characters written out, as on the terminal
    if "\x1b" in hostile:
        assert "w3\\x1b]0;title\\x07" in table


def test_an_mturk_row_with_ids_mturk_never_writes_is_left_out_not_rewritten(dialogue, tmp_path):
    """A results row whose AssignmentId is a formula (or holds control characters) was rewritten by the
    spreadsheet-safe writer ('=...) and still marked Approve: uploaded, it approves nothing or someone else. It is
    left out of the upload file and named; the other rows are filled as usual."""
    export = tmp_path / "export.json"
    export.write_text(json.dumps(make_tasks(dialogue)), encoding="utf-8")
    results = tmp_path / "Batch_1_results.csv"
    with open(results, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["HITId", "AssignmentId", "WorkerId"])
        writer.writerows([["H0", "A0", "W1"], ["H1", '=HYPERLINK("http://x","A1")', "W2"], ["H2", "A2\x1b", "W3"],
                          ["H3", "A3", "W4"]])
    out = tmp_path / "mturk"
    done = run("approvals", "dialogue", "--from-export", str(export), "--mturk-results", str(results), "-o", str(out))
    assert done.returncode == 0, done.stderr
    upload = pd.read_csv(out / "mturk_upload.csv", keep_default_na=False)
    assert upload["AssignmentId"].tolist() == ["A0", "A3"] and upload["Approve"].tolist() == ["x", "x"]
    assert "2 row(s) with a WorkerId or AssignmentId MTurk does not write are left out" in " ".join(done.stderr.split())


@pytest.mark.parametrize("protocol, gold", [  # one row per protocol with JSON records (Circa's gold: Part I)
    ("sotopia", {"goal": 7}),
    ("cmv_tom", {"persuasiveness": "Yes", "beliefs": "No"}),
    ("dialogue", {"appropriateness": 5, "human_likeness": 2}),
    ("health", {"willingness_to_continue": 8.5}),
])
def test_gold_answers_are_checked_and_kept_out_of_sight(reg, tmp_path, protocol, gold):
    """A record's `gold` ends in the task's meta (annotators never see it) and `status` finds it."""
    from evalstudio import importers
    from evalstudio.tasks.scanning import iter_tasks, split_task

    from .conftest import example_files

    project = reg.entry(protocol)
    source = next(p for p in example_files(protocol) if p.suffix == ".jsonl")
    first = json.loads(source.read_text(encoding="utf-8").splitlines()[0])
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps({**first, "gold": gold}) + "\n", encoding="utf-8")
    out = list(iter_tasks(project, importers.get(project.importer), [path]))
    assert out and all(isinstance(o, tuple) for o in out), out
    tasks = []
    for i, (_, data) in enumerate(out):
        task = split_task(project, data)
        assert "gold" not in task["data"] and task["meta"]["gold"] == gold
        tasks.append({"id": i, **task})
    found = study.gold_answers(tasks, project)
    assert sorted(found[["criterion", "gold"]].drop_duplicates().values.tolist()) == sorted(map(list, gold.items()))


def test_annotations_beyond_a_participants_quota_are_left_out_of_the_analysis(dialogue):
    """Label Studio cannot stop a participant at a quota: the analysis counts each participant's first `quota`
    submitted annotations (surplus repeats do not count) and says how many it left out."""
    from evalstudio.exporters.analyses.analysis import exclusions

    frame = annotation_frame(make_tasks(dialogue), dialogue)
    kept, notes = exclusions(frame, quotas={"dialogue": 20})
    done = kept.drop_duplicates("annotation_id").groupby("annotator")["task_id"].apply(sorted)
    assert done[email("w1")] == list(range(1, 21))  # the first 20 of 55 (ids grow with submission)
    assert len(done[email("w2")]) == 20 and len(done[email("w3")]) == 12
    assert email("w4") not in done  # all 10 of w4's were surplus: not counted, not kept
    assert any("35 annotation(s) by 1 participant(s) beyond the per-participant quota" in n for n in notes)
    untouched, _ = exclusions(frame, quotas={"dialogue": 55})
    assert untouched.drop_duplicates("annotation_id")["annotator"].value_counts()[email("w1")] == 55


def test_a_quota_with_only_skipped_annotations_leaves_nothing_out(dialogue):
    """Found by the report fuzz target (long profile): every annotation cancelled made the quota rule compare an
    empty text column with numbers."""
    from evalstudio.exporters.analyses.analysis import exclusions

    frame = annotation_frame(make_tasks(dialogue), dialogue).assign(cancelled=True)
    kept, notes = exclusions(frame, quotas={"dialogue": 20})
    assert len(kept) == (~frame["surplus"]).sum() and not any("quota" in n for n in notes)


@pytest.mark.parametrize("rate, warned", [(0.1, False), (0.2, True)])
def test_status_checks_that_the_pool_holds_the_gold_rate(dialogue, rate, warned):
    """6 of 60 tasks are gold: uniform sampling gives each participant about 10% gold items."""
    tasks = make_tasks(dialogue)
    part = dialogue.model_copy(update={"crowd": dialogue.crowd.model_copy(update={"gold_rate": rate}), "order": "random"})
    warnings = study.gold_rate_warnings([part], [tasks])
    assert bool(warnings) == warned
    if warned:
        assert warnings == ["dialogue: 6 of 60 tasks (10%) are gold items, crowd.gold_rate asks for 20%: import at "
                            "least 6 more (or lower gold_rate)"]
    sequential = part.model_copy(update={"order": "sequential"})
    assert any("only with order: random" in w for w in study.gold_rate_warnings([sequential], [tasks]))


@pytest.mark.parametrize("protocol", ["sotopia", "cmv", "circa", "dialogue", "health"])
def test_status_right_after_import_with_no_annotation_yet(reg, protocol):
    """Every study's status before anyone has answered (Circa's two parts once crashed on the empty frame)."""
    from evalstudio.operations.reading import study_tables

    parts = reg.parts(protocol)
    per_part = [[{"id": 10 * i + t, "data": {}, "meta": {}, "annotations": []} for t in range(3)]
                for i, _ in enumerate(parts)]
    frames = [annotation_frame(tasks, part, {}) for tasks, part in zip(per_part, parts)]
    crowd, table, coverage, remaining, annotations = study_tables(parts, per_part, frames)
    assert table.empty and annotations.empty
    assert remaining == sum(3 * part.annotators_per_task for part in parts)
    assert all(dict(zip(c["annotations"], c["tasks"]))[0] == 3 == c["tasks"].sum() for c in coverage.values())


def test_participants_add_reports_a_cell_over_the_csv_limit(tmp_path):
    from evalstudio.base.errors import InvalidInput
    from evalstudio.crowd import participants

    export = tmp_path / "prolific_export.csv"
    export.write_text("participant_id,status\n" + "5f" * 12 + ",APPROVED\n" + '"' + "y" * 200_000 + '\n",x\n',
                      encoding="utf-8")
    with pytest.raises(InvalidInput) as error:
        participants.read_ids([str(export)])
    assert f"{export}:3: a cell is longer than 131,072 characters" in str(error.value)  # where the cell starts


def _unordered(parts):
    """The CMV parts without their order (cmv_tom's crowd.after removed)."""
    return [p.model_copy(update={"crowd": p.crowd.model_copy(update={"after": None})}) if p.crowd else p for p in parts]


@pytest.mark.parametrize("order, projects, warned", [
    # issue 53: the blind cmv_threads comes first; a delta thread met again in cmv_tom is the design
    ("ordered", ["cmv_threads", "cmv_tom"], False),
    ("ordered", ["cmv_tom", "cmv_threads"], False),  # (which came first is order_warnings' concern)
    ("unordered", ["cmv_threads", "cmv_tom"], True),
    ("ordered", ["cmv_threads"], False),
])
def test_an_item_met_in_two_parts_is_flagged_only_where_no_order_puts_one_first(reg, order, projects, warned):
    from evalstudio.protocols import part_order

    parts = reg.parts("cmv")
    assert [p.entry for p in parts] == ["cmv_threads", "cmv_tom"]  # the study's order: the blind part first
    assert part_order.earlier_entries(parts, "cmv_tom") == {"cmv_threads"}
    if order == "unordered":
        parts = _unordered(parts)
    ids = {"cmv_threads": 1, "cmv_tom": 2}
    per_part = [[{"id": ids[p.name], "data": {"item_id": "thread-7"}}] for p in parts]
    annotations = pd.DataFrame({"annotator": ["a"] * len(projects), "project": projects,
                                "task_id": [ids[p] for p in projects], "cancelled": [False] * len(projects)})
    warnings = study.shared_item_warnings(annotations, parts, per_part)
    assert bool(warnings) == warned, warnings
    if warned:
        assert warnings["a"].startswith("answered 1 item(s) in two projects of the study")


@pytest.mark.parametrize("project, gold_label, counted", [
    ("circa_part1", "Yes", True),  # a control question: its gold label is an answer of the criterion
    ("circa_part2_list1", "Yes", False),  # Part II knows the gold label too, but rates an explanation 1-5
])
def test_only_answers_of_the_criterion_are_gold(reg, project, gold_label, counted):
    """Circa Part II's tasks carry is_control and the gold label (for the faithfulness analysis); taken as gold
    answers of its 1-5 rating, every Part II answer was 'wrong', and participants who did Part II failed the
    attention checks (found by `publish`'s datasheet, issue 54)."""
    task = {"id": 1, "data": {}, "meta": {"is_control": True, "gold_label": gold_label}}
    assert len(study.gold_answers([task], reg.get(project))) == int(counted)


@pytest.mark.parametrize("quotas, study_quota", [
    ({"cmv_threads": 30, "cmv_tom": 30}, 60),  # one participant does both parts: 60 tasks is not over quota
    ({"cmv_threads": 30, "cmv_tom": None}, None),  # a part without a quota: the study has none
    ({"cmv_threads": "all", "cmv_tom": 30}, "all"),
])
def test_a_study_s_quota_is_the_sum_of_its_parts(reg, quotas, study_quota):
    parts = [p.model_copy(update={"crowd": Crowd(per_participant=quotas[p.name], **(
        {"after": p.crowd.after} if p.crowd and p.crowd.after else {}))}) for p in reg.parts("cmv")]
    assert study.study_crowd(parts).per_participant == study_quota
