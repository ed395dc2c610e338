"""What the ledger records of a study's front matter (a part of the Ledger): each step a participant took (consent,
a practice item, the background questions, the exit survey), once, with the server's time. A step recorded stays as
first given: a participant who declined consent, or answered a practice item wrong, cannot answer it again."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One front-matter step of a participant, as the ledger holds it."""
    participant: str  # the ledger's key (lower-case id)
    step: str  # consent, practice:N, background or exit
    at: float  # when the ledger recorded it (server time)
    answer: str  # JSON
    outcome: str | None  # consent: given / declined; practice: correct / wrong


class FrontSteps:
    """The front matter's steps (a part of Ledger, which gives it its transactions)."""

    def take_step(self, participant: str, step: str, answer: str, outcome: str | None = None) -> Step:
        """Record the participant's `step` unless it is recorded already: the step as the ledger holds it (the
        first answer stays)."""
        who = participant.lower()
        with self._write() as tx:
            tx.run("INSERT INTO front (participant, step, at, answer, outcome) VALUES (?, ?, ?, ?, ?) "
                   "ON CONFLICT (participant, step) DO NOTHING", (who, step, time.time(), answer, outcome))
            row = tx.one("SELECT participant, step, at, answer, outcome FROM front WHERE participant = ? AND step = ?",
                         (who, step))
        return Step(row[0], row[1], float(row[2]), row[3], row[4])

    def steps_of(self, participant: str) -> dict[str, Step]:
        """step -> the participant's record of it."""
        with self._read() as tx:
            rows = tx.all("SELECT participant, step, at, answer, outcome FROM front WHERE participant = ?",
                          (participant.lower(),))
        return {r[1]: Step(r[0], r[1], float(r[2]), r[3], r[4]) for r in rows}

    def all_steps(self) -> list[Step]:
        """Every participant's steps, in the order recorded (for status, export and publish)."""
        with self._read() as tx:
            rows = tx.all("SELECT participant, step, at, answer, outcome FROM front ORDER BY at, participant, step")
        return [Step(r[0], r[1], float(r[2]), r[3], r[4]) for r in rows]
