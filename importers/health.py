"""Personal health-assistant dialogues: 8 user/assistant exchanges per scenario and system version.

JSONL, one dialogue per line:
  {"scenario_id": "...", "scenario": "...", "system": "v1",
   "exchanges": [{"user": "...", "assistant": "..."}, ... 8 ...],
   "model_ratings": {"explainability": 7.5, ...},          optional: metric scores to prefill and compare
   "model_version": "..."}                                  optional: the metric that produced them
CSV: columns scenario_id, scenario, system, user_1, assistant_1, ..., user_8, assistant_8.
"""

from __future__ import annotations

from pathlib import Path

from evalstudio.values.sources import FieldError, format_suffix, no_context, read_jsonl, read_table, require, stable_id, turns_text

from .dialogue import check_ratings

NAME = "health"
# The record fields this importer reads; any other field is kept with the task as metadata (and reported once).
FIELDS = frozenset({"scenario_id", "scenario", "system", "exchanges", "model_ratings", "model_version"} |
                   {f"{side}_{i}" for side in ("user", "assistant") for i in range(1, 9)})
EXCHANGES = 8
prepare = no_context
_CSV_COLUMNS = ("scenario_id", "scenario", "system") + tuple(
    f"{who}_{i}" for i in range(1, EXCHANGES + 1) for who in ("user", "assistant")
)


def read(path: Path):
    """Health-assistant records from a CSV or JSONL file."""
    if format_suffix(path) == ".csv":  # (data.csv.gz too)
        for line, row in read_table(path, ",", _CSV_COLUMNS):
            if isinstance(row, dict):
                row = {**row, "exchanges": [
                    {"user": row[f"user_{i}"], "assistant": row[f"assistant_{i}"]} for i in range(1, EXCHANGES + 1)
                ]}
            yield line, row
    else:
        yield from read_jsonl(path)


def convert(record: dict, project, context) -> list[dict]:
    """One scenario's exchanges with one assistant version as its task."""
    scenario_id = str(require(record, "scenario_id", (str, int))).strip()
    system = str(require(record, "system", (str, int))).strip()
    exchanges = require(record, "exchanges", list)
    if len(exchanges) != EXCHANGES:
        raise FieldError("exchanges", f"expected {EXCHANGES} user/assistant exchanges, found {len(exchanges)}")
    dialogue = []
    for i, exchange in enumerate(exchanges):
        if not isinstance(exchange, dict):
            raise FieldError(f"exchanges[{i}]", "expected {user, assistant}")
        dialogue.append({"speaker": "User", "text": require(exchange, "user", str).strip()})
        dialogue.append({"speaker": "Assistant", "text": require(exchange, "assistant", str).strip()})
    data = {
        # the id shows no version name, and no code that repeats for one version across scenarios (one hash of both)
        "evalstudio_id": f"health-{scenario_id}:{stable_id(scenario_id, system)}",
        "item_id": scenario_id,
        "system": system,
        "scenario": require(record, "scenario").strip(),
        "dialogue": turns_text(dialogue),
    }
    if record.get("model_ratings"):
        data["model_ratings"] = check_ratings(record["model_ratings"], project, "model_ratings")
        data["model_version"] = str(record.get("model_version") or "unknown")
    return [data]
