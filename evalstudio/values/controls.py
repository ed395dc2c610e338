"""What a labeling config's numeric controls accept: the range and the step of a Number or Rating. A small, basic
thing that the registry (checking criteria against the config), the results (checking an answer) and the gateway
(checking a participant's answer) all need, so it sits below all of them."""

from __future__ import annotations

from evalstudio.base.errors import RegistryError


def control_range(control) -> tuple[float, float]:
    """Numeric range of a Number or Rating control as (min, max)."""
    if control.tag == "Rating":
        return 1.0, float(control.attr.get("maxRating", 5))
    lo, hi = control.attr.get("min"), control.attr.get("max")
    if lo is None or hi is None:
        raise RegistryError(f"Number control '{control.name}' needs both min and max")
    return float(lo), float(hi)


def control_step(control) -> float | None:
    """The step of a Number control (default 1; None for step="any", any decimal); Ratings step by 1."""
    if control.tag == "Rating":
        return 1.0
    step = control.attr.get("step", "1")
    return None if str(step).strip().lower() == "any" else float(step)
