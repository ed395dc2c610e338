"""The tables `analyze` adds for a span study (`layout: spans`): each system's MQM or ESA score with its rank and
significance cluster, each segment's score, and the agreement of every two annotators on the segments both marked
(character-level precision, recall, F1 and Krippendorff's alpha). The statistics are evalstudio.stats.spans."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalstudio.readers.spans import MQM_SPAN_TEXTS, SpanStudy, study_from_export
from evalstudio.values.results import task_fields
from evalstudio.values.spans import span_controls, span_object_field

from ...stats import spans as span_stats

NO_PAIRS = "no segment was annotated by two annotators (every segment has one rater): span agreement needs two"


def segment_scores(study: SpanStudy) -> pd.DataFrame:
    """Each rated segment's score, averaged over its raters: system, item, raters, score."""
    return span_stats.mqm_segment_scores(study.segments.rename(columns={"score": "weight"}))


def _segment_codes(study: SpanStudy) -> tuple[np.ndarray, np.ndarray]:
    """(a code per rated segment row, a code per span: -1 for a span of no rated segment): a segment is a system's
    translation of one item; integer codes keep the lookups over millions of spans vectorised."""
    seg, spans = study.segments, study.spans
    keys = pd.concat([seg["system"].astype(str) + "\x1f" + seg["item"].astype(str),
                      spans["system"].astype(str) + "\x1f" + spans["item_id"].astype(str)], ignore_index=True)
    codes, _ = pd.factorize(keys)
    return codes[:len(seg)], codes[len(seg):]


def _esa_measures(spans: pd.DataFrame, scores: pd.Series, common: pd.DataFrame, a: str, b: str) -> dict:
    """ESA's own agreement measures of annotators a and b on their `common` segments (stats.spans.esa_overlaps
    and esa_segment_agreement): their spans (of any control; one without offsets agrees only with another), the
    share of each one's spans that overlap a span of the other (ESA's rule, asymmetric) and with the same severity,
    and the segment level: Kendall's tau-c and Pearson of their scores, the share of segments both say have an
    error (any, minor, major) or both say have none. `scores`: each answer's score by (annotator, segment)."""
    where = spans["segment"].isin(common["segment"]).to_numpy()
    who = spans["annotator"].to_numpy()
    first, second = spans[where & (who == a)], spans[where & (who == b)]
    out: dict = {"spans_first": len(first), "spans_second": len(second)}
    for name, mine, other in (("first", first, second), ("second", second, first)):
        hit, same = span_stats.esa_overlaps(mine, other)
        out[f"overlap_{name}"] = float(hit.mean()) if len(hit) else np.nan
        out[f"overlap_{name}_severity"] = float(same.mean()) if len(same) else np.nan
    order = pd.unique(common["segment"].to_numpy())

    def errors(mine: pd.DataFrame) -> pd.DataFrame:
        severity = mine["severity"].astype(str).str.lower()
        kinds = pd.DataFrame({"error": True, "minor": severity.eq("minor").to_numpy(),
                              "major": severity.eq("major").to_numpy()}, index=mine["segment"].to_numpy())
        return kinds.groupby(level=0).any().reindex(order, fill_value=False)

    rates = span_stats.esa_segment_agreement(scores.loc[a].reindex(order), scores.loc[b].reindex(order),
                                             errors(first), errors(second))
    return {**out, "kendall_tau_c": rates["kendall_tau_c"], "pearson": rates["pearson"],
            "error_agreement": rates["error"], "minor_agreement": rates["minor"], "major_agreement": rates["major"]}


def span_agreement(study: SpanStudy, why: list) -> pd.DataFrame:
    """One row per pair of annotators with segments in common: those segments' characters, how many each marked,
    precision and recall of the second's marks against the first's, F1 and alpha; then ESA's own measures
    (`_esa_measures`: span overlap as ESA's scripts count it, and the segment-level agreement of the scores and of
    "has an error"). Without the texts (ESA's export) the characters past the last mark are unknown: F1 is given,
    alpha is not."""
    seg_code, span_code = _segment_codes(study)
    seg = pd.DataFrame({"segment": seg_code, "annotator": study.segments["annotator"].astype(str).to_numpy(),
                        "length": study.segments["length"].to_numpy(dtype=float),
                        "score": study.segments["score"].to_numpy(dtype=float)})
    shared = np.bincount(seg_code)[seg_code] > 1
    if not shared.any():
        why.append({"table": "span_agreement", "criterion": study.criterion, "reason": NO_PAIRS})
        return pd.DataFrame()
    seg = seg[shared]
    every = pd.DataFrame({"segment": span_code, "annotator": study.spans["annotator"].astype(str).to_numpy(),
                          "start": study.spans["start"].to_numpy(dtype=float),
                          "end": study.spans["end"].to_numpy(dtype=float),
                          "severity": study.spans["labels"].to_numpy(),  # the label is the severity
                          "control": study.spans["control"].astype(str).to_numpy()})[span_code >= 0]
    spans = every[(every["control"] == "target").to_numpy()]
    rows = []
    scores = seg.groupby(["annotator", "segment"])["score"].mean()  # one answer each, as the readers keep it
    pairs = seg.merge(seg, on="segment", suffixes=("_a", "_b"))
    pairs = pairs[pairs["annotator_a"] < pairs["annotator_b"]]
    for (a, b), common in pairs.groupby(["annotator_a", "annotator_b"], sort=True):
        lengths = common.groupby("segment")["length_a"].first()
        known = lengths.notna().all()
        mine = spans[spans["annotator"].isin([a, b]).to_numpy() & np.isin(spans["segment"].to_numpy(), lengths.index)]
        if not known:  # no texts: the segment ends at its last mark, as far as anyone can tell
            lengths = mine.groupby("segment")["end"].max().reindex(lengths.index).fillna(0)
        r = span_stats.span_agreement(mine, lengths.astype(np.int64), a, b)
        if not known:
            r["alpha"] = np.nan
        rows.append({"criterion": study.criterion, "first": a, "second": b, "segments": len(lengths), **r,
                     **_esa_measures(every, scores, common, a, b)})
    table = pd.DataFrame(rows)
    if table["alpha"].isna().all():
        why.append({"table": "span_agreement", "criterion": study.criterion,
                    "reason": "alpha needs each segment's length (the file has no texts), or marks that vary"})
    return table


