"""Streaming readers for input files that report problems as `file:line: field: message`.

Every reader yields (line, record) pairs, or (line, Problem) where a record cannot be read, and
never holds more than one record in memory.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalstudio.base.errors import Problem


class FieldError(ValueError):
    """A record's field is missing or invalid; importers raise it, the driver turns it into a Problem."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


class RecordInvalid(ValueError):
    """Several FieldErrors of one record."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(e.message for e in errors))
        self.errors = errors


class _BadEncoding(Exception):
    def __init__(self, line: int, error: UnicodeDecodeError | None, message: str | None = None):
        self.line, self.error, self.message = line, error, message


def format_suffix(path: Path) -> str:
    """The suffix that says a file's format, lower case: a gzipped file's inner one (data.tsv.gz: .tsv)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    return suffixes[-2] if len(suffixes) > 1 and suffixes[-1] == ".gz" else Path(path).suffix.lower()


def open_input(path: Path):
    """An input file opened for reading bytes, decompressed as it is read when its name ends in .gz."""
    if Path(path).suffix.lower() == ".gz":
        import gzip

        return gzip.open(path, "rb")
    return open(path, "rb")


def _lines(path: Path) -> Iterator[str]:
    """Text lines decoded one by one (so a bad byte is pinned to its line); a UTF-8 BOM is dropped; a .gz file is
    read decompressed."""
    for line_no, raw in enumerate(_chunks(path, lines=True), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _BadEncoding(line_no, e) from None
        yield text.removeprefix("\ufeff") if line_no == 1 else text


def _chunks(path: Path, lines: bool = False) -> Iterator[bytes]:
    """The file's bytes (its lines, or all at once); _BadEncoding at the line where a .gz file stops being gzip."""
    import zlib

    line_no = 0
    try:
        with open_input(path) as f:
            for line_no, raw in enumerate(f if lines else [f.read()], start=1):
                yield raw
    except (EOFError, zlib.error, OSError) as e:  # a .gz file that is not gzip, or cut short
        if Path(path).suffix.lower() != ".gz" or (isinstance(e, OSError) and e.errno is not None):
            raise
        raise _BadEncoding(line_no + 1, None, f"not a readable gzip file ({str(e)[:80] or type(e).__name__}); "
                                              "give the file uncompressed, or gzip it again") from None


def _encoding_problem(path: Path, bad: _BadEncoding) -> Problem:
    if bad.error is None:
        return Problem(str(path), bad.line, None, bad.message or "unreadable")
    byte = bad.error.object[bad.error.start]
    return Problem(str(path), bad.line, None, f"not valid UTF-8 (byte 0x{byte:02x}); save the file as UTF-8")


class JsonArrayError(ValueError):
    """A JSON array that cannot be read on: where (line) and why."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


def json_array(text: str) -> Iterator[tuple[int, Any]]:
    """The elements of a JSON array (the text starts with "[" after white space), each with the line it starts on,
    decoded one by one (a file of many records is never one object in memory twice). JsonArrayError when the text
    stops being a JSON array."""
    decoder = json.JSONDecoder()

    def skip(position: int, line: int) -> tuple[int, int]:  # past white space, counting its lines
        after = len(text) - len(text[position:].lstrip())
        return after, line + text.count("\n", position, after)

    position, line = skip(0, 1)
    position, line = skip(position + 1, line)  # past "["
    if text[position:position + 1] == "]":
        position += 1
    else:
        while True:
            try:
                value, end = decoder.raw_decode(text, position)
            except (ValueError, RecursionError) as e:
                raise JsonArrayError(line, f"not JSON: {str(e)[:100]}") from None
            yield line, value
            position, line = skip(end, line + text.count("\n", position, end))
            if text[position:position + 1] == ",":
                position, line = skip(position + 1, line)
            elif text[position:position + 1] == "]":
                position += 1
                break
            else:
                raise JsonArrayError(line, "expected ',' or ']' after a record")
    if text[position:].strip():
        raise JsonArrayError(line, "text after the JSON array")


def read_json(path: Path) -> Iterator[tuple[int, dict | Problem]]:
    """A JSON array of objects (.json), each record with the line where it starts."""
    try:
        raw = b"".join(_chunks(path))
    except _BadEncoding as bad:
        yield 0, Problem(str(path), None, None, bad.message)
        return
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        yield line, Problem(str(path), line, None, f"not valid UTF-8 (byte 0x{e.object[e.start]:02x}); save the "
                                                   "file as UTF-8")
        return
    if not text.lstrip().startswith("["):
        yield 1, Problem(str(path), 1, None, "not a JSON array of records (a .json file holds [ {...}, {...} ]; "
                                             "JSON Lines, one record a line, go in a .jsonl file)")
        return
    seen = False
    try:
        for line, value in json_array(text):
            seen = True
            if not isinstance(value, dict):
                yield line, Problem(str(path), line, None, f"expected a JSON object, got {type(value).__name__}")
                continue
            yield line, value
    except JsonArrayError as e:
        yield e.line, Problem(str(path), e.line, None, str(e))
        return
    if not seen:
        yield 0, Problem(str(path), None, None, "file is empty: no records")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict | Problem]]:
    """One JSON object per line; blank lines are skipped. A JSON array (which a .jsonl file sometimes is) is one
    problem that says so, not one per line."""
    seen = False
    try:
        for line_no, line in enumerate(_lines(path), start=1):
            if not line.strip():
                continue
            if not seen and re.match(r"\s*\[\s*(\{|$)", line):  # "[" alone, or "[{": an array of records
                yield line_no, Problem(str(path), line_no, None, "a JSON array, not JSON Lines (one record a line): "
                                                                 "name the file .json to read it as an array")
                return
            seen = True
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                hint = " (truncated line?)" if "Unterminated" in e.msg or "Expecting" in e.msg else ""
                yield line_no, Problem(str(path), line_no, None, f"invalid JSON: {e.msg} at column {e.colno}{hint}")
                continue
            except RecursionError:
                yield line_no, Problem(str(path), line_no, None, "invalid JSON: nested too deeply")
                continue
            except ValueError as e:  # e.g. an integer of more than 4300 digits
                yield line_no, Problem(str(path), line_no, None, f"invalid JSON: {str(e).split(';')[0]}")
                continue
            if not isinstance(obj, dict):
                yield line_no, Problem(str(path), line_no, None, f"expected a JSON object, got {type(obj).__name__}")
                continue
            yield line_no, obj
    except _BadEncoding as bad:
        yield bad.line, _encoding_problem(path, bad)
        return
    if not seen:
        yield 0, Problem(str(path), None, None, "file is empty: no records")


def read_table(path: Path, delimiter: str = ",", required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict | Problem]]:
    """CSV/TSV with a header row; yields each row as a dict with the line where the record starts."""
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    reader = csv.reader(_lines(path), delimiter=delimiter, quoting=quoting)
    try:
        header = next(reader, None)
        if not header:
            yield 0, Problem(str(path), None, None, "file is empty: no header row")
            return
        header = [h.strip() for h in header]
        missing = [c for c in required if c not in header]
        if missing:
            yield 1, Problem(str(path), 1, ", ".join(missing), f"missing column(s); the header has: {', '.join(header)}")
            return
        start = reader.line_num + 1
        rows = 0
        for row in reader:
            line, start = start, reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            rows += 1
            if len(row) != len(header):
                yield line, Problem(str(path), line, None, f"expected {len(header)} columns, found {len(row)}")
                continue
            yield line, dict(zip(header, row))
        if rows == 0:
            yield 0, Problem(str(path), None, None, "file has a header but no records")
    except _BadEncoding as bad:
        yield bad.line, _encoding_problem(path, bad)
    except csv.Error as e:
        yield reader.line_num, Problem(str(path), reader.line_num, None, f"malformed CSV: {e}")


def require(record: dict, field: str, kind: type | tuple = str, *, nonempty: bool = True) -> Any:
    """record[field] with a type check; dotted fields descend into nested objects."""
    value: Any = record
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value or value[part] is None:
            raise FieldError(field, "missing")
        value = value[part]
    if not isinstance(value, kind) or (kind in (int, float, (int, float)) and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise FieldError(field, f"expected {names}, got {type(value).__name__}")
    if nonempty and isinstance(value, (str, list, dict)) and not (value.strip() if isinstance(value, str) else value):
        raise FieldError(field, "is empty")
    return value


def number_in_range(field: str, value: Any, lo: float, hi: float) -> float:
    """A number within [lo, hi], else FieldError naming the field and the range."""
    from .results import as_number

    try:
        value = as_number(value)
    except ValueError as e:
        raise FieldError(field, str(e)) from None
    if not lo <= value <= hi:
        raise FieldError(field, f"{value:g} is out of range {lo:g}..{hi:g}")
    return value


def control_value(field: str, value: Any, project, control: str):
    """`value` checked against the labeling config's control (type, range, step, choices): FieldError otherwise.
    Model ratings are checked like this, so whatever the model said fits the scale annotators use."""
    from .results import check_value

    try:
        checked = check_value(project.interface.get_control(control), value)
    except ValueError as e:
        raise FieldError(field, str(e)) from None
    return checked[0] if isinstance(checked, list) and len(checked) == 1 else checked


def one_of(field: str, value: Any, allowed: list[str]) -> str:
    """The value if it is one of `allowed`, else a field error naming them."""
    if value not in allowed:
        raise FieldError(field, f"{value!r} is not one of {allowed}")
    return value


def collect(*checks) -> None:
    """Run zero-argument checks and raise all their FieldErrors together."""
    errors: list[FieldError] = []
    for check in checks:
        attempt(errors, check)
    if errors:
        unique = {(e.field, e.message): e for e in errors}  # one report per field and message
        raise RecordInvalid(list(unique.values()))


def attempt(errors: list, check, *args, **kwargs):
    """check(*args, **kwargs), or None with its FieldError(s) added to `errors` (to report all of a record's)."""
    try:
        return check(*args, **kwargs)
    except FieldError as e:
        errors.append(e)
    except RecordInvalid as e:
        errors.extend(e.errors)
    return None


MAX_DEPTH = 50  # nesting of a task's data; real inputs need fewer than 10 levels


def big_int(value) -> bool:
    """An integer beyond 2**53 anywhere in `value` (strings are skipped: they are most of a task, and hold none)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) > 2**53
    if isinstance(value, dict):
        return any(big_int(v) for v in value.values() if not isinstance(v, str))
    if isinstance(value, (list, tuple)):
        return any(big_int(v) for v in value if not isinstance(v, str))
    return False


_SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True)  # stable_id's (built once; its ids never change)
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)  # json.dumps(**options) builds one per call


def storable(data: dict) -> bool:
    """True when `data` certainly has none of `storable_problems` (a fast check in C through the json module: most
    tasks take it; a False sends the task through the exact, slower walk for its messages)."""
    try:
        text = _ENCODER.encode(data)  # NaN and infinity raise
    except (ValueError, TypeError, RecursionError):
        return False
    return storable_text(text) and not big_int(data)


def storable_text(text: str) -> bool:
    """`storable`'s checks of a value's JSON text (ensure_ascii=False, allow_nan=False); the caller walks the value
    for big integers (`big_int`)."""
    try:
        text.encode("utf-8")  # a lone surrogate raises
    except UnicodeEncodeError:
        return False
    if "\\u0000" in text:  # a NUL
        return False
    return text.count("{") + text.count("[") <= MAX_DEPTH  # else perhaps nested too deeply (fewer cannot be)


def storable_problems(value, field: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """(field, message) for whatever Label Studio's databases would refuse or mangle: NUL characters (PostgreSQL
    text cannot hold them), lone surrogates (not encodable as UTF-8), non-finite or huge numbers, deep nesting."""
    if depth > MAX_DEPTH:
        return [(field or "record", f"nested more than {MAX_DEPTH} levels deep")]
    if isinstance(value, str):
        if "\x00" in value:
            return [(field, "contains a NUL character (\\u0000), which the database cannot store")]
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return [(field, "contains an unpaired surrogate (e.g. \\ud800), which is not valid text")]
        return []
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int):
        return [] if abs(value) <= 2**53 else [(field, "is an integer too large to store exactly")]
    if isinstance(value, float):
        return [] if math.isfinite(value) else [(field, f"is {value}, not a number the database can store")]
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            out += storable_problems(str(key), f"{field}.{key}".strip(".") + " (key)", depth + 1) if "\x00" in str(key) else []
            out += storable_problems(item, f"{field}.{key}".strip("."), depth + 1)
            if len(out) > 20:
                break
        return out
    if isinstance(value, (list, tuple)):
        out = []
        for i, item in enumerate(value):
            out += storable_problems(item, f"{field}[{i}]", depth + 1)
            if len(out) > 20:
                break
        return out
    return [(field, f"unexpected value of type {type(value).__name__}")]


def stable_id(*parts: object) -> str:
    """Short content hash: the same parts give the same id on every run and machine."""
    import hashlib

    text = _SORTED.encode(parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def no_context(paths):
    """Default `prepare` of an importer: no cross-file context."""
    return {}, list(paths)


def turns_text(turns: list[dict]) -> str:
    """Dialogue turns as plain text, one "Speaker: text" paragraph per turn (Label Studio's Text tag shows it as is:
    no timestamps, no markup, and a readable column in the task list)."""
    return "\n\n".join(f"{t['speaker']}: {t['text']}" for t in turns)
