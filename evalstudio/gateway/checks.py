"""What the gateway accepts from a participant: an annotation result checked against the project's controls, and
the few identifiers it lets through. Pure functions, no I/O."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from evalstudio.protocols.registry import Project
from evalstudio.values.controls import control_range, control_step

PARTICIPANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
ACCESS_CODE = re.compile(r"[A-Za-z0-9]{16,64}")
REF = re.compile(r"[A-Za-z0-9_-]{16,64}")
PLATFORM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a crowd platform's study or session id
ASSET_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,200}){0,6}")
MAX_TEXT = 20_000  # characters in one text answer (a Sotopia rationale is a few sentences)
TYPES = {"Choices": "choices", "Number": "number", "Rating": "rating", "TextArea": "textarea"}


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
    name: str
    tag: str
    to_names: tuple[str, ...]
    labels: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    multiple: bool = False
    required: bool = False


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
            tuple(control.labels) if control.tag == "Choices" else (), low, high, step,
            str(control.attr.get("choice", "single")).lower() == "multiple",
            str(control.attr.get("required", "false")).lower() == "true")
    return out


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


def check_result(result, controls: dict[str, Control], complete: bool = False) -> list[dict]:
    """The result list of an annotation, rebuilt from what the controls allow: each region names a control of the
    project, its object, its type and a value of the control's kind; anything else is refused. With `complete`,
    every required control (required="true" in the labeling config) must be answered. Returns a clean copy (only
    from_name, to_name, type and value; the origin is the gateway's to set), so nothing extra reaches Label
    Studio."""
    if not isinstance(result, list) or len(result) > 4 * max(len(controls), 1):
        raise Refused("the answer is not a list of results")
    clean, seen = [], set()
    for region in result:
        if not isinstance(region, dict):
            raise Refused("a result is not an object")
        control = controls.get(region.get("from_name")) if isinstance(region.get("from_name"), str) else None
        if control is None:
            raise Refused("a result names no control of this project")
        if control.name in seen:
            raise Refused(f"{control.name}: answered twice")
        seen.add(control.name)
        if region.get("to_name") not in control.to_names or region.get("type") != TYPES[control.tag]:
            raise Refused(f"{control.name}: the result does not match the control")
        value = region.get("value")
        if not isinstance(value, dict):
            raise Refused(f"{control.name}: no value")
        if control.tag == "Choices":
            choices = value.get("choices")
            if (not isinstance(choices, list) or not choices or len(choices) > len(control.labels)
                    or not all(isinstance(c, str) and c in control.labels for c in choices)
                    or len(set(choices)) != len(choices) or (len(choices) > 1 and not control.multiple)):
                raise Refused(f"{control.name}: not one of the choices")
            clean_value = {"choices": list(choices)}
        elif control.tag == "TextArea":
            texts = value.get("text")
            if (not isinstance(texts, list) or not texts or len(texts) > 20
                    or not all(isinstance(t, str) for t in texts) or sum(map(len, texts)) > MAX_TEXT
                    or any("\x00" in t for t in texts)):
                raise Refused(f"{control.name}: not a text of at most {MAX_TEXT} characters")
            clean_value = {"text": list(texts)}
        else:
            key = TYPES[control.tag]
            clean_value = {key: _number(value.get(key), control)}
        clean.append({"from_name": control.name, "to_name": region["to_name"], "type": region["type"],
                      "value": clean_value})
    missing = [c.name for c in controls.values() if c.required and c.name not in seen] if complete else []
    if missing:
        raise Refused(f"please answer every question: {', '.join(missing)} "
                      f"{'is' if len(missing) == 1 else 'are'} not answered")
    return clean


def shown_data(data: dict, fields: set[str]) -> dict:
    """Only the task fields the labeling config displays: whatever else a task holds stays with the gateway."""
    return {key: data[key] for key in sorted(fields) if key in data}
