"""Next-response rating items: a dialogue context plus one or more candidate responses.

JSONL, one context per line:
  {"id": "...",                                            optional, else a hash of the context
   "context": [{"speaker": "A", "text": "..."}, ...]       or ["turn", ...] or "turn\\nturn" (speakers A/B alternate,
                                                            or "Name: text" prefixes are used),
   "responses": [{"system": "...", "text": "...", "model_ratings": {...}}, ...],   model_ratings: optional metric scores
   "model_version": "...",                                  optional: the metric that produced model_ratings
   "knowledge": "..." or [...], "persona": "..." or [...]}  optional: shown to annotators above the prompt
  or, for one response: {"context": ..., "system": "...", "response": "..."}
CSV: columns context, response, system[, id, knowledge, persona]; turns in `context` separated by newlines.
Any other field is kept with the task as the researcher's metadata.
"""

from __future__ import annotations

import re
from pathlib import Path

from evalstudio.values.sources import (
    FieldError,
    RecordInvalid,
    attempt,
    collect,
    control_value,
    format_suffix,
    no_context,
    read_jsonl,
    read_table,
    require,
    stable_id,
    turns_text,
)

NAME = "dialogue"
# The record fields this importer reads; any other field is kept with the task as metadata (and reported once).
FIELDS = frozenset({"id", "context", "responses", "system", "response", "model_ratings", "model_version", "knowledge",
                    "persona"})
prepare = no_context
_PREFIX = re.compile(r"^\s*([A-Za-z][\w .'-]{0,30}):\s+(.*)$", re.S)


def read(path: Path):
    """Dialogue records from a CSV or JSONL file."""
    if format_suffix(path) == ".csv":  # (data.csv.gz too)
        return read_table(path, ",", ("context", "response", "system"))
    return read_jsonl(path)


def convert(record: dict, project, context) -> list[dict]:
    """One dialogue context and its response(s) as tasks, one per system."""
    turns = parse_turns(record.get("context"), "context")
    if "responses" in record:
        responses = require(record, "responses", list)
    else:
        responses = [{"system": record.get("system"), "text": record.get("response"),
                      **({"model_ratings": record["model_ratings"]} if "model_ratings" in record else {})}]
    item_id = str(record.get("id") or "").strip() or stable_id([t["text"] for t in turns])
    background = _background(record)
    tasks, errors = [], []
    for i, response in enumerate(responses):  # every response checked: all problems of the record reported at once
        where = f"responses[{i}]." if "responses" in record else ""
        tasks.append(attempt(errors, _response_task, response, where, item_id, turns, record, project))
    if errors:
        raise RecordInvalid(errors)
    for task in tasks:
        task.update(background)
    if not tasks:
        raise FieldError("responses", "is empty")
    return tasks


def as_a_and_b(turns: list[dict]) -> list[dict]:
    """Document 003: "The prompt consists of two people (A and B) talking to each other." Two speakers are shown as
    A and B in order of appearance (their names stay in the task's meta, `context_turns`); more are kept as named."""
    speakers = list(dict.fromkeys(t["speaker"] for t in turns))
    if len(speakers) > 2:
        return turns
    names = dict(zip(speakers, "AB"))
    return [{"speaker": names[t["speaker"]], "text": t["text"]} for t in turns]


def parse_turns(value, field: str) -> list[dict]:
    """Dialogue turns as [{speaker, text}] from a list of dicts, a list of strings, or newline-separated text."""
    if isinstance(value, str):
        value = [line for line in value.splitlines() if line.strip()]
    if not isinstance(value, list) or not value:
        raise FieldError(field, "missing or empty: expected turns as a list or newline-separated text")
    turns = []
    for i, turn in enumerate(value):
        if isinstance(turn, dict):
            speaker, text = turn.get("speaker"), turn.get("text")
            if not isinstance(speaker, str) or not isinstance(text, str) or not text.strip():
                raise FieldError(f"{field}[{i}]", "expected {speaker, text} with non-empty text")
        elif isinstance(turn, str):
            prefixed = _PREFIX.match(turn)
            speaker, text = prefixed.groups() if prefixed else ("AB"[i % 2], turn)
        else:
            raise FieldError(f"{field}[{i}]", f"expected a turn, got {type(turn).__name__}")
        turns.append({"speaker": speaker.strip(), "text": text.strip()})
    return turns


def _background(record: dict) -> dict:
    """The optional knowledge and persona the speakers had (e.g. Wizard of Wikipedia, PersonaChat), as text shown
    above the prompt; both fields empty when the item has none (the view then shows nothing there)."""
    parts, titles = [], []
    for name, title in (("knowledge", "Knowledge"), ("persona", "Persona")):
        value = record.get(name)
        if value in (None, "", []):
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = "\n".join(v.strip() for v in value if v.strip())
        if not isinstance(value, str):
            raise FieldError(name, "expected text or a list of texts")
        parts.append(value.strip() if len(titles) == 0 else f"{title}: {value.strip()}")
        titles.append(title)
    if len(parts) == 2:
        parts[0] = f"{titles[0]}: {parts[0]}"
    return {"knowledge_title": " and ".join(titles) + " (what the speakers knew)" if titles else "",
            "knowledge": "\n\n".join(parts)}


def _response_task(response, where: str, item_id: str, turns: list[dict], record: dict, project) -> dict:
    if not isinstance(response, dict):
        raise FieldError(where.rstrip(".") or "response", "expected {system, text}")
    errors, data = [], {}
    for key, field, shown in (("system", "system", "system"), ("response", "text", "text" if where else "response")):
        try:
            data[key] = require(response, field).strip()
        except FieldError as e:
            errors.append(FieldError(where + shown, e.message))
    if "model_ratings" in response:
        data["model_ratings"] = attempt(errors, check_ratings, response["model_ratings"], project, f"{where}model_ratings")
    if errors:
        raise RecordInvalid(errors)
    task = {
        # the id shows no system name, and no code that repeats for one system across items (one hash of both)
        "evalstudio_id": f"dialogue-{item_id}:{stable_id(item_id, data['system'])}",
        "item_id": item_id,
        "system": data["system"],
        "context": turns_text(as_a_and_b(turns)),
        "context_turns": turns,
        "response": data["response"],
    }
    if "model_ratings" in data:
        task["model_ratings"] = data["model_ratings"]
        task["model_version"] = str(response.get("model_version") or record.get("model_version") or "unknown")
    return task


def check_ratings(ratings, project, field: str) -> dict:
    """Model ratings keyed by criterion, each within the criterion's range."""
    if not isinstance(ratings, dict):
        raise FieldError(field, "expected {criterion: value}")
    out = {}

    def one(name, value):
        def check():
            if name not in project.criteria:
                raise FieldError(f"{field}.{name}", f"unknown criterion; valid: {', '.join(project.criteria)}")
            spec = project.criteria[name]
            out[name] = control_value(f"{field}.{name}", value, project, spec.control or name)

        return check

    collect(*(one(name, value) for name, value in ratings.items()))
    return out
