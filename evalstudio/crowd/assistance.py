"""Which of a participant's tasks are shown with the model's prediction and which without: the automation-bias design
of ESA-AI (Zouhar, Kocmi & Sachan 2024), `unassisted_share:` beside `prefill:` in projects.yaml.

The draw is per participant: their tasks of a part, in the order the gateway served them, fall into blocks of B
(the denominator of the share as a fraction with a denominator of at most 20: 0.25 -> 1/4, B = 4), and in each block
exactly A of the B positions (the numerator) are unassisted, at positions drawn from a keyed hash (HMAC-SHA256) of
the study's secret seed, the participant, the part and the block. So the share holds for every participant after
each block (and within one task of it in between), positions are unpredictable to anyone without the seed, and
since each participant's task order is their own a task is seen assisted by some and unassisted by others. The seed
lives in the ledger (a study setting made once), the positions come from the ledger's record of what was served: a
restart or a second gateway process decides the same, and nothing a browser sends enters the draw."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from fractions import Fraction

SEED_SETTING = "unassisted_seed"  # the study's secret seed of the draw (settings table of the ledger)
MAX_BLOCK = 20


def design_share(share: float) -> Fraction:
    """The share as drawn: the fraction nearest `share` with a denominator of at most MAX_BLOCK (0.25 -> 1/4).

    >>> design_share(0.25), design_share(0.33), design_share(0.15)
    (Fraction(1, 4), Fraction(1, 3), Fraction(3, 20))
    """
    drawn = Fraction(share).limit_denominator(MAX_BLOCK)
    return drawn if 0 < drawn < 1 else Fraction(1 if drawn <= 0 else MAX_BLOCK - 1, MAX_BLOCK)


def unassisted(seed: str, participant: str, part: str, position: int, share: float) -> bool:
    """Whether the participant's `position`-th task of `part` (from 1, in serving order) is shown without the
    prediction: in each block of B positions exactly A are, where A/B = design_share(share)."""
    if position < 1:
        raise ValueError(f"position {position}: a participant's tasks are counted from 1")
    drawn = design_share(share)
    size, block, at = drawn.denominator, (position - 1) // drawn.denominator, (position - 1) % drawn.denominator

    def key(i: int) -> bytes:
        message = f"{participant.lower()}\x00{part}\x00{block}\x00{i}".encode()
        return hmac.new(seed.encode(), message, hashlib.sha256).digest()

    ranked = sorted(range(size), key=key)
    return at in ranked[:drawn.numerator]


def new_seed() -> str:
    """A fresh secret seed for a study's draw."""
    return secrets.token_hex(32)


class Assisted:
    """The ledger's record of the draw (a mixin of evalstudio.crowd.ledger.Ledger): the seed, a task's position in
    its participant's part, and each answer's condition as shown."""

    def assistance_seed(self) -> str:
        """The study's secret seed of the draw, made the first time any process asks."""
        return self.setting(SEED_SETTING, make=new_seed)

    def position_in_part(self, ref: str) -> int:
        """The served task's position among its participant's tasks of its part (from 1, in serving order)."""
        with self._read() as tx:
            row = tx.one("SELECT COUNT(*) FROM refs r JOIN refs o ON o.participant = r.participant AND o.part = r.part "
                         "AND o.number <= r.number WHERE r.ref = ?", (ref,))
        return int(row[0])

    def set_assisted(self, ref: str, assisted: bool, prediction: int | None) -> None:
        """Record how the task was shown: with the prediction (`prediction`: its id in Label Studio) or without."""
        with self._write() as tx:
            tx.run("UPDATE refs SET assisted = ?, prediction = ? WHERE ref = ?", (int(assisted), prediction, ref))

    def assisted_of(self, ref: str) -> tuple[bool | None, int | None]:
        """(shown with the prediction? None: not a part with prefill, or not answered yet; the prediction's id)."""
        with self._read() as tx:
            row = tx.one("SELECT assisted, prediction FROM refs WHERE ref = ?", (ref,))
        if row is None or row[0] is None:
            return None, None
        return bool(row[0]), None if row[1] is None else int(row[1])

    def conditions(self) -> dict[int, bool]:
        """Label Studio annotation id -> whether its answer was shown with the prediction, for every answer of a
        prefilled part that Label Studio holds (the ledger's record, kept when Label Studio lost the prediction)."""
        with self._read() as tx:
            rows = tx.all("SELECT annotation_id, assisted FROM refs "
                          "WHERE annotation_id IS NOT NULL AND assisted IS NOT NULL")
        return {int(a): bool(s) for a, s in rows}
