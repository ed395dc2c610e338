"""Filtering with the judge, with a guarantee: segments an LLM judge marks error-free are left out of the humans'
work only as far as PAC labels (Candès, Ilyas & Zrnic 2025; evalstudio.stats.pac) allow on the binary "has an
error", never silently.

ESA-AI (Zouhar, Kocmi & Sachan 2024, "AI-Assisted Human Evaluation of Machine Translation") saved about a quarter of
its budget by not showing humans the segments GEMBA-MQM found no error in, with no guarantee of what that cost.
Here the judge's "has an error" is a label of each segment (its spans table: any span it marked; MQM: any span
that weighs something, or Non-translation), the humans' the same of their spans, and `active pac` gives the
threshold from a uniform calibration sample the humans annotate: with probability at least 1 - alpha, at most a
share epsilon of all segments are skipped while the humans would have marked an error in them. A segment the judge
marks an error in always goes to humans (they correct its spans); only error-free ones may be skipped.

The judge's side is `evalstudio judge`'s folder for a span protocol (annotations.csv, every segment it answered,
and spans.csv, every span it marked); the humans' side is an export's annotations table with its spans table
beside it (annotations.csv and annotations.spans.csv), or a published span study (`layout: spans`: an MQM TSV, an
ESA Appraise export). Both are read as span studies (readers.spans), as `analyze` reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput, Problems
from evalstudio.protocols.attention import CHECK_COLUMN, check_rows
from evalstudio.readers.ratings import attention_checks_note
from evalstudio.readers.spans import SpanStudy, study_from_export
from evalstudio.readers.spec import CriterionSpec, Spec
from evalstudio.readers.tables import read_table

from ..tables.tidy import spans_path

HAS_ERROR = "has_error"  # the criterion `active draw` and `active pac` read from span tables
LABELS = ["no", "yes"]  # its labels: the position of "yes" (2) is the judge's score in the draws file
JUDGE_SPANS = "spans.csv"  # a judge's folder: the spans beside its annotations.csv


def has_error_spec(name: str = HAS_ERROR) -> Spec:
    """The analysis spec of the binary criterion: nominal, no / yes."""
    return Spec(name=name, criteria={HAS_ERROR: CriterionSpec(scale="nominal", labels=LABELS)})


def has_error(study: SpanStudy) -> pd.DataFrame:
    """One row per rated segment and annotator: system, item, annotator, has_error (bool). An error is any span
    (ESA: its span on [MISSING] too); on MQM, a span that weighs something or a ticked Non-translation (a segment
    score above 0: Neutral spans weigh 0)."""
    seg = study.segments
    keys = list(zip(seg["system"].astype(str), seg["item"].astype(str), seg["annotator"].astype(str)))
    if study.criterion == "MQM":
        marked = (pd.to_numeric(seg["score"], errors="coerce").fillna(0) > 0).to_numpy()
    else:
        spans = study.spans
        found = set(zip(spans["system"].astype(str), spans["item_id"].astype(str), spans["annotator"].astype(str)))
        marked = np.array([k in found for k in keys], dtype=bool)
    return pd.DataFrame({"system": [k[0] for k in keys], "item": [k[1] for k in keys],
                         "annotator": [k[2] for k in keys], HAS_ERROR: marked})


def _flags(column: pd.Series) -> pd.Series:
    return column.astype(str).str.strip().str.lower().isin(["true", "1"])


def read_span_tables(path: Path, protocol: str, target: list[str] | None = None, criteria: dict | None = None,
                     checks: bool = False) -> SpanStudy:
    """The span study of an annotations table (an export's, or a judge's folder's annotations.csv) and its spans
    table beside it (NAME.spans.EXT, or spans.csv in a judge's folder). `target`: the span controls whose spans keep
    their offsets (span_analysis.offset_controls); a span of another control (ESA's span on [MISSING]) keeps none, as
    the live study's does.
    `criteria` (name: CriterionSpec): an answer's value off its criterion's range or labels is refused at its line.
    The rows of attention checks (a non-empty `attention_check_of`) are left out of both tables, with a note; an
    export without that column of a protocol with attention checks (`checks`) is refused: it cannot say which."""
    if protocol not in ("mqm", "esa"):
        raise BadInput(f"--protocol {protocol}: the binary has_error is read from the span tables of mqm or esa")
    annotations, annotation_lines = read_table(path)
    _require(annotations, path, ("task_id", "item_id", "system", "annotator", "criterion", "value", "annotation_id",
                                 "cancelled"), "an annotations table (`export` or `judge` writes one; a published "
                                               "MQM TSV or ESA export is read with --spec of layout: spans)")
    beside = [p for p in (spans_path(path), path.with_name(JUDGE_SPANS)) if p.exists() and p != path]
    if not beside:
        raise BadInput(f"{path}: the spans of this study are in {spans_path(path).name}, not found beside it: put "
                       f"the spans file `evalstudio export` wrote with it (same stem, same format; a judge's folder "
                       f"holds {JUDGE_SPANS}) beside it, or analyse the study live (--protocol {protocol} without a "
                       "file); an analysis without the spans would have no MQM or ESA scores")
    spans, lines = read_table(beside[0])
    _require(spans, beside[0], ("task_id", "item_id", "system", "annotator", "annotation_id", "start", "end",
                                "labels"), "a spans table (`export` or `judge` writes one)")
    elsewhere = ((~spans["control"].isin(target)).to_numpy() if target is not None and "control" in spans
                 else np.zeros(len(spans), dtype=bool))
    for column in ("start", "end"):
        given = spans[column].replace({"": np.nan})
        number = pd.to_numeric(given, errors="coerce")
        bad = (number.isna() & given.notna()).to_numpy()
        if bad.any():
            raise BadInput(f"{beside[0]}:{lines[bad][0]}: {column}: '{str(given[bad].iloc[0])[:20]}' is not an offset "
                           "(a whole number, or empty)")
        spans[column] = number.where(~elsewhere)
    _check_values(annotations, annotation_lines, criteria or {}, path)
    notes = []
    if CHECK_COLUMN in annotations:
        marked = check_rows(annotations)
        if marked.any():
            notes.append(attention_checks_note(int(annotations.loc[marked, "task_id"].nunique()), "task(s)",
                                               path.name))
            annotations = annotations[~marked].reset_index(drop=True)
        spans = spans[~check_rows(spans)].reset_index(drop=True)
    elif checks:  # an attention check's score counted as a rating of its segment would be a wrong number
        raise BadInput(f"{path}: no {CHECK_COLUMN} column, so this export does not say which of its tasks are "
                       f"attention checks (spoiled copies, which this protocol adds: no score may count them); an "
                       f"export made before 2026-11-29? Export the study again (`evalstudio export {protocol}`), or "
                       f"analyse it live (--protocol {protocol} without a file)")
    frames = []
    for frame in (annotations, spans):
        frame = frame.replace({"": np.nan}).assign(cancelled=_flags(frame.get("cancelled", pd.Series(["false"] *
                                                                                              len(frame)))))
        frame["surplus"] = _flags(frame["surplus"]) if "surplus" in frame else False
        # a judge's answers have no annotation id: the task and the judge name one
        frame["annotation_id"] = frame["annotation_id"].where(frame["annotation_id"].notna(),
                                                              frame["task_id"].astype(str) + "|" +
                                                              frame["annotator"].astype(str))
        frames.append(frame)
    study = study_from_export(frames[1], frames[0], protocol)
    study.notes += notes
    return study


def _require(frame: pd.DataFrame, path: Path, columns: tuple, what: str) -> None:
    if missing := [c for c in columns if c not in frame]:
        raise BadInput(f"{path}: not {what}: no column {', '.join(missing)}")


def _check_values(annotations: pd.DataFrame, lines: np.ndarray, criteria: dict, path: Path) -> None:
    """Every answer's value (not cancelled, not empty) on its criterion's range or labels, else refused at its line
    (a value the live study could not hold: an edited file)."""
    problems = Problems(path)
    text = annotations["value"].astype(str).str.strip()
    given = text.to_numpy()
    answered = ~_flags(annotations["cancelled"]).to_numpy() & (text != "").to_numpy()
    for name, crit in criteria.items():
        rows = answered & (annotations["criterion"] == name).to_numpy()
        if crit.reads_numbers:
            low, high = (-np.inf if crit.min is None else crit.min), (np.inf if crit.max is None else crit.max)
            number = pd.to_numeric(text, errors="coerce")
            problems.add_rows(rows & ~number.between(low, high).to_numpy(), lines, "value",
                              lambda i: f"'{given[i][:40]}' is not a number from {low:g} to {high:g} ({name})")
        elif crit.labels is not None:
            problems.add_rows(rows & ~text.isin(crit.labels).to_numpy(), lines, "value",
                              lambda i: f"'{given[i][:40]}' is not one of {name}'s labels ({', '.join(crit.labels)})")
    problems.raise_if_any()


def judge_error_scores(study: SpanStudy, judge: str) -> pd.DataFrame:
    """The judge's has_error of each segment as metric scores for `active draw` (system, item, metric, criterion,
    value: the label's position, 1 no / 2 yes; confidence: 1 where it marked no error, 0 where it marked one, so
    that only error-free segments can fall below a PAC threshold)."""
    marked = has_error(study)
    mine = marked[marked["annotator"] == judge]
    if mine.empty:
        raise BadInput(f"--metric {judge}: no segments of this judge in the span tables (they have: "
                       f"{', '.join(sorted(set(marked['annotator']))[:20])})")
    return pd.DataFrame({"system": mine["system"], "item": mine["item"], "metric": judge, "criterion": HAS_ERROR,
                         "value": np.where(mine[HAS_ERROR], 2.0, 1.0),
                         "confidence": np.where(mine[HAS_ERROR], 0.0, 1.0)}).reset_index(drop=True)


def human_error_ratings(study: SpanStudy) -> pd.DataFrame:
    """The humans' has_error of each segment and annotator as tidy ratings (value: no / yes)."""
    marked = has_error(study)
    return pd.DataFrame({"project": HAS_ERROR, "item": marked["item"], "system": marked["system"], "agent": "",
                         "annotator": marked["annotator"], "criterion": HAS_ERROR,
                         "value": np.where(marked[HAS_ERROR], LABELS[1], LABELS[0]), "line": 0})


def filter_summary(table: pd.DataFrame, draws: pd.DataFrame, threshold: float) -> dict:
    """What skipping by the judge means in `active pac`'s table on has_error: segments, skipped (left to the judge's
    "no error"), the calibration sample, and on it the segments the threshold would skip that the humans marked an
    error in (the realised error on the calibration sample: their share of the sample)."""
    sampled = draws["drawn"].to_numpy(bool)
    below = (table["judge_label"] == LABELS[0]).to_numpy() & (pd.to_numeric(table["uncertainty"]) <
                                                             threshold).to_numpy()
    wrong = below & sampled & (table["human_label"] == LABELS[1]).to_numpy()
    skipped = int((~table["needs_human"].astype(bool)).sum())
    return {"segments": len(table), "skipped": skipped, "sample": int(sampled.sum()),
            "sample_would_skip": int((below & sampled).sum()), "sample_wrong": int(wrong.sum()),
            "realised_error": float(wrong.sum() / max(int(sampled.sum()), 1))}


def error_study(path: Path, spec: Spec | None, project) -> SpanStudy:
    """The span study has_error is read from: a published span file (`spec` with layout spans) or the span tables
    of a protocol's export or judge run (`project`: the mqm or esa entry, or a copy of it)."""
    if spec is not None:
        if spec.layout != "spans":
            raise BadInput(f"--criterion {HAS_ERROR}: the spec must have layout: spans (an MQM TSV or an ESA export); "
                           "or give --protocol mqm / esa for an export's or a judge's span tables")
        from evalstudio.readers.spans import read_span_study

        return read_span_study(path, spec)
    if project is None:
        raise BadInput(f"--criterion {HAS_ERROR}: give --protocol (mqm, esa) for the span tables of an export or a "
                       "judge run, or --spec with layout: spans for a published span file")
    from .span_analysis import span_protocol

    kind = span_protocol(project)
    if kind is None:
        raise BadInput(f"--protocol {project.name}: not a span protocol (mqm, esa, or a copy of one)")
    return read_span_tables(path, kind)
