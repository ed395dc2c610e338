"""What annotators did with pre-marked error spans (ESA-AI: Zouhar, Kocmi & Sachan 2024, "AI-Assisted Human
Evaluation of Machine Translation"): per annotation of a task whose answer started from a judge's spans
(`prefill: judge:NAME` in projects.yaml), how many of the predicted spans the annotator kept as they were, edited
(another extent or label), or removed, and how many spans they added.

A span is matched with the predicted span of the same region id (Label Studio's editor keeps the prediction's ids
in the answer it starts from; evalstudio/values/origins.py), then, among the spans left, with a predicted span of
the same control, offsets and label (kept). Read from a Label Studio export: the tasks' predictions of that model
version and their annotations (cancelled and surplus ones left out; and those not made from that prediction: shown
without it, started from another prediction, or, as the study's ledger records, shown a prediction Label Studio no
longer has, e.g. the judge was run again: what they were shown is not known, so nothing is counted for them).

Beside these, the post-edit types of ESA-AI's paper (Zouhar, Kocmi & Sachan 2024, section on post-edits; their
script experiments/post_edit_types.py in github:wmt-conference/ErrorSpanAnnotation, whose definitions these follow,
by offsets alone and never by region id), so a study's numbers can be set beside the paper's:
  offsets_removed: predicted spans no answered span has the same offsets of (control, start, end) as;
  offsets_added: answered spans no predicted span has the same offsets as;
  severity_increased / severity_decreased: (predicted, answered) pairs of the same offsets, Minor -> Major / Major
  -> Minor (labels compared without case; MQM's Neutral is neither);
  moved_5, moved_10, moved_20: (removed, added) pairs of the same control whose starts and ends are each at most 5,
  10 or 20 characters apart (pairs: a removed span near two added ones counts twice, as in the script). The script
  also counts a span of the translation and one of the [MISSING] token as moved; here spans of different controls
  (ESA's `errors` and `missing_errors`) never are. The paper reports these per added span: post_edit_shares."""

from __future__ import annotations

import pandas as pd

from evalstudio.crowd.reconcile import CONDITION
from evalstudio.values.results import task_fields
from evalstudio.values.spans import SPAN_TAGS

from ..tables.tidy import from_prediction, surplus_annotations

PAPER = ["offsets_removed", "offsets_added", "severity_increased", "severity_decreased", "moved_5", "moved_10",
         "moved_20"]  # ESA-AI's post-edit types (module docstring)
COLUMNS = ["task_id", "item_id", "system", "annotator", "annotation_id", "predicted", "kept", "edited", "removed",
           "added", *PAPER]
MOVED = (5, 10, 20)  # the paper's thresholds, in characters


def paper_post_edits(predicted: list[tuple], given: list[tuple]) -> dict[str, int]:
    """ESA-AI's post-edit types of one answer (module docstring) from its predicted and answered spans, each
    (control, start, end, label).

    >>> edits = paper_post_edits([("e", 0, 4, "Minor"), ("e", 10, 14, "Major")],
    ...                          [("e", 0, 4, "Major"), ("e", 12, 20, "Minor")])
    >>> {k: v for k, v in edits.items() if v}  # (10, 14) -> (12, 20): starts 2 apart, ends 6
    {'offsets_removed': 1, 'offsets_added': 1, 'severity_increased': 1, 'moved_10': 1, 'moved_20': 1}
    """
    where = lambda span: span[:3]  # noqa: E731
    removed = [p for p in predicted if not any(where(g) == where(p) for g in given)]
    added = [g for g in given if not any(where(g) == where(p) for p in predicted)]
    pairs = [(str(p[3]).lower(), str(g[3]).lower()) for p in predicted for g in given if where(p) == where(g)]
    out = {"offsets_removed": len(removed), "offsets_added": len(added),
           "severity_increased": pairs.count(("minor", "major")), "severity_decreased": pairs.count(("major", "minor"))}
    for limit in MOVED:
        out[f"moved_{limit}"] = sum(1 for r in removed for a in added if r[0] == a[0] and _near(r[1], a[1], limit)
                                    and _near(r[2], a[2], limit))
    return out


def _near(a, b, limit: int) -> bool:
    return isinstance(a, int) and isinstance(b, int) and abs(a - b) <= limit


def _spans(result, names: set[str]) -> dict[str, tuple]:
    """id -> (control, start, end, label) of the spans of a result."""
    out = {}
    for region in result or []:
        if isinstance(region, dict) and region.get("type") == "labels" and region.get("from_name") in names:
            value = region.get("value") or {}
            labels = value.get("labels") or [None]
            out[str(region.get("id"))] = (region["from_name"], value.get("start"), value.get("end"), labels[0])
    return out


