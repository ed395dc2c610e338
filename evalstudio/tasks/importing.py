"""Validate-then-import: every record is checked before anything is sent, and re-runs add no duplicates."""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from evalstudio.base.errors import BadInput, InvalidInput, Problem, ServerError, Transient
from evalstudio.base.retry import RetryPolicy
from evalstudio.protocols.registry import Project
from evalstudio.values.results import ID_FIELD

from . import integrity
from .placement import parse_where
from .scanning import Scan, fingerprints, iter_tasks, scan, split_task

log = logging.getLogger(__name__)


class FileChanged(InvalidInput):
    """An input file changed between validation and import."""


@dataclass
class ImportReport:
    """What an import did: the project, tasks created, already present and recovered batches."""
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


def _spool_lines(checked: Scan, as_listed: bool) -> Iterator[str]:
    """The spooled tasks in the order they are sent: the files' own (as_listed) or the import's (send order)."""
    if not as_listed:
        yield from _in_send_order(checked.spool, checked.items)
        return
    with open(checked.spool, encoding="utf-8") as spooled:
        yield from spooled


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
                raise Transient(f"{e} (gave up after {retry.attempts} attempt{'s' if retry.attempts != 1 else ''})") from None
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
    as_listed: bool = False,
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
    the order a sequential project shows its tasks in. Every batch keeps its exactly-once recovery.

    `as_listed`: send the tasks in the files' order (`evalstudio reproduce`: a published study's tasks in the order
    its Label Studio held them), not the import's own order (order.send_order)."""
    try:
        check_in_flight(project, in_flight)
        if checked is None:
            checked = scan(project, importer, paths, spool=True)
        return _import_files(project, importer, paths, client, batch_size, on_progress, skip_invalid, checked, record,
                             in_flight, as_listed)
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
                  record: bool, in_flight: int = 1, as_listed: bool = False) -> ImportReport:
    """import_files once the files are checked: the records to leave out, the project's tasks already there, then
    every task not yet there sent in batches (from the spool, or converted again) and the record of what was
    imported saved, also when Label Studio fails part-way."""
    checked.warn_unknown(project)
    skip = _records_to_skip(checked, skip_invalid)
    try:
        project_id, _, count = client.ensure_project_counted(project)
        existing = client.task_ids(project_id) if count else {}
    except ServerError as e:
        raise ImportIncomplete(e, checked.tasks, 0, 0) from None
    if problems := _changed(paths, checked):
        raise FileChanged(problems)
    sender = _Sender(project, client, project_id, existing, batch_size, in_flight)
    digests: dict[str, dict | str] = {}  # evalstudio id -> digest (from the spool: its JSON text, 5x smaller)

    def progress() -> None:
        if on_progress:
            on_progress(sender.sent(), checked.tasks)

    try:
        if checked.spool is not None:  # what the scan validated, converted and serialised: sent as it is
            _send_spooled(sender, checked, as_listed, skip, digests, progress)
        else:
            _send_converted(sender, project, importer, paths, checked, skip, digests, progress)
        sender.flush(final=True)
        if problems := _changed(paths, checked):
            sender.rollback(problems)
    except ServerError as e:
        sender.settle_pending()
        # not the batch in flight: the resumed import records it
        landed = set(map(str, existing)) | set(map(str, sender.written_keys))
        _save_record(record, client, project_id, {k: v for k, v in digests.items() if k in landed})
        raise ImportIncomplete(e, checked.tasks, sender.report.created, sender.report.already_present) from None
    finally:
        sender.close()
    _save_record(record, client, project_id, digests)
    if on_progress:
        on_progress(checked.tasks, checked.tasks)
    return sender.report


def _records_to_skip(checked: Scan, skip_invalid: bool) -> set:
    """The records to leave out (skip_invalid and every problem is a record's: the caller reports them), else
    InvalidInput for the scan's problems."""
    if checked.problems and skip_invalid and not checked.design and all(p.line for p in checked.problems):
        return checked.rejected()  # import the valid records only (the caller reports the rejected ones)
    if checked.problems:
        raise InvalidInput(checked.problems)
    return set()


def _changed(paths, checked: Scan) -> list[Problem]:
    """A problem per input file that changed since it was validated."""
    now = fingerprints(paths)
    return [Problem(p, None, None, "the file changed after it was validated; run the import again")
            for p, before in checked.files.items() if now.get(p) != before]


def _save_record(record: bool, client, project_id: int, digests: dict) -> None:
    """The record of tamper evidence (integrity) of the tasks' digests, when asked and there are any."""
    if record and digests:
        integrity.save_record(integrity.record_path(client.url, project_id), client.url, project_id, digests)


