"""A study's status and approvals as the operator asks for them (`evalstudio status`, `evalstudio approvals`): the
study's state read live or from an export, participants who reached their quota closed, adaptive parts' progress,
and what changed since setup and import (tampering). Uses operations.reading, evalstudio.crowd (participants, ledger,
routing, study), evalstudio.tasks.integrity, evalstudio.labelstudio and exporters.payments.approvals."""

from __future__ import annotations

from pathlib import Path

from evalstudio.base.errors import BadInput
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import settings_from_env

from .reading import read_study, study_ledger, study_tables, write_status
from .waiting import WAIT_SECONDS


def study_state(protocol, projects, from_export, project_id, folder, wait: float = WAIT_SECONDS):
    """(parts, tasks of each part, crowd, participant table, per-part coverage, remaining annotations, annotations),
    read live or from an export."""
    _, parts, per_part, frames, _ = read_study(protocol, projects, from_export, project_id, folder, wait)
    return (parts, per_part, *study_tables(parts, per_part, frames, folder))


def close_finished(table, crowd, folder) -> list[str]:
    """Close the accounts (made by `participants add`) of participants who have done their quota."""
    from evalstudio.crowd import participants

    if not crowd.per_participant:
        raise BadInput("--close-finished: the study sets no quota (crowd.per_participant in projects.yaml)")
    target = folder or participants.DEFAULT_FOLDER
    ours = {a.email: a for a in participants.load_accounts(target).values() if a.password is not None}
    done = table[table["quota"].notna() & (table["tasks_done"] >= table["quota"]) & table["annotator"].isin(ours)]
    pending = [ours[e].participant_id for e in done["annotator"] if not ours[e].closed]
    if not pending:
        return []
    now, _ = participants.close(Client(settings_from_env()), pending, target)
    return now


def adaptive_lines(parts, per_part, folder) -> list[str]:
    """Adaptive parts (assignment:, stop_when:): the stopping target reached (when, at what cost) or how far."""
    from evalstudio.crowd import ledger, participants, routing

    if not any(routing.routing_of(p) or routing.pac_of(p) for p in parts):
        return []
    folder = Path(folder or participants.DEFAULT_FOLDER)
    book = ledger.open_ledger(folder) if _has_ledger(folder) else None
    return routing.progress_lines(parts, per_part, book)


def front_table(parts, folder):
    """Where each participant is in the study's front matter (consent, practice, background, working, surveyed),
    from the ledger; None when the study declares none or has no ledger yet."""
    from evalstudio.crowd import front_record, ledger, participants

    project = front_record.declaring(parts)
    folder = Path(folder or participants.DEFAULT_FOLDER)
    if project is None or not _has_ledger(folder):
        return None
    return front_record.where_each(ledger.open_ledger(folder), project)


def write_background(protocol, parts, output: Path, format: str, folder=None) -> tuple[Path, int] | None:
    """The study's background and exit-survey answers, one row per participant, into their own file beside the
    annotations (OUTPUT.background.FORMAT: never in the ratings' table): (path, rows), or None when the study
    declares no front matter or has no ledger yet."""
    from evalstudio.crowd import front_record, ledger

    from ..exporters.tables.files import write_table
    from .reading import study_ledger

    project = front_record.declaring(parts)
    folder = study_ledger(protocol, folder)
    if project is None or not _has_ledger(folder):
        return None
    frame = front_record.background_frame(ledger.open_ledger(folder), project)
    path = output.with_name(f"{output.stem}.background{output.suffix}")
    write_table(frame, path, format)
    return path, len(frame)


def _has_ledger(folder: Path) -> bool:
    """A study ledger is in the folder (its SQLite file, or the pointer to its PostgreSQL one)."""
    from evalstudio.crowd import ledger

    return (folder / ledger.FILE).exists() or (folder / ledger.POINTER).exists()


def front_matter_unread(protocol, parts, folder=None) -> str | None:
    """Why a study's front matter (consent, background, exit survey) is not exported: it declares one, but no
    ledger is in the participants folder given (or the default one); None when there is nothing to say."""
    from evalstudio.crowd import front_record

    from .reading import study_ledger

    where = study_ledger(protocol, folder)
    if front_record.declaring(parts) is None or _has_ledger(where):
        return None
    return (f"{protocol} has a front matter (crowd: consent, background, exit survey), but no study ledger is in "
            f"{where}: its participants' background and exit-survey answers are not in this export; give the "
            "folder of `participants add` and the gateway with --participants")


