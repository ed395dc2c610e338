"""What `analyze` says on the terminal: each criterion's results, and every problem of a file counted. (The input
formats and their checks: tests/test_analyze_input.py.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalstudio.cli import app

from .test_analyze_input import analyze_with_metrics, invoke


def test_the_terminal_shows_each_criterions_results(tmp_path):
    """Issue 28.5: `analyze` printed only where it wrote its files. Per criterion it now prints the scale, n, alpha
    with its interval, the leave-one-out ceiling and the best metric with its correlation (the numbers of the
    CSVs)."""
    rng = np.random.default_rng(8)
    truth = {(i, s): rng.integers(1, 6) for i in range(12) for s in range(4)}
    ratings = [{"item": f"i{i}", "system": f"s{s}", "annotator": a, "criterion": "q",
                "value": int(np.clip(v + rng.integers(-1, 2), 1, 5))} for (i, s), v in truth.items() for a in "abc"]
    scores = [{"item": f"i{i}", "system": f"s{s}", "metric": name, "value": float(v + rng.normal(0, noise))}
              for (i, s), v in truth.items() for name, noise in (("close", 0.3), ("noisy", 3.0))]
    result = analyze_with_metrics(tmp_path, ratings, scores, "interval")
    assert result.exit_code == 0, result.output
    agreement = pd.read_csv(tmp_path / "out" / "agreement.csv").iloc[0]
    corrs = pd.read_csv(tmp_path / "out" / "correlations.csv")
    best = corrs[(corrs["level"] == "system") & (corrs["method"] == "pearson")].sort_values("value").iloc[-1]
    line = next(line for line in result.stdout.splitlines() if line.strip().startswith("q "))
    assert "interval" in line and str(len(ratings)) in line
    assert f"{agreement['alpha']:.3f} [{agreement['alpha_lo']:.2f}, {agreement['alpha_hi']:.2f}]" in line
    assert f"{agreement['loo_spearman']:.3f}" in line  # the column says Spearman
    assert best["metric"] == "close" and "close" in line and f"{best['value']:.3f}" in line


def test_a_million_problems_are_counted_not_capped(tmp_path):
    """Issue 28.14: 10^6 duplicate rows were reported as "1001 problem(s)" (the first 1000 and a line saying more)."""
    rows = 200_000
    path = tmp_path / "dup.csv"
    path.write_text("item,annotator,criterion,value\n" + "1,a,q,3\n" * (rows + 1), encoding="utf-8")
    result = invoke(path, "-o", tmp_path / "out")
    assert result.exit_code == 2 and f"{rows} problem(s) found, nothing was analysed" in result.stderr
    assert f"... and {rows - 50} more problem(s)" in result.stderr


def test_the_ppi_table_on_an_80_column_terminal_tells_its_rows_apart():
    """Issue 53: at 80 columns the PPI table dropped its criterion and system columns. Every row now starts with
    its criterion and system, and every number is there."""
    from rich.console import Console

    from evalstudio.cli.analyze import _ppi_results

    rows = pd.DataFrame([{"metric": "BARTScore-SH", "population": "finite", "criterion": criterion, "system": system,
                          "n_labelled": 132,
                          "n_unlabelled": 64, "classical": 93.123, "classical_lo": 92.9, "classical_hi": 93.3,
                          "ppi": 93.1, "ppi_lo": 92.95, "ppi_hi": 93.25, "effective_n": 1234.0}
                         for criterion in ("Relevance", "Semantically appropriate")
                         for system in ("GPT-2 (tag)", "Original Ground Truth")])
    console = Console(width=80, record=True)
    console.print(_ppi_results(rows))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # nothing cut off
    words = text.split()
    for word in ("Relevance", "Semantically", "appropriate", "GPT-2", "(tag)", "Original", "Ground", "Truth"):
        assert words.count(word) == 2, word  # each row's criterion and system, in full (a long one folded)
    flat = " ".join(words)
    assert flat.count("[92.950, 93.250]") == 4 and flat.count("1234") == 4


def _names_and_scores(systems: list[str], items: int, rated: int, criterion: str, metric: str):
    """Ratings by three annotators of `rated` of each system's items, and a close metric's scores of all of them."""
    rng = np.random.default_rng(3)
    truth = {(i, s): float(rng.integers(1, 6)) for i in range(items) for s in systems}
    ratings = [{"item": f"i{i}", "system": s, "annotator": a, "criterion": criterion,
                "value": int(np.clip(v + rng.integers(-1, 2), 1, 5))}
               for (i, s), v in truth.items() if i < rated for a in "abc"]
    scores = [{"item": f"i{i}", "system": s, "metric": metric, "value": v + rng.normal(0, 0.5)}
              for (i, s), v in truth.items()]
    return ratings, scores


@pytest.mark.parametrize("criterion, metric", [("criterion", "Llama-13B-p1"), ("Semantically", "BARTScore-SH")])
def test_at_80_columns_no_name_is_split_inside_a_word(tmp_path, monkeypatch, criterion, metric):
    """Issue 65.15: at 80 columns the results table split names inside a word ("criterio / n", "Llama-13 / B-p1"),
    and the "Not computed" line ended "...; ppi_systems for " (a note about no one criterion). Captured from the
    command as a terminal of 80 columns shows it: every name whole on one line, every number whole, no line wider
    than 80, and the line names what was left out."""
    monkeypatch.setenv("COLUMNS", "80")
    systems = ["Llama-13B-p1", "Llama-70B-p2", "Original Ground Truth"]
    ratings, scores = _names_and_scores(systems, 60, 35, criterion, metric)
    pd.DataFrame(ratings).to_csv(tmp_path / "r.csv", index=False)
    pd.DataFrame(scores).to_csv(tmp_path / "m.csv", index=False)
    (tmp_path / "spec.yaml").write_text(f"criteria:\n  {criterion}: {{scale: interval, min: 1, max: 5}}\n")
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "r.csv"), "--metrics", str(tmp_path / "m.csv"),
                                      "--spec", str(tmp_path / "spec.yaml"), "--ppi", metric, "--bootstrap", "10",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in result.stdout
    words = result.stdout.split()
    for name in (criterion, metric, "Llama-13B-p1", "Llama-70B-p2"):
        assert name in words, name  # whole, as one word somewhere
    for fragment in (criterion[:-1], metric[:-2], "Llama-13", "Llama-70"):
        assert fragment not in words, fragment  # never its first part alone on a line
    row = next(line for line in lines if line.strip().startswith(criterion + " ") and "interval" in line)
    agreement = pd.read_csv(tmp_path / "out" / "agreement.csv").iloc[0]
    assert f"{agreement['alpha']:.3f}" in row and f"{agreement['loo_spearman']:.3f}" in row
    ppi = pd.read_csv(tmp_path / "out" / "ppi_systems.csv")
    assert len(ppi) == 3 and " ".join(words).count(f"{ppi['classical'].iloc[0]:.3f}") >= 1
    flat = " ".join(words)
    said = flat[flat.index("Not computed ("):flat.index("analysis written")]
    assert " for ;" not in said and not said.rstrip().endswith(" for") and "parts of ppi_systems" in said, said
