"""Label Studio tasks (live API or JSON export) -> tidy long DataFrames.

annotations: one row per (annotation, criterion[, agent])
  project, task_id, item_id, system, annotator, criterion, value, annotation_id, created_at, lead_time,
  cancelled, agent, rationale, from_prediction, prefilled_unchanged, surplus, plus one column per metadata control (e.g.
  note, bad_instance), the participant id where the protocol has one (prolific_id) and, for a project of
  counterbalanced lists, its list number (list)
  from_prediction: the annotation started from a model prediction (model-assisted labelling, prefill opt-in): as the
  study's ledger recorded it where the read has the ledger (the gateway decides; live reads of export, report,
  publish, status), else as Label Studio holds it: the annotation has a parent prediction, or a region whose
  origin is a prediction's (Label Studio clears the parent when the prediction is deleted; the origins stay);
  prefilled_unchanged: this value is the prediction's, accepted without change (Label Studio's result `origin`
  "prediction", or the same value as the parent prediction)
  surplus: an annotation beyond the design: a participant's second annotation of the same task, or one after the
  task already had annotators_per_task (Label Studio Community does not guarantee either; the first ones
  submitted count, see `surplus_annotations`)
  attention_check_of: on an attention check's rows (protocols/attention.py: a copy of a task with a spoiled text,
  made at import; `status` and `approvals` score it, no analysis counts it) the evalstudio_id of the task it copies;
  empty on every other row
  A span control's column (a `<Labels>` listed in metadata_controls) holds the number of spans the annotation
  marked; the spans themselves are in `spans`. A per-region control (perRegion="true") has no column here.
spans:       one row per span an annotation marked with a `<Labels>` control (error spans: MQM, ESA)
  project, task_id, item_id, system, annotator, annotation_id, cancelled, surplus, from_prediction (as in
  annotations: the span's answer was made with the prediction shown, e.g. ESA-AI's pre-marked spans),
  over_max: the annotation marks more spans with this control (and those max_spans counts with it, 'a+b') than
  projects.yaml's max_spans allows (made in Label
  Studio's own editor, which cannot cap them; the gateway refuses such an answer): kept, flagged, never cut;
  control: the Labels control's name; region_id: Label Studio's id of the region;
  start, end: the span's offsets as Label Studio stores them, which count code points as Python does: the
  shown text's [start:end] is the span (evalstudio/values/spans.py says what Label Studio stores);
  text: the text the span covers, shown_text[start:end] (empty when the task's text no longer holds the span, e.g.
  the task was changed after annotation); labels: its label(s), several joined with "; ";
  ls_text: the text as Label Studio's editor stored it (line breaks written as backslash-n, spaces collapsed);
  attention_check_of: as in annotations (a span marked on an attention check's spoiled text);
  then one column per per-region control (perRegion="true"; e.g. severity, category, comment), named by the
  control, holding that span's answer (Choices as their label, several joined with "; "; TextArea as its text).
model:       one row per (task, criterion[, agent]) with a model output
  project, task_id, item_id, system, agent, criterion, value, model_version
tasks:       one row per task: task_id, item_id, system and the task's scalar data fields
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadExport
from evalstudio.crowd.reconcile import CONDITION
from evalstudio.protocols.attention import CHECK_COLUMN, original_of
from evalstudio.protocols.registry import Project
from evalstudio.values.results import dotted_get, task_fields
from evalstudio.values.spans import limited_controls, over_limits, span_controls, span_object_field, span_problem

ANNOTATION_COLUMNS = ["project", "task_id", "item_id", "system", "annotator", "criterion", "value", "annotation_id",
                      "created_at", "lead_time", "cancelled", "agent", "rationale", "from_prediction", "prefilled_unchanged", "surplus",
                      CHECK_COLUMN]
PROLIFIC_EMAIL = re.compile(r"^([0-9a-fA-F]{24})@email\.prolific\.(?:com|co)$")
SPAN_COLUMNS = ["project", "task_id", "item_id", "system", "annotator", "annotation_id", "cancelled", "surplus",
                "from_prediction", "over_max", "control", "region_id", "start", "end", "text", "labels", "ls_text"]
PREDICTED = ("prediction", "prediction-changed")  # a region's origin when it started as a prediction's
MODEL_COLUMNS = ["project", "task_id", "item_id", "system", "agent", "criterion", "value", "model_version"]


def read_export(path: Path | str) -> list[dict]:
    """Tasks of a Label Studio JSON export file (Export -> JSON), in task id order."""
    path = Path(path)
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise BadExport(f"{path}: cannot read it ({e.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadExport(f"{path}: not a readable Label Studio JSON export: {e}") from None
    except RecursionError:
        raise BadExport(f"{path}: not a Label Studio JSON export (nested too deeply)") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise BadExport(f"{path}: not a readable Label Studio JSON export: {str(e).split(';')[0]}") from None
    if not isinstance(tasks, list):
        raise BadExport(f"{path}: expected a JSON list of tasks with 'data' (Label Studio Export -> JSON)")
    for i, task in enumerate(tasks):
        problem = _export_task_problem(task)
        if problem:
            raise BadExport(f"{path}: task [{i}]: {problem} (expected Label Studio's Export -> JSON)")
        for ann in task.get("annotations") or []:
            ann.pop(CONDITION, None)  # the ledger's record comes from the ledger, never from a file
    # in task id order, as the live export gives them: Label Studio writes the file in its database's order, which
    # on PostgreSQL is not the id order, so the same project would otherwise export its rows in another order
    return sorted(tasks, key=lambda task: task["id"])


def _export_task_problem(task) -> str | None:
    if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
        return "expected an object with 'data'"
    if isinstance(task.get("id"), bool) or not isinstance(task.get("id"), int):
        return "'id' must be an integer"
    if not isinstance(task.get("meta", {}) or {}, dict):
        return "'meta' must be an object"
    annotations = task.get("annotations", [])
    if not isinstance(annotations, list):
        return "'annotations' must be a list"
    for j, ann in enumerate(annotations):
        if not isinstance(ann, dict) or not isinstance(ann.get("result", []), list):
            return f"annotations[{j}] must be an object with a 'result' list"
        by = ann.get("completed_by")
        if by is not None and (isinstance(by, bool) or not isinstance(by, (int, dict))):
            return f"annotations[{j}].completed_by must be a user id or object"
        for key in ("id", "lead_time"):
            if ann.get(key) is not None and (isinstance(ann[key], bool) or not isinstance(ann[key], (int, float))):
                return f"annotations[{j}].{key} must be a number"
        for region in ann.get("result", []):
            if not isinstance(region, dict) or not isinstance(region.get("value"), dict) or \
                    not isinstance(region.get("from_name"), str) or not isinstance(region.get("type"), str):
                return f"annotations[{j}].result has an entry that is not a Label Studio result"
    return None


def result_values(result: Iterable[dict]) -> dict[str, object]:
    """Control name -> value of one annotation's result list."""
    values = {}
    for region in result or []:
        value, kind = region.get("value", {}), region.get("type")
        if kind == "number":
            values[region["from_name"]] = value.get("number")
        elif kind == "rating":
            values[region["from_name"]] = value.get("rating")
        elif kind == "choices":
            choices = value.get("choices") or []
            values[region["from_name"]] = choices[0] if len(choices) == 1 else "; ".join(choices)
        elif kind == "textarea":
            values[region["from_name"]] = "\n".join(value.get("text") or [])
    return values


