"""Error spans asked of an LLM judge: the span question of a protocol such as MQM or ESA, and the judge's answer
turned into the spans Label Studio stores.

An annotator marks an error by selecting its words in the shown text and choosing a label (MQM: a severity) and,
on a protocol with per-region questions, answering them for that span (MQM: its category). A judge cannot select,
so it quotes: its answer to a span question is a list with one object per error, the words exactly as the text
has them, the label, and each per-region answer. evalstudio finds the quote in the text the task showed (the same
text, as the gateway passes it on) and gives the span the offsets Label Studio would store for it (code points,
evalstudio/values/spans.py). A quote that is not in the text is refused with its reason, as a malformed answer is
(asked again, then recorded as missing). Words that occur more than once are taken in the order the answer quotes
them (the first unmarked occurrence), unless the answer gives `occurrence` (1 = the first).

After the offsets, the answer is checked exactly as a participant's span answer is (gateway/checks.py: labels of
the control, each label at most its maxUsages, every required per-region question answered)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from evalstudio.gateway.checks import Control, Refused
from evalstudio.values.spans import SPAN_TAGS

QUOTE, LABEL, OCCURRENCE = "text", "label", "occurrence"  # the keys of one span in the judge's answer


def per_region_of(controls: dict[str, Control], span: Control) -> list[Control]:
    """The per-region questions a span of `span` is asked (perRegion controls on the same text), in config order."""
    return [c for c in controls.values() if c.per_region and set(c.to_names) & set(span.to_names)]


def hints(root: ET.Element, span: Control) -> dict[str, str]:
    """Each label's hint, as Label Studio shows it when the pointer rests on the label (MQM's severities)."""
    for element in root.iter("Labels"):
        if element.attrib.get("name") == span.name:
            return {label.attrib.get("value", ""): label.attrib["hint"] for label in element.iter("Label")
                    if label.attrib.get("hint")}
    return {}


def span_schema(span: Control, questions: list[Control], value_schema) -> dict:
    """The JSON schema of a span question's answer: a list of spans, each its quote, its label and its per-region
    answers (`value_schema`: a per-region control's own schema)."""
    properties = {QUOTE: {"type": "string", "minLength": 1}, LABEL: {"enum": list(span.labels)},
                  OCCURRENCE: {"type": "integer", "minimum": 1}}
    properties.update({q.name: value_schema(q) for q in questions})
    return {"type": "array", "items": {"type": "object", "additionalProperties": False, "properties": properties,
                                       "required": [QUOTE, LABEL] + [q.name for q in questions if q.required]}}


def describe_span(span: Control, questions: list[Control], label_hints: dict[str, str], describe) -> str:
    """The span question as the prompt puts it (`describe`: how a per-region control's answer is described)."""
    labels = "; ".join(f'"{label}"' + (f" ({label_hints[label]})" if label in label_hints else "")
                       for label in span.labels)
    limits = "".join(f'; at most {n} with the label "{label}"' for label, n in span.max_usages)
    asked = "".join(f', "{q.name}": {describe(q)}' + ("" if q.required else " (optional)") for q in questions)
    return (f'mark each error in the text [{span.field}] as a list with one object per error: "{QUOTE}": its '
            f'words exactly as the text has them, "{LABEL}": exactly one of: {labels}{asked}; if the quoted words '
            f'occur more than once in that text, "{OCCURRENCE}": which occurrence (1 = the first){limits}. '
            f"An empty list if there is none")


def locate(shown: str, answer: list, span: Control, questions: list[Control]) -> list[dict]:
    """The judge's spans of one control as Label Studio result regions (a labels region per span, each per-region
    answer under the span's id), from quotes found in `shown`; Refused when a quote is not there."""
    name = span.name
    if not isinstance(answer, list):
        raise Refused(f"{name}: not a list of spans")
    taken: dict[str, list[int]] = {}
    marked: list[dict] = []
    for number, item in enumerate(answer):
        if not isinstance(item, dict):
            raise Refused(f"{name}: span {number + 1} is not an object")
        quote, occurrence = item.get(QUOTE), item.get(OCCURRENCE)
        unknown = set(item) - {QUOTE, LABEL, OCCURRENCE} - {q.name for q in questions}
        if unknown:
            raise Refused(f"{name}: span {number + 1} has {sorted(map(str, unknown))[0][:40]!r}, no part of a span")
        if not isinstance(quote, str) or not quote:
            raise Refused(f"{name}: span {number + 1} quotes no text")
        if occurrence is not None and (isinstance(occurrence, bool) or not isinstance(occurrence, int)
                                       or occurrence < 1):
            raise Refused(f"{name}: span {number + 1}: its occurrence is not a whole number from 1")
        starts = _occurrences(shown, quote)
        if not starts:
            raise Refused(f"{name}: {quote[:60]!r} is not in the text")
        if occurrence is not None:
            if occurrence > len(starts):
                raise Refused(f"{name}: {quote[:60]!r} occurs {len(starts)} time(s), not {occurrence}")
            start = starts[occurrence - 1]
        else:  # the first occurrence this answer has not marked yet (the same words, two errors), else the first
            used = taken.setdefault(quote, [])
            start = next((s for s in starts if s not in used), starts[0])
        taken.setdefault(quote, []).append(start)
        marked.append({**{q.name: item[q.name] for q in questions if q.name in item},
                       "start": start, "end": start + len(quote), "text": quote, LABEL: item.get(LABEL)})
    return _regions(span, questions, marked)


def _occurrences(shown: str, quote: str) -> list[int]:
    out, at = [], shown.find(quote)
    while at >= 0:
        out.append(at)
        at = shown.find(quote, at + 1)
    return out


def _value(control: Control, value) -> dict:
    if control.tag == "Choices":
        return {"choices": value if isinstance(value, list) else [value]}
    if control.tag == "TextArea":
        return {"text": [value] if isinstance(value, str) else value}
    return {control.tag.lower(): value}


def plain_spans(clean: list[dict], controls: dict[str, Control]) -> dict[str, list[dict]]:
    """Checked result regions as the judge's answer keeps them: per span control, its spans in text order, each
    {start, end, text, label, per-region answers}."""
    spans: dict[str, dict] = {}
    for region in clean:
        control = controls[region["from_name"]]
        if control.tag in SPAN_TAGS:
            value = region["value"]
            spans[region["id"]] = {"control": control.name, "start": value["start"], "end": value["end"],
                                   "text": value["text"], LABEL: value["labels"][0]}
    for region in clean:
        control = controls[region["from_name"]]
        if control.per_region and region.get("id") in spans:
            value = {k: v for k, v in region["value"].items() if k not in ("start", "end", "text")}
            answer = next(iter(value.values()))
            if control.tag == "Choices" and not control.multiple:
                answer = answer[0]
            elif control.tag == "TextArea":
                answer = "\n".join(answer)
            spans[region["id"]][control.name] = answer
    out: dict[str, list[dict]] = {}
    for span in sorted(spans.values(), key=lambda s: (s["start"], s["end"])):
        out.setdefault(span.pop("control"), []).append(span)
    return out


def regions_of(spans: dict[str, list[dict]], controls: dict[str, Control]) -> list[dict]:
    """The judge's spans (as `plain_spans` keeps them) as Label Studio result regions again: for the spans table of
    the judge's answers and for pre-marked regions."""
    return [region for name, items in spans.items()
            for region in _regions(controls[name], per_region_of(controls, controls[name]), items)]


def _regions(span: Control, questions: list[Control], items: list[dict]) -> list[dict]:
    """Spans {start, end, text, label, per-region answers} of `span` as result regions: a labels region each, its
    per-region answers under the same id (judge-CONTROL-N, N its place in `items`)."""
    out = []
    for number, item in enumerate(items):
        ident = f"judge-{span.name}-{number + 1}"
        where = {"start": item["start"], "end": item["end"], "text": item["text"]}
        out.append({"id": ident, "from_name": span.name, "to_name": span.to_names[0], "type": "labels",
                    "value": {**where, "labels": [item[LABEL]]}})
        for question in questions:
            if item.get(question.name) not in (None, "", []):
                out.append({"id": ident, "from_name": question.name, "to_name": question.to_names[0],
                            "type": question.tag.lower(), "value": {**where, **_value(question, item[question.name])}})
    return out

def judged_tasks(controls: dict[str, Control], combined: list, tasks: list[dict]) -> list[dict]:
    """Each judge's spans of each task as a Label Studio export holds an annotation (completed_by: the judge), so
    the spans table of a judge is made as the annotators' is (exporters.tidy.span_frame)."""
    by_id = {t["id"]: t for t in tasks}
    span_names = [name for name, c in controls.items() if c.tag in SPAN_TAGS]
    out = []
    for answer in combined:
        marked = {name: answer.values[name] for name in span_names if isinstance(answer.values.get(name), list)}
        task = by_id[answer.task_id]
        out.append({"id": answer.task_id, "data": task.get("data") or {}, "meta": task.get("meta") or {},
                    "annotations": [{"id": None, "completed_by": answer.judge, "was_cancelled": False,
                                     "result": regions_of(marked, controls)}] if answer.values else []})
    return out
