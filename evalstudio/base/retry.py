"""How often and how patiently evalstudio repeats a request that is safe to repeat."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import BadInput

ATTEMPTS_ENV = "EVALSTUDIO_RETRY_ATTEMPTS"  # tries in all for a request that is safe to repeat (default 5)


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
        """The seconds to wait before each retry: doubling from `delay`, at most `max_delay`, attempts - 1 of them."""
        for attempt in range(self.attempts - 1):
            yield min(self.delay * 2 ** attempt, self.max_delay)

    @classmethod
    def from_environment(cls) -> "RetryPolicy":
        """The default policy, with EVALSTUDIO_RETRY_ATTEMPTS tries in all when it is set (1: never repeat, for a
        script that should fail at once; more for a flaky network)."""
        given = os.environ.get(ATTEMPTS_ENV, "").strip()
        if not given:
            return cls()
        if not given.isascii() or not given.isdigit() or not 1 <= int(given) <= 100:
            raise BadInput(f"{ATTEMPTS_ENV}: expected a whole number of tries from 1 to 100, got {given[:20]!r}")
        return cls(attempts=int(given))
