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
    predict = project.prefill is True and project.predictor == "stored"  # (judge:NAME: the judge's, made apart)
    if predict:
        from evalstudio.ml_backend.predictors import NoPrediction, StoredPredictor, prediction_of

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
            for line in _spool_lines(checked, as_listed):
                key_text, where_text, digest_text, task_text = line.rstrip("\n").split("\t", 3)
                key = json.loads(key_text)
                if skip and parse_where(json.loads(where_text)) in skip:
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
            if skip and not isinstance(item, Problem) and parse_where(item[0]) in skip:
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
