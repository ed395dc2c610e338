"""The relay behind `evalstudio export`'s reading (evalstudio/labelstudio/relay.py): chunks fetched one at a time,
back to back, converted in order in the caller's thread only once the next chunk's request is out; stopping early
or a failed fetch asks for no more. No server: the fetches are functions that record what happened (the export
against a real Label Studio is in test_faults.py and test_export_e2e.py)."""

from __future__ import annotations

import gc
import threading

import pytest

from evalstudio.labelstudio.relay import (CLOSE, left_out_of_collections, one_process, regrouped, relayed, requests,
                                          sent_trace)


class Recorder:
    """fetch/convert functions that log every step and count the fetches running at once."""

    def __init__(self, fail_at: int | None = None):
        self.log: list[tuple[str, int]] = []
        self.running = self.most = 0
        self.lock = threading.Lock()
        self.fail_at = fail_at

    def fetch(self, chunk: int, on_sent) -> str:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.log.append(("fetch", chunk))
        try:
            if chunk == self.fail_at:
                raise ConnectionError(f"chunk {chunk} failed")
            on_sent()
            with self.lock:
                self.log.append(("sent", chunk))
            return f"body {chunk}"
        finally:
            with self.lock:
                self.running -= 1

    def convert(self, chunk: int, body: str) -> str:
        with self.lock:
            self.log.append(("convert", chunk))
        return f"{body} converted"


@pytest.mark.parametrize("at_once", [1, 2], ids=["one process", "several"])
@pytest.mark.parametrize("chunks", [0, 1, 2, 7], ids=lambda n: f"{n} chunks")
def test_chunks_come_in_order_at_once_at_most_each_converted_after_the_next_is_sent(chunks, at_once):
    recorder = Recorder()
    assert list(relayed(list(range(chunks)), recorder.fetch, recorder.convert, at_once)) == [
        f"body {k} converted" for k in range(chunks)]
    assert recorder.most <= at_once
    log = recorder.log
    assert sorted(k for what, k in log if what == "fetch") == list(range(chunks))
    for k in range(chunks - at_once):  # chunk k's conversion waits until the request its answer let go is out
        assert log.index(("sent", k + at_once)) < log.index(("convert", k))


@pytest.mark.parametrize("taken, fail_at, fetched", [
    (1, None, [0, 1]),  # the caller stops after the first page: the one request already out, and no more
    (0, 0, [0]),  # the first fetch fails: its error, nothing else asked for
    (1, 2, [0, 1, 2]),  # a later fetch fails: the pages before it, then its error, nothing after it
], ids=["stopped early", "first fails", "third fails"])
def test_stopping_or_a_failure_asks_for_no_more(taken, fail_at, fetched):
    recorder = Recorder(fail_at)
    pages = relayed(list(range(6)), recorder.fetch, recorder.convert)
    got = []
    if fail_at is None:
        got = [next(pages) for _ in range(taken)]
        pages.close()
    else:
        with pytest.raises(ConnectionError, match=f"chunk {fail_at} failed"):
            got.extend(pages)
    assert got == [f"body {k} converted" for k in range(taken if fail_at is None else fail_at)]
    assert [k for what, k in recorder.log if what == "fetch"] == fetched


@pytest.mark.parametrize("server, one", [
    ("WSGIServer/0.2 CPython/3.11.7", True),  # `label-studio start` (Django's development server)
    ("gunicorn", False), ("nginx/1.24.0", False), ("", False), (None, False)])
def test_a_one_process_server_is_known_by_its_name(server, one):
    assert one_process({} if server is None else {"server": server}) is one


def test_the_sent_trace_fires_once_the_request_is_out():
    seen = []
    trace = sent_trace(lambda: seen.append("sent"))["trace"]
    for name in ("connection.connect_tcp.started", "http11.send_request_headers.complete",
                 "http11.send_request_body.complete"):
        trace(name, {})
    assert seen == []
    trace("http11.receive_response_headers.started", {})
    assert seen == ["sent"] and CLOSE == {"Connection": "close"}


@pytest.mark.parametrize("count, page, most, sizes", [
    (0, 500, 998, []),
    (50, 500, 998, [50]),  # a small project: one request
    (333, 500, 998, [167, 166]),
    (2000, 500, 998, [998, 836, 166]),  # the benchmark's project: 3 requests where pages of 500 took 4
    (5000, 500, 998, [998, 998, 998, 998, 842, 166]),
    (50, 20, 998, [20, 20, 10]),  # a caller's small pages: one request a page
], ids=lambda v: str(v) if not isinstance(v, list) else None)
def test_requests_cut_the_ids_in_order_at_most_most_each(count, page, most, sizes):
    ids = list(range(101, 101 + 2 * count, 2))  # listed ids, not consecutive
    asked = requests(ids, page, most)
    assert [len(a) for a in asked] == sizes
    assert [i for a in asked for i in a] == ids and all(len(a) <= most for a in asked)


@pytest.mark.parametrize("requested, answered", [
    ([[1, 2, 3], [4, 5, 6, 7]], [[1, 2, 3], [4, 5, 6, 7]]),
    ([[1, 2], [3, 4, 5, 6, 7]], [[2, 1], [7, 3, 5, 4, 6]]),  # the server's order is not the pages'
    ([[1, 2, 3, 4, 5, 6, 7]], [[1, 3, 4, 6, 7]]),  # tasks 2 and 5 deleted meanwhile: their pages are short
    ([[1, 2, 3], [4, 5, 6, 7]], [[1, 2, 3, 9], [4, 5, 6, 7]]),  # a task nobody asked for is dropped
    ([[1], [2], [3], [4], [5], [6], [7]], [[1], [2], [3], [4], [5], [6], [7]]),
], ids=["aligned", "unordered", "deleted", "stray", "one id a request"])
def test_pages_are_given_whole_in_order_as_soon_as_their_requests_are_in(requested, answered):
    pages = [[1, 2], [3, 4, 5], [6, 7]]
    log = []

    def parsed():
        for asked, ids in zip(requested, answered):
            log.append(("in", asked[-1]))
            yield asked, [{"id": i} for i in ids]

    got = []
    for page, tasks in regrouped(parsed(), pages):
        log.append(("page", page[-1]))
        got.append((page, [t["id"] for t in tasks]))
    present = {i for ids in answered for i in ids}
    assert got == [(page, [i for i in page if i in present]) for page in pages]
    for page in pages:  # given as soon as the request that completed it is in, before the next one is read
        done = next(k for k, (what, ident) in enumerate(log) if what == "in" and ident >= page[-1])
        following = next((k for k, (what, _) in enumerate(log) if what == "in" and k > done), len(log))
        assert done < log.index(("page", page[-1])) < following


def test_the_objects_made_before_are_left_out_of_collections_inside_the_block_only():
    before = gc.get_freeze_count()
    with left_out_of_collections():
        assert gc.get_freeze_count() > before
        made_inside = [[]]
        made_inside[0].append(made_inside)  # a cycle made in the block is collected as usual
        del made_inside
        assert gc.collect() >= 1
    assert gc.get_freeze_count() == before
