"""What a gateway keeps in memory: participants' sessions, the task references it gave them, and rate limits."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

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
