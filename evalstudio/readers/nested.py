"""Nested rating files (`layout: nested` in an analysis spec) as the long table `ratings` checks.

Published human ratings often come as JSON with one object per context that holds a list of responses, each with a
list of ratings per criterion and no annotator ids (USR's PersonaChat and Topical-Chat ratings, FED, many
dialogue and summarisation releases). The spec says where things are, and no flattening script is needed:

    layout: nested
    nested:
      expand: responses          # the list in each record to expand: one rated segment per element (leave out
                                 #   when each record is one segment)
      item: record.context_id    # the item id: `record.X` is a field of the record, `X` a field of the element,
                                 #   `#` the record's number in the file (the default)
      system: model              # optional, as item
      ratings: scores            # where each criterion's ratings are in the element (default: the element itself)
      annotators: workers        # optional: a list of annotator ids in the order of every rating list (in the
                                 #   element, or record.X: one list per record, as USR keeps them); without it,
                                 #   annotator k is the k-th rating of each list (position)
    criteria:
      Natural: {scale: interval, min: 1, max: 3}
      Overall: {scale: interval, min: 1, max: 5, column: "Overall Quality"}   # column: the key, when it differs

A file with two kinds of record (FED: turn-level records with a `response`, dialog-level ones without, each kind
with criteria of its own and both with an "Overall") selects, per criterion, the records it is read from:
`where: response` (records that have the field; `record.X` or an element's X) or `where: "!response"` (records that
lack it). A criterion is never looked for in a record of the other kind; in its own kind it must be there.

A criterion's ratings are a list (one per annotator) or a single value (one annotator). Paths are keys joined by
dots (a list element by its number from 0). The file is a JSON array of records or JSON Lines (one record a line);
every problem is reported at the line where its record starts, as `file:line: field: message`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pandas as pd
from pydantic import BaseModel, ConfigDict

from evalstudio.base.errors import BadInput, Problems
from evalstudio.values.sources import JsonArrayError, json_array

RECORD = "record."
NUMBER = "#"
ABSENT = object()  # what a path that leads nowhere gives (None is JSON's null)


class Nested(BaseModel):
    """Where the ratings are in a nested file (see the module's documentation)."""

    model_config = ConfigDict(extra="forbid")

    expand: str | None = None
    item: str = NUMBER
    system: str | None = None
    agent: str | None = None
    ratings: str = ""
    annotators: str | None = None


class _Missing(Exception):
    """A path leads nowhere: the message says where it stopped."""


def _get(value, path: str):
    """The value at a dotted path ('' is the value itself)."""
    for key in path.split(".") if path else []:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise _Missing(f"no '{key}'" + (f" in '{path}'" if key != path else ""))
    return value


def _text(value) -> str | None:
    """A field or rating as the text the checks read (None: not a plain value). A JSON true/false stays 'True' or
    'False', which a number scale refuses instead of reading it as 1 or 0."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return None
    return str(value)


def _selects(where: str, record: dict, element: dict) -> bool:
    """Whether a criterion's `where:` takes this record: it has the field (record.X or X of the element), or with
    a leading "!" it lacks it."""
    wanted = not where.startswith("!")
    path = where.lstrip("!")
    source, key = (record, path[len(RECORD):]) if path.startswith(RECORD) else (element, path)
    try:
        _get(source, key)
        found = True
    except _Missing:
        found = False
    return found == wanted


def records(path: Path) -> Iterator[tuple[int, object]]:
    """(line where it starts, record) of a JSON array or of JSON Lines. BadInput when the file is neither."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot read it: {str(e).splitlines()[0][:200]}") from None
    start = len(text) - len(text.lstrip())
    if text[start:start + 1] != "[":  # JSON Lines
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except (ValueError, RecursionError) as e:
                    raise BadInput(f"{path}:{number}: not JSON: {str(e)[:100]}") from None
        return
    try:
        yield from json_array(text)
    except JsonArrayError as e:
        raise BadInput(f"{path}:{e.line}: {e}") from None


