"""Whether to trust each LLM judge, for the report: the judges are the tasks' predictions whose model version is
`judge:NAME` (`evalstudio judge --to-label-studio`), compared with the human answers of the same tasks.

Per judge and criterion: agreement with the humans' plurality label (Cohen's kappa, quadratic weights on ordinal
scales, and accuracy: evalstudio.exporters.analyses.metaeval.judge_checks) or, on an interval scale, Spearman's rho with
the humans' mean; and the alternative annotator test (Calderon et al., ACL 2025; exporters.analyses.alttest) at the
report's epsilon, which needs annotators with 30 or more segments that the judge and another annotator rated too.
Each judge then gets one line that cites the numbers: it may replace the annotators on the criteria where the
test passes, should not where it fails, and where the test cannot be run the line says why."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalstudio.readers.ratings import from_label_studio
from evalstudio.readers.spec import spec_from_protocol

from .alttest import alt_test_tables
from .metaeval import Reasons, judge_checks
from ..tables.tidy import prediction_frame

PREFIX = "judge:"
COLUMNS = ["judge", "criterion", "scale", "segments", "agreement", "statistic", "accuracy", "alt_test",
           "winning_rate", "advantage_probability", "precision", "recall"]


def _metrics(predicted: pd.DataFrame, spec) -> pd.DataFrame:
    """The judges' answers keyed as from_label_studio keys the human ratings (item | agent, system), ordinal labels
    as their position, nominal labels as they are."""
    item = predicted["item_id"].where(predicted["item_id"].notna(), predicted["task_id"]).astype(str)
    agent = predicted["agent"].fillna("").astype(str)
    values = predicted["value"].astype(object).copy()
    for name, crit in spec.criteria.items():
        mine = predicted["criterion"] == name
        if crit.labels is not None and crit.scale == "ordinal":
            values[mine] = predicted.loc[mine, "value"].map({label: i + 1.0 for i, label in enumerate(crit.labels)})
    return pd.DataFrame({"item": item + np.where(agent != "", " | " + agent, ""),
                         "system": predicted["system"].fillna("").astype(str),
                         "metric": predicted["model_version"].astype(str).str[len(PREFIX):],
                         "criterion": predicted["criterion"], "value": values})


def judge_verdicts(tasks: list[dict], annotations: pd.DataFrame, project, epsilon: float = 0.2,
                   min_items: int = 30, spans: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(one row per judge and criterion, one verdict line per judge); empty when no task has a judge's answer.
    `spans`: the annotators' spans of `tasks` (exporters.tables.tidy.span_frame) when the caller has them."""
    predicted = prediction_frame(tasks, project)
    predicted = predicted[predicted["model_version"].astype(str).str.startswith(PREFIX)]
    if annotations.empty:
        return pd.DataFrame(columns=COLUMNS), []
    marked = judge_span_rows(tasks, annotations, project, spans)
    if predicted.empty and not marked:
        return pd.DataFrame(columns=COLUMNS), []
    spec = spec_from_protocol(project)
    ratings, _ = from_label_studio(annotations, predicted.iloc[:0], spec)
    agent = ratings["agent"].fillna("").astype(str)  # a segment is an agent's part of an item (Sotopia), as the judges'
    ratings = ratings.assign(item=ratings["item"].astype(str) + np.where(agent != "", " | " + agent, ""))
    metrics = _metrics(predicted, spec)
    why = Reasons()
    checks, _, _ = judge_checks(ratings, metrics, spec, why)
    rows, lines = [], []
    for judge in sorted(set(metrics["metric"]) | {r["judge"] for r in marked}):
        rows += [r for r in marked if r["judge"] == judge]
        alt, _ = alt_test_tables(ratings, metrics, spec, judge, epsilon, min_items=min_items, why=why)
        for criterion, crit in spec.criteria.items():
            mine = checks[(checks["criterion"] == criterion) & (checks["metric"] == judge)] if not checks.empty \
                else checks
            row = {"judge": judge, "criterion": criterion, "scale": crit.scale}
            if not mine.empty:
                row.update(segments=int(mine["n"].iat[0]), agreement=float(mine["kappa"].iat[0]),
                           statistic="quadratic-weighted kappa" if crit.scale == "ordinal" else "Cohen's kappa",
                           accuracy=float(mine["accuracy"].iat[0]))
            elif crit.scale == "interval":
                row.update(_spearman(ratings, metrics, judge, criterion))
            else:
                continue
            test = alt[alt["criterion"] == criterion]
            if not test.empty:
                row.update(alt_test="passes" if bool(test["passes"].iat[0]) else "fails",
                           winning_rate=float(test["winning_rate"].iat[0]),
                           advantage_probability=float(test["advantage_probability"].iat[0]))
            else:
                reasons = [r["reason"] for r in why if r["table"] == "alt_test" and r["criterion"] == criterion]
                row["alt_test"] = "not run: " + (reasons[-1] if reasons else "no human ratings to test against")
            rows.append(row)
        lines.append(_line(judge, [r for r in rows if r["judge"] == judge], epsilon) + _post_edit_note(
            tasks, project, judge))
    return pd.DataFrame(rows, columns=COLUMNS), lines