class _Sender:
    """The tasks not yet in the project, sent in batches of `batch_size` (with their predictions when prefill
    asks for them), `in_flight` batches at a time, and what they wrote (the report, the task ids and keys)."""

    def __init__(self, project, client, project_id: int, existing: dict, batch_size: int, in_flight: int):
        self.project, self.client, self.project_id = project, client, project_id
        self.batch_size, self.in_flight = batch_size, in_flight
        self.watermark = max(existing.values(), default=0)
        self.seen = set(existing)
        self.report = ImportReport(project_id, 0, 0)
        self.batch: list[tuple[str, dict | str]] = []
        self.written_ids: list[int] = []
        self.written_keys: set[str] = set()
        # batches in flight (in_flight > 1): each is sent by a thread with the watermark of the batches settled
        # before it, which the ids of every batch still in flight are above, so its recovery sees them and keeps
        # only its own
        self.pool = ThreadPoolExecutor(in_flight, thread_name_prefix="evalstudio-import") if in_flight > 1 else None
        self.pending: deque[tuple[Future, int]] = deque()  # (batch in flight, its size)
        # model-assisted labelling with the stored predictor: each task goes in with its model outputs as its Label
        # Studio prediction (checked against the controls as the ML backend checks them), in the same request: a
        # project is prefilled the moment it is imported, and a task is never sent twice, so neither is its prediction
        self.predict = project.prefill is True and project.predictor == "stored"  # (judge:NAME: the judge's, made apart)
        if self.predict:
            from evalstudio.ml_backend import predictors

            self.predictors, self.stored, self.report.predicted = predictors, predictors.StoredPredictor(), 0

    def settle(self, result: tuple[dict[str, int], bool]) -> None:
        """Count what a batch wrote."""
        written, recovered = result
        self.written_ids.extend(written.values())
        self.written_keys.update(written)
        self.report.created += len(written)
        self.report.recovered += recovered
        self.watermark = max([self.watermark, *written.values()])

    def flush(self, final: bool = False) -> None:
        """Send the batch (or put it in flight); settle batches in flight down to `in_flight` (all when final)."""
        if self.batch and self.pool is None:
            self.settle(send_batch(self.client, self.project_id, self.batch, self.watermark, self.client.retry))
        elif self.batch:
            self.pending.append((self.pool.submit(send_batch, self.client, self.project_id, list(self.batch),
                                                  self.watermark, self.client.retry), len(self.batch)))
        self.batch.clear()
        while self.pending and (final or len(self.pending) >= self.in_flight):
            self.settle(self.pending.popleft()[0].result())

    def settle_pending(self) -> None:
        """What the other batches in flight wrote (they end by themselves: the failure is recorded)."""
        while self.pending:
            try:
                self.settle(self.pending.popleft()[0].result())
            except ServerError:
                pass

    def close(self) -> None:
        """(Ctrl-C) the batches in flight end; none starts."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def sent(self) -> int:
        """Tasks counted so far: created, already present, in the batch and in flight."""
        return (self.report.created + self.report.already_present + len(self.batch)
                + sum(size for _, size in self.pending))

    def rollback(self, problems: list[Problem]):
        """The files changed while importing: remove what this run wrote, so the project is as it was."""
        self.client.delete_tasks(self.project_id, self.written_ids)
        raise FileChanged(problems, f"the {len(self.written_ids)} task(s) this run had written were removed again")

    def add(self, key: str, task: dict | str) -> None:
        """A task: counted when the project has it, else into the batch (with its prediction, when prefill asks
        for one)."""
        if key in self.seen:
            self.report.already_present += 1
            return
        if self.predict:
            task = json.loads(task) if isinstance(task, str) else task
            try:
                prediction, skipped = self.predictors.prediction_of(self.project, task, self.stored)
                task["predictions"] = [prediction]
                self.report.predicted += 1
                self.report.values_left_out += len(skipped)
            except self.predictors.NoPrediction:
                pass
        self.batch.append((key, task))
        self.seen.add(key)
        if len(self.batch) >= self.batch_size:
            self.flush()


def _send_spooled(sender: _Sender, checked: Scan, as_listed: bool, skip: set, digests: dict, progress) -> None:
    """The spool's tasks, as the scan validated, converted and serialised them, each added to the sender."""
    for line in _spool_lines(checked, as_listed):
        key_text, where_text, digest_text, task_text = line.rstrip("\n").split("\t", 3)
        key = json.loads(key_text)
        if skip and parse_where(json.loads(where_text)) in skip:
            continue  # a task of a record that also had a problem (e.g. a duplicate id)
        digests[str(key)] = digest_text
        sender.add(key, task_text)
        progress()


def _send_converted(sender: _Sender, project, importer, paths, checked: Scan, skip: set, digests: dict,
                    progress) -> None:
    """The files read and converted again (no spool), each task added to the sender; a record that now has a
    problem, or more records than were validated, removes what this run wrote."""
    for item in iter_tasks(project, importer, paths, versions=checked.versions):
        if isinstance(item, Problem) and (item.path, item.line) in skip:
            continue
        if skip and not isinstance(item, Problem) and parse_where(item[0]) in skip:
            continue  # a task of a record that also had a problem (e.g. a duplicate id)
        if isinstance(item, Problem) or sender.sent() >= checked.tasks:
            sender.flush(final=True)
            sender.rollback(_changed(paths, checked) or [
                item if isinstance(item, Problem) else Problem(str(paths[0]), None, None, "more records than validated")])
        _, data = item
        task = split_task(project, data)
        digests[str(data[ID_FIELD])] = integrity.task_digest(task)
        sender.add(data[ID_FIELD], task)
        progress()
