"""A second "host" on this machine for tests and benchmarks of a network partition: a Linux network namespace with
two veth pairs to the machine, a front one (participants reach the host's gateway through it) and a back one
(the host reaches the ledger's PostgreSQL and Label Studio through it). `cut()` takes the machine's end of the back
link down: packets from the host are dropped (nothing is refused, nothing arrives), as in a real partition; the
front link stays up, so participants still reach the cut-off gateway and see what it tells them.

Services of the machine listen on 127.0.0.1; `forward()` puts a plain TCP forwarder on the back link's address of
the machine for each (it is never cut itself: the link is). Needs root (`ip netns add`); `available()` says why not
otherwise."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def available() -> str | None:
    """None when this process may create network namespaces, else why not."""
    name = f"evs-probe-{os.getpid()}"
    try:
        made = _ip("netns", "add", name, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"`ip netns add` could not run ({type(e).__name__})"
    if made.returncode:
        return f"`ip netns add` refused: {made.stderr.strip()[:120]}"
    _ip("netns", "delete", name, check=False)
    return None


class Host:
    """A network namespace `evs-<pid>` with a front and a back link to the machine (see the module docstring)."""

    made = 0  # hosts made by this process so far

    def __init__(self):
        n, k = os.getpid(), Host.made
        Host.made += 1
        self.name = f"evs-{n}-{k}"
        subnet = f"10.{100 + n % 100}.{(n // 100 + 61 * k) % 256}"  # two /30 of one 10.x.y.0/24 per host
        self.front_machine, self.front_host = f"{subnet}.1", f"{subnet}.2"
        self.back_machine, self.back_host = f"{subnet}.5", f"{subnet}.6"
        self.front, self.back = f"evf{n}-{k}", f"evb{n}-{k}"  # the machine's ends; the host's are <name>h
        self._forwarders: list[Forwarder] = []
        _ip("netns", "add", self.name)
        try:
            _ip("netns", "exec", self.name, "ip", "link", "set", "lo", "up")
            for link, machine, host in ((self.front, self.front_machine, self.front_host),
                                        (self.back, self.back_machine, self.back_host)):
                _ip("link", "add", link, "type", "veth", "peer", "name", f"{link}h")
                _ip("link", "set", f"{link}h", "netns", self.name)
                _ip("addr", "add", f"{machine}/30", "dev", link)
                _ip("link", "set", link, "up")
                _ip("netns", "exec", self.name, "ip", "addr", "add", f"{host}/30", "dev", f"{link}h")
                _ip("netns", "exec", self.name, "ip", "link", "set", f"{link}h", "up")
        except BaseException:
            self.remove()
            raise

    def command(self, *argv: str) -> list[str]:
        """`argv` run inside the host (ip netns exec; the process keeps its pid)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def forward(self, port: int) -> int:
        """A forwarder on the back link's machine address to 127.0.0.1:`port`; returns its port (the same one)."""
        self._forwarders.append(Forwarder((self.back_machine, port), ("127.0.0.1", port)))
        return port

    def cut(self, cut: bool) -> None:
        """Take the machine's end of the back link down (True) or up again (False)."""
        _ip("link", "set", self.back, "down" if cut else "up")

    def remove(self) -> None:
        for forwarder in self._forwarders:
            forwarder.stop()
        for link in (self.front, self.back):
            _ip("link", "delete", link, check=False)  # (its peer goes with it)
        _ip("netns", "delete", self.name, check=False)


class Forwarder:
    """A TCP forwarder from `listen` to `target` (host, port), on a thread of its own. Without namespaces it is the
    campaign's fallback cut (`cut`): while cut it forwards nothing either way and new connections wait. Unlike a link
    taken down, its own TCP stack still acknowledges what is sent: a cut looks to the gateway like a database that
    has stopped answering, not like a partition."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]):
        self.listen, self.target, self.port = listen, target, listen[1]
        self.ready = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()
        if not self.ready.wait(30):
            raise RuntimeError(f"the forwarder on {listen[0]}:{listen[1]} did not start")

    def _serve(self) -> None:
        async def pump(reader, writer):
            try:
                while data := await reader.read(65536):
                    await self._open.wait()
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def handle(reader, writer):
            await self._open.wait()
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

        async def main():
            self._open = asyncio.Event()
            self._open.set()
            server = await asyncio.start_server(handle, *self.listen)  # (serving from here)
            loop = asyncio.get_running_loop()
            self._call = loop.call_soon_threadsafe
            self._stop = lambda: loop.call_soon_threadsafe(server.close)
            self.ready.set()
            await asyncio.Event().wait()  # the loop runs as long as the process: its connections end with the link

        asyncio.run(main())

    def cut(self, cut: bool) -> None:
        """Hold everything (True), or forward again (False)."""
        self._call(self._open.clear if cut else self._open.set)

    def stop(self) -> None:
        """No more connections (those open end with the link)."""
        self._stop()


def wait_until(condition, what: str, limit: float = 300.0, step: float = 0.2):
    """Polls `condition` until it gives a true value (returned); a state waited for, never a duration: `limit` only
    bounds a failure."""
    deadline = time.monotonic() + limit
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached within {limit:.0f} s: {what}")
        time.sleep(step)
