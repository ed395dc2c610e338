"""Amazon MTurk batch results (the CSV requesters download) -> the tidy annotation frame.

Rows are matched to evalstudio tasks by the `Input.<field>` columns whose field is also in the task data
(e.g. Input.context, Input.question, ...). Values such as "1 - very poor" are read as their leading number.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from evalstudio.base.errors import BadInput
from evalstudio.protocols.registry import Project
from evalstudio.readers.tables import read_table
from evalstudio.values.results import task_fields

from .tidy import ANNOTATION_COLUMNS

_LEADING_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")


def read_mturk_results(path: Path | str, project: Project, tasks: list[dict],
                       answers: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(annotations, unmatched rows). `answers` maps criterion -> answer column, e.g.
    {"explanation_quality": "Answer.explanation-quality.label"}. Rejected assignments are left out."""
    results, _ = read_table(Path(path))  # a long cell or a row longer than the header is reported at its line
    missing = [c for c in ["WorkerId", "AssignmentId", *answers.values()] if c not in results.columns]
    if missing:
        raise BadInput(f"{path}: missing MTurk column(s): {', '.join(missing)}")
    for criterion in answers:
        project.criteria.get(criterion) or _unknown(criterion, project)
    if "AssignmentStatus" in results:
        results = results[results["AssignmentStatus"] != "Rejected"]
    fields = [c.removeprefix("Input.") for c in results.columns
              if c.startswith("Input.") and tasks and c.removeprefix("Input.") in task_fields(tasks[0])]
    if not fields:
        raise BadInput(f"{path}: no Input.* column matches a task data field")
    index = {tuple(str(task_fields(t).get(f, "")).strip() for f in fields): t for t in tasks}
    keys = results[[f"Input.{f}" for f in fields]].apply(lambda r: tuple(v.strip() for v in r), axis=1)
    matched = keys.map(lambda k: k in index)
    rows = []
    for (_, row), key in zip(results[matched].iterrows(), keys[matched]):
        task = index[key]
        for criterion, column in answers.items():
            spec = project.criteria[criterion]
            value = row[column]
            if spec.is_numeric:
                number = _LEADING_NUMBER.match(value)
                value = float(number.group(1)) if number else float("nan")
            rows.append({"project": project.name, "task_id": task["id"], "item_id": task_fields(task).get("item_id"),
                         "system": task_fields(task).get("system"), "annotator": row["WorkerId"], "criterion": criterion,
                         "value": value, "annotation_id": row["AssignmentId"], "created_at": row.get("SubmitTime"),
                         "lead_time": pd.to_numeric(row.get("WorkTimeInSeconds"), errors="coerce"),
                         "cancelled": False, "agent": None, "rationale": None})
    return pd.DataFrame(rows, columns=ANNOTATION_COLUMNS), results[~matched]


def _unknown(criterion: str, project: Project):
    raise BadInput(f"unknown criterion '{criterion}' for {project.name}; valid: {', '.join(project.criteria)}")
