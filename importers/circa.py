"""Circa indirect answers: Part I control questions, and model interpretations with explanations for Part II.

Inputs (any mix, in one import):
  Part I questions  *.csv with context, question, answer, gold_label[, id] (no explanation column): the survey's
                    quality-control questions (document 002, "Part I: control questions"). Each becomes a circa_part1
                    task: the annotator sees context, question and answer, chooses an interpretation, and sees no
                    model output at all; the gold label stays in the task's meta.
  explanations      *.csv in the MTurk batch form  context, question, answer, explanation, interpretation
                    or the model output form  context, question, answer, explanation, prediction, target[, id,
                    judgements, goldstandard1]; each shown interpretation becomes a circa_part2 task (the model's
                    prediction and, when the model was wrong, the gold label). Nothing the annotator sees says which
                    it is, or whether it is correct; `shown_label_is` (in the task's meta) records it for the
                    faithfulness/plausibility analysis.
  *.tsv             the Circa release (id, context, question-X, canquestion-X, answer-Y, judgements, goldstandard1,
                    goldstandard2): gold labels joined onto the explanation items by (context, question, answer)

Conversations used as Part I questions or as examples in the survey instructions are excluded from the main survey
(document 002, "Excluded examples"): an explanation item with the question and answer of an instruction example, or
the conversation of a Part I question, gets no Part II task (a warning names it).
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

from evalstudio.base.errors import Problem
from evalstudio.values.sources import FieldError, one_of, read_table, require, stable_id

NAME = "circa"
# The record fields this importer reads; any other field is kept with the task as metadata (and reported once).
FIELDS = frozenset({"id", "context", "question", "answer", "explanation", "explanation_generated_by", "interpretation",
                    "prediction", "target", "gold_label", "goldstandard1", "goldstandard2", "judgements", "model"})
LABELS = ["Yes", "Yes, subject to some conditions", "No", "In the middle, neither yes nor no", "Other"]
# Circa's relaxed labels (goldstandard2) fold the uncertain labels into the five options.
RELAXED = {
    "Probably yes / sometimes yes": "Yes",
    "Probably no": "No",
    "I am not sure how X will interpret Y’s answer": "In the middle, neither yes nor no",
    "I am not sure how X will interpret Y's answer": "In the middle, neither yes nor no",
}
# The (question, answer) pairs of the survey's instruction examples (document 002): never survey items.
INSTRUCTION_EXAMPLES = {
    ("Do you eat red meat?", "I am a vegetarian."),
    ("Do you like movies with sad endings?", "I often watch them."),
    ("Are you up for a movie?", "Only to a comedy."),
    ("Will you have along commute?", "I'll be living very close to the job."),
    ("Are you excited to start a new job?", "I have mixed feelings."),
    ("Is a basement flat okay?", "I need to be above ground."),
    ("Are you allergic to seafood?", "Avoiding seafood is best for my health."),
    ("Got any plans?", "My schedule is open."),
    ("Are you a fan of bars?", "I'm in AA."),
    ("Are you in a support position?", "I'm a supervisor."),
    ("Is disk golf fun to you?", "I've never done it."),
    ("Are you extroverted?", "I don't know"),
    ("Do you still talk to our friend Katie?", "Remind me who she is"),
}
PART1, PART2 = "circa_part1", "circa_part2"
TSV_COLUMNS = ("id", "context", "question-X", "answer-Y", "judgements", "goldstandard1", "goldstandard2")
CSV_COLUMNS = ("context", "question", "answer", "explanation")
PART1_COLUMNS = ("context", "question", "answer", "gold_label")
log = logging.getLogger(__name__)


def prepare(paths: list[Path]):
    """Read gold labels from the TSV files; the CSV files are the items to import."""
    gold, problems = {}, []
    tsvs = [p for p in paths if p.suffix.lower() == ".tsv"]
    for path in tsvs:
        for line, row in read_table(path, "\t", TSV_COLUMNS):
            if isinstance(row, Problem):
                problems.append(row)
                continue
            key = (row["context"].strip(), row["question-X"].strip(), row["answer-Y"].strip())
            gold[key] = {
                "circa_id": row["id"],
                "judgements": row["judgements"],
                "goldstandard1": _na(row["goldstandard1"]),
                "gold_label": relaxed(_na(row["goldstandard2"])),
            }
    items = [p for p in paths if p.suffix.lower() != ".tsv"]
    if tsvs and not items:
        problems.append(Problem(str(tsvs[0]), None, None, "Circa TSV files only provide gold labels; pass an explanation "
                                "CSV or a Part I questions CSV too"))
    part1 = set()  # conversations of the Part I questions: not part of the main survey
    for path in items:
        if _is_part1(path):
            part1 |= {_conversation(row) for _, row in read_table(path, ",", PART1_COLUMNS) if isinstance(row, dict)}
    return {"gold": gold, "problems": problems, "part1": part1}, items


def _is_part1(path: Path) -> bool:
    """A Part I questions file: a gold_label column and no explanation column."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            header = [h.strip() for h in next(csv.reader(f), [])]
    except (OSError, UnicodeDecodeError, csv.Error):
        return False  # read() reports the problem
    return "gold_label" in header and "explanation" not in header


def read(path: Path):
    """Circa's CSV (part I questions or part II explanations) as numbered rows."""
    return read_table(path, ",", PART1_COLUMNS if _is_part1(path) else CSV_COLUMNS)


def _conversation(row: dict) -> tuple[str, str, str]:
    return (" ".join(row.get("context", "").split()).lower(), *_normal(row.get("question", ""), row.get("answer", "")))


