"""How often and how patiently evalstudio repeats a request that is safe to repeat."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: `attempts` tries in all, waiting delay * 2**k (at most max_delay) in between."""

    attempts: int = 5
    delay: float = 0.5
    max_delay: float = 20.0

    def __post_init__(self):
        if self.attempts < 1 or self.delay < 0 or self.max_delay < 0:
            raise ValueError(f"invalid retry policy {self}: attempts must be >= 1 and delays >= 0")

    def delays(self) -> Iterator[float]:
        for attempt in range(self.attempts - 1):
            yield min(self.delay * 2 ** attempt, self.max_delay)
