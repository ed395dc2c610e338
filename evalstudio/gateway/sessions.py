"""What a gateway keeps: participants' sessions, the task references it gave them and rate limits (in memory), and
each participant's counterbalanced list (in the participants folder)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from ..credentials import write_private

SESSION_HOURS = 24


class Limiter:
    """At most `limit` events per key within `seconds` (a sliding window)."""

    def __init__(self, limit: int, seconds: float = 60.0):
        self.limit, self.seconds = limit, seconds
        self.events: dict[str, deque] = {}

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        events = self.events.setdefault(key, deque())
        while events and events[0] < now - self.seconds:
            events.popleft()
        if len(events) >= self.limit:
            return False
        events.append(now)
        if len(self.events) > 100_000:  # forget idle keys
            self.events = {k: v for k, v in self.events.items() if v and v[-1] >= now - self.seconds}
        return True


@dataclass
class Ref:
    task_id: int
    part: str
    number: int
    annotation_id: int | None = None
    sent: bool = False  # a submission went out: if its answer was lost, Label Studio may have the annotation


@dataclass
class Session:
    participant: str
    user_id: int | None
    token: str = field(repr=False)
    expires: float
    counts: dict[str, int] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    refs: dict[str, Ref] = field(default_factory=dict)
    history: dict[str, list[str]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ListAssignments:
    """Which counterbalanced list each participant works in, per entry: kept in the participants folder
    (lists.json, private), so that a participant stays in their list across sessions and gateway restarts."""

    FILE = "lists.json"

    def __init__(self, folder):
        self.path = folder / self.FILE
        self.lock = threading.Lock()
        self.assigned: dict[str, dict[str, int]] = {}
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = {}
        if isinstance(loaded, dict):
            self.assigned = {str(entry): {str(p): int(n) for p, n in people.items() if isinstance(n, int)}
                             for entry, people in loaded.items() if isinstance(people, dict)}

    def get(self, entry: str, participant: str) -> int | None:
        return self.assigned.get(entry, {}).get(participant)

    def assign(self, entry: str, participant: str, numbers: list[int], worked: int | None) -> int:
        """The participant's list: `worked` (the list with their annotations) if given, else the list with the
        fewest participants (the lowest number on a tie); written to the file before it is used."""
        with self.lock:
            people = self.assigned.setdefault(entry, {})
            if participant in people:
                return people[participant]
            sizes = {n: 0 for n in numbers}
            for n in people.values():
                if n in sizes:
                    sizes[n] += 1
            people[participant] = worked if worked in sizes else min(numbers, key=lambda n: (sizes[n], n))
            write_private(self.path, json.dumps(self.assigned, indent=1, sort_keys=True))
            return people[participant]
