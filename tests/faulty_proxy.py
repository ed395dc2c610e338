"""A real network fault between evalstudio and a real Label Studio: an HTTP proxy on loopback that forwards
every request and, for requests matching a rule, fails before forwarding, or after Label Studio has done
the work (wrong status, dropped connection, or an answer slower than the client waits). It passes Label Studio's
Server header on (a client sees the server it would see without the proxy) and records how many requests it
forwarded to each path at once (`most_at_once`)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

HOP_HEADERS = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding", "content-encoding",
               "keep-alive"}


@dataclass
class Fault:
    """`action` for the `times` next requests whose method is `method` and whose path contains `path`,
    after letting `skip` matching requests through.

    action: "status-before" (answer `status`, Label Studio never sees the request), "status-after"
    (Label Studio does the work, the client gets `status`), "drop-after" (work done, connection closed
    without an answer), "slow-after" (work done, answer held back `delay` seconds), "hold-before" (the request is
    held, Label Studio does not see it, until the test sets `release`; `forwarded` is set once Label Studio has
    answered it: a request that a frozen server takes in and works on later, after its client gave up)."""

    method: str
    path: str
    action: str
    times: int = 1
    skip: int = 0
    status: int = 502
    delay: float = 0.0
    release: threading.Event = field(default_factory=threading.Event)
    forwarded: threading.Event = field(default_factory=threading.Event)

    def __deepcopy__(self, memo) -> "Fault":
        """A copy with events of its own (a test's table of faults is copied for each run)."""
        return replace(self, release=threading.Event(), forwarded=threading.Event())

    def __post_init__(self):
        if self.action not in {"status-before", "status-after", "drop-after", "slow-after", "hold-before"}:
            raise ValueError(f"unknown fault action {self.action!r}")


class FaultyProxy:
    def __init__(self, target: str, faults: list[Fault] = ()):
        self.target = target.rstrip("/")
        self.faults = list(faults)
        self.seen: list[tuple[str, str, str]] = []  # (method, path, what happened)
        self.forwarding: dict[str, int] = {}  # path (without its query) -> requests being forwarded to it now
        self.most_at_once: dict[str, int] = {}  # path (without its query) -> the most ever forwarded to it at once
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and fault.path in path:
                    if fault.skip > 0:
                        fault.skip -= 1
                        return None
                    fault.times -= 1
                    return fault
        return None

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            upstream = None  # the Server header of Label Studio's answer being passed on

            def log_message(self, *args):
                pass

            def version_string(self):  # Label Studio's own server name, as a client without the proxy sees it
                return self.upstream or super().version_string()

            def _respond(self, status: int, headers, body: bytes):
                self.send_response(status)
                for key, value in (headers.items() if isinstance(headers, dict) else headers):
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (slow-after)
                    self.close_connection = True

            def _handle(self):
                self.upstream = None
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fault = proxy._fault_for(self.command, self.path)
                what = fault.action if fault else "forwarded"
                proxy.seen.append((self.command, self.path, what))
                if fault and fault.action == "status-before":
                    return self._respond(fault.status, {"Content-Type": "application/json"}, b'{"detail": "injected fault"}')
                if fault and fault.action == "hold-before":
                    fault.release.wait()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                # a client per request: no cookie jar of the proxy's own, so each request carries its client's cookies
                # and only those (a sign-in through the proxy works as it does directly)
                where = self.path.split("?")[0]
                with proxy._lock:
                    proxy.forwarding[where] = proxy.forwarding.get(where, 0) + 1
                    proxy.most_at_once[where] = max(proxy.most_at_once.get(where, 0), proxy.forwarding[where])
                try:
                    with httpx.Client(base_url=proxy.target, timeout=300) as forward:
                        answer = forward.request(self.command, self.path, headers=headers, content=body)
                finally:
                    with proxy._lock:
                        proxy.forwarding[where] -= 1
                if fault:
                    fault.forwarded.set()
                if fault and fault.action == "status-after":
                    return self._respond(fault.status, {"Content-Type": "application/json"}, b'{"detail": "injected fault"}')
                if fault and fault.action == "drop-after":
                    self.close_connection = True
                    return
                if fault and fault.action == "slow-after":
                    time.sleep(fault.delay)
                # every header as sent, repeated ones too (a sign-in sets two cookies)
                out = [(k, v) for k, v in answer.headers.multi_items() if k.lower() not in HOP_HEADERS | {"server"}]
                self.upstream = answer.headers.get("server")
                self._respond(answer.status_code, out, answer.content)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        return Handler

    def count(self, method: str, path: str, what: str | None = None) -> int:
        return sum(1 for m, p, w in self.seen if m == method and path in p and (what is None or w == what))

    def __enter__(self) -> "FaultyProxy":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
