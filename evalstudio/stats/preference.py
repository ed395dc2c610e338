"""Pairwise preferences and best-worst scaling: win rates, Bradley-Terry strengths with bootstrap intervals, Elo
ratings as Chatbot Arena computes them, a test of position bias, best-worst tuples and counting scores with their
split-half reliability. Pure functions on arrays and tidy frames.

Comparisons are a frame with one row per judgement: `left`, `right` (the two systems, as shown) and `outcome`, one
of "left", "right", "tie" or "both_bad" (a tie in which neither is good; both count as ties in strengths and
rates).

References:
- Bradley & Terry (1952), Rank analysis of incomplete block designs. Biometrika 39.
- Hunter (2004), MM algorithms for generalized Bradley-Terry models. Annals of Statistics 32 (the MM update and the
  condition for a finite maximum: every split of the systems into two groups has a win across it both ways).
- Zheng et al. (2023), Judging LLM-as-a-judge with MT-Bench and Chatbot Arena; Chiang et al. (2024), Chatbot Arena
  (online Elo with K = 4, scale 400, base 10, start 1000; ties count half; the Bradley-Terry fit on the Elo scale).
- Wilson (1927), Probable inference, the law of succession, and statistical inference. JASA 22 (score interval).
- Kiritchenko & Mohammad (2016, 2017), Capturing reliable fine-grained sentiment associations by crowdsourcing and
  best-worst scaling; Best-worst scaling more reliable than rating scales (counting scores: %best - %worst;
  split-half reliability: Spearman correlation of the scores from two random halves of the annotations, averaged
  over many splits).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

OUTCOMES = ("left", "right", "tie", "both_bad")


def _coded(comparisons: pd.DataFrame) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """(systems sorted, left codes, right codes, score of left: 1 win, 0 loss, 0.5 tie)."""
    missing = [c for c in ("left", "right", "outcome") if c not in comparisons]
    if missing:
        raise ValueError(f"comparisons need the columns left, right and outcome; missing: {', '.join(missing)}")
    outcome = comparisons["outcome"].astype(str).to_numpy()
    unknown = sorted(set(outcome) - set(OUTCOMES))
    if unknown:
        raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}; got {', '.join(map(repr, unknown[:5]))}")
    left, right = comparisons["left"].astype(str).to_numpy(), comparisons["right"].astype(str).to_numpy()
    if (left == right).any():
        raise ValueError("a system compared with itself")
    systems = sorted(set(left) | set(right))
    index = {s: i for i, s in enumerate(systems)}
    score = np.select([outcome == "left", outcome == "right"], [1.0, 0.0], 0.5)
    return systems, np.array([index[s] for s in left]), np.array([index[s] for s in right]), score


def win_rates(comparisons: pd.DataFrame, z: float = 1.959964) -> pd.DataFrame:
    """Per system: comparisons, wins, losses, ties, win rate (ties count half, as AlpacaEval and Chatbot Arena
    count them) with Wilson's score interval (on the half-counted wins)."""
    systems, a, b, score = _coded(comparisons)
    n = len(systems)
    played = np.bincount(a, minlength=n) + np.bincount(b, minlength=n)
    wins = np.bincount(a, weights=score == 1, minlength=n) + np.bincount(b, weights=score == 0, minlength=n)
    ties = np.bincount(a, weights=score == 0.5, minlength=n) + np.bincount(b, weights=score == 0.5, minlength=n)
    rate = (wins + ties / 2) / played
    centre = (rate + z * z / (2 * played)) / (1 + z * z / played)
    half = z * np.sqrt(rate * (1 - rate) / played + z * z / (4 * played ** 2)) / (1 + z * z / played)
    return pd.DataFrame({"system": systems, "comparisons": played.astype(int), "wins": wins.astype(int),
                         "losses": (played - wins - ties).astype(int), "ties": ties.astype(int), "win_rate": rate,
                         "lo": centre - half, "hi": centre + half}).sort_values("win_rate", ascending=False,
                                                                                  ignore_index=True)


def _strongly_connected(wins: np.ndarray) -> bool:
    """Hunter's condition: in the directed graph i -> j when i beat j at least once (a tie is half a win each
    way), every system reaches every other: one strongly connected component."""
    from scipy.sparse.csgraph import connected_components

    return connected_components(wins > 0, directed=True, connection="strong")[0] == 1


