"""ESA's attention checks (issue 68 item 4; evalstudio/protocols/attention.py): copies of translations with a phrase
spoiled, made at import, shown as any task, which must score lower than their original; `status` and `approvals`
score them with the gold items and the analyses leave them out."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalstudio.protocols.attention import CHECK_FIELD, corrupt, phrase_words
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.scanning import iter_tasks, scan, split_task
from evalstudio.values.results import ID_FIELD, region

from .conftest import ROOT
from .test_cli import _projects_file

SAMPLE = ROOT / "examples" / "esa" / "ted_ende.jsonl"


# ESA's rule (Kocmi et al. 2024's campaigns, Appraise): a segment of up to 5 words gets 2 words spoiled, 6-8: 3,
# 9-15: 4, 16-20: 5, longer: 6
@pytest.mark.parametrize("words, spoiled", [(1, 2), (5, 2), (6, 3), (8, 3), (9, 4), (15, 4), (16, 5), (20, 5),
                                            (21, 6), (80, 6)])
def test_the_phrase_spoiled_is_longer_in_a_longer_segment(words, spoiled):
    assert phrase_words(words) == spoiled


TEXTS = ["Wir können auf der Erde stehen und in den Nachthimmel schauen und die Sterne mit unseren bloßen Augen sehen.",
         "Das ist gut.", "Eins zwei drei vier", "ein Wort", "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich"]


@pytest.mark.parametrize("how", ["replace", "drop"])
@pytest.mark.parametrize("text", TEXTS)
def test_a_spoiled_translation_differs_in_one_phrase_only(text, how):
    """The spoiled text keeps the original before `start` and after `end`; `replace` puts there as many words of
    another place of the text, `drop` removes them; the same task is spoiled the same way on every import; a text too
    short to spoil (replace: twice the phrase; drop: one word more) gives no check."""
    words = text.split(" ")
    k = phrase_words(len(words))
    made = corrupt(text, "esa-x:0123", how)
    if len(words) < (2 * k if how == "replace" else k + 1):
        assert made is None
        return
    new, start, end = made
    assert made == corrupt(text, "esa-x:0123", how)
    assert new != text and new[:start] == text[:start]
    tail = len(new) - end
    assert new[end:] == text[len(text) - tail:]
    if how == "drop":
        assert start == end and len(new.split(" ")) == len(words) - k
    else:
        inserted = new[start:end].split(" ")
        assert len(inserted) == k and len(new.split(" ")) == len(words)
        assert any(words[i:i + k] == inserted for i in range(len(words) - k + 1))  # words of this translation


def test_the_import_makes_checks_a_participant_cannot_tell_apart(reg):
    """Each check is a copy of an imported translation: the fields the gateway shows are the original's with the
    target spoiled (the same fields, nothing else), its id has the form of any task's, and what it is stays in its
    meta; a second import makes the same checks."""
    from evalstudio.gateway.checks import shown_data

    project = reg.get("esa")
    tasks = [d for _, d in iter_tasks(project, importer_for(project), [SAMPLE])]
    checks = [t for t in tasks if CHECK_FIELD in t]
    share = project.attention_checks.share
    assert 0 < len(checks) < 3 * share * (len(tasks) - len(checks)), len(checks)
    assert checks == [t for _, t in iter_tasks(project, importer_for(project), [SAMPLE]) if CHECK_FIELD in t]
    assert scan(project, importer_for(project), [SAMPLE]).checks == len(checks)  # (validate says it)
    by_id = {t[ID_FIELD]: t for t in tasks}
    ids = re.compile(r"esa-[^:]+:[0-9a-f]{16}")
    for check in checks:
        original = by_id[check[CHECK_FIELD]["of"]]
        assert ids.fullmatch(check[ID_FIELD]) and ids.fullmatch(original[ID_FIELD])
        seen, was = (shown_data(split_task(project, t)["data"], project.data_fields()) for t in (check, original))
        assert seen.keys() == was.keys() and seen["target"] != was["target"]
        assert {k: v for k, v in seen.items() if k != "target"} == {k: v for k, v in was.items() if k != "target"}
        hidden = split_task(project, check)["meta"]
        assert hidden["gold"] == {"score": {"below": original[ID_FIELD]}} and CHECK_FIELD in hidden
        assert CHECK_FIELD not in split_task(project, check)["data"]


BEHAVIOUR = [  # participant, their score of the originals, of the checks -> checks scored, share right, decision
    ("careful", 70, 30, "approve"),
    ("inattentive", 60, 60, "reject"),  # the same score as the original: not lower
    ("checks only", None, 10, "approve"),  # never met an original: no check can be scored, no grounds to reject
]


def test_status_and_approvals_flag_who_misses_the_checks(reg, tmp_path):
    """An export of the ESA sample with its checks, answered by participants who score the spoiled copies lower, the
    same, or only the copies: `status` gives each the checks scored and the share right (and flags the one below
    crowd.min_gold_accuracy), `approvals` rejects that one, and the analysis reads no check."""
    from evalstudio.operations import status as study_status
    from evalstudio.operations.reading import label_studio_ratings

    project = reg.get("esa")
    li = project.interface
    tasks = [{"id": n, **split_task(project, t), "annotations": []}
             for n, (_, t) in enumerate(iter_tasks(project, importer_for(project), [SAMPLE]), start=1)]
    checks = [t["id"] for t in tasks if CHECK_FIELD in t["meta"]]
    next_id = 1
    for who, original, check, _ in BEHAVIOUR:
        for task in tasks:
            score = check if task["id"] in checks else original
            if score is None:
                continue
            task["annotations"].append({"id": next_id, "completed_by": {"id": 100 + next_id, "email": f"{who.replace(' ', '_')}@participants.invalid"},
                                        "result": [region(li, "score", score)], "lead_time": 30.0,
                                        "was_cancelled": False, "created_at": f"2026-11-20T10:00:{next_id % 60:02d}Z"})
            next_id += 1
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks), encoding="utf-8")
    projects = _projects_file(tmp_path, lambda raw: raw["projects"]["esa"].update(
        crowd={"min_gold_accuracy": 0.5, "platform": "prolific"}))
    seen = study_status.look("esa", export, None, tmp_path / "participants", tmp_path / "status", False, projects)
    table = seen.table.set_index("participant")
    decided, _, _ = study_status.approve("esa", tmp_path / "approvals", "prolific", None, export, None,
                                         tmp_path / "participants", 5, projects)
    decided = decided.set_index("participant")
    for who, original, check, decision in BEHAVIOUR:
        pid = who.replace(" ", "_")
        scored = 0 if original is None else len(checks)
        given = table.loc[pid, "gold_items"]
        assert (0 if given != given else given) == scored, table.loc[pid].to_dict()  # (NaN: none scored)
        if scored:
            assert table.loc[pid, "gold_accuracy"] == (1.0 if check < original else 0.0)
        assert ("failed gold" in table.loc[pid, "warnings"]) == (decision == "reject")
        unscored = f"{len(checks)} attention check(s) not scored (the participant did not answer their originals)"
        assert (unscored in table.loc[pid, "warnings"]) == (original is None), table.loc[pid, "warnings"]
        assert decided.loc[pid, "decision"] == decision, decided.loc[pid].to_dict()
    assert decided.loc["inattentive", "reason"].startswith("failed attention checks: 0% correct on")
    tidy, _, _ = label_studio_ratings("esa", projects, export)
    answering = min(sum(o is not None for _, o, _, _ in BEHAVIOUR), project.annotators_per_task)  # (others surplus)
    assert len(tidy) == answering * (len(tasks) - len(checks)), len(tidy)  # every original's score, no check's
    assert set(tidy["value"].astype(float)) == {70.0}


@given(st.text(alphabet=st.sampled_from("ab é\n\t "), max_size=60), st.sampled_from(["replace", "drop"]))
def test_any_text_is_spoiled_in_one_place_or_left_without_a_check(text, how):
    """Hostile input (empty, only spaces, runs of spaces, line breaks): no exception; a check is a text that keeps
    the original before `start` and after `end` and differs from it."""
    made = corrupt(text, "k", how)
    if made is None:
        return
    new, start, end = made
    assert new != text and new[:start] == text[:start] and 0 <= start <= end <= len(new)
    assert new[end:] == text[len(text) - (len(new) - end):]
