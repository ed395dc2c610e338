"""Importing MQM's TSV (and any input file) gzipped, and the fields the MQM reader makes: `import mqm
mqm_ted_ende.tsv.gz` reads the file the tree holds as its uncompressed copy is read; the reader's own fields
(`context`, `missing`) go only into the tasks of the protocol that shows them, and are never reported as input
fields the protocol does not use."""

from __future__ import annotations

import gzip
import logging

import pytest

from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.scanning import iter_tasks, scan, split_task

from .conftest import EXAMPLES, ROOT

TED = ROOT / "tests" / "data" / "mqm_ted" / "mqm_ted_ende.tsv.gz"


def _ted_slice(folder, rows=60):
    """The first rows of the TED en-de TSV, uncompressed (the reader's input is the whole file's form)."""
    with gzip.open(TED, "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(rows + 1)]
    path = folder / "ted_slice.tsv"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _gzipped(path, folder):
    out = folder / f"{path.name}.gz"
    out.write_bytes(gzip.compress(path.read_bytes()))
    return out


DIALOGUE_CSV = 'context,response,system\n"A: hi there",hello you,sys1\n"A: how are you",fine thanks,sys2\n'


@pytest.mark.parametrize("protocol, source", [("mqm", "ted"), ("esa", "ted"), ("esa", EXAMPLES / "esa" / "ted_ende.jsonl"),
                                              ("dialogue", "csv")])
def test_a_gzipped_input_file_imports_as_the_file_itself(reg, tmp_path, protocol, source):
    """The import's dry run (what `import` sends) of FILE.gz: the same tasks as of FILE, no problem (an entry with
    `input:`, TSV and JSON Lines, and an importer module's CSV)."""
    plain = _ted_slice(tmp_path) if source == "ted" else source
    if source == "csv":
        plain = tmp_path / "dialogue.csv"
        plain.write_text(DIALOGUE_CSV, encoding="utf-8")
    packed = _gzipped(plain, tmp_path)
    project = reg.entry(protocol)
    importer = importer_for(project)
    assert scan(project, importer, [packed]).problems == []
    tasks = [data for _, data in iter_tasks(project, importer, [packed])]
    assert tasks and tasks == [data for _, data in iter_tasks(project, importer, [plain])]


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[: len(data) // 2], "not a readable gzip file"),  # cut short
    (lambda data: b"no gzip at all\n", "not a readable gzip file"),
])
def test_a_damaged_gzip_file_is_a_problem_not_a_crash(reg, tmp_path, damage, message):
    packed = _gzipped(_ted_slice(tmp_path, 400), tmp_path)
    packed.write_bytes(damage(packed.read_bytes()))
    problems = scan(reg.get("mqm"), importer_for(reg.get("mqm")), [packed]).problems
    assert problems and message in problems[-1].message and problems[-1].path == str(packed)


@pytest.mark.parametrize("protocol, shown, absent", [("mqm", "context", "missing"), ("esa", "missing", "context")])
def test_the_reader_s_own_fields_go_only_where_the_protocol_shows_them(reg, tmp_path, caplog, protocol, shown, absent):
    """MQM shows the document context, ESA the [MISSING] token: each task holds its protocol's, not the other's,
    and the warning about fields not used names only the file's own (doc, doc_id, seg_id)."""
    path = _ted_slice(tmp_path)
    project = reg.get(protocol)
    with caplog.at_level(logging.WARNING):
        result = scan(project, importer_for(project), [path])
        result.warn_unknown(project)
    warnings = [r.getMessage() for r in caplog.records if "not used by" in r.getMessage()]
    assert warnings == [f"{path}: field(s) doc, doc_id, seg_id are not used by the {protocol} protocol; kept with "
                        "each task as metadata (its meta)"]
    tasks = [split_task(project, data) for _, data in iter_tasks(project, importer_for(project), [path])]
    assert tasks and all(shown in t["data"] and absent not in t["data"] and absent not in t["meta"] for t in tasks)


def test_a_gzipped_parquet_file_is_refused_naming_why(tmp_path):
    """Parquet is compressed already: FILE.parquet.gz is one problem saying so, for an entry that reads Parquet."""
    import pandas as pd

    from evalstudio.protocols import registry

    from .test_cli import _projects_file

    projects = _projects_file(tmp_path, lambda raw: raw["projects"]["esa"]["input"].update(formats=["jsonl", "parquet"]))
    project = registry.load(projects).get("esa")
    plain = tmp_path / "esa.parquet"
    pd.read_json(EXAMPLES / "esa" / "ted_ende.jsonl", lines=True).to_parquet(plain)
    assert scan(project, importer_for(project), [plain]).problems == []
    problems = scan(project, importer_for(project), [_gzipped(plain, tmp_path)]).problems
    assert [p.message for p in problems] == ["a Parquet file is compressed already: give it unzipped (.parquet)"]
