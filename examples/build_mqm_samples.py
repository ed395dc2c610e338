"""examples/mqm/ted_ende.jsonl: the first 12 segments of the first TED talk translated by three systems, from the MQM
TSV of google/wmt-mqm-human-evaluation (tests/data/mqm_ted/mqm_ted_ende.tsv.gz, Apache-2.0): one record per
translated segment with its source, its target without the <v> marks, and the talk's segments before it in the same
system's translation (the document context MQM raters saw). examples/esa/ted_ende.jsonl: the same segments with the
[MISSING] token ESA's annotators mark for missing content (a field of each task: Label Studio marks spans of task
fields only)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
SYSTEMS = ["Facebook-AI", "Nemo", "ref"]

raw = pd.read_csv(HERE.parent / "tests" / "data" / "mqm_ted" / "mqm_ted_ende.tsv.gz", sep="\t", dtype=str,
                  quoting=csv.QUOTE_NONE, keep_default_na=False)
raw["target"] = raw["target"].str.replace("<v>", "", regex=False).str.replace("</v>", "", regex=False)
raw["source"] = raw["source"].str.replace("<v>", "", regex=False).str.replace("</v>", "", regex=False)
first = raw[(raw["doc"] == "talk.1") & raw["system"].isin(SYSTEMS)].drop_duplicates(["system", "seg_id"])
first = first.assign(seg=first["seg_id"].astype(int)).sort_values(["system", "seg"])
first = first[first["seg"] <= first["seg"].min() + 11]
with open(HERE / "mqm" / "ted_ende.jsonl", "w", encoding="utf-8") as out, \
        open(HERE / "esa" / "ted_ende.jsonl", "w", encoding="utf-8") as esa:
    for system, rows in first.groupby("system", sort=True):
        before: list[str] = []
        for r in rows.itertuples():
            record = {"id": f"{r.doc}-{r.seg_id}", "system": system, "doc": r.doc, "source": r.source,
                      "target": r.target, "context": "\n".join(before) or "(the start of the talk)"}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            esa.write(json.dumps({k: record[k] for k in ("id", "system", "doc", "source", "target")} | {"missing": "[MISSING]"},
                                 ensure_ascii=False) + "\n")
            before.append(r.target)
