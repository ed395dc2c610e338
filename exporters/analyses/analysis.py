"""Analysis tables of one project, computed from the tidy frames (no IO).

The statistic per criterion follows its scale in projects.yaml: Krippendorff's alpha at that level for every
criterion; percent agreement, Fleiss' kappa and pairwise Cohen's kappa (quadratic weights when ordinal) for
categorical and ordinal ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalstudio.protocols.registry import Project

from ...stats import agreement as ag
from ...stats import alignment as al
from ..tables.tidy import ratings, unit

SKIPPED = "skipped"


def exclusions(annotations: pd.DataFrame, exclude_prefilled: bool = False, keep_bad_instances: bool = False,
               quotas: dict[str, int] | None = None):
    """(annotations fit for agreement and alignment, notes saying what was left out).

    `quotas` (project name -> crowd.per_participant): Label Studio cannot stop a participant at a quota, so a
    participant's annotations beyond it (in order of submission) are left out here.

    Values accepted unchanged from a model prediction (model-assisted labelling) are the model's, not the
    annotator's: refused (EvalstudioError) unless `exclude_prefilled`. Items marked "Bad instance" by any
    annotator are left out unless `keep_bad_instances`."""
    from evalstudio.base.errors import EvalstudioError

    notes = []
    if "surplus" in annotations and annotations["surplus"].any():
        extra = annotations[annotations["surplus"]]
        annotations = annotations[~annotations["surplus"]]
        notes.append(f"Left out: {extra['annotation_id'].nunique()} surplus annotation(s) of {extra['task_id'].nunique()} "
                     "task(s): a participant's repeat of a task, or annotations after a task had its annotators per "
                     "task (the first ones submitted count; the export keeps them, flagged in the column surplus).")
    over = over_quota(annotations, quotas or {})
    if over.any():
        extra = annotations[over]
        annotations = annotations[~over]
        notes.append(f"Left out: {extra['annotation_id'].nunique()} annotation(s) by {extra['annotator'].nunique()} "
                     "participant(s) beyond the per-participant quota (crowd.per_participant in projects.yaml; the "
                     "first ones submitted count).")
    if "prefilled_unchanged" in annotations and annotations["prefilled_unchanged"].any():
        accepted = annotations[annotations["prefilled_unchanged"]]
        count = f"{len(accepted)} value(s) in {accepted['annotation_id'].nunique()} annotation(s)"
        if not exclude_prefilled:
            raise EvalstudioError(
                f"{count} were accepted unchanged from a model prediction (prefill is on for this project): agreement "
                "and alignment on them would measure the model, not the annotators. Leave them out with "
                "--exclude-prefilled (the export keeps them, flagged in the column prefilled_unchanged).")
        annotations = annotations[~annotations["prefilled_unchanged"]]
        notes.append(f"Left out: {count} accepted unchanged from a model prediction (prefill opt-in).")
    if "bad_instance" in annotations and not keep_bad_instances:
        flagged = annotations["bad_instance"].fillna("").astype(str).str.contains("Bad instance")
        bad_tasks = set(annotations.loc[flagged & ~annotations["cancelled"], "task_id"])
        if bad_tasks:
            annotations = annotations[~annotations["task_id"].isin(bad_tasks)]
            notes.append(f"Left out: {len(bad_tasks)} item(s) marked “Bad instance” by an annotator "
                         "(keep them with --keep-bad-instances).")
    return annotations, notes


def over_quota(annotations: pd.DataFrame, quotas: dict[str, int]) -> pd.Series:
    """Rows of annotations a participant submitted after reaching the quota of that project (submitted, not
    surplus annotations count, in order of annotation id)."""
    flags = pd.Series(False, index=annotations.index)
    if not quotas or annotations.empty:
        return flags
    counted = annotations[~annotations["cancelled"]]
    if "surplus" in counted:
        counted = counted[~counted["surplus"]]
    firsts = counted.drop_duplicates("annotation_id").sort_values("annotation_id")
    if firsts.empty:  # every annotation cancelled (skipped)
        return flags
    rank = firsts.groupby(["project", "annotator"]).cumcount() + 1
    limit = firsts["project"].map(quotas).astype(float)
    beyond = set(firsts.loc[limit.notna() & (rank > limit), "annotation_id"])
    return annotations["annotation_id"].isin(beyond)


def _try(func, *args, **kwargs):
    """(value, note): statistics that are undefined for the data give NaN and the reason."""
    try:
        return func(*args, **kwargs), ""
    except ValueError as e:
        return float("nan"), str(e)


def first_answers(annotations: pd.DataFrame, n: int) -> pd.DataFrame:
    """Each task's first `n` answers (in the order Label Studio stored them: annotation id)."""
    firsts = (annotations.drop_duplicates(["task_id", "annotation_id"]).sort_values("annotation_id")
              .groupby("task_id", sort=False).head(n)["annotation_id"])
    return annotations[annotations["annotation_id"].isin(set(firsts))]


