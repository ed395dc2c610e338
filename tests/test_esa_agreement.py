"""ESA's own agreement measures (Kocmi et al. 2024; Zouhar, Kocmi & Sachan 2024; the definitions of the scripts of
github:wmt-conference/ErrorSpanAnnotation): the vectorised functions of evalstudio.stats.spans against plain loops
written from those definitions, on Hypothesis-generated spans and scores, and the columns they add to `analyze`'s
span_agreement table, by hand on two small files, and `report`'s. The published digits they reproduce (the ESA
poster's error agreement, by benchmarks/esa_replay.py on the released campaigns, GPL-3.0 data that is not in this
repository) are in docs/spans.md, "A replay on ESA's released data"."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstudio.stats.spans import esa_overlaps, esa_segment_agreement

from .test_mqm import ESA, TWO_RATERS, analyze, write_export


def loop_overlaps(first: list, second: list) -> tuple[list, list]:
    """ESA's rule span by span: (start2 <= start <= end2 or start2 <= end <= end2) in the same segment and
    control; a span without offsets (None) agrees only with another without; 'same severity' needs one such span
    of the same severity."""
    hits, sames = [], []
    for seg, ctl, s, e, sev in first:
        hit = same = False
        for seg2, ctl2, s2, e2, sev2 in second:
            if (seg, ctl) != (seg2, ctl2):
                continue
            if s is None or s2 is None:
                ok = s is None and s2 is None
            else:
                ok = s2 <= s <= e2 or s2 <= e <= e2
            hit |= ok
            same |= ok and sev == sev2
        hits.append(hit)
        sames.append(same)
    return hits, sames


OFFSETS = st.one_of(st.none(), st.tuples(st.integers(0, 15), st.integers(0, 15)).map(sorted))
SPAN = st.tuples(st.sampled_from(["s1", "s2"]), st.sampled_from(["target", "missing"]), OFFSETS,
                 st.sampled_from(["Minor", "Major"]))


def frame(spans: list) -> pd.DataFrame:
    return pd.DataFrame([(seg, ctl, np.nan if o is None else o[0], np.nan if o is None else o[1], sev)
                         for seg, ctl, o, sev in spans], columns=["segment", "control", "start", "end", "severity"])


@settings(max_examples=150, deadline=None)
@given(st.lists(SPAN, max_size=10), st.lists(SPAN, max_size=10))
def test_span_overlap_is_esas_rule_span_by_span(first, second):
    """Each span's 'overlaps one of the other's' and 'with the same severity' are the plain loop's."""
    flat = [[(seg, ctl, None if o is None else o[0], None if o is None else o[1], sev) for seg, ctl, o, sev in spans]
            for spans in (first, second)]
    hit, same = esa_overlaps(frame(first), frame(second))
    assert (hit.tolist(), same.tolist()) == loop_overlaps(*flat)


def loop_tau_c(x: list, y: list) -> float:
    """Stuart's tau-c: 2 (P - Q) / (n^2 (m - 1) / m), m the fewer of the two numbers of distinct values."""
    n, m = len(x), min(len(set(x)), len(set(y)))
    s = sum(((x[i] > x[j]) - (x[i] < x[j])) * ((y[i] > y[j]) - (y[i] < y[j])) for i in range(n) for j in range(i))
    return 2 * s / (n * n * (m - 1) / m)


def loop_pearson(x: list, y: list) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100), st.booleans(), st.booleans()), min_size=2,
                max_size=25))
def test_segment_agreement_is_the_plain_formulas(rows):
    """Kendall's tau-c, Pearson's r and the share of segments both or neither say have an error."""
    x, y, ea, eb = (list(c) for c in zip(*rows))
    r = esa_segment_agreement(x, y, pd.DataFrame({"error": ea}), pd.DataFrame({"error": eb}))
    assert r["error"] == pytest.approx(sum(a == b for a, b in zip(ea, eb)) / len(rows))
    if len(set(x)) > 1 and len(set(y)) > 1:
        assert r["kendall_tau_c"] == pytest.approx(loop_tau_c(x, y))
        assert r["pearson"] == pytest.approx(loop_pearson(x, y))
    else:  # a constant score: no correlation, never a plausible number
        assert math.isnan(r["kendall_tau_c"]) and math.isnan(r["pearson"])


