"""Protocols as data: a projects.yaml entry's `input:` block maps the fields of its input files to the labeling
config's $variables, so a new protocol needs a YAML entry and an XML file, no Python.

    input:
      formats: [jsonl, csv]                 # which files it reads (default: jsonl, json (an array), csv, tsv, parquet)
      expand: responses                     # optional: a list field; one task per element (paths `each.X` in it)
      item_id: id                           # a path, or a list of paths hashed into one id (default: hash of data)
      system: each.system                   # hidden: the system whose output is rated
      data: {context: context, response: each.text}       # config variable -> path: what annotators see
      meta: {model_ratings.quality: each.score?}          # hidden, for the analysis; `?`: may be missing
      fixed: {missing: "[MISSING]"}         # shown, the same text in every task; a record's own field must match
      candidates:                           # pairwise and best-worst: outputs shown together, in random order
        source: responses                   # a list field, one candidate per element ...
        system: system                      #   ... its system name and the fields shown (FIELD_a, FIELD_b, ...)
        fields: {response: text}
        each: [{system: model_a, response: response_a}, {system: model_b, response: response_b}]   # ... or fixed
        per_task: 2                         # 2: every pair of candidates; 3 or more: balanced best-worst tuples
        per_item: 8                         # best-worst: tuples each candidate is in (default 2 x per_task)

Paths are field names, dotted into nested objects and lists (`turns.0.text`); a CSV column named with dots is
found as it is. The order of the candidates on screen is drawn per task from the task's content (the same on
every run, so a re-import finds the same tasks) and kept hidden in the task's meta (`candidates`, in the order
shown), with the systems. This module knows nothing of Label Studio: the registry checks an entry against the
XML, and `importing` runs the importer this module builds like any other.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalstudio.base.errors import Problem
from evalstudio.values.results import dotted_get
from evalstudio.values.sources import (
    FieldError,
    RecordInvalid,
    attempt,
    control_value,
    format_suffix,
    no_context,
    read_json,
    read_jsonl,
    read_table,
    stable_id,
)

FORMATS = {"jsonl": (".jsonl", ".ndjson"), "json": (".json",), "csv": (".csv",), "tsv": (".tsv", ".tab"),
           "parquet": (".parquet",), "mqm": (".tsv",)}
PATH = re.compile(r"^(each\.)?[^.\s?][^.?]*(\.[^.?]+)*\??$")
POSITIONS = string.ascii_lowercase[:10]  # a, b, c, ...: FIELD_a is shown first (left), FIELD_b second, ...
# Tags that show a list or an object as it is; every other tag is given text.
STRUCTURED_TAGS = {"Paragraphs", "Table", "List", "Ranker", "TimeSeries"}


def _check_path(path: str, where: str, each: bool) -> None:
    if not isinstance(path, str) or not PATH.fullmatch(path):
        raise ValueError(f"{where}: '{path}' is not a path (field names joined by dots, e.g. turns.0.text; "
                         "`?` at the end: may be missing)")
    if path.startswith("each.") and not each:
        raise ValueError(f"{where}: '{path}' names `each.`, an element of the expanded list, but nothing is "
                         "expanded (give expand: or candidates.source:)")


class Candidates(BaseModel):
    """Outputs shown together in one task (pairwise: 2, best-worst: 3 or more), their order drawn per task."""

    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    system: str = "system"
    fields: dict[str, str] = {}
    each: list[dict[str, str]] | None = None
    per_task: int = Field(default=2, ge=2, le=len(POSITIONS))
    per_item: int | None = Field(default=None, ge=1, le=100)

    @model_validator(mode="after")
    def _check(self):
        if (self.source is None) == (self.each is None):
            raise ValueError("give source (a list field, one candidate per element) or each (the fixed candidates)")
        if self.source is not None:
            _check_path(self.source, "source", False)
            if not self.fields:
                raise ValueError("fields: name the fields shown of each candidate, e.g. {response: text}")
            for name, path in {"system": self.system, **self.fields}.items():
                _check_path(path, f"fields.{name}" if name != "system" else "system", False)
        else:
            if len(self.each) < 2:
                raise ValueError("each lists two or more candidates")
            shapes = {frozenset(c) for c in self.each}
            if len(shapes) > 1 or any("system" not in c for c in self.each):
                raise ValueError("each: every candidate names its system and the same shown fields")
            if len(self.each[0]) < 2:
                raise ValueError("each: every candidate names its system and at least one shown field")
            for i, candidate in enumerate(self.each):
                for name, path in candidate.items():
                    _check_path(path, f"each[{i}].{name}", False)
            if self.per_task > len(self.each):
                raise ValueError(f"per_task is {self.per_task} but each lists {len(self.each)} candidates")
        for name in self.shown_fields:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"'{name}' is not a field name for the labeling config (letters, digits, _)")
        if self.per_item is not None and self.per_task == 2:
            raise ValueError("per_item is for best-worst tuples (per_task 3 or more); pairs are all pairs")
        return self

    @property
    def shown_fields(self) -> list[str]:
        """The fields shown of each candidate (without the position suffix)."""
        return list(self.fields) if self.source is not None else [k for k in self.each[0] if k != "system"]

    def variables(self) -> list[str]:
        """The config variables the candidates fill: FIELD_a, FIELD_b, ... per shown field."""
        return [f"{name}_{p}" for name in self.shown_fields for p in POSITIONS[:self.per_task]]


class InputMap(BaseModel):
    """How a projects.yaml entry reads its input files (see the module's documentation)."""

    model_config = ConfigDict(extra="forbid")
    # mqm: the MQM TSV of google/wmt-mqm-human-evaluation, one record per translated segment (values.mqm_records)
    formats: list[Literal["jsonl", "json", "csv", "tsv", "parquet", "mqm"]] = ["jsonl", "json", "csv", "tsv", "parquet"]
    expand: str | None = None
    item_id: str | list[str] | None = None
    system: str | None = None
    data: dict[str, str] = {}
    meta: dict[str, str] = {}
    fixed: dict[str, str] = {}  # config variable -> a text every task shows (ESA's [MISSING], named by the instructions)
    candidates: Candidates | None = None

    @model_validator(mode="after")
    def _check(self):
        if self.expand and self.candidates:
            # each element would repeat the record's candidates: the same tasks again
            raise ValueError("expand and candidates both decide a record's tasks; give one")
        each = bool(self.expand)
        if self.expand:
            _check_path(self.expand, "expand", False)
        ids = [self.item_id] if isinstance(self.item_id, str) else self.item_id or []
        for path in ids:
            _check_path(path, "item_id", each)
        if self.system:
            _check_path(self.system, "system", each)
            if self.candidates:
                raise ValueError("system: with candidates every candidate names its own system")
        for group in ("data", "meta"):
            for name, path in getattr(self, group).items():
                _check_path(path, f"{group}.{name}", each)
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*" + (r"(\.[A-Za-z_][A-Za-z0-9_]*)*" if group == "meta"
                                                                 else ""), name):
                    raise ValueError(f"{group}.{name}: not a field name (letters, digits, _"
                                     + ("; dots make nested fields" if group == "meta" else "") + ")")
        if twice := sorted(set(self.fixed) & set(self.data)):
            raise ValueError(f"fixed.{twice[0]}: also in data: a shown field is read from the record or fixed, not both")
        reserved = {"evalstudio_id", "item_id", "system", "candidates"}
        taken = sorted(reserved & ({k.split(".")[0] for k in self.meta} | set(self.data) | set(self.fixed)))
        if taken:
            raise ValueError(f"{', '.join(taken)}: set by evalstudio (item_id:, system:, candidates:); "
                             "use another name")
        return self

    def _paths(self) -> list[str]:
        """Every path the mapping reads (record paths, and `each.` paths into an expanded element)."""
        paths = [self.expand, self.system, *(self.data.values()), *(self.meta.values())]
        paths += [self.item_id] if isinstance(self.item_id, str) else self.item_id or []
        if self.candidates:
            paths += [self.candidates.source] if self.candidates.source else [
                p for c in self.candidates.each for p in c.values()]
        return [p.removesuffix("?") for p in paths if p]

    def fields(self) -> frozenset[str]:
        """The top-level record fields the mapping reads (any other is kept as the researcher's metadata)."""
        return frozenset(p.split(".")[0] for p in self._paths() if not p.startswith("each.")) | set(self.fixed)

    def element_fields(self) -> frozenset[str]:
        """The fields of an expanded element the mapping reads (`each.X`); any other is kept, under `element`."""
        return frozenset(p[5:].split(".")[0] for p in self._paths() if p.startswith("each."))


