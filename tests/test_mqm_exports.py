"""`evalstudio analyze --protocol mqm|esa` of evalstudio's own export (`evalstudio export`: NAME.EXT and its spans
beside it, NAME.spans.EXT): the MQM or ESA tables the live study gives (read here from Label Studio's JSON export,
which `analyze` reads through the same code as the live projects), or a refusal naming the missing spans file;
never a span-less analysis of the annotations table alone (before: "non_translation (nominal)", no MQM score)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalstudio.cli import app

from .test_mqm import write_export

CASES = [(protocol, fmt) for protocol in ("mqm", "esa") for fmt in ("csv", "jsonl", "parquet")]


def _analyze(tmp_path: Path, ratings: Path, protocol: str, out: str):
    return CliRunner().invoke(app, ["analyze", str(ratings), "--protocol", protocol, "--projects",
                                    str(tmp_path / "projects.yaml"), "-o", str(tmp_path / out), "--bootstrap", "0",
                                    "--resamples", "100"])


def _exported(tmp_path: Path, protocol: str, fmt: str) -> Path:
    """export.json written out by `evalstudio export --from-export` as a user runs it: the file and its spans."""
    write_export(tmp_path, protocol)
    out = tmp_path / f"{protocol}.{fmt}"
    result = CliRunner().invoke(app, ["export", protocol, "--from-export", str(tmp_path / "export.json"), "-o",
                                      str(out), "--format", fmt, "--projects", str(tmp_path / "projects.yaml")])
    assert result.exit_code == 0 and (tmp_path / f"{protocol}.spans.{fmt}").exists(), result.output
    return out


@pytest.mark.parametrize("protocol, fmt", CASES)
def test_analyze_of_an_evalstudio_export_gives_the_live_studys_tables(tmp_path, protocol, fmt):
    """The same annotations analysed as the live study reads them and from each export format: equal systems,
    segments and span agreement tables (alpha apart: it needs each segment's text, which the export does not hold;
    not_computed says so)."""
    path = _exported(tmp_path, protocol, fmt)
    live = _analyze(tmp_path, tmp_path / "export.json", protocol, "live")
    assert live.exit_code == 0, live.output
    result = _analyze(tmp_path, path, protocol, "ours")
    assert result.exit_code == 0, result.output
    assert protocol.upper() in result.output and "non_translation" not in result.output
    for table in (f"{protocol}_systems.csv", f"{protocol}_segments.csv", "span_agreement.csv"):
        ours, theirs = (pd.read_csv(tmp_path / side / table) for side in ("ours", "live"))
        if table == "span_agreement.csv":
            assert ours["alpha"].isna().all() and theirs["alpha"].notna().all()
            ours, theirs = ours.drop(columns=["alpha", "characters"]), theirs.drop(columns=["alpha", "characters"])
        pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
    why = pd.read_csv(tmp_path / "ours" / "not_computed.csv")
    assert why["reason"].str.contains("alpha needs each segment's length").any()


@pytest.mark.parametrize("protocol, fmt", CASES[:1] + CASES[-1:])
def test_an_export_without_its_spans_file_is_refused_naming_it(tmp_path, protocol, fmt):
    """The spans file removed: refused, naming the file it looks for and the fix; nothing is written."""
    path = _exported(tmp_path, protocol, fmt)
    (tmp_path / f"{protocol}.spans.{fmt}").unlink()
    result = _analyze(tmp_path, path, protocol, "ours")
    assert result.exit_code != 0 and not (tmp_path / "ours").exists()
    said = " ".join(result.output.split())
    assert f"the spans of this study are in {protocol}.spans.{fmt}, not found beside it" in said, said
    assert "evalstudio export" in said


@pytest.fixture(scope="module")
def exported_esa(tmp_path_factory) -> Path:
    """An ESA study's export (csv): the file and its spans, to spoil."""
    return _exported(tmp_path_factory.mktemp("esa"), "esa", "csv")


CELLS = st.one_of(st.sampled_from(["", "-1", "1e9", "x", "True", "nan", "Major", "=1", "1.5", "101", "<drop>"]), st.text(max_size=5))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40), st.integers(0, 20), CELLS), min_size=1, max_size=4))
def test_a_spoiled_export_is_analysed_or_refused_at_its_file(exported_esa, spoils):
    """Any cell of the export or its spans file spoiled, or a column left out: the span study is read, or refused
    naming the file."""
    import shutil
    import tempfile

    from evalstudio.base.errors import BadInput
    from evalstudio.operations.analyzing import _exported_span_study

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "esa.csv"
        shutil.copy(exported_esa, path)
        shutil.copy(exported_esa.with_name("esa.spans.csv"), path.with_name("esa.spans.csv"))
        for in_spans, row, column, cell in spoils:
            target = path.with_name("esa.spans.csv") if in_spans else path
            frame = pd.read_csv(target, dtype=str, keep_default_na=False)
            if cell == "<drop>":  # a column left out
                frame = frame.drop(columns=frame.columns[column % frame.shape[1]])
            else:
                frame.iloc[row % len(frame), column % frame.shape[1]] = cell
            frame.to_csv(target, index=False)
        try:
            tidy, _, study = _exported_span_study(path, "esa", exported_esa.with_name("projects.yaml"))
        except BadInput as e:
            assert re.search(rf"(^|\n){re.escape(folder)}/esa\.(spans\.)?csv(:\d+)?: ", str(e)), str(e)
            return
        assert tidy["value"].between(0, 100).all() and len(study.segments) >= len(tidy)


def test_the_spans_of_another_span_protocol_are_said_to_be_unread(tmp_path):
    """A span protocol other than mqm and esa (tests/data/spans): its export analysed as the live study is, the
    spans beside it said to be unread (before: nothing said so)."""
    import json

    from .test_spans import PIECES, SCORE, SPANS, TASKS, export_task, span

    tasks = [export_task(i, r, span("r1", r["mt"], PIECES[r["id"]]) + [SCORE]) for i, r in enumerate(TASKS, 1)]
    (tmp_path / "export.json").write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf-8")
    projects = ["--projects", str(SPANS / "projects.yaml")]
    runner = CliRunner()
    done = runner.invoke(app, ["export", "mt_spans", "--from-export", str(tmp_path / "export.json"), "-o",
                               str(tmp_path / "a.csv"), *projects])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["analyze", str(tmp_path / "a.csv"), "--protocol", "mt_spans", "-o", str(tmp_path / "X"),
                               "--bootstrap", "0", *projects])
    assert done.exit_code == 0 and "Not read: the spans beside a.csv" in " ".join(done.output.split()), done.output
