"""Tables from files, every cell as text with the line it came from: CSV/TSV (a plain file through Arrow's reader,
any other through pandas, an over-long cell or a row longer than the header reported at its line), JSON Lines and
Parquet. `readers.ratings` makes ratings and metric scores of them; `exporters.payments.mturk` reads MTurk results."""

from __future__ import annotations

import codecs
import csv
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from evalstudio.base.errors import BadInput, InvalidInput, Problem

FORMATS = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".parquet": "parquet"}


def _delimiter(path: Path) -> str:
    return "\t" if path.suffix.lower() == ".tsv" else ","


def _format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise BadInput(f"{path}: unknown file type '{path.suffix}'; use {', '.join(FORMATS)}"
                       + (", or give a spec with layout: nested (JSON records holding lists of ratings), or "
                          "--protocol for a Label Studio export" if path.suffix.lower() == ".json" else ""))
    return fmt


def read_table(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """(all-text table, line number of each row). CSV/TSV with a header line, JSONL (one object per line) or
    Parquet (row numbers)."""
    fmt = _format(path)
    try:
        if fmt == "csv":
            physical, plain = _scan(path)
            frame = _read_plain_csv(path) if plain else None
            if frame is not None:
                return frame, _csv_lines(path, len(frame), physical)
            with warnings.catch_warnings():  # pandas' warning that a row has more cells than the header
                warnings.simplefilter("error", pd.errors.ParserWarning)
                try:  # index_col=False: else pandas takes a first row's extra cells as an index, shifting the rest
                    frame = pd.read_csv(path, dtype=str, keep_default_na=False, index_col=False, encoding="utf-8",
                                        sep=_delimiter(path))
                except pd.errors.ParserWarning:
                    raise BadInput(_longer_than_the_header(path)) from None
            return frame, _csv_lines(path, len(frame), physical)
        if fmt == "parquet":
            frame = pd.read_parquet(path)
            return frame.astype(object).where(frame.notna(), "").astype(str), np.arange(1, len(frame) + 1)
        return _read_jsonl(path)
    except BadInput:
        raise
    except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError, RecursionError, ImportError) as e:
        raise BadInput(f"{path}: cannot read it as {fmt}: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}") from None


_CELL_LIMIT = 131_072  # Python's csv field limit
_BLANKISH = re.compile(rb"(?:^|\n)[ \t]+(?:\n|$)")


def _scan(path: Path) -> tuple[int, bool]:
    """(the file's physical lines, as iterating it counts them: a last line without newline counts too; whether it
    is plain), from one pass over its bytes, which also checks that it is UTF-8. A file with a quote, carriage
    return or NUL, or with a line longer than a cell may be, is then read by Python's csv reader (`_check_cells`);
    any other cannot hold a cell past the limit, since a cell is then part of one line. A plain file (none of
    those, no byte order mark) has cells that are the text between delimiters, read alike by any CSV reader."""
    physical, last, longest, plain, since, carry, bom = 0, b"\n", 0, True, 0, b"", None
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            bom = chunk.startswith(codecs.BOM_UTF8) if bom is None else bom
            if not chunk.isascii():  # ASCII is UTF-8; anything else is decoded to be sure it is
                decoder.decode(chunk)
            elif decoder.getstate()[0]:  # a character cut at the last chunk's end that ASCII cannot finish
                decoder.decode(chunk)
            ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            physical += len(ends)
            if len(ends):
                longest = max(longest, since + int(ends[0]), int(np.diff(ends).max(initial=0)))
                since = len(chunk) - int(ends[-1]) - 1
            else:
                since += len(chunk)
            plain = plain and not any(b in chunk for b in (b'"', b"\r", b"\0"))
            # pandas skips a line of spaces and tabs as blank; Arrow would read it as cells. Such a line starts
            # with a space or tab after a newline (or at the start): only then is the pattern searched
            suspect = b"\n " in chunk or b"\n\t" in chunk or carry[:1] in (b" ", b"\t") or chunk[:1] in (b" ", b"\t")
            plain = plain and not (suspect and _BLANKISH.search(carry + chunk))
            carry = chunk[int(ends[-1]) + 1:] if len(ends) else (carry + chunk)[-_CELL_LIMIT:]  # a longer line: not plain
            last = chunk[-1:]
    decoder.decode(b"", final=True)
    if not plain or max(longest, since) > _CELL_LIMIT:
        _check_cells(path)
        plain = False
    return physical + (last != b"\n"), plain and not bom


