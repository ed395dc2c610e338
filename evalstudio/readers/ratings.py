"""Ratings and metric scores from files made anywhere (MTurk, Prolific/Qualtrics, published datasets) as the tidy
frame the analysis reads: `project, item, system, agent, annotator, criterion, value, line`.

Ratings: CSV, JSONL or Parquet, in one of three layouts (a spec says which; without one the long layout with
the usual column names is assumed):
  long             one row per rating: item, annotator, [criterion], value [, system, agent]
  wide_criteria    one row per (item, annotator): one column per criterion
  wide_annotators  one row per item: one column per annotator (a single criterion)
  nested           JSON records holding lists of ratings per criterion, e.g. a context with its responses
                   (`evalstudio.readers.nested`: the spec's `nested:` says where item, system and ratings are)
  pairwise         one row per comparison of two systems (`evalstudio.readers.comparisons`), analysed by
                   `exporters.analyses.preference` instead
  best_worst       one row per annotated tuple: item1..itemN, best, worst (`evalstudio.readers.comparisons`), likewise
Metrics: item, [system], metric, [criterion], value (a metric without criterion is compared with every criterion).
An Amazon MTurk batch results file (HITId, WorkerId, AssignmentStatus, Answer.* columns) is read as it is downloaded;
its rejected assignments are left out, as MTurk pays and counts only the others. An evalstudio export's attention
checks (rows with an `attention_check_of`: spoiled copies of tasks, protocols/attention.py) are left out too.

Every problem is reported as `file:line: column: message` and nothing is analysed when any is found.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from evalstudio.base.errors import BadInput, InvalidInput, Problem, Problems
from evalstudio.base.memory import release_freed_memory
from evalstudio.stats.keys import duplicated_keys

from .nested import read_nested
from .spec import ALIASES, CriterionSpec, Spec
from .tables import read_table


def find_column(frame: pd.DataFrame, given: dict, role: str, required: bool, path: Path,
                aliases: dict[str, list[str]] = ALIASES) -> str | None:
    """The column of `role`: the one the spec names (`given`), else the first of its usual names (`aliases`);
    InvalidInput when a named one is missing or a required one is not found."""
    if role in given:
        if given[role] not in frame.columns:
            raise InvalidInput([Problem(str(path), 1, given[role], f"no such column (columns: {', '.join(map(str, frame.columns[:20]))})")],
                               "nothing was analysed")
        return given[role]
    for name in aliases[role]:
        if name in frame.columns:
            return name
    if required:
        raise InvalidInput([Problem(str(path), 1, role, f"no {role} column: name it one of {', '.join(aliases[role])} "
                                                        f"or map it in the spec's columns (columns: {', '.join(map(str, frame.columns[:20]))})")],
                           "nothing was analysed")
    return None


def _long(frame, lines, spec: Spec, path: Path) -> pd.DataFrame:
    """The table in long layout: item, annotator, criterion, value, system, agent, line (text)."""
    c = spec.columns
    item = find_column(frame, c, "item", True, path)
    system = find_column(frame, c, "system", False, path)
    agent = find_column(frame, c, "agent", False, path)
    base = {"item": frame[item], "system": frame[system] if system else "", "agent": frame[agent] if agent else ""}
    if spec.layout == "wide_annotators":
        (criterion,) = spec.criteria
        used = {item, system, agent}
        annotators = [col for col in frame.columns if col not in used]
        if not annotators:
            raise InvalidInput([Problem(str(path), 1, None, "no annotator columns")], "nothing was analysed")
        parts = [pd.DataFrame({**base, "annotator": str(a), "criterion": criterion, "value": frame[a], "line": lines})
                 for a in annotators]
        return pd.concat(parts, ignore_index=True)
    annotator = find_column(frame, c, "annotator", True, path)
    base["annotator"] = frame[annotator]
    if spec.layout == "wide_criteria":
        parts = []
        for name, crit in spec.criteria.items():
            col = crit.column or name
            if col not in frame.columns:
                raise InvalidInput([Problem(str(path), 1, col, f"no column for criterion '{name}'")], "nothing was analysed")
            parts.append(pd.DataFrame({**base, "criterion": name, "value": frame[col], "line": lines}))
        return pd.concat(parts, ignore_index=True)
    value = find_column(frame, c, "value", True, path)
    criterion = find_column(frame, c, "criterion", False, path)
    if criterion is None:
        if len(spec.criteria) > 1:
            raise InvalidInput([Problem(str(path), 1, "criterion", "several criteria in the spec but no criterion "
                                                                   "column")], "nothing was analysed")
        crit = next(iter(spec.criteria), value)
    answers = frame[value]
    if "label" in c:  # a label where given, else the number (a release of `evalstudio publish`)
        label = frame[find_column(frame, c, "label", True, path)]
        answers = label.where(label.astype(str).str.strip() != "", answers)
    return pd.DataFrame({**base, "criterion": frame[criterion] if criterion else crit, "value": answers,
                         "line": lines})


def _parse_numbers(text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(values, ok): plain decimal numbers only. pandas' C parser refuses '1_0', non-ASCII digits ('٧'), hex and
    '1,5' (the tests pin this); infinities and NaN are refused here. Arrow's cast reads a column of which every
    value is a plain number at once (it refuses the column at the first that is not); otherwise pandas tells which
    values are numbers, and Python reads them. Both round correctly ('+10E31' is 1e32; pandas alone is one unit in
    the last place off there); tests/test_reading_files.py checks they agree with reading each value alone."""
    try:
        values = pc.cast(pa.array(text, type=pa.large_string(), from_pandas=True), pa.float64()).to_numpy(
            zero_copy_only=False) + 0.0  # + 0.0: '-0' is 0
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        given = text.to_numpy(dtype=object)
        values = pd.to_numeric(pd.Series(given), errors="coerce").to_numpy(dtype=float, copy=True)
        for i in np.flatnonzero(~np.isnan(values)):
            values[i] = float(given[i]) + 0.0
    return values, np.isfinite(values)


