"""What `analyze` says on the terminal: each criterion's results, and every problem of a file counted. (The input
formats and their checks: tests/test_analyze_input.py.)"""

from __future__ import annotations

import numpy as np
import pandas as pd

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

    rows = pd.DataFrame([{"metric": "BARTScore-SH", "criterion": criterion, "system": system, "n_labelled": 132,
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
