"""Published error-span studies (`layout: spans` in an analysis spec) as a frame of spans, the segments' scores and
the tidy ratings frame `analyze` reads, so an MQM or ESA study is re-analysed without Label Studio.

    layout: spans
    spans:
      format: mqm          # mqm: github:google/wmt-mqm-human-evaluation's TSV (system, doc, doc_id, seg_id, rater,
                           #   source, target, category, severity[, comment]; one row per error, the span marked
                           #   <v>...</v> in the target, or in the source for an omission; "No-error" rows)
                           # esa: Appraise's score export of an ESA campaign (github:wmt-conference/
                           #   ErrorSpanAnnotation data/: user, system, item, type, source language, target language,
                           #   score, document, complete, error spans as JSON, start, end; no header)
      weights:             # MQM only: rules, the first that matches an error gives its weight (default: the
        - {severity: Major, weight: 5}       # published weighting, evalstudio.stats.spans.MQM_WEIGHTS)
        - {severity: Minor, category: Fluency/Punctuation, weight: 0.1}

The spans frame has one row per span with the columns of the span frame of a Label Studio export
(exporters.tidy): project, task_id, item_id, system, annotator, annotation_id, cancelled, surplus, over_max
(False: a published file is taken as it is), control, region_id, start, end, text, labels (the severity, as the mqm
and esa protocols' span labels are), ls_text (empty: no editor stored it), then category and comment (the mqm
protocol's per-region answers) and `line`, the file's line. Offsets count characters (code points) of
the target without the <v> marks; an error marked in the source has control `source`, a whole-segment error or an
ESA span for missing content has no offsets. The segments frame has one row per (system, item, annotator) a
rater rated, with its score (MQM: the sum of its error weights; ESA: the 0-100 score). The tidy frame holds each
segment's score as a rating on the criterion MQM (negated, so that higher is better throughout the analysis, as
mt-metrics-eval stores MQM) or ESA. Every problem is reported as `file:line: field: message`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from evalstudio.base.errors import BadInput, Problems
from evalstudio.stats.spans import MQM_WEIGHTS, mqm_weights
from evalstudio.values.sources import format_suffix

MQM_COLUMNS = ("system", "doc", "doc_id", "seg_id", "rater", "source", "target", "category", "severity")
ESA_COLUMNS = ("annotator", "system", "item", "type", "source_language", "target_language", "score", "document",
               "complete", "error_spans", "start_time", "end_time")
# the spans table of a Label Studio export (exporters.tidy), then the per-region answers MQM has and the file's line
SPAN_COLUMNS = ["project", "task_id", "item_id", "system", "annotator", "annotation_id", "cancelled", "surplus",
                "over_max", "control", "region_id", "start", "end", "text", "labels", "ls_text", "category", "comment", "line"]
OPEN, CLOSE = "<v>", "</v>"
# the mqm protocol's span controls (labeling_configs/mqm.xml) -> the text each marks, named as a published file's
# spans are (control `target`, or `source` for an error marked in the source), and their per-region category
MQM_SPAN_TEXTS = {"errors": "target", "source_errors": "source"}
MQM_CATEGORIES = ("category", "source_category")


class WeightRule(BaseModel):
    """An MQM weight: errors of this severity and category ('' or left out: any; a category matches its
    sub-categories) weigh `weight`."""

    model_config = ConfigDict(extra="forbid")
    severity: str = ""
    category: str = ""
    weight: float = Field(ge=0, allow_inf_nan=False)


class Spans(BaseModel):
    """Which published span layout a file has and how its errors are weighted (see the module's documentation)."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["mqm", "esa"] = "mqm"
    weights: list[WeightRule] | None = None

    def rules(self) -> tuple[tuple[str, str, float], ...]:
        """The weight rules as (severity, category, weight), the published ones unless the spec gives its own."""
        if self.weights is None:
            return MQM_WEIGHTS
        return tuple((r.severity, r.category, r.weight) for r in self.weights)


@dataclass
class SpanStudy:
    """A span study read from a file: its spans, its rated segments with their scores, and the tidy ratings."""

    spans: pd.DataFrame
    segments: pd.DataFrame
    tidy: pd.DataFrame
    criterion: str
    higher_is_better: bool
    notes: list[str]


def _read_tsv(path: Path, names: tuple[str, ...] | None, problems: Problems) -> tuple[pd.DataFrame, np.ndarray]:
    """(every cell as text, each row's line) of a tab- or comma-separated file read without quoting, as the MQM
    files are written (a cell may begin with a quotation mark); a row whose cells do not match the header is a
    problem at its line."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    bad: list[tuple[int, str]] = []

    def invalid(row):
        bad.append((row.number, f"{row.actual_columns} cell(s), the header has {row.expected_columns}"))
        return "skip"

    esa = names is not None
    if not esa:
        try:
            import gzip

            opened = gzip.open if path.suffix.lower() == ".gz" else open  # a .tsv.gz is read as it is
            with opened(path, "rt", encoding="utf-8") as f:
                names = tuple(f.readline().rstrip("\r\n").split("\t"))
        except (OSError, UnicodeDecodeError, EOFError) as e:
            raise BadInput(f"{path}: cannot read it: {str(e)[:200]}") from None
        if len(set(names)) < len(names):
            raise BadInput(f"{path}:1: a column name is repeated in the header")
    try:
        table = pacsv.read_csv(
            path, read_options=pacsv.ReadOptions(use_threads=False, column_names=list(names), block_size=1 << 24,
                                                 skip_rows=0 if esa else 1),
            parse_options=pacsv.ParseOptions(delimiter="," if esa else "\t", quote_char='"' if esa else False,
                                             newlines_in_values=False, ignore_empty_lines=False,
                                             invalid_row_handler=invalid),
            convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                 strings_can_be_null=False, null_values=[], check_utf8=True,
                                                 quoted_strings_can_be_null=False))
    except (OSError, pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot read it as {'ESA (Appraise CSV)' if esa else 'MQM TSV'}: "
                       f"{str(e).splitlines()[0][:200]}") from None
    for number, message in bad:
        problems.add(number, None, message)
    frame = pd.DataFrame({name: table.column(name).cast(pa.string()).to_pandas() for name in table.column_names})
    skipped = np.array(sorted(n for n, _ in bad if n is not None), dtype=np.int64)
    rows = np.arange(len(frame) + len(skipped), dtype=np.int64) + (1 if esa else 2)  # without newlines in cells
    lines = np.setdiff1d(rows, skipped)[: len(frame)] if len(skipped) else rows[: len(frame)]
    return frame, lines


def _marked(text: pd.Series, lines: np.ndarray, notes: list[str], field: str, path: Path):
    """(start, end, covered text, the text without marks) of the one <v>...</v> span in each cell (-1 where none).
    A cell with an unclosed, reversed or second mark keeps no offsets (the error still counts in the scores: its
    weight does not depend on them), and a note names its lines (the published TED en-de file has one, line 6444)."""
    start = text.str.find(OPEN).to_numpy()
    close = text.str.find(CLOSE).to_numpy()
    opens, closes = text.str.count(OPEN).to_numpy(), text.str.count(CLOSE).to_numpy()
    wrong = (opens != closes) | (opens > 1) | ((start >= 0) & (close < start))
    if wrong.any():
        at = ", ".join(str(n) for n in lines[wrong][:5]) + (" ..." if wrong.sum() > 5 else "")
        notes.append(f"{path}:{at}: {field}: {int(wrong.sum())} error span(s) not marked {OPEN}...{CLOSE} once "
                     "(unclosed, reversed or repeated): kept without offsets, counted in the scores")
    has = (start >= 0) & ~wrong
    clean = text.str.replace(OPEN, "", regex=False).str.replace(CLOSE, "", regex=False)
    end = np.where(has, close - len(OPEN), -1)
    start = np.where(has, start, -1)
    import pyarrow as pa
    import pyarrow.compute as pc

    inside = pc.extract_regex(pa.array(text.to_numpy(dtype=object), type=pa.large_string()), r"<v>(?P<v>.*?)</v>")
    covered = pd.Series(pc.struct_field(inside, [0]).to_numpy(zero_copy_only=False), dtype=object)
    covered = covered.where(has & covered.notna().to_numpy(), "")  # Arrow's RE2, in C++: no loop over the rows
    return start, end, covered, clean


def read_mqm(path: Path, spans_spec: Spans, project: str) -> SpanStudy:
    """An MQM TSV of google/wmt-mqm-human-evaluation as a span study (see the module's documentation)."""
    problems = Problems(path)
    frame, lines = _read_tsv(path, None, problems)
    missing = [c for c in MQM_COLUMNS if c not in frame.columns]
    if missing:
        problems.add(1, missing[0], f"no such column; an MQM file has {', '.join(MQM_COLUMNS)} (and comment)")
        problems.raise_if_any()
    for col in ("system", "seg_id", "rater"):
        problems.add_rows((frame[col].str.strip() == "").to_numpy(), lines, col, "empty")
    notes: list[str] = []
    t_start, t_end, t_text, target = _marked(frame["target"], lines, notes, "target", path)
    s_start, s_end, s_text, _ = _marked(frame["source"], lines, notes, "source", path)
    no_error = frame["severity"].str.strip().str.lower().eq("no-error").to_numpy()
    weight = np.where(no_error, 0.0, mqm_weights(frame["severity"], frame["category"], spans_spec.rules()))  # not an error
    severity, category = frame["severity"].to_numpy(), frame["category"].to_numpy()
    problems.add_rows(np.isnan(weight), lines, "severity",
                      lambda i: f"no weight for severity '{severity[i][:40]}' of category '{category[i][:40]}': give "
                                "it one in the spec's spans.weights (the published ones know Major, Minor, Neutral "
                                "and Non-translation)")
    problems.raise_if_any()
    item = frame["seg_id"].str.strip()
    on_source = (t_start < 0) & (s_start >= 0)
    errors = ~no_error
    spans = pd.DataFrame({
        "project": project, "task_id": "", "item_id": item, "system": frame["system"], "annotator": frame["rater"],
        "annotation_id": "", "cancelled": False, "surplus": False, "over_max": False,
        "control": np.where(on_source, "source", "target"), "region_id": "",
        "start": np.where(on_source, s_start, np.where(t_start >= 0, t_start, np.nan)),
        "end": np.where(on_source, s_end, np.where(t_start >= 0, t_end, np.nan)),
        "text": np.where(on_source, s_text, t_text), "labels": frame["severity"], "ls_text": "",
        "category": frame["category"], "comment": frame["comment"] if "comment" in frame else "", "line": lines,
    })[errors].reset_index(drop=True)[SPAN_COLUMNS]
    rated = pd.DataFrame({"system": frame["system"], "item": item, "annotator": frame["rater"],
                          "doc": frame["doc"], "weight": weight, "length": target.str.len(), "line": lines})
    segments = (rated.groupby(["system", "item", "annotator"], sort=True, observed=True)
                .agg(doc=("doc", "first"), score=("weight", "sum"), line=("line", "first"),
                     length=("length", "first")).reset_index())
    segments["score"] = segments["score"].round(10)  # sums of 0.1: 0.30000000000000004 is 0.3
    tidy = pd.DataFrame({"project": project, "item": segments["item"], "system": segments["system"], "agent": "",
                         "annotator": segments["annotator"], "criterion": "MQM", "value": -segments["score"] + 0.0,
                         "line": segments["line"]})
    notes += [f"{path.name}: {int(errors.sum())} error(s) and {int(no_error.sum())} No-error row(s) in "
             f"{len(segments)} rated segment(s)"]
    return SpanStudy(spans, segments, tidy, "MQM", False, notes)


def _esa_spans(cells: np.ndarray, lines: np.ndarray, problems: Problems) -> list[tuple[int, object, object, str]]:
    """(row, start, end, severity) of every span in the JSON cells of an Appraise export; 'missing' offsets (the
    span for missing content) are None."""
    found = []
    for row, cell in enumerate(cells):
        try:
            spans = json.loads(cell) if cell.strip() else []
        except (ValueError, RecursionError):
            problems.add(int(lines[row]), "error_spans", "not JSON (a list of spans with start_i, end_i, severity)")
            continue
        if not isinstance(spans, list) or not all(isinstance(s, dict) for s in spans):
            problems.add(int(lines[row]), "error_spans", "not a list of spans (objects with start_i, end_i, severity)")
            continue
        for s in spans:
            start, end, severity = s.get("start_i"), s.get("end_i"), s.get("severity")
            if start == "missing" and end == "missing":
                start = end = None
            elif not (type(start) is int and type(end) is int and 0 <= start <= end):  # noqa: E721 (not bool)
                problems.add(int(lines[row]), "error_spans", f"span offsets {str(start)[:20]}, {str(end)[:20]} are not "
                                                             "whole numbers with 0 <= start <= end (or 'missing')")
                continue
            # undecided: Appraise's severity of a span the annotator never gave one (the released ESA campaigns
            # hold them; ESA's own scripts weigh them 0): kept as marked, as Undecided
            if not isinstance(severity, str) or severity.lower() not in ("minor", "major", "undecided"):
                problems.add(int(lines[row]), "error_spans", f"severity {str(severity)[:20]!r} is not minor, major "
                                                             "or undecided")
                continue
            found.append((row, start, end, severity.capitalize()))
    return found


def read_esa(path: Path, project: str) -> SpanStudy:
    """An ESA campaign's Appraise score export as a span study: the rows of type TGT (the rated translations; BAD
    and other attention checks are left out with a note), each with its 0-100 score and its spans. The export
    holds no texts: the spans' text is empty and span agreement needs the segments' lengths."""
    problems = Problems(path)
    frame, lines = _read_tsv(path, ESA_COLUMNS, problems)
    kept = (frame["type"].str.strip() == "TGT").to_numpy()
    notes = [f"{path.name}: {int((~kept).sum())} row(s) that are not TGT (attention checks) left out"] if (~kept).any() else []
    frame, lines = frame[kept].reset_index(drop=True), lines[kept]
    twice = frame.duplicated().to_numpy()  # a row exported twice, every cell the same (the released campaigns have some)
    if twice.any():
        notes.append(f"{path.name}: {int(twice.sum())} row(s) repeating an earlier row cell for cell (the same answer "
                     "exported twice) read once")
        frame, lines = frame[~twice].reset_index(drop=True), lines[~twice]
    documents = frame.groupby(["system", "item"])["document"].nunique()
    if (documents > 1).any():  # Appraise numbers items within a batch: the same number names other segments elsewhere
        notes.append(f"{path.name}: item numbers repeat across documents ({int((documents > 1).sum())} system and item "
                     "pairs name segments of several documents): segments are named item#document, as ESA's own "
                     "loader keys them; segments of two systems then share no name (the export does not say which "
                     "translate the same source)")
        frame = frame.assign(item=frame["item"].str.strip() + "#" + frame["document"].str.strip())
    # an annotator who answered a segment again (Appraise keeps the corrected answer as a new row): the last one
    # (by end time, then by place in the file) is the answer; the earlier ones are said, never averaged in
    ended = pd.to_numeric(frame["end_time"], errors="coerce").fillna(-np.inf).to_numpy()
    order = np.lexsort((np.arange(len(frame)), ended))
    again = np.zeros(len(frame), dtype=bool)
    again[order] = frame.iloc[order].duplicated(["annotator", "system", "item"], keep="last").to_numpy()
    if again.any():
        notes.append(f"{path.name}: {int(again.sum())} earlier answer(s) of a segment its annotator answered again "
                     "left out (the last answer counts; e.g. line " f"{int(lines[again][0])})")
        frame, lines = frame[~again].reset_index(drop=True), lines[~again]
    for col in ("annotator", "system", "item"):
        problems.add_rows((frame[col].str.strip() == "").to_numpy(), lines, col, "empty")
    score = pd.to_numeric(frame["score"].str.strip(), errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(score)
    given = frame["score"].to_numpy()
    problems.add_rows(~ok | (score < 0) | (score > 100), lines, "score",
                      lambda i: f"'{given[i][:20]}' is not a score from 0 to 100")
    found = _esa_spans(frame["error_spans"].to_numpy(), lines, problems)
    problems.raise_if_any()
    rows = np.array([f[0] for f in found], dtype=np.int64)
    start = pd.array([f[1] for f in found], dtype="Int64").astype(float)
    end = pd.array([f[2] for f in found], dtype="Int64").astype(float)
    sev = [f[3] for f in found]
    pick = frame.iloc[rows]
    spans = pd.DataFrame({"project": project, "task_id": "", "item_id": pick["item"].to_numpy(),
                          "system": pick["system"].to_numpy(), "annotator": pick["annotator"].to_numpy(),
                          "annotation_id": "", "cancelled": False, "surplus": False, "over_max": False, "control": "target",
                          "region_id": "", "start": start, "end": end, "text": "", "labels": sev, "ls_text": "",
                          "category": "", "comment": "", "line": lines[rows]})
    segments = pd.DataFrame({"system": frame["system"], "item": frame["item"], "annotator": frame["annotator"],
                             "doc": frame["document"], "score": score, "line": lines, "length": np.nan})
    tidy = pd.DataFrame({"project": project, "item": segments["item"], "system": segments["system"], "agent": "",
                         "annotator": segments["annotator"], "criterion": "ESA", "value": score, "line": lines})
    return SpanStudy(spans, segments, tidy, "ESA", True, notes)


def read_span_study(path: Path, spec) -> SpanStudy:
    """The span study in `path` as the spec's `spans:` section says (MQM TSV or ESA's Appraise export)."""
    if format_suffix(path) not in (".tsv", ".csv", ".txt"):  # gzipped too (.tsv.gz)
        raise BadInput(f"{path}: layout spans reads MQM's .tsv or ESA's Appraise export (.csv), or either gzipped")
    spans_spec = spec.spans or Spans()
    study = read_mqm(path, spans_spec, spec.name) if spans_spec.format == "mqm" else read_esa(path, spec.name)
    if study.tidy.empty:
        raise BadInput(f"{path}: no rated segments")
    return study



def study_from_export(spans: pd.DataFrame, annotations: pd.DataFrame, protocol: Literal["mqm", "esa"],
                      lengths: pd.Series | None = None, rules=MQM_WEIGHTS) -> SpanStudy:
    """A span study from the tables of a Label Studio export of the mqm or esa protocol (exporters.tidy: the spans
    table, one row per span with its label (the severity) and per-region `category`; the annotations table, one row
    per annotation and criterion), so that the same statistics serve projects and published files. A rated segment
    is an annotation that is not cancelled nor surplus; its MQM score is the weight of its spans plus a
    Non-translation when its non_translation box is ticked; its ESA score is its `score`. An mqm span's control
    becomes the text it marks (MQM_SPAN_TEXTS: `source` for source_errors, as a published file's omission marked in
    the source; `target` otherwise) and its category is its text's per-region answer (category or source_category),
    so it is weighed as the same error of a published file is. `lengths`: each task's target length by task_id (for
    span agreement's alpha; without it, none)."""
    left_out = annotations["cancelled"].astype(bool)
    if "surplus" in annotations:
        left_out |= annotations["surplus"].astype(bool)
    kept = annotations[~left_out]
    item = kept["item_id"].where(kept["item_id"].notna(), kept["task_id"]).astype(str)
    rated = pd.DataFrame({"annotation_id": kept["annotation_id"], "task_id": kept["task_id"], "item": item,
                          "system": kept["system"].fillna("").astype(str), "annotator": kept["annotator"].astype(str),
                          "criterion": kept["criterion"], "value": kept["value"]})
    segments = rated.drop_duplicates("annotation_id")[["annotation_id", "task_id", "system", "item", "annotator"]]
    spans = spans[spans["annotation_id"].isin(segments["annotation_id"])].reset_index(drop=True)
    categories = [spans[c] for c in (MQM_CATEGORIES if protocol == "mqm" else ()) if c in spans]
    category = pd.Series([""] * len(spans), index=spans.index, dtype=object)
    for given in reversed(categories):  # each span answers one of them: the per-region question of its text
        category = given.where(given.notna() & (given.astype(str) != ""), category)
    if protocol == "mqm":
        ticked = rated[(rated["criterion"] == "non_translation") & (rated["value"].astype(str) == "Non-translation")]
        errors = pd.DataFrame({"annotation_id": np.concatenate([spans["annotation_id"], ticked["annotation_id"]]),
                               "severity": np.concatenate([spans["labels"].astype(str), np.full(len(ticked), "")]),
                               "category": np.concatenate([category.fillna("").astype(str),
                                                           np.full(len(ticked), "Non-translation")])})
        errors["weight"] = mqm_weights(errors["severity"], errors["category"], rules)
        if errors["weight"].isna().any():
            bad = errors[errors["weight"].isna()].iloc[0]
            raise BadInput(f"annotation {bad['annotation_id']}: no weight for severity '{bad['severity']}' of category "
                           f"'{bad['category']}': give it one in the weight rules")
        score = errors.groupby("annotation_id")["weight"].sum().reindex(segments["annotation_id"]).fillna(0.0)
        criterion, higher, value = "MQM", False, -score.to_numpy() + 0.0
    else:
        given = rated[rated["criterion"] == "score"].drop_duplicates("annotation_id").set_index("annotation_id")
        score = pd.to_numeric(given["value"], errors="coerce").reindex(segments["annotation_id"])
        criterion, higher, value = "ESA", True, score.to_numpy(dtype=float)
    segments = segments.assign(score=score.to_numpy(dtype=float), doc="", line=0,
                               length=(lengths.reindex(segments["task_id"]).to_numpy(dtype=float)
                                       if lengths is not None else np.nan))
    study_spans = spans.assign(item_id=spans["item_id"].where(spans["item_id"].notna(), spans["task_id"]).astype(str),
                               system=spans["system"].fillna("").astype(str), annotator=spans["annotator"].astype(str),
                               control=(spans["control"].map(MQM_SPAN_TEXTS).fillna("target") if protocol == "mqm"
                                        else "target"), line=0, **({"category": category} if categories else {}))
    tidy = pd.DataFrame({"project": protocol, "item": segments["item"], "system": segments["system"], "agent": "",
                         "annotator": segments["annotator"], "criterion": criterion, "value": value, "line": 0})
    tidy = tidy[tidy["value"].notna()].reset_index(drop=True)
    return SpanStudy(study_spans, segments.drop(columns=["annotation_id", "task_id"]), tidy, criterion, higher, [])
