"""The annotators' instrument as an LLM judge reads it: the prompt is built from what a participant of the gateway
sees, and from nothing else.

A participant reads the project's instructions (projects.yaml, the gateway's channel) and then the task's page,
which Label Studio renders from the labeling config: its static texts (headings, definitions, anchors, examples),
the task's displayed fields in place, and the questions (controls). The prompt is that page as plain text, in the
page's order, followed by the answer form as a JSON schema of the controls (ranges, steps, labels, which are
required). Only the data fields the labeling config displays are read from a task (as the gateway passes them
on): a system name, gold answer, model rating, `meta` or other annotation never reaches a prompt.

Pairwise and best-worst protocols are asked in more than one order: the candidates' displayed fields (FIELD_a,
FIELD_b, ...) are permuted, and an answer that names positions (compare.outcomes, the best/worst labels) is mapped
back to the order the task stores (`Instrument.unpermute`).

Span protocols (MQM, ESA): a Labels control is a span question; the text it marks is named on the page
("[target] ...") and the judge answers with quotes of that text, each with its label and per-region answers
(judge/spans.py), turned into the offsets Label Studio stores."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import cached_property

from evalstudio.base.chat import digest
from evalstudio.base.errors import EvalstudioError
from evalstudio.gateway.checks import Control, Refused, check_result, controls_of
from evalstudio.protocols.mapping import POSITIONS
from evalstudio.protocols.registry import Project
from evalstudio.values.spans import SPAN_TAGS

from . import spans

TEXT_TAGS = {"Header", "Text", "HyperText", "Paragraphs", "Table"}
SKIPPED = {"Style", "Script", "Choice", "Label"}
FIELD = re.compile(r"\$(\w+)")
TAG = re.compile(r"<[^>]+>")
SYSTEM = ("You are an annotator in a human evaluation study. Read the instructions and the task exactly as the "
          "annotators read them, then answer every question of the form. Answer with one JSON object only, nothing "
          "else: its keys are the questions' names, each value as the form says.")


class InstrumentError(EvalstudioError):
    """A labeling config the judge's instrument cannot put into a prompt."""
    pass


def _text(value: str) -> str:
    """HTML as the text a reader sees (tags out, entities decoded, blank runs as one space per line)."""
    value = re.sub(r"\s*<\s*/t[dh]\s*>\s*", " | ", value, flags=re.I)  # a table row on one line
    value = re.sub(r"<\s*(br|/p|/div|/li|/h\d|/tr)\s*/?>", "\n", value, flags=re.I)
    lines = (" ".join(html.unescape(TAG.sub(" ", line)).split()).strip(" |") for line in value.splitlines())
    return "\n".join(line for line in lines if line)


