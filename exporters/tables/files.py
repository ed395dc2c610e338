"""Writing tables: CSV that is safe to open in a spreadsheet, and raw formats (JSONL, Parquet) for analysis code.

CSV injection (OWASP, "CSV Injection"): a cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return
is read as a formula by Excel, LibreOffice and Google Sheets (e.g. `=HYPERLINK(...)` in an annotator's note).
In CSV output such a text cell gets a leading `'`, which spreadsheets show as text; numbers (`-3`, `+1.5`) are
left alone. JSONL and Parquet keep every value exactly as it was given.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import IO

import pandas as pd

from evalstudio.base.errors import EvalstudioError
from evalstudio.base.files import open_output
from evalstudio.values.results import NUMBER

FORMATS = ("csv", "jsonl", "parquet")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    """A text cell a spreadsheet would evaluate, prefixed with ' (OWASP); anything else unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not NUMBER.fullmatch(value):
        return "'" + value
    return value


def _needs_map(column: pd.Series) -> bool:
    """Whether neutralising a column could change it or its type: False only for text columns (object or string
    dtype) whose values are all text that no spreadsheet reads as a formula, or missing. Anything else (numbers in
    an object column, which mapping would convert; dates; categories; a formula) goes through `neutralise` as
    before, so the CSV's bytes do not depend on this shortcut."""
    if not (pd.api.types.is_object_dtype(column) or pd.api.types.is_string_dtype(column)) or isinstance(
            column.dtype, pd.CategoricalDtype):
        return True
    if isinstance(column.dtype, pd.StringDtype):  # text or missing by construction: one vectorised test
        return bool(column.str.startswith(_FORMULA_START).fillna(False).any())
    for value in column.array:
        if type(value) is str:
            if value.startswith(_FORMULA_START):
                return True
        elif not (value is None or value is pd.NA or (type(value) is float and value != value)):
            return True
    return False


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with every text cell neutralised (column names too)."""
    out = frame.copy()
    for column in out.columns:
        if not pd.api.types.is_numeric_dtype(out[column]) and not pd.api.types.is_bool_dtype(out[column]) and \
                _needs_map(out[column]):
            out[column] = out[column].map(neutralise, na_action="ignore")
    out.columns = [neutralise(str(c)) for c in out.columns]
    return out


def _holds_carriage_return(frame: pd.DataFrame) -> bool:
    """Whether a column name or a text cell holds a carriage return."""
    if any("\r" in str(c) for c in frame.columns):
        return True
    for position in range(frame.shape[1]):
        column = frame.iloc[:, position]
        if isinstance(column.dtype, pd.StringDtype):
            if column.str.contains("\r", regex=False).fillna(False).any():
                return True
        elif pd.api.types.is_object_dtype(column) or pd.api.types.is_string_dtype(column):
            if any(isinstance(v, str) and "\r" in v for v in column.array):
                return True
    return False


def write_csv(frame: pd.DataFrame, target: Path | IO[str], header: bool = True) -> None:
    """Write a frame as spreadsheet-safe CSV (no cell runs as a formula; a cell with a carriage return stays one cell)."""
    safe = spreadsheet_safe(frame)
    # Python's csv module quotes a cell holding a character of the line terminator, and a bare carriage return only
    # when it is one: with "\n" lines, a cell holding "\r" (a participant's note sent through the API) would end
    # its row early in every reader. With such a cell the lines end in "\r\n" (RFC 4180's own), so it is quoted.
    carriage_return = _holds_carriage_return(safe)
    with open_output(Path(target)) if isinstance(target, (str, Path)) else nullcontext(target) as f:
        safe.to_csv(f, index=False, header=header, lineterminator="\r\n" if carriage_return else "\n")


def write_jsonl(frame: pd.DataFrame, target: IO[str]) -> None:
    """One JSON object per row, each ending with a newline (so pages can be appended)."""
    if not frame.empty:
        text = frame.to_json(orient="records", lines=True, force_ascii=False, date_format="iso")
        target.write(text if text.endswith("\n") else text + "\n")


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Parquet needs one type per column: a column mixing numbers and labels (a Circa study's value) is stored as
    text, with missing values kept missing."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object:  # a text column (pandas' str dtype) has one type already
            kinds = {type(v) for v in out[column].dropna()}
            if len(kinds) > 1:
                out[column] = out[column].map(lambda v: v if v is None or (isinstance(v, float) and v != v) else str(v))
    try:
        with open_output(path, "wb") as f:
            out.to_parquet(f, index=False)
    except ImportError:
        raise EvalstudioError("writing Parquet needs pyarrow: pip install pyarrow") from None


def write_table(frame: pd.DataFrame, path: Path, fmt: str) -> None:
    """The whole frame as `fmt` (csv: spreadsheet-safe; jsonl, parquet: raw values)."""
    if fmt == "parquet":
        write_parquet(frame, path)
    elif fmt == "jsonl":
        with open_output(path) as f:
            write_jsonl(frame, f)
    else:
        write_csv(frame, path)


def write_results(output: Path, tables: dict[str, pd.DataFrame], notes: list[str], page: str | None = None) -> None:
    """A command's result folder, written whole or not at all: each table as NAME.csv (spreadsheet-safe), the
    notes, one a line, in notes.txt, and `page` (an HTML page of the same results) as index.html."""
    from evalstudio.base.files import staged_folder

    with staged_folder(output) as stage:
        for name, frame in tables.items():
            write_csv(frame, stage / f"{name}.csv")
        with open_output(stage / "notes.txt") as f:
            f.write("".join(note + "\n" for note in notes))
        if page is not None:
            with open_output(stage / "index.html") as f:
                f.write(page)