def _part1_task(row: dict) -> list[dict]:
    question = {k: require(row, k).strip() for k in ("context", "question", "answer")}
    gold = one_of("gold_label", relaxed(_na(require(row, "gold_label"))), LABELS)
    if _normal(question["question"], question["answer"]) in _EXCLUDED:
        return []  # an instruction example: the survey shows it as an example, never as a question
    circa_id = (row.get("id") or "").strip()
    item_id = f"circa-{circa_id}" if circa_id else "circa-" + stable_id(*question.values())
    return [{"evalstudio_id": f"{item_id}:part1", "part": PART1, "item_id": item_id, "system": "control question",
             **question, "gold_label": gold, "circa_id": circa_id or None, "is_control": True}]


def convert(row: dict, project, context) -> list[dict]:
    """One Circa row as its task(s)."""
    if "explanation" not in row:
        return _part1_task(row)
    question = {k: require(row, k).strip() for k in ("context", "question", "answer")}
    explanation = require(row, "explanation", nonempty=False).strip()
    if not explanation:
        raise FieldError("explanation", "is empty; `evalstudio generate circa FILE --ml-url URL -o OUT` has the ML "
                         "backend write the missing explanations")
    joined = context["gold"].get((question["context"], question["question"], question["answer"]), {})
    gold = relaxed(_na(row.get("target") or row.get("goldstandard2") or "")) or joined.get("gold_label")
    if gold is not None:
        one_of("target", gold, LABELS)
    prediction = _na(row.get("prediction", "")) or None
    if prediction is not None:
        one_of("prediction", prediction, LABELS)
    if row.get("interpretation", "").strip():
        shown = [one_of("interpretation", row["interpretation"].strip(), LABELS)]
    elif prediction:
        shown = [prediction] + ([gold] if gold and gold != prediction else [])
    else:
        raise FieldError("interpretation", "missing: give an 'interpretation' column (MTurk batch) or 'prediction' (model output)")
    circa_id = (row.get("id") or "").strip() or joined.get("circa_id")
    item_id = f"circa-{circa_id}" if circa_id else "circa-" + stable_id(*question.values())
    if _normal(question["question"], question["answer"]) in _EXCLUDED:
        return []  # an instruction example: excluded from the survey
    if _conversation(question) in context.get("part1", ()):
        log.warning("circa: %s is a Part I question, so it is left out of Part II (the main survey)", item_id)
        return []
    common = {
        "item_id": item_id,
        "system": (row.get("model") or "").strip() or "model",
        **question,
        "prediction": prediction,
        "gold_label": gold,
        "goldstandard1": _na(row.get("goldstandard1", "")) or joined.get("goldstandard1"),
        "judgements": (row.get("judgements") or "").strip() or joined.get("judgements"),
        "circa_id": circa_id,
        "is_control": gold is not None,
        # an explanation written by `evalstudio generate` (the ML backend's LLM): which model wrote it
        "explanation_generated_by": (row.get("explanation_generated_by") or "").strip() or None,
    }
    tasks = []
    for label in shown:
        roles = [role for role, value in (("prediction", prediction), ("gold", gold)) if value == label]
        tasks.append({
            # the id does not show the interpretation, nor a code that repeats for one interpretation across items
            "evalstudio_id": f"{item_id}:part2:{stable_id(item_id, label)}",
            "part": PART2,
            **common,
            "explanation": explanation,
            "interpretation": label,
            "shown_label_is": roles or ["unknown"],
        })
    return tasks


def generation_input(row: dict) -> dict | None:
    """What the ML backend needs to write the explanation of an explanation item whose `explanation` cell is empty
    (projects.yaml `generate: explanation`), or None when the row has one. The explanation is for the row's
    interpretation (MTurk form) or the model's prediction (model output form)."""
    if "explanation" not in row:
        raise FieldError("explanation", "a Part I question has nothing to generate; import its file as it is")
    if (row.get("explanation") or "").strip():
        return None
    interpretation = (row.get("interpretation") or "").strip() or _na(row.get("prediction", ""))
    if not interpretation:
        raise FieldError("prediction", "an explanation is written for a given interpretation: fill 'interpretation' "
                         "or 'prediction'")
    one_of("interpretation", interpretation, LABELS)
    item = {k: require(row, k).strip() for k in ("context", "question", "answer")}
    return {**item, "interpretation": interpretation}


def with_generated(row: dict, output: dict, model_version: str) -> dict:
    """The row with a generated explanation and the model version that wrote it."""
    return {**row, "explanation": output["explanation"], "explanation_generated_by": model_version}


def write_records(rows: list[dict], path: Path) -> None:
    """CSV with every column of the input rows (the explanation CSV format `read` takes)."""
    from evalstudio.base.files import open_output

    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open_output(path) as f:
        writer = csv.DictWriter(f, columns, restval="")
        writer.writeheader()
        writer.writerows(rows)


def _normal(question: str, answer: str) -> tuple[str, str]:
    clean = lambda text: " ".join(text.replace("’", "'").strip(" \"“”").split()).lower()
    return clean(question), clean(answer)


_EXCLUDED = {_normal(q, a) for q, a in INSTRUCTION_EXAMPLES}


def relaxed(label: str | None) -> str | None:
    """A strict Circa label as its relaxed label (Louis et al. 2020)."""
    return RELAXED.get(label, label) if label else None


def _na(value: str) -> str | None:
    value = (value or "").strip()
    return None if value in ("", "NA") else value
