"""`evalstudio analyze` of pairwise comparisons and of best-worst annotations (`evalstudio.readers.comparisons`): win rates,
Bradley-Terry strengths with bootstrap intervals and on the Elo scale, Chatbot Arena's online Elo, position bias,
and agreement between annotators on preferences; best-worst counting scores and split-half reliability; as tables
(no IO) and a report folder (CSVs + one HTML page)."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from ...stats import preference as pref
from ...stats.agreement import krippendorff_alpha

_EXPLAIN = {
    "strengths": "Bradley-Terry strengths (maximum likelihood; a tie is half a win each way), with 95% percentile "
                 "bootstrap intervals over comparisons, and the same on Chatbot Arena's Elo scale "
                 "(400 log10 strength + 1000).",
    "win_rates": "Share of comparisons won, a tie counting half, with Wilson's 95% interval.",
    "elo": "Elo updated comparison by comparison in the file's order (K = 4), as Chatbot Arena's notebook does; it "
           "depends on the order, the Bradley-Terry fit does not.",
    "position": "Whether the output shown first (left) wins more often than chance among decisive judgements "
                "(exact binomial test against 1/2).",
    "judges": "Each judge's verdict against the humans' plurality verdict on the same item and pair, the position "
              "taken out (MT-Bench's agreement): the share of units on which they agree, the same without the units "
              "where either says tie, and Cohen's kappa over first / second / tie.",
    "ppi": "Bradley-Terry strengths on the Elo scale from the human comparisons alone (classical) and with a judge's "
           "verdicts on the items and pairs no human judged (PPI++, Angelopoulos, Duchi and Zrnic 2023): both with "
           "95% intervals that hold however poor the judge is, if the human-judged items and pairs are a random "
           "sample of all. Rank-sets: the ranks a system can hold given simultaneous 95% intervals for every "
           "difference of strengths (Chatzi et al. 2024, with Bonferroni's region). lambda 0 means the judge did not "
           "help; effective_n: the human-judged items and pairs the human-only fit would need for intervals as "
           "narrow.",
    "agreement": "Agreement between annotators on which system is better (a tie or both bad is one answer), over "
                 "items on which the same pair was judged by two or more annotators: Krippendorff's alpha (nominal) "
                 "and the share of agreeing pairs of judgements.",
}


def preference_agreement(comparisons: pd.DataFrame) -> dict:
    """Alpha (nominal) and pairwise percent agreement on the winner of each (item, pair of systems), over units
    judged two or more times; the position is taken out (the winner is named, whichever side it was on)."""
    units = _units(comparisons)
    unit, winner = units["unit"].to_numpy(), units["winner"].to_numpy()
    sizes = pd.Series(unit).map(pd.Series(unit).value_counts()).to_numpy()
    multi = sizes >= 2
    out = {"units": int(len(set(unit[multi]))), "judgements": int(multi.sum()), "alpha": float("nan"),
           "percent_agreement": float("nan")}
    if out["units"] == 0:
        return out
    out["alpha"] = krippendorff_alpha(unit[multi], winner[multi], "nominal")
    frame = pd.DataFrame({"unit": unit[multi], "winner": winner[multi]})
    counts = frame.groupby(["unit", "winner"]).size()
    per_unit = frame.groupby("unit").size()
    agreeing = (counts * (counts - 1)).groupby(level=0).sum()
    out["percent_agreement"] = float(agreeing.sum() / (per_unit * (per_unit - 1)).sum())
    return out


def _units(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Per judgement, the position taken out: its unit (item and the unordered pair), the winner (the system, or
    "tie" for a tie or both bad), and the same relative to the pair as `label`: "first" (the alphabetically first
    system won), "second" or "tie"."""
    first = np.minimum(comparisons["left"].to_numpy(dtype=object), comparisons["right"].to_numpy(dtype=object))
    second = np.maximum(comparisons["left"].to_numpy(dtype=object), comparisons["right"].to_numpy(dtype=object))
    winner = np.select([comparisons["outcome"] == "left", comparisons["outcome"] == "right"],
                       [comparisons["left"], comparisons["right"]], "")
    label = np.where(winner == "", "tie", np.where(winner == first, "first", "second"))
    unit = comparisons["item"].astype(str).to_numpy() + " || " + first + " | " + second
    return pd.DataFrame({"unit": unit, "winner": np.where(winner == "", "tie", winner), "label": label,
                         "judge": comparisons["annotator"].to_numpy(), "first": first, "second": second})