def agreement_table(annotations: pd.DataFrame, project: Project, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Agreement per criterion. With adaptive collection (projects.yaml assignment: uncertainty or ability) the
    tasks the model found uncertain got more answers, and agreement over every answer would be tilted towards the
    hard tasks (lower than a fixed overlap would measure: benchmarks/adaptive.py shows how much); every task's first
    `min_overlap` answers were collected before any task got more, so agreement is computed over those."""
    rows = []
    adaptive = (project.assignment is not None and project.assignment.strategy != "uniform"
                and {"task_id", "annotation_id"} <= set(annotations.columns))
    if adaptive:
        kept = first_answers(annotations, project.assignment.min_overlap)
        left_out = annotations["annotation_id"].nunique() - kept["annotation_id"].nunique()
        annotations = kept
    for criterion, spec in project.criteria.items():
        r = ratings(annotations, criterion)
        given = len(r)
        r = ag.drop_missing(r, spec.missing)  # "N/A"-like answers (projects.yaml `missing:`) are not a category
        row = {"criterion": criterion, "scale": spec.scale, "items": r["item"].nunique(), "ratings": len(r),
               "annotators": r["annotator"].nunique(), "missing_answers": given - len(r)}
        if r.empty:
            rows.append({**row, "note": "no ratings"})
            continue
        alpha = lambda f, level=spec.scale: ag.krippendorff_alpha(f["item"].to_numpy(), f["value"].to_numpy(), level)
        row["alpha"], notes = _try(alpha, r)
        notes = [notes] if notes else []
        row["alpha_lo"], row["alpha_hi"] = (ag.alpha_ci(r["item"].to_numpy(), r["value"].to_numpy(), spec.scale, n_boot,
                                                        seed=seed) if not np.isnan(row["alpha"]) else (np.nan, np.nan))
        if spec.scale == "interval":
            row.update(percent_agreement=np.nan, fleiss_kappa=np.nan, cohen_kappa_mean=np.nan)
        else:
            row["percent_agreement"], note = _try(ag.percent_agreement, r)
            notes += [note] if note else []
            row["fleiss_kappa"], note = _try(ag.fleiss_kappa, r)
            notes += [note] if note else []
            weights = "quadratic" if spec.scale == "ordinal" else None
            pairs, note = _try(ag.cohen_kappa_pairs, r, weights=weights)
            row["cohen_kappa_mean"] = float(pairs["kappa"].mean()) if isinstance(pairs, pd.DataFrame) else np.nan
            notes += [note] if note else []
        if adaptive:
            notes.append(f"adaptive collection: over each task's first {project.assignment.min_overlap} answers "
                         f"({left_out} later answer(s), given where the labels were least certain, left out)")
        row["note"] = "; ".join(dict.fromkeys(n for n in notes if n))
        rows.append(row)
    return pd.DataFrame(rows)


def label_tables(annotations: pd.DataFrame, project: Project, n_boot: int = 200) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Labels with error bars for the categorical criteria (evalstudio/stats/labels.py): per task (or task/agent)
    one-coin Dawid-Skene's label, its posterior and 95% interval; per annotator the estimated accuracy and its
    interval. "N/A"-like answers (`missing:`) are left out."""
    from ...stats.labels import one_coin_labels

    items, people = [], []
    for criterion, spec in project.criteria.items():
        if spec.labels is None:
            continue
        r = ag.drop_missing(ratings(annotations, criterion), spec.missing)
        if r.empty or r["value"].nunique() < 2:
            continue
        got_items, got_people = one_coin_labels(r["item"], r["annotator"], r["value"], n_boot=min(n_boot, 200))
        items.append(got_items.assign(criterion=criterion))
        people.append(got_people.assign(criterion=criterion))
    cat = lambda frames: pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return cat(items), cat(people)


def alignment_table(annotations: pd.DataFrame, model: pd.DataFrame, project: Project, n_boot: int = 1000) -> pd.DataFrame:
    """Human vs model per criterion: correlations at segment (item) and system level, or, for categorical
    criteria, accuracy / macro F1 / kappa of the model label against the human majority."""
    human = annotations[~annotations["cancelled"] & annotations["value"].notna()].assign(item=unit)
    model = model.assign(item=unit(model)) if not model.empty else model
    rows = []
    for criterion, spec in project.criteria.items():
        h = human[human["criterion"] == criterion]
        m = model[model["criterion"] == criterion] if not model.empty else model
        if h.empty or m.empty:
            continue
        if spec.is_numeric:
            h = h.assign(value=h["value"].astype(float))
            m = m.assign(value=m["value"].astype(float))
            for level, by in (("segment", "item"), ("system", "system")):
                pairs = al.paired_means(h, m, by=by)
                for record in al.correlations(pairs["human"], pairs["model"], n_boot=n_boot).to_dict("records"):
                    rows.append({"criterion": criterion, "level": level, **record})
        else:
            majority = ag.majority_vote(h[["item", "annotator", "value"]])
            joined = pd.concat([majority, m.set_index("item")["value"].rename("model")], axis=1, join="inner")
            joined = joined[joined["majority"] != ag.NO_MAJORITY]
            if joined.empty:
                continue
            rows.append({"criterion": criterion, "level": "segment", "method": "majority vs model",
                         **al.categorical_agreement(joined["majority"], joined["model"])})
    return pd.DataFrame(rows)


def annotator_qc(annotations: pd.DataFrame, project: Project) -> pd.DataFrame:
    """Per annotator: annotations, skipped, median lead time, and how far each rating is from the other
    annotators of the same item (numeric: mean |difference| / range; categorical: share matching their majority)."""
    frame = annotations.assign(item=unit(annotations))
    per_annotation = frame.drop_duplicates("annotation_id")
    qc = per_annotation.groupby("annotator").agg(annotations=("annotation_id", "size"), skipped=("cancelled", "sum"),
                                                 median_lead_time_s=("lead_time", "median"))
    rated = frame[~frame["cancelled"] & frame["value"].notna()]
    numeric, categorical = [], []
    for criterion, spec in project.criteria.items():
        c = rated[rated["criterion"] == criterion]
        if c.empty:
            continue
        if spec.is_numeric:
            values = c["value"].astype(float)
            total = values.groupby(c["item"]).transform("sum")
            count = values.groupby(c["item"]).transform("count")
            others = (total - values) / (count - 1)
            dev = ((values - others).abs() / (spec.max - spec.min)).where(count > 1)
            numeric.append(pd.DataFrame({"annotator": c["annotator"], "dev": dev}))
        else:
            for item, group in c.groupby("item"):
                for idx, row in group.iterrows():
                    rest = group.drop(idx)["value"]
                    if len(rest):
                        top = rest.value_counts()
                        categorical.append({"annotator": row["annotator"],
                                            "match": float(top.index[0] == row["value"] and (len(top) == 1 or top.iloc[0] > top.iloc[1]))})
    if numeric:
        qc["mean_deviation_from_others"] = pd.concat(numeric).groupby("annotator")["dev"].mean()
    if categorical:
        qc["agreement_with_others_majority"] = pd.DataFrame(categorical).groupby("annotator")["match"].mean()
    return qc.reset_index()


# ---- Circa ------------------------------------------------------------------------------------------------------

def circa_control_accuracy(annotations: pd.DataFrame, tasks: pd.DataFrame, criterion: str = "interpretation") -> pd.DataFrame:
    """Per annotator: Part I answers on control items (gold label known) and the share that match the gold label."""
    from evalstudio.crowd.study import gold_accuracy

    gold = tasks.loc[tasks["is_control"].astype(bool), ["task_id", "gold_label"]]
    accuracy = gold_accuracy(annotations, gold.rename(columns={"gold_label": "gold"}).assign(criterion=criterion))
    return accuracy.rename(columns={"gold_items": "control_items", "gold_accuracy": "control_accuracy"})


def drop_low_accuracy_annotators(annotations: pd.DataFrame, accuracy: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Annotations without the annotators whose control accuracy is below `threshold` (others are kept)."""
    low = accuracy.loc[accuracy["control_accuracy"] < threshold, "annotator"]
    return annotations[~annotations["annotator"].isin(low)]


def circa_explanation_roles(annotations: pd.DataFrame, tasks: pd.DataFrame, criterion: str = "explanation_quality",
                            n_boot: int = 1000) -> pd.DataFrame:
    """Explanation ratings by what the shown interpretation is.

    faithfulness: the shown interpretation is the model's prediction (does the explanation support what the model
    predicted?); plausibility: it is the gold label. Items where the model was right count for both; the rows
    'prediction only' / 'gold only' / 'both' split them."""
    r = annotations[(annotations["criterion"] == criterion) & ~annotations["cancelled"] & annotations["value"].notna()]
    r = r.merge(tasks[["task_id", "shown_label_is"]], on="task_id")
    roles = [set(str(v).split("+")) if isinstance(v, str) else {"unknown"} for v in r["shown_label_is"]]
    groups = {
        "faithfulness (shown = prediction)": lambda x: "prediction" in x,
        "plausibility (shown = gold)": lambda x: "gold" in x,
        "prediction only (model wrong)": lambda x: x == {"prediction"},
        "gold only (model wrong)": lambda x: x == {"gold"},
        "both (model right)": lambda x: x == {"gold", "prediction"},
    }
    rows = []
    for name, test in groups.items():  # with no Part II ratings yet, every group has 0 tasks (no crash)
        g = r[np.array([test(x) for x in roles], dtype=bool)] if len(r) else r
        values = g["value"].astype(float)
        item_means = values.groupby(g["task_id"]).mean()
        lo, hi = _mean_ci(item_means.to_numpy(), n_boot)
        alpha, _ = _try(ag.krippendorff_alpha, g["task_id"].to_numpy(), values.to_numpy(), "ordinal")
        rows.append({"group": name, "tasks": g["task_id"].nunique(), "ratings": len(g), "mean": values.mean(),
                     "sd": values.std(), "mean_lo": lo, "mean_hi": hi, "alpha_ordinal": alpha})
    return pd.DataFrame(rows)


def _mean_ci(values: np.ndarray, n_boot: int, seed: int = 0) -> tuple[float, float]:
    """Bootstrap percentile CI of the mean of per-task means (tasks resampled)."""
    if len(values) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


# ---- CMV --------------------------------------------------------------------------------------------------------

TOM_CATEGORIES = ("beliefs", "desires", "intentions", "emotions", "knowledge", "perspective_taking")


def cmv_value_shift(tasks: list[dict], annotations: pd.DataFrame) -> pd.DataFrame:
    """Value alignment and value shift between post and persuasive comment, per ToM category (document 001,
    "values alignment, and values shift between post and persuasive comment").

    Per category over the items with values on both sides: mean Jaccard overlap of the post's and the comment's
    value sets (alignment), mean number of values the comment adds and drops (shift), the most frequent added and
    dropped values, and the human judgement of the comment's values (share of Yes among the annotators' answers)."""
    rows = []
    rated = annotations[~annotations["cancelled"] & annotations["value"].notna()] if not annotations.empty else annotations
    for category in TOM_CATEGORIES:
        overlaps, added_n, dropped_n, added, dropped = [], [], [], pd.Series(dtype=int), pd.Series(dtype=int)
        for task in tasks:
            tom = task.get("tom") or {}
            post, comment = (_values(tom, side, category) for side in ("post", "comment"))
            if post is None or comment is None:
                continue
            union = post | comment
            overlaps.append(len(post & comment) / len(union) if union else 1.0)
            added_n.append(len(comment - post))
            dropped_n.append(len(post - comment))
            added = added.add(pd.Series(1, index=sorted(comment - post)), fill_value=0)
            dropped = dropped.add(pd.Series(1, index=sorted(post - comment)), fill_value=0)
        human = rated[rated["criterion"] == category]["value"] if not rated.empty else pd.Series(dtype=object)
        rows.append({"category": category, "items": len(overlaps),
                     "jaccard_overlap": float(np.mean(overlaps)) if overlaps else np.nan,
                     "values_added": float(np.mean(added_n)) if added_n else np.nan,
                     "values_dropped": float(np.mean(dropped_n)) if dropped_n else np.nan,
                     "top_added": ", ".join(added.sort_values(ascending=False).index[:3]),
                     "top_dropped": ", ".join(dropped.sort_values(ascending=False).index[:3]),
                     "human_yes_share": float((human == "Yes").mean()) if len(human) else np.nan,
                     "human_answers": int(len(human)),
                     "added": added.to_dict(), "dropped": dropped.to_dict()})
    return pd.DataFrame(rows)


def _values(tom: dict, side: str, category: str) -> set[str] | None:
    entry = (tom.get(side) or {}).get(category) if isinstance(tom, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("values"), list):
        return None
    return {str(v).strip().lower() for v in entry["values"] if str(v).strip()}


def lists_table(annotations: pd.DataFrame) -> pd.DataFrame:
    """Counterbalanced lists (a between-participants design): per list of each entry, its participants, the tasks
    they rated and their annotations, and how many of its participants also rated in another list (0 when every
    participant came through the gateway, which keeps each in one list)."""
    columns = ["project", "list", "participants", "tasks_rated", "annotations", "participants_in_other_lists"]
    if "list" not in annotations or annotations["list"].isna().all():
        return pd.DataFrame(columns=columns)
    done = annotations[annotations["list"].notna() & ~annotations["cancelled"].astype(bool)]
    entry = done["project"].str.replace(r"_list\d+$", "", regex=True)
    lists_of = done.assign(entry=entry).groupby(["entry", "annotator"])["list"].nunique()
    crossing = set(lists_of[lists_of > 1].index)
    rows = []
    for (project, number), group in done.assign(entry=entry).groupby(["project", "list"], sort=True):
        annotators = set(group["annotator"])
        rows.append({"project": project, "list": int(number), "participants": len(annotators),
                     "tasks_rated": group["task_id"].nunique(), "annotations": group["annotation_id"].nunique(),
                     "participants_in_other_lists": sum((e, a) in crossing for e, a in
                                                        {(e, a) for e, a in zip(group["entry"], group["annotator"])})})
    return pd.DataFrame(rows, columns=columns)

