"""ESA's attention checks in the exported tables (protocols/attention.py): every export marks a check's rows with
its original's evalstudio_id (`attention_check_of`), `analyze` of such a file leaves them out as it does reading
the study itself, and an export made before the column names the likely cause of the "rated twice" it hits."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.protocols.attention import CHECK_COLUMN, CHECK_FIELD
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.scanning import iter_tasks, split_task
from evalstudio.values.results import ID_FIELD, region

from .conftest import ROOT

SAMPLE = ROOT / "examples" / "esa" / "ted_ende.jsonl"


@pytest.fixture(scope="module")
def study(reg, tmp_path_factory):
    """The ESA sample with its checks as a Label Studio export, one annotator scoring every task (a check lower)
    and marking one error span in each: (the export's path, task id -> the original's evalstudio_id or None)."""
    project = reg.get("esa")
    li = project.interface
    tasks = [{"id": n, **split_task(project, t), "annotations": []}
             for n, (_, t) in enumerate(iter_tasks(project, importer_for(project), [SAMPLE]), start=1)]
    for task in tasks:
        check = task["meta"].get(CHECK_FIELD)
        target = task["data"]["target"]
        span = {"id": f"s{task['id']}", "from_name": "errors", "to_name": "target", "type": "labels",
                "value": {"start": 0, "end": 3, "text": target[:3], "labels": ["Minor"]}}
        task["annotations"] = [{"id": task["id"], "completed_by": {"id": 7, "email": "rater@participants.invalid"},
                                "result": [region(li, "score", 30 if check else 70), span], "lead_time": 3.0,
                                "was_cancelled": False, "created_at": "2026-11-20T10:00:00Z"}]
    folder = tmp_path_factory.mktemp("attention_exports")
    export = folder / "export.json"
    export.write_text(json.dumps(tasks), encoding="utf-8")
    originals = {t["id"]: (t["meta"][CHECK_FIELD]["of"] if CHECK_FIELD in t["meta"] else None) for t in tasks}
    assert 0 < sum(o is not None for o in originals.values()) < len(tasks)  # the sample has checks
    ids = {t["meta"].get(ID_FIELD, t["data"].get(ID_FIELD)) for t in tasks}
    assert {o for o in originals.values() if o} <= ids  # (each check's original is in the export)
    return export, originals


def _read(path, fmt):
    if fmt == "csv":
        return pd.read_csv(path, dtype={CHECK_COLUMN: str}, keep_default_na=False)
    if fmt == "jsonl":
        return pd.read_json(path, lines=True, dtype={CHECK_COLUMN: str})
    return pd.read_parquet(path)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_every_export_marks_the_checks_with_their_original(study, tmp_path, fmt):
    """export (tidy table and spans table, each format): a check's rows hold its original's evalstudio_id in
    attention_check_of, every other row nothing."""
    export, originals = study
    out = tmp_path / f"esa.{fmt}"
    result = CliRunner().invoke(app, ["export", "esa", "--from-export", str(export), "-o", str(out), "--format", fmt])
    assert result.exit_code == 0, result.output
    for table in (_read(out, fmt), _read(out.with_name(f"esa.spans.{fmt}"), fmt)):
        assert not table.empty and CHECK_COLUMN in table
        got = {int(t): (o if isinstance(o, str) and o else None) for t, o in zip(table["task_id"], table[CHECK_COLUMN])}
        assert got == {t: originals[t] for t in got} and set(got) == set(originals)


@pytest.mark.parametrize("source", ["csv", "jsonl", "parquet", "export.json"])
def test_analyze_leaves_the_checks_out_of_an_export_as_of_the_study(study, tmp_path, source):
    """analyze --protocol esa of the export's tidy file (each format) or of the Label Studio export itself: the
    originals' scores only (never a check's), and a note of how many checks it left out."""
    export, originals = study
    checks = sum(o is not None for o in originals.values())
    path = export
    if source != "export.json":
        path = tmp_path / f"esa.{source}"
        assert CliRunner().invoke(app, ["export", "esa", "--from-export", str(export), "-o", str(path), "--format",
                                        source]).exit_code == 0
    result = CliRunner().invoke(app, ["analyze", str(path), "--protocol", "esa", "-o", str(tmp_path / "analysis"),
                                      "--bootstrap", "10"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    what = "task(s)"  # an ESA export is read with its spans beside it (a span study), as the live study is
    assert f"Left out: {checks} {what} of attention checks in {path.name}" in said
    assert "`status` and `approvals` score them" in said
    assert f"{len(originals) - checks} ratings of" in said
    page = " ".join((tmp_path / "analysis" / "index.html").read_text(encoding="utf-8").split())
    assert f"Left out: {checks} {what} of attention checks" in page


def test_an_export_made_before_the_column_names_the_checks_as_the_likely_cause(study, tmp_path):
    """A tidy file without attention_check_of (an older export) read as ratings (--spec, no --protocol): the "rated
    twice" problem of a check and its original (two tasks) says that it is likely an attention check and how to fix
    it; read as the ESA study (--protocol esa, the spans beside it) it is refused, naming the missing column, never
    analysed with the checks' scores counted."""
    export, originals = study
    path = tmp_path / "esa.csv"
    assert CliRunner().invoke(app, ["export", "esa", "--from-export", str(export), "-o", str(path)]).exit_code == 0
    pd.read_csv(path).drop(columns=[CHECK_COLUMN]).to_csv(path, index=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: esa\ncriteria:\n  score: {scale: interval, min: 0, max: 100}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze", str(path), "--spec", str(spec), "-o", str(tmp_path / "analysis")])
    assert result.exit_code != 0
    said = " ".join(result.output.split())
    assert said.count("likely an attention check") == sum(o is not None for o in originals.values()), said
    assert "export the study again, and analyze leaves the checks out" in said
    result = CliRunner().invoke(app, ["analyze", str(path), "--protocol", "esa", "-o", str(tmp_path / "as_esa")])
    said = " ".join(result.output.split())
    assert result.exit_code != 0 and f"no {CHECK_COLUMN} column" in said and "Export the study again" in said, said
    assert not (tmp_path / "as_esa").exists()


@pytest.mark.parametrize("with_checks", [True, False])
def test_the_release_tables_mark_the_checks_of_a_study_that_has_them(study, reg, with_checks):
    """publish's ratings and spans tables (counted answers, pseudonymised): a check's rows hold its original's
    evalstudio_id in attention_check_of; a study without checks has no such column (its dataset card and Croissant
    list only what is there)."""
    from evalstudio.exporters.publication import release
    from evalstudio.exporters.tables.tidy import annotation_frame, read_export, span_frame

    export, originals = study
    project = reg.get("esa")
    tasks = [t for t in read_export(export) if with_checks or originals[t["id"]] is None]
    annotations = annotation_frame(tasks, project)
    key = b"k" * 32
    tables = (release.ratings_table(annotations, key, [], project.criteria),
              release.spans_table(span_frame(tasks, project), key, annotations["annotation_id"]))
    for table in tables:
        assert not table.empty and (CHECK_COLUMN in table) == with_checks, list(table.columns)
        if with_checks:
            marked = {int(t): (o if isinstance(o, str) else None) for t, o in zip(table["task_id"], table[CHECK_COLUMN])}
            assert marked == {t: originals[t] for t in marked}
            assert CHECK_COLUMN in release.COLUMN_MEANING


@pytest.mark.parametrize("column, expected", [
    (None, [False, False, False]),                      # a table without the column: no check rows
    (["", None, "talk.1-3#sysA"], [False, False, True]),  # empty and missing: not a check; an original's id: a check
    ([" ", "x", float("nan")], [False, True, False]),
])
def test_check_rows_marks_the_rows_of_attention_checks(column, expected):
    """protocols.attention.check_rows, which analyze (a file's rows, the spans beside it) and publish (its agreement
    table) leave out: a row is a check's when its attention_check_of is non-empty."""
    from evalstudio.protocols.attention import check_rows

    frame = pd.DataFrame({"value": [1, 2, 3]})
    if column is not None:
        frame[CHECK_COLUMN] = column
    assert check_rows(frame).tolist() == expected
