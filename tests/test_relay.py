"""The relay behind `evalstudio export`'s reading (evalstudio/labelstudio/relay.py): chunks fetched one at a time,
back to back, converted in order in the caller's thread only once the next chunk's request is out; stopping early
or a failed fetch asks for no more. No server: the fetches are functions that record what happened (the export
against a real Label Studio is in test_faults.py and test_export_e2e.py)."""

from __future__ import annotations

import threading

import pytest

from evalstudio.labelstudio.relay import CLOSE, one_process, relayed, sent_trace


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