def _plurality(frame: pd.DataFrame) -> pd.Series:
    """The most frequent label per unit; units whose top labels tie are left out."""
    counts = frame.groupby(["unit", "label"]).size().rename("n").reset_index()
    top = counts.groupby("unit")["n"].transform("max")
    best = counts[counts["n"] == top]
    single = best.groupby("unit")["label"].transform("size") == 1
    return best[single.to_numpy()].set_index("unit")["label"]


def judge_agreement(humans: pd.DataFrame, judges: pd.DataFrame) -> pd.DataFrame:
    """Per judge (the judges file's annotator column), agreement with the humans' plurality verdict on the same
    item and pair, the position taken out (MT-Bench's agreement, Zheng et al. 2023): share of units on which they
    agree, the same over units where neither says tie, and Cohen's kappa over first / second / tie. Units whose
    human verdict is a tie between answers are left out (`human_no_plurality`)."""
    from sklearn.metrics import cohen_kappa_score

    human_units = _units(humans)
    human = _plurality(human_units)
    rows = []
    for name, own in _units(judges).groupby("judge", sort=True):
        verdict = _plurality(own)
        both = human.index.intersection(verdict.index)
        h, j = human[both].to_numpy(), verdict[both].to_numpy()
        decisive = (h != "tie") & (j != "tie")
        row = {"judge": name or "judge", "units": int(len(both)),
               "human_no_plurality": int(len(set(own["unit"]) & set(human_units["unit"])) - len(both)),
               "agreement": float((h == j).mean()) if len(both) else float("nan"),
               "decisive_units": int(decisive.sum()),
               "agreement_without_ties": float((h[decisive] == j[decisive]).mean()) if decisive.any() else float("nan"),
               "kappa": float("nan"), "human_ties": int((h == "tie").sum()), "judge_ties": int((j == "tie").sum())}
        if len(both) and len(set(h) | set(j)) > 1:
            row["kappa"] = float(cohen_kappa_score(h, j, labels=["first", "second", "tie"]))
        rows.append(row)
    return pd.DataFrame(rows)


def _shares(units: pd.DataFrame) -> pd.DataFrame:
    """Per unit (item and pair): its two systems and the share of the unit's judgements the first won (a tie half)."""
    score = units["label"].map({"first": 1.0, "second": 0.0, "tie": 0.5})
    return units.assign(share=score).groupby("unit").agg(first=("first", "first"), second=("second", "first"),
                                                          share=("share", "mean"))


# From its calibration (benchmarks/ppi_ranking.py, docs/preferences.md): studies drawn from the comparisons HANNA's
# (10 systems, 6 criteria) and USR's (5 systems) published ratings imply, with 10, 20, 30 and 60 human-judged
# comparisons of every pair and useless, real and good judges, per system: from 20 a pair every system's 95%
# interval (human-only and PPI++) covered its true strength at least 0.93 of the time, in both populations; at 10 a
# pair USR's "New Human Generated" with a good judge was covered 0.928 (an unlimited population). The rule counts
# the human-judged units over the pairs of systems (the calibration drew as many for every pair).
MIN_UNITS_PER_PAIR = 20
# effective_n (the human-judged units the judge is worth) from 30 a pair, where it was within 10% of what the
# studies realised on every data set and judge (both populations); at 20 a pair it overstated USR's good judge by
# 14%.
MIN_UNITS_PER_PAIR_EFFECTIVE_N = 30
BELOW_MIN_UNITS_EFFECTIVE_N = (f"effective_n (the human-judged units the judge is worth) is given from "
                               f"{MIN_UNITS_PER_PAIR_EFFECTIVE_N} per pair of systems: below, on USR's published "
                               "comparisons, it overstated what a good judge was worth by 14% at 20 a pair "
                               "(docs/preferences.md)")
BELOW_MIN_UNITS = ("below, drawn from USR's published comparisons, a system's 95% interval covered its true strength "
                   "0.928 of the time at 10 a pair (docs/preferences.md)")


