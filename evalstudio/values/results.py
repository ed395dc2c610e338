"""Build Label Studio result regions for a labeling config's controls (annotations and predictions)."""

from __future__ import annotations

import math
import re

from label_studio_sdk.label_interface import LabelInterface

from .controls import control_range, control_step

# the field of a task's data that holds evalstudio's own id of the task (the import's key; never shown to annotators)
ID_FIELD = "evalstudio_id"


def dotted_get(data, path: str):
    """data['a']['b'] for path 'a.b'; None when any step is missing."""
    value = data
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def task_fields(task: dict) -> dict:
    """Everything evalstudio keeps for a task: what annotators see (`data`) and the rest (`meta`: model outputs,
    gold labels, systems). Tasks imported before the split had everything in `data`."""
    meta, data = task.get("meta"), task.get("data")
    return {**(meta if isinstance(meta, dict) else {}), **(data if isinstance(data, dict) else {})}


VALUE_KEYS = {"Number": "number", "Rating": "rating", "Choices": "choices", "TextArea": "text"}


NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)  # a plain decimal
MAX_MAGNITUDE = 1e15  # no rating scale comes near; larger numbers are input errors (or attacks)


def _short(value) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a number with over 30 digits"
    return text if len(text) <= 60 else text[:57] + "..."


def as_number(value) -> float:
    """A finite number from a JSON number or a plain decimal string ("7.5", "-3", "1e1"); ValueError otherwise.
    Python's float() also reads "1_0" as 10, "٧" (Arabic-Indic seven) as 7 and "nan": those are refused."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, str):
        if not NUMBER.fullmatch(value.strip()):
            raise ValueError(f"expected a number, got {_short(value)}")
        value = float(value.strip())
    if isinstance(value, int):
        if abs(value) > MAX_MAGNITUDE:
            raise ValueError(f"expected a rating, got {_short(value)}")
        value = float(value)
    if not isinstance(value, float):
        raise ValueError(f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise ValueError(f"expected a rating, got {_short(value)}")
    return value


def check_value(control, value):
    """The one check of a value against its control (type, range, step, choices), wherever values enter: importers
    (model ratings), predictors, LLM answers. Returns the value as Label Studio stores it; ValueError otherwise."""
    tag, name = control.tag, control.name
    if tag not in VALUE_KEYS:
        raise ValueError(f"control '{name}' is a {tag}; supported: {', '.join(VALUE_KEYS)}")
    if tag in ("Number", "Rating"):
        value = as_number(value)
        lo, hi = control_range(control)
        if not lo <= value <= hi:
            raise ValueError(f"{value:g} is outside {name}'s range {lo:g}..{hi:g}")
        if tag == "Rating" and value != int(value):
            raise ValueError(f"control '{name}' takes whole stars, got {value:g}")
        step = control_step(control)
        if step and abs((value - lo) / step - round((value - lo) / step)) > 1e-9:
            raise ValueError(f"{value:g} is not on {name}'s step {step:g} (from {lo:g})")
        return int(value) if tag == "Rating" or value.is_integer() else value
    if tag == "Choices":
        choices = [value] if isinstance(value, str) else value
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise ValueError(f"control '{name}' needs one of its choices, got {_short(value)}")
        unknown = [c for c in choices if c not in control.labels]
        if unknown:
            raise ValueError(f"{[_short(c) for c in unknown]} not among {name}'s choices {list(control.labels)}")
        return choices
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(f"control '{name}' needs text, got {type(value).__name__}")
    return [str(value)]


def region(li: LabelInterface, control_name: str, value) -> dict:
    """One result region setting `control_name` to `value`; ValueError if the value does not fit the control."""
    control = li.get_control(control_name)
    payload = check_value(control, value)
    return {"from_name": control_name, "to_name": control.to_name[0], "type": control.tag.lower(),
            "value": {VALUE_KEYS[control.tag]: payload}}
