"""Where the CPU goes during a benchmark run, from /proc: CPU seconds (user + system) per part of the run, sampled
every second (a process that ends between two samples loses at most its last second), with the whole machine's busy
time from /proc/stat, so the other load on a shared machine is seen too. Also the machine's speed (a fixed piece of
work timed before the run) and `--busy N` (N processes spinning beside the run). Linux only."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parents[1]


def _stat(path: str) -> tuple[str, int, int, float] | None:
    """(thread/process name, parent pid, session id, CPU seconds) of /proc/<pid>[/task/<tid>]/stat."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
    return name, int(rest[1]), int(rest[3]), (int(rest[11]) + int(rest[12])) / TICK


def machine_busy() -> float:
    """CPU seconds every core of the machine has been busy (not idle, not waiting for IO) since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK


class CpuUse:
    """CPU seconds per part while in a `with`: `parts` maps a part's name to a function giving the root pids of its
    process trees (a session id also matches: a server started in its own session), each process counted in the
    first part that has it; a part named in `alone` is its roots' processes without their children (the benchmark's
    own process, whose children are the servers); `thread_names` splits a part's threads by their OS name (the
    gateway's sync writer, a thread named `evalstudio-sync`) into (OS name, part name)."""

    def __init__(self, parts: dict[str, Callable[[], set[int]]], thread_names: dict[str, tuple[str, str]],
                 alone: tuple[str, ...] = ()):
        self.parts, self.thread_names, self.alone = parts, thread_names, alone
        self.seen: dict[tuple[int, int], tuple[str, float]] = {}  # (pid, tid) -> (part, its CPU seconds as last seen)
        self.start_seen: dict[tuple[int, int], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self, first: bool = False) -> None:
        procs = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                stat = _stat(f"/proc/{entry.name}/stat")
                if stat is not None:
                    procs[int(entry.name)] = stat
        children: dict[int, list[int]] = {}
        for pid, (_, ppid, _, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        done: set[int] = set()
        for part, roots in ((part, roots()) for part, roots in self.parts.items()):
            todo = [pid for pid, (_, _, sid, _) in procs.items() if pid in roots or (
                sid in roots and part not in self.alone)]
            while todo:
                pid = todo.pop()
                if pid in done or pid not in procs:
                    continue
                done.add(pid)
                if part not in self.alone:
                    todo.extend(children.get(pid, []))
                split = self.thread_names.get(part)
                tasks = os.listdir(f"/proc/{pid}/task") if split and os.path.isdir(f"/proc/{pid}/task") else [pid]
                for tid in tasks:
                    stat = _stat(f"/proc/{pid}/task/{tid}/stat") if split else procs[pid]
                    if stat is None:
                        continue
                    name = split[1] if split and stat[0] == split[0] else part
                    key = (pid, int(tid))
                    if first:
                        self.start_seen[key] = stat[3]
                    self.seen[key] = (name, stat[3])

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self._sample()

    def __enter__(self) -> "CpuUse":
        self._sample(first=True)
        self.t0, self.busy0 = time.monotonic(), machine_busy()
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self.seconds, self.busy = time.monotonic() - self.t0, machine_busy() - self.busy0

    def table(self) -> list[tuple[str, float]]:
        """(part, CPU seconds during the run), and the rest of the machine's busy time ('everything else')."""
        totals: dict[str, float] = {}
        for key, (name, seconds) in self.seen.items():
            totals[name] = totals.get(name, 0.0) + seconds - self.start_seen.get(key, 0.0)
        rows = sorted(totals.items(), key=lambda row: -row[1])
        return [*rows, ("everything else on the machine", max(0.0, self.busy - sum(totals.values())))]

    def print(self) -> None:
        capacity = self.seconds * (os.cpu_count() or 1)
        print(f"CPU during the run ({self.seconds:.0f} s x {os.cpu_count()} cores = {capacity:.0f} core-seconds; "
              f"busy {self.busy:.0f}, {100 * self.busy / capacity:.0f}%):")
        for name, seconds in self.table():
            print(f"  {name:<44}{seconds:>8.1f} s{100 * seconds / capacity:>6.1f}% of the machine")


def speed() -> tuple[float, float]:
    """The machine's speed: wall and CPU seconds of `benchmarks/analysis.py --quick` (100k ratings), run alone."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "analysis.py"), "--quick"], check=True,
                   stdout=subprocess.DEVNULL, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - t0, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def busy(n: int) -> list[subprocess.Popen]:
    """n processes that spin (one busy core each) until stopped."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
            for _ in range(n)]


def load() -> str:
    """The load averages (1, 5, 15 minutes)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