def ppi_bradley_terry(humans: pd.DataFrame, judges: pd.DataFrame, judge: str, alpha: float = 0.05) -> pd.DataFrame:
    """Prediction-powered Bradley-Terry strengths (`stats.ppi_ranking`) from the humans' comparisons and one judge's
    verdicts: per system, on the Elo scale, the human-only and the PPI++ estimate with their (1 - alpha) intervals
    and rank-sets; the judge's lambda and the human-judged units it is worth. Units (item and pair) are labelled when
    humans and the judge judged them, unlabelled when only the judge did; units only humans judged are left out of
    both (counted), so that both estimates describe the same units. Raises ValueError when it cannot be computed."""
    from ...stats.ppi_ranking import ELO_SCALE, ppi_strengths

    human = _shares(_units(humans))
    own = judges[judges["annotator"] == judge]
    if own.empty:
        known = sorted(set(judges["annotator"]))
        raise ValueError(f"no judge {judge!r} in the judges' file (it has: {', '.join(map(str, known[:20]))})")
    verdict = _shares(_units(own))
    labelled = human.index.intersection(verdict.index)
    unlabelled = verdict.index.difference(human.index)
    if len(unlabelled) == 0:
        raise ValueError(f"{judge} judged no item and pair that the humans did not: prediction-powered strengths "
                         f"add the judge's verdicts on the others")
    systems = sorted(set(human.loc[labelled, "first"]) | set(human.loc[labelled, "second"])
                     | set(verdict.loc[unlabelled, "first"]) | set(verdict.loc[unlabelled, "second"]), key=str)
    code = {s: i for i, s in enumerate(systems)}
    lab, unl = human.loc[labelled], verdict.loc[unlabelled]
    first, second = lab["first"].map(code).to_numpy(), lab["second"].map(code).to_numpy()
    wins = np.zeros((len(systems), len(systems)))
    np.add.at(wins, (first, second), lab["share"].to_numpy())
    np.add.at(wins, (second, first), 1 - lab["share"].to_numpy())
    if not pref._strongly_connected(wins):
        raise ValueError("in the human-judged units some group of systems never beat (or never lost to) the rest: "
                         "their strengths are not finite (Hunter 2004)")
    pairs = len(systems) * (len(systems) - 1) // 2
    if len(lab) < MIN_UNITS_PER_PAIR * pairs:
        raise ValueError(f"{len(lab)} units judged by humans and {judge}: prediction-powered strengths are given from "
                         f"{MIN_UNITS_PER_PAIR} per pair of systems ({MIN_UNITS_PER_PAIR * pairs} for "
                         f"{len(systems)} systems); {BELOW_MIN_UNITS}")
    fit = ppi_strengths(first, second, lab["share"], verdict.loc[labelled, "share"], unl["first"].map(code),
                        unl["second"].map(code), unl["share"], systems)
    columns = {"system": systems}
    for kind, classical in (("classical", True), ("ppi", False)):
        lo, hi = fit.intervals(alpha, classical)
        best, worst = fit.rank_sets(alpha, classical)
        centre = fit.classical if classical else fit.strength
        columns |= {f"{kind}_elo": ELO_SCALE * centre + 1000, f"{kind}_lo": ELO_SCALE * lo + 1000,
                    f"{kind}_hi": ELO_SCALE * hi + 1000, f"{kind}_rank_best": best, f"{kind}_rank_worst": worst}
    left_out = len(human.index.difference(verdict.index))
    effective_n = fit.effective_n if len(lab) >= MIN_UNITS_PER_PAIR_EFFECTIVE_N * pairs else np.nan
    table = pd.DataFrame(columns).assign(judge=judge, n_labelled=fit.n, n_unlabelled=fit.N, left_out=left_out,
                                         **{"lambda": fit.lam}, effective_n=effective_n)
    return table.sort_values("ppi_elo", ascending=False, ignore_index=True)


