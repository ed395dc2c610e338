"""Pairwise comparison files (which of two outputs is better) as the frame `stats.preference` reads: item,
annotator, left, right (the two systems, in the order shown), outcome (left / right / tie / both_bad), line.

Read by `evalstudio analyze` when the spec says `layout: pairwise`, or without a spec when the file has the
columns of one: `left, right, outcome` or Chatbot Arena's `model_a, model_b, winner` (winner model_a / model_b /
tie / tie (bothbad); model_a is the one shown first). The spec maps other column names (`columns: {left: ...,
right: ..., outcome: ...}`) and other outcome codes (`outcomes: {left: [A], right: [B], tie: [same]}`). Every problem
is reported as `file:line: column: message` and nothing is analysed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.base.errors import MAX_PROBLEMS, InvalidInput, Problem, Problems

ROLES = {
    "item": ["item", "item_id", "question_id", "prompt_id", "id"],
    "annotator": ["annotator", "judge", "worker", "WorkerId", "rater", "participant"],
    "left": ["left", "model_a", "system_a"],
    "right": ["right", "model_b", "system_b"],
    "outcome": ["outcome", "winner", "preference"],
}
OUTCOME_CODES = {
    "left": ["left", "model_a", "a", "A"],
    "right": ["right", "model_b", "b", "B"],
    "tie": ["tie", "equal", "same"],
    "both_bad": ["both_bad", "tie (bothbad)", "both bad", "neither"],
}


def header(path: Path) -> list[str]:
    """A table file's column names, read without reading the file ([] when they cannot be read: the reader that
    follows then says why)."""
    import csv
    import json

    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):
            with open(path, encoding="utf-8", newline="") as f:
                return next(csv.reader(f, delimiter="\t" if suffix == ".tsv" else ","), [])
        if suffix == ".jsonl":
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        record = json.loads(line)
                        return list(record) if isinstance(record, dict) else []
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
    except (OSError, UnicodeDecodeError, ValueError, csv.Error, RecursionError, ImportError):
        return []
    except Exception:  # noqa: BLE001 - pyarrow's own errors: the reader that follows reports the file
        return []
    return []


def looks_pairwise(columns) -> bool:
    """Whether a file's columns are those of comparisons (used when no spec says the layout)."""
    names = set(map(str, columns))
    return all(any(alias in names for alias in ROLES[role]) for role in ("left", "right", "outcome")) and not (
        {"value", "rating", "score"} & names)


def read_comparisons(path: Path, columns: dict | None = None, outcomes: dict | None = None,
                     max_problems: int = MAX_PROBLEMS) -> pd.DataFrame:
    """The comparisons of a CSV, TSV, JSONL or Parquet file; InvalidInput lists every problem (the first
    `max_problems`, counting all)."""
    from .ratings import find_column, read_table

    columns, codes = columns or {}, {**OUTCOME_CODES, **(outcomes or {})}
    frame, lines = read_table(path)
    found = {role: find_column(frame, columns, role, role != "annotator", path, ROLES) for role in ROLES}
    table = pd.DataFrame({role: frame[name].astype(str).str.strip() if name else "" for role, name in found.items()})
    meaning = {}
    for outcome, values in codes.items():
        for value in values:
            if meaning.setdefault(str(value), outcome) != outcome:
                raise InvalidInput([Problem(str(path), None, "outcome", f"the code {value!r} means both "
                                            f"{meaning[str(value)]} and {outcome} (the spec's outcomes)")],
                                   "nothing was analysed")
    problems = Problems(path, max_problems)

    def add(mask: np.ndarray, field: str, message) -> None:
        problems.add_rows(mask, lines, field, message)

    for role in ("item", "left", "right", "outcome"):
        add((table[role] == "").to_numpy(), found[role], "empty")
    add(((table["left"] == table["right"]) & (table["left"] != "")).to_numpy(), found["right"],
        "the same system on both sides")
    outcome = table["outcome"].map(meaning)
    given = table["outcome"].to_numpy()
    known = ", ".join(f"{k} ({'/'.join(map(str, v[:3]))})" for k, v in codes.items())
    add((outcome.isna() & (table["outcome"] != "")).to_numpy(), found["outcome"],
        lambda i: f"'{given[i][:40]}' is not an outcome: {known}; map other codes in the spec's outcomes")
    if found["annotator"]:
        # the pair unordered: the same two systems with the sides swapped are the same comparison
        pair = table.assign(first=np.minimum(table["left"], table["right"]), second=np.maximum(table["left"], table["right"]))
        duplicated = pair.duplicated(["item", "annotator", "first", "second"]).to_numpy()
        who = table["annotator"].to_numpy()
        add(duplicated, found["item"], lambda i: f"annotator '{who[i][:40]}' compared this pair on this item twice")
    problems.raise_if_any()
    if table.empty:
        raise InvalidInput([Problem(str(path), None, None, "no comparisons")], "nothing was analysed")
    return table.assign(outcome=outcome, line=lines)


