"""Validate-then-import: every record is checked before anything is sent, and re-runs add no duplicates."""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from . import integrity, lists
from .errors import BadInput, InvalidInput, Problem, ServerError, Transient
from .placement import _where, design_problems
from .registry import Project
from .retry import RetryPolicy
from .sources import FieldError, RecordInvalid, big_int, control_value, storable, storable_problems, storable_text

ID_FIELD = "evalstudio_id"
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
    out = {}
    for path in map(Path, paths):
        try:
            info = path.stat()
            out[str(path)] = (info.st_size, info.st_mtime_ns)
        except OSError:
            out[str(path)] = (-1, -1)
    return out


class FileChanged(InvalidInput):
    """An input file changed between validation and import."""


@dataclass
class ImportReport:
    project_id: int
    created: int
    already_present: int
    recovered: int = 0  # batches that failed in transit and were completed after checking what had landed
    predicted: int | None = None  # prefill with the stored predictor: created tasks imported with a prediction
    values_left_out: int = 0  # model outputs a control refused (out of range, not a control): not predicted


class ImportIncomplete(ServerError):
    """Label Studio failed mid-import: says how many tasks were and were not written."""

    def __init__(self, cause: ServerError, total: int, created: int, present: int):
        self.total, self.created, self.present = total, created, present
        self.not_written = total - created - present
        super().__init__(
            f"{cause}\nimport stopped: {created} task(s) written, {present} already present, "
            f"{self.not_written} not written by this run. Fix the cause and re-run the same command: tasks already in the project are skipped.")


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
        for data in datas:
            if gold is not None:
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
    from . import parallel

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


def _in_send_order(spool: Path, items: dict[str, tuple[str, str]]) -> Iterator[str]:
    """The spool's lines in the order the import sends them (order.send_order: no two tasks of one context back to
    back, no system in a fixed place), read by offset: the order needs only each line's key and item."""
    from .order import send_order

    offsets, keys = [], []
    with open(spool, "rb") as spooled:
        offset = 0
        for line in spooled:
            key = str(json.loads(line.split(b"\t", 1)[0]))
            offsets.append(offset)
            offset += len(line)
            keys.append((key, items.get(key, (key, ""))[0]))
        for position in send_order(keys):
            spooled.seek(offsets[position])
            yield spooled.readline().decode("utf-8")


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
        if out is not None:
            out.write(f"{json.dumps(key)}\t{json.dumps(where)}\t{json.dumps(item.digest)}\t{item.text}\n")
    if project.design:
        result.design += design_problems(project, versions)
    result.problems += result.design


def send_batch(client, project_id: int, batch: list[tuple[str, dict | str]], watermark: int,
               retry: RetryPolicy) -> tuple[dict[str, int], bool]:
    """Import one batch of (evalstudio id, task: a dict or its JSON text) without ever duplicating a task. Returns
    (evalstudio id -> task id written, recovered).

    An import that fails in transit (timeout, dropped connection, 5xx) may still have been written, so before
    each retry we list the project's tasks newer than `watermark` (the highest task id before this batch)
    and send only the tasks that did not land."""
    pending, written, recovered = batch, {}, False
    for delay in [*retry.delays(), None]:
        try:
            task_ids = client.import_tasks(project_id, [task for _, task in pending])
            written.update(zip((key for key, _ in pending), task_ids))
            return written, recovered
        except Transient as e:
            if delay is None:
                raise Transient(f"{e} (gave up after {retry.attempts} attempts)") from None
            log.warning("%s; checking what landed, then retrying in %.1f s", e, delay)
            time.sleep(delay)
            recovered = True
            landed = client.task_ids(project_id, after=watermark)
            mine = {key for key, _ in pending}
            written.update((key, task_id) for key, task_id in landed.items() if key in mine)
            pending = [(key, task) for key, task in pending if key not in landed]
            if not pending:
                return written, recovered
    return written, recovered