def analyze_comparisons(comparisons: pd.DataFrame, n_boot: int = 1000, judges: pd.DataFrame | None = None,
                        sides_shown: bool = True, ppi: str | None = None) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """(tables by CSV name, notes): what could not be computed is said in the notes and in not_computed.csv.
    `judges`: an LLM judge's (or several judges') verdicts on the same items, in the same columns; `ppi`: the judge
    whose verdicts give prediction-powered strengths (ppi_bradley_terry.csv)."""
    tables, notes = {}, []
    if judges is not None:
        tables["judge_agreement"] = judge_agreement(comparisons, judges)
        if not (tables["judge_agreement"]["units"] > 0).any():
            notes.append("judge_agreement: the judges' verdicts share no item and pair with the humans'")
        if ppi is not None:
            try:
                tables["ppi_bradley_terry"] = ppi_bradley_terry(comparisons, judges, ppi)
                if tables["ppi_bradley_terry"]["effective_n"].isna().all():
                    notes.append(f"ppi_bradley_terry: {BELOW_MIN_UNITS_EFFECTIVE_N}")
            except ValueError as e:
                notes.append(f"ppi_bradley_terry: {e}")
    tables["win_rates"] = pref.win_rates(comparisons)
    try:
        tables["bradley_terry"] = pref.bradley_terry(comparisons, n_boot=n_boot)
    except ValueError as e:
        notes.append(f"bradley_terry: {e}")
    tables["elo"] = pref.online_elo(comparisons)
    if sides_shown:
        tables["position_bias"] = pd.DataFrame([pref.position_bias(comparisons)])
    else:
        notes.append("position_bias: the file's left and right are not the sides annotators saw (spec sides: "
                     "unordered)")
    agreement = preference_agreement(comparisons)
    tables["agreement"] = pd.DataFrame([agreement])
    if agreement["units"] == 0:
        notes.append("agreement: no item has the same pair judged by two or more annotators")
    if notes:
        tables["not_computed"] = _not_computed(notes)
    return tables, notes


def _not_computed(notes: list[str]) -> pd.DataFrame:
    """not_computed.csv from notes written "TABLE: reason"."""
    return pd.DataFrame([note.split(": ", 1) for note in notes], columns=["table", "reason"])


def _write_folder(tables: dict[str, pd.DataFrame], title: str, out_dir: Path, notes, sections: list[str]) -> Path:
    """Every table as a CSV (spreadsheet-safe, private) and index.html: the title, the notes, then `sections`."""
    from evalstudio.base.files import write_output

    from ..tables.files import write_csv
    from .report import html_page

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_csv(table, out_dir / f"{name}.csv")
    body = [f"<h1>{html.escape(title)}</h1>"] + [f"<p>{html.escape(n)}</p>" for n in notes] + sections
    index = out_dir / "index.html"
    write_output(index, html_page(title, "\n".join(body)))
    return index


def _strength_plot(table: pd.DataFrame):
    from .report import plt

    rows = table.sort_values("elo")
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(rows) + 1.2))
    y = np.arange(len(rows))
    if "elo_lo" in rows:
        err = np.vstack([rows["elo"] - rows["elo_lo"], rows["elo_hi"] - rows["elo"]])
        ax.errorbar(rows["elo"], y, xerr=np.clip(np.nan_to_num(err), 0, None).tolist(), fmt="o", capsize=3)
    else:
        ax.plot(rows["elo"], y, "o")
    ax.set_yticks(y, rows["system"].astype(str).str[:30], fontsize=8)
    ax.set_xlabel("Bradley-Terry strength on the Elo scale (95% bootstrap interval)", fontsize=8)
    fig.tight_layout()
    return fig


