"""The import's validation pass in several processes: records converted, checked and encoded in parallel, in order.

Before an import sends anything, every record is validated (nothing half-imported), and Label Studio is idle
meanwhile; on a machine with more than one core the conversion (the importer's checks, the canonical JSON, the
digests) runs in forked worker processes. Worker w of W converts the records of chunks w, w + W, w + 2W, ... (a
chunk is CHUNK consecutive records of the files; every worker reads the files itself, which costs less than sending
records to it) and sends each chunk's results through its own pipe; the main process takes chunk c from worker
c mod W, so the results come in the files' order, and a worker waits while its pipe is full (memory stays
bounded). Only the worker holds the writing end of its pipe: a worker that dies, even half-way through a message,
leaves the main process an end of file to report. What a worker returns is exactly what the serial pass yields
for the same records (tests compare both per protocol).

Fork only (Linux; elsewhere the pass stays serial): the workers inherit the project, the importer and its
context without pickling them, and run nothing but the conversion."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

CHUNK = 250  # records per message: small enough to keep memory flat, large enough that messages cost little
MIN_BYTES = 1 << 20  # inputs smaller than this are validated in this process (forking costs more than it saves)
MAX_WORKERS = 4


class WorkerFailed(RuntimeError):
    """A validation worker stopped without finishing its chunks."""


def workers_for(paths: Sequence[Path]) -> int:
    """How many validation processes the files get: 1 (this process) for small inputs, without fork, on one core,
    or when this process runs other threads (forking a threaded process may copy a lock another thread holds);
    otherwise one per core, at most MAX_WORKERS."""
    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    size = sum(Path(p).stat().st_size for p in paths if Path(p).is_file())
    return 1 if cores < 2 or size < MIN_BYTES else min(cores, MAX_WORKERS)


def convert(converter, context, paths: Sequence[Path], unknown: dict[str, set[str]] | None, workers: int,
            chunk: int | None = None) -> Iterator:
    """What `converter.record` gives for every record of `paths`, in order, computed by `workers` forked processes;
    the metadata field names they find are added to `unknown`."""
    if workers < 2:
        raise ValueError("convert needs at least two workers")
    chunk = chunk or CHUNK
    fork = multiprocessing.get_context("fork")
    # one pipe per worker, whose writing end only that worker holds: a worker that dies, even half-way through a
    # message (killed for memory), leaves the main process an end of file, never a read that waits for ever
    pipes = [fork.Pipe(duplex=False) for _ in range(workers)]
    for reader, _ in pipes:
        _widen(reader)
    procs = [fork.Process(target=_work, args=(converter, context, list(paths), w, workers, chunk, pipes),
                          name=f"evalstudio-validation-{w}", daemon=True) for w in range(workers)]
    try:
        # Ctrl-C or a kill held while forking: Python runs logging's after-fork hook in the parent, and a
        # KeyboardInterrupt raised inside it is printed as "Exception ignored" and lost (the import then ran on, found
        # by CI); held, the signal is taken as soon as the workers are started, where it stops the import
        with _held(signal.SIGINT, signal.SIGTERM):
            for proc in procs:
                proc.start()
        for _, writer in pipes:
            writer.close()
        index = 0
        while True:
            message = _take(pipes[index % workers][0], procs[index % workers])
            if message[0] == "end":
                break
            if message[0] == "error":
                raise WorkerFailed(f"validation worker {index % workers} failed: {message[1]}")
            _, items, names = message
            if unknown is not None:
                for path, fields in names.items():
                    unknown.setdefault(path, set()).update(fields)
            yield from items
            index += 1
        for other in range(workers):  # the others' end messages (each has sent all its chunks)
            if other != index % workers:
                message = _take(pipes[other][0], procs[other])
                if message[0] != "end":
                    raise WorkerFailed(f"validation worker {other} failed: "
                                       f"{message[1] if message[0] == 'error' else 'it sent more than its chunks'}")
        for proc in procs:
            proc.join(timeout=10)
    finally:
        for proc in procs:
            if proc.pid is None:
                continue  # never started
            if proc.is_alive():
                proc.terminate()
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for reader, writer in pipes:
            reader.close()
            writer.close()


def _widen(reader) -> None:
    """A larger pipe buffer (Linux: up to 1 MB unprivileged), so a worker may be a chunk ahead of the reader."""
    try:
        import fcntl

        fcntl.fcntl(reader.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass  # the default buffer: slower, as correct


def _take(reader, proc):
    """The worker's next message; WorkerFailed if it died before sending it whole (killed, out of memory)."""
    try:
        return reader.recv()
    except (EOFError, OSError):
        proc.join(timeout=5)
        raise WorkerFailed(f"validation worker {proc.name} stopped (exit code {proc.exitcode})") from None


class _held:
    """Signals held (blocked) in this thread while the block runs, taken when it ends; a no-op off the main thread."""

    def __init__(self, *signals: int):
        self.signals = set(signals) if threading.current_thread() is threading.main_thread() else set()

    def __enter__(self):
        self.before = signal.pthread_sigmask(signal.SIG_BLOCK, self.signals) if self.signals else None

    def __exit__(self, *exc):
        if self.before is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.before)


def _work(converter, context, paths: list[Path], worker: int, workers: int, chunk: int, pipes) -> None:
    """One worker: convert the records of this worker's chunks and send each chunk's results, then "end"."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the main process stops the workers,
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # with SIGTERM (not the command line's clean-up handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # held by the parent while forking
    # what the worker inherited (modules, the caller's data) is never garbage here: the collector leaves it out of
    # its passes (measured: 0.73 -> 0.6 s of CPU per 10,000 dialogue records across two workers)
    gc.freeze()
    for number, (reader, writer) in enumerate(pipes):  # only this worker's writing end stays open here
        reader.close()
        if number != worker:
            writer.close()
    out = pipes[worker][1]
    try:
        current, items, names = None, [], {}
        number = -1
        for path in paths:
            for line, record in converter.importer.read(path):
                number += 1
                index = number // chunk
                if index % workers != worker:
                    if current is not None:  # the first record past this worker's chunk: send it
                        out.send(("chunk", items, names))
                        current, items, names = None, [], {}
                    continue
                current = index
                items.extend(converter.record(context, path, line, record, names))
        if current is not None:
            out.send(("chunk", items, names))
        out.send(("end",))
    except BaseException as e:  # reported by the main process, which stops
        try:
            out.send(("error", f"{type(e).__name__}: {e}"))
        except OSError:
            pass  # the main process has gone
    finally:
        out.close()