def span_tables(study: SpanStudy, resamples: int = 1000) -> tuple[dict[str, pd.DataFrame], list]:
    """(the span study's tables by CSV name, why any was not computed: rows of not_computed)."""
    why: list = []
    segments = segment_scores(study)
    name = study.criterion.lower()
    if segments["system"].nunique() >= 2:
        systems = span_stats.system_clusters(segments, study.higher_is_better, resamples)
    else:
        why.append({"table": f"{name}_systems", "criterion": study.criterion, "reason": "one system: nothing to rank"})
        systems = span_stats.system_scores(segments)
    return {f"{name}_systems": systems, f"{name}_segments": segments,
            "span_agreement": span_agreement(study, why)}, why


def add_span_tables(tables: dict[str, pd.DataFrame], study: SpanStudy, resamples: int) -> dict[str, pd.DataFrame]:
    """`analyze`'s tables with the span study's added (before not_computed, which gains their reasons)."""
    extra, why = span_tables(study, resamples)
    not_computed = pd.concat([tables.get("not_computed", pd.DataFrame()), pd.DataFrame(why)], ignore_index=True)
    rest = {k: v for k, v in tables.items() if k != "not_computed"}
    return {**rest, **extra, "not_computed": not_computed.reindex(columns=["table", "criterion", "reason"])}


SPAN_PROTOCOLS = ("mqm", "esa")


def span_protocol(project) -> str | None:
    """'mqm' or 'esa' for a project of the shipped span protocols (its projects.yaml entry or its labeling config
    named so, as a copy of the shipped config keeps it); None for any other."""
    from pathlib import Path

    return next((kind for kind in SPAN_PROTOCOLS if kind in (project.entry, Path(project.config).stem)), None)


def offset_controls(kind: str, interface) -> list[str]:
    """The span controls of an mqm or esa config whose spans keep their offsets, the translation's first: ESA's
    span on [MISSING] keeps none (as ESA's published export), an mqm span in the source keeps its offsets into the
    source (as a published file's omission)."""
    names = span_controls(interface)[0]
    if kind == "mqm":  # the translation's spans first (the config shows the source's above them)
        names = sorted(names, key=lambda name: MQM_SPAN_TEXTS.get(name) != "target")
    return [names[0], *(n for n in names[1:] if kind == "mqm" and n in MQM_SPAN_TEXTS)]


def over_max_notes(answers: int) -> list[str]:
    """The analysis' note on answers that mark more spans than max_spans allows (none when there are none)."""
    return [f"{answers} answer(s) mark more spans than max_spans allows (made in Label Studio's editor): counted as "
            "marked, flagged over_max in the exports"] if answers else []


def project_span_study(protocol: str, parts, per_part, frames, users):
    """(tidy ratings, spec, span study) of a Label Studio study of the mqm or esa protocol, live or from its JSON
    export (`read_study`'s parts, tasks, annotation frames and users): its spans and annotations tables made the
    study a published file gives (readers.spans.study_from_export), so `analyze --protocol mqm` writes the same
    tables as `analyze` of an MQM TSV. A span of another control than the first (ESA's span on [MISSING]) keeps no
    offsets, as in ESA's published export; an mqm span in the source keeps its offsets into the source, as a
    published file's omission does. None for any other protocol."""
    from evalstudio.readers.spec import CriterionSpec, Spec

    from ..tables.tidy import span_frame

    kind = span_protocol(parts[0]) if len(parts) == 1 else None
    if kind is None:
        return None
    part, tasks = parts[0], per_part[0]
    marking = offset_controls(kind, part.interface)
    field = span_object_field(part.interface, part.interface.get_control(marking[0]))
    spans = span_frame(tasks, part, users)
    elsewhere = ~spans["control"].isin(marking).to_numpy()
    spans["start"] = spans["start"].astype(float).where(~elsewhere)
    spans["end"] = spans["end"].astype(float).where(~elsewhere)
    lengths = pd.Series({t["id"]: len(str(task_fields(t).get(field) or "")) for t in tasks}, dtype=float)
    study = study_from_export(spans, frames[0], kind, lengths)
    study.notes += over_max_notes(spans.loc[spans["over_max"] & ~spans["cancelled"], "annotation_id"].nunique())
    study.tidy.attrs["notes"] = study.notes
    return study.tidy, Spec(name=protocol, layout="spans", criteria={study.criterion: CriterionSpec(scale="interval")}), study
