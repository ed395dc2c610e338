"""Requests to one server back to back, one at a time from a server that serves from one process: each is sent as
soon as the one before it has answered, and what came back is worked on in the caller's thread meanwhile, only
once the next request is on its way.

Why (measured on `label-studio start`, Django's one-process server, 2,000 tasks with 10,000 error spans,
benchmarks/span_export.py): two export requests at once made Label Studio spend about 0.5 s more processor time on
the same tasks than one after the other (its threads take turns for Python's interpreter lock), and ended
together, so that both chunks were parsed and converted after its last byte. One request at a time leaves the
server idle only while the next request travels; a long call in C that does not let other threads run (`json.loads`
of a 1.7 MB chunk) must therefore not start before that request has gone out, or the server waits for it.
A server of several processes (gunicorn workers: `evalstudio server --workers`) serves two at once in about half
the time (docs/benchmarks.md, 2026-11-25), so it is asked for two at a time, as before."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from itertools import accumulate
from typing import Any, TypeVar

Chunk = TypeVar("Chunk")
# request headers for a fresh connection: Django's development server (`label-studio start`) writes a response's
# headers and body in separate sends without TCP_NODELAY, so on a reused connection the body waits for the client's
# delayed acknowledgement (measured: a one-task export 0.07 s on a reused connection, 0.03 s on a new one)
CLOSE = {"Connection": "close"}


@contextmanager
def left_out_of_collections() -> Iterator[None]:
    """Python's cyclic garbage collector leaves the objects that exist now out of its collections until the block
    ends (gc.freeze). Parsing export chunks makes hundreds of thousands of objects, which set off full collections;
    each walked the whole heap of the process (pandas, the SDK: measured 68-83 ms each), and one after the last
    chunk came after the server's last byte. Objects made in the block are collected as usual."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def one_process(headers) -> bool:
    """Whether a response's headers name Django's development server (`label-studio start`: "WSGIServer/0.2
    CPython/3.11"), which serves every request from one process, by turns. gunicorn and uWSGI (several processes:
    two requests at once take about half the time) and a proxy in front (which hides what serves behind it) name
    themselves otherwise, and are asked two at a time, as before."""
    return str(headers.get("server") or "").startswith("WSGIServer/")


def sent_trace(on_sent: Callable[[], None]) -> dict[str, Any]:
    """httpx request extensions that call `on_sent` once the request is sent (httpcore's trace: the response's
    headers are being waited for)."""
    def trace(name: str, info: dict) -> None:
        if name.endswith("receive_response_headers.started"):
            on_sent()
    return {"trace": trace}


def relayed(chunks: Sequence[Chunk], fetch: Callable[[Chunk, Callable[[], None]], Any],
            convert: Callable[[Chunk, Any], Any], at_once: int = 1) -> Iterator[Any]:
    """convert(chunk, fetch(chunk, on_sent)) of each chunk, in order. `fetch` runs in worker threads, `at_once` at
    a time, each started as soon as the one `at_once` before it returns, and calls `on_sent` once its (first)
    request is sent; `convert` runs in the caller's thread once the request that the chunk's answer let go is sent.
    Memory: at most at_once + 1 fetched chunks and the one being converted. The caller stopping early, or a fetch
    failing, asks for no more."""
    answered = [threading.Event() for _ in chunks]
    sent = [threading.Event() for _ in chunks]
    stopped = threading.Event()

    def work(k: int):
        try:
            if k >= at_once:
                answered[k - at_once].wait()  # at most `at_once` requests at the server
            if stopped.is_set():
                return None
            return fetch(chunks[k], sent[k].set)
        except BaseException:
            stopped.set()  # before the next fetch may start: it asks for nothing
            raise
        finally:  # (also when it failed: nothing waits for a request that will not come)
            sent[k].set()
            answered[k].set()

    with ThreadPoolExecutor(at_once + 1, thread_name_prefix="relay") as pool:
        futures: dict[int, Any] = {}
        try:
            for k in range(len(chunks)):
                for j in range(k, min(k + at_once + 1, len(chunks))):
                    if j not in futures:
                        futures[j] = pool.submit(work, j)
                got = futures.pop(k).result()
                if k + at_once < len(chunks):
                    sent[k + at_once].wait()
                yield convert(chunks[k], got)
        finally:
            stopped.set()
            for future in futures.values():
                future.cancel()



def requests(ids: Sequence[int], page: int, most: int) -> list[list[int]]:
    """The ids each request asks for, when pages of `page` ids are yielded and a request may carry `most`. Pages
    smaller than half of `most` (a caller's small pages): one request a page. Otherwise requests of `most` ids across
    pages (measured: Label Studio spends about 0.2 s less on 2,000 tasks asked for 998 ids at a time than 500, about
    what its own one-request export costs), and a last one of a sixth of that, which the server serves while what
    came before it is converted, so that little is left after its last byte."""
    count, last = len(ids), max(1, most // 6)
    if 2 * page < most:
        sizes = [min(page, count - start) for start in range(0, count, page)]
    elif count <= 2 * last:
        sizes = [count] if count else []
    else:
        rest = count - last
        sizes = [most] * (rest // most) + ([rest % most] if rest % most else []) + [last]
    cuts = list(accumulate(sizes, initial=0))
    return [list(ids[a:b]) for a, b in zip(cuts, cuts[1:])]


def regrouped(parsed: Iterator[tuple[list[int], list[dict]]],
              pages: Sequence[list[int]]) -> Iterator[tuple[list[int], list[dict]]]:
    """(a page's ids, its tasks in id order) of each page, as soon as the requests covering it are in. `parsed`
    gives (a request's ids, the tasks it answered); requests and pages cut the same sequence of ids, in order. A task
    answered for an id not asked for is dropped; memory holds the tasks of pages not yet complete."""
    held: dict[int, list[dict]] = {}
    pages = iter(pages)
    page = next(pages, None)
    covered = ended = 0  # ids asked for so far; ids of the pages given so far
    for asked, tasks in parsed:
        wanted = set(asked)
        covered += len(asked)
        for task in tasks:
            if task["id"] in wanted:
                held.setdefault(task["id"], []).append(task)
        while page is not None and ended + len(page) <= covered:
            ended += len(page)
            yield page, [task for ident in page for task in held.pop(ident, [])]
            page = next(pages, None)
