"""Files read as tables (evalstudio/readers/tables.py, readers/ratings.py): a cell past the csv limit and a row longer
than the header are reported at their line; the fast paths (Arrow's reader for plain CSV files, Arrow's cast for
columns of plain numbers, duplicate keys counted as integers) give what the general ones give. How the memory
freed by reading goes back to the system: tests/test_memory.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from evalstudio.base.errors import BadInput

from .test_analyze_input import invoke, write


def test_a_cell_longer_than_the_csv_limit_is_reported_at_its_line(tmp_path):
    """Python's csv module stops at 131,072 characters per cell: once a traceback (`_csv.Error`); now the line."""
    big = "x" * 200_000
    ratings = write(tmp_path, "ratings.csv", f'item,annotator,criterion,value\n1,a,quality,4\n2,a,quality,"{big}\n"\n')
    result = invoke(ratings, "-o", tmp_path / "out")
    assert result.exit_code == 2 and f"{ratings}:3: a cell is longer than 131,072 characters" in result.stderr


@pytest.mark.parametrize("quoted", [True, False])
def test_a_cell_longer_than_the_csv_limit_without_quotes_is_reported_too(tmp_path, quoted):
    """Only a file with quotes, carriage returns or a line past the limit is read cell by cell (the rest is read
    at once): a long unquoted cell, or a long line of short cells, is still told at its line."""
    cell = '"' + "y" * 140_000 + '"' if quoted else "y" * 140_000
    ratings = write(tmp_path, "ratings.csv", f"item,annotator,criterion,value\n1,a,quality,4\n2,a,quality,{cell}\n")
    result = invoke(ratings, "-o", tmp_path / "out")
    assert result.exit_code == 2 and f"{ratings}:3: a cell is longer than 131,072 characters" in result.stderr


@pytest.mark.parametrize("rows", ["1,a,quality,4,\n2,a,quality,5,\n", "1,a,quality,4," * 20_000 + "\n"],
                         ids=["trailing commas", "80,000 cells"])
def test_a_row_longer_than_the_header_is_reported_not_shifted(tmp_path, rows):
    """A trailing comma on every row (as spreadsheets write it) once made pandas take the item as a row label and
    read the annotator's id as the item, the criterion's name as the annotator and the rating as the criterion;
    a row of 80,000 cells took a minute. Now the line is told at once."""
    ratings = write(tmp_path, "ratings.csv", "item,annotator,criterion,value\n" + rows)
    result = invoke(ratings, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert f"{ratings}:2: " in result.stderr and "cells but the header names 4" in result.stderr
    assert not (tmp_path / "out").exists()


numberish = st.one_of(st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                      st.from_regex(r"\A[+-]?[0-9]{0,3}(\.[0-9]{0,3})?([eE][+-]?[0-9]{1,3})?\Z"),
                      st.sampled_from(["-0", "+.5", "5.", " 2", "2 ", "1_0", "0x1A", "1,5", "\u0667", "\u00bd", "nan",
                                       "Infinity", "1e400", "", "\t3"]))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(numberish, min_size=1, max_size=6))
def test_numbers_read_at_once_equal_those_read_value_by_value(texts):
    """A column of plain numbers is read by Arrow's cast in one call; any other by pandas value by value. Both
    must give the same number, or refuse the same value, as reading each value alone with pandas does."""
    from evalstudio.readers.ratings import _parse_numbers

    values, ok = _parse_numbers(pd.Series(texts, dtype=str))
    alone = np.array([pd.to_numeric(pd.Series([t], dtype=object), errors="coerce").to_numpy(dtype=float)[0]
                      for t in texts])
    event("read at once" if all(np.isfinite(alone)) and not any(t != t.strip() for t in texts) else "value by value")
    assert (ok == np.isfinite(alone)).all()  # what pandas takes as a number, alone
    assert np.array_equal(values[ok], [float(t) for t, good in zip(texts, ok) if good])  # correctly rounded


cell_text = st.text(alphabet=st.sampled_from("ab1 .-\u00e9\u0667\t"), min_size=0, max_size=4)


@settings(max_examples=600, deadline=None)
@given(header=st.lists(cell_text, min_size=1, max_size=4), data=st.data(), tsv=st.booleans(),
       last_newline=st.booleans())
def test_a_plain_csv_file_reads_alike_with_arrow_and_pandas(tmp_path_factory, header, data, tsv, last_newline):
    """Plain files (no quotes, carriage returns or NUL) are read by Arrow's reader; every other, and every plain
    file Arrow refuses, by pandas. Whatever the file, both must give the same table and lines, or the same error."""
    from evalstudio.readers import tables as reader

    width = len(header)
    row = st.one_of(st.lists(cell_text, min_size=width, max_size=width), st.lists(cell_text, max_size=5), st.just([]))
    rows = data.draw(st.lists(row, max_size=6))
    sep = "\t" if tsv else ","
    text = "\n".join(sep.join(cells) for cells in [header, *rows]) + ("\n" if last_newline else "")
    path = tmp_path_factory.mktemp("plain") / ("in.tsv" if tsv else "in.csv")
    path.write_text(text, encoding="utf-8")

    def read():
        try:
            frame, lines = reader.read_table(path)
            return frame, list(lines)
        except BadInput as e:
            return str(e)

    arrow = read()
    original = reader._read_plain_csv
    try:
        reader._read_plain_csv = lambda path: None  # pandas reads it
        pandas = read()
    finally:
        reader._read_plain_csv = original
    event("arrow read it" if not isinstance(arrow, str) and original(path) is not None else "pandas read it")
    if isinstance(pandas, str) or isinstance(arrow, str):
        assert arrow == pandas
    else:
        assert arrow[0].equals(pandas[0]) and list(arrow[0].columns) == list(pandas[0].columns)
        assert arrow[1] == pandas[1]


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["1", "2", "x", ""]), st.sampled_from(["s", "t"]),
                               st.sampled_from(["m", "n", "o"])), max_size=30))
def test_duplicated_rows_equals_pandas(rows):
    from evalstudio.readers.ratings import duplicated_rows

    table = pd.DataFrame(rows, columns=["item", "system", "metric"], dtype=str)
    expected = table.duplicated(["item", "system", "metric"]).to_numpy()
    assert (duplicated_rows(table, ["item", "system", "metric"]) == expected).all()
