"""Several gateway processes on one port (`evalstudio gateway --workers N`): the parent opens the listening socket,
forks N workers that accept on it (the kernel spreads the connections), and starts a new worker when one dies.
The workers share nothing but the study's ledger, which is all they need: any of them serves any participant."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time


def _worker(config, options: dict, sock: socket.socket) -> None:
    import uvicorn

    from .app import build_app

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers (SIGTERM)
    server = uvicorn.Server(uvicorn.Config(build_app(config), **options))
    server.run(sockets=[sock])


def serve(config, workers: int, options: dict) -> None:
    """Run `workers` gateway processes on options' host and port until SIGINT or SIGTERM."""
    from evalstudio.crowd.ledger import close_all

    close_all()  # each worker opens its own connection to the ledger
    family = socket.AF_INET6 if ":" in options["host"] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((options["host"], options["port"]))
    sock.listen(2048)
    sock.set_inheritable(True)
    children: set[int] = set()
    stopping = {"now": False}

    def start() -> None:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _worker(config, options, sock)
            except BaseException:  # noqa: BLE001 - a worker's failure ends that worker; the parent starts another
                code = 1
            os._exit(code)
        children.add(pid)

    def stop(*_) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for _ in range(workers):
        start()
    try:
        while not stopping["now"]:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid and pid in children:
                children.discard(pid)
                print(f"gateway worker {pid} ended; starting another", file=sys.stderr)
                time.sleep(0.5)  # a worker that cannot start is not restarted in a tight loop
                start()
            time.sleep(0.2)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.time() + 20
        for pid in list(children):
            while time.time() < deadline:
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if done:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        sock.close()
