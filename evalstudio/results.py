"""Build Label Studio result regions for a labeling config's controls (annotations and predictions)."""

from __future__ import annotations

from label_studio_sdk.label_interface import LabelInterface

from .registry import control_range, control_step


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


def region(li: LabelInterface, control_name: str, value) -> dict:
    """One result region setting `control_name` to `value`; ValueError if the value does not fit the control."""
    control = li.get_control(control_name)
    tag = control.tag
    if tag not in VALUE_KEYS:
        raise ValueError(f"control '{control_name}' is a {tag}; supported: {', '.join(VALUE_KEYS)}")
    if tag in ("Number", "Rating"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"control '{control_name}' needs a number, got {value!r}")
        lo, hi = control_range(control)
        if not lo <= value <= hi:
            raise ValueError(f"{value} is outside {control_name}'s range {lo:g}..{hi:g}")
        if tag == "Rating" and value != int(value):
            raise ValueError(f"control '{control_name}' takes whole stars, got {value}")
        step = control_step(control)
        if step and abs((value - lo) / step - round((value - lo) / step)) > 1e-9:
            raise ValueError(f"{value} is not on {control_name}'s step {step:g} (from {lo:g})")
        payload = int(value) if tag == "Rating" or float(value).is_integer() else float(value)
    elif tag == "Choices":
        choices = [value] if isinstance(value, str) else list(value)
        unknown = [c for c in choices if c not in control.labels]
        if unknown:
            raise ValueError(f"{unknown} not among {control_name}'s choices {list(control.labels)}")
        payload = choices
    else:
        payload = [str(value)]
    return {"from_name": control_name, "to_name": control.to_name[0], "type": tag.lower(),
            "value": {VALUE_KEYS[tag]: payload}}