# The ESA file (test_mqm.ESA): u1 marks [0, 4] major; u2 [2, 4] minor and [MISSING] major; scores 80 and 60 on one
# segment. u1's span overlaps u2's (2 <= 4 <= 4), of another severity; of u2's two, [2, 4] overlaps u1's
# (0 <= 2 <= 4), [MISSING] overlaps nothing. Both mark an error and a major one, only u2 a minor one.
# TWO_RATERS (test_mqm.TWO_RATERS): on A, r1 'ist' Major, r2 'Das ist' Minor (scores 5 and 1); on B, r1 no error,
# r2 'gut' Minor (0 and 0.1). r1's span overlaps r2's first; of r2's two, the first overlaps r1's, 'gut' nothing.
# Both say A has an error, only r2 says B has; neither agrees on a minor error; on a major one they agree on B.
TABLE = [
    ("esa", "spans_first", 1), ("esa", "spans_second", 2),
    ("esa", "overlap_first", 1.0), ("esa", "overlap_first_severity", 0.0),
    ("esa", "overlap_second", 0.5), ("esa", "overlap_second_severity", 0.0),
    ("esa", "kendall_tau_c", np.nan), ("esa", "pearson", np.nan),  # one segment: no correlation
    ("esa", "error_agreement", 1.0), ("esa", "minor_agreement", 0.0), ("esa", "major_agreement", 1.0),
    ("mqm", "spans_first", 1), ("mqm", "spans_second", 2),
    ("mqm", "overlap_first", 1.0), ("mqm", "overlap_first_severity", 0.0),
    ("mqm", "overlap_second", 0.5), ("mqm", "overlap_second_severity", 0.0),
    ("mqm", "kendall_tau_c", 1.0), ("mqm", "pearson", 1.0),  # 5 > 0 and 1 > 0.1: ordered alike, two points
    ("mqm", "error_agreement", 0.5), ("mqm", "minor_agreement", 0.0), ("mqm", "major_agreement", 0.5),
]


@pytest.fixture(scope="module")
def agreement(tmp_path_factory) -> dict[str, pd.Series]:
    out = {}
    for kind, text, spec, name in (("esa", ESA, "layout: spans\nspans: {format: esa}\n", "esa.csv"),
                                   ("mqm", TWO_RATERS, "layout: spans\n", "two.tsv")):
        folder = tmp_path_factory.mktemp(kind)
        (folder / name).write_text(text, encoding="utf-8")
        out[kind] = pd.read_csv(analyze(folder, folder / name, spec) / "span_agreement.csv").iloc[0]
    return out


@pytest.mark.parametrize("kind,column,expected", TABLE)
def test_span_agreement_gives_esas_measures(agreement, kind, column, expected):
    """`analyze`'s span_agreement table has ESA's measures beside evalstudio's character measures."""
    assert agreement[kind][column] == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize("protocol", ["mqm", "esa"])
def test_report_of_a_span_study_writes_analyzes_span_agreement(tmp_path, protocol):
    """`report` of an mqm or esa study's export writes span_agreement.csv, the table `analyze --protocol` writes
    for the same export (ESA's measures included)."""
    from typer.testing import CliRunner

    from evalstudio.cli import app

    write_export(tmp_path, protocol)
    common = ["--from-export", str(tmp_path / "export.json"), "--projects", str(tmp_path / "projects.yaml"),
              "--bootstrap", "0"]
    runner = CliRunner()
    for command in (["report", protocol, *common, "-o", str(tmp_path / "report")],
                    ["analyze", str(tmp_path / "export.json"), "--protocol", protocol, *common[2:], "--resamples",
                     "100", "-o", str(tmp_path / "analyze")]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
    ours, theirs = (pd.read_csv(tmp_path / side / "span_agreement.csv") for side in ("report", "analyze"))
    assert "overlap_first" in ours.columns
    pd.testing.assert_frame_equal(ours, theirs)