def judge_span_rows(tasks: list[dict], annotations: pd.DataFrame, project,
                    spans: pd.DataFrame | None = None) -> list[dict]:
    """A span protocol's judges against the annotators, per judge and span control: character-level precision and
    recall of the judge's marks against each annotator's on the tasks both marked (pooled over annotators), F1,
    and the same counting only characters given the same label (stats.spans.span_agreement). Empty when the
    protocol has no spans or no judge marked any task; the annotators are those of `annotations` (kept ones).
    `spans`: the annotators' spans of `tasks` as span_frame gives them (read here when not given)."""
    from evalstudio.stats.spans import span_agreement
    from evalstudio.values.spans import span_controls, span_object_field

    from ..tables.tidy import span_frame

    names, _ = span_controls(project.interface)
    judged = [{**t, "annotations": [{"id": p.get("id"), "completed_by": str(p["model_version"])[len(PREFIX):],
                                     "result": p.get("result") or []}
                                    for p in t.get("predictions") or []
                                    if str(p.get("model_version", "")).startswith(PREFIX)]} for t in tasks]
    if not names or not any(t["annotations"] for t in judged):
        return []
    # the annotators' answers kept (annotation -> annotator, task), their spans named as the annotations name them;
    # a task an annotator answered without marking anything counts: nothing marked
    kept = annotations[~annotations["cancelled"].astype(bool)] if "cancelled" in annotations else annotations
    kept = kept.drop_duplicates("annotation_id")
    who = dict(zip(kept["annotation_id"].astype(str), kept["annotator"].astype(str)))
    answered = set(zip(kept["annotator"].astype(str), kept["task_id"].astype(int)))
    humans = span_frame(tasks, project) if spans is None else spans
    humans = humans[humans["annotation_id"].astype(str).isin(who)]
    humans = humans.assign(annotator=humans["annotation_id"].astype(str).map(who))
    machines = span_frame(judged, project)
    by_judge = {(j["completed_by"], int(t["id"])) for t in judged for j in t["annotations"]}
    rows = []
    for name in names:
        field = span_object_field(project.interface, project.interface.get_control(name))
        lengths = {int(t["id"]): len(t["data"].get(field) or "") for t in tasks
                   if isinstance((t.get("data") or {}).get(field), str)}
        for judge in sorted({j for j, _ in by_judge}):
            counts = np.zeros(5)  # characters: marked by the annotator, by the judge, by both, same label; segments
            for human in sorted({h for h, _ in answered}):
                common = sorted(t for h, t in answered if h == human and (judge, t) in by_judge and t in lengths)
                if not common:
                    continue
                pick = lambda f, who: f[(f["control"] == name) & (f["annotator"].astype(str) == who)  # noqa: E731
                                        & f["task_id"].isin(common)]
                both = pd.concat([pick(humans, human).assign(annotator="human"),
                                  pick(machines, judge).assign(annotator="judge")], ignore_index=True)
                both = pd.DataFrame({"segment": both["task_id"].astype(int), "annotator": both["annotator"],
                                     "start": both["start"], "end": both["end"], "severity": both["labels"]})
                r = span_agreement(both, pd.Series({t: lengths[t] for t in common}), "human", "judge",
                                   severities=tuple(project.interface.get_control(name).labels))
                counts += [r["marked_first"], r["marked_second"], r["both"], r["same_label"], len(common)]
            if not counts[4]:
                continue
            for suffix, hits, said in (("", counts[2], "any label"), ("_label", counts[3], "same label")):
                rows.append({"judge": judge, "criterion": f"{name} spans", "scale": "spans", "segments": int(counts[4]),
                             "agreement": 2 * hits / (counts[0] + counts[1]) if counts[0] + counts[1] else np.nan,
                             "statistic": f"character F1 with the annotators ({said})",
                             "precision": hits / counts[1] if counts[1] else np.nan,
                             "recall": hits / counts[0] if counts[0] else np.nan})
    return rows


