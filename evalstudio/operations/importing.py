"""A study's import (`evalstudio import`): every part of the study checked (and each valid task spooled) before
anything is sent, invalid records left out and written apart when asked, the study's placement checked, each part
imported with a progress bar, and what each import did as the lines the command prints. Uses evalstudio.tasks
(scanning, placement, lists, integrity, importing), evalstudio.labelstudio, evalstudio.protocols and
operations.reading."""

from __future__ import annotations

from pathlib import Path

from evalstudio.base.errors import InvalidInput
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import settings_from_env
from evalstudio.protocols.judges import unassisted_note
from evalstudio.protocols.mapping import importer_for
from evalstudio.protocols.registry import load as load_registry
from evalstudio.tasks import lists
from evalstudio.tasks.importing import check_in_flight
from evalstudio.tasks.placement import placement_problems
from evalstudio.tasks.scanning import scan

from .consoles import err
from .reading import import_with_progress


def import_study(protocol: str, files: list[Path], batch_size: int, in_flight: int, skip_invalid: bool,
                 rejected: Path, projects: Path | None) -> list[tuple]:
    """(part, its ImportReport, its scan) for each part of the protocol's study, once FILES are checked and
    imported (nothing is imported when a record is invalid, unless skip_invalid: then the rejected records go to
    `rejected`); the spooled tasks are removed, imported or not."""
    scans = []
    try:
        reg = load_registry(projects)
        parts = reg.parts(protocol)
        for part in parts:
            check_in_flight(part, in_flight)
        for part in parts:  # each valid task also spooled as it will be sent: the import does not convert it again
            scans.append(scan(part, importer_for(part), files, spool=True))
        _leave_out_invalid(scans, skip_invalid, rejected)
        client = Client(settings_from_env())
        _check_placement(client, reg, parts, scans)
        reports = [import_with_progress(project, files, client, batch_size, skip_invalid, checked, in_flight)
                   for project, checked in zip(parts, scans)]
    finally:
        for checked in scans:
            checked.discard()  # the spooled tasks (private temporary files), imported or not
    return list(zip(parts, reports, scans))


def _leave_out_invalid(scans, skip_invalid: bool, rejected: Path) -> None:
    """InvalidInput for the scans' problems, unless skip_invalid and every problem is a record's: then those
    records are written to `rejected` and said on stderr."""
    problems = list(dict.fromkeys(pr for result in scans for pr in result.problems))
    if problems and skip_invalid:
        from evalstudio.base.files import check_output_file  # pandas: loaded only when needed

        check_output_file(rejected)
        unskippable = [pr for result in scans for pr in result.design] + [pr for pr in problems if not pr.line]
        if unskippable:  # a missing or empty file, or a broken study design: no record to leave out
            raise InvalidInput(list(dict.fromkeys(unskippable)))
        count = write_rejected(problems, rejected)
        err.print(f"{count} invalid record(s) left out; they and their problems are in {rejected}", highlight=False)
    elif problems:
        raise InvalidInput(problems)


def _check_placement(client, reg, parts, scans) -> None:
    """InvalidInput when a task would land in another project of the study than the one holding it (nothing is
    imported; the tasks to delete are marked as moving, so deleting them is no tampering)."""
    study = list({p.name: p for part in parts for p in reg.parts(part.study_name)}.values())
    moves: dict[int, dict[str, str]] = {}
    misplaced = placement_problems(client, parts, scans, study, moves)
    if misplaced:  # nothing is imported: the study's projects stay as they are
        from evalstudio.tasks.integrity import mark_moving, record_path

        for project_id, keys in moves.items():  # deleting them, as the message asks, is then no tampering
            mark_moving(record_path(client.url, project_id), keys)
        raise InvalidInput(misplaced)


def imported_lines(imported: list[tuple]) -> list[str]:
    """What `import_study` did, as the lines the command prints: tasks created and present per part, the
    predictions imported with them, and each list's versions."""
    lines = []
    for project, report, checked in imported:
        lines.append(f"{project.name}: {report.created} task(s) created, {report.already_present} already present "
                     f"(project id {report.project_id}).")
        if report.predicted is not None:  # prefill: true with the stored predictor
            lines.append(f"  prefill: {report.predicted} of the {report.created} new task(s) imported with the model "
                         "outputs they carry as Label Studio predictions"
                         + (f"; {report.values_left_out} value(s) left out (refused by their control, see the "
                            "projects.yaml model_output paths)" if report.values_left_out else ""))
        if note := unassisted_note(project):  # a design only the gateway can serve
            lines.append(f"  {note}")
        if project.lists and checked.versions is not None:
            held = lists.balance(checked.versions, project.lists)[project.list_number]
            lines.append(f"  list {project.list_number} of {project.lists.count}: "
                         + ", ".join(f"{n} {version}" for version, n in sorted(held.items())))
    return lines


def write_rejected(problems, path: Path) -> int:
    """One JSON line per rejected record: file, line, its problems and the text of that line. Returns the count."""
    import json
    from itertools import islice

    from evalstudio.base.files import open_output

    by_record: dict[tuple[str, int], list[str]] = {}
    for problem in problems:
        by_record.setdefault((problem.path, problem.line), []).append(
            f"{problem.field}: {problem.message}" if problem.field else problem.message)
    with open_output(path) as out:
        for (file, line), messages in sorted(by_record.items()):
            try:
                with open(file, encoding="utf-8", errors="replace") as f:
                    text = next(islice(f, line - 1, None), "").rstrip("\n")
            except OSError:
                text = None
            out.write(json.dumps({"file": file, "line": line, "problems": messages, "text": text},
                                 ensure_ascii=False) + "\n")
    return len(by_record)
