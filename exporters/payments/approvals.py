"""Approval files in the formats the crowd platforms accept for bulk upload.

prolific  prolific_approve.txt   the participant ids to approve, one per line ("Bulk approve" takes the list)
          prolific_bonus.csv     `participant_id,amount` lines, no header ("Bulk bonus payment" takes them)
          prolific_reject.csv    participant_id, reason: rejections are made one by one on Prolific, with a reason
mturk     mturk_upload.csv       with --mturk-results: the batch's results file with its Approve column set to "x"
                                 or its Reject column to the reason (Manage -> Results -> Upload CSV); without it,
                                 WorkerId, Approve, Reject
          mturk_bonus.csv        WorkerId, AssignmentId (when known), BonusAmount, Reason, for `aws mturk send-bonus`
always    approvals.csv          every participant: decision, reason, bonus, tasks done
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from evalstudio.base.errors import BadInput, printable
from evalstudio.base.files import write_output

from ..tables.files import write_csv


def _amount(value) -> str:
    return f"{float(value):.2f}"


# What the platform files take as a participant id: letters, digits, "_" and "-", starting with a letter or digit
# (Prolific ids are 24 hex digits, MTurk WorkerIds capitals and digits). Anything else (an e-mail address someone
# signed up with, a cell starting with "=") is left out of the platform files and named, never changed: a changed
# id would approve or pay no one, or someone else.
PLATFORM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
ASSIGNMENT_ID = re.compile(r"[A-Za-z0-9]{1,64}")  # MTurk's AssignmentIds: capitals and digits
def not_platform_ids(decisions: pd.DataFrame) -> list[str]:
    """The participants whose id the platform files cannot take as it is."""
    return [str(p) for p in decisions["participant"] if not PLATFORM_ID.fullmatch(str(p))]


def write_approvals(decisions: pd.DataFrame, platform: str, folder: Path, mturk_results: Path | None = None) -> list[Path]:
    """The approval files (approvals.csv with every participant; the platform's files with those whose id is a
    platform id, see `not_platform_ids`)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "approvals.csv"]
    write_csv(decisions.assign(**{c: [printable(str(v)) for v in decisions[c]] for c in ("participant", "annotator")
                                  if c in decisions}), written[0])
    decisions = decisions.loc[[bool(PLATFORM_ID.fullmatch(str(p))) for p in decisions["participant"]]]  # loc: a
    # boolean list, also when empty (a plain [] would select no columns)
    approve = decisions[decisions["decision"] == "approve"]
    reject = decisions[decisions["decision"] == "reject"]
    paid = decisions[(decisions["bonus"] > 0) & decisions["bonus"].notna()]
    if platform == "prolific":
        path = folder / "prolific_approve.txt"
        write_output(path, "".join(f"{p}\n" for p in approve["participant"]))
        bonus = folder / "prolific_bonus.csv"
        write_output(bonus, "".join(f"{p},{_amount(a)}\n" for p, a in zip(paid["participant"], paid["bonus"])))
        rejected = folder / "prolific_reject.csv"
        write_csv(reject[["participant", "reason"]].rename(columns={"participant": "participant_id"}), rejected)
        return written + [path, bonus, rejected]
    if platform != "mturk":
        raise BadInput(f"--platform must be prolific or mturk, got {platform!r}")
    assignments: dict[str, tuple[str, str]] = {}  # lower-case id -> (WorkerId as MTurk spells it, an AssignmentId)
    upload = folder / "mturk_upload.csv"
    if mturk_results is not None:
        assignments = _fill_mturk_results(mturk_results, decisions, upload)
    else:
        write_csv(pd.DataFrame({"WorkerId": decisions["participant"],
                                "Approve": ["x" if d == "approve" else "" for d in decisions["decision"]],
                                "Reject": [r if d == "reject" else "" for d, r in zip(decisions["decision"], decisions["reason"])]}),
                  upload)
    bonus = folder / "mturk_bonus.csv"
    known = [assignments.get(str(w).lower(), (w, "")) for w in paid["participant"]]
    write_csv(pd.DataFrame({"WorkerId": [k[0] for k in known], "AssignmentId": [k[1] for k in known],
                            "BonusAmount": [_amount(a) for a in paid["bonus"]],
                            "Reason": "bonus as announced in the HIT instructions"}), bonus)
    return written + [upload, bonus]


def _fill_mturk_results(path: Path, decisions: pd.DataFrame, out: Path) -> dict[str, tuple[str, str]]:
    """Copy MTurk's batch results file with Approve/Reject filled per WorkerId (ids compared without case: account
    e-mails are lower case); returns lower-case WorkerId -> (WorkerId, an AssignmentId)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise BadInput(f"{path}: cannot read MTurk's batch results ({type(e).__name__})") from None
    columns = list(rows[0]) if rows else []
    missing = [c for c in ("WorkerId", "AssignmentId") if c not in columns]
    if missing:
        raise BadInput(f"{path}: missing MTurk column(s): {', '.join(missing)}")
    for c in ("Approve", "Reject"):
        if c not in columns:
            columns.append(c)
    by_worker = {p.lower(): (d, r) for p, d, r in zip(decisions["participant"], decisions["decision"], decisions["reason"])}
    assignments = {}
    # a row whose ids MTurk never writes (a cell starting with "=", control characters) would be rewritten by the
    # spreadsheet-safe CSV writer and then approve or reject nothing, or someone else: it is left out and named
    odd = [row for row in rows if not (PLATFORM_ID.fullmatch(str(row["WorkerId"]))
                                       and ASSIGNMENT_ID.fullmatch(str(row["AssignmentId"])))]
    rows = [row for row in rows if row not in odd]
    if odd:
        import logging

        logging.getLogger(__name__).warning(
            "%s: %d row(s) with a WorkerId or AssignmentId MTurk does not write are left out of %s (look at them by "
            "hand): %s", path, len(odd), out.name, ", ".join(printable(str(r["AssignmentId"]))[:40] for r in odd[:5]))
    for row in rows:
        decision, reason = by_worker.get(str(row["WorkerId"]).lower(), (None, ""))
        row["Approve"] = "x" if decision == "approve" else ""
        row["Reject"] = reason if decision == "reject" else ""
        assignments.setdefault(str(row["WorkerId"]).lower(), (row["WorkerId"], row["AssignmentId"]))
    write_csv(pd.DataFrame(rows, columns=columns), out)
    known = {str(r["WorkerId"]).lower() for r in rows}
    unknown = [p for p in decisions["participant"] if p.lower() not in known]
    if unknown:
        import logging

        logging.getLogger(__name__).warning("%d participant(s) have no assignment in %s (approve them by hand): %s",
                                            len(unknown), path, ", ".join(unknown[:10]))
    return assignments