def _post_edit_note(tasks: list[dict], project, judge: str) -> str:
    """Where the study showed this judge's spans to correct (`prefill: judge:NAME`): what the annotators did with
    them (exporters.analyses.postedit), as a sentence; empty otherwise."""
    from .postedit import post_edit_shares, post_edits

    if project.prefill != PREFIX + judge:
        return ""
    edits = post_edits(tasks, project, project.prefill)
    lost = edits.attrs.get("not_counted", 0)
    lost = (f" {lost} answer(s) started from a prediction of this judge that Label Studio no longer holds as shown "
            "(deleted, or replaced by running the judge again): their post-edits are not counted." if lost else "")
    if edits.empty or not edits["predicted"].sum():
        return lost
    share = post_edit_shares(edits.assign(all="all"), by="all").iloc[0]
    return (f" Its spans shown to annotators ({int(share['predicted'])} in {int(share['annotations'])} answers): "
            f"{share['kept']:.0%} kept, {share['edited']:.0%} edited, {share['removed']:.0%} removed; "
            f"{share['added_per_annotation']:.2f} spans added per answer.") + lost


def _spearman(ratings, metrics, judge, criterion) -> dict:
    from scipy.stats import spearmanr

    r = ratings[ratings["criterion"] == criterion]
    key = lambda f: f["system"].astype(str) + " | " + f["item"].astype(str)  # noqa: E731
    human = r.assign(key=key(r)).groupby("key")["value"].mean()
    m = metrics[(metrics["metric"] == judge) & (metrics["criterion"] == criterion)]
    judged = pd.Series(pd.to_numeric(m["value"]).to_numpy(), index=key(m).to_numpy())
    both = human.index.intersection(judged.index)
    rho = spearmanr(human[both], judged[both]).statistic if len(both) > 2 else float("nan")
    return {"segments": int(len(both)), "agreement": float(rho), "statistic": "Spearman's rho with the mean"}


def _line(judge: str, rows: list[dict], epsilon: float) -> str:
    said = "; ".join(f"{r['criterion']}: {r['statistic']} {r['agreement']:.2f} over {r['segments']} segments"
                     for r in rows if not pd.isna(r.get("agreement", np.nan)))
    passed = [r for r in rows if r.get("alt_test") == "passes"]
    failed = [r for r in rows if r.get("alt_test") == "fails"]
    tested = ", ".join(f"{r['criterion']} {r['alt_test']} (winning rate {r['winning_rate']:.2f})"
                       for r in passed + failed)
    if passed and not failed:
        verdict = f"it may replace the annotators (alternative annotator test at epsilon {epsilon:g}: {tested})"
    elif passed:
        verdict = (f"it may replace the annotators only on {', '.join(r['criterion'] for r in passed)} "
                   f"(alternative annotator test at epsilon {epsilon:g}: {tested})")
    elif failed:
        verdict = f"do not use it in place of the annotators (alternative annotator test at epsilon {epsilon:g}: {tested})"
    else:
        reasons = sorted({r["alt_test"] for r in rows if r.get("alt_test")})
        verdict = "whether it may replace the annotators cannot be told yet: " + ("; ".join(reasons) or
                                                                                 "no criterion to test")
    return f"{judge}: {said or 'no agreement computed'}. Verdict: {verdict}."