def result_origins(result: Iterable[dict]) -> dict[str, str]:
    """Control name -> Label Studio's `origin` of its region ("prediction", "prediction-changed", "manual")."""
    return {r["from_name"]: r["origin"] for r in result or [] if isinstance(r, dict) and r.get("origin")}


def participant_id(annotator: str, kind: str | None) -> str | None:
    """The participant id carried by the annotator's account: Prolific's <PID>@email.prolific.com address, or the
    account `evalstudio participants add` created (<pid>@participants.invalid)."""
    if kind == "prolific":
        from evalstudio.crowd.participants import participant_of

        match = PROLIFIC_EMAIL.match(annotator or "")
        return match.group(1) if match else participant_of(annotator)
    return None


def _annotator(completed_by, users: Mapping[int, str]) -> str:
    if isinstance(completed_by, dict):
        return str(completed_by.get("email") or completed_by.get("id"))
    return users.get(completed_by, str(completed_by)) if isinstance(completed_by, (int, str)) else str(completed_by)


def _scalar(value):
    """A value usable as a table key: objects and lists (e.g. an odd system tag) become their JSON text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def annotation_frame(tasks: Iterable[dict], project: Project, users: Mapping[int, str] | None = None) -> pd.DataFrame:
    """Tasks' annotations as the tidy long frame: one row per annotation and control, with what it rated."""
    users = users or {}
    rows = []
    span_names, per_region = span_controls(project.interface)
    metadata = [name for name in project.metadata_controls if name not in per_region]  # those are in `spans`
    extra = metadata + (["prolific_id"] if project.participant_id == "prolific" else [])
    extra += ["list"] if project.list_number else []  # counterbalanced lists: the list this project is
    for task in tasks:
        data = task_fields(task)
        predictions = {p.get("id"): result_values(p.get("result")) for p in task.get("predictions") or []
                       if isinstance(p, dict)}
        annotations = [a for a in task.get("annotations") or [] if isinstance(a, dict)]
        surplus = surplus_annotations(annotations, project.annotators_per_task, users)
        for ann in annotations:
            values = result_values(ann.get("result"))
            origins = result_origins(ann.get("result"))
            parent = ann.get("parent_prediction")
            predicted = predictions.get(parent, {}) if parent is not None else {}
            annotator = _annotator(ann.get("completed_by"), users)
            base = {
                "project": project.name, "task_id": task["id"], "item_id": _scalar(data.get("item_id")),
                "system": _scalar(data.get("system")), "annotator": annotator,
                "annotation_id": ann.get("id"), "created_at": ann.get("created_at"), "lead_time": ann.get("lead_time"),
                "cancelled": bool(ann.get("was_cancelled")), "from_prediction": from_prediction(ann),
                "surplus": id(ann) in surplus,
                **{name: values.get(name) for name in metadata},
                **{name: span_count(ann.get("result"), name) for name in span_names if name in metadata},
            }
            base[CHECK_COLUMN] = original_of(data)
            if project.list_number:
                base["list"] = project.list_number
            if project.participant_id:
                base["prolific_id"] = participant_id(annotator, project.participant_id)
            for slot in project.slots():
                value = values.get(slot.control)
                unchanged = value is not None and (origins.get(slot.control) == "prediction" or (
                    parent is not None and slot.control not in origins and predicted.get(slot.control) == value))
                rows.append({**base, "criterion": slot.criterion, "agent": slot.agent, "value": value,
                             "rationale": values.get(slot.rationale) if slot.rationale else None,
                             "prefilled_unchanged": bool(unchanged)})
    frame = pd.DataFrame(rows, columns=ANNOTATION_COLUMNS + extra)
    frame["from_prediction"] = frame["from_prediction"].astype(bool)
    frame["prefilled_unchanged"] = frame["prefilled_unchanged"].astype(bool)
    frame["surplus"] = frame["surplus"].astype(bool)
    frame["cancelled"] = frame["cancelled"].astype(bool)
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True, errors="coerce")
    frame["lead_time"] = pd.to_numeric(frame["lead_time"], errors="coerce")
    # answers of several types share the column: object, never pandas' string dtype (which refuses numbers)
    frame["value"] = frame["value"].astype(object)
    for criterion, spec in project.criteria.items():
        if spec.is_numeric:
            mask = frame["criterion"] == criterion
            frame.loc[mask, "value"] = pd.to_numeric(frame.loc[mask, "value"], errors="coerce")
    return frame


