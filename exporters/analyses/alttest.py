"""`analyze --alt-test JUDGE`: may the judge (a metric of --metrics whose scores are answers on a criterion's scale,
such as an LLM's ratings) replace the annotators? The alternative annotator test (evalstudio.stats.alttest) per
criterion: alt_test.csv (winning rate, pass, average advantage probability) and alt_test_annotators.csv (each
annotator's advantage probabilities, p-value and Benjamini-Yekutieli corrected p-value).

A segment is one system's output for one item; the annotators' answers and the judge's are matched by segment.
Nominal criteria are scored by accuracy (the share of the other annotators who gave the judge's label), ordinal and
interval ones by minus the root mean squared difference (the scoring column: accuracy or negative RMSE)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput
from evalstudio.readers.spec import Spec

from ...stats.alttest import alt_test

SUMMARY = ["criterion", "judge", "epsilon", "q", "annotators", "left_out", "winning_rate", "passes",
           "advantage_probability", "scoring"]


def alt_test_tables(ratings: pd.DataFrame, metrics: pd.DataFrame, spec: Spec, judge: str, epsilon: float = 0.2,
                    q: float = 0.05, min_items: int = 30, why=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary per criterion, per annotator) for the judge named `judge`."""
    known = sorted(set(metrics["metric"]))
    if judge not in known:
        raise BadInput(f"--alt-test {judge}: no such metric in the metrics file (it has: {', '.join(known[:20])})")
    summaries, per_annotator = [], []
    for criterion, crit in spec.criteria.items():
        r = ratings[ratings["criterion"] == criterion]
        if r.empty:
            continue
        segment = r["system"].astype(str) + " | " + r["item"].astype(str)
        wide = r.assign(segment=segment).pivot_table(index="segment", columns="annotator", values="value",
                                                      aggfunc="first")
        m = metrics[(metrics["metric"] == judge) & metrics["criterion"].isin([criterion, ""])]
        answers = pd.Series(m["value"].to_numpy(), index=(m["system"].astype(str) + " | " + m["item"].astype(str))
                            .to_numpy())
        answers = answers[~answers.index.duplicated()].reindex(wide.index)
        if answers.notna().sum() == 0:
            if why is not None:
                why.add("alt_test", criterion, f"{judge} answered none of the rated segments")
            continue
        numeric = crit.scale != "nominal"
        if numeric:
            matrix, judged = wide.to_numpy(dtype=float), answers.to_numpy(dtype=float)
            if crit.min is not None and crit.max is not None:
                outside = judged[~np.isnan(judged)]
                outside = outside[(outside < crit.min) | (outside > crit.max)]
                if len(outside):
                    raise BadInput(f"--alt-test {judge}: its answer {outside[0]:g} for {criterion} is outside the "
                                   f"criterion's scale {crit.min:g}-{crit.max:g}: a judge answers on the annotators' "
                                   "scale")
        else:  # labels as codes; a number and its text ("2", 2.0) are one label
            codes = {label: k for k, label in enumerate(sorted(set(map(_key, r["value"])), key=str))}
            unknown = sorted({_key(v) for v in answers.dropna()} - set(codes), key=str)
            if unknown:
                # the labels as the spec declares them (or as the file has them), never as their float codes
                shown = {_key(label): label for label in crit.labels or []}
                shown.update({_key(v): str(v) for v in r["value"] if _key(v) not in shown})
                named = lambda key: shown.get(key, f"{key:g}" if isinstance(key, float) else str(key))
                raise BadInput(f"--alt-test {judge}: '{named(unknown[0])[:40]}' is not an answer the annotators gave "
                               f"for {criterion} ({', '.join(named(k) for k in list(codes)[:10])})")
            code = lambda v: codes.get(_key(v), np.nan) if pd.notna(v) else np.nan
            matrix = wide.apply(lambda col: col.map(code)).to_numpy(dtype=float)
            judged = answers.map(code).to_numpy(dtype=float)
        result, table = alt_test(matrix, judged, numeric, epsilon, q, min_items, list(wide.columns))
        if result.annotators == 0:
            if why is not None:
                why.add("alt_test", criterion, f"no annotator rated {min_items} or more segments that {judge} and "
                                               "another annotator rated too (the test needs them; the paper uses 30)")
            continue
        summaries.append({"criterion": criterion, "judge": judge, "epsilon": epsilon, "q": q,
                          "annotators": result.annotators, "left_out": result.left_out,
                          "winning_rate": result.winning_rate, "passes": result.passes,
                          "advantage_probability": result.advantage_probability,
                          "scoring": "negative RMSE" if numeric else "accuracy"})
        per_annotator.append(table.assign(criterion=criterion, judge=judge))
    cat = lambda parts: pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return pd.DataFrame(summaries, columns=SUMMARY), cat(per_annotator)


def _key(value):
    """A label as one value: numbers as floats (2, "2" and 2.0 alike), anything else as its text."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)