def write_comparison_analysis(tables: dict[str, pd.DataFrame], title: str, out_dir: Path, notes=()) -> Path:
    """CSVs (spreadsheet-safe, private) and index.html with the strengths plot."""
    from .report import html_image, html_table

    body = []
    if "bradley_terry" in tables:
        body += ["<h2>Strengths</h2>", f"<p>{_EXPLAIN['strengths']}</p>", html_image(_strength_plot(tables["bradley_terry"])),
                 html_table(tables["bradley_terry"])]
    body += ["<h2>Win rates</h2>", f"<p>{_EXPLAIN['win_rates']}</p>", html_table(tables["win_rates"]),
             "<h2>Online Elo</h2>", f"<p>{_EXPLAIN['elo']}</p>", html_table(tables["elo"])]
    if "position_bias" in tables:  # not when the file's left and right are not the sides shown
        body += ["<h2>Position bias</h2>", f"<p>{_EXPLAIN['position']}</p>", html_table(tables["position_bias"])]
    body += ["<h2>Agreement between annotators</h2>", f"<p>{_EXPLAIN['agreement']}</p>", html_table(tables["agreement"])]
    if "judge_agreement" in tables:
        body += ["<h2>Judges against the humans</h2>", f"<p>{_EXPLAIN['judges']}</p>", html_table(tables["judge_agreement"])]
    if "ppi_bradley_terry" in tables:
        body += ["<h2>Prediction-powered strengths</h2>", f"<p>{_EXPLAIN['ppi']}</p>",
                 html_table(tables["ppi_bradley_terry"])]
    return _write_folder(tables, title, out_dir, notes, body)


def analyze_best_worst(annotations: pd.DataFrame, splits: int = 100) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """(tables by CSV name, notes): counting scores and split-half reliability."""
    tables, notes = {"bws_scores": pref.bws_scores(annotations)}, []
    reliability = pref.split_half_reliability(annotations, splits=splits)
    per_tuple = annotations.drop_duplicates(["tuple", "annotation"]).groupby("tuple").size()
    tables["reliability"] = pd.DataFrame([{**reliability, "tuples": len(per_tuple),
                                           "annotations_per_tuple": float(per_tuple.mean())}])
    if reliability["splits"] == 0:
        notes.append("reliability: split-half reliability needs tuples annotated twice or more, so that both halves "
                     "score three or more items")
        tables["not_computed"] = _not_computed(notes)
    return tables, notes


def write_best_worst_analysis(tables: dict[str, pd.DataFrame], title: str, out_dir: Path, notes=()) -> Path:
    """CSVs (spreadsheet-safe, private) and index.html with the scores plotted."""
    from .report import html_image, html_table, plt

    scores = tables["bws_scores"].sort_values("score")
    shown = scores if len(scores) <= 60 else pd.concat([scores.head(30), scores.tail(30)])
    fig, ax = plt.subplots(figsize=(6.5, 0.25 * len(shown) + 1.2))
    ax.barh(np.arange(len(shown)), shown["score"])
    ax.set_yticks(np.arange(len(shown)), shown["item"].astype(str).str[:30], fontsize=7)
    ax.set_xlabel("best-worst score (%best - %worst)" + (", lowest and highest 30" if len(scores) > 60 else ""),
                  fontsize=8)
    fig.tight_layout()
    body = [
        "<h2>Scores</h2>", "<p>Counting scores (Kiritchenko and Mohammad 2016): the share of an item's appearances in "
        "which it was chosen best minus the share in which it was chosen worst.</p>", html_image(fig),
        html_table(tables["bws_scores"]), "<h2>Split-half reliability</h2>",
        "<p>The annotations of each tuple split at random into two halves, scores computed from each, their Spearman "
        "correlation averaged over the splits.</p>", html_table(tables["reliability"])]
    return _write_folder(tables, title, out_dir, notes, body)


# ---- Label Studio projects of a pairwise or best-worst protocol (projects.yaml `compare:`) ----------------------

def positions_of(tasks) -> dict:
    """task id -> the systems in the order shown (the task's hidden `candidates`, written at import)."""
    from evalstudio.values.results import task_fields

    out = {}
    for task in tasks:
        shown = task_fields(task).get("candidates")
        if isinstance(shown, list) and all(isinstance(s, str) for s in shown):
            out[task["id"]] = shown
    return out