def import_files(
    project: Project,
    importer,
    paths: Sequence[Path],
    client,
    batch_size: int = 500,
    on_progress: Callable[[int, int], None] | None = None,
    skip_invalid: bool = False,
    checked: Scan | None = None,
    record: bool = True,
    in_flight: int = 1,
) -> ImportReport:
    """Validate all files, then send only tasks whose id the project does not have yet, in batches.

    Memory stays flat in the size of the files: the validation pass streams the records once and writes every valid
    task, converted and serialised, to a private temporary spool (`scan(spool=True)`), which the sending pass reads
    in batches (without a spool, e.g. a caller's scan without one, the files are read and converted again); only
    the task ids are kept in memory. If Label Studio fails for good, ImportIncomplete says what was written;
    re-running the same command then finishes the job without duplicates. `checked`: the caller's scan of the same
    files (the command line scans every part of a study first); its spool is removed when the import ends.

    `record`: write the digest of every task of the files (imported now or before) to the project's record of
    tamper evidence (`integrity`), which `status` checks; also when the import stops part-way.

    `in_flight`: batches sent at a time (Label Studio on PostgreSQL takes two at a time about 20% faster). More than
    one only for a project with `order: random`: concurrent batches interleave Label Studio's task ids, which are
    the order a sequential project shows its tasks in. Every batch keeps its exactly-once recovery."""
    try:
        check_in_flight(project, in_flight)
        if checked is None:
            checked = scan(project, importer, paths, spool=True)
        return _import_files(project, importer, paths, client, batch_size, on_progress, skip_invalid, checked, record,
                             in_flight)
    finally:
        if checked is not None:
            checked.discard()


def check_in_flight(project: Project, in_flight: int) -> None:
    """BadInput unless `in_flight` batches at a time suit the project (see import_files)."""
    if in_flight < 1:
        raise BadInput(f"in_flight must be at least 1, got {in_flight}")
    if in_flight > 1 and project.order != "random":
        raise BadInput(f"{project.name} shows its tasks in order (order: {project.order}), so its batches are sent "
                       "one at a time: batches in flight together interleave the task ids that order follows. "
                       "Import with --in-flight 1, or set order: random in projects.yaml")


