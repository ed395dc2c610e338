"""When `analyze --ppi` prints a share's interval and a mean of several annotators' 0/1 labels' (evalstudio's
exporters.analyses.ppi): each from the size its own calibration holds (GPT-4o's stance labels, docs/active.md;
Circa's crowd judgements, docs/analyze.md), below it the reason with its own figures. (Split from test_ppi.py, which
holds the estimator and the ratings' rule.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from .conftest import ROOT
from .test_ppi import _table_rows


# (the values an annotator's label takes, annotators per segment, rated segments of a system's 80): a share (two
# values, one annotator) is printed from MIN_RATED_TWO_VALUED, a mean of several annotators' 0/1 labels from
# MIN_RATED_BINARY_MEAN, a rating from MIN_RATED
TWO_VALUED = [((0.0, 1.0), 1, 20, False), ((0.0, 1.0), 1, 40, True), ((1.0, 2.0, 3.0, 4.0, 5.0), 1, 20, True),
              ((0.0, 1.0), 3, 40, False), ((0.0, 1.0), 3, 60, True)]


@pytest.mark.parametrize("values, annotators, rated, printed", TWO_VALUED)
def test_a_share_is_given_from_the_size_its_own_calibration_holds(tmp_path, values, annotators, rated, printed):
    """A criterion whose human scores take two values (a share) was calibrated on GPT-4o's stance labels, the mean
    of three annotators' 0/1 labels (0, 1/3, 2/3, 1) on Circa, not on the ratings analyze's from-10 rule rests on:
    below MIN_RATED_TWO_VALUED and MIN_RATED_BINARY_MEAN rated segments their intervals are not printed, and the
    reason says so (a rare class's interval covered 0.843 at 10 labels; h69: the mean of three, before treated as a
    rating and printed from 10, covered 0.5 there)."""
    from evalstudio.exporters.analyses import ppi

    from .test_analyze_input import invoke, write

    rng = np.random.default_rng(5)
    ratings, scores = [], []
    for system in ("a", "b"):
        for i in range(80):
            truth = rng.random()
            scores.append({"item": f"i{i}", "system": system, "metric": "m", "value": truth + rng.normal(0, 0.2)})
            for k in range(annotators if i < rated else 0):
                value = values[min(int((truth + 0.2 * k - 0.2) * len(values)), len(values) - 1)]
                ratings.append({"item": f"i{i}", "system": system, "annotator": f"x{k}", "criterion": "q",
                                "value": max(value, min(values))})
    pd.DataFrame(ratings).to_csv(tmp_path / "r.csv", index=False)
    pd.DataFrame(scores).to_csv(tmp_path / "m.csv", index=False)
    spec = write(tmp_path, "spec.yaml", f"criteria:\n  q: {{scale: interval, min: {min(values)}, max: {max(values)}}}\n")
    result = invoke(tmp_path / "r.csv", "--metrics", tmp_path / "m.csv", "--spec", spec, "--ppi", "m",
                    "--bootstrap", "10", "--resamples", "10", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    systems = pd.read_csv(tmp_path / "out" / "ppi_systems.csv", keep_default_na=False)
    assert ("system" in systems and (systems["system"] != "").sum() == 2) == printed, systems
    reason = ppi.BELOW_MIN_RATED_TWO_VALUED if annotators == 1 else ppi.BELOW_MIN_RATED_BINARY_MEAN
    assert (reason in " ".join(systems.get("reason", []))) == (not printed), systems


def test_the_share_reason_cites_the_stance_table():
    """The two-valued reason's figures are docs/active.md's stance rows: the lowest coverage at 10 labels and at 30."""
    import re

    from evalstudio.exporters.analyses import ppi

    rows = [line.split("|") for line in (ROOT / "docs" / "active.md").read_text().splitlines()
            if line.startswith("| stance, share that disagrees")]
    small = [r for r in rows if len(r) == 8 and r[3].strip() in ("10", "20", "30", "60")]  # the small-size table
    lowest = {size: min(float(c) for r in small if int(r[3]) == size for c in r[4:7]) for size in (10, 30)}
    highest_at_10 = max(float(c) for r in small if int(r[3]) == 10 for c in r[4:7])
    assert f"covered {lowest[10]:.3f}-{highest_at_10:.3f} at 10" in ppi.BELOW_MIN_RATED_TWO_VALUED
    assert f"covered {lowest[10]:.3f}" in ppi.BELOW_MIN_RATED_TWO_VALUED, lowest
    assert f"{lowest[30]:.3f} at least from 30" in ppi.BELOW_MIN_RATED_TWO_VALUED, lowest
    assert re.search(r"from (\d+) rated", ppi.BELOW_MIN_RATED_TWO_VALUED)[1] == str(ppi.MIN_RATED_TWO_VALUED)


def test_the_binary_mean_reason_cites_the_circa_table():
    """The mean of several annotators' 0/1 labels is printed from the smallest size from which every Circa system was
    covered at least 0.93 at that size and every larger one (docs/analyze.md's Circa rows, both populations,
    human-only and PPI++), and its reason cites the lowest coverage at the size below and at that size."""
    import re

    from evalstudio.exporters.analyses import ppi

    rows = [r for r in _table_rows("analyze.md", 5) if r[0] == "circa"]
    lowest = {}
    for r in rows:
        low = min(float(c.split()[0]) for c in r[3:5])
        lowest[int(r[2])] = min(low, lowest.get(int(r[2]), 1.0))
    assert sorted(lowest) == [10, 20, 30, 60], rows
    held = [size for size in sorted(lowest) if all(lowest[s] >= 0.93 for s in lowest if s >= size)]
    assert ppi.MIN_RATED_BINARY_MEAN == held[0]
    below = max(s for s in lowest if s < held[0])
    text = ppi.BELOW_MIN_RATED_BINARY_MEAN
    assert f"covered {lowest[below]:.3f} at {below}" in text and f"{lowest[held[0]]:.3f} at least from {held[0]}" in text
    assert re.search(r"from (\d+) rated", text)[1] == str(ppi.MIN_RATED_BINARY_MEAN)
