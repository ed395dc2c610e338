"""Hosts emulated on one machine's CPUs for `benchmarks/gateway.py --paced/--launch --cpus ROLE=CPUS ...`: each part
of the run (the gateway's workers and sync writer, Label Studio's workers, PostgreSQL, the simulated participants)
runs on the CPUs named for it (sched_setaffinity on every thread of the part's process tree once it is started;
what it starts later inherits them). `gateway=0 label-studio=0 postgresql=0 participants=0` is one 1-core box;
`label-studio=1` beside it puts Label Studio's workers on a 1-core host of their own. An emulation: the "hosts"
share the machine's memory, caches and loopback network, and no network latency is added. Linux only."""

from __future__ import annotations

import os
from pathlib import Path

ROLES = ("gateway", "label-studio", "postgresql", "participants")


def parse(specs: list[str], cpus: int) -> dict[str, set[int]]:
    """`ROLE=CPUS` items (CPUS as `0`, `0,1` or `0-1`) as {role: CPU numbers}; an unknown role, a CPU this machine
    lacks or a role named twice is refused with the fix."""
    placement: dict[str, set[int]] = {}
    for spec in specs:
        role, _, value = spec.partition("=")
        if role not in ROLES:
            raise ValueError(f"--cpus {spec}: role {role!r} is not one of {', '.join(ROLES)}")
        if role in placement:
            raise ValueError(f"--cpus {spec}: {role} is placed twice; name each role once")
        chosen: set[int] = set()
        for piece in value.split(","):
            low, _, high = piece.partition("-")
            if not (low.isdigit() and (high.isdigit() or not high)):
                raise ValueError(f"--cpus {spec}: {piece!r} is not a CPU number or range (like 0, 0,1 or 0-1)")
            chosen |= set(range(int(low), int(high or low) + 1))
        if not chosen or max(chosen) >= cpus:
            raise ValueError(f"--cpus {spec}: this machine has CPUs 0-{cpus - 1}")
        placement[role] = chosen
    return placement


def describe(placement: dict[str, set[int]]) -> str:
    """The placement as one line: which role runs on which CPUs (every CPU when not placed)."""
    return "; ".join(f"{role} on CPU {','.join(map(str, sorted(placement[role])))}" if role in placement
                     else f"{role} on every CPU" for role in ROLES)


def pin(root: int, cpus: set[int] | None, children: bool = True) -> int:
    """Every thread of the process tree under `root` (itself included; without its children when not `children`) on
    `cpus` (nothing when None); the number of threads placed. A process that ends meanwhile is passed over."""
    if not cpus:
        return 0
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                text = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(text[text.rindex(")") + 2:].split()[1])
    tree, placed = {root}, 0
    while children:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        if not more:
            break
        tree |= more
    for pid in tree:
        try:
            threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in threads:
            try:
                os.sched_setaffinity(tid, cpus)
                placed += 1
            except OSError:
                pass
    return placed


def cpu_busy() -> list[float]:
    """CPU seconds each CPU of the machine has been busy (not idle, not waiting for IO) since boot, by CPU number."""
    busy = []
    for line in Path("/proc/stat").read_text().splitlines()[1:]:
        if not line.startswith("cpu"):
            break
        fields = [int(x) for x in line.split()[1:]]
        busy.append((sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK"))
    return busy
