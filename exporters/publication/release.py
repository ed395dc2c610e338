"""The data of a finished study, ready to share (`evalstudio publish`): the ratings as one tidy table in Parquet and
CSV, annotators under keyed pseudonyms, a Hugging Face dataset card and Croissant metadata.

What is left out, and why:
- platform ids, e-mails, sign-in codes, passwords, Prolific/MTurk session ids: never written. Annotators appear as
  pseudonyms, HMAC-SHA256 of their id under a key that stays with the researcher (not in the folder): the same key
  gives the same pseudonyms in a later release, and without it nobody can link a pseudonym to a platform id (an
  unkeyed hash of a Prolific id could be recomputed by anyone who holds the id).
- when each answer was given (a timestamp can be matched against the platform's own records); the seconds spent on
  each task, as the server measured them, stay.
- answers that do not count: skipped tasks, answers beyond a task's overlap (what `analyze` leaves out too).
Free text (rationales, notes) can hold anything a participant typed, their own name or id included: every such
cell is listed in review_free_text.csv for the researcher to read before release, and one that holds a participant's
id, e-mail or code, or anything shaped like an e-mail address, is replaced by "[removed: ...]" and flagged.

Croissant: the MLCommons metadata format for ML datasets, version 1.0 (http://mlcommons.org/croissant/1.0).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput
from evalstudio.crowd.study import counted_rows
from evalstudio.protocols.attention import CHECK_COLUMN

from ..tables.files import write_csv, write_parquet

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
REMOVED = "[removed: {}]"
# the release's columns, in order (those the study has)
COLUMNS = ["part", "task_id", "item_id", "system", "list", "annotator", "criterion", "agent", "value", "rationale",
           "seconds"]


def pseudonym(key: bytes, annotator: str) -> str:
    """A stable pseudonym: 'A' and 12 hex digits of HMAC-SHA256(key, id)."""
    return "A" + hmac.new(key, str(annotator).encode("utf-8"), hashlib.sha256).hexdigest()[:12]


def read_key(path: Path, output: Path) -> bytes:
    """The researcher's pseudonym key: read from `path`, made there (readable by the owner only) on first use.
    Refused inside the output folder: the key must not travel with the data."""
    import os
    import secrets

    if path.resolve().is_relative_to(output.resolve()):
        raise BadInput(f"--key-file: {path} is inside the output folder {output}; the key that makes the pseudonyms "
                       "must stay with you (the default is .evalstudio/publish.key)")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
    text = path.read_text(encoding="utf-8").strip()
    if not re.fullmatch(r"[0-9a-f]{32,}", text):
        raise BadInput(f"--key-file: {path} does not hold a pseudonym key (hex digits, as evalstudio writes it); "
                       "give the file of an earlier release or a new path")
    return bytes.fromhex(text)


def numbers_and_labels(values: pd.Series, criteria: pd.Series, specs: dict) -> tuple[pd.Series, pd.Series]:
    """(value, label) of the release: a criterion with labels gives its label in `label` and, on an ordinal
    scale, the label's position in `value` (1 = the first label, as `analyze` reads it); any other answer is a
    number in `value`. An answer that is not a number where one is expected stays, as text, in `label` (never
    lost). `specs`: criterion -> an object with labels and scale."""
    values = values.astype(object)
    given = values.notna()
    labelled = criteria.map(lambda c: bool(getattr(specs.get(c), "labels", None))).astype(bool)
    plain = ~values.map(lambda v: isinstance(v, (bool, np.bool_, list, dict, tuple)))  # no number, whatever it reads as
    numbers = pd.to_numeric(values.where(~labelled & given & plain), errors="coerce").astype(float)
    for criterion in criteria[labelled].unique():
        spec = specs[criterion]
        if spec.scale == "ordinal":
            mine = labelled & (criteria == criterion)
            numbers[mine] = values[mine].map(lambda v, labels=list(spec.labels): float(labels.index(v) + 1)
                                             if v in labels else float("nan"))
    text = given & (labelled | numbers.isna())  # a label, or an answer that is not a number: kept as given
    labels = values[text].map(str).reindex(values.index)
    return numbers, pd.Series(labels.tolist(), index=values.index, dtype="str")  # text even when empty (Parquet)


def ratings_table(annotations: pd.DataFrame, key: bytes, metadata: Iterable[str], criteria: dict) -> pd.DataFrame:
    """The counted answers as the release's tidy table: one row per answer and criterion, annotators pseudonymised,
    the answer as a number (`value`) or a label (`label`: numbers_and_labels). `metadata`: the entry's metadata
    columns kept (a note, which the caller reviews as free text; a bad-instance mark); `criteria`: name -> its
    spec (labels, scale)."""
    counted = counted_rows(annotations)
    out = pd.DataFrame({"part": counted["project"], "task_id": counted["task_id"], "item_id": counted["item_id"],
                        "system": counted["system"]})
    if "list" in counted:
        out["list"] = counted["list"]
    out["annotator"] = [pseudonym(key, a) for a in counted["annotator"]]
    out["criterion"] = counted["criterion"]
    out["agent"] = counted["agent"]
    out["value"], out["label"] = numbers_and_labels(counted["value"], counted["criterion"], criteria)
    out["rationale"] = counted["rationale"]
    for column in metadata:
        if column in counted:
            out[column] = counted[column]
    if CHECK_COLUMN in counted:  # a study with attention checks (dropped below when it has none)
        out[CHECK_COLUMN] = counted[CHECK_COLUMN]
    out["seconds"] = pd.to_numeric(counted["lead_time"], errors="coerce")
    if "from_prediction" in counted and counted["from_prediction"].astype(bool).any():  # a prefilled study
        out["from_prediction"] = counted["from_prediction"].astype(bool)
    empty = [c for c in out.columns if c not in ("value", "label") and out[c].isna().all()]
    return out.drop(columns=empty).reset_index(drop=True)  # value and label always: one schema for every study


SPAN_COLUMNS = ["part", "task_id", "item_id", "system", "annotator", "over_max", "control", "region_id", "start", "end",
                "text", "labels"]


def spans_table(spans: pd.DataFrame, key: bytes, counted_annotations: Iterable) -> pd.DataFrame:
    """The spans of the counted answers (exporters.tidy.span_frame; the same answers as the ratings), annotators
    pseudonymised, with their per-region answers; Label Studio's own form of the text (ls_text) is left out: `text`
    is the shown text's [start:end]."""
    counted = spans[spans["annotation_id"].isin(set(counted_annotations)) & ~spans["cancelled"].astype(bool)
                    & ~spans["surplus"].astype(bool)]
    unmarked = [CHECK_COLUMN] if CHECK_COLUMN in counted and counted[CHECK_COLUMN].isna().all() else []  # no check
    out = counted.rename(columns={"project": "part"}).drop(columns=["annotation_id", "cancelled", "surplus", "ls_text",
                                                                   *unmarked])
    out["annotator"] = [pseudonym(key, a) for a in counted["annotator"]]
    # whether the span's answer was made with the prediction shown: a prefilled study's (as the ratings table)
    shown = ["from_prediction"] if "from_prediction" in out and out["from_prediction"].astype(bool).any() else []
    per_region = [c for c in out.columns if c not in SPAN_COLUMNS and c != "from_prediction"]
    return out[SPAN_COLUMNS[:5] + shown + SPAN_COLUMNS[5:] + per_region].reset_index(drop=True)