def from_prediction(annotation: dict) -> bool:
    """Whether the answer was made with a model's prediction shown (module docstring: from_prediction): the
    ledger's record where the read put it in (evalstudio.crowd.reconcile.CONDITION), else Label Studio's."""
    if isinstance(annotation.get(CONDITION), bool):
        return annotation[CONDITION]
    return annotation.get("parent_prediction") is not None or any(
        isinstance(r, dict) and r.get("origin") in PREDICTED for r in annotation.get("result") or [])


def spans_path(path: Path) -> Path:
    """Where the spans table goes beside a tidy file: annotations.csv -> annotations.spans.csv."""
    return path.with_name(f"{path.stem}.spans{path.suffix}")


def span_count(result, control: str) -> int:
    """How many spans an annotation's result marks with one Labels control."""
    return sum(1 for r in result or [] if isinstance(r, dict) and r.get("from_name") == control and r.get("type") == "labels")


def span_frame(tasks: Iterable[dict], project: Project, users: Mapping[int, str] | None = None) -> pd.DataFrame:
    """One row per span of every annotation (module docstring: spans), per-region answers as columns."""
    users = users or {}
    li = project.interface
    span_names, per_region = span_controls(li)
    fields = {name: span_object_field(li, li.get_control(name)) for name in span_names}
    rows = []
    for task in tasks:
        data = task_fields(task)
        annotations = [a for a in task.get("annotations") or [] if isinstance(a, dict)]
        surplus = surplus_annotations(annotations, project.annotators_per_task, users)
        for ann in annotations:
            base = {"project": project.name, "task_id": task["id"], "item_id": _scalar(data.get("item_id")),
                    "system": _scalar(data.get("system")), "annotator": _annotator(ann.get("completed_by"), users),
                    "annotation_id": ann.get("id"), "cancelled": bool(ann.get("was_cancelled")),
                    "surplus": id(ann) in surplus, "from_prediction": from_prediction(ann)}
            over = {name for key in over_limits({name: span_count(ann.get("result"), name) for name in span_names},
                                                project.max_spans) for name in limited_controls(key)}
            rows += [{**row, "over_max": row["control"] in over, CHECK_COLUMN: original_of(data)}
                     for row in _span_rows(ann.get("result") or [], base, fields, per_region, data)]
    frame = pd.DataFrame(rows, columns=SPAN_COLUMNS + [CHECK_COLUMN] + per_region)
    for column in ("start", "end"):
        frame[column] = _offsets(frame[column])
    frame["cancelled"] = frame["cancelled"].astype(bool)
    frame["surplus"] = frame["surplus"].astype(bool)
    frame["from_prediction"] = frame["from_prediction"].astype(bool)
    frame["over_max"] = frame["over_max"].astype(bool)
    return frame