def _mm(wins: np.ndarray, max_iter: int = 10_000, tol: float = 1e-10) -> np.ndarray:
    """Bradley-Terry strengths by Hunter's MM update for a stack of win matrices (..., n, n): wins[..., i, j] is
    how often i beat j. Strengths normalised to a geometric mean of 1."""
    games = wins + np.swapaxes(wins, -1, -2)
    total = wins.sum(axis=-1)
    p = np.ones(wins.shape[:-1])
    for _ in range(max_iter):
        with np.errstate(divide="ignore", invalid="ignore"):
            denominator = (games / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
            new = total / denominator
        new = new / np.exp(np.log(new).mean(axis=-1, keepdims=True))
        if np.nanmax(np.abs(new - p)) < tol:
            return new
        p = new
    return p


def _win_matrix(a: np.ndarray, b: np.ndarray, score: np.ndarray, n: int) -> np.ndarray:
    """wins[i, j]: how often i beat j (a tie half each way)."""
    out = np.bincount(a * n + b, weights=score, minlength=n * n) + np.bincount(b * n + a, weights=1 - score,
                                                                               minlength=n * n)
    return out.reshape(n, n)


def _bootstrap_wins(a: np.ndarray, b: np.ndarray, score: np.ndarray, n: int, n_boot: int, rng) -> np.ndarray:
    """Win matrices of `n_boot` bootstrap resamples of the comparisons (n_boot x n x n). A comparison is one of a
    few kinds (its pair and its score), so a resample is a multinomial draw of how many of each kind it holds:
    the same distribution as drawing the comparisons one by one, in memory independent of their number."""
    kinds, counts = np.unique(np.stack([a, b, (score * 2).astype(int)]), axis=1, return_counts=True)
    drawn = rng.multinomial(len(a), counts / counts.sum(), size=n_boot)  # n_boot x kinds
    half = kinds[2] / 2
    out = np.zeros((n_boot, n * n))
    np.add.at(out.T, kinds[0] * n + kinds[1], (drawn * half).T)
    np.add.at(out.T, kinds[1] * n + kinds[0], (drawn * (1 - half)).T)
    return out.reshape(n_boot, n, n)


def bradley_terry(comparisons: pd.DataFrame, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Bradley-Terry strengths (maximum likelihood, Hunter's MM algorithm; ties count half a win each way) with
    percentile bootstrap intervals over comparisons, also on Chatbot Arena's Elo scale (400 log10 strength + 1000,
    with the geometric mean of the strengths at 1000). ValueError when the strengths are not finite (Hunter's
    condition fails: some group of systems never beat, or never lost to, the rest). Resamples in which the
    condition fails are left out of the interval (`resamples_used` says how many were kept)."""
    systems, a, b, score = _coded(comparisons)
    n = len(systems)
    if n < 2:
        raise ValueError("Bradley-Terry needs two or more systems")
    wins = _win_matrix(a, b, score, n)
    if not _strongly_connected(wins):
        raise ValueError("the strengths are not finite: some systems never beat (or never lost to) the others; "
                         "compare them with more systems or more often")
    strength = _mm(wins)
    out = pd.DataFrame({"system": systems, "strength": strength, "elo": 400 * np.log10(strength) + 1000})
    if n_boot:
        stack = _bootstrap_wins(a, b, score, n, n_boot, np.random.default_rng(seed))
        usable = np.array([_strongly_connected(w) for w in stack])
        boot = _mm(stack[usable]) if usable.any() else np.full((0, n), np.nan)
        tail = (1 - level) / 2 * 100
        lo, hi = (np.percentile(boot, [tail, 100 - tail], axis=0) if len(boot) else (np.full(n, np.nan),) * 2)
        out = out.assign(lo=lo, hi=hi, elo_lo=400 * np.log10(lo) + 1000, elo_hi=400 * np.log10(hi) + 1000,
                         resamples_used=int(usable.sum()))
    return out.sort_values("strength", ascending=False, ignore_index=True)


def online_elo(comparisons: pd.DataFrame, k: float = 4.0, scale: float = 400.0, base: float = 10.0,
               initial: float = 1000.0) -> pd.DataFrame:
    """Elo ratings updated comparison by comparison in the frame's order, as Chatbot Arena's notebook computes them
    (K = 4; a tie or both-bad is half a win). Order-dependent by design: Arena reports the Bradley-Terry fit for
    its leaderboard (`bradley_terry`'s `elo`)."""
    systems, a, b, score = _coded(comparisons)
    rating = np.full(len(systems), initial, dtype=float)
    for i, j, s in zip(a.tolist(), b.tolist(), score.tolist()):
        expected = 1 / (1 + base ** ((rating[j] - rating[i]) / scale))
        rating[i] += k * (s - expected)
        rating[j] += k * ((1 - s) - (1 - expected))
    return pd.DataFrame({"system": systems, "elo": rating}).sort_values("elo", ascending=False, ignore_index=True)


def position_bias(comparisons: pd.DataFrame) -> dict:
    """Whether the side shown first wins more often than chance: among decisive judgements, the share won by the
    left one, with an exact two-sided binomial test against 1/2."""
    from scipy.stats import binomtest

    _coded(comparisons)  # validates
    outcome = comparisons["outcome"].astype(str)
    left, right = int((outcome == "left").sum()), int((outcome == "right").sum())
    decisive = left + right
    if decisive == 0:
        return {"decisive": 0, "left_wins": 0, "left_share": float("nan"), "p": float("nan")}
    return {"decisive": decisive, "left_wins": left, "left_share": left / decisive,
            "p": float(binomtest(left, decisive, 0.5).pvalue)}


# ---- best-worst scaling --------------------------------------------------------------------------------------------

def bws_tuples(items, size: int = 4, per_item: int = 8, tries: int = 100, seed: int = 0) -> list[tuple]:
    """Tuples of `size` items in which every item appears `per_item` times (Kiritchenko & Mohammad use 2N tuples of
    4, i.e. 8 per item), no item twice in a tuple, and pairs of items co-occurring as evenly as the design allows:
    of `tries` random designs (each a series of shuffled passes over the items, cut into tuples) the one whose pair
    co-occurrence counts vary least, then evened out by swapping items between tuples. Needs len(items) * per_item
    divisible by size."""
    items = list(items)
    n = len(items)
    if len(set(items)) != n:
        raise ValueError("the items must be distinct")
    if n < size:
        raise ValueError(f"{n} items cannot fill a tuple of {size}")
    if (n * per_item) % size:
        raise ValueError(f"{n} items x {per_item} appearances is not a whole number of tuples of {size}")
    rng = np.random.default_rng(seed)
    best, best_spread = None, np.inf
    for _ in range(tries):
        slots = np.concatenate([rng.permutation(n) for _ in range(per_item)])
        tuples = slots.reshape(-1, size)
        for _ in range(100):  # repair tuples holding an item twice by swapping with a random other slot
            bad = np.flatnonzero([len(set(t)) < size for t in tuples])
            if not len(bad):
                break
            for t in bad:
                row = tuples[t]
                position = int(np.flatnonzero(np.r_[False, [row[i] in row[:i] for i in range(1, size)]])[0])
                other = rng.integers(len(tuples))
                column = rng.integers(size)
                row[position], tuples[other, column] = tuples[other, column], row[position]
        if any(len(set(t)) < size for t in tuples):
            continue
        together = np.zeros((n, n))
        for t in tuples:
            together[np.ix_(t, t)] += 1
        spread = together[np.triu_indices(n, 1)].std()
        if spread < best_spread:
            best, best_spread = tuples.copy(), spread
    if best is None:
        raise ValueError("no design without repeated items was found; use more items or larger tuples")
    _even_out(best, n, rng, swaps=50 * best.size)
    return [tuple(items[i] for i in t) for t in best]


def _even_out(tuples: np.ndarray, n: int, rng, swaps: int) -> None:
    """Local search on a design: swap two items between two tuples whenever that lowers the sum of squared pair
    co-occurrence counts (the most even design has the smallest), keeping every item's count and no item twice in
    a tuple."""
    together = np.zeros((n, n), dtype=int)
    for t in tuples:
        together[np.ix_(t, t)] += 1
    np.fill_diagonal(together, 0)
    size = tuples.shape[1]
    for _ in range(swaps):
        t1, t2 = rng.integers(len(tuples), size=2)
        i, j = rng.integers(size, size=2)
        x, y = tuples[t1, i], tuples[t2, j]
        if t1 == t2 or x == y or y in tuples[t1] or x in tuples[t2]:
            continue
        rest1, rest2 = np.delete(tuples[t1], i), np.delete(tuples[t2], j)
        only1, only2 = np.setdiff1d(rest1, rest2), np.setdiff1d(rest2, rest1)  # an item in both changes nothing
        # x leaves only1 for only2, y leaves only2 for only1 (x and y are never together)
        changes = ((x, only1, -1), (y, only2, -1), (y, only1, 1), (x, only2, 1))
        delta = sum(((together[a, others] + step) ** 2 - together[a, others] ** 2).sum() for a, others, step in changes)
        if delta < 0:
            for a, others, step in changes:
                together[a, others] += step
                together[others, a] += step
            tuples[t1, i], tuples[t2, j] = y, x


def bws_scores(annotations: pd.DataFrame) -> pd.DataFrame:
    """Counting scores of best-worst annotations (Kiritchenko & Mohammad 2016): per item, the share of its
    appearances in which it was chosen best minus the share in which it was chosen worst, in [-1, 1].

    annotations: one row per (tuple annotation, item): `annotation` (one annotator's judgement of one tuple),
    `item`, `choice` ("best", "worst" or ""); each annotation has exactly one best and one worst."""
    missing = [c for c in ("annotation", "item", "choice") if c not in annotations]
    if missing:
        raise ValueError(f"best-worst annotations need the columns annotation, item and choice; missing: "
                         f"{', '.join(missing)}")
    choice = annotations["choice"].fillna("").astype(str)
    unknown = sorted(set(choice) - {"best", "worst", ""})
    if unknown:
        raise ValueError(f"choice must be best, worst or empty; got {', '.join(map(repr, unknown[:5]))}")
    per = pd.DataFrame({"annotation": annotations["annotation"], "best": choice == "best",
                        "worst": choice == "worst"}).groupby("annotation")[["best", "worst"]].sum()
    wrong = per[(per["best"] != 1) | (per["worst"] != 1)]
    if len(wrong):
        raise ValueError(f"{len(wrong)} annotation(s) without exactly one best and one worst, e.g. "
                         f"{wrong.index[0]!r}")
    frame = pd.DataFrame({"item": annotations["item"].to_numpy(), "best": (choice == "best").to_numpy(),
                          "worst": (choice == "worst").to_numpy()})
    counts = frame.groupby("item").agg(appearances=("best", "size"), best=("best", "sum"), worst=("worst", "sum"))
    counts["score"] = (counts["best"] - counts["worst"]) / counts["appearances"]
    return counts.reset_index().sort_values("score", ascending=False, ignore_index=True)


def split_half_reliability(annotations: pd.DataFrame, splits: int = 100, seed: int = 0) -> dict:
    """Kiritchenko & Mohammad's split-half reliability of best-worst scores: the annotations of each tuple are
    split at random into two halves (`tuple` column; an odd one out goes to a random half), scores are computed
    from each half, and their Spearman correlation is averaged over `splits` random splits. Items missing from a
    half are left out of that split's correlation."""
    import warnings

    from scipy.stats import ConstantInputWarning, spearmanr

    if "tuple" not in annotations:
        raise ValueError("split-half reliability needs the tuple each annotation belongs to (a `tuple` column)")
    bws_scores(annotations)  # validates
    rng = np.random.default_rng(seed)
    keys = annotations[["tuple", "annotation"]].drop_duplicates()
    values = []
    for _ in range(splits):
        order = keys.assign(r=rng.random(len(keys))).sort_values(["tuple", "r"])
        rank = order.groupby("tuple").cumcount()
        size = order.groupby("tuple")["annotation"].transform("size")
        coin = rng.integers(0, 2, len(order))  # the odd one out of a tuple with an odd number of annotations
        first = (rank < size // 2) | ((rank == size // 2) & (size % 2 == 1) & (coin == 1))
        half = set(order.loc[first.to_numpy(), "annotation"])
        in_first = annotations["annotation"].isin(half)
        one = bws_scores(annotations[in_first]).set_index("item")["score"]
        two = bws_scores(annotations[~in_first]).set_index("item")["score"]
        both = one.index.intersection(two.index)
        if len(both) >= 3:
            with warnings.catch_warnings():  # a half whose scores are all equal: undefined, left out by nanmean
                warnings.simplefilter("ignore", ConstantInputWarning)
                values.append(spearmanr(one[both], two[both]).statistic)
    values = np.asarray(values, dtype=float)
    return {"spearman": float(np.nanmean(values)) if len(values) else float("nan"), "splits": int(len(values))}
