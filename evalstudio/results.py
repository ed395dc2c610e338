"""Build Label Studio result regions for a labeling config's controls (annotations and predictions)."""

from __future__ import annotations

from label_studio_sdk.label_interface import LabelInterface

from .registry import control_range


def dotted_get(data, path: str):
    """data['a']['b'] for path 'a.b'; None when any step is missing."""
    value = data
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


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