def _offsets(column: pd.Series) -> pd.Series:
    """An offsets column (Python ints, or None where a region had none) as nullable Int64, built from its values
    directly (pandas' astype from objects infers each value's type first: a quarter of the export's time);
    astype where a value does not fit int64, as before."""
    values = column.to_numpy(dtype=object)
    missing = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    try:
        data = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=len(values))
    except (OverflowError, TypeError, ValueError):
        return column.astype("Int64")
    return pd.Series(pd.arrays.IntegerArray(data, missing), index=column.index, name=column.name)


def _span_rows(result: list, base: dict, fields: dict, per_region: list[str], data: dict) -> list[dict]:
    """The spans of one annotation's result: its labels regions, with the per-region answers of the same id."""
    spans: dict[str, dict] = {}
    answers: dict[str, dict] = {}
    where: dict[str, dict] = {}
    for region in result:
        if not isinstance(region, dict) or not isinstance(region.get("value"), dict):
            continue
        name, value, ident = region.get("from_name"), region["value"], _scalar(region.get("id"))
        if region.get("type") == "labels" and name in fields:
            spans[ident] = {"control": name, "value": value}
        elif name in per_region:
            answers.setdefault(ident, {}).update(result_values([region]))
            where.setdefault(ident, {"control": None, "value": value})  # a region without labels keeps its answers
    rows = []
    for ident, span in {**where, **spans}.items():
        value = span["value"]
        start, end, stored = value.get("start"), value.get("end"), value.get("text")
        field = fields.get(span["control"]) or next((f for f in fields.values() if f), None)
        shown = data.get(field) if field else None
        # the slice, once the shown text is the one annotated (the offsets fit and cover the text Label Studio stored)
        text = shown[start:end] if isinstance(shown, str) and span_problem(shown, start, end, stored) is None else None
        labels = value.get("labels")
        labels = "; ".join(map(str, labels)) if isinstance(labels, list) else labels
        offsets = [o if isinstance(o, int) and not isinstance(o, bool) else None for o in (start, end)]
        rows.append({**base, "control": span["control"], "region_id": ident, "start": offsets[0], "end": offsets[1],
                     "text": text, "labels": labels, "ls_text": stored if isinstance(stored, str) else _scalar(stored),
                     **{name: answers.get(ident, {}).get(name) for name in per_region}})
    return rows


