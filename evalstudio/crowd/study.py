"""Crowd-study bookkeeping on the tidy annotation frame: how far the study is, who did what and how well, and what
each participant is owed. Pure functions of pandas frames; nothing here talks to Label Studio.

Attention checks follow Prolific's policy: a participant is rejected only for failing them (gold accuracy below
the study's threshold); speeding and straight-lining are flagged for the researcher to look at, never rejected
automatically.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from evalstudio.base.numbers import percent
from evalstudio.protocols import part_order
from evalstudio.protocols.registry import Crowd, Project
from evalstudio.values.results import ID_FIELD, task_fields
from evalstudio.values.spans import limited_controls

STRAIGHT_LINE_SHARE = 0.8  # flagged when at least this share of a participant's tasks (and >= 5) have one value
STRAIGHT_LINE_MIN_TASKS = 5
SPEEDER_FRACTION = 1 / 3  # without min_median_seconds: a median below a third of everyone's median is flagged


def counted_rows(annotations: pd.DataFrame) -> pd.DataFrame:
    """Every row (each criterion's answer) of the submitted annotations that count towards the design (not skipped,
    not surplus): what statistics over the answers read."""
    keep = ~annotations["cancelled"].astype(bool)
    if "surplus" in annotations:
        keep &= ~annotations["surplus"].astype(bool)
    return annotations[keep]


def counted(annotations: pd.DataFrame) -> pd.DataFrame:
    """One row per submitted annotation that counts towards the design (not skipped, not surplus): what counts
    annotations, tasks and time read (an annotation's other criteria are left out: use counted_rows for answers)."""
    return counted_rows(annotations).drop_duplicates("annotation_id")


def coverage(annotations: pd.DataFrame, task_ids: Iterable, per_task: int) -> pd.DataFrame:
    """How many tasks have 0, 1, ..., per_task counted annotations."""
    per = counted(annotations).groupby("task_id").size().reindex(list(task_ids), fill_value=0).clip(upper=per_task)
    counts = per.value_counts().reindex(range(per_task + 1), fill_value=0)
    return pd.DataFrame({"annotations": counts.index, "tasks": counts.to_numpy()})


def gold_answers(tasks: Iterable[dict], project: Project) -> pd.DataFrame:
    """(task_id, criterion, gold, below) for tasks with a known answer: a `gold: {criterion: answer}` field of the
    imported record, or Circa's control questions (is_control with gold_label, for the project's criterion). An
    attention check made by spoiling a task (protocols/attention.py: `gold: {criterion: {below: ORIGINAL}}`) has no
    answer but `below`, the original's task id: its answer must be lower than the same annotator's there."""
    rows = []
    tasks = list(tasks)
    first = next(iter(project.criteria), None)
    ids = {str(task_fields(t).get(ID_FIELD)): t["id"] for t in tasks}
    for task in tasks:
        fields = task_fields(task)
        gold = fields.get("gold")
        if isinstance(gold, Mapping):
            for c, v in gold.items():
                if c not in project.criteria:
                    continue
                below = ids.get(str(v.get("below"))) if isinstance(v, Mapping) else None
                if isinstance(v, Mapping) and below is None:  # its original is not in this project: not scored
                    continue
                rows.append({"task_id": task["id"], "criterion": c, "gold": None if below else v, "below": below})
        elif fields.get("is_control") and fields.get("gold_label") is not None and first and \
                fields["gold_label"] in (project.criteria[first].labels or ()):
            # (Circa Part II's tasks know the gold label too, but rate an explanation 1-5: no gold answer there)
            rows.append({"task_id": task["id"], "criterion": first, "gold": fields["gold_label"], "below": None})
    return pd.DataFrame(rows, columns=["task_id", "criterion", "gold", "below"])


def gold_accuracy(annotations: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """Per annotator: gold answers given and the share equal to the known answer (numbers: equal values); an
    attention check with `below` counts where the annotator answered its original too, and is right when lower."""
    rated = annotations[~annotations["cancelled"] & annotations["value"].notna()]  # surplus answers count here too
    joined = rated.merge(gold, on=["task_id", "criterion"])
    unscored = None  # per annotator: checks answered without their original (counted in `checks_unscored`)
    if "below" in joined and joined["below"].notna().any():
        mine = rated.drop_duplicates(["annotator", "task_id", "criterion"])[["annotator", "task_id", "criterion",
                                                                            "value"]]
        joined = joined.merge(mine.rename(columns={"task_id": "below", "value": "original"}),
                              on=["annotator", "below", "criterion"], how="left")
        alone = joined["below"].notna() & joined["original"].isna()
        unscored = joined[alone].groupby("annotator").size().rename("checks_unscored")
        joined = joined[~alone]
    if joined.empty and not (unscored is not None and len(unscored)):
        return pd.DataFrame(columns=["annotator", "gold_items", "gold_accuracy"])

    def same(a, b) -> bool:
        try:
            return float(a) == float(b)
        except (TypeError, ValueError, OverflowError):
            return str(a) == str(b)

    def lower(a, b) -> bool:
        try:
            return float(a) < float(b)
        except (TypeError, ValueError, OverflowError):
            return False

    checks = joined["below"].notna() if "below" in joined else pd.Series(False, index=joined.index)
    joined["correct"] = [lower(a, o) if c else same(a, b) for a, b, c, o in
                         zip(joined["value"], joined["gold"], checks, joined.get("original", joined["gold"]))]
    per = joined.groupby("annotator")["correct"]
    out = pd.DataFrame({"gold_items": per.size(), "gold_accuracy": per.mean().astype(float)})
    if unscored is not None and len(unscored):
        out = out.join(unscored, how="outer")
    out.index.name = "annotator"
    return out.reset_index()


def _straight_lined(annotations: pd.DataFrame, numeric: list[str]) -> pd.Series:
    """Per annotator: share of their tasks on which every numeric rating is the same (NaN with < 3 ratings/task)."""
    rated = annotations[annotations["criterion"].isin(numeric) & ~annotations["cancelled"] & annotations["value"].notna()]
    if rated.empty:
        return pd.Series(dtype=float)
    per_task = rated.groupby(["annotator", "annotation_id"])["value"].agg(["nunique", "size"])
    per_task = per_task[per_task["size"] >= 3]
    return (per_task["nunique"] == 1).groupby(level="annotator").mean().where(
        per_task.groupby(level="annotator").size() >= STRAIGHT_LINE_MIN_TASKS)


def study_crowd(parts: list[Project]) -> Crowd:
    """One study's crowd rules from its projects (Circa: the gold threshold of Part I, the bonus of Part II)."""
    merged: dict = {}
    for part in parts:
        for key, value in (part.crowd.model_dump(exclude_none=True) if part.crowd else {}).items():
            merged.setdefault(key, value)
    merged.pop("after", None)
    # a quota per part (CMV: 30 blind threads, then 30 samples): the study's is their sum (each entry once: a
    # participant works in one list of it); a part without one leaves the study's open
    quotas = {p.entry: p.crowd.per_participant if p.crowd else None for p in parts}
    if len(quotas) > 1:
        values = list(quotas.values())
        merged["per_participant"] = None if None in values else "all" if "all" in values else sum(values)
    return Crowd(**merged)


def numeric_criteria(parts: list[Project]) -> list[str]:
    """The criteria of the parts that are numbers."""
    return [c for p in parts for c, s in p.criteria.items() if s.is_numeric]


def participant_table(annotations: pd.DataFrame, crowd: Crowd, gold: pd.DataFrame, n_tasks: int,
                      numeric: list[str] = (), names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per participant: tasks done, skipped, surplus, batches, gold accuracy, median seconds per task,
    last activity and warnings (speeder, straight-liner, failed gold, over quota)."""
    names = names or {}
    per_annotation = annotations.drop_duplicates("annotation_id")
    if per_annotation.empty:
        return pd.DataFrame(columns=["participant", "annotator", "tasks_done", "skipped", "surplus", "median_seconds",
                                     "last_activity", "quota", "batches_done", "gold_items", "gold_accuracy",
                                     "straight_lined_share", "warnings"])
    submitted = per_annotation[~per_annotation["cancelled"]]
    table = pd.DataFrame({
        "tasks_done": submitted.groupby("annotator")["task_id"].nunique(),
        "skipped": per_annotation.groupby("annotator")["cancelled"].sum().astype(int),
        "surplus": per_annotation.groupby("annotator")["surplus"].sum().astype(int) if "surplus" in per_annotation else 0,
        "median_seconds": submitted.groupby("annotator")["lead_time"].median(),
        "last_activity": per_annotation.groupby("annotator")["created_at"].max(),
    }).fillna({"tasks_done": 0}).astype({"tasks_done": int})
    quota = n_tasks if crowd.per_participant == "all" else crowd.per_participant
    table["quota"] = quota
    table["batches_done"] = table["tasks_done"] // crowd.batch_size if crowd.batch_size else np.nan
    accuracy = gold_accuracy(annotations, gold).set_index("annotator")
    table = table.join(accuracy, how="left")
    table["straight_lined_share"] = _straight_lined(annotations, list(numeric))
    everyone = submitted["lead_time"].median()
    speed_limit = crowd.min_median_seconds if crowd.min_median_seconds is not None else (
        everyone * SPEEDER_FRACTION if pd.notna(everyone) else np.nan)
    warnings = []
    for annotator, row in table.iterrows():
        found = []
        if pd.notna(row["median_seconds"]) and pd.notna(speed_limit) and row["median_seconds"] < speed_limit:
            found.append(f"speeder (median {row['median_seconds']:.1f}s < {speed_limit:.1f}s)")
        if pd.notna(row["straight_lined_share"]) and row["straight_lined_share"] >= STRAIGHT_LINE_SHARE:
            found.append(f"straight-liner ({row['straight_lined_share']:.0%} of tasks with one value)")
        if crowd.min_gold_accuracy is not None and pd.notna(row.get("gold_accuracy")) and \
                row["gold_accuracy"] < crowd.min_gold_accuracy:
            found.append(f"failed gold ({percent(row['gold_accuracy'])} < {percent(crowd.min_gold_accuracy)})")
        if pd.notna(row.get("checks_unscored")) and row["checks_unscored"] > 0:
            found.append(f"{int(row['checks_unscored'])} attention check(s) not scored (the participant did not "
                         "answer their originals)")
        if quota and row["tasks_done"] > quota:
            found.append(f"over quota ({row['tasks_done']} > {quota})")
        warnings.append("; ".join(found))
    table["warnings"] = warnings
    table.index.name = "annotator"
    table = table.reset_index()
    table.insert(0, "participant", [names.get(a, a) for a in table["annotator"]])
    return table.sort_values(["tasks_done", "participant"], ascending=[False, True], ignore_index=True)


def order_warnings(annotations: pd.DataFrame, parts: list[Project]) -> dict[str, str]:
    """annotator -> warning for participants who worked on a part before finishing nothing of the part it comes
    after (crowd.after; Circa: Part II before Part I)."""
    out = {}
    for part in parts:
        first = part.crowd.after if part.crowd else None
        if not first:
            continue
        done = annotations[~annotations["cancelled"].astype(bool)]  # (an empty column is object-typed)
        later = set(done.loc[done["project"] == part.name, "annotator"])
        earlier = set(done.loc[done["project"] == first, "annotator"])
        for annotator in later - earlier:
            out[annotator] = f"did {part.name} without {first} (which comes first)"
    return out


def list_warnings(annotations: pd.DataFrame, parts: list[Project]) -> dict[str, str]:
    """annotator -> warning for participants who worked in more than one counterbalanced list of an entry: they may
    have seen two versions of an item (possible only outside the gateway, e.g. in Label Studio itself)."""
    out: dict[str, list[str]] = {}
    done = annotations[~annotations["cancelled"].astype(bool)]
    for entry in dict.fromkeys(p.list_of for p in parts if p.list_of):
        number_of = {p.name: p.list_number for p in parts if p.list_of == entry}
        worked = done[done["project"].isin(number_of)].groupby("annotator")["project"].unique()
        for annotator, projects in worked.items():
            if len(projects) > 1:
                numbers = sorted(number_of[name] for name in projects)
                out.setdefault(annotator, []).append(
                    f"worked in lists {', '.join(map(str, numbers))} of {entry} (may have seen two versions of an "
                    "item: the gateway keeps each participant in one list)")
    return {annotator: "; ".join(found) for annotator, found in out.items()}


def span_limit_warnings(annotations: pd.DataFrame, parts: list[Project]) -> dict[str, str]:
    """annotator -> warning for participants whose answers mark more spans than a span control's max_spans allows
    (MQM: five errors per segment): possible only in Label Studio's own editor, which cannot cap the spans (the
    gateway refuses such an answer). The answers are kept whole; the exports flag their spans (over_max)."""
    out: dict[str, list[str]] = {}
    answered = annotations[~annotations["cancelled"].astype(bool)].drop_duplicates("annotation_id")
    for part in parts:
        mine = answered[answered["project"] == part.name]
        for control, cap in part.max_spans.items():
            names = limited_controls(control)
            if not all(name in mine for name in names):
                continue
            marked = sum(pd.to_numeric(mine[name], errors="coerce").fillna(0) for name in names)
            over = mine[marked > cap]
            for annotator, rows in over.groupby("annotator"):
                tasks = ", ".join(map(str, rows["task_id"].tolist()[:5])) + (" ..." if len(rows) > 5 else "")
                out.setdefault(annotator, []).append(
                    f"marked more than {cap} spans with {control} (max_spans of {part.name}) in {len(rows)} answer(s), "
                    f"tasks {tasks}: kept whole, flagged over_max in exports")
    return {annotator: "; ".join(found) for annotator, found in out.items()}


def shared_item_warnings(annotations: pd.DataFrame, parts: list[Project],
                         per_part: list[list[dict]]) -> dict[str, str]:
    """annotator -> warning for participants who answered one item (item_id) in two projects of the study that no
    crowd.after orders (cmv, without its order: a delta thread in cmv_tom and in cmv_threads): they met it twice, which
    the gateway never does (possible only in Label Studio itself). A later part may show an item again (cmv_tom after
    the blind cmv_threads): that is the design, not a warning."""
    item_of = {int(t["id"]): str((t.get("data") or {}).get("item_id")) for tasks in per_part for t in tasks
               if (t.get("data") or {}).get("item_id") is not None}
    done = annotations[~annotations["cancelled"].astype(bool)]
    if done.empty or not item_of or len({p.entry for p in parts}) < 2:
        return {}
    done = done.assign(item=done["task_id"].map(lambda t: item_of.get(int(t))),
                       entry=done["project"].map({p.name: p.entry for p in parts})).dropna(subset=["item"])
    earlier = {p.entry: part_order.earlier_entries(parts, p.entry) for p in parts}
    met = done.groupby(["annotator", "item"])["entry"].unique()
    out: dict[str, int] = {}
    for (annotator, _), entries in met.items():
        # the entries that no other entry of these comes after: more than one is an item met twice unordered
        if len([e for e in entries if not earlier[e] & set(entries)]) > 1:
            out[annotator] = out.get(annotator, 0) + 1
    return {a: f"answered {n} item(s) in two projects of the study that no crowd.after orders (met them twice; the "
               "gateway gives each participant an item once)" for a, n in out.items()}


def gold_rate_warnings(parts: list[Project], per_part: list[list[dict]]) -> list[str]:
    """Parts whose task pool cannot give each participant crowd.gold_rate gold items: Label Studio's uniform
    sampling draws every participant's stream from the pool, so the pool's gold share is the rate they see."""
    out = []
    for part, tasks in zip(parts, per_part):
        rate = part.crowd.gold_rate if part.crowd else None
        if rate is None or not tasks:
            continue
        n_gold = len(gold_answers(tasks, part)["task_id"].unique())
        if n_gold / len(tasks) < rate:
            out.append(f"{part.name}: {n_gold} of {len(tasks)} tasks ({percent(n_gold / len(tasks))}) are gold items, "
                       f"crowd.gold_rate asks for {percent(rate)}: import at least "
                       f"{int(np.ceil(rate * len(tasks))) - n_gold} more (or lower gold_rate)")
        if part.order != "random":
            out.append(f"{part.name}: gold items are mixed into each participant's stream only with order: random "
                       "(Label Studio's uniform sampling)")
    return out


RATE_MIN_ANNOTATIONS, RATE_MIN_MINUTES = 5, 10  # a rate only from this many answers over this long at least


def time_left(annotations: pd.DataFrame, remaining: int) -> tuple[float | None, float | None]:
    """(annotations per hour so far, hours until `remaining` more at that rate); None where not yet measurable:
    fewer than RATE_MIN_ANNOTATIONS answers, or all within RATE_MIN_MINUTES (two answers a second apart, a scripted
    participant's or a first burst, said 1.8 million an hour)."""
    times = counted(annotations)["created_at"].dropna()
    if len(times) < RATE_MIN_ANNOTATIONS or remaining <= 0:
        return (None, 0.0 if remaining <= 0 else None)
    hours = (times.max() - times.min()).total_seconds() / 3600
    if hours < RATE_MIN_MINUTES / 60:
        return (None, None)
    rate = (len(times) - 1) / hours
    return rate, remaining / rate


def decisions(table: pd.DataFrame, crowd: Crowd) -> pd.DataFrame:
    """approve / reject (with reason) / bonus per participant, by the study's rules."""
    out = table[["participant", "annotator", "tasks_done"]].copy()
    failed = pd.Series(False, index=table.index)
    if crowd.min_gold_accuracy is not None and "gold_accuracy" in table:
        failed = table["gold_accuracy"].notna() & (table["gold_accuracy"] < crowd.min_gold_accuracy)
    out["decision"] = np.where(failed, "reject", "approve")
    out["reason"] = [f"failed attention checks: {percent(a)} correct on {int(n)} gold item(s), below "
                     f"{percent(crowd.min_gold_accuracy)}" if f else "" for f, a, n in
                     zip(failed, table.get("gold_accuracy", pd.Series(np.nan, index=table.index)),
                         table.get("gold_items", pd.Series(0, index=table.index)).fillna(0))]
    out["bonus"] = 0.0
    bonus = crowd.bonus
    if bonus is not None:
        approved = out["decision"] == "approve"
        if bonus.rule == "all_batches":
            earned = approved & (out["tasks_done"] >= crowd.batch_size * crowd.max_batches)
            out.loc[earned, "bonus"] = bonus.amounts[0] if bonus.amounts else np.nan
        else:  # most_tasks: rank by tasks done among approved participants, ties share the better rank
            rank = out.loc[approved, "tasks_done"].rank(method="min", ascending=False)
            for index, r in rank.items():
                if bonus.amounts and r <= len(bonus.amounts) and out.at[index, "tasks_done"] > 0:
                    out.at[index, "bonus"] = bonus.amounts[int(r) - 1]
        out["currency"] = bonus.currency
    return out
