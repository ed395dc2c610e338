"""Numbers as people read them."""

from __future__ import annotations


def percent(share: float) -> str:
    """A share as a percentage with the digits it needs (up to four significant), never rounded to a neighbour:
    a threshold of 0.825 is 82.5%, not the 82% that `:.0%` prints (and 41 of 50 correct, 82%, is below it).

    >>> percent(0.825), percent(0.75), percent(2 / 3), percent(0.0), percent(1.0)
    ('82.5%', '75%', '66.67%', '0%', '100%')
    """
    return f"{100 * share:.4g}%"