def surplus_annotations(annotations: list[dict], per_task: int, users: Mapping[int, str] | None = None) -> set[int]:
    """`id()`s of a task's annotations beyond its design: in order of submission (id, then created_at), a
    participant's repeat of the task, and every submitted annotation after `per_task` participants. Skipped
    (cancelled) annotations are never surplus and never count (Label Studio does not count them either)."""
    def order(a):  # ids grow with each new annotation; created_at where an export has no id
        ident = a.get("id")
        return (ident if isinstance(ident, int) and not isinstance(ident, bool) else float("inf"), str(a.get("created_at") or ""))

    seen: set[str] = set()
    out: set[int] = set()
    for ann in sorted(annotations, key=order):
        if ann.get("was_cancelled"):
            continue
        who = _annotator(ann.get("completed_by"), users or {})
        if who in seen or len(seen) >= per_task:
            out.add(id(ann))
        else:
            seen.add(who)
    return out


def write_annotations(pages: Iterable[list[dict]], project: Project, users: Mapping[int, str], path: Path,
                      on_page=None, append: bool = False, fmt: str = "csv", columns: list[str] | None = None,
                      spans: Path | None = None, span_columns: list[str] | None = None) -> tuple[int, int, int]:
    """Stream pages of tasks to one tidy file (memory: one page; Parquet: the whole frame), and with `spans` their
    spans to a second one (span_frame). Returns (rows, annotations, spans). CSV is spreadsheet-safe
    (exporters/tables/files.py); JSONL and Parquet keep the raw values.

    append: add to files that already have the first project's rows (the next project of a study); columns,
    span_columns: the columns of the whole files (a study's parts can differ, e.g. only a part with lists has
    `list`)."""
    from contextlib import ExitStack

    from evalstudio.base.files import open_output

    from .files import write_csv, write_jsonl, write_parquet

    def shaped(make, wanted):
        return (lambda page: make(page, project, users).reindex(columns=wanted)) if wanted else (
            lambda page: make(page, project, users))

    targets = [(path, shaped(annotation_frame, columns))] + ([(spans, shaped(span_frame, span_columns))] if spans else [])
    if fmt == "parquet":
        collected = [[make([])] for _, make in targets]
        for page in pages:
            for frames, (_, make) in zip(collected, targets):
                frames.append(make(page))
            if on_page:
                on_page(len(page))
        written = []
        for frames, (target, _) in zip(collected, targets):
            frame = pd.concat(frames, ignore_index=True)
            if append and target.is_file():
                frame = pd.concat([pd.read_parquet(target), frame], ignore_index=True)
            write_parquet(frame, target)
            written.append(frame)
        return len(written[0]), written[0]["annotation_id"].nunique(), len(written[1]) if spans else 0
    counts = [0, 0, 0]
    with ExitStack() as stack:
        files = [stack.enter_context(open_output(target, "a" if append else "w")) for target, _ in targets]
        for number, page in enumerate(pages):
            for k, (f, (_, make)) in enumerate(zip(files, targets)):
                frame = make(page)
                if fmt == "jsonl":
                    write_jsonl(frame, f)
                else:
                    write_csv(frame, f, header=number == 0 and not append)
                counts[2 * k] += len(frame)  # rows, or spans
                if k == 0:
                    counts[1] += frame["annotation_id"].nunique()
            if on_page:
                on_page(len(page))
        for f, (_, make) in zip(files, targets):
            if f.tell() == 0 and not append and fmt == "csv":  # no pages at all: still write the header
                write_csv(make([]), f)
    return counts[0], counts[1], counts[2]


