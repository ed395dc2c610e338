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
  character's label (no error / a severity), by `agreement.krippendorff_alpha`: chance-corrected.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .agreement import krippendorff_alpha
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


def paired_permutation(matrix: np.ndarray, resamples: int = 1000, seed: int = 0, chunk: int = 100) -> np.ndarray:
    """p[a, b]: one-sided p-value of "system a scores higher than system b" from a `systems x segments` matrix
    (NaN: not rated; each pair uses the segments both have), by swapping each segment's two scores with
    probability 1/2 in every resample (a sign flip of their difference). Every pair's differences are flipped by
    the same signs at once, as one matrix product per chunk of resamples. p = share of resamples whose mean
    difference is at least the observed one."""
    matrix = np.asarray(matrix, dtype=float)
    n = matrix.shape[0]
    a, b = np.triu_indices(n, 1)
    diff = matrix[a] - matrix[b]  # pairs x segments
    counts = (~np.isnan(diff)).sum(1)
    diff = np.nan_to_num(diff)  # a segment one of the two lacks adds 0, flipped or not
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = diff.sum(1) / counts
    rng = np.random.default_rng(seed)
    above = np.zeros(len(a))
    below = np.zeros(len(a))
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        signs = np.where(rng.random((size, matrix.shape[1])) < 0.5, -1.0, 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            permuted = (signs @ diff.T) / counts  # resamples x pairs
        above += (permuted >= observed - 1e-12).sum(0)
        below += (permuted <= observed + 1e-12).sum(0)
    p = np.full((n, n), np.nan)
    p[a, b] = np.where(counts > 0, above / resamples, np.nan)
    p[b, a] = np.where(counts > 0, below / resamples, np.nan)
    return p


def system_clusters(segments: pd.DataFrame, higher_is_better: bool, resamples: int = 1000, alpha: float = 0.05,
                    seed: int = 0) -> pd.DataFrame:
    """Systems ranked by mean segment score (`segments`: system, item, score) with significance clusters: a new
    cluster starts at a system significantly worse (paired permutation, `alpha`) than the best of the current one.
    Columns: system, segments, score, rank, cluster."""
    wide = segments.pivot_table(index="system", columns="item", values="score", aggfunc="mean", observed=True)
    oriented = wide.to_numpy() if higher_is_better else -wide.to_numpy()
    p = pd.DataFrame(paired_permutation(oriented, resamples, seed), index=wide.index, columns=wide.index)
    table = system_scores(segments)
    goodness = table.set_index("system")["score"] * (1 if higher_is_better else -1)
    cluster = significance_clusters(goodness, p, alpha)
    table["rank"] = goodness.rank(ascending=False, method="min").astype(int).to_numpy()
    table["cluster"] = cluster.reindex(table["system"]).to_numpy()
    return table.sort_values(["rank", "system"]).reset_index(drop=True)


def _char_labels(spans: pd.DataFrame, lengths: pd.Series, codes: dict) -> np.ndarray:
    """One label per character of every segment (concatenated in `lengths`' order): 0 where no span of `spans`
    (segment, start, end, severity) covers it, else the code of the most severe covering span's severity."""
    offsets = np.concatenate([[0], np.cumsum(lengths.to_numpy())])
    position = pd.Series(offsets[:-1], index=lengths.index)
    labels = np.zeros(int(offsets[-1]), dtype=np.int8)
    spans = spans[spans["segment"].isin(lengths.index) & spans["start"].notna() & spans["end"].notna()]
    if spans.empty:
        return labels
    base = position.reindex(spans["segment"]).to_numpy()
    size = lengths.reindex(spans["segment"]).to_numpy()
    start = np.clip(spans["start"].to_numpy(dtype=np.int64), 0, size)
    end = np.clip(spans["end"].to_numpy(dtype=np.int64), 0, size)
    code = spans["severity"].map(codes).fillna(1).to_numpy(dtype=np.int8)
    for level in sorted(set(code.tolist())):  # a more severe span overwrites a milder one
        pick = code == level
        delta = np.zeros(len(labels) + 1, dtype=np.int64)
        np.add.at(delta, (base + start)[pick], 1)
        np.add.at(delta, (base + end)[pick], -1)
        labels[np.cumsum(delta)[:-1] > 0] = level
    return labels


def span_agreement(spans: pd.DataFrame, lengths: pd.Series, first: str, second: str,
                   severities=("Minor", "Major")) -> dict[str, float]:
    """Agreement of annotators `first` and `second` on the segments both annotated (`spans`: segment, annotator,
    start, end, severity, one row per span; `lengths`: each segment's text length, indexed by segment, for the
    segments both annotated, with or without spans). Character-level precision and recall of `second`'s marked
    characters against `first`'s, their F1, and Krippendorff's alpha (nominal) on the characters' labels (0: no
    error, else the severity's position in `severities`, the last the most severe).

    >>> spans = pd.DataFrame({"segment": ["s1", "s1"], "annotator": ["a", "b"], "start": [0, 2], "end": [4, 6],
    ...                       "severity": ["Major", "Major"]})
    >>> r = span_agreement(spans, pd.Series({"s1": 10}), "a", "b")
    >>> r["precision"], r["recall"], r["f1"]
    (0.5, 0.5, 0.5)
    """
    codes = {s: i + 1 for i, s in enumerate(severities)}
    a = _char_labels(spans[spans["annotator"] == first], lengths, codes)
    b = _char_labels(spans[spans["annotator"] == second], lengths, codes)
    both = int(np.count_nonzero((a > 0) & (b > 0)))
    marked_a, marked_b = int(np.count_nonzero(a)), int(np.count_nonzero(b))
    precision = both / marked_b if marked_b else np.nan
    recall = both / marked_a if marked_a else np.nan
    f1 = 2 * both / (marked_a + marked_b) if marked_a + marked_b else np.nan
    units = np.tile(np.arange(len(a)), 2)
    values = np.concatenate([a, b]).astype(float)
    alpha = krippendorff_alpha(units, values, level="nominal") if len(a) and (a.any() or b.any()) else np.nan
    return {"characters": int(len(a)), "marked_first": marked_a, "marked_second": marked_b, "precision": precision,
            "recall": recall, "f1": f1, "alpha": alpha}