def _import_files(project, importer, paths, client, batch_size, on_progress, skip_invalid, checked: Scan,
                  record: bool, in_flight: int = 1) -> ImportReport:
    checked.warn_unknown(project)
    skip = set()
    if checked.problems and skip_invalid and not checked.design and all(p.line for p in checked.problems):
        skip = checked.rejected()  # import the valid records only (the caller reports the rejected ones)
    elif checked.problems:
        raise InvalidInput(checked.problems)
    try:
        project_id, _, count = client.ensure_project_counted(project)
        existing = client.task_ids(project_id) if count else {}
    except ServerError as e:
        raise ImportIncomplete(e, checked.tasks, 0, 0) from None
    watermark = max(existing.values(), default=0)
    seen = set(existing)
    report = ImportReport(project_id, 0, 0)
    batch: list[tuple[str, dict | str]] = []

    # batches in flight (in_flight > 1): each is sent by a thread with the watermark of the batches settled before
    # it, which the ids of every batch still in flight are above, so its recovery sees them and keeps only its own
    pool = ThreadPoolExecutor(in_flight, thread_name_prefix="evalstudio-import") if in_flight > 1 else None
    pending: deque[tuple[Future, int]] = deque()  # (batch in flight, its size)

    def settle(result: tuple[dict[str, int], bool]):
        nonlocal watermark
        written, recovered = result
        written_ids.extend(written.values())
        written_keys.update(written)
        report.created += len(written)
        report.recovered += recovered
        watermark = max([watermark, *written.values()])

    def flush(final: bool = False):
        if batch and pool is None:
            settle(send_batch(client, project_id, batch, watermark, client.retry))
        elif batch:
            pending.append((pool.submit(send_batch, client, project_id, list(batch), watermark, client.retry),
                            len(batch)))
        batch.clear()
        while pending and (final or len(pending) >= in_flight):
            settle(pending.popleft()[0].result())

    def sent() -> int:
        return report.created + report.already_present + len(batch) + sum(size for _, size in pending)

    def changed() -> list[Problem]:
        now = fingerprints(paths)
        return [Problem(p, None, None, "the file changed after it was validated; run the import again")
                for p, before in checked.files.items() if now.get(p) != before]

    if problems := changed():
        raise FileChanged(problems)
    written_ids: list[int] = []
    written_keys: set[str] = set()

    def rollback(problems: list[Problem]):
        """The files changed while importing: remove what this run wrote, so the project is as it was."""
        client.delete_tasks(project_id, written_ids)
        raise FileChanged(problems, f"the {len(written_ids)} task(s) this run had written were removed again")

    digests: dict[str, dict | str] = {}  # evalstudio id -> digest (from the spool: its JSON text, 5x smaller)
    # model-assisted labelling with the stored predictor: each task goes in with its model outputs as its Label
    # Studio prediction (checked against the controls as the ML backend checks them), in the same request: a project
    # is prefilled the moment it is imported, and a task is never sent twice, so neither is its prediction
    predict = project.prefill and project.predictor == "stored"
    if predict:
        from .ml_backend.predictors import NoPrediction, StoredPredictor, prediction_of

        stored, report.predicted = StoredPredictor(), 0

    def save_record():
        if record and digests:
            integrity.save_record(integrity.record_path(client.url, project_id), client.url, project_id, digests)

    def add(key: str, task: dict | str) -> None:
        """A task not yet in the project goes into the batch (with its prediction, when prefill asks for one)."""
        if predict:
            task = json.loads(task) if isinstance(task, str) else task
            try:
                prediction, skipped = prediction_of(project, task, stored)
                task["predictions"] = [prediction]
                report.predicted += 1
                report.values_left_out += len(skipped)
            except NoPrediction:
                pass
        batch.append((key, task))
        seen.add(key)
        if len(batch) >= batch_size:
            flush()

    try:
        if checked.spool is not None:  # what the scan validated, converted and serialised: sent as it is
            for line in _in_send_order(checked.spool, checked.items):
                key_text, where_text, digest_text, task_text = line.rstrip("\n").split("\t", 3)
                key = json.loads(key_text)
                if skip and _where(json.loads(where_text)) in skip:
                    continue  # a task of a record that also had a problem (e.g. a duplicate id)
                digests[str(key)] = digest_text
                if key in seen:
                    report.already_present += 1
                else:
                    add(key, task_text)
                if on_progress:
                    on_progress(sent(), checked.tasks)
            flush(final=True)
            if problems := changed():
                rollback(problems)
            items = ()
        else:
            items = iter_tasks(project, importer, paths, versions=checked.versions)
        for item in items:
            if isinstance(item, Problem) and (item.path, item.line) in skip:
                continue
            if skip and not isinstance(item, Problem) and _where(item[0]) in skip:
                continue  # a task of a record that also had a problem (e.g. a duplicate id)
            if isinstance(item, Problem) or sent() >= checked.tasks:
                flush(final=True)
                rollback(changed() or [item if isinstance(item, Problem) else
                                       Problem(str(paths[0]), None, None, "more records than validated")])
            _, data = item
            task = split_task(project, data)
            digests[str(data[ID_FIELD])] = integrity.task_digest(task)
            if data[ID_FIELD] in seen:
                report.already_present += 1
            else:
                add(data[ID_FIELD], task)
            if on_progress:
                on_progress(sent(), checked.tasks)
        if checked.spool is None:
            flush(final=True)
            if problems := changed():
                rollback(problems)
    except ServerError as e:
        while pending:  # what the other batches in flight wrote (they end by themselves: the failure is recorded)
            try:
                settle(pending.popleft()[0].result())
            except ServerError:
                pass
        landed = set(map(str, existing)) | set(map(str, written_keys))  # not the batch in flight: the resumed import records it
        digests = {k: v for k, v in digests.items() if k in landed}
        save_record()
        raise ImportIncomplete(e, checked.tasks, report.created, report.already_present) from None
    finally:
        if pool is not None:  # (Ctrl-C) the batches in flight end; none starts
            pool.shutdown(wait=True, cancel_futures=True)
    save_record()
    if on_progress:
        on_progress(checked.tasks, checked.tasks)
    return report