def write_spans(folder: Path, spans: pd.DataFrame) -> dict[str, Path]:
    """data/spans.parquet and data/spans.csv beside the ratings; returns them by name."""
    files = {"spans_parquet": folder / "data" / "spans.parquet", "spans_csv": folder / "data" / "spans.csv"}
    files["spans_parquet"].parent.mkdir(parents=True, exist_ok=True)
    write_parquet(spans, files["spans_parquet"])
    write_csv(spans, files["spans_csv"])
    return files


def scrub(table: pd.DataFrame, text_columns: list[str], secrets_: Iterable[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table with any participant id, e-mail or code, and anything shaped like an e-mail, removed from its free-text
    cells; one review row per free-text cell: where it is, what was removed, the text as released)."""
    known = sorted({s for s in secrets_ if s and len(s) >= 4}, key=len, reverse=True)
    out = table.copy()
    rows = []
    for column in [c for c in text_columns if c in out]:
        for index, value in out[column].items():
            if not isinstance(value, str) or not value.strip():
                continue
            text, removed = value, []
            for secret in known:
                if secret.lower() in text.lower():
                    text = re.sub(re.escape(secret), REMOVED.format("a participant's id or code"), text,
                                  flags=re.IGNORECASE)
                    removed.append("a participant's id or code")
            if EMAIL.search(text):
                text = EMAIL.sub(REMOVED.format("an e-mail address"), text)
                removed.append("an e-mail address")
            out.at[index, column] = text
            rows.append({"row": index, "column": column, "annotator": out.at[index, "annotator"],
                         "removed": "; ".join(dict.fromkeys(removed)), "text": text})
    review = pd.DataFrame(rows, columns=["row", "column", "annotator", "removed", "text"])
    return out, review


def write_data(folder: Path, table: pd.DataFrame, review: pd.DataFrame) -> dict[str, Path]:
    """data/ratings.parquet, data/ratings.csv and review_free_text.csv; returns them by name."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    files = {"parquet": data / "ratings.parquet", "csv": data / "ratings.csv", "review": folder / "review_free_text.csv"}
    write_parquet(table, files["parquet"])  # value: numbers (float), label: text (numbers_and_labels)
    write_csv(table, files["csv"])
    write_csv(review, files["review"])
    return files


def analysis_spec(name: str, table: pd.DataFrame, criteria: dict) -> str:
    """data_release/spec.yaml: the analysis spec that reads the release (`evalstudio analyze`, `compare`): its
    columns and each criterion's scale. `criteria`: name -> an object with scale, labels, min, max."""
    import yaml

    columns = {role: role if role != "item" else "item_id" for role in ("item", "annotator", "system", "agent",
                                                                        "criterion", "value", "label")
               if (role if role != "item" else "item_id") in table.columns}
    spec = {"name": name, "columns": columns, "criteria": {}}
    for criterion, c in criteria.items():
        if criterion not in set(table["criterion"]):
            continue
        entry = {"scale": c.scale}
        if c.labels:
            entry["labels"] = list(c.labels)
        elif c.min is not None:
            entry.update(min=c.min, max=c.max)
        spec["criteria"][criterion] = entry
    return ("# The analysis spec of this release: `evalstudio analyze data/ratings.csv --spec spec.yaml`\n"
            + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))


