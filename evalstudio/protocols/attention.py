"""Attention checks made by corrupting a translation, as ESA does them (Kocmi et al. 2024, "Error Span
Annotation", WMT; Appraise's campaigns, where each batch holds a few copies of its own segments with a phrase of the
translation spoiled): an attention check is a copy of a task whose shown text has a phrase replaced or dropped, and
it must score lower than the task it copies, by the same annotator. Declared in projects.yaml:

    attention_checks:
      corrupt: target        # the shown field whose text is spoiled
      criterion: score       # the copy must score lower on it than the original
      share: 0.12            # about this share of the imported tasks get a copy (ESA: 12 of a batch of 100)
      how: replace           # replace: a phrase replaced by words from elsewhere in the text; drop: the phrase removed

The import makes the copies (tasks/scanning.py); the copy's shown fields are the original's with the one text
spoiled, so nothing the participant receives tells it apart; what it is (the original's id, the spoiled characters)
stays in its meta. The gateway serves a copy only to a participant who answered or holds its original, later in
their order (tasks/order.py). `status` and `approvals` score the checks with the gold items (crowd/study.py), and the analyses
leave them out. The phrase length follows ESA's rule of a few words, longer for longer segments; where ESA takes
the replacement words from another segment's translation, evalstudio takes them from another place of the same
translation, so each copy is made from its task alone and a second import makes the same copies."""

from __future__ import annotations

import hashlib
import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CHECK_FIELD = "attention_check"  # in a copy's meta: {of: the original's evalstudio_id, how, start, end}
CHECK_COLUMN = "attention_check_of"  # in every export's tables: a check's rows hold the original's evalstudio_id
# words in the segment (up to) -> words spoiled: ESA's rule of a longer phrase for a longer segment
PHRASE_WORDS = ((5, 2), (8, 3), (15, 4), (20, 5))
LONGEST_PHRASE = 6


class AttentionChecks(BaseModel):
    """projects.yaml `attention_checks:`: which shown text is spoiled, on which criterion it must score lower."""

    model_config = ConfigDict(extra="forbid")
    corrupt: str
    criterion: str
    share: float = Field(gt=0, le=0.5)
    how: Literal["replace", "drop"] = "replace"


def _draw(key: str, salt: str) -> random.Random:
    return random.Random(int(hashlib.sha256(f"{salt}|{key}".encode()).hexdigest()[:16], 16))


def chosen(key: str, share: float) -> bool:
    """Whether the task of this id gets an attention check (the same on every import of it)."""
    return _draw(key, "attention-check").random() < share


def phrase_words(n_words: int) -> int:
    """How many words ESA's rule spoils in a segment of `n_words` words."""
    return next((k for most, k in PHRASE_WORDS if n_words <= most), LONGEST_PHRASE)


def corrupt(text: str, key: str, how: str) -> tuple[str, int, int] | None:
    """(the spoiled text, start, end of the spoiled characters in it) or None for a text too short to spoil: `drop`
    removes a phrase (end == start: where it was), `replace` puts in its place as many words taken from another
    place of the text (not overlapping it). Words are split on spaces, as ESA does.

    >>> corrupt("one two three four five six seven eight nine ten", "k", "drop")[0].split() != \\
    ...     "one two three four five six seven eight nine ten".split()
    True
    """
    words = text.split(" ")
    k = phrase_words(len(words))
    if len(words) < (2 * k if how == "replace" else k + 1):
        return None
    rng = _draw(key, "attention-phrase")
    places = range(len(words) - k + 1)
    if how == "drop":
        at = rng.choice(places)
        kept = words[:at] + words[at + k:]
        start = len(" ".join(words[:at])) + (1 if at and at < len(kept) else 0)
        return " ".join(kept), start, start
    pairs = [(at, source) for at in places for source in places  # the phrase, and the other words put there
             if (source + k <= at or source >= at + k) and words[source:source + k] != words[at:at + k]]
    if not pairs:
        return None
    at, source = rng.choice(pairs)
    new = words[:at] + words[source:source + k] + words[at + k:]
    start = len(" ".join(words[:at])) + (1 if at else 0)
    end = start + len(" ".join(words[source:source + k]))
    return " ".join(new), start, end


def check_of(data: dict, spec: AttentionChecks, id_field: str) -> dict | None:
    """The attention check copied from one task's data (its fields as the import sends them), or None when the
    task is not chosen or its text too short; the copy's id looks like any task's (a digest where the original's
    has one)."""
    key = str(data.get(id_field))
    text = data.get(spec.corrupt)
    if not isinstance(text, str) or not chosen(key, spec.share):
        return None
    spoiled = corrupt(text, key, spec.how)
    if spoiled is None or spoiled[0] == text:
        return None
    new, start, end = spoiled
    head, colon, tail = key.rpartition(":")  # the copy's id has the form of any other (its meta says what it is)
    digest = hashlib.sha256(f"attention-check|{key}".encode()).hexdigest()[:max(len(tail), 12)]
    return {**data, spec.corrupt: new, id_field: f"{head}{colon}{digest}" if colon else f"{key}-{digest}",
            CHECK_FIELD: {"of": key, "how": spec.how, "start": start, "end": end},
            "gold": {spec.criterion: {"below": key}}}


def original_of(fields: dict) -> str | None:
    """The evalstudio_id of the task an attention check copies (its meta's CHECK_FIELD), None for any other task."""
    check = fields.get(CHECK_FIELD)
    of = check.get("of") if isinstance(check, dict) else None
    return None if of is None else str(of)


def attention_problems(project) -> list[str]:
    """`attention_checks:` against the entry: the spoiled field is a text the config shows, the criterion a number
    the copy can score lower on."""
    spec = project.attention_checks
    if spec is None:
        return []
    problems = []
    if spec.corrupt not in project.data_fields():
        problems.append(f"attention_checks.corrupt: '{spec.corrupt}' is not a field the labeling config shows "
                        f"({', '.join(sorted(project.data_fields()))})")
    criterion = project.criteria.get(spec.criterion)
    if criterion is None or not criterion.is_numeric:
        numeric = [name for name, c in project.criteria.items() if c.is_numeric]
        problems.append(f"attention_checks.criterion: '{spec.criterion}' is not a numeric criterion of this entry "
                        f"(the copy must score lower on it): " + (", ".join(numeric) if numeric else "it has none"))
    return problems


def check_rows(frame):
    """Per row of an exported table (tidy or spans: pandas), whether it is an attention check's (a non-empty
    CHECK_COLUMN); all False for a table without the column."""
    import numpy as np

    if CHECK_COLUMN not in frame:
        return np.zeros(len(frame), dtype=bool)
    return (frame[CHECK_COLUMN].fillna("").astype(str).str.strip() != "").to_numpy()
