"""Large import files made from the real dialogue samples: record k is sample k % 10 with its own id, so
every task is real text and the file holds exactly `tasks` distinct tasks (one response per record)."""

from __future__ import annotations

import json
from pathlib import Path

from evalstudio.values.sources import stable_id

SAMPLES = Path(__file__).resolve().parents[1] / "examples" / "dialogue" / "mts_next_response.jsonl"


def write_dialogue_file(path: Path, tasks: int) -> list[str]:
    """Write `tasks` dialogue records to `path`; the evalstudio ids they import as."""
    samples = [json.loads(line) for line in SAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = []
    with open(path, "w", encoding="utf-8") as f:
        for k in range(tasks):
            sample = samples[k % len(samples)]
            response = sample["responses"][(k // len(samples)) % len(sample["responses"])]
            record = {"id": f"scale-{k:07d}", "context": sample["context"], "model_version": sample["model_version"],
                      "responses": [response]}
            f.write(json.dumps(record) + "\n")
            ids.append(f"dialogue-scale-{k:07d}:{stable_id(f'scale-{k:07d}', response['system'])}")
    return ids
