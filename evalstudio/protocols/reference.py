"""Every key a projects.yaml entry may have, read from the model that checks it (issue 53: the reference was written
by hand, and `metadata_controls` was in no doc). docs/reference/projects-yaml.md shows this table (docs/hooks.py
renders `<!-- projects.yaml: keys -->`), and tests/test_registry.py checks that the comment block at the top of the
shipped projects.yaml names every top-level key: no key the model accepts can be undocumented."""

from __future__ import annotations

import types
import typing

from pydantic import BaseModel

# set by the registry, never written in projects.yaml
INTERNAL = {"name", "list_of", "list_number", "base_dir"}


def _type(annotation) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        shown = [_type(a) for a in args if a is not type(None)]
        return " | ".join(shown)
    if origin is list:
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}" if args else "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping (below)"
    return getattr(annotation, "__name__", str(annotation))


def _limits(field) -> str:
    shown = []
    for item in field.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "length >="),
                           ("max_length", "length <=")):
            value = getattr(item, name, None)
            if value is not None:
                shown.append(f"{sign} {value}")
    return ", ".join(shown)


def _nested(annotation) -> type[BaseModel] | None:
    candidates = [annotation, *typing.get_args(annotation)]
    for arg in list(candidates):
        candidates += typing.get_args(arg)
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def key_rows(model: type[BaseModel] | None = None, prefix: str = "") -> list[dict]:
    """(key, type, required, default, limits) of every key of an entry, nested keys as `parent.key` (a criterion's
    as `criteria.NAME.key`)."""
    if model is None:
        from .registry import Project

        model = Project
    rows = []
    for name, field in model.model_fields.items():
        if not prefix and name in INTERNAL:
            continue
        key = f"{prefix}{name}"
        default = "" if field.is_required() else repr(field.get_default(call_default_factory=True))
        rows.append({"key": key, "type": _type(field.annotation), "required": "yes" if field.is_required() else "",
                     "default": default if default not in ("None", "[]", "{}") else "", "limits": _limits(field)})
        inner = _nested(field.annotation)
        if inner is not None:
            is_mapping = typing.get_origin(field.annotation) is dict
            rows += key_rows(inner, f"{key}.NAME." if is_mapping else f"{key}.")
    return rows


def markdown_table() -> str:
    """projects.yaml's keys as a Markdown table (docs/reference/projects-yaml.md)."""
    lines = ["| key | type | required | default | limits |", "|---|---|---|---|---|"]
    for r in key_rows():
        lines.append(f"| `{r['key']}` | {r['type'].replace('|', '&#124;')} | {r['required']} | "
                     f"{r['default'].replace('|', '&#124;')} | {r['limits']} |")
    return "\n".join(lines)