def sha256_of(path: Path) -> str:
    """The file's SHA-256 as hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dataset_card(name: str, title: str, table: pd.DataFrame, facts: dict, licence: str, reviewed: int) -> str:
    """README.md of the data release: a Hugging Face dataset card (YAML header the Hub reads: licence, size,
    configs pointing at the Parquet file) and what a reader needs to use the data."""
    import yaml

    rows = len(table)
    size = next(label for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                                           (1_000_000, "100K<n<1M")) if rows < limit) if rows < 1_000_000 else "n>1M"
    header = {"pretty_name": title, "license": licence, "annotations_creators": ["crowdsourced"],
              "size_categories": [size], "tags": ["human-evaluation", "evalstudio"],
              "configs": [{"config_name": "default", "data_files": [{"split": "train",
                                                                       "path": "data/ratings.parquet"}]}]}
    spans = facts.get("spans")  # {"count", "columns", "controls"} when the study marked spans
    if spans:  # error spans: a second table, one row per span
        header["configs"].append({"config_name": "spans", "data_files": [{"split": "train",
                                                                           "path": "data/spans.parquet"}]})
    columns = "\n".join(f"| `{c}` | {COLUMN_MEANING.get(c, OTHER_COLUMN)} |"
                        for c in table.columns)
    return (f"---\n{yaml.safe_dump(header, sort_keys=False, allow_unicode=True)}---\n\n"
            f"# {title}\n\n"
            f"Human ratings collected with evalstudio for the protocol `{name}`: {rows} ratings of "
            f"{facts['items']} items ({facts['systems']} systems) by {facts['annotators']} annotators. "
            "How the study was run is in `datasheet.md` (the Human Evaluation Datasheet, Shimorina & Belz 2022) "
            "beside this folder; the instrument the annotators saw is in `instrument/`.\n\n"
            "## Columns\n\n| column | meaning |\n|---|---|\n" + columns + "\n\n"
            + (f"## Spans\n\n`data/spans.parquet` (and `.csv`): {spans['count']} spans marked in the shown text, "
               "one row per span; part, task_id, item_id, system and annotator as in the ratings, then "
               + ", ".join(f"`{c}` ({SPAN_MEANING.get(c, PER_REGION_COLUMN)})" for c in spans["columns"]
                           if c not in COLUMN_MEANING) + ".\n\n" if spans else "")
            + "## Personal data\n\n"
            "Annotators are pseudonyms: a keyed hash of their platform id (HMAC-SHA256) whose key stays with the "
            "researchers, so a pseudonym cannot be linked back to a platform id. No platform id, e-mail address, "
            "sign-in code, session id or answer timestamp is included. "
            f"{reviewed} free-text answer(s) were listed for the researchers' review before release "
            "(`review_free_text.csv`, not part of the data).\n\n"
            "## Licence\n\n"
            + ("Not set yet: choose one before release (`evalstudio publish --license`).\n" if licence == "unknown"
               else f"{licence}\n"))


PER_REGION_COLUMN = "the annotator's answer about this span (a per-region control of the labeling config)"
SPAN_MEANING = {
    "control": "the span control (Labels) of the labeling config", "region_id": "the span's id in Label Studio",
    "start": "where the span starts in the shown text (a character offset: Python's, which is Label Studio's)",
    "end": "where it ends (exclusive)", "text": "the text the span covers, the shown text's [start:end]",
    "labels": "the span's label(s), several joined with '; '",
    "over_max": "the answer marks more spans with this control (and those counted with it) than the protocol allows "
                "(projects.yaml max_spans, MQM's five errors in the translation and the source; possible only in "
                "Label Studio's own editor): kept whole, flagged",
}
OTHER_COLUMN = "the annotator's answer to the control of this name (projects.yaml metadata_controls)"
COLUMN_MEANING = {
    "part": "the study's part (Label Studio project) the answer was given in",
    "task_id": "the task (one item as shown with one system's output)",
    "item_id": "the item (context) rated; several tasks share it when several systems are rated on it",
    "system": "the system whose output was rated",
    CHECK_COLUMN: "an attention check's rows (a copy of a task with a phrase of its text spoiled, which must score "
                  "lower than the original): the task it copies (its evalstudio id), else empty; checks are for "
                  "approving participants, leave them out of scores; a column only of studies with checks",
    "list": "the counterbalanced list the annotator was in",
    "annotator": "the annotator's pseudonym (a keyed hash; stable across this release's files)",
    "criterion": "the quality criterion (its definition and scale: datasheet.md, section 4)",
    "agent": "the agent rated (two-agent episodes), else empty",
    "value": "the answer as a number (float): on the criterion's scale, or for an ordinal scale with labels the "
             "label's position (1 = the first label); empty for a label of a categorical criterion (its range and "
             "labels: datasheet.md, 4.3.4)",
    "label": "the answer as a label (text), where the criterion has labels (an ordinal one's number is in value "
             "too); also any answer that is not a number where one was expected, as given; else empty",
    "rationale": "the annotator's written rationale for this rating (free text, reviewed before release)",
    "seconds": "seconds on the task (through evalstudio's gateway: measured by the server from serving it to the "
               "answer; from an MTurk batch: the assignment's WorkTimeInSeconds)",
    "rejected": "the annotator failed the study's attention checks and was rejected (their ratings are kept here; "
                "leave them out as the study's analysis did)",
    "bad_instance": "the annotator marked the item as unusable",
    "from_prediction": "the answer was made with a model's prediction shown to start from (prefill: e.g. ESA-AI's "
                       "pre-marked error spans); false: shown without it (a share of each annotator's tasks, "
                       "unassisted_share); a column only of studies with prefilled answers",
    "note": "the annotator's optional note (free text, reviewed before release)",
}


def croissant(name: str, title: str, table: pd.DataFrame, files: dict[str, Path], folder: Path, licence: str,
              spans: pd.DataFrame | None = None, span_files: dict[str, Path] | None = None) -> dict:
    """Croissant 1.0 metadata (JSON-LD) of the release: its files with their SHA-256, and the ratings' fields; with
    `spans` (and `span_files`, write_spans' files) the spans table too, a second record set."""
    def file(ident: str, path: Path, kind: str) -> dict:
        return {"@type": "cr:FileObject", "@id": ident, "name": ident, "contentUrl": path.relative_to(folder).as_posix(),
                "encodingFormat": kind, "sha256": sha256_of(path)}

    distribution = [file("ratings-csv", files["csv"], "text/csv"),
                    file("ratings-parquet", files["parquet"], "application/x-parquet")]
    records = [record_set("ratings", "one row per answer and criterion", table, "ratings-csv", COLUMN_MEANING)]
    if spans is not None and span_files:
        distribution += [file("spans-csv", span_files["spans_csv"], "text/csv"),
                         file("spans-parquet", span_files["spans_parquet"], "application/x-parquet")]
        records.append(record_set("spans", "one row per span an annotator marked in the shown text", spans,
                                  "spans-csv", {**COLUMN_MEANING, **SPAN_MEANING}, PER_REGION_COLUMN))
    return {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "name": re.sub(r"[^A-Za-z0-9_-]", "_", name) + "_ratings",
        "description": f"{title}: human ratings collected with evalstudio (protocol {name}).",
        "conformsTo": "http://mlcommons.org/croissant/1.0",
        "license": licence,
        "url": "https://example.invalid/set-the-release-address",
        "distribution": distribution,
        "recordSet": records,
    }


def record_set(ident: str, description: str, table: pd.DataFrame, source: str, meaning: dict,
               other: str = OTHER_COLUMN) -> dict:
    """A Croissant record set of one table: each column a field typed from its dtype, read from the file `source`."""
    kinds = {"int64": "sc:Integer", "Int64": "sc:Integer", "float64": "sc:Float", "bool": "sc:Boolean"}
    fields = [{"@type": "cr:Field", "@id": f"{ident}/{c}", "name": c, "description": meaning.get(c, other),
               "dataType": kinds.get(str(table[c].dtype), "sc:Text"),
               "source": {"fileObject": {"@id": source}, "extract": {"column": c}}} for c in table.columns]
    return {"@type": "cr:RecordSet", "@id": ident, "name": ident, "description": description, "field": fields}


def write_croissant(path: Path, metadata: dict) -> None:
    """Write the Croissant metadata as indented UTF-8 JSON."""
    path.write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# the JSON-LD context of Croissant 1.0, as its specification gives it
CROISSANT_CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "citeAs": "cr:citeAs", "column": "cr:column",
    "conformsTo": "dct:conformsTo", "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/", "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath", "key": "cr:key", "md5": "cr:md5", "parentField": "cr:parentField", "path": "cr:path",
    "recordSet": "cr:recordSet", "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "sc": "https://schema.org/", "separator": "cr:separator", "source": "cr:source",
    "subField": "cr:subField", "transform": "cr:transform",
}
