"""The instrument of a study as a package another lab can run again (`evalstudio publish`, `evalstudio reproduce`).

instrument/
  projects.yaml               the study's entries, config paths beside it; a Prolific completion code left out
  labeling_configs/*.xml      the labeling configs, as projects.yaml names them
  instructions/<part>.<channel>.html  the instructions as annotators of each channel get them (label-studio:
                              Label Studio itself; gateway: the participant gateway); a channel that shows none
                              (its instructions are the config's own panels) gets no file: README.md says so
  tasks.jsonl                 every task: {"entry", "project", "data": the fields annotators see (and the ids),
                              "meta": the design (system, part) and gold answers; no model output or rating}
  order.json                  each part's order scheme and its tasks in Label Studio's order; per pseudonymous
                              participant the tasks in the order served and their list
MANIFEST.json                 SHA-256 of every file above, and of every text annotators saw: each part's labeling
                              config and instructions, and each task's shown fields (canonical JSON)

The order seed of the study (its salt) is not in the package: with the served orders beside it, anyone holding a
list of candidate platform ids could recompute each candidate's order and link a pseudonym to a person. A
reproduction draws its own.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evalstudio.base.errors import BadInput, Problem
from evalstudio.values.results import ID_FIELD

MANIFEST = "MANIFEST.json"
INSTRUMENT = "instrument"
ENTRY_FIELD = "entry"
PROJECT_FIELD = "project"  # the project (a list's project for counterbalanced lists) the task is in


def canonical(value) -> str:
    """A value as canonical JSON (sorted keys, no spaces), the form its digest is taken of."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha256_text(text: str) -> str:
    """The SHA-256 of a text's UTF-8 bytes, in hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


CHANNEL_NAMES = {"label-studio": "Label Studio itself", "gateway": "evalstudio's participant gateway"}


def instruction_file(entry: str, channel: str, text: str) -> str | None:
    """The file name under instructions/ of what `channel` shows of an entry's instructions; None when it shows
    nothing (no text outside tags and comments: the channel's annotators read the labeling config's own texts)."""
    import re

    visible = re.sub(r"<!--.*?-->|<[^>]*>", "", text, flags=re.S).strip()
    return f"{entry}.{channel}.html" if visible else None


def instructions_readme(files: dict[str, dict[str, str | None]], configs: dict[str, str], used: str) -> str:
    """instructions/README.md: per entry and channel the file of its instructions, or why there is none;
    `used`: the channel this study's annotators used."""
    rows = ["| part | " + " | ".join(CHANNEL_NAMES.values()) + " |", "|---|" + "---|" * len(CHANNEL_NAMES)]
    for entry, per_channel in files.items():
        cells = [f"`{per_channel[c]}`" if per_channel.get(c) else
                 f"none: the labeling config's own texts and panels (`../{configs[entry]}`)" for c in CHANNEL_NAMES]
        rows.append(f"| {entry} | " + " | ".join(cells) + " |")
    return ("# Instructions\n\nWhat annotators read besides the labeling config, per part and per channel, as "
            "evalstudio sends it: an element of projects.yaml's instructions marked for one channel "
            "(`data-channel`) is shown in that channel only. The labeling configs (`../labeling_configs/`) hold "
            f"the texts shown with every task. This study's annotators used {CHANNEL_NAMES[used]}.\n\n"
            + "\n".join(rows) + "\n")


def package_task(project, task: dict) -> dict:
    """One task of the package: its shown fields (and ids) as data, its design and gold answers as meta."""
    data = task.get("data") or {}
    meta = task.get("meta") or {}
    model = {(c.model_output or "").split(".")[0] for c in project.criteria.values()} | {
        (c.model_rationale or "").split(".")[0] for c in project.criteria.values()}
    kept = {k: v for k, v in meta.items() if not k.startswith("model_") and k not in model}
    return {ENTRY_FIELD: project.entry, PROJECT_FIELD: project.name, "data": data, "meta": kept}


def shown_digest(project, data: dict) -> str:
    """SHA-256 of the fields of a task annotators see (canonical JSON)."""
    fields = project.data_fields()
    return sha256_text(canonical({k: data[k] for k in sorted(fields) if k in data}))


