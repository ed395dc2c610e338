"""A study's front matter as the ledger recorded it (projects.yaml crowd: consent, practice, background,
exit_survey; served by evalstudio/gateway/front.py): where each participant is, their background answers as a table
of its own (never beside the ratings), and what a publication may say of them (counts, never a participant's row)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd

from evalstudio.protocols.front_matter import PREFER_NOT, practice_items

STAGES = ("consent", "declined", "practice", "screened_out", "background", "working")


def declaring(parts):
    """The study's project that declares its front matter (None: the study has none)."""
    return next((p for p in parts if p.crowd and p.crowd.consent), None)


def stage(steps: dict, practice: int, min_correct: int | None, background: bool) -> str:
    """Where a participant with these recorded `steps` (step -> a record with .outcome) is: consent, declined,
    practice, screened_out, background or working (the tasks; then the exit survey), for a study of `practice`
    items, its `min_correct` and whether it asks background questions."""
    consent = steps.get("consent")
    if consent is None:
        return "consent"
    if consent.outcome != "given":
        return "declined"
    answered = [steps.get(f"practice:{n}") for n in range(1, practice + 1)]
    if any(a is None for a in answered):
        return "practice"
    if min_correct is not None and sum(a.outcome == "correct" for a in answered) < min_correct:
        return "screened_out"
    if background and "background" not in steps:
        return "background"
    return "working"


def _by_participant(book) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for step in book.all_steps():
        out.setdefault(step.participant, {})[step.step] = step
    return out


def where_each(book, project) -> pd.DataFrame:
    """One row per participant who began the front matter: participant, step (consent, declined, practice,
    screened_out, background, working or surveyed), consented (server time, UTC), practice_correct,
    practice_answered."""
    crowd = project.crowd
    n = len(practice_items(project))
    names = {a.lower(): a for a in book.accounts()}
    rows = []
    for who, steps in _by_participant(book).items():
        now = stage(steps, n, crowd.practice.min_correct if crowd.practice else None, bool(crowd.background))
        if now == "working" and "exit" in steps:
            now = "surveyed"
        consent = steps.get("consent")
        answered = [s for k, s in steps.items() if k.startswith("practice:")]
        rows.append({"participant": names.get(who, who), "step": now,
                     "consented": pd.Timestamp(consent.at, unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M:%S UTC")
                     if consent and consent.outcome == "given" else None,
                     "practice_correct": sum(s.outcome == "correct" for s in answered),
                     "practice_answered": len(answered)})
    return pd.DataFrame(rows, columns=["participant", "step", "consented", "practice_correct", "practice_answered"])


def background_frame(book, project) -> pd.DataFrame:
    """The background and exit-survey answers, one row per participant (`participant`: their id as given,
    `annotator`: as the annotations name them; exit questions as exit.NAME), apart from the ratings: a participant
    who skipped a question has it empty."""
    crowd = project.crowd
    accounts = {a.lower(): account for a, account in book.accounts().items()}
    columns = ["participant", "annotator", *[q.name for q in crowd.background], *[f"exit.{q.name}" for q in crowd.exit_survey]]
    rows = []
    for who, steps in _by_participant(book).items():
        if "background" not in steps and "exit" not in steps:
            continue
        account = accounts.get(who)  # annotator: as the annotations name the participant (their account's e-mail)
        row = {"participant": account.participant_id if account else who, "annotator": account.email if account else None}
        for key, prefix in (("background", ""), ("exit", "exit.")):
            if key in steps:
                row.update({f"{prefix}{k}": v for k, v in json.loads(steps[key].answer).items()})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def front_facts(book, project, base: Path | None = None) -> dict:
    """What a publication says of the front matter: the consent wording and how it was given, counts of consent,
    the practice design and pass rate, and each background question's answers as counts (a number question: how
    many answered, the median and the range of the middle half; free text: how many answered). Never a row."""
    from evalstudio.protocols.front_matter import consent_text

    crowd = project.crowd
    table = where_each(book, project)
    decided = table[table["step"] != "consent"]
    facts = {"consent": consent_text(crowd.consent, base or project.base_dir), "statements": crowd.consent.statements,
             "consented": int(decided["step"].ne("declined").sum()), "declined": int(decided["step"].eq("declined").sum())}
    items = practice_items(project)
    if items:
        through = decided[~decided["step"].isin(["declined", "practice"])]
        passed = int(through["step"].ne("screened_out").sum())
        facts["practice"] = {"items": len(items), "min_correct": crowd.practice.min_correct,
                             "finished": len(through), "passed": passed,
                             "pass_rate": passed / len(through) if len(through) else None}
    answers = background_frame(book, project)
    facts["background"] = []
    for question in crowd.background:
        given = [v for v in answers.get(question.name, pd.Series(dtype=object)).tolist()
                 if v is not None and not (isinstance(v, float) and pd.isna(v))]
        entry = {"name": question.name, "text": question.text, "type": question.type, "answered": len(given),
                 "prefer_not_to_say": sum(v == PREFER_NOT for v in given) if question.prefer_not_to_say else None}
        if question.type == "choice":
            counts = Counter(given)
            entry["counts"] = {option: counts.get(option, 0) for option in question.options}
        elif question.type == "number":
            numbers = pd.Series([float(v) for v in given if v != PREFER_NOT], dtype=float)
            entry["numbers"] = len(numbers)  # (the answers "prefer not to say" give no number)
            if len(numbers):
                entry["median"] = float(numbers.median())
                entry["quartiles"] = [float(numbers.quantile(0.25)), float(numbers.quantile(0.75))]
        facts["background"].append(entry)
    facts["participants_with_background"] = len(answers)
    return facts
