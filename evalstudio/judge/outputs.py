"""What a judge run writes: the metric scores `analyze --metrics` reads, every answer with the digest of the prompt
it answered, the prompts themselves (once per digest), a span protocol's spans and annotations tables, and a summary per judge (answers, missing and why, cache,
tokens, cost, order consistency and position bias of comparisons, mean confidence)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.base.chat import Judge
from .instrument import Instrument
from .run import Run, comparison_rows, metric_rows, position_bias
from .spans import judged_tasks

METRICS, ANSWERS, PROMPTS, SUMMARY = "metrics.csv", "answers.jsonl", "prompts.jsonl", "summary.csv"
SPANS = "spans.csv"  # a span protocol's: the judges' spans as the annotators' spans table has them (one per span)
# and every answer of theirs as the annotators' annotations table has it (a segment they marked no span in too)
ANNOTATIONS = "annotations.csv"
# what `analyze --metrics` reads, then which project (a counterbalanced list) and version of the item was judged
METRIC_COLUMNS = ["item", "system", "metric", "criterion", "value", "confidence", "project", "version"]


def summary(instrument: Instrument, run: Run, judges: list[Judge],
            prices: dict[str, tuple[float | None, float | None]]) -> pd.DataFrame:
    """One row per judge, counting the run's own requests and tokens (a study's part: that part's); `prices`:
    judge -> (per million prompt tokens, per million answer tokens)."""
    rows = []
    for judge in judges:
        asked = [a for a in run.asked if a.judge == judge.name]
        combined = [c for c in run.combined if c.judge == judge.name]
        usage = run.usage.get(judge.name)
        reasons: dict[str, int] = {}
        for a in asked:
            if a.error:
                reasons[a.error.split(":")[0]] = reasons.get(a.error.split(":")[0], 0) + 1
        consistent = [c.consistent for c in combined if c.consistent is not None]
        confidences = [v for c in combined for v in c.confidence.values() if v is not None]
        bias = position_bias(instrument, asked)
        cost = usage.cost(*prices.get(judge.name, (None, None))) if usage else None
        rows.append({
            "judge": judge.name, "model": judge.model, "project": instrument.project.name, "tasks": len(combined),
            "answers": sum(a.answer is not None for a in asked), "missing": sum(a.answer is None for a in asked),
            "why_missing": "; ".join(f"{k} ({n})" for k, n in sorted(reasons.items())),
            "from_cache": sum(a.cached for a in asked), "requests": usage.requests if usage else 0,
            "retries": usage.retried if usage else 0, "tokens_in": usage.tokens_in if usage else 0,
            "tokens_out": usage.tokens_out if usage else 0, "cost": "" if cost is None else round(cost, 6),
            "order_consistency": round(float(np.mean(consistent)), 4) if consistent else "",
            "first_shown_share": "" if bias["first_shown"] is None else round(bias["first_shown"], 4),
            "mean_confidence": round(float(np.mean(confidences)), 4) if confidences else ""})
    return pd.DataFrame(rows)


def write(folder: Path, instrument: Instrument, run: Run, tasks: list[dict], prompts: dict[str, tuple],
          table: pd.DataFrame, append: bool = False) -> None:
    """The run's files in `folder` (a study of several parts appends each part's rows)."""
    from evalstudio.exporters.tables.files import write_table

    mode = "a" if append else "w"
    compare = instrument.project.compare
    if compare is not None and compare.kind == "pairwise":  # verdicts on comparisons, as analyze reads a judge's
        metrics = pd.DataFrame(comparison_rows(instrument, run, tasks),
                               columns=["item", "annotator", "left", "right", "outcome", "confidence"])
    else:
        metrics = pd.DataFrame(metric_rows(instrument, run, tasks),
                               columns=METRIC_COLUMNS)
    if append and (folder / METRICS).exists():
        metrics = pd.concat([pd.read_csv(folder / METRICS, dtype=str, keep_default_na=False), metrics.astype(str)])
    write_table(metrics, folder / METRICS, "csv")
    if instrument.span_questions:
        from evalstudio.exporters.tables.tidy import annotation_frame, span_frame

        judged = judged_tasks(instrument.controls, run.combined, tasks)
        for name, table_of in ((SPANS, span_frame), (ANNOTATIONS, annotation_frame)):
            rows = table_of(judged, instrument.project)
            if append and (folder / name).exists():
                rows = pd.concat([pd.read_csv(folder / name, dtype=str, keep_default_na=False), rows.astype(str)])
            write_table(rows, folder / name, "csv")
    with open(folder / ANSWERS, mode, encoding="utf-8") as out:
        for a in run.asked:
            out.write(json.dumps({"project": instrument.project.name, "judge": a.judge, "task_id": a.task_id,
                                  "sample": a.sample, "order": list(a.order), "prompt": a.digest,
                                  "answer": a.answer, "as_shown": a.shown, "error": a.error, "cached": a.cached},
                                 ensure_ascii=False) + "\n")
    with open(folder / PROMPTS, mode, encoding="utf-8") as out:
        for digest, messages in prompts.items():
            out.write(json.dumps({"prompt": digest, "messages": list(messages)}, ensure_ascii=False) + "\n")
    if append and (folder / SUMMARY).exists():
        table = pd.concat([pd.read_csv(folder / SUMMARY, dtype=str, keep_default_na=False), table.astype(str)])
    write_table(table, folder / SUMMARY, "csv")