def read_nested(path: Path, nested: Nested, criteria: dict, problems: Problems) -> pd.DataFrame:
    """The long table (item, system, agent, annotator, criterion, value, line; all text) of a nested file; its
    problems go to `problems`, which the caller raises with those of the values."""
    rows: dict[str, list] = {k: [] for k in ("item", "system", "agent", "annotator", "criterion", "value", "line")}
    problem = problems.add
    # criterion (without where:) -> the kinds of record it was read from (its ratings' criteria) -> (first line,
    # fields every such record has, fields any has): one name rated in two kinds of record (FED's Overall, of a turn
    # and of a whole dialog) is two criteria, never silently one
    kinds: dict[str, dict[frozenset, list]] = {}

    def at(source, path: str, line: int, name: str, shown: str | None = None):
        """The value at `path`, or ABSENT after reporting where the path stops."""
        try:
            return _get(source, path)
        except _Missing as e:
            problem(line, shown or path or None, f"{e} (the spec's nested.{name})")
            return ABSENT

    def field(record, element, number: int, where: str | None, line: int, name: str) -> str | None:
        if where is None:
            return ""
        if where == NUMBER:
            return str(number)
        source, key = (record, where[len(RECORD):]) if where.startswith(RECORD) else (element, where)
        found = at(source, key, line, name, where)
        if found is ABSENT:
            return None
        value = _text(found)
        if value is None:
            problem(line, where, f"the {name} is a list or an object, not a plain value")
        return value

    for number, (line, record) in enumerate(records(path), 1):
        if not isinstance(record, dict):
            problem(line, None, "a record is a JSON object")
            continue
        elements = [record]
        if nested.expand is not None:
            elements = at(record, nested.expand, line, "expand")
            if elements is ABSENT:
                continue
            if not isinstance(elements, list):
                problem(line, nested.expand, "not a list (the spec's nested.expand names the list to expand)")
                continue
        for element in elements:
            if not isinstance(element, dict):
                problem(line, nested.expand, "an element to expand is a JSON object")
                continue
            keys = {name: field(record, element, number, getattr(nested, name), line, name)
                    for name in ("item", "system", "agent")}
            if any(v is None for v in keys.values()):
                continue
            ratings = at(element, nested.ratings, line, "ratings")
            if ratings is ABSENT:
                continue
            if not isinstance(ratings, dict):
                problem(line, nested.ratings or None, "the ratings are not an object of criteria")
                continue
            ids = None
            if nested.annotators is not None:  # record.X: one list for every element of the record (USR)
                source, key = (record, nested.annotators[len(RECORD):]) if nested.annotators.startswith(RECORD) \
                    else (element, nested.annotators)
                ids = at(source, key, line, "annotators", nested.annotators)
                if ids is ABSENT:
                    continue
                if not isinstance(ids, list) or any(_text(i) in (None, "") for i in ids):
                    problem(line, nested.annotators, "not a list of annotator ids")
                    continue
            fields, kind_key = set(record), frozenset(ratings)  # the record's kind (see `kinds`), once per element
            for criterion, spec in criteria.items():
                if spec.where is not None and not _selects(spec.where, record, element):
                    continue  # a record of the other kind (FED: dialog-level, for a turn-level criterion)
                key = spec.column or criterion
                if key not in ratings:
                    problem(line, key, f"no ratings of '{criterion}' (item '{keys['item'][:40]}'); if the file holds "
                                       "two kinds of record (turns and whole dialogs), give the criterion where: "
                                       "FIELD (the records that have FIELD) or where: '!FIELD' (those that lack it)")
                    continue
                if spec.where is None:
                    kind = kinds.setdefault(criterion, {}).setdefault(kind_key, [line, set(fields), set()])
                    kind[1] &= fields
                    kind[2] |= fields
                given = ratings[key] if isinstance(ratings[key], list) else [ratings[key]]
                if ids is not None and len(ids) != len(given):
                    problem(line, key, f"{len(given)} ratings for {len(ids)} annotators ('{nested.annotators}')")
                    continue
                for position, value in enumerate(given):
                    text = _text(value)
                    if text is None:
                        problem(line, key, "a rating is a list or an object, not a plain value")
                        continue
                    rows["annotator"].append(_text(ids[position]) if ids is not None else str(position + 1))
                    for name in ("item", "system", "agent"):
                        rows[name].append(keys[name])
                    rows["criterion"].append(criterion)
                    rows["value"].append(text)
                    rows["line"].append(line)
    for criterion, seen in kinds.items():
        _two_kinds(criterion, seen, problem)
    return pd.DataFrame(rows)


def _two_kinds(criterion: str, seen: dict[frozenset, list], problem) -> None:
    """Report a criterion read from two kinds of record that a field tells apart (every record of one kind has it,
    none of the other): the spec should name which with where:."""
    found = list(seen.values())
    for a in range(len(found)):
        for b in range(len(found)):
            telling = sorted(found[a][1] - found[b][2])  # in every record of kind a, in no record of kind b
            if a != b and telling:
                field = telling[0]
                problem(max(found[a][0], found[b][0]), None,
                        f"'{criterion}' is rated in two kinds of record: those with the field '{field}' (from line "
                        f"{found[a][0]}) and those without it (from line {found[b][0]}), which rate other criteria; "
                        f"read one kind with where: {field} or where: '!{field}', and the other as a criterion of its "
                        "own (docs/reference/analysis-spec.md)")
                return