_TEXT = pd.Series(["x"], dtype=str).dtype  # the text dtype pandas' read_csv(dtype=str) gives


def _read_plain_csv(path: Path) -> pd.DataFrame | None:
    """A plain CSV file (`_scan`) read by Arrow's multithreaded reader, every cell as text, as pandas would read it;
    None when pandas must read it: a header with an empty or repeated name (pandas renames them), a row whose cells
    do not match the header (pandas reports or pads it), or a pandas whose text is not Arrow's. Both readers skip
    empty lines; tests/test_reading_files.py checks that they give the same table."""
    import pyarrow.csv as pacsv

    if not (isinstance(_TEXT, pd.StringDtype) and _TEXT.storage == "pyarrow"):
        return None
    sep = _delimiter(path)
    with open(path, encoding="utf-8") as f:
        names = f.readline().rstrip("\n").split(sep)
    if len(set(names)) < len(names) or "" in names or names == [""]:
        return None
    try:
        table = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter=sep, quote_char=False),
                               convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                                    null_values=[], strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError, ValueError):
        return None
    if table.column_names != names:
        return None
    return table.to_pandas(types_mapper={pa.string(): _TEXT, pa.large_string(): _TEXT}.get)


def _longer_than_the_header(path: Path) -> str:
    """`file:line: message` of the first row with more cells than the header (a trailing comma, say)."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter=_delimiter(path))
        header = len(next(reader, []))
        for row in reader:
            if len(row) > header:
                return (f"{path}:{reader.line_num}: {len(row)} cells but the header names {header}: read as they are, "
                        "the first would become a row label and every other cell would shift one column; remove the "
                        "extra cell (a trailing comma?) or name its column in the header")
    return f"{path}: a row has more cells than the header"


def _check_cells(path: Path) -> None:
    """Refuse, at its line, a cell longer than Python's csv limit (131,072 characters): no rating file has one, and
    reading it whole (a 50 MB cell took 1.6 GB) is what a hostile or broken file would make us do."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter=_delimiter(path))
        try:
            for _ in reader:
                pass
        except csv.Error as e:
            message = ("a cell is longer than 131,072 characters (is this a ratings file?)"
                       if "field larger than field limit" in str(e) else f"not readable as CSV: {e}")
            raise BadInput(f"{path}:{reader.line_num}: {message}") from None


def _csv_lines(path: Path, rows: int, physical: int) -> np.ndarray:
    """Line numbers of the records; exact also when quoted fields span lines (read again only then)."""
    if physical - 1 <= rows:  # one line per record (a last line without newline counts too)
        return np.arange(2, rows + 2)
    lines = []
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter=_delimiter(path))
        start = 1
        for i, _ in enumerate(reader):
            if i:
                lines.append(start)
            start = reader.line_num + 1
    return np.asarray(lines[:rows] + [0] * (rows - len(lines)))


def _read_jsonl(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    rows, lines, problems = [], [], []
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except (ValueError, RecursionError) as e:
                problems.append(Problem(str(path), number, None, f"not JSON: {str(e)[:100]}"))
                continue
            if not isinstance(record, dict) or any(isinstance(v, (dict, list)) for v in record.values()):
                problems.append(Problem(str(path), number, None, "a line is an object of plain values"))
                continue
            rows.append({k: "" if v is None else str(v) for k, v in record.items()})
            lines.append(number)
        if problems:
            raise InvalidInput(problems, "nothing was analysed")
    return pd.DataFrame(rows, dtype=str).fillna(""), np.asarray(lines, dtype=int)
