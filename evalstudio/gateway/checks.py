"""What the gateway accepts from a participant: an annotation result checked against the project's controls, and
the few identifiers it lets through. Pure functions, no I/O."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from evalstudio.protocols.registry import Project
from evalstudio.values.controls import control_range, control_step
from evalstudio.values.spans import (MAX_SPANS, SPAN_TAGS, is_per_region, limited_controls, over_limits,
                                      span_object_field, span_problem)

PARTICIPANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
ACCESS_CODE = re.compile(r"[A-Za-z0-9]{16,64}")
REF = re.compile(r"[A-Za-z0-9_-]{16,64}")
PLATFORM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a crowd platform's study or session id
ASSET_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,200}){0,6}")
MAX_TEXT = 20_000  # characters in one text answer (a Sotopia rationale is a few sentences)
TYPES = {"Choices": "choices", "Number": "number", "Rating": "rating", "TextArea": "textarea", "Labels": "labels"}
REGION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # Label Studio's editor names a region with 10 such characters


def user_id(value) -> int | None:
    """A Label Studio user id as its API gives one (a number, or an object with an `id`); None for anything else."""
    value = value.get("id") if isinstance(value, dict) else value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def user_ids(values) -> set[int]:
    """The user ids of a list as Label Studio's API gives it (a task's `annotators`)."""
    return {u for u in map(user_id, values if isinstance(values, list) else []) if u is not None}


class Refused(ValueError):
    """A participant's request the gateway does not pass on; the message is safe to show them."""


@dataclass(frozen=True)
class Control:
    """A config's control as answers are checked against it (labels, range, step, required, per region)."""
    name: str
    tag: str
    to_names: tuple[str, ...]
    labels: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    multiple: bool = False
    required: bool = False
    per_region: bool = False  # perRegion="true": answered once per span, tied to it by the span's id
    field: str | None = None  # a Labels control: the task field of the text it marks
    max_usages: tuple[tuple[str, int], ...] = ()  # a Labels control: how often each label may be used (maxUsages)
    max_spans: int | None = None  # a Labels control: the most spans one answer may mark (projects.yaml max_spans)
    max_spans_key: str = ""  # the max_spans key capping it: its name, or the names it is counted with ('a+b')


def controls_of(project: Project) -> dict[str, Control]:
    """The answer controls of a project's labeling config, as the gateway checks results against them."""
    out = {}
    for control in project.interface.controls:
        if control.tag not in TYPES:
            raise ValueError(f"{project.name}: the gateway does not know the control tag {control.tag} "
                             f"('{control.name}'); known: {', '.join(TYPES)}")
        low = high = step = None
        if control.tag in ("Number", "Rating"):
            low, high = control_range(control)
            step = control_step(control)
        out[control.name] = Control(
            control.name, control.tag, tuple(control.to_name or ()),
            tuple(control.labels) if control.tag in ("Choices", "Labels") else (), low, high, step,
            str(control.attr.get("choice", "single")).lower() == "multiple",
            str(control.attr.get("required", "false")).lower() == "true",
            control.tag not in SPAN_TAGS and is_per_region(control),
            span_object_field(project.interface, control) if control.tag in SPAN_TAGS else None,
            _max_usages(control) if control.tag in SPAN_TAGS else (),
            *(_limit(project, control.name) if control.tag in SPAN_TAGS else (None, "")))
    return out


def _limit(project: Project, name: str) -> tuple[int | None, str]:
    """(the cap, the max_spans key) of a span control: its own key, or a key naming it with others ('a+b')."""
    return next(((cap, key) for key, cap in project.max_spans.items() if name in limited_controls(key)), (None, ""))


def _max_usages(control) -> tuple[tuple[str, int], ...]:
    """Each label's limit as Label Studio's editor applies it: the Label's maxUsages, else its Labels' (a limit per
    label, not on all spans together)."""
    out = []
    for label, tag in control.labels_attrs.items():
        limit = tag.attr.get("maxUsages", control.attr.get("maxUsages"))
        if limit is not None and str(limit).strip().isdigit() and int(limit) > 0:
            out.append((label, int(limit)))
    return tuple(out)


