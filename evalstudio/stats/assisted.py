"""The automation-bias check of AI-assisted annotation: how much higher (or lower) annotators score a segment when they
start from a model's prediction than when they see it without (ESA-AI: Zouhar, Kocmi & Sachan 2024, "AI-Assisted
Human Evaluation of Machine Translation"; the design draws, per participant, a share of segments shown unassisted).

The difference is assisted minus unassisted. Where segments were answered in both conditions (overlap above one),
it is paired by segment: each such segment's mean assisted score minus its mean unassisted score, and the mean of
these differences with Student's t interval (the paired t-test: Student 1908, "The probable error of a mean",
Biometrika 6(1); scipy.stats.ttest_1samp on the differences). The pairing removes the segments' own quality, the
largest source of variance, and the random draw of conditions makes annotators' differences noise, not bias. Where
no segment has both (every segment answered once), the two conditions' answers are compared unpaired, with Welch's
interval (Welch 1947, "The generalization of 'Student's' problem when several different population variances are
involved", Biometrika 34(1-2); scipy.stats.ttest_ind with unequal variances)."""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = ["system", "difference", "ci_low", "ci_high", "p_value", "method", "segments_paired",
           "assisted_answers", "unassisted_answers"]


def assisted_difference(scores: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Assisted minus unassisted score per system and over all systems ("all", the last row), with its interval
    at `confidence` (module docstring). `scores`: one row per answer, columns segment, system, assisted (bool),
    value (numeric). A system without answers in both conditions gets a row with its counts and no difference.

    Student's (1908) sleep data (Cushny & Peebles): the extra sleep of ten patients under two drugs, as R's
    t.test(extra ~ group, data = sleep, paired = TRUE) gives it: a difference of 1.58 hours, 95% CI 0.70 to 2.46,
    p = 0.0028.

    >>> drug1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
    >>> drug2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]
    >>> frame = pd.DataFrame({"segment": list(range(10)) * 2, "system": "s", "assisted": [False] * 10 + [True] * 10,
    ...                       "value": drug1 + drug2})
    >>> row = assisted_difference(frame).iloc[-1]
    >>> print(row["system"], round(row["difference"], 2), round(row["ci_low"], 2), round(row["ci_high"], 2),
    ...       round(row["p_value"], 4), row["method"], row["segments_paired"])
    all 1.58 0.7 2.46 0.0028 paired t over segments 10
    """
    frame = scores[["segment", "system", "assisted", "value"]].copy()
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    frame = frame.dropna(subset=["value"])
    frame["assisted"] = frame["assisted"].astype(bool)
    frame["system"] = frame["system"].astype(str)
    rows = [_compare(name, group, confidence) for name, group in frame.groupby("system", sort=True)]
    rows.append(_compare("all", frame, confidence))
    return pd.DataFrame(rows, columns=COLUMNS)


def _compare(name: str, frame: pd.DataFrame, confidence: float) -> dict:
    from scipy import stats

    yes, no = frame[frame["assisted"]], frame[~frame["assisted"]]
    row = {"system": name, "difference": np.nan, "ci_low": np.nan, "ci_high": np.nan, "p_value": np.nan,
           "method": "", "segments_paired": 0, "assisted_answers": len(yes), "unassisted_answers": len(no)}
    key = frame["system"] + "\x00" + frame["segment"].astype(str)  # a segment is one system's output of an item
    means = frame.assign(key=key).groupby(["key", "assisted"])["value"].mean().unstack("assisted")
    paired = means.dropna() if {True, False} <= set(means.columns) else means.iloc[:0]
    if len(paired) >= 2:
        differences = (paired[True] - paired[False]).to_numpy(float)
        test = stats.ttest_1samp(differences, 0.0)
        row.update(method="paired t over segments", segments_paired=len(paired))
    elif len(yes) >= 2 and len(no) >= 2:
        differences = None
        test = stats.ttest_ind(yes["value"].to_numpy(float), no["value"].to_numpy(float), equal_var=False)
        row["method"] = "Welch t over answers (no segment in both conditions)"
    else:
        return row
    interval = test.confidence_interval(confidence)
    difference = differences.mean() if differences is not None else yes["value"].mean() - no["value"].mean()
    row.update(difference=float(difference), ci_low=float(interval.low), ci_high=float(interval.high),
               p_value=float(test.pvalue))
    return row


def verdict(table: pd.DataFrame, confidence: float = 0.95) -> str:
    """One line on the overall row of assisted_difference: whether assisted scores differ from unassisted ones."""
    if table.empty:
        return "Automation bias: no answers to compare."
    overall = table.iloc[-1]
    counts = (f"{int(overall['assisted_answers'])} answers shown the prediction, "
              f"{int(overall['unassisted_answers'])} without")
    if pd.isna(overall["difference"]):
        return f"Automation bias: not measurable yet ({counts}; each condition needs two answers or more)."
    span = (f"{overall['difference']:+.2f} (assisted minus unassisted, {confidence:.0%} CI {overall['ci_low']:+.2f} "
            f"to {overall['ci_high']:+.2f}; {overall['method']}"
            + (f", {int(overall['segments_paired'])} segments" if overall["segments_paired"] else "")
            + f"; {counts})")
    if overall["ci_low"] > 0 or overall["ci_high"] < 0:
        said = "assisted scores differ from unassisted ones: the prediction moved the annotators' scores"
    else:
        said = "no difference shown between assisted and unassisted scores at this size"
    return f"Automation bias: {span}: {said}."