def _field_text(value) -> str:
    """A displayed field's value as the page shows it: dialogue turns as 'speaker: text', lists one per line."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(f"{v.get('speaker') or v.get('author') or ''}: {v.get('text', '')}".strip(": ")
                         if isinstance(v, dict) and "text" in v else _field_text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _text(str(value)) if "<" in str(value) else str(value)


def _describe(control: Control) -> str:
    if control.tag in ("Rating", "Number"):
        step = "any decimal" if control.step is None else (
            "a whole number" if control.step == 1 else f"in steps of {control.step:g}")
        return f"a number from {control.low:g} to {control.high:g} ({step})"
    if control.tag == "Choices":
        one = "a list of one or more of" if control.multiple else "exactly one of"
        return f"{one}: " + "; ".join(json.dumps(label, ensure_ascii=False) for label in control.labels)
    return "your text"


def _schema(control: Control) -> dict:
    if control.tag in ("Rating", "Number"):
        whole = lambda x: int(x) if float(x).is_integer() else x  # noqa: E731 - 1, not 1.0, in the schema
        out = {"type": "integer" if control.step == 1 else "number", "minimum": whole(control.low),
               "maximum": whole(control.high)}
        if control.step not in (None, 1):
            out["multipleOf"] = control.step
        return out
    if control.tag == "Choices":
        label = {"enum": list(control.labels)}
        return {"type": "array", "items": label, "minItems": 1, "uniqueItems": True} if control.multiple else label
    return {"type": "string"}


@dataclass(frozen=True)
class Prompt:
    """What one judge reads for one task: the messages, their digest and the order candidates were shown in."""
    messages: tuple[dict, ...]
    digest: str  # sha256 of the messages: what the judge read, cited by every answer
    order: tuple[int, ...]  # the candidates' positions as shown (identity: the stored order)


class Instrument:
    """One project's instrument: prompts for its tasks and the answers checked as a participant's are."""

    def __init__(self, project: Project):
        self.project = project
        self.controls = controls_of(project)
        try:
            self.root = ET.fromstring(project.config_for("gateway"))  # (comments are dropped by the parser)
        except ET.ParseError as e:
            raise InstrumentError(f"{project.config_path}: not readable as XML ({e})") from None
        # span questions (judge/spans.py): each Labels control with the per-region questions of its text
        self.span_questions = {name: spans.per_region_of(self.controls, c) for name, c in self.controls.items()
                               if c.tag in SPAN_TAGS}
        asked_per_span = {q.name for questions in self.span_questions.values() for q in questions}
        unmarkable = [c.name for c in self.controls.values()
                      if (c.per_region and c.name not in asked_per_span) or (c.tag in SPAN_TAGS and not c.field)]
        if unmarkable:  # a per-region question of no span, or spans of something other than one shown text
            raise InstrumentError(f"{project.config_path}: an LLM judge cannot answer {', '.join(unmarkable)}: it "
                                  f"marks spans of a Text showing one task field, and answers per-region questions "
                                  f"of those spans only")
        self.span_fields = {c.field for name, c in self.controls.items() if name in self.span_questions}
        self.instructions = _text(project.instructions_for("gateway"))
        self.fields = frozenset(project.data_fields())  # what the gateway passes on of a task
        candidates = project.input.candidates if project.input is not None else None
        self.positions = candidates.per_task if candidates is not None and project.compare is not None else 1
        self.candidate_fields = candidates.shown_fields if self.positions > 1 else []
        compare = project.compare
        # the question whose labels name positions, on a pairwise protocol (None otherwise)
        self.comparison_control = (project.slots(compare.criterion)[0].control
                                   if compare is not None and compare.kind == "pairwise" else None)
        asked = {name: c for name, c in self.controls.items() if not c.per_region}  # per-region: inside a span
        self.schema = {"type": "object", "additionalProperties": False,
                       "properties": {name: spans.span_schema(c, self.span_questions[name], _schema)
                                      if name in self.span_questions else _schema(c) for name, c in asked.items()},
                       "required": [name for name, c in asked.items() if c.required]}

    # ---- the prompt -------------------------------------------------------------------------------------------
    def orders(self, both: bool = True) -> list[tuple[int, ...]]:
        """The orders a task is asked in: as stored, and (pairwise, best-worst) reversed."""
        identity = tuple(range(self.positions))
        return [identity, identity[::-1]] if both and self.positions > 1 else [identity]

    def shown(self, data: dict, order: tuple[int, ...]) -> dict:
        """The task's displayed fields (only those), the candidates in `order`: position i shows stored order[i]."""
        shown = {key: data[key] for key in sorted(self.fields) if key in data}
        for name in self.candidate_fields:
            stored = [data.get(f"{name}_{POSITIONS[p]}") for p in range(self.positions)]
            for i, p in enumerate(order):
                shown[f"{name}_{POSITIONS[i]}"] = stored[p]
        return shown

    def page(self, shown: dict) -> str:
        """The task's page as text: the config's lines (walked once, `_lines`) with the task's fields in place."""
        lines = []
        for prefix, parts in self._lines:
            if len(parts) == 1:  # a static line
                lines.append(parts[0])
                continue
            rendered = "".join(_field_text(shown.get(part)) if i % 2 else part for i, part in enumerate(parts))
            rendered = rendered.strip()
            if rendered:
                lines.append(prefix + rendered)
        return "\n".join(lines)

    @cached_property
    def _lines(self) -> list[tuple[str, list[str]]]:
        """The page's lines in order: (prefix, [text]) for a static line, (prefix, [text, field, text, ...]) for a
        line that shows task fields."""
        lines: list[tuple[str, list[str]]] = []

        def walk(element) -> None:
            tag = element.tag
            if tag in SKIPPED:
                return
            value = element.attrib.get("value")
            if tag == "View" and "es-tr" in element.attrib.get("className", "").split():  # a table's row, on one line
                cells = [_text(c.attrib.get("value", "")) for c in element if c.tag in TEXT_TAGS]
                lines.append(("", [" | ".join(cells)]))
                return
            if tag == "Panel" and value:
                lines.append(("", [f"## {value}"]))
            elif tag in TEXT_TAGS and value is not None:
                prefix = "# " if tag == "Header" else ""
                if tag == "Text" and value.startswith("$") and value[1:] in self.span_fields:
                    prefix = f"[{value[1:]}] "  # a text whose errors are marked: named, as the span question says
                parts = FIELD.sub(lambda m: "\x00" + m.group(1) + "\x00", value).split("\x00")
                if len(parts) > 1:
                    lines.append((prefix, parts))
                elif _text(value).strip():
                    lines.append(("", [prefix + _text(value).strip()]))
            elif tag in self._control_tags and element.attrib.get("name") in self.controls:
                control = self.controls[element.attrib["name"]]
                required = "required" if control.required else "optional"
                if control.name in self.span_questions:
                    asked = spans.describe_span(control, self.span_questions[control.name],
                                                spans.hints(self.root, control), _describe)
                    lines.append(("", [f"[Question \"{control.name}\" ({required}): {asked}]"]))
                elif not control.per_region:  # (a per-region question is asked inside its span's)
                    lines.append(("", [f"[Question \"{control.name}\" ({required}): answer with "
                                       f"{_describe(control)}]"]))
            for child in element:
                walk(child)

        walk(self.root)
        return lines

    _control_tags = {"Rating", "Number", "Choices", "TextArea", *SPAN_TAGS}

    @cached_property
    def _system(self) -> str:
        return SYSTEM + "\n\nThe form (JSON schema):\n" + json.dumps(self.schema, ensure_ascii=False)

    def prompt(self, data: dict, order: tuple[int, ...] | None = None) -> Prompt:
        """The prompt for one task: instructions and task as participants see them, candidates in `order`."""
        order = tuple(order if order is not None else range(self.positions))
        system = self._system
        user = ("## Instructions\n" + self.instructions + "\n\n" if self.instructions else "") + \
            "## The task\n" + self.page(self.shown(data, order))
        messages = ({"role": "system", "content": system}, {"role": "user", "content": user})
        return Prompt(messages, digest(messages), order)

    # ---- the answer -------------------------------------------------------------------------------------------
    def check(self, content: str, shown: dict | None = None) -> dict:
        """The judge's answer as {control: value}, checked as a participant's complete answer is (every required
        question, values on the scale; spans found in the `shown` task fields, judge/spans.py); Refused with the
        reason otherwise."""
        text = re.sub(r"^```(?:json)?\s*|\s*```$", "", content.strip())
        try:
            answer = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            raise Refused(f"not JSON: {content[:120]!r}") from None
        if not isinstance(answer, dict):
            raise Refused("not a JSON object")
        result = []
        for name, value in answer.items():
            control = self.controls.get(name) if isinstance(name, str) else None
            if control is None or control.per_region:
                raise Refused(f"{str(name)[:40]!r} is no question of the form")
            if value is None or value == "" or value == []:
                continue
            if control.tag in SPAN_TAGS:
                text = (shown or {}).get(control.field)
                result += spans.locate(text if isinstance(text, str) else "", value, control,
                                       self.span_questions[name])
                continue
            if control.tag == "Choices":
                value = {"choices": value if isinstance(value, list) else [value]}
            elif control.tag == "TextArea":
                value = {"text": [value] if isinstance(value, str) else value}
            else:
                value = {control.tag.lower(): value}
            result.append({"from_name": name, "to_name": (control.to_names or ("",))[0],
                           "type": control.tag.lower(), "value": value})
        clean = check_result(result, self.controls, complete=True, data=shown)
        out: dict = spans.plain_spans(clean, self.controls)
        for region in clean:
            control, value = self.controls[region["from_name"]], next(iter(region["value"].values()))
            if control.tag in SPAN_TAGS or control.per_region:
                continue
            if control.tag == "Choices" and not control.multiple:
                value = value[0]
            elif control.tag == "TextArea":
                value = "\n".join(value)
            out[control.name] = value
        return out

    def unpermute(self, answer: dict, order: tuple[int, ...]) -> dict:
        """An answer given with the candidates in `order`, as it reads in the stored order: a label naming a
        position (compare.outcomes left/right, the best/worst labels in position order) names the candidate."""
        if order == tuple(range(len(order))) or self.project.compare is None:
            return dict(answer)
        compare, out = self.project.compare, dict(answer)
        if compare.kind == "pairwise":
            by_label = {label: side for side, label in compare.outcomes.items()}
            swap = {"left": "right", "right": "left"}
            control = self.comparison_control
            if control in out:
                values = out[control] if isinstance(out[control], list) else [out[control]]
                mapped = [compare.outcomes[swap[by_label[v]]] if by_label.get(v) in swap else v for v in values]
                out[control] = mapped if isinstance(out[control], list) else mapped[0]
            return out
        for criterion in (compare.best, compare.worst):
            control = self.project.slots(criterion)[0].control
            labels = list(self.controls[control].labels)
            if control in out:
                values = out[control] if isinstance(out[control], list) else [out[control]]
                mapped = [labels[order[labels.index(v)]] if v in labels and labels.index(v) < len(order) else v
                          for v in values]
                out[control] = mapped if isinstance(out[control], list) else mapped[0]
        return out
