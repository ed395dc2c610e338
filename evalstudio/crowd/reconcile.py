"""What a read of Label Studio holds of a study's ledger, compared after the read: the ledger's answers that are not
in it (not written yet), those it holds in an earlier version (a change not written yet), and participants with more
than one annotation on a task (an answer written twice). Pure functions of the ledger's answers and the tasks read;
the commands say the result (status, export, report) and leave out the annotations that are not the ledger's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

# an annotation's condition as the study's ledger recorded it (shown with the prediction or not), put into the tasks
# a command read live (with_conditions); exporters.tables.tidy reads it before Label Studio's parent prediction
CONDITION = "evalstudio_from_prediction"


def user_of(annotation: dict) -> int | None:
    """The author of an annotation as Label Studio gives it (a user id, or an object with an `id`)."""
    value = annotation.get("completed_by")
    value = value.get("id") if isinstance(value, dict) else value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class Shortfall:
    """What the tasks read lack of the ledger's answers, and the annotations they hold twice."""
    missing: list[tuple[str, int]] = field(default_factory=list)  # (participant, task id): no annotation of theirs
    older: list[tuple[str, int]] = field(default_factory=list)  # (participant, task id): an earlier version
    twice: list[tuple[str, int, list[int]]] = field(default_factory=list)  # (participant, task, annotation ids)
    answers: int = 0  # the ledger's answers compared

    def lines(self) -> list[str]:
        """What the output lacks, said to the operator (empty: it holds every answer as the ledger has it)."""
        out = []
        if self.missing:
            out.append(f"what follows lacks {len(self.missing)} of the {self.answers} answer(s) the gateway "
                       f"acknowledged (Label Studio does not hold them yet: {_some(self.missing)}); the gateway writes "
                       "them while it runs, start it again if it is stopped, then run this again")
        if self.older:
            out.append(f"what follows holds {len(self.older)} answer(s) in an earlier version than the participant's "
                       f"latest (the change is not in Label Studio yet: {_some(self.older)})")
        for who, task, ids in self.twice:
            out.append(f"participant {who} has {len(ids)} annotations on task {task} in Label Studio (ids "
                       f"{', '.join(map(str, ids))}): an answer written twice; only the ledger's is counted")
        return out


def _some(pairs: list[tuple[str, int]]) -> str:
    shown = ", ".join(f"{who} on task {task}" for who, task in pairs[:5])
    return shown + (f" and {len(pairs) - 5} more" if len(pairs) > 5 else "")


def compare(answers, users: dict[str, int | None], tasks: list[dict]) -> Shortfall:
    """The ledger's `answers` (ledger.Ref, answered ones; their parts' tasks were read) against the `tasks` read
    (dicts with their annotations, as an export has them). `users`: participant key -> Label Studio user id."""
    held: dict[tuple[int, int], list[dict]] = {}
    for task in tasks:
        for annotation in task.get("annotations") or []:
            user = user_of(annotation)
            if user is not None and not annotation.get("was_cancelled"):
                held.setdefault((int(task["id"]), user), []).append(annotation)
    found = Shortfall()
    read = {int(t["id"]) for t in tasks}
    for ref in answers:
        if ref.answered is None or ref.result is None or ref.task_id not in read:
            continue
        found.answers += 1
        user = users.get(ref.participant)
        theirs = held.get((ref.task_id, user), []) if user is not None else []
        if not theirs:
            found.missing.append((ref.participant, ref.task_id))
            continue
        mine = next((a for a in theirs if a.get("id") == ref.annotation_id), theirs[0])
        if mine.get("result") != json.loads(ref.result):
            found.older.append((ref.participant, ref.task_id))
        if len(theirs) > 1:
            found.twice.append((ref.participant, ref.task_id, sorted(int(a["id"]) for a in theirs)))
    return found


def surplus_ids(answers, users: dict[str, int | None], tasks: list[dict]) -> set[int]:
    """Annotation ids that are not the ledger's answer: another annotation of the same participant on a task whose
    answer the ledger holds as a known annotation (written twice). Left out of what the commands count."""
    ledger_ids = {(r.task_id, users.get(r.participant)): r.annotation_id for r in answers
                  if r.answered is not None and r.annotation_id is not None}
    out = set()
    for task in tasks:
        for annotation in task.get("annotations") or []:
            kept = ledger_ids.get((int(task["id"]), user_of(annotation)))
            if kept is not None and annotation.get("id") != kept:
                out.add(int(annotation["id"]))
    return out


def with_conditions(tasks: list[dict], conditions: dict[int, bool]) -> list[dict]:
    """`tasks` with each annotation the ledger knows carrying its condition (CONDITION): whether the gateway showed
    the answer's task with the prediction. Label Studio's own record, the annotation's parent prediction, is lost
    when the prediction is deleted (the judge run again) before or after the answer was written."""
    if not conditions:
        return tasks
    return [{**t, "annotations": [{**a, CONDITION: conditions[a["id"]]} if a.get("id") in conditions else a
                                  for a in t.get("annotations") or []]} for t in tasks]
