"""Human labels where the judge is unsure, from files: which segments humans should label (`evalstudio active
draw`), the system means those labels and the judge give together (`evalstudio active estimate`), and PAC labels
(`evalstudio active pac`). The statistics are evalstudio.stats.active and evalstudio.stats.pac; this module reads
the judge's scores (`evalstudio judge`'s metrics.csv, or any metrics file), the draws file it writes, and the ratings.

The draws file is the design: one row per segment (system, item) with the judge's score, the probability the segment
had of being drawn and whether it was. The estimates use those probabilities, so the file must be the one the
labels were collected from: a segment drawn but not rated is an error (the estimate needs every drawn label), a
rating of a segment not drawn is left out (and counted)."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput
from evalstudio.base.numbers import percent
from evalstudio.readers.spec import Spec

from ...stats.active import active_means, label_weights, sampling_probabilities, systematic_draw
from ...stats.pac import NO_MAJORITY, pac_labels, pac_threshold
from ...stats.small_sample import mean_interval
from ..tables.tidy import segment_means

DRAW_COLUMNS = ["system", "item", "judge", "score", "uncertainty", "probability", "drawn", "design", "seed"]
# Calibration (benchmarks/active.py, the per-system table; docs/active.md): from 30 human labels per system the 95%
# intervals (t, lengthened where the scores are skewed) covered the published mean at least 0.939 of the time on
# average over the systems of HANNA, USR and SQuALITY and at least 0.929 on every system (2,000 replays per system
# and size, useless to good judges, human-only, uniform PPI++ and active; the lowest, USR's rated 4.8 on 1-5 with a
# good judge, 0.936 on 8,000); at 10 and 20 single systems fell to 0.920, and GPT-4o's stance share (0/1, a fifth)
# to 0.843 at 10 (docs/active.md). Below MIN_LABELS no interval is printed.
MIN_LABELS = 30
BELOW_MIN_LABELS = ("below, replayed on published labels, 95% intervals covered the truth as little as 0.84 of the "
                    "time (GPT-4o's stance share at 10 labels: docs/active.md)")
MAX_PLOTTED = 45  # systems, or pairs of systems, in one figure of index.html (10 systems have 45 pairs)


def _judge_scores(scores: pd.DataFrame, metric: str, criterion: str | None) -> pd.DataFrame:
    known = sorted(set(scores["metric"].astype(str)))
    if metric not in known:
        raise BadInput(f"--metric {metric}: no such metric or judge in the scores file (it has: "
                       f"{', '.join(known[:20])})")
    s = scores[scores["metric"].astype(str) == metric]
    if criterion is not None:
        s = s[s["criterion"].astype(str).isin([criterion, ""])]
        if s.empty:
            raise BadInput(f"--criterion {criterion}: {metric} has no score of it")
    columns = ["value"] + (["confidence"] if "confidence" in s else [])
    out = s.groupby(["system", "item"], observed=True)[columns].mean().reset_index()
    out["system"], out["item"] = out["system"].astype(str), out["item"].astype(str)
    return out


def _by_system(systems: pd.Series, budget: int, rng, probabilities) -> tuple[np.ndarray, np.ndarray]:
    """(probability, drawn) drawn system by system: each system gets its share of the budget (budget x its segments
    / all segments) spread over its segments by `probabilities(mask, share)`, and exactly that many labels to within
    one (`systematic_draw`), so that no system's labels fall short of what its share promised by chance or because
    the judge is surer of it."""
    probability, drawn = np.zeros(len(systems)), np.zeros(len(systems), dtype=bool)
    for system in pd.unique(systems):
        mine = (systems == system).to_numpy()
        probability[mine] = probabilities(mine, budget * mine.sum() / len(systems))
        drawn[mine] = systematic_draw(probability[mine], rng)
    return probability, drawn


def draw(scores: pd.DataFrame, metric: str, criterion: str | None, budget: int, design: str, mix: float,
         seed: int) -> pd.DataFrame:
    """The draws file. design "active": probabilities from the judge's uncertainty (1 - its confidence, which
    `evalstudio judge --samples K` gives), mixed with uniform (`mix`); "uniform": every segment budget / N; both
    drawn system by system (`_by_system`: each system its share of the budget, within one label); "pac": a uniform
    sample of exactly `budget` segments without replacement over all of them (the calibration sample of PAC
    labels)."""
    s = _judge_scores(scores, metric, criterion)
    n_items = len(s)
    if not 2 <= budget <= n_items:
        raise BadInput(f"--budget {budget}: must be between 2 and the {n_items} segments {metric} scored")
    rng = np.random.default_rng(seed)
    has_confidence = "confidence" in s and not s["confidence"].isna().all()
    uncertainty = 1 - s["confidence"].to_numpy(dtype=float) if has_confidence else np.full(n_items, np.nan)
    if design == "active":
        if not has_confidence:
            raise BadInput(f"{metric} has no confidence column: the active design draws from the judge's "
                           "uncertainty. Run `evalstudio judge --samples 5` (its confidence is the spread of five "
                           "answers), or use --design uniform")
        if s["confidence"].isna().any():
            raise BadInput(f"{int(s['confidence'].isna().sum())} of {metric}'s segments have no confidence: every "
                           "segment needs one (run the judge with --samples on all of them)")
        probability, drawn = _by_system(s["system"], budget, rng,
                                        lambda mine, share: sampling_probabilities(uncertainty[mine], share, mix))
        label = f"active (mix {mix:g}), by system"
    elif design == "uniform":
        probability, drawn = _by_system(s["system"], budget, rng, lambda mine, share: np.full(mine.sum(),
                                                                                              share / mine.sum()))
        label = "uniform, by system"
    elif design == "pac":
        probability = np.full(n_items, budget / n_items)
        drawn = np.zeros(n_items, dtype=bool)
        drawn[rng.choice(n_items, size=budget, replace=False)] = True
        label = f"pac sample of {budget}"
    else:
        raise BadInput(f"--design {design}: one of active, uniform, pac")
    return pd.DataFrame({"system": s["system"], "item": s["item"], "judge": metric, "score": s["value"],
                         "uncertainty": uncertainty, "probability": probability, "drawn": drawn, "design": label,
                         "seed": seed})[DRAW_COLUMNS]


def check_draws(draws: pd.DataFrame, source: str) -> pd.DataFrame:
    """The draws file as `active draw` wrote it, or an error naming the column it lacks."""
    missing = [c for c in DRAW_COLUMNS if c not in draws]
    if missing:
        raise BadInput(f"{source}: not a draws file (`evalstudio active draw` writes one): no column "
                       f"{', '.join(missing)}")
    d = draws.assign(system=draws["system"].astype(str), item=draws["item"].astype(str))
    p = pd.to_numeric(d["probability"], errors="coerce")
    bad = np.flatnonzero(~((p > 0) & (p <= 1)))
    if len(bad):
        raise BadInput(f"{source}:{bad[0] + 2}: probability: '{draws['probability'].iloc[bad[0]]}' is not in (0, 1]")
    flags = d["drawn"].astype(str).str.lower().map({"true": True, "false": False, "1": True, "0": False})
    if flags.isna().any():
        row = int(np.flatnonzero(flags.isna())[0])
        raise BadInput(f"{source}:{row + 2}: drawn: '{draws['drawn'].iloc[row]}' is not true or false")
    if d.duplicated(["system", "item"]).any():
        row = int(np.flatnonzero(d.duplicated(["system", "item"]))[0])
        raise BadInput(f"{source}:{row + 2}: item: a second row for this system and item")
    return d.assign(probability=p, drawn=flags.astype(bool))


def _human_matrix(ratings: pd.DataFrame, criterion: str, draws: pd.DataFrame) -> tuple[np.ndarray, int]:
    human = segment_means(ratings, criterion)
    y = np.array([human.at[s, i] if s in human.index and i in human.columns else np.nan
                  for s, i in zip(draws["system"], draws["item"])], dtype=float)
    undrawn = int((~draws["drawn"] & ~np.isnan(y)).sum())
    unrated = draws[draws["drawn"] & np.isnan(y)]
    if len(unrated):
        first = unrated.iloc[0]
        raise BadInput(f"{len(unrated)} drawn segments have no human rating of {criterion} (e.g. system "
                       f"'{first['system']}', item '{first['item']}'): the estimate needs every drawn label; "
                       "collect them, or estimate without the design (`analyze --ppi`)")
    return y, undrawn


def estimates(ratings: pd.DataFrame, spec: Spec, draws: pd.DataFrame, alpha: float = 0.05):
    """(per system, per pair of systems, notes): the active estimate of every numeric criterion's mean human score
    with its interval, from the drawn segments' ratings and the judge's scores on every segment."""
    rows, pair_rows, notes = [], [], []
    for criterion, crit in spec.criteria.items():
        if not crit.numeric or not (ratings["criterion"] == criterion).any():
            continue
        y, undrawn = _human_matrix(ratings, criterion, draws)
        if undrawn:
            notes.append(f"{criterion}: {undrawn} ratings of segments the design did not draw are left out (their "
                         "probability of being rated is not known)")
        terms = {}
        for system, g in draws.groupby("system", sort=True):
            index = g.index.to_numpy()
            n = int(g["drawn"].sum())
            row = {"criterion": criterion, "system": system, "segments": len(g), "labels": n}
            if n >= max(MIN_LABELS, 2) and len(g) >= 2:
                r = active_means(y[index][None], g["score"].to_numpy(float)[None],
                                 label_weights(g["probability"].to_numpy(float), g["drawn"].to_numpy())[None],
                                 alpha, return_terms=True)
                row |= {"estimate": r["estimate"][0], "lo": r["lo"][0], "hi": r["hi"][0], "lambda": r["lam"][0]}
                terms[system] = (pd.Series(r["terms"][0], index=g["item"].to_numpy()), n)
            else:
                row |= {"estimate": np.nan, "lo": np.nan, "hi": np.nan, "lambda": np.nan}
            rows.append(row)
        for a, b in combinations(sorted(terms), 2):
            (ta, na), (tb, nb) = terms[a], terms[b]
            common = ta.index.intersection(tb.index)
            if len(common) < 2:
                continue
            d = ta[common].to_numpy() - tb[common].to_numpy()
            lo, hi = mean_interval(d, max(min(na, nb) - 2, 1), alpha, labels=y)
            pair_rows.append({"criterion": criterion, "system_a": a, "system_b": b, "items": len(common),
                              "difference": d.mean(), "lo": lo, "hi": hi})
    if any(r["labels"] < MIN_LABELS for r in rows):
        notes.append(f"intervals are given from {MIN_LABELS} human labels per system: {BELOW_MIN_LABELS}")
    return pd.DataFrame(rows), pd.DataFrame(pair_rows), notes


def estimates_page(systems: pd.DataFrame, pairs: pd.DataFrame, notes: list[str], title: str,
                   alpha: float = 0.05) -> str:
    """`active estimate`'s index.html: per criterion its figure (`estimates_figure`), then the notes and both
    tables."""
    import html

    from .report import html_image, html_page, html_table

    body = [f"<h1>{html.escape(title)}</h1>"] + [f"<p>{html.escape(n)}</p>" for n in notes]
    for criterion, g in (systems.groupby("criterion", sort=False) if len(systems) else ()):
        d = pairs[pairs["criterion"] == criterion] if len(pairs) else pairs
        body.append(f"<h2>{html.escape(str(criterion))}</h2>")
        if len(g) > MAX_PLOTTED:
            body.append(f"<p>{len(g)} systems: too many to plot; their estimates are in the table below.</p>")
            continue
        if len(d) > MAX_PLOTTED:
            body.append(f"<p>{len(d)} pairs of systems: too many to plot; their differences are in the table "
                        "below.</p>")
            d = d.iloc[:0]
        body.append(html_image(estimates_figure(g, d, str(criterion), alpha)))
    body += ["<h2>Systems (active_systems.csv)</h2>", html_table(systems),
             "<h2>Pairs of systems (active_pairs.csv)</h2>", html_table(pairs)]
    return html_page(title, "\n".join(body))


def estimates_figure(systems: pd.DataFrame, pairs: pd.DataFrame, criterion: str, alpha: float = 0.05):
    """One criterion's figure: each system's estimate with its interval, top to bottom as in the table (a system
    with too few labels is named, without a point), and, beside it, each difference between two systems with its
    interval against zero."""
    from .report import plt

    panels = 2 if len(pairs) else 1
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 0.45 * max(len(systems), len(pairs)) + 1.4),
                             squeeze=False)
    ax = axes[0][0]
    shown = systems["estimate"].notna().to_numpy()
    y = np.arange(len(systems))[::-1]
    est, lo, hi = (systems[c].to_numpy(float)[shown] for c in ("estimate", "lo", "hi"))
    ax.errorbar(est, y[shown], xerr=np.vstack([est - lo, hi - est]), fmt="o", color="#1f4e79", capsize=3)
    ax.set_yticks(y, [f"{s} ({n} labels)" if ok else f"{s} ({n} labels: too few)"
                      for s, n, ok in zip(systems["system"], systems["labels"], shown)])
    ax.set_xlabel(f"{criterion}: mean human score, {percent(1 - alpha)} interval")
    ax.set_title("systems")
    if panels == 2:
        ax = axes[0][1]
        y = np.arange(len(pairs))[::-1]
        diff, lo, hi = (pairs[c].to_numpy(float) for c in ("difference", "lo", "hi"))
        ax.errorbar(diff, y, xerr=np.vstack([diff - lo, hi - diff]), fmt="o", color="#7a3b00", capsize=3)
        ax.axvline(0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_yticks(y, [f"{a} - {b}" for a, b in zip(pairs["system_a"], pairs["system_b"])])
        ax.set_xlabel(f"{criterion}: difference, {percent(1 - alpha)} interval")
        ax.set_title("pairs of systems, on their shared items")
    fig.tight_layout()
    return fig


def _label(value, crit) -> str:
    """A judge's or a human's label as text: a label's position (1 = the first, as judge scores store ordinal
    labels; in a draws file read back, as text: "2.0") becomes the label."""
    number = pd.to_numeric(value, errors="coerce") if isinstance(value, str) and crit.labels and \
        value not in crit.labels else value
    if crit.labels and isinstance(number, (int, float, np.number)) and float(number).is_integer() \
            and 1 <= int(number) <= len(crit.labels):
        return crit.labels[int(number) - 1]
    text = str(value)
    return text[:-2] if text.endswith(".0") and text[:-2].lstrip("-").isdigit() else text


TIE_RULES = ("judge-wrong", "refuse")  # what a tie of the humans' most frequent answers means (`active pac --ties`)


def pac(ratings: pd.DataFrame, spec: Spec, draws: pd.DataFrame, criterion: str, epsilon: float, alpha: float,
        ties: str = "judge-wrong", to_humans: str | None = None):
    """(labels table, result, tied): PAC labels of a categorical criterion from a "pac" draws file (its drawn
    segments rated by humans): the threshold, the segments humans must label, and, where they have been, the final
    labels with their source. A segment whose humans' most frequent answers tie (three raters, three labels) has no
    majority label: `ties` "judge-wrong" (the gateway's rule) labels it NO_MAJORITY, which counts as the judge being
    wrong; "refuse" asks for more labels. `tied`: how many rated segments tie. `to_humans`: a judge label whose
    segments always go to humans (has_error's "yes": they correct its spans; more human labels only lower the
    error, so the bound still holds)."""
    crit = spec.criteria.get(criterion)
    if crit is None:
        raise BadInput(f"--criterion {criterion}: the ratings have {', '.join(spec.criteria)}")
    if crit.scale == "interval":
        raise BadInput(f"--criterion {criterion}: PAC labels are for a categorical criterion (nominal or ordinal); "
                       f"{criterion} is on an interval scale (estimate its mean with `active estimate`)")
    if ties not in TIE_RULES:
        raise BadInput(f"--ties {ties}: one of {', '.join(TIE_RULES)}")
    if not draws["design"].astype(str).str.startswith("pac sample").all():
        raise BadInput("PAC labels need a uniform calibration sample: `evalstudio active draw --design pac`")
    r = ratings[ratings["criterion"] == criterion]
    votes = r.groupby(["system", "item"], observed=True)["value"].agg(lambda v: v.mode().tolist())
    majority = {(str(s), str(i)): _label(m[0], crit) for (s, i), m in votes.items() if len(m) == 1}
    tied = {(str(s), str(i)) for (s, i), m in votes.items() if len(m) > 1}
    if ties == "judge-wrong":
        majority |= dict.fromkeys(tied, NO_MAJORITY)
    keys = list(zip(draws["system"], draws["item"]))
    sampled = np.flatnonzero(draws["drawn"].to_numpy())
    unrated = [keys[i] for i in sampled if keys[i] not in majority]
    if unrated:
        with_ties = sum(k in tied for k in unrated)
        raise BadInput(f"{len(unrated)} segments of the calibration sample have no human label of {criterion}"
                       + (f" ({with_ties} with tied votes, which --ties refuse leaves without one; --ties judge-wrong "
                          "counts a tie as the judge being wrong, as the gateway does)" if with_ties else "")
                       + f" (e.g. system '{unrated[0][0]}', item '{unrated[0][1]}'): label them first")
    judge = np.array([_label(v, crit) for v in draws["score"]], dtype=object)
    uncertainty = pd.to_numeric(draws["uncertainty"], errors="coerce").to_numpy(float)
    if np.isnan(uncertainty).any():
        raise BadInput(f"{int(np.isnan(uncertainty).sum())} segments have no uncertainty in the draws file: PAC labels "
                       "keep the judge's label where it is sure, so every segment needs its confidence (run "
                       "`evalstudio judge --samples 5`, then `active draw --design pac` again)")
    result = pac_threshold(judge, uncertainty, sampled,
                           [majority[keys[i]] for i in sampled], epsilon, alpha)
    if to_humans is not None:
        result = replace(result, human=result.human | (judge == to_humans))
    humans = {i: majority[k] for i, k in enumerate(keys) if k in majority and result.human[i]}
    table = draws[["system", "item"]].assign(judge_label=judge, uncertainty=uncertainty,
                                             needs_human=result.human, human_label=[humans.get(i, "") for i in
                                                                                    range(len(keys))])
    if len(humans) == int(result.human.sum()):
        labels, source = pac_labels(judge, result, humans)
        table = table.assign(label=labels, source=source)
    else:
        table = table.assign(label="", source=np.where(result.human, "human (to collect)", "judge"))
    return table, result, len(tied & set(keys))
