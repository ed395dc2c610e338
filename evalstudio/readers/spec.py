"""The analysis spec: how a ratings file made anywhere is laid out (`layout`), which columns hold what (`columns`,
with the usual names as aliases), each criterion's scale and missing codes, written as YAML by the researcher or
derived from a protocol of projects.yaml (`spec_from_protocol`). Reference: docs/reference/analysis-spec.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evalstudio.base.errors import BadInput

from .nested import Nested
from .spans import Spans

LAYOUTS = ("long", "wide_criteria", "wide_annotators", "nested")


ALIASES = {
    "item": ["item", "item_id", "segment", "segment_id", "HITId", "id"],
    "annotator": ["annotator", "worker", "WorkerId", "rater", "participant"],
    "system": ["system", "model", "sys"],
    "agent": ["agent"],
    "criterion": ["criterion", "aspect", "dimension"],
    "metric": ["metric", "judge"],
    "confidence": ["confidence", "probability"],
    "value": ["value", "rating", "score", "label"],
}


def _check_patterns(codes: list[str]) -> list[str]:
    """Missing codes written `re:PATTERN` must be regular expressions."""
    for code in codes:
        if code.startswith("re:"):
            try:
                re.compile(code[3:])
            except re.error as e:
                raise ValueError(f"missing code {code!r} is not a regular expression: {e}") from None
    return codes


class CriterionSpec(BaseModel):
    """One criterion of an analysis spec: its scale, range or labels and its missing-value codes."""
    model_config = ConfigDict(extra="forbid")

    scale: Literal["nominal", "ordinal", "interval"] = "interval"
    min: float | None = None
    max: float | None = None
    labels: list[str] | None = None
    step: float | None = Field(None, gt=0)  # numbers on min + k * step only (a protocol's Rating: whole stars)
    missing: list[str] = []
    column: str | None = None  # wide_criteria: the column holding this criterion
    min_votes: int | None = Field(None, ge=1)  # majority label: votes it needs (Circa: 3 of 5); default more than half
    # layout nested: the records this criterion is read from, by a field they have ("response") or lack
    # ("!response"), for files that hold two kinds of record (FED: turn-level and dialog-level ratings)
    where: str | None = None

    @field_validator("missing")
    @classmethod
    def _patterns(cls, value):
        return _check_patterns(value)

    @field_validator("labels", "missing", mode="before")
    @classmethod
    def _text(cls, value):
        if isinstance(value, list):
            if any(isinstance(v, bool) for v in value):
                raise ValueError("put yes/no/on/off labels in quotes ('yes'): unquoted, YAML reads them as true/false")
            return [str(v) if isinstance(v, (int, float)) else v for v in value]
        return value

    @model_validator(mode="after")
    def _check(self) -> "CriterionSpec":
        if self.labels is not None and (self.min is not None or self.max is not None):
            raise ValueError("give either min/max or labels, not both")
        if self.min is not None and self.max is not None and self.min >= self.max:
            raise ValueError("min must be < max")
        if self.scale == "interval" and self.labels is not None:
            raise ValueError("an interval criterion is numeric: give min/max, not labels")
        return self

    @property
    def numeric(self) -> bool:
        """Analysed as numbers: ordinal and interval criteria (ordinal labels become their position 1..q)."""
        return self.scale != "nominal"

    @property
    def reads_numbers(self) -> bool:
        """The file holds numbers (not labels) for this criterion."""
        return self.labels is None and (self.scale != "nominal" or self.min is not None)


class Spec(BaseModel):
    """How to read a ratings file: layout, column names, criteria with their scales, missing-value codes."""

    model_config = ConfigDict(extra="forbid")

    name: str = "ratings"
    layout: Literal["long", "wide_criteria", "wide_annotators", "nested", "pairwise", "best_worst", "spans"] = "long"
    nested: Nested | None = None  # layout nested: where item, system and the ratings are
    spans: Spans | None = None  # layout spans: MQM's TSV or ESA's export, and MQM's weights (readers.spans)
    # long layout: `label` names a second answer column, read where it is not empty (a release of `evalstudio
    # publish`: numbers in `value`, labels in `label`)
    columns: dict[Literal["item", "annotator", "system", "agent", "criterion", "value", "label", "left", "right",
                          "outcome", "best", "worst", "tuple"], str] = {}
    tuple_columns: list[str] = []  # layout best_worst: the columns holding a tuple's items (default item1, item2, ...)
    # layout pairwise: the codes of each outcome, when they are not the usual ones (`evalstudio.readers.comparisons`)
    outcomes: dict[Literal["left", "right", "tie", "both_bad"], list[str]] = {}
    # layout pairwise: shown (left and right are the sides annotators saw) or unordered (the file's order says
    # nothing about the screen, e.g. comparisons derived from rankings): then no position bias is computed
    sides: Literal["shown", "unordered"] = "shown"
    metric_columns: dict[Literal["item", "system", "metric", "criterion", "value", "confidence"], str] = {}
    criteria: dict[str, CriterionSpec] = Field(default_factory=dict)
    missing: list[str] = ["", "NA", "N/A", "NaN", "nan"]  # `re:PATTERN` entries are regular expressions

    @field_validator("missing")
    @classmethod
    def _patterns(cls, value):
        return _check_patterns(value)
    lower_is_better: list[str] = []  # metrics whose lower scores are better (distances, error rates): negated

    @model_validator(mode="after")
    def _check(self) -> "Spec":
        if self.layout == "wide_annotators" and len(self.criteria) != 1:
            raise ValueError("layout wide_annotators needs exactly one criterion in criteria")
        if self.layout in ("wide_criteria", "nested") and not self.criteria:
            raise ValueError(f"layout {self.layout} needs the criteria (their columns or keys)")
        if (self.layout == "nested") != (self.nested is not None):
            raise ValueError("layout nested and a nested: section go together (nested: says where the ratings are)")
        if self.layout == "nested" and self.columns:
            raise ValueError("layout nested takes its fields from nested:, not columns:")
        if self.spans is not None and self.layout != "spans":
            raise ValueError("spans: (format, weights) belongs to layout spans")
        if self.layout == "spans" and self.columns:
            raise ValueError("layout spans reads the columns of its format (spans.format: mqm or esa), not columns:")
        wheres = [name for name, c in self.criteria.items() if c.where is not None]
        if wheres and self.layout != "nested":
            raise ValueError(f"criteria {', '.join(wheres)}: where: selects records of layout nested only")
        pairwise_only = {"left", "right", "outcome"} & set(self.columns)
        if pairwise_only and self.layout != "pairwise":
            raise ValueError(f"columns {', '.join(sorted(pairwise_only))} belong to layout pairwise")
        best_worst_only = {"best", "worst", "tuple"} & set(self.columns)
        if (best_worst_only or self.tuple_columns) and self.layout != "best_worst":
            raise ValueError("columns best, worst, tuple and tuple_columns belong to layout best_worst")
        if self.outcomes and self.layout != "pairwise":
            raise ValueError("outcomes belong to layout pairwise")
        if self.sides != "shown" and self.layout != "pairwise":
            raise ValueError("sides belongs to layout pairwise")
        return self


def read_spec(path: Path) -> Spec:
    """The analysis spec read from a YAML file, every problem named with its place."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as e:
        raise BadInput(f"{path}: cannot read the spec: {str(e).splitlines()[0][:200]}") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: a spec is a mapping (layout, columns, criteria, missing)")
    try:
        return Spec.model_validate(raw)  # not Spec(**raw): YAML keys need not be text ("?" is {None: None})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        raise BadInput(f"{path}: {where}: {first['msg']}") from None


def spec_from_protocol(project) -> Spec:
    """A protocol's criteria (projects.yaml) as a spec for ratings collected with it elsewhere, with the step its
    controls allow (a Rating's whole stars, a Number's step; none where any decimal is allowed)."""
    from evalstudio.values.controls import control_step

    criteria = {}
    for name, c in project.criteria.items():
        steps = {control_step(project.interface.get_control(control)) for _, control in project.controls(name)
                 if project.interface.get_control(control).tag in ("Number", "Rating")}
        step = steps.pop() if len(steps) == 1 else None
        criteria[name] = CriterionSpec(scale=c.scale, min=c.min, max=c.max, labels=c.labels, missing=c.missing,
                                       step=step if c.labels is None else None)
    return Spec(name=project.name, criteria=criteria)