def model_frame(tasks: Iterable[dict], project: Project) -> pd.DataFrame:
    """The model outputs and ratings stored in the tasks, one row per task and criterion."""
    rows = []
    for task in tasks:
        data = task_fields(task)
        for slot in project.slots():
            value = dotted_get(data, slot.model_output) if slot.model_output else None
            if value is not None:
                rows.append({"project": project.name, "task_id": task["id"], "item_id": _scalar(data.get("item_id")),
                             "system": _scalar(data.get("system")), "agent": slot.agent, "criterion": slot.criterion,
                             "value": value, "model_version": data.get("model_version")})
    return pd.DataFrame(rows, columns=MODEL_COLUMNS)


def prediction_frame(tasks: Iterable[dict], project: Project) -> pd.DataFrame:
    """The predictions stored with the tasks (ML backend, LLM judge) in the model frame's shape, one row per rated
    control; `model_version` tells the predictors apart."""
    rows = []
    for task in tasks:
        data = task_fields(task)
        for prediction in task.get("predictions") or []:
            if not isinstance(prediction, dict):
                continue
            values = result_values(prediction.get("result") if isinstance(prediction.get("result"), list) else [])
            for slot in project.slots():
                if values.get(slot.control) is not None:
                    rows.append({"project": project.name, "task_id": task["id"], "item_id": _scalar(data.get("item_id")),
                                 "system": _scalar(data.get("system")), "agent": slot.agent, "criterion": slot.criterion,
                                 "value": values[slot.control],
                                 "model_version": _scalar(prediction.get("model_version")) or "prediction"})
    return pd.DataFrame(rows, columns=MODEL_COLUMNS)


def task_frame(tasks: Iterable[dict]) -> pd.DataFrame:
    """One row per task with its scalar data fields (lists such as shown_label_is joined with '+')."""
    rows = []
    for task in tasks:
        row = {"task_id": task["id"]}
        for key, value in task_fields(task).items():
            if isinstance(value, (str, int, float, bool)) or value is None:
                row[key] = value
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                row[key] = "+".join(value)
        rows.append(row)
    return pd.DataFrame(rows)


def unit(frame: pd.DataFrame) -> pd.Series:
    """The rated unit of each row: the task, or task/agent when the protocol rates agents separately."""
    units = frame["task_id"].astype(str)
    if frame["agent"].notna().any():
        units = units + "/" + frame["agent"].fillna("")
    return units


def ratings(frame: pd.DataFrame, criterion: str) -> pd.DataFrame:
    """item/annotator/value table of one criterion for the agreement functions (cancelled and empty dropped).

    The unit ('item') is the task, or task/agent for per-agent criteria."""
    rows = frame[(frame["criterion"] == criterion) & ~frame["cancelled"] & frame["value"].notna()]
    out = pd.DataFrame({"item": unit(rows).to_numpy(), "annotator": rows["annotator"].to_numpy(), "value": rows["value"].to_numpy()})
    if not out.empty and isinstance(out["value"].iloc[0], (int, float, np.number)):
        out["value"] = out["value"].astype(float)
    return out


def segment(frame: pd.DataFrame) -> pd.Series:
    """The rated unit: item, with system and agent when given."""
    key = frame["item"].astype(str)
    if (frame["system"] != "").any():
        key = frame["system"].astype(str) + " | " + key
    if (frame["agent"] != "").any():
        key = key + " | " + frame["agent"].astype(str)
    return key


def segment_means(ratings: pd.DataFrame, criterion: str) -> pd.DataFrame:
    """One criterion's mean human score per segment: systems x segments (the item, with " | agent" when the rating
    is of one agent of it), NaN where a system's segment has no rating. Read from `analyze`'s tidy ratings frame."""
    r = ratings[ratings["criterion"] == criterion]
    segment = r["item"] + np.where(r["agent"] != "", " | " + r["agent"], "")
    return r.assign(item=segment, value=r["value"].astype(float)).groupby(["system", "item"])["value"].mean().unstack()