def post_edits(tasks: list[dict], project, model_version: str, users=None) -> pd.DataFrame:
    """One row per annotation of a task with the `model_version` prediction: predicted spans, and how many were
    kept, edited, removed; spans added (module docstring). `attrs["not_counted"]`: the answers made from a
    prediction that is not this one (deleted or replaced since), left out."""
    names = {c.name for c in project.interface.controls if c.tag in SPAN_TAGS}
    users = users or {}
    rows, not_counted = [], 0
    for task in tasks:
        prediction = next((p for p in task.get("predictions") or [] if p.get("model_version") == model_version), None)
        if prediction is None:
            continue
        predicted = _spans(prediction.get("result"), names)
        annotations = [a for a in task.get("annotations") or [] if isinstance(a, dict)]
        surplus = surplus_annotations(annotations, project.annotators_per_task, users)
        known = task_fields(task)
        for annotation in annotations:
            if annotation.get("was_cancelled") or id(annotation) in surplus:
                continue
            if not _made_from(annotation, prediction, project):
                not_counted += from_prediction(annotation)  # shown another prediction, which is gone: said, not counted
                continue
            given = _spans(annotation.get("result"), names)
            both = set(given) & set(predicted)
            kept = {i for i in both if given[i] == predicted[i]}
            edited = both - kept
            left = [predicted[i] for i in predicted if i not in both]  # predicted spans not answered under their id
            added = 0
            for i in set(given) - both:
                if given[i] in left:  # the same span under another id: kept
                    left.remove(given[i])
                    kept.add(i)
                else:
                    added += 1
            completed_by = annotation.get("completed_by")
            rows.append({"task_id": task.get("id"), "item_id": known.get("item_id"), "system": known.get("system"),
                         "annotator": users.get(completed_by, str(completed_by)), "annotation_id": annotation.get("id"),
                         "predicted": len(predicted), "kept": len(kept), "edited": len(edited), "removed": len(left),
                         "added": added, **paper_post_edits(list(predicted.values()), list(given.values()))})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.attrs["not_counted"] = int(not_counted)  # answers made from a prediction other than (or lost before) this one
    return frame


def _made_from(annotation: dict, prediction: dict, project) -> bool:
    """Whether the answer started from `prediction`: its parent in Label Studio; without a parent, where the
    study's ledger says it was shown a prediction (one Label Studio no longer has: not this one, which it has) or
    shown none (unassisted_share's draw), it did not; else (no ledger, no draw) it is taken to have."""
    parent = annotation.get("parent_prediction")
    if parent is not None:
        return parent == prediction.get("id") or prediction.get("id") is None
    return CONDITION not in annotation and project.unassisted_share is None


PER_ADDED = ["severity_increased", "severity_decreased", "moved_5", "moved_10", "moved_20"]


def post_edit_shares(edits: pd.DataFrame, by: str = "annotator") -> pd.DataFrame:
    """Per annotator (or system): the predicted spans and the shares kept, edited and removed, and the spans added
    per annotation; then ESA-AI's types as its script reports them, per span added by offsets (`..._per_added`: the
    count over offsets_added, summed over the annotations)."""
    columns = [by, "annotations", "predicted", "kept", "edited", "removed", "added_per_annotation",
               *(f"{c}_per_added" for c in PER_ADDED)]
    if edits.empty:
        return pd.DataFrame(columns=columns)
    sums = edits.groupby(by, sort=True)[["predicted", "kept", "edited", "removed", "added", *PAPER]].sum()
    out = pd.DataFrame({"annotations": edits.groupby(by, sort=True).size(), "predicted": sums["predicted"]})
    for column in ("kept", "edited", "removed"):
        out[column] = (sums[column] / sums["predicted"]).where(sums["predicted"] > 0)
    out["added_per_annotation"] = sums["added"] / out["annotations"]
    for column in PER_ADDED:
        out[f"{column}_per_added"] = (sums[column] / sums["offsets_added"]).where(sums["offsets_added"] > 0)
    return out.reset_index()[columns]


def automation_bias(annotations: pd.DataFrame, project, tasks: list[dict]) -> tuple[pd.DataFrame, list[str]]:
    """Where a prefilled study has answers given with the prediction shown and answers given without it
    (`unassisted_share:`; the tidy frame's from_prediction): per numeric criterion, assisted minus unassisted
    score per system and overall with its interval (evalstudio.stats.assisted), and one verdict line each; empty
    otherwise. Only tasks of `tasks` that have the prefill's prediction count: one without (the judge did not
    answer it) was shown bare to everyone, not by the draw."""
    from evalstudio.stats.assisted import COLUMNS as BIAS_COLUMNS
    from evalstudio.stats.assisted import assisted_difference, verdict
    from evalstudio.values.origins import prefill_predictions

    empty = pd.DataFrame(columns=["criterion", *BIAS_COLUMNS])
    if not project.prefill or annotations.empty or "from_prediction" not in annotations:
        return empty, []
    drawn = {t.get("id") for t in tasks
             if any(p.get("result") is not None for p in prefill_predictions(t.get("predictions"), project.prefill))}
    answered = annotations[~annotations["cancelled"] & ~annotations["surplus"] & annotations["value"].notna()
                           & annotations["task_id"].isin(drawn)]
    if answered["from_prediction"].nunique() < 2:
        return empty, []
    tables, lines = [], []
    for name, criterion in project.criteria.items():
        rows = answered[answered["criterion"] == name]
        if not criterion.is_numeric or rows.empty:
            continue
        segment = rows["item_id"].where(rows["item_id"].notna(), rows["task_id"]).astype(str)
        segment = segment + rows["agent"].fillna("").astype(str).map(lambda a: f" | {a}" if a else "")
        table = assisted_difference(pd.DataFrame({"segment": segment, "system": rows["system"].fillna(""),
                                                  "assisted": rows["from_prediction"], "value": rows["value"]}))
        tables.append(table.assign(criterion=name)[["criterion", *BIAS_COLUMNS]])
        lines.append(f"{name}: {verdict(table)}")
    return (pd.concat(tables, ignore_index=True) if tables else empty), lines
