"""Validate-then-import: every record is checked before anything is sent, and re-runs add no duplicates."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidInput, Problem
from .registry import Project
from .sources import FieldError, RecordInvalid

ID_FIELD = "evalstudio_id"


@dataclass
class Scan:
    """Result of a dry run over the input files."""

    tasks: int = 0
    problems: list[Problem] = field(default_factory=list)


@dataclass
class ImportReport:
    project_id: int
    created: int
    already_present: int


def iter_tasks(project: Project, importer, paths: Sequence[Path]) -> Iterator[tuple[str, dict] | Problem]:
    """(where, task data) for every task in the files, or a Problem per bad record."""
    fields = project.data_fields() | {ID_FIELD}
    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.is_file():
            yield Problem(str(path), None, None, "no such file")
    context, paths = importer.prepare([p for p in paths if p.is_file()])
    for problem in context.get("problems", []):
        yield problem
    for path in paths:
        for line, record in importer.read(path):
            if isinstance(record, Problem):
                yield record
                continue
            try:
                datas = importer.convert(record, project, context)
            except FieldError as e:
                yield Problem(str(path), line, e.field, e.message)
                continue
            except RecordInvalid as e:
                for err in e.errors:
                    yield Problem(str(path), line, err.field, err.message)
                continue
            for data in datas:
                missing = sorted(fields - data.keys())
                if missing:
                    yield Problem(str(path), line, ", ".join(missing), "no value for field(s) the labeling config shows")
                    continue
                yield f"{path}:{line}", data


def scan(project: Project, importer, paths: Sequence[Path]) -> Scan:
    """Dry run: count tasks and collect every problem, including duplicate ids."""
    result = Scan()
    first_seen: dict[str, str] = {}
    for item in iter_tasks(project, importer, paths):
        if isinstance(item, Problem):
            result.problems.append(item)
            continue
        where, data = item
        key = data[ID_FIELD]
        if key in first_seen:
            path, _, line = where.rpartition(":")
            result.problems.append(Problem(path, int(line), ID_FIELD, f"duplicate task id {key!r}, first seen at {first_seen[key]}"))
            continue
        first_seen[key] = where
        result.tasks += 1
    return result


def import_files(
    project: Project,
    importer,
    paths: Sequence[Path],
    client,
    batch_size: int = 500,
    on_progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Validate all files, then send only tasks whose id the project does not have yet, in batches."""
    checked = scan(project, importer, paths)
    if checked.problems:
        raise InvalidInput(checked.problems)
    project_id, _ = client.ensure_project(project)
    existing = client.task_ids(project_id)
    created = present = 0
    batch: list[dict] = []

    def flush():
        nonlocal created
        if batch:
            client.import_tasks(project_id, batch)
            created += len(batch)
            batch.clear()

    for item in iter_tasks(project, importer, paths):
        _, data = item  # scan() proved there are no problems
        if data[ID_FIELD] in existing:
            present += 1
        else:
            batch.append({"data": data})
            existing.add(data[ID_FIELD])
            if len(batch) >= batch_size:
                flush()
        if on_progress:
            on_progress(created + present + len(batch), checked.tasks)
    flush()
    if on_progress:
        on_progress(checked.tasks, checked.tasks)
    return ImportReport(project_id, created, present)