def entries_yaml(raw_entries: dict, configs: dict[str, str]) -> str:
    """The study's projects.yaml entries for the package: configs beside it, no completion code."""
    import yaml

    entries = json.loads(json.dumps(raw_entries))  # a deep copy of plain values
    for name, entry in entries.items():
        entry["config"] = configs[name]
        crowd = entry.get("crowd")
        if isinstance(crowd, dict) and crowd.get("completion_code"):
            crowd["completion_code"] = None  # a secret of the original study: set your own
    header = ("# The study's entries of projects.yaml, as published by `evalstudio publish`; config paths are "
              "relative to this file.\n# crowd.completion_code is left out: set your own before running it.\n")
    return header + yaml.safe_dump({"projects": entries}, sort_keys=False, allow_unicode=True, width=120)


def write_manifest(folder: Path, shown: dict[str, str], protocol: str) -> dict:
    """MANIFEST.json: the SHA-256 of every file of instrument/ and of every text annotators saw."""
    files = {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted((folder / INSTRUMENT).rglob("*")) if p.is_file()}
    manifest = {"format": "evalstudio instrument 1", "protocol": protocol, "files": files,
                "shown": dict(sorted(shown.items()))}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def check_package(folder: Path) -> dict:
    """The package's manifest, once every file it names is there with the same SHA-256 and instrument/ holds no
    other file; BadInput naming each file that differs (a changed instruction is a different instrument)."""
    path = folder / MANIFEST
    if not path.is_file():
        raise BadInput(f"{folder}: no {MANIFEST}; give the folder `evalstudio publish` wrote")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = dict(manifest["files"])
        str(manifest["protocol"])
    except (ValueError, KeyError, TypeError) as e:
        raise BadInput(f"{path}: not a manifest evalstudio wrote ({e})") from None
    problems = []
    for name, digest in files.items():
        try:
            target = (folder / name).resolve()
        except (ValueError, OSError):  # e.g. a NUL in the name
            problems.append(f"{path}: {name!r}: not a file name")
            continue
        if not target.is_relative_to(folder.resolve()) or ".." in Path(name).parts:
            problems.append(f"{path}: {name}: outside the package")
        elif not target.is_file():
            problems.append(f"{folder / name}: missing (the manifest lists it)")
        elif hashlib.sha256(target.read_bytes()).hexdigest() != digest:
            problems.append(f"{folder / name}: differs from the published instrument (its SHA-256 is not the "
                            "manifest's): restore the published file, or publish your changed instrument as a new one")
    present = {p.relative_to(folder).as_posix() for p in (folder / INSTRUMENT).rglob("*") if p.is_file()}
    problems += [f"{folder / name}: not in the published instrument (the manifest does not list it)"
                 for name in sorted(present - set(files))]
    if problems:
        raise BadInput("the instrument does not match its manifest:\n" + "\n".join(problems))
    return manifest


class PackageImporter:
    """An importer (importers/__init__.py's interface) for instrument/tasks.jsonl: each line's entry, data and
    meta become one task of that entry, as the original had it."""

    NAME = "instrument"
    FIELDS = frozenset({ENTRY_FIELD, PROJECT_FIELD, "data", "meta"})

    @staticmethod
    def prepare(paths):
        """No context to prepare: the files as given."""
        return {}, list(paths)

    @staticmethod
    def read(path: Path):
        """The package's tasks.jsonl, one record per line."""
        from evalstudio.values.sources import read_jsonl

        yield from read_jsonl(path)

    @staticmethod
    def convert(record: dict, project, context) -> list[dict]:
        """The record's task (data and meta) when it belongs to this project, as publish wrote it."""
        from evalstudio.values.sources import FieldError

        if record.get(PROJECT_FIELD) != project.name:  # another part's (or list's) task
            return []
        data, meta = record.get("data"), record.get("meta")
        if not isinstance(data, dict) or not isinstance(meta, dict):
            raise FieldError("data", "expected {\"entry\", \"data\": {...}, \"meta\": {...}} as publish writes")
        if ID_FIELD not in data:
            raise FieldError(f"data.{ID_FIELD}", "missing: every published task carries its id")
        return [{**meta, **data}]


def order_problems(expected: dict[str, list[str]], actual: dict[str, list[str]]) -> list[Problem]:
    """Parts whose tasks are not in the published order (Label Studio's task order, which sequential parts show)."""
    return [Problem(part, None, "order", f"{len(actual.get(part, []))} task(s) in another order than the "
                                         f"published {len(ids)}")
            for part, ids in expected.items() if actual.get(part) != ids]
