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

from ..tables.tidy import ANNOTATION_COLUMNS

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


BATCH_COLUMNS = {"WorkerId", "AssignmentId", "AssignmentStatus", "WorkTimeInSeconds", "Reward"}


def batch_facts(frame: pd.DataFrame) -> dict | None:
    """What an MTurk batch results file says of how its study ran (None for any other table): assignments by
    status, the reward per assignment, the time workers spent (MTurk's WorkTimeInSeconds: from accepting the HIT
    to submitting it), and each assignment's seconds by its row. Rejected assignments are not counted (`analyze`
    leaves them out too)."""
    if not BATCH_COLUMNS <= set(frame.columns):
        return None
    status = frame["AssignmentStatus"].astype(str).str.strip().str.lower()
    kept = frame[status != "rejected"]
    seconds = pd.to_numeric(kept["WorkTimeInSeconds"], errors="coerce")
    rewards = kept["Reward"].astype(str).str.strip()
    amounts = pd.to_numeric(rewards.str.replace(r"^\$", "", regex=True), errors="coerce")
    if amounts.isna().any() or not rewards.str.startswith("$").all():
        bad = rewards[amounts.isna() | ~rewards.str.startswith("$")].iloc[0]
        raise BadInput(f"Reward: {bad!r} is not an amount in dollars as MTurk writes it ($0.50)")
    limits = pd.to_numeric(frame.get("AssignmentDurationInSeconds", pd.Series(dtype=str)), errors="coerce").dropna()
    return {"time_limit": ", ".join(f"{v:g} s" for v in sorted(set(limits))) or None, "assignments": len(kept), "rejected": int((status == "rejected").sum()),
            "approved": int((status.loc[kept.index] == "approved").sum()), "reward": float(amounts.sum()),
            "rewards": sorted(set(amounts.round(2))), "hours": float(seconds.sum()) / 3600,
            "median_seconds": float(seconds.median()) if seconds.notna().any() else None,
            "seconds": seconds, "ids": sorted(set(frame["WorkerId"].astype(str)) | set(frame["AssignmentId"].astype(str)))}
