"""The MQM TSV of github:google/wmt-mqm-human-evaluation (one row per error, the span marked <v>...</v>) as input
records for the `mqm` and `esa` protocols: one record per translated segment (a system's translation of one
seg_id), with the source and target without the marks, the document context (the same system's translations of the
document's earlier segments, as MQM raters saw them) and the [MISSING] token ESA's annotators mark for missing
content. The errors themselves are not carried into the tasks: they are the published annotations, which `analyze`
reads (`layout: spans`); a task starts unannotated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from evalstudio.base.errors import Problem

from .sources import read_table

COLUMNS = ("system", "doc", "doc_id", "seg_id", "rater", "source", "target", "category", "severity")
START = "(the start of the document)"


def _clean(text: str) -> str:
    return text.replace("<v>", "").replace("</v>", "")


def _order(seg_id: str):
    return (0, int(seg_id), "") if seg_id.isdigit() else (1, 0, seg_id)


MADE = ("context", "missing")  # the fields the reader makes (they are not in the file)


def mqm_segments(path: Path, reads: frozenset[str] | None = None) -> Iterator[tuple[int, dict | Problem]]:
    """(line, record or problem) per translated segment of an MQM TSV (gzipped too: .tsv.gz): id (doc-seg_id),
    system, doc, doc_id, seg_id, source, target and the fields the reader makes, context and missing, where the
    protocol `reads` them (None: both; MQM shows the context, ESA the [MISSING] token: neither is kept in the other's
    tasks). Two rows of one segment whose texts differ apart from the marks are a problem at the second's line."""
    made = [name for name in MADE if reads is None or name in reads]
    segments: dict[tuple[str, str], tuple[int, dict]] = {}
    for line, row in read_table(path, "\t", COLUMNS):
        if isinstance(row, Problem):
            yield line, row
            continue
        key = (row["system"], row["seg_id"])
        record = {"id": f"{row['doc']}-{row['seg_id']}", "system": row["system"], "doc": row["doc"],
                  "doc_id": row["doc_id"], "seg_id": row["seg_id"], "source": _clean(row["source"]),
                  "target": _clean(row["target"])}
        if key in segments:
            first_line, first = segments[key]
            for field in ("source", "target", "doc"):
                if first[field] != record[field]:
                    yield line, Problem(str(path), line, field, f"segment {row['seg_id']} of {row['system'][:40]} differs "
                                                               f"from line {first_line} apart from the <v> marks")
            continue
        segments[key] = (line, record)
    by_document: dict[tuple[str, str], list[tuple[int, dict]]] = {}
    for line, record in segments.values():
        by_document.setdefault((record["system"], record["doc"]), []).append((line, record))
    for rows in by_document.values():
        before: list[str] = []
        for line, record in sorted(rows, key=lambda r: _order(r[1]["seg_id"])):
            extra = {"context": "\n".join(before) or START, "missing": "[MISSING]"}
            yield line, {**record, **{name: extra[name] for name in made}}
            before.append(record["target"])
