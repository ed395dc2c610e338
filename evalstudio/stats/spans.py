"""Statistics of error spans: pure, vectorised functions on frames of spans (one row per marked error).

- MQM scores (Freitag, Foster, Grangier, Ratnakar, Tan & Macherey 2021, "Experts, Errors, and Context: A
  Large-Scale Study of Human Evaluation for Machine Translation", TACL; the weighting of
  github:google/wmt-mqm-human-evaluation's README): a segment's score is the sum of its errors' weights (Major 5,
  Minor 1, Minor Fluency/Punctuation 0.1, Non-translation 25, Neutral 0), averaged over the raters of the segment;
  a system's score is the mean over its rated segments (lower is better). The weights are rules, the first that
  matches an error decides, and a study may give its own.
- ESA scores (Kocmi, Zouhar, Avramidis, Grundkiewicz, Karpinska, Popovic, Sachan & Shmatova 2024, "Error Span
  Annotation: A Balanced Approach for Human Evaluation of Machine Translation", WMT): the 0-100 score the annotator
  gives after marking the spans, averaged per segment and per system (higher is better).
- System clusters: systems ordered by score; a paired permutation test over segments (each resample swaps a
  segment's two system scores with probability 1/2, as PERM-BOTH does for metrics: Deutsch, Dror & Roth 2021) and
  the greedy clusters of `significance.significance_clusters` (WMT's ranking).
- Span agreement between two annotators of the same segments: character-level precision, recall and F1 of the
  characters one marks against the other's (the character-level span measure of the WMT 2023 quality-estimation
  task, Blain et al. 2023, which ESA's authors use for span overlap), and Krippendorff's alpha (nominal) on each
  character's label (no error / a severity): chance-corrected, the number `agreement.krippendorff_alpha` gives,
  computed from the two annotators' table of label pairs (`nominal_alpha_two_coders`).
- ESA's own agreement measures (Kocmi et al. 2024, above, and Zouhar, Kocmi & Sachan 2024, "AI-Assisted Human
  Evaluation of Machine Translation", arXiv:2406.12419; their definitions are those of the scripts of
  github:wmt-conference/ErrorSpanAnnotation, scripts/ESA/experiments/*_annotator_agreement.py, re-written here):
  span level, the share of one annotator's spans that overlap a span of the other (`esa_overlaps`), and with the
  same severity; segment level, Kendall's tau-c and Pearson's r of the two annotators' scores and the share of
  segments on which both agree whether there is an error, a minor one, a major one (`esa_segment_agreement`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .significance import significance_clusters

# (severity, category, weight): '' matches any; a category matches itself and its sub-categories ("Fluency" matches
# "Fluency/Punctuation"); case is ignored. The first rule that matches an error gives its weight.
MQM_WEIGHTS: tuple[tuple[str, str, float], ...] = (
    ("", "Non-translation", 25.0),
    ("Major", "", 5.0),
    ("Minor", "Fluency/Punctuation", 0.1),
    ("Minor", "", 1.0),
    ("Neutral", "", 0.0),
    ("No-error", "", 0.0),
)


def _matches(values: pd.Series, wanted: str) -> np.ndarray:
    """Which values are `wanted` or one of its sub-categories ('Fluency' matches 'Fluency/Punctuation'; the MQM
    files write the whole-segment error 'Non-translation!'), ignoring case; '' matches every value."""
    if wanted == "":
        return np.ones(len(values), dtype=bool)
    low, w = values.str.lower().str.strip(), wanted.lower()
    return (low == w).to_numpy() | low.str.startswith(w + "/").to_numpy() | (low == w + "!").to_numpy()


def mqm_weights(severity, category, rules=MQM_WEIGHTS) -> np.ndarray:
    """Each error's weight by the first rule (severity, category, weight) it matches; NaN where none matches (the
    reader reports those: an unknown severity is never a plausible zero).

    The published weighting (google/wmt-mqm-human-evaluation): a Non-translation weighs as five Major errors.
    >>> mqm_weights(["Major", "Minor", "Minor", "Major", "Neutral", "No-error"],
    ...             ["Accuracy/Mistranslation", "Fluency/Punctuation", "Style/Awkward", "Non-translation!", "Style", "No-error"])
    array([ 5. ,  0.1,  1. , 25. ,  0. ,  0. ])
    """
    severity = pd.Series(np.asarray(severity, dtype=object)).fillna("").astype(str)
    category = pd.Series(np.asarray(category, dtype=object)).fillna("").astype(str)
    weight = np.full(len(severity), np.nan)
    for sev, cat, w in reversed(tuple(rules)):  # the first rule wins: apply the last first
        hit = _matches(severity, sev) & _matches(category, cat)
        weight[hit] = float(w)
    return weight


def mqm_segment_scores(errors: pd.DataFrame, keys=("system", "item")) -> pd.DataFrame:
    """MQM score per segment: each rater's sum of error weights (`errors`: one row per error with the `keys`,
    `annotator` and `weight`; a rated segment without errors has a row of weight 0), averaged over the segment's
    raters. Columns: keys, raters, score.

    >>> errors = pd.DataFrame({"system": ["A", "A", "A", "A"], "item": ["1", "1", "1", "2"],
    ...                        "annotator": ["r1", "r1", "r2", "r1"], "weight": [5.0, 1.0, 0.0, 0.1]})
    >>> mqm_segment_scores(errors)
      system item  raters  score
    0      A    1       2   3.0
    1      A    2       1   0.1
    """
    keys = list(keys)
    per_rater = errors.groupby(keys + ["annotator"], sort=True, observed=True)["weight"].sum()
    grouped = per_rater.groupby(level=keys, sort=True, observed=True)
    return pd.DataFrame({"raters": grouped.size(), "score": grouped.mean()}).reset_index()


def system_scores(segments: pd.DataFrame, column: str = "score") -> pd.DataFrame:
    """Each system's mean segment score and its number of segments (system, segments, score).

    >>> system_scores(pd.DataFrame({"system": ["A", "A", "B"], "score": [1.0, 0.0, 2.0]}))
      system  segments  score
    0      A         2    0.5
    1      B         1    2.0
    """
    grouped = segments.groupby("system", sort=True, observed=True)[column]
    return pd.DataFrame({"segments": grouped.size(), "score": grouped.mean()}).reset_index()


def flip_signs(resamples: int, segments: int, seed: int = 0) -> np.ndarray:
    """resamples x segments of -1 and +1 (float32), each with probability 1/2: which segments' two scores a
    resample of the paired permutation test swaps (one random bit each). The same signs serve every pair."""
    bits = np.unpackbits(np.frombuffer(np.random.default_rng(seed).bytes((resamples * segments + 7) // 8),
                                       dtype=np.uint8))[: resamples * segments]
    return (bits.astype(np.float32) * 2 - 1).reshape(resamples, segments)


def pair_p(first: np.ndarray, second: np.ndarray, signs: np.ndarray, chunk: int = 100) -> float:
    """One-sided p-value of "`first` scores higher than `second`" (scores of the same segments, NaN: not rated;
    the segments both have count) by the paired permutation test: the share of resamples (`flip_signs`) whose mean
    difference is at least the observed one."""
    diff = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    both = ~np.isnan(diff)
    if not both.any():
        return float("nan")
    diff = np.where(both, diff, 0.0).astype(np.float32)  # a segment one of the two lacks adds 0, flipped or not
    observed = float(diff.sum(dtype=np.float64)) / both.sum()
    tolerance = 1e-6 * max(1.0, float(np.abs(diff).max()))  # float32 sums: a tie is within this
    above = 0
    for start in range(0, len(signs), chunk):
        permuted = (signs[start:start + chunk] @ diff) / both.sum()
        above += int(np.count_nonzero(permuted >= observed - tolerance))
    return above / len(signs)


def paired_permutation(matrix: np.ndarray, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """p[a, b]: `pair_p` of systems a and b of a `systems x segments` matrix, for every pair, with the same
    resamples."""
    matrix = np.asarray(matrix, dtype=float)
    signs = flip_signs(resamples, matrix.shape[1], seed)
    n = matrix.shape[0]
    p = np.full((n, n), np.nan)
    for a in range(n):
        for b in range(n):
            if a != b:
                p[a, b] = pair_p(matrix[a], matrix[b], signs)
    return p


class _PairP:
    """The p-values `significance_clusters` asks for (`.loc[a, b]`), computed when asked: the greedy clusters
    compare each system with the head of its cluster only (n - 1 tests, not n^2)."""

    def __init__(self, wide: pd.DataFrame, signs: np.ndarray):
        self.wide, self.signs, self.loc = wide, signs, self

    def __getitem__(self, pair) -> float:
        a, b = pair
        return pair_p(self.wide.loc[a].to_numpy(), self.wide.loc[b].to_numpy(), self.signs)


def system_clusters(segments: pd.DataFrame, higher_is_better: bool, resamples: int = 1000, alpha: float = 0.05,
                    seed: int = 0) -> pd.DataFrame:
    """Systems ranked by mean segment score (`segments`: system, item, score) with significance clusters: a new
    cluster starts at a system significantly worse (paired permutation, `alpha`) than the best of the current one
    (`significance.significance_clusters`, WMT's greedy ranking). Columns: system, segments, score, rank, cluster."""
    wide = segments.pivot_table(index="system", columns="item", values="score", aggfunc="mean", observed=True)
    oriented = wide if higher_is_better else -wide
    table = system_scores(segments)
    goodness = table.set_index("system")["score"] * (1 if higher_is_better else -1)
    cluster = significance_clusters(goodness, _PairP(oriented, flip_signs(resamples, wide.shape[1], seed)), alpha)
    table["rank"] = goodness.rank(ascending=False, method="min").astype(int).to_numpy()
    table["cluster"] = cluster.reindex(table["system"]).to_numpy()
    return table.sort_values(["rank", "system"]).reset_index(drop=True)


def _char_labels(spans: pd.DataFrame, lengths: pd.Series, codes: dict) -> np.ndarray:
    """One label per character of every segment (concatenated in `lengths`' order): 0 where no span of `spans`
    (segment, start, end, severity) covers it, else the code of the most severe covering span's severity."""
    offsets = np.concatenate([[0], np.cumsum(lengths.to_numpy(dtype=np.int64))])
    labels = np.zeros(int(offsets[-1]), dtype=np.int8)
    row = lengths.index.get_indexer(spans["segment"])
    keep = (row >= 0) & spans["start"].notna().to_numpy() & spans["end"].notna().to_numpy()
    if not keep.any():
        return labels
    row, spans = row[keep], spans[keep]
    size = lengths.to_numpy(dtype=np.int64)[row]
    start = np.clip(spans["start"].to_numpy(dtype=np.int64), 0, size) + offsets[row]
    end = np.clip(spans["end"].to_numpy(dtype=np.int64), 0, size) + offsets[row]
    code = spans["severity"].map(codes).fillna(1).to_numpy(dtype=np.int8)
    for level in sorted(set(code.tolist())):  # a more severe span overwrites a milder one
        pick = code == level
        depth = np.cumsum(np.bincount(start[pick], minlength=len(labels) + 1)
                          - np.bincount(end[pick], minlength=len(labels) + 1))[:-1]
        labels[depth > 0] = level
    return labels


def nominal_alpha_two_coders(first, second) -> float:
    """Krippendorff's alpha (nominal) of two coders who both labelled every unit, from the table of their label
    pairs: 1 - (n - 1) sum_{c != k} o_ck / sum_{c != k} n_c n_k (Krippendorff 2011, "Computing Krippendorff's
    Alpha-Reliability", coincidences o_ck of a unit's pairs of values, n_c = sum_k o_ck). The same number as
    `agreement.krippendorff_alpha` (tests/test_mqm.py checks it), in one pass over millions of characters.

    Krippendorff (2011) publishes alpha 0.095 for his first example (binary data, two observers, ten units):
    >>> round(nominal_alpha_two_coders([0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]), 3)
    0.095
    """
    a, b = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    k = int(max(a.max(initial=0), b.max(initial=0))) + 1
    table = np.bincount(a * k + b, minlength=k * k).reshape(k, k).astype(float)
    coincidence = table + table.T
    n_c = coincidence.sum(1)
    n = n_c.sum()
    expected = n * n - np.sum(n_c**2)
    if expected <= 0:
        return float("nan")
    return float(1 - (n - 1) * (n - np.trace(coincidence)) / expected)


def span_agreement(spans: pd.DataFrame, lengths: pd.Series, first, second,
                   severities=("Minor", "Major")) -> dict[str, float]:
    """Agreement of annotators `first` and `second` on the segments both annotated (`spans`: segment, annotator,
    start, end, severity, one row per span; `lengths`: each segment's text length, indexed by segment, for the
    segments both annotated, with or without spans). Character-level precision and recall of `second`'s marked
    characters against `first`'s, their F1 (and the same counting only characters both gave the same severity:
    `_label`), and Krippendorff's alpha (nominal) on the characters' labels (0: no
    error, else the severity's position in `severities`, the last the most severe).

    >>> spans = pd.DataFrame({"segment": ["s1", "s1"], "annotator": ["a", "b"], "start": [0, 2], "end": [4, 6],
    ...                       "severity": ["Major", "Major"]})
    >>> r = span_agreement(spans, pd.Series({"s1": 10}), "a", "b")
    >>> r["precision"], r["recall"], r["f1"]
    (0.5, 0.5, 0.5)
    """
    codes = {s: i + 1 for i, s in enumerate(severities)}
    who = spans["annotator"].to_numpy()
    a = _char_labels(spans[who == first], lengths, codes)
    b = _char_labels(spans[who == second], lengths, codes)
    both = int(np.count_nonzero((a > 0) & (b > 0)))
    same = int(np.count_nonzero((a > 0) & (a == b)))  # marked by both with the same severity
    marked_a, marked_b = int(np.count_nonzero(a)), int(np.count_nonzero(b))
    rates = {}
    for suffix, hits in (("", both), ("_label", same)):
        rates["precision" + suffix] = hits / marked_b if marked_b else np.nan
        rates["recall" + suffix] = hits / marked_a if marked_a else np.nan
        rates["f1" + suffix] = 2 * hits / (marked_a + marked_b) if marked_a + marked_b else np.nan
    alpha = nominal_alpha_two_coders(a, b) if len(a) else np.nan
    return {"characters": int(len(a)), "marked_first": marked_a, "marked_second": marked_b, "both": both,
            "same_label": same, **rates, "alpha": alpha}


def esa_overlaps(first: pd.DataFrame, second: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(overlaps, same severity): for each span of `first` (rows of segment, start, end, severity, and `control`
    when both frames have it), whether a span of `second` in the same segment (and control) overlaps it by ESA's
    rule, and whether one of those overlapping spans has the same severity (Kocmi et al. 2024; Zouhar et al. 2024).

    ESA's rule, reproduced as their scripts define it: span (start, end) of the first overlaps (start2, end2) of the
    second when start2 <= start <= end2 or start2 <= end <= end2, on the offsets as stored (Appraise's start_i,
    end_i); a span without offsets (ESA's [MISSING]) overlaps only another without offsets. The rule is asymmetric:
    a span of the first that strictly contains one of the second does not overlap it (neither of its ends lies in
    the other), while the second's span does overlap the first's. The published digits these measures reproduce
    (the ESA poster's, by benchmarks/esa_replay.py on the released campaigns: docs/spans.md) need the whole data,
    so the example is computed by hand:

    >>> a = pd.DataFrame({"segment": ["s"] * 4, "start": [0, 10, np.nan, 0], "end": [4, 12, np.nan, 20],
    ...                   "severity": ["Major", "Minor", "Major", "Minor"]})
    >>> b = pd.DataFrame({"segment": ["s"] * 3, "start": [3, np.nan, 15], "end": [8, np.nan, 16],
    ...                   "severity": ["Minor", "Major", "Minor"]})
    >>> esa_overlaps(a, b)
    (array([ True, False,  True, False]), array([False, False,  True, False]))
    >>> esa_overlaps(b, a)[0]
    array([ True,  True,  True])
    """
    keys = ["segment"] + (["control"] if "control" in first.columns and "control" in second.columns else [])
    n = len(first)

    def codes(column: str) -> np.ndarray:  # integers for the values of both frames: merging on them is fast
        both = pd.concat([first[column], second[column]], ignore_index=True)
        return pd.factorize(both.astype(str) if column == "severity" else both)[0]

    coded = pd.DataFrame({**{k: codes(k) for k in keys}, "severity": codes("severity"),
                          "start": np.concatenate([first["start"].to_numpy(float), second["start"].to_numpy(float)]),
                          "end": np.concatenate([first["end"].to_numpy(float), second["end"].to_numpy(float)])})
    mine = coded.iloc[:n].assign(_row=np.arange(n))
    pairs = mine.merge(coded.iloc[n:], on=keys, suffixes=("", "_2"))
    start, end = pairs["start"].to_numpy(), pairs["end"].to_numpy()
    start2, end2 = pairs["start_2"].to_numpy(), pairs["end_2"].to_numpy()
    gap, gap2 = np.isnan(start), np.isnan(start2)
    with np.errstate(invalid="ignore"):
        inside = ((start2 <= start) & (start <= end2)) | ((start2 <= end) & (end <= end2))
    hit = np.where(gap | gap2, gap & gap2, inside)
    same = hit & (pairs["severity"].to_numpy() == pairs["severity_2"].to_numpy())
    row = pairs["_row"].to_numpy(np.int64)
    return np.bincount(row[hit], minlength=n) > 0, np.bincount(row[same], minlength=n) > 0


def esa_segment_agreement(first, second, errors_first, errors_second) -> dict[str, float]:
    """ESA's segment-level agreement of two annotators on the same segments (Kocmi et al. 2024; Zouhar et al.
    2024): Kendall's tau-c (scipy's variant "c", as their scripts call it) and Pearson's r of the scores `first`
    and `second`, and for each column of the boolean tables `errors_first` and `errors_second` (one row per segment,
    e.g. any error, a minor one, a major one) the share of segments on which the two agree (both or neither), which
    the papers call "error recall". NaN where a correlation is undefined (fewer than two segments, a constant score).

    Hand-computed (the published digits need the whole data, see `esa_overlaps`): of the 3 pairs of segments 2 are
    ordered alike and 1 not, so tau-c = 2 (2 - 1) / (3^2 (3 - 1) / 3) = 1/3; r = 2500 / 5000 = 0.5.
    >>> r = esa_segment_agreement([0, 50, 100], [0, 100, 50], pd.DataFrame({"any": [True, True, False]}),
    ...                           pd.DataFrame({"any": [True, False, False]}))
    >>> round(r["kendall_tau_c"], 3), round(r["pearson"], 3), round(r["any"], 3)
    (0.333, 0.5, 0.667)
    """
    from scipy import stats

    x, y = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    varied = len(x) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0
    out = {"kendall_tau_c": float(stats.kendalltau(x, y, variant="c")[0]) if varied else np.nan,
           "pearson": float(np.corrcoef(x, y)[0, 1]) if varied else np.nan}
    a, b = pd.DataFrame(errors_first), pd.DataFrame(errors_second)
    for col in a.columns:
        same = a[col].to_numpy(bool) == b[col].to_numpy(bool)
        out[col] = float(same.mean()) if len(same) else np.nan
    return out
