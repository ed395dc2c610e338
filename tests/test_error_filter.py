"""Filtering with the judge, with a guarantee (issue 68.5): the judge's span tables of a real run against the
OpenAI-compatible server process (half of the segments marked error-free), a PAC calibration sample drawn from
them, the humans' spans of that sample as an ESA Appraise export, and `active pac --criterion has_error`: the
segments the judge marks error-free are skipped only where the bound holds, every segment it marks an error in goes
to humans, and the share skipped and the realised error on the calibration sample are printed."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalstudio.cli import app

from .conftest import ROOT
from .judge_server import judge_cli

TASKS = ROOT / "examples" / "esa" / "ted_ende.jsonl"


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """One `judge esa` run (36 TED segments, a judge that marks no error in about half of them), and its draw of
    a calibration sample of 24."""
    from .judge_server import OpenAIServer

    folder = tmp_path_factory.mktemp("judged")
    server = OpenAIServer(folder)
    try:
        done = judge_cli(server, folder, "esa", model="judge+clean", files=[TASKS])
        assert done.returncode == 0, done.stderr
    finally:
        server.stop()
    drawn = CliRunner().invoke(app, ["active", "draw", str(folder / "out" / "annotations.csv"), "--metric", "judge+clean",
                                     "--criterion", "has_error", "--protocol", "esa", "--design", "pac", "--budget",
                                     "24", "-o", str(folder / "sample.csv")])
    assert drawn.exit_code == 0, drawn.output
    return folder


def _appraise_row(segment, spans: list) -> str:
    """One TGT row of ESA's Appraise score export (the layout `format: esa` reads)."""
    cells = ["rater1", segment.system, segment.item, "TGT", "eng", "deu", "90" if not spans else "60",
             f"{segment.item}#{segment.system}", "False", json.dumps(spans), "0", "1"]
    return ",".join(c if "," not in c and '"' not in c else '"' + c.replace('"', '""') + '"' for c in cells)


@pytest.mark.parametrize("humans, skips", [
    ("find errors only where the judge does", True),
    ("find an error in every segment", False),
])
def test_segments_the_judge_marks_error_free_are_skipped_only_with_the_guarantee(judged, tmp_path, humans, skips):
    draws = pd.read_csv(judged / "sample.csv", dtype={"item": str, "system": str})
    judge_says = draws["score"] == 2.0  # (has_error's label positions: 1 no, 2 yes)
    assert 0 < (~judge_says).sum() < len(draws) == 36
    sample = draws[draws["drawn"]]
    error = [{"start_i": 0, "end_i": 3, "severity": "minor"}]
    rows = [_appraise_row(s, error if (yes or not skips) else []) for s, yes in
            zip(sample.itertuples(), judge_says[draws["drawn"]])]
    (tmp_path / "humans.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "spec.yaml").write_text("name: humans\nlayout: spans\nspans: {format: esa}\n", encoding="utf-8")
    done = CliRunner().invoke(app, ["active", "pac", str(tmp_path / "humans.csv"), "--spec", str(tmp_path / "spec.yaml"),
                                    "--draws", str(judged / "sample.csv"), "--criterion", "has_error", "--epsilon",
                                    "0.1", "-o", str(tmp_path / "pac.csv")])
    assert done.exit_code == 0, done.output
    table = pd.read_csv(tmp_path / "pac.csv", dtype={"item": str, "system": str}, keep_default_na=False)
    needs = table["needs_human"].to_numpy(bool)
    assert needs[judge_says.to_numpy()].all() and needs[draws["drawn"].to_numpy()].all()
    outside = int((~judge_says & ~draws["drawn"]).sum())
    skipped = outside if skips else 0
    assert int((~needs).sum()) == skipped and (skipped > 0) == skips
    in_sample_free = int((~judge_says & draws["drawn"]).sum())
    said = " ".join(done.output.split())
    assert f"skipped by the judge (marked error-free, left unannotated): {skipped} of 36 segments" in said
    if skips:
        assert f"skip {in_sample_free} of 24 segments, 0 of them with an error by the humans: a realised error of " \
               "0.0% of the sample" in said
    else:
        assert "skip 0 of 24 segments" in said