def duplicated_rows(table: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """`table.duplicated(keys)` (the first of equal rows is not a duplicate), from one integer per row: each column
    is factorized and the codes are combined, factorized again before the combination could overflow."""
    key, size = np.zeros(len(table), dtype=np.int64), 1
    for col in keys:
        codes, uniques = pd.factorize(table[col])
        if size * max(1, len(uniques)) >= 2**62:
            key, seen = pd.factorize(key)
            size = max(1, len(seen))
        key, size = key * max(1, len(uniques)) + codes, size * max(1, len(uniques))
    return duplicated_keys(key, size)


def missing_hint(value: str) -> str:
    """How to declare a value as "no rating", in words that match it: a code with the annotator's reason after it
    ("N/A (I can't tell)") needs a pattern, which the plain code ('N/A') would not match."""
    import re

    text = str(value).strip()
    coded = re.fullmatch(r"(.*?\S)\s*\(.*\)", text, flags=re.S)
    if coded and len(coded.group(1)) <= 20:
        pattern = f"re:{re.escape(coded.group(1))}( \\(.*\\))?"
        return f"if it means no rating, declare it as missing, e.g. missing: ['{pattern}'] (it and the plain code)"
    return f"if it means no rating, declare it as missing, e.g. missing: ['{text[:20]}']"


def missing_codes(text: pd.Series, codes: list[str], matched: dict[str, int] | None = None) -> np.ndarray:
    """Which values are "no rating": a code given as it is matches the whole (stripped) value; a code written
    `re:PATTERN` is a regular expression the whole value must match (real files write "N/A (cannot judge)",
    "N/A (not applicable)", ...). `matched` counts the values each pattern matched, to be reported."""
    stripped = text.str.strip()
    mask = stripped.isin([c for c in codes if not c.startswith("re:")]).to_numpy().copy()
    for code in (c for c in codes if c.startswith("re:")):
        hits = stripped.str.fullmatch(code[3:]).fillna(False).to_numpy(dtype=bool) & ~mask
        mask |= hits
        if matched is not None:
            matched[code] = matched.get(code, 0) + int(hits.sum())
    return mask


def infer_criteria(table: pd.DataFrame, spec: Spec) -> Spec:
    """Criteria not declared in the spec: interval when most values are numbers (every value that is not one is then
    reported as `file:line`: one stray word must not turn a rating scale into categories), nominal otherwise."""
    criteria = dict(spec.criteria)
    for name, values in table.groupby("criterion", sort=True)["value"]:
        if name in criteria:
            continue
        present = values[~missing_codes(values, spec.missing)]
        _, ok = _parse_numbers(present.astype(str))
        criteria[str(name)] = CriterionSpec(scale="interval" if ok.mean() > 0.5 else "nominal")
    return spec.model_copy(update={"criteria": criteria})


def read_ratings(path: Path, spec: Spec | None = None) -> tuple[pd.DataFrame, Spec]:
    """(tidy ratings, the spec with every criterion) of a ratings file; InvalidInput lists every problem."""
    try:
        return _read_ratings(path, spec)
    finally:
        release_freed_memory()  # what reading freed, before the analysis allocates elsewhere


def _read_ratings(path: Path, spec: Spec | None) -> tuple[pd.DataFrame, Spec]:
    declared = spec is not None and bool(spec.criteria)
    spec = spec or Spec(name=path.stem)
    if spec.layout == "nested" and path.suffix.lower() not in (".json", ".jsonl"):
        raise BadInput(f"{path}: layout nested reads JSON (.json: an array of records) or JSON Lines (.jsonl)")
    problems = Problems(path)  # a nested file's own problems are reported with those of its values
    if spec.layout == "nested":
        table, notes = read_nested(path, spec.nested, spec.criteria, problems), []
    else:
        frame, lines = read_table(path)
        frame, lines, notes = _without_rejected_assignments(frame, lines, path)
        frame, lines, notes = _without_attention_checks(frame, lines, path, notes)
        table = _long(frame, lines, spec, path)
        if "task_id" in frame and len(table) == len(frame):  # an evalstudio export: whose task each rating is
            table["task"] = frame["task_id"].astype(str).to_numpy()
    for col in ("item", "annotator", "criterion", "system", "agent", "value"):
        table[col] = table[col].astype(str)
    for col in ("item", "annotator", "criterion"):
        empty = (table[col].str.strip() == "").to_numpy()
        problems.add_rows(empty, table["line"].to_numpy(), col, "empty")
    if declared:
        unknown = ~table["criterion"].isin(list(spec.criteria)).to_numpy()
        criteria = table["criterion"].to_numpy()
        problems.add_rows(unknown, table["line"].to_numpy(), "criterion",
                          lambda i: f"unknown criterion '{criteria[i][:40]}'; valid: {', '.join(spec.criteria)}")
    if spec.layout != "nested":  # a nested file's criteria are declared: its values are checked too, first
        problems.raise_if_any()
    spec = infer_criteria(table, spec)
    matched: dict[str, int] = {}  # values each `re:` missing code matched
    values = np.full(len(table), np.nan, dtype=object)
    line = table["line"].to_numpy()
    given = table["value"].to_numpy()
    for name, crit in spec.criteria.items():
        rows = (table["criterion"] == name).to_numpy()
        text = table["value"][rows]
        missing = missing_codes(text, spec.missing + crit.missing, matched)
        sub = np.zeros(len(table), dtype=bool)
        if crit.reads_numbers:
            number, ok = _parse_numbers(text)
            bad = ~missing & ~ok
            sub[rows] = bad
            problems.add_rows(sub, line, "value", lambda i: f"'{given[i][:40]}' is not a number ({crit.scale} criterion "
                                                            f"'{name}'; {missing_hint(given[i])})")
            low = crit.min if crit.min is not None else -np.inf
            high = crit.max if crit.max is not None else np.inf
            out = ok & ~missing & ((number < low) | (number > high))
            sub[:] = False
            sub[rows] = out
            problems.add_rows(sub, line, "value", f"outside {name}'s range [{crit.min:g}, {crit.max:g}]"
                              if crit.min is not None and crit.max is not None else "outside the range")
            if crit.step is not None:
                base = crit.min if crit.min is not None else 0.0
                with np.errstate(invalid="ignore"):
                    units = (number - base) / crit.step
                    off = ok & ~missing & ~out & (np.abs(units - np.round(units)) > 1e-9)
                sub[:] = False
                sub[rows] = off
                problems.add_rows(sub, line, "value", lambda i: f"'{given[i][:40]}' is not on {name}'s steps "
                                                                f"({base:g}, {base + crit.step:g}, ...)")
            chosen = np.where(missing | ~ok, np.nan, number)
            values[rows] = chosen
        else:
            labels = crit.labels
            if labels is not None:
                bad = ~missing & ~text.isin(labels).to_numpy()
                sub[rows] = bad
                problems.add_rows(sub, line, "value",
                                  lambda i: f"'{given[i][:40]}' is not one of {name}'s labels ({', '.join(labels[:8])})")
            if crit.scale == "ordinal" and labels is not None:  # analysed by position: 1 = first label
                position = pd.Series(text.to_numpy()).map({label: i + 1.0 for i, label in enumerate(labels)})
                values[rows] = np.where(missing, np.nan, position.to_numpy(dtype=float))
            else:
                values[rows] = np.where(missing, None, text.to_numpy())
    keys = ["item", "system", "agent", "annotator", "criterion"]
    duplicated = duplicated_rows(table, keys)
    if duplicated.any():
        first_line = table.groupby(keys, sort=False)["line"].transform("first").to_numpy()
        who, item, what = (table[k].to_numpy() for k in ("annotator", "item", "criterion"))
        copies = _copy_hints(table, keys)
        problems.add_rows(duplicated, line, "item", lambda i: f"annotator '{who[i][:40]}' rated item '{item[i][:40]}' on "
                                                              f"'{what[i][:40]}' twice (first at line {first_line[i]})"
                                                              f"{copies[i]}")
    problems.raise_if_any()
    tidy = table.assign(value=values, project=spec.name)
    tidy = tidy[pd.notna(tidy["value"])].reset_index(drop=True)
    if tidy.empty:
        raise BadInput(f"{path}: no ratings (every value is empty or a missing code)")
    tidy = tidy[["project", "item", "system", "agent", "annotator", "criterion", "value", "line"]]
    notes = notes + [f"missing code '{code}' matched {n} value(s)" for code, n in matched.items()]
    if notes:  # said by the command line; only set when there is something to say (pandas copies attrs along)
        tidy.attrs["notes"] = notes
    return tidy, spec


def read_ratings_or_spans(path: Path, spec: Spec | None):
    """(tidy ratings, the spec with every criterion, the span study or None) of a ratings file: a published span
    study (layout spans: MQM's TSV, ESA's export) through `readers.spans`, any other through `read_ratings`."""
    if spec is None or spec.layout != "spans":
        return (*read_ratings(path, spec), None)
    from .spans import read_span_study

    study = read_span_study(path, spec)
    criteria = spec.criteria or {study.criterion: CriterionSpec(scale="interval")}
    if list(criteria) != [study.criterion]:
        raise BadInput(f"{path}: layout spans gives one criterion, {study.criterion}; the spec's criteria name "
                       f"{', '.join(criteria)}")
    study.tidy.attrs["notes"] = study.notes
    return study.tidy, spec.model_copy(update={"criteria": criteria}), study


def _without_rejected_assignments(frame: pd.DataFrame, lines: np.ndarray, path: Path):
    """An MTurk batch results file (it has AssignmentId and AssignmentStatus): the rows of rejected assignments are
    left out, with a note; any other table is returned as it is."""
    if not {"AssignmentId", "AssignmentStatus"} <= set(frame.columns):
        return frame, lines, []
    rejected = (frame["AssignmentStatus"].str.strip().str.lower() == "rejected").to_numpy()
    if not rejected.any():
        return frame, lines, []
    note = f"{path.name}: {int(rejected.sum())} rejected MTurk assignment(s) left out (AssignmentStatus Rejected)"
    return frame[~rejected].reset_index(drop=True), lines[~rejected], [note]


def _without_attention_checks(frame: pd.DataFrame, lines: np.ndarray, path: Path, notes: list[str]):
    """An evalstudio export with attention checks (a non-empty `attention_check_of`: spoiled copies of tasks,
    protocols/attention.py): their rows left out, with a note; any other table is returned as it is."""
    from evalstudio.protocols.attention import check_rows

    checks = check_rows(frame)
    if not checks.any():
        return frame, lines, notes
    note = attention_checks_note(int(checks.sum()), "row(s)", path.name)
    return frame[~checks].reset_index(drop=True), lines[~checks], [*notes, note]


def attention_checks_note(n: int, what: str, where: str) -> str:
    """The analysis' note on the attention checks it left out (n rows or tasks of `where`)."""
    return (f"Left out: {n} {what} of attention checks in {where} (spoiled copies of tasks, marked in "
            "the exports' attention_check_of: `status` and `approvals` score them; no score, agreement or ranking counts them).")


def _copy_hints(table: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Per row, what to add to a "rated twice" problem: where the two ratings are of different tasks of an evalstudio
    export made before it had `attention_check_of`, the likely cause (an attention check) and the fix."""
    hints = np.full(len(table), "", dtype=object)
    if "task" not in table:
        return hints
    first = table.groupby(keys, sort=False)["task"].transform("first").to_numpy()
    other = first != table["task"].to_numpy()
    hints[other] = [f": tasks {a[:20]} and {b[:20]}, likely an attention check (a spoiled copy of the task) that an "
                    "evalstudio export made before its attention_check_of column does not mark: export the study "
                    "again, and analyze leaves the checks out" for a, b in
                    zip(first[other], table["task"].to_numpy()[other])]
    return hints


def read_metrics(path: Path, spec: Spec, criteria) -> pd.DataFrame:
    """Metric scores: item, system, metric, criterion ('' = every criterion), value (float), line."""
    try:
        return _read_metrics(path, spec, criteria)
    finally:
        release_freed_memory()  # what reading freed, before the analysis allocates elsewhere


def _read_metrics(path: Path, spec: Spec, criteria) -> pd.DataFrame:
    frame, lines = read_table(path)
    c = spec.metric_columns
    item = find_column(frame, c, "item", True, path)
    metric = find_column(frame, c, "metric", True, path)
    value = find_column(frame, c, "value", True, path)
    system = find_column(frame, c, "system", False, path)
    criterion = find_column(frame, c, "criterion", False, path)
    confidence = find_column(frame, c, "confidence", False, path)
    table = pd.DataFrame({"item": frame[item].astype(str), "system": frame[system].astype(str) if system else "",
                          "metric": frame[metric].astype(str),
                          "criterion": frame[criterion].astype(str) if criterion else "", "line": lines})
    problems = Problems(path)
    for col in ("item", "metric"):
        problems.add_rows((table[col].str.strip() == "").to_numpy(), lines, col, "empty")
    if criterion:
        unknown = ~table["criterion"].isin(list(criteria) + [""]).to_numpy()
        named = table["criterion"].to_numpy()
        problems.add_rows(unknown, lines, "criterion",
                          lambda i: f"unknown criterion '{named[i][:40]}'; the ratings have {', '.join(criteria)}")
    text = frame[value].astype(str)
    number, ok = _parse_numbers(text)
    problems.add_rows(~ok, lines, "value", lambda i: f"'{text.iat[i][:40]}' is not a number")
    if confidence:
        stated = frame[confidence].astype(str)
        p, p_ok = _parse_numbers(stated)
        p_ok &= ~((p < 0) | (p > 1))
        blank = (stated.str.strip() == "").to_numpy()
        said = stated.to_numpy()
        problems.add_rows(~p_ok & ~blank, lines, confidence, lambda i: f"'{said[i][:40]}' is not a probability in [0, 1]")
        table["confidence"] = np.where(blank, np.nan, p)
    duplicated = duplicated_rows(table, ["item", "system", "metric", "criterion"])
    problems.add_rows(duplicated, lines, "item", _second_score(frame, duplicated))
    problems.raise_if_any()
    columns = ["item", "system", "metric", "criterion", "value", "line"] + (["confidence"] if confidence else [])
    table = table.assign(value=number)[columns]
    # few distinct values over millions of rows: as codes (readers that group or pivot on them pass observed=True)
    for column in ("item", "system", "metric", "criterion"):
        table[column] = table[column].astype("category")  # (3.3M scores: 70 MB instead of 180 MB)
    return table


def _second_score(frame: pd.DataFrame, duplicated: np.ndarray):
    """The refusal of a second score; where the rows are of several projects (`judge` on a study of lists, from
    files, scores each list), it names the row's project and the fix."""
    said = "a second score of this metric for this item and system"
    if "project" not in frame.columns or not duplicated.any() or frame["project"].nunique() < 2:
        return said
    projects = frame["project"].astype(str).to_numpy()
    return lambda i: (f"{said}, of project '{projects[i][:40]}' (the file scores {frame['project'].nunique()} "
                      "projects, e.g. each list of a study judged from files): keep one project's rows")


def orient_metrics(scores: pd.DataFrame, lower_is_better, source: str) -> pd.DataFrame:
    """Negate the scores of the metrics for which lower is better (distances, error rates), so that correlations,
    accuracies and significance clusters read every metric as "higher is better" (as mt-metrics-eval stores such
    metrics negated). A name that is not a metric of the file is an error."""
    names = list(dict.fromkeys(str(n) for n in lower_is_better))
    if not names:
        return scores
    have = set(scores["metric"])
    unknown = [n for n in names if n not in have]
    if unknown:
        listed = ", ".join(sorted(have)[:12]) + (" ..." if len(have) > 12 else "")
        raise BadInput(f"{source}: lower_is_better: {', '.join(n[:40] for n in unknown[:5])} not among the metrics "
                       f"({listed})")
    flip = scores["metric"].isin(names).to_numpy()
    return scores.assign(value=np.where(flip, -scores["value"].to_numpy(dtype=float), scores["value"]))


def from_label_studio(annotations: pd.DataFrame, model: pd.DataFrame, spec: Spec) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tidy ratings, metrics) from evalstudio's annotation and model frames (exporters.tables.tidy): the item is the
    task's item_id (else the task), ordinal labels become their position; each `metric` in the model frame (the
    model outputs the tasks carry: `model`; stored predictions: their model_version) is a metric."""
    rows = annotations[~annotations["cancelled"] & annotations["value"].notna()]
    rows = rows[rows["criterion"].isin(list(spec.criteria))]

    def item(frame):
        return frame["item_id"].where(frame["item_id"].notna(), frame["task_id"]).astype(str)

    def positions(frame):
        values = frame["value"].astype(object).copy()
        for name, crit in spec.criteria.items():
            if crit.labels is not None and crit.scale == "ordinal":
                mine = frame["criterion"] == name
                values[mine] = frame.loc[mine, "value"].map({label: i + 1.0 for i, label in enumerate(crit.labels)})
        return values

    tidy = pd.DataFrame({"project": spec.name, "item": item(rows), "system": rows["system"].fillna("").astype(str),
                         "agent": rows["agent"].fillna("").astype(str), "annotator": rows["annotator"].astype(str),
                         "criterion": rows["criterion"], "value": positions(rows), "line": 0})
    tidy = tidy[tidy["value"].notna()].reset_index(drop=True)
    numeric = [c for c, crit in spec.criteria.items() if crit.numeric]
    model = model[model["criterion"].isin(numeric) & model["value"].notna()] if not model.empty else model
    if model.empty:
        return tidy, pd.DataFrame(columns=["item", "system", "metric", "criterion", "value", "line"])
    scores = pd.DataFrame({"item": item(model) + np.where(model["agent"].fillna("") != "", " | " + model["agent"].fillna(""), ""),
                           "system": model["system"].fillna("").astype(str),
                           "metric": model["metric"] if "metric" in model else "model",
                           "criterion": model["criterion"], "value": pd.to_numeric(positions(model), errors="coerce"),
                           "line": 0})
    scores = scores[scores["value"].notna()]
    # one score per (item, system, metric, criterion): a predictor that predicted twice counts once (its last)
    scores = scores.drop_duplicates(["item", "system", "metric", "criterion"], keep="last")
    return tidy, scores.reset_index(drop=True)