RESTORE = {
    "settings": "`evalstudio setup {study}` writes projects.yaml's settings back",
    "tasks": "the imported values are in your input files: export the project first (the task's annotations go "
             "with it), delete the changed task(s) in Label Studio and run the same `evalstudio import` again, "
             "which re-creates exactly the missing tasks",
    "annotations": "Label Studio Community keeps no earlier version of an annotation: leave these annotations out "
                   "of the analysis, or ask their authors to answer again",
}


def tampering(study_name, parts, per_part, from_export, project_id) -> tuple[list[str], list[str]]:
    """(findings, notes): what changed since setup and import made the study (`integrity`), each finding with how
    to restore it; notes say what could not be checked."""
    from evalstudio.tasks import integrity
    from evalstudio.values.results import ID_FIELD

    findings, notes = [], []
    client = Client(settings_from_env()) if from_export is None else None
    own = frozenset([client.own_user_id()]) if client is not None else frozenset()
    edits = [f"{part.name}: {e}" for part, tasks in zip(parts, per_part) for e in integrity.foreign_edits(tasks, own)]
    if edits:
        findings += edits + [f"restore: {RESTORE['annotations']}"]
    if from_export is not None:
        notes.append("project settings and tasks are checked against setup's and import's records on the live "
                     "server only (not in an export file)")
        return findings, notes
    settings, tasks_changed = [], []
    for part, tasks in zip(parts, per_part):
        pid = client.require_protocol(part, project_id) if project_id else client.require_project(part)
        drift = client.project_drift(part, pid)
        if drift:
            settings.append(f"{part.name}: Label Studio project {pid} has another {', '.join(drift)} than "
                            "projects.yaml gives")
        record = integrity.load_record(integrity.record_path(client.url, pid))
        if record is None:
            notes.append(f"{part.name}: no record of what `evalstudio import` put into project {pid} in "
                         f"{integrity.record_folder()} (import writes it where it runs): its tasks were not checked")
        else:
            tasks_changed += [f"{part.name}: {c}" for c in integrity.changed_tasks(tasks, record, ID_FIELD)]
    if settings:
        findings += settings + [f"restore: {RESTORE['settings'].format(study=study_name)}"]
    if tasks_changed:
        findings += tasks_changed + [f"restore: {RESTORE['tasks']}"]
    return findings, notes


class Status:
    """One look at a study for `evalstudio status`: its state, what was written and closed, what was found."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def look(protocol, from_export, project_id, participants_folder, output, close_finished_too, projects,
         wait=WAIT_SECONDS) -> Status:
    """The study's state read once (live or from an export), its status files written to `output` (whole or not at
    all), participants at their quota closed if asked, and what changed since setup and import."""
    participants_folder = study_ledger(protocol, participants_folder)  # this study's ledger in the folder
    parts, per_part, crowd, table, coverage, remaining, annotations = study_state(
        protocol, projects, from_export, project_id, participants_folder, wait)
    tampered, unchecked = tampering(protocol, parts, per_part, from_export, project_id)
    if output is not None:
        from evalstudio.base.files import staged_folder

        with staged_folder(output) as stage:  # written whole or not at all
            write_status(stage, protocol, crowd, table, coverage, remaining, annotations, tampered,
                         adaptive_lines(parts, per_part, participants_folder))
    closed = close_finished(table, crowd, participants_folder) if close_finished_too else []
    front = front_table(parts, participants_folder)
    return Status(parts=parts, per_part=per_part, crowd=crowd, table=table, coverage=coverage, remaining=remaining,
                  front=front,
                  annotations=annotations, tampered=tampered, unchecked=unchecked, closed=closed,
                  folder=participants_folder)


def approve(protocol, output: Path, platform, mturk_results, from_export, project_id, participants_folder, wait,
            projects):
    """(decisions, platform, files written): approve / reject / bonus per participant by the study's rules, written
    as the platform's bulk-upload files to `output` (whole or not at all)."""
    from evalstudio.crowd import study

    from ..exporters.payments.approvals import write_approvals

    participants_folder = study_ledger(protocol, participants_folder)
    parts, _, crowd, table, _, _, _ = study_state(protocol, projects, from_export, project_id, participants_folder,
                                                  wait)
    chosen = platform or crowd.platform
    if chosen not in ("prolific", "mturk"):
        raise BadInput(f"{protocol} names no crowd platform in projects.yaml: give --platform prolific or mturk")
    if output.exists() and not output.is_dir():
        raise BadInput(f"{output}: is a file; -o names the folder for the approval files")
    decided = study.decisions(table, crowd)
    from evalstudio.base.files import staged_folder

    with staged_folder(output) as stage:  # written whole or not at all
        written = [output / p.name for p in write_approvals(decided, chosen, stage, mturk_results)]
    return decided, chosen, written