def _number(value, control: Control) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Refused(f"{control.name}: not a number")
    if not control.low <= value <= control.high:
        raise Refused(f"{control.name}: {value:g} is outside {control.low:g}..{control.high:g}")
    if control.step is not None:
        steps = (value - control.low) / control.step
        if abs(steps - round(steps)) > 1e-6:
            raise Refused(f"{control.name}: {value:g} is not on the scale's steps of {control.step:g}")
    return value


def _storable(text: str) -> bool:
    """Whether a text answer can be stored: no NUL (PostgreSQL's text), no lone surrogate (not UTF-8: the ledger's
    write failed on it, a server error)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def check_result(result, controls: dict[str, Control], complete: bool = False, data: dict | None = None) -> list[dict]:
    """The result list of an annotation, rebuilt from what the controls allow: each region names a control of the
    project, its object, its type and a value of the control's kind; anything else is refused. With `complete`,
    every required control (required="true" in the labeling config) must be answered, a per-region one for every
    span. A span (a Labels region) must mark a piece of the shown text (`data`: the task's fields) and say which,
    with labels of its control, each used at most its maxUsages, at most max_spans in all; a per-region answer names a span of the same
    answer by its id. Returns a clean copy (only id, from_name, to_name, type and value; the origin is the gateway's
    to set; a span's text the shown text's own), so nothing extra reaches Label Studio."""
    per_region = sum(1 for c in controls.values() if c.per_region)
    spanned = any(c.tag in SPAN_TAGS for c in controls.values())
    if not isinstance(result, list) or len(result) > 4 * max(len(controls), 1) + spanned * MAX_SPANS * (1 + per_region):
        raise Refused("the answer is not a list of results")
    regions = [_region(region, controls) for region in result]
    spans = _spans(regions, data or {})
    clean, seen, answered = [], set(), set()
    for control, region in regions:
        if control.tag in SPAN_TAGS:
            clean.append(spans[region["id"]])
            continue
        value = _clean_value(control, region.get("value"))
        if control.per_region:
            ident = region.get("id")
            if not isinstance(ident, str) or ident not in spans:
                raise Refused(f"{control.name}: answers a span that is not in the answer")
            if spans[ident]["to_name"] != region["to_name"]:  # (Label Studio asks it only of its own text's spans)
                raise Refused(f"{control.name}: answers a span of another text ({spans[ident]['to_name']})")
            if (control.name, ident) in answered:
                raise Refused(f"{control.name}: answered twice for one span")
            answered.add((control.name, ident))
            where = {key: spans[ident]["value"][key] for key in ("start", "end", "text")}
            clean.append({"id": ident, "from_name": control.name, "to_name": region["to_name"], "type": region["type"],
                          "value": {**where, **value}})
            continue
        if control.name in seen:
            raise Refused(f"{control.name}: answered twice")
        seen.add(control.name)
        clean.append({"from_name": control.name, "to_name": region["to_name"], "type": region["type"], "value": value})
    if complete:
        _check_complete(controls, spans, seen, answered)
    return clean


def _region(region, controls: dict[str, Control]) -> tuple[Control, dict]:
    """A result entry's control, once the entry names it, its object and its type."""
    if not isinstance(region, dict):
        raise Refused("a result is not an object")
    control = controls.get(region.get("from_name")) if isinstance(region.get("from_name"), str) else None
    if control is None:
        raise Refused("a result names no control of this project")
    if region.get("to_name") not in control.to_names or region.get("type") != TYPES[control.tag]:
        raise Refused(f"{control.name}: the result does not match the control")
    if not isinstance(region.get("value"), dict):
        raise Refused(f"{control.name}: no value")
    return control, region


def _spans(regions: list[tuple[Control, dict]], data: dict) -> dict[str, dict]:
    """The checked spans of an answer by their ids: each marks a piece of the shown text with its control's labels."""
    spans: dict[str, dict] = {}
    used: dict[tuple[str, str], int] = {}
    for control, region in regions:
        if control.tag not in SPAN_TAGS:
            continue
        if len(spans) >= MAX_SPANS:
            raise Refused(f"{control.name}: more than {MAX_SPANS} spans")
        ident, value = region.get("id"), region["value"]
        if not isinstance(ident, str) or not REGION_ID.fullmatch(ident) or ident in spans:
            raise Refused(f"{control.name}: a span needs an id of its own")
        shown = data.get(control.field) if control.field else None
        if not isinstance(shown, str):
            raise Refused(f"{control.name}: this task shows no text to mark")
        problem = span_problem(shown, value.get("start"), value.get("end"), value.get("text"))
        if problem:
            raise Refused(f"{control.name}: {problem}")
        labels = value.get("labels")
        if (not isinstance(labels, list) or not labels or len(labels) > len(control.labels)
                or not all(isinstance(label, str) and label in control.labels for label in labels)
                or len(set(labels)) != len(labels) or (len(labels) > 1 and not control.multiple)):
            known = isinstance(labels, list) and all(isinstance(label, str) and label in control.labels
                                                     for label in labels)
            raise Refused(f"{control.name}: a span has one label; this one has {len(labels)}" if known and
                          len(labels) > 1 and not control.multiple else
                          f"{control.name}: a span's label is not one of {', '.join(control.labels)}")
        for label in labels:
            used[(control.name, label)] = used.get((control.name, label), 0) + 1
        start, end = value["start"], value["end"]
        spans[ident] = {"id": ident, "from_name": control.name, "to_name": region["to_name"], "type": "labels",
                        "value": {"start": start, "end": end, "text": shown[start:end], "labels": list(labels)}}
    limits = {c.max_spans_key: c.max_spans for c, _ in regions if c.max_spans is not None}
    counts: dict[str, int] = {}
    for span in spans.values():
        counts[span["from_name"]] = counts.get(span["from_name"], 0) + 1
    for key, (marked, cap) in over_limits(counts, limits).items():
        raise Refused(f"{key}: mark at most {cap} spans (this protocol's limit); this answer marks {marked}: "
                      f"remove {marked - cap}")
    for control, _ in regions:
        for label, limit in control.max_usages:
            if used.get((control.name, label), 0) > limit:
                raise Refused(f"{control.name}: '{label}' may mark at most {limit} span{'s' if limit > 1 else ''}")
    return spans


def _clean_value(control: Control, value: dict) -> dict:
    """The value of a segment or per-region answer, checked against its control."""
    if control.tag == "Choices":
        choices = value.get("choices")
        if (not isinstance(choices, list) or not choices or len(choices) > len(control.labels)
                or not all(isinstance(c, str) and c in control.labels for c in choices)
                or len(set(choices)) != len(choices) or (len(choices) > 1 and not control.multiple)):
            raise Refused(f"{control.name}: not one of the choices")
        return {"choices": list(choices)}
    if control.tag == "TextArea":
        texts = value.get("text")
        if (not isinstance(texts, list) or not texts or len(texts) > 20
                or not all(isinstance(t, str) for t in texts) or sum(map(len, texts)) > MAX_TEXT
                or not all(_storable(t) for t in texts)):
            raise Refused(f"{control.name}: not a text of at most {MAX_TEXT} characters")
        return {"text": list(texts)}
    key = TYPES[control.tag]
    return {key: _number(value.get(key), control)}


def _check_complete(controls: dict[str, Control], spans: dict[str, dict], seen: set, answered: set) -> None:
    """Every required control answered: a segment one once, a per-region one for every span of its text, a Labels one
    with a span at least."""
    missing = [c.name for c in controls.values() if c.required and not c.per_region and c.tag not in SPAN_TAGS
               and c.name not in seen]
    missing += [c.name for c in controls.values() if c.required and c.tag in SPAN_TAGS
                and not any(span["from_name"] == c.name for span in spans.values())]
    if missing:
        raise Refused(f"please answer every question: {', '.join(missing)} "
                      f"{'is' if len(missing) == 1 else 'are'} not answered")
    for control in controls.values():
        unanswered = [span["value"]["text"] for ident, span in spans.items()
                      if control.required and control.per_region and span["to_name"] in control.to_names
                      and (control.name, ident) not in answered]
        if unanswered:
            raise Refused(f"please answer {control.name} for every marked span: '{unanswered[0][:40]}' has none")


def shown_data(data: dict, fields: set[str]) -> dict:
    """Only the task fields the labeling config displays: whatever else a task holds stays with the gateway."""
    return {key: data[key] for key in sorted(fields) if key in data}