def comparisons_from_annotations(annotations: pd.DataFrame, positions: dict, project,
                                 what: str = "answer(s)") -> tuple[pd.DataFrame, list[str]]:
    """The answers of a pairwise protocol as the comparisons frame (item, annotator, left, right, outcome, line =
    task id): left and right are the systems shown first and second in that task, the outcome is what the
    answer's label means (projects.yaml compare.outcomes). Answers that mean no comparison (the criterion's
    `missing` labels), tasks without their hidden positions and empty answers are left out and counted in the
    notes (as `what`: answers, or a judge's verdicts)."""
    compare = project.compare
    meaning = {label: outcome for outcome, label in compare.outcomes.items()}
    rows = annotations[(annotations["criterion"] == compare.criterion) & ~annotations["cancelled"]]
    notes = []
    empty = rows["value"].isna()
    no_position = ~rows["task_id"].isin(positions)
    unmeant = ~empty & ~rows["value"].isin(list(meaning))
    for mask, why in ((empty, f"empty {what}"), (no_position & ~empty, f"{what} on tasks without their hidden "
                                                                         "positions (imported without candidates?)"),
                      (unmeant & ~no_position, f"{what} that name no outcome (the criterion's missing labels)")):
        if mask.any():
            notes.append(f"Left out: {int(mask.sum())} {why}.")
    rows = rows[~(empty | no_position | unmeant)]
    shown = rows["task_id"].map(positions)
    frame = pd.DataFrame({"item": rows["item_id"].astype(str).to_numpy(), "annotator": rows["annotator"].astype(str).to_numpy(),
                          "left": [s[0] for s in shown], "right": [s[1] for s in shown],
                          "outcome": rows["value"].map(meaning).to_numpy(), "line": rows["task_id"].to_numpy()})
    return frame, notes


def best_worst_from_annotations(annotations: pd.DataFrame, positions: dict, project) -> tuple[pd.DataFrame, list[str]]:
    """The answers of a best-worst protocol as the frame `stats.preference.bws_scores` reads (tuple = task id,
    annotation, annotator, item = system, choice): the labels of the best and worst criteria name positions in
    order. An annotation whose best and worst are the same output, or that lacks either, is left out and counted
    in the notes (Label Studio cannot require two answers to differ)."""
    compare = project.compare
    labels = {name: project.criteria[name].labels for name in (compare.best, compare.worst)}
    rows = annotations[annotations["criterion"].isin(list(labels)) & ~annotations["cancelled"]]
    wide = rows.groupby(["annotation_id", "task_id", "annotator", "criterion"])["value"].first().unstack(
        "criterion").reset_index() if len(rows) else pd.DataFrame(columns=["annotation_id", "task_id", "annotator"])
    for name in labels:
        if name not in wide:
            wide[name] = None
    notes, out = [], {k: [] for k in ("tuple", "annotation", "annotator", "item", "choice", "line")}
    counts = {"incomplete": 0, "same": 0, "no_position": 0}
    for row in wide.to_dict("records"):
        best, worst = row[compare.best], row[compare.worst]
        shown = positions.get(row["task_id"])
        if shown is None:
            counts["no_position"] += 1
            continue
        if not isinstance(best, str) or not isinstance(worst, str) or best not in labels[compare.best] or \
                worst not in labels[compare.worst]:
            counts["incomplete"] += 1
            continue
        b, w = labels[compare.best].index(best), labels[compare.worst].index(worst)
        if b == w:
            counts["same"] += 1
            continue
        for position, system in enumerate(shown):
            out["tuple"].append(str(row["task_id"]))
            out["annotation"].append(str(row["annotation_id"]))
            out["annotator"].append(str(row["annotator"]))
            out["item"].append(system)
            out["choice"].append("best" if position == b else "worst" if position == w else "")
            out["line"].append(row["task_id"])
    for key, what in (("incomplete", "annotation(s) without both a best and a worst answer"),
                      ("same", "annotation(s) that chose the same output as best and worst"),
                      ("no_position", "annotation(s) of tasks without their hidden positions")):
        if counts[key]:
            notes.append(f"Left out: {counts[key]} {what}.")
    return pd.DataFrame(out), notes


def judge_comparisons_from_tasks(tasks, positions: dict, project) -> tuple[pd.DataFrame, list[str]]:
    """The predictions stored with a pairwise project's tasks (an LLM judge's verdicts from the ML backend, one
    judge per `model_version`) as comparisons, in the humans' columns, for `judge_agreement`."""
    from ..tables.tidy import prediction_frame

    predicted = prediction_frame(tasks, project)
    rows = predicted.assign(annotator=predicted["model_version"], cancelled=False)
    return comparisons_from_annotations(rows, positions, project, what="judge verdict(s)")