# ---- best-worst scaling -------------------------------------------------------------------------------------------
BEST = ["best", "best_item", "BestItem", "most"]
WORST = ["worst", "worst_item", "WorstItem", "least"]
TUPLE_COLUMN = re.compile(r"(item|Item|ITEM|option|Option)_?[0-9]+")


def looks_best_worst(columns) -> bool:
    """Whether a file's columns are those of best-worst annotations: a best and a worst column and two or more item
    columns (item1, item2, ... or Item1 ...)."""
    names = [str(c) for c in columns]
    return (any(b in names for b in BEST) and any(w in names for w in WORST)
            and sum(bool(TUPLE_COLUMN.fullmatch(n)) for n in names) >= 2)


def read_best_worst(path: Path, columns: dict | None = None, tuple_columns: list[str] | None = None,
                    max_problems: int = MAX_PROBLEMS) -> pd.DataFrame:
    """Best-worst annotations, one row per annotated tuple (its items in item1..itemN, the chosen best and worst,
    optionally annotator and tuple), as the long frame `stats.preference.bws_scores` reads: tuple, annotation,
    annotator, item, choice, line. InvalidInput lists every problem."""
    from .ratings import read_table

    columns = columns or {}
    frame, lines = read_table(path)
    names = [str(c) for c in frame.columns]
    members = tuple_columns or [n for n in names if TUPLE_COLUMN.fullmatch(n)]
    missing = [c for c in members if c not in names]

    def pick(role: str, aliases: list[str]) -> str | None:
        if role in columns:
            return columns[role] if columns[role] in names else None
        return next((a for a in aliases if a in names), None)
    best, worst = pick("best", BEST), pick("worst", WORST)
    annotator = pick("annotator", ROLES["annotator"])
    tuple_id = pick("tuple", ["tuple", "tuple_id"])
    if missing or len(members) < 2 or best is None or worst is None:
        what = (f"no column {', '.join(missing)}" if missing else "fewer than two item columns (item1, item2, ...)"
                if len(members) < 2 else f"no {'best' if best is None else 'worst'} column")
        raise InvalidInput([Problem(str(path), 1, None, f"{what} (columns: {', '.join(names[:20])})")],
                           "nothing was analysed")
    items = frame[members].astype(str).apply(lambda col: col.str.strip()).to_numpy()
    chosen_best = frame[best].astype(str).str.strip().to_numpy()
    chosen_worst = frame[worst].astype(str).str.strip().to_numpy()
    who = frame[annotator].astype(str).to_numpy() if annotator else None
    tuple_ids = frame[tuple_id].astype(str).to_numpy() if tuple_id else None
    problems = Problems(path, max_problems)
    rows: dict[str, list] = {k: [] for k in ("tuple", "annotation", "annotator", "item", "choice", "line")}
    for i, line in enumerate(lines):
        line = int(line)
        before = problems.count
        tuple_items = [x for x in items[i] if x]
        if len(tuple_items) < len(members):
            problems.add(line, members[0], "an item cell is empty")
        if len(set(tuple_items)) < len(tuple_items):
            problems.add(line, members[0], "the same item twice in one tuple")
        for role, value, column in (("best", chosen_best[i], best), ("worst", chosen_worst[i], worst)):
            if value not in tuple_items:
                problems.add(line, column, f"the {role} item '{value[:40]}' is not one of the tuple's items")
        if chosen_best[i] == chosen_worst[i] and chosen_best[i]:
            problems.add(line, worst, "the same item chosen best and worst")
        if problems.count > before:
            continue
        key = tuple_ids[i] if tuple_ids is not None else " | ".join(sorted(tuple_items))
        for item in tuple_items:
            rows["tuple"].append(key)
            rows["annotation"].append(f"line {line}")
            rows["annotator"].append(who[i] if who is not None else "")
            rows["item"].append(item)
            rows["choice"].append("best" if item == chosen_best[i] else "worst" if item == chosen_worst[i] else "")
            rows["line"].append(line)
    problems.raise_if_any()
    if not rows["item"]:
        raise InvalidInput([Problem(str(path), None, None, "no annotated tuples")], "nothing was analysed")
    return pd.DataFrame(rows)