class Missing(Exception):
    """A field a protocol defined as data reads is not in the record."""
    pass


def lookup(record, path: str, element=None):
    """The value at `path` (dotted; `each.` starts in `element`); FieldError when missing unless it ends in `?`
    (then None). A key holding the dots itself (a CSV column `a.b`) is found first."""
    optional = path.endswith("?")
    path = path.removesuffix("?")
    value, rest = (element, path[5:]) if path.startswith("each.") else (record, path)
    try:
        value = _descend(value, rest)
    except Missing:
        if optional:
            return None
        raise FieldError(path, "missing") from None
    if value is None and not optional:
        raise FieldError(path, "missing (null)")
    return value


def _descend(value, rest: str):
    while rest:
        if isinstance(value, dict) and rest in value:
            return value[rest]
        head, _, rest = rest.partition(".")
        if isinstance(value, dict) and head in value:
            value = value[head]
        elif isinstance(value, list) and head.isdigit() and int(head) < len(value):
            value = value[int(head)]
        else:
            raise Missing
    return value


def _set(target: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value


def _text_id(value, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FieldError(path.removesuffix("?"), f"expected text or a number, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise FieldError(path.removesuffix("?"), "is empty")
    return text


class MappingImporter:
    """The importer of one projects.yaml entry with `input:`, with the interface of an importer module (NAME,
    FIELDS, prepare, read, convert), so every guarantee of the import (file:line problems, nothing half-imported,
    --skip-invalid, streaming, resume) holds for it unchanged."""

    def __init__(self, project):
        self.project = project
        self.spec: InputMap = project.input
        self.NAME = project.entry
        self.FIELDS = self.spec.fields()
        self._element_fields = self.spec.element_fields()  # (read once: _task runs per task)
        self._tags = {o.value_name: o.tag for o in project.interface.objects if o.value_is_variable}

    prepare = staticmethod(no_context)  # no cross-file context, like most importer modules

    def read(self, path: Path) -> Iterator[tuple[int, dict | Problem]]:
        """(line, record or Problem) of an input file in one of the formats `input.formats` allows."""
        suffix = format_suffix(path)  # a gzipped file (data.tsv.gz) is read as its inner suffix says
        kind = next((k for k, suffixes in FORMATS.items() if suffix in suffixes), None)
        if kind == "tsv" and "mqm" in self.spec.formats:  # one record per translated segment, not per error row
            from evalstudio.values.mqm_records import mqm_segments

            yield from mqm_segments(path, self.FIELDS)
            return
        if kind not in self.spec.formats:
            allowed = ", ".join(s for k in self.spec.formats for s in FORMATS[k])
            yield 0, Problem(str(path), None, None, f"the {self.NAME} protocol reads {allowed} files (input.formats; "
                                                    "gzipped too, e.g. .jsonl.gz)")
            return
        if kind == "parquet" and suffix != path.suffix.lower():
            yield 0, Problem(str(path), None, None, "a Parquet file is compressed already: give it unzipped (.parquet)")
            return
        if kind == "jsonl":
            yield from read_jsonl(path)
        elif kind == "json":
            yield from read_json(path)
        elif kind in ("csv", "tsv"):
            yield from read_table(path, "," if kind == "csv" else "\t")
        else:
            yield from _read_parquet(path)

    # ---- one record -> its tasks ----------------------------------------------------------------------------------

    def convert(self, record: dict, project, context) -> list[dict]:
        """The tasks of one record as the mapping says (one per element of `expand:`), or its field errors."""
        spec, errors = self.spec, []
        elements = [None]
        if spec.expand:
            elements = lookup(record, spec.expand)
            if not isinstance(elements, list) or not elements:
                raise FieldError(spec.expand, "expected a non-empty list (expand:)")
        tasks = []
        for i, element in enumerate(elements):
            where = f"{spec.expand}[{i}]" if spec.expand else None
            task = attempt(errors, self._task, record, element, where)
            if task is not None:
                tasks.extend(task)
        if errors:
            raise RecordInvalid(errors)
        return tasks

    def _task(self, record: dict, element, where: str | None) -> list[dict]:
        spec, errors = self.spec, []

        def get(path):
            try:
                return lookup(record, path, element)
            except FieldError as e:
                if where and path.startswith("each."):
                    raise FieldError(f"{where}.{path[5:].removesuffix('?')}", e.message) from None
                raise

        shown = {}
        for name, path in spec.data.items():
            value = attempt(errors, get, path)
            if value is not None:
                shown[name] = attempt(errors, self._shown, name, value, path)
        for name, text in spec.fixed.items():  # a record may leave it out; its own other text is refused
            if record.get(name, text) != text:
                errors.append(FieldError(name, f"{str(record[name])[:40]!r}: this protocol shows {text!r} here, the "
                                               f"word its instructions name; give {text!r} or leave the field out"))
            shown[name] = text
        hidden = {}
        for name, path in spec.meta.items():
            value = attempt(errors, get, path)
            if value is not None:
                _set(hidden, name, value)
        system = attempt(errors, lambda: _text_id(get(spec.system), spec.system)) if spec.system else None
        candidates = attempt(errors, self._candidates, record) if spec.candidates else None
        if errors:
            raise RecordInvalid(errors)
        item_id = self._item_id(get, shown, candidates)
        if isinstance(element, dict):  # an element's fields the mapping does not read are kept too (as a record's
            # are): USR's published ratings of each response, say, stay with the response's task
            kept = {k: v for k, v in element.items() if k not in self._element_fields}
            if kept and "element" not in hidden:
                hidden["element"] = kept
        base = {**hidden, "item_id": item_id}
        attempt(errors, self._model_outputs, base)
        if errors:
            raise RecordInvalid(errors)
        if candidates is None:
            key = stable_id(item_id, system if system is not None else shown)
            return [{**base, **shown, "evalstudio_id": f"{self.NAME}-{item_id}:{key}",
                     **({"system": system} if system is not None else {})}]
        return [{**base, **shown, **task} for task in self._shown_candidates(item_id, candidates)]

    def _shown(self, name: str, value, path: str):
        """A value as its tag shows it: text (a number becomes text) or, for Paragraphs and the like, as it is."""
        if self._tags.get(name) in STRUCTURED_TAGS:
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise FieldError(path.removesuffix("?"), f"the labeling config shows ${name} as text, but this is a "
                                                     f"{type(value).__name__} (map a text field, or show it with a "
                                                     "<Paragraphs> tag)")
        return str(value)

    def _item_id(self, get, shown: dict, candidates) -> str:
        ids = self.spec.item_id
        if ids is None:
            return stable_id(shown, sorted(c[0] for c in candidates) if candidates else None)
        if isinstance(ids, str):
            return _text_id(get(ids), ids)
        return stable_id([_text_id(get(p), p) for p in ids])

    def _model_outputs(self, task: dict) -> None:
        """Model outputs named by the criteria (model_output) are checked against their controls, like an
        importer's model ratings: a value that does not fit the annotators' scale is a problem, never rescaled."""
        errors = []
        for slot in self.project.slots():
            if not slot.model_output:
                continue
            value = dotted_get(task, slot.model_output)  # read as the analysis reads it (exporters.tables.tidy.model_frame)
            if value is not None:
                checked = attempt(errors, control_value, slot.model_output, value, self.project, slot.control)
                if checked is not None:
                    _set(task, slot.model_output, checked)
        if errors:
            raise RecordInvalid(errors)

    def _candidates(self, record: dict) -> list[tuple[str, dict]]:
        """(system, {shown field: value}) of every candidate of the record."""
        c, errors, out = self.spec.candidates, [], []
        if c.source is not None:
            elements = lookup(record, c.source)
            if not isinstance(elements, list):
                raise FieldError(c.source, "expected a list of candidates")
            groups = [({"system": c.system, **c.fields}, element, f"{c.source}[{i}].")
                      for i, element in enumerate(elements)]
        else:
            groups = [(candidate, None, "") for candidate in c.each]
        for paths, element, prefix in groups:
            def one(paths=paths, element=element, prefix=prefix):
                def get(path):
                    try:
                        return lookup(element if element is not None else record, path)
                    except FieldError as e:
                        raise FieldError(prefix + e.field, e.message) from None
                system = _text_id(get(paths["system"]), prefix + paths["system"])
                fields = {name: self._shown(f"{name}_a", get(path), prefix + path)
                          for name, path in paths.items() if name != "system"}
                return system, fields
            got = attempt(errors, one)
            if got is not None:
                out.append(got)
        if errors:
            raise RecordInvalid(errors)
        systems = [s for s, _ in out]
        repeated = sorted({s for s in systems if systems.count(s) > 1})
        if repeated:
            raise FieldError(c.source or "each", f"system {repeated[0]!r} is among the candidates twice")
        if len(out) < c.per_task:
            raise FieldError(c.source or "each", f"{len(out)} candidate(s); a task shows {c.per_task}")
        return out

    def _shown_candidates(self, item_id: str, candidates: list[tuple[str, dict]]) -> list[dict]:
        """One task per pair (per_task 2) or balanced best-worst tuple, the candidates in an order drawn from the
        task's content; `candidates` (hidden) lists the systems in the order shown."""
        c = self.spec.candidates
        by_system = dict(candidates)
        systems = sorted(by_system)
        if c.per_task == 2:
            groups = list(combinations(systems, 2))
        elif len(systems) == c.per_task:
            groups = [tuple(systems)]
        else:
            from evalstudio.stats.preference import bws_tuples

            per_item = c.per_item or 2 * c.per_task
            if (len(systems) * per_item) % c.per_task:
                raise FieldError(c.source or "each", f"{len(systems)} candidates x per_item {per_item} is not a "
                                                     f"whole number of tuples of {c.per_task}; change per_item")
            try:
                groups = bws_tuples(systems, c.per_task, per_item, seed=int(stable_id(item_id, "design"), 16) % 2**32)
            except ValueError as e:
                raise FieldError(c.source or "each", str(e)) from None
        tasks = []
        for number, group in enumerate(groups):
            order = sorted(group)
            random.Random(stable_id(item_id, order, "order")).shuffle(order)
            task = {"evalstudio_id": f"{self.NAME}-{item_id}:{stable_id(item_id, sorted(group), number)}",
                    "candidates": order}
            for position, system in zip(POSITIONS, order):
                for name, value in by_system[system].items():
                    task[f"{name}_{position}"] = value
            tasks.append(task)
        return tasks


def _read_parquet(path: Path) -> Iterator[tuple[int, dict | Problem]]:
    """Rows of a Parquet file, a batch at a time; `line` is the row number (1-based)."""
    try:
        import pyarrow.parquet as pq

        reader = pq.ParquetFile(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises its own error types for unreadable files
        yield 0, Problem(str(path), None, None, f"not a readable Parquet file ({type(e).__name__})")
        return
    row = 0
    try:
        for batch in reader.iter_batches(batch_size=1024):
            for record in batch.to_pylist():
                row += 1
                yield row, record
    except Exception as e:  # noqa: BLE001
        yield row + 1, Problem(str(path), row + 1, None, f"unreadable Parquet row group ({type(e).__name__})")
        return
    if row == 0:
        yield 0, Problem(str(path), None, None, "file is empty: no records")


def check_against_config(project) -> list[str]:
    """An entry's `input:` against its labeling config: every $variable is filled, every mapped field is shown."""
    spec: InputMap = project.input
    shown = set(project.data_fields())
    filled = set(spec.data) | set(spec.fixed) | set(spec.candidates.variables() if spec.candidates else [])
    problems = []
    for name in sorted(shown - filled - {"evalstudio_id", "item_id"}):
        problems.append(f"input: the labeling config shows ${name} but nothing fills it; map it in input.data"
                        + (f" (candidates fill {', '.join(spec.candidates.variables())})" if spec.candidates else ""))
    for name in sorted((set(spec.data) | set(spec.fixed)) - shown):
        problems.append(f"input.data.{name}: the labeling config shows no ${name}; a hidden field belongs in "
                        "input.meta")
    if spec.candidates:
        for name in sorted(set(spec.candidates.variables()) - shown):
            problems.append(f"input.candidates: the labeling config shows no ${name} (per_task "
                            f"{spec.candidates.per_task}: {', '.join(spec.candidates.variables())})")
    return problems


def importer_for(project):
    """The importer of a project: its Python module (`importer:`, importers/NAME.py) or the mapping its entry
    describes (`input:`, a protocol defined as data)."""
    if project.input is not None:
        return MappingImporter(project)
    from evalstudio import importers

    return importers.get(project.importer)
