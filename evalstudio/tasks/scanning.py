"""The dry run of an import: every record of the input files read, converted into its task and checked (values,
duplicates, gold answers, the design of lists and versions) before anything is sent; `validate` is this alone."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from evalstudio.base.errors import Problem
from evalstudio.protocols.attention import CHECK_FIELD, check_of
from evalstudio.protocols.registry import Project
from evalstudio.values.results import ID_FIELD
from evalstudio.values.sources import (
    FieldError,
    RecordInvalid,
    big_int,
    control_value,
    storable,
    storable_problems,
    storable_text,
)

from . import integrity, lists
from .placement import design_problems

PART_FIELD = "part"  # which project of a study (Circa Part I / Part II) a task belongs to
log = logging.getLogger(__name__)


def split_task(project: Project, data: dict) -> dict:
    """A Label Studio task: `data` holds only what the annotator view shows (plus the ids); everything else the
    importer kept (model outputs and ratings, gold labels, system names, the researcher's metadata) goes to `meta`,
    which Label Studio keeps, exports and sends to ML backends but never shows to annotators."""
    shown = project.data_fields() | {ID_FIELD, "item_id"}
    return {"data": {k: v for k, v in data.items() if k in shown},
            "meta": {k: v for k, v in data.items() if k not in shown}}


@dataclass
class Scan:
    """Result of a dry run over the input files."""

    tasks: int = 0
    checks: int = 0  # of them, attention checks made at import (protocols/attention.py)
    problems: list[Problem] = field(default_factory=list)
    files: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (size, mtime) when validated
    design: list[Problem] = field(default_factory=list)  # study-design problems (not of one record: never skipped)
    unknown: dict[str, set[str]] = field(default_factory=dict)  # file -> record fields kept as metadata
    items: dict[str, tuple[str, str]] = field(default_factory=dict)  # evalstudio id -> (item id, file:line)
    versions: dict[str, list[str]] | None = None  # counterbalanced lists: item id -> its versions (all lists)
    # scan(spool=True): every valid task as it will be sent, one line each (id, where, digest, task JSON) in a
    # private temporary file, so the import sends what was validated without reading and converting the files again
    spool: Path | None = None

    def discard(self) -> None:
        """Removes the spool file (the import does when it is done; a caller that does not import calls it)."""
        if self.spool is not None:
            self.spool.unlink(missing_ok=True)
            self.spool = None

    def warn_unknown(self, project: Project) -> None:
        """One warning per file naming the fields the protocol does not use (they are kept as metadata)."""
        for path, names in self.unknown.items():
            log.warning("%s: field(s) %s are not used by the %s protocol; kept with each task as metadata (its meta)",
                        path, ", ".join(sorted(names)), project.entry)

    def rejected(self) -> set[tuple[str, int | None]]:
        """(file, line) of every record with a problem."""
        return {(p.path, p.line) for p in self.problems if p not in self.design}


def fingerprints(paths: Sequence[Path]) -> dict[str, tuple[int, int]]:
    """Each input file's size and modification time, to tell whether it changed since the dry run."""
    out = {}
    for path in map(Path, paths):
        try:
            info = path.stat()
            out[str(path)] = (info.st_size, info.st_mtime_ns)
        except OSError:
            out[str(path)] = (-1, -1)
    return out


def iter_tasks(project: Project, importer, paths: Sequence[Path], unknown: dict[str, set[str]] | None = None,
               versions: dict[str, list[str]] | None = None) -> Iterator[tuple[str, dict] | Problem]:
    """(where, task data) for every task in the files, or a Problem per bad record.

    A list's project (counterbalanced lists) with `versions` (item id -> its versions, `lists.collect`): only the
    tasks that go to this list; without `versions`: the tasks of every list.

    Record fields the importer does not read (its FIELDS) are the researcher's metadata: they are kept with each
    of the record's tasks (in its meta; a name the task already uses gets the prefix `input_`), and their names
    are collected per file in `unknown`."""
    converter = _Converter(project, importer, versions)
    context, paths, problems = converter.prepare(paths)
    yield from problems
    for path in paths:
        for line, record in importer.read(path):
            yield from converter.record(context, path, line, record, unknown)


class Spooled(NamedTuple):  # a tuple: the validation workers send thousands (pickled faster than a dataclass)
    """A valid task as the import sends it: its canonical JSON text and digest, and what the scan checks of it."""

    where: str
    key: str
    item_id: str
    system: str
    text: str
    digest: dict


class _Converter:
    """What the validation does to one record, the same in the serial pass and in the validation workers: the
    importer's conversion, gold answers, metadata fields, the list filter, the fields the config shows, and what
    the databases can store; `encode`: each valid task as a `Spooled` (else as (where, data))."""

    def __init__(self, project: Project, importer, versions: dict[str, list[str]] | None, encode: bool = False):
        self.project, self.importer, self.versions, self.encode = project, importer, versions, encode
        self.known = getattr(importer, "FIELDS", None)
        self.fields = project.data_fields() | {ID_FIELD}

    def prepare(self, paths: Sequence[Path]) -> tuple[dict, list[Path], list[Problem]]:
        paths = [Path(p) for p in paths]
        problems = [Problem(str(path), None, None, "no such file") for path in paths if not path.is_file()]
        context, paths = self.importer.prepare([p for p in paths if p.is_file()])
        return context, paths, problems + list(context.get("problems", []))

    def record(self, context, path: Path, line: int, record, unknown: dict[str, set[str]] | None) -> list:
        if isinstance(record, Problem):
            return [record]
        project, known = self.project, self.known
        datas, problems = convert_record(self.importer, record, project, context, path, line)
        if problems:
            return problems
        extra = {k: v for k, v in record.items() if k not in known and k != GOLD_FIELD} if known is not None else {}
        datas = [d for d in datas if d.get(PART_FIELD, project.entry) == project.entry]  # not another part's tasks
        if self.versions is not None and project.lists:
            datas = [d for d in datas if _in_list(project, d, self.versions)]
        gold = None
        if datas and GOLD_FIELD in record and GOLD_FIELD not in (known or ()):
            gold = check_gold(record[GOLD_FIELD], project, path, line)  # once per record, for all its tasks
            if isinstance(gold, list):
                return gold
        out: list = []
        checks = project.attention_checks
        copies = [c for d in datas if (c := check_of(d, checks, ID_FIELD))] if checks else []
        for data in datas + copies:
            if gold is not None and CHECK_FIELD not in data:  # (a copy's gold is its check: score below the original)
                data[GOLD_FIELD] = gold
            if extra and unknown is not None:
                unknown.setdefault(str(path), set()).update(map(str, extra))
            for key, value in extra.items():
                data.setdefault(key if key not in data else f"input_{key}", value)
            missing = sorted(self.fields - data.keys())
            if missing:
                out.append(Problem(str(path), line, ", ".join(missing), "no value for field(s) the labeling config shows"))
                continue
            if self.encode:  # one canonical encoding: the text sent, its digest and the fast storable check
                encoded = encode_task(project, data)
                fast = encoded is not None and storable_text(encoded[0]) and not big_int(data)
                bad = [] if fast else storable_problems(data)  # the exact walk, for its messages
                if not bad and encoded is None:  # e.g. keys of mixed types, which no canonical JSON can sort
                    bad = [("", "holds a value that cannot be written as JSON")]
                if not bad:
                    out.append(Spooled(f"{path}:{line}", data[ID_FIELD], str(data.get("item_id")),
                                       str(data.get("system")), *encoded))
                    continue
            else:
                bad = [] if storable(data) else storable_problems(data)
            if bad:
                out += [Problem(str(path), line, field_ or None, message) for field_, message in bad]
                continue
            out.append((f"{path}:{line}", data))
        return out


def encode_task(project: Project, data: dict) -> tuple[str, dict] | None:
    """The task of `data` (`split_task`) as the import sends it and its digest (`integrity.encode_task`); None when
    it has a value JSON cannot hold. The caller checks that the text is `storable_text`."""
    try:
        return integrity.encode_task(split_task(project, data))
    except (ValueError, TypeError, RecursionError):
        return None


def _in_list(project: Project, data: dict, versions: dict[str, list[str]]) -> bool:
    item = str(data.get("item_id"))
    if item not in versions or data.get(project.lists.version) is None:
        return False  # a task the collecting pass reported
    return project.list_number in lists.lists_of_task(item, lists.version_key(data[project.lists.version]),
                                                      versions[item], project.lists)


GOLD_FIELD = "gold"  # a record's known answers {criterion: answer}: attention checks (kept in meta, never shown)


def check_gold(gold, project: Project, path, line) -> dict | list[Problem]:
    """The record's gold answers checked against the criteria's controls, or the Problems."""
    if not isinstance(gold, dict) or not gold:
        return [Problem(str(path), line, GOLD_FIELD, "expected {criterion: known answer}, e.g. {\"appropriateness\": 5}")]
    problems, checked = [], {}
    for criterion, answer in gold.items():
        where = f"{GOLD_FIELD}.{criterion}"
        if criterion not in project.criteria:
            problems.append(Problem(str(path), line, where, f"not a criterion of {project.name} "
                                                            f"({', '.join(project.criteria)})"))
            continue
        try:
            checked[criterion] = control_value(where, answer, project, project.slots(criterion)[0].control)
        except FieldError as e:
            problems.append(Problem(str(path), line, e.field, e.message))
    return problems or checked


def convert_record(importer, record: dict, project: Project, context, path, line) -> tuple[list[dict], list[Problem]]:
    """(the record's task data, []) or ([], the Problems that make it invalid): never an exception."""
    try:
        return importer.convert(record, project, context), []
    except FieldError as e:
        return [], [Problem(str(path), line, e.field, e.message)]
    except RecordInvalid as e:
        return [], [Problem(str(path), line, err.field, err.message) for err in e.errors]
    except RecursionError:
        return [], [Problem(str(path), line, None, "the record is nested too deeply")]
    except (TypeError, AttributeError, ValueError, KeyError, IndexError, OverflowError) as e:
        # a shape no importer check foresaw: still a file:line report, never a traceback
        return [], [Problem(str(path), line, None, f"unexpected value in this record ({type(e).__name__}: {str(e)[:120]})")]


def scan(project: Project, importer, paths: Sequence[Path], spool: bool = False, workers: int | None = None) -> Scan:
    """Dry run: count tasks and collect every problem, including duplicate ids. `spool`: also write every valid
    task, converted and serialised as the import sends it, to a private temporary file (`Scan.spool`).

    `workers`: validation processes converting the records (`parallel`); None: as many as `parallel.workers_for`
    gives the files (one for small inputs)."""
    result = Scan(files=fingerprints(paths))
    out = None
    if spool:
        import tempfile

        handle, name = tempfile.mkstemp(prefix="evalstudio-import-", suffix=".tasks")  # 0600: it holds hidden meta
        result.spool = Path(name)
        out = os.fdopen(handle, "w", encoding="utf-8")
    try:
        _scan(project, importer, paths, result, out, workers)
    except BaseException:
        if out is not None:
            out.close()
        result.discard()
        raise
    if out is not None:
        out.close()
    return result


def _spooled(project: Project, importer, paths: Sequence[Path], unknown: dict[str, set[str]],
             versions: dict[str, list[str]] | None, workers: int | None) -> Iterator[Spooled | Problem]:
    """Every task as a `Spooled` (or a Problem), in the files' order, from `workers` processes or this one."""
    from evalstudio.base import parallel

    converter = _Converter(project, importer, versions, encode=True)
    context, paths, problems = converter.prepare(paths)
    yield from problems
    workers = parallel.workers_for(paths) if workers is None else workers
    if workers > 1:
        yield from parallel.convert(converter, context, paths, unknown, workers)
        return
    for path in paths:
        for line, record in importer.read(path):
            yield from converter.record(context, path, line, record, unknown)


def _scan(project: Project, importer, paths: Sequence[Path], result: Scan, out, workers: int | None) -> None:
    first_seen: dict[str, str] = {}
    versions: dict[str, dict[str, str]] = {}  # item -> system -> where (for the design check)
    if project.lists:  # which task goes to which list needs every version of every item: one pass first
        result.versions, design = lists.collect(
            (item for item in iter_tasks(project, importer, paths) if not isinstance(item, Problem)), project.lists)
        result.design += design
    # every task encoded as the import sends it, also in a dry run: what the dry run passes, the import takes
    for item in _spooled(project, importer, paths, result.unknown, result.versions, workers):
        if isinstance(item, Problem):
            result.problems.append(item)
            continue
        where, key, item_id, system = item.where, item.key, item.item_id, item.system
        result.items[str(key)] = (item_id, where)
        if project.design:
            versions.setdefault(item_id, {}).setdefault(system, where)
        if key in first_seen:
            path, _, line = where.rpartition(":")
            result.problems.append(Problem(path, int(line), ID_FIELD, f"duplicate task id {key!r}, first seen at {first_seen[key]}"))
            continue
        first_seen[key] = where
        result.tasks += 1
        if project.attention_checks is not None and CHECK_FIELD in json.loads(item.text)["meta"]:
            result.checks += 1
        if out is not None:
            out.write(f"{json.dumps(key)}\t{json.dumps(where)}\t{json.dumps(item.digest)}\t{item.text}\n")
    if project.design:
        result.design += design_problems(project, versions)
    result.problems += result.design
