"""Judging a protocol's tasks: every task asked of every judge (each sample, each order), the answers checked as a
participant's are, and combined per task.

The combined answer of a judge on a task: a number is the mean of its answers over samples and orders; a label the
most frequent one (pairwise: when the two orders disagree and no label has a majority, the tie label if the
protocol has one, else none). Its confidence in [0, 1] is the share of answers that gave the combined label, or
for a number 1 - 2 x the answers' standard deviation / the scale's range (0 when they spread over half the scale);
blank with one answer. The spread is what routing human labels to where the judge is unsure reads.

Pairwise protocols also give, per judge: how often the two orders agree on the stored candidates (order
consistency), and how often a verdict picks the candidate shown first, of the verdicts that pick one (position
bias: 0.5 is none)."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from evalstudio.gateway.checks import Refused
from evalstudio.tasks.lists import version_key
from evalstudio.values.results import task_fields

from evalstudio.base.chat import ChatClient, Judge, Usage
from .instrument import Instrument
from .spans import regions_of

MALFORMED_RETRIES = 2  # a malformed answer is asked again this many times, then recorded as missing


@dataclass
class Asked:
    """One answer of one judge to one task, in one order, one sample."""
    judge: str
    task_id: int
    sample: int
    order: tuple[int, ...]
    digest: str
    answer: dict | None  # checked, in the stored order of the candidates; None: missing
    shown: dict | None = None  # as answered (the shown order)
    error: str | None = None
    cached: bool = False


@dataclass
class Combined:
    """One judge's answer to one task, its samples and orders combined, with a confidence per control."""
    judge: str
    task_id: int
    values: dict[str, object]
    confidence: dict[str, float | None]
    answers: int
    missing: int
    consistent: bool | None = None  # pairwise: the two orders agree


@dataclass
class Run:
    """What a judging run asked and combined, the prompts its judges read and their usage."""
    asked: list[Asked] = field(default_factory=list)
    combined: list[Combined] = field(default_factory=list)
    prompts: dict[str, tuple] = field(default_factory=dict)  # digest -> the messages the judges read
    usage: dict[str, Usage] = field(default_factory=dict)  # per judge: requests, tokens, ... of this run's tasks


async def ask_task(client: ChatClient, instrument: Instrument, judge: Judge, task: dict, samples: int,
                   both_orders: bool = True, prompts: dict | None = None, usage: Usage | None = None) -> list[Asked]:
    """A task's answers of one judge: every order, every sample, each checked (`usage`: counted there too)."""
    out = []
    data = task.get("data") or {}
    for order in instrument.orders(both_orders):
        prompt = instrument.prompt(data, order)
        if prompts is not None:
            prompts[prompt.digest] = prompt.messages
        for sample in range(samples):
            out.append(await _ask_checked(client, instrument, judge, task["id"], prompt, sample, usage,
                                          instrument.shown(data, order)))
    return out


async def _ask_checked(client, instrument, judge, task_id, prompt, sample, usage, shown: dict) -> Asked:
    reason = None
    # what an earlier run kept first (a malformed first attempt was forgotten, a valid later one kept), then the
    # attempts it did not keep, asked
    kept = client.recall(judge, prompt.digest, sample, MALFORMED_RETRIES + 1, usage)
    done = {attempt for attempt, _, _ in kept}
    for attempt, found, key in kept + [(a, None, "") for a in range(MALFORMED_RETRIES + 1) if a not in done]:
        answer, key = (found, key) if found is not None else \
            await client.ask(judge, prompt.messages, prompt.digest, sample, attempt, usage)
        if answer.content is None:
            return Asked(judge.name, task_id, sample, prompt.order, prompt.digest, None, error=answer.error)
        try:
            checked = instrument.check(answer.content, shown)
        except Refused as e:
            reason = f"malformed answer: {e}"
            client.forget(key)  # never kept: the next run asks again (the endpoint may have been mended)
            continue
        return Asked(judge.name, task_id, sample, prompt.order, prompt.digest,
                     instrument.unpermute(checked, prompt.order), checked, cached=answer.cached)
    return Asked(judge.name, task_id, sample, prompt.order, prompt.digest, None,
                 error=f"{reason} ({MALFORMED_RETRIES + 1} times)")


def combine(instrument: Instrument, asked: list[Asked]) -> Combined:
    """One judge's answers to one task, combined (see the module's documentation)."""
    first = asked[0]
    given = [a for a in asked if a.answer is not None]
    values, confidence = {}, {}
    tie = instrument.project.compare.outcomes.get("tie") if instrument.project.compare is not None and \
        instrument.project.compare.kind == "pairwise" else None
    for name, control in instrument.controls.items():
        answers = [a.answer[name] for a in given if name in a.answer]
        if not answers:
            continue
        if control.tag in ("Rating", "Number"):
            values[name] = float(np.mean(answers))
            span = (control.high - control.low) or 1.0
            confidence[name] = max(0.0, 1 - 2 * float(np.std(answers)) / span) if len(answers) > 1 else None
        elif control.tag == "Choices":
            keys = [tuple(a) if isinstance(a, list) else (a,) for a in answers]
            counts = Counter(keys).most_common()
            best, n = counts[0]
            if len(counts) > 1 and counts[1][1] == n:  # no majority
                if tie is not None and name == instrument.comparison_control:
                    best = (tie,)
                else:
                    confidence[name] = n / len(answers)
                    continue
            values[name] = list(best) if control.multiple else best[0]
            confidence[name] = (n / len(answers)) if len(answers) > 1 else None
        else:  # a written answer or the spans marked: the first sample's, as it was given
            values[name] = answers[0]
    consistent = None
    if instrument.positions > 1:
        by_order = {}
        for a in given:
            by_order.setdefault(a.order, []).append(tuple(sorted(map(str, a.answer.items()))))
        if len(by_order) > 1:
            consistent = len({Counter(v).most_common(1)[0][0] for v in by_order.values()}) == 1
    return Combined(first.judge, first.task_id, values, confidence, len(given), len(asked) - len(given), consistent)


async def judge_tasks(client: ChatClient, instrument: Instrument, judges: list[Judge], tasks: list[dict],
                      samples: int = 1, both_orders: bool = True,
                      on_done: Callable[[int], None] | None = None, run: Run | None = None) -> Run:
    """Every task asked of every judge, into `run`; `on_done(n)` after each task and judge. Cancelled (Ctrl-C):
    `run` holds the tasks answered so far (whole: a task's answers are added together), and every answer is in
    the cache."""
    run = run if run is not None else Run()

    async def one(judge: Judge, task: dict) -> None:
        asked = await ask_task(client, instrument, judge, task, samples, both_orders, run.prompts,
                               run.usage.setdefault(judge.name, Usage()))
        run.asked.extend(asked)
        run.combined.append(combine(instrument, asked))
        if on_done:
            on_done(1)

    # a bounded number of tasks in flight (the client bounds the requests): memory stays flat for large projects
    queue: asyncio.Queue = asyncio.Queue()
    for judge in judges:
        for task in tasks:
            queue.put_nowait((judge, task))

    async def worker() -> None:
        while True:
            try:
                judge, task = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await one(judge, task)

    workers = [asyncio.create_task(worker()) for _ in range(max(1, client.concurrency * 2))]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        in_order(run, judges, tasks)
    return run


def in_order(run: Run, judges: list[Judge], tasks: list[dict]) -> None:
    """The run's answers, and the prompts they answered, in the order of judges, then tasks (as asked, whatever
    order they came back in: the same command gives the same files)."""
    order = {(j.name, t["id"]): i for i, (j, t) in enumerate((j, t) for j in judges for t in tasks)}
    run.combined.sort(key=lambda c: order[(c.judge, c.task_id)])
    run.asked.sort(key=lambda a: (order[(a.judge, a.task_id)], a.order != tuple(sorted(a.order)), a.sample))
    first = list(dict.fromkeys(a.digest for a in run.asked if a.digest in run.prompts))
    prompts = {d: run.prompts[d] for d in first} | run.prompts  # (a prompt of no answer: after, as it came)
    run.prompts.clear()
    run.prompts.update(prompts)


def position_bias(instrument: Instrument, asked: list[Asked]) -> dict[str, float | int | None]:
    """Pairwise: of the verdicts that pick a candidate, the share that picks the one shown first (0.5: no bias),
    and the number of such verdicts; None for other protocols."""
    compare = instrument.project.compare
    if compare is None or compare.kind != "pairwise":
        return {"first_shown": None, "verdicts": 0}
    control = instrument.comparison_control
    left, right = compare.outcomes["left"], compare.outcomes["right"]
    picks = [a.shown[control] for a in asked if a.shown is not None and a.shown.get(control) in (left, right)]
    return {"first_shown": (sum(p == left for p in picks) / len(picks)) if picks else None, "verdicts": len(picks)}


def metric_rows(instrument: Instrument, run: Run, tasks: list[dict]) -> list[dict]:
    """The combined answers as metric scores (item, system, metric, criterion, value, confidence, project, version)
    for `analyze --metrics`: numeric criteria, and ordinal labels as their position (1 = the first label), as
    analyze reads Label Studio's answers. Nominal labels are no scores (they stay in answers.jsonl and the
    predictions). `project` names the project the task is of (a counterbalanced list: NAME_listN) and `version`
    the task's version on an entry with lists (projects.yaml lists.version, e.g. Circa's shown_label_is; blank
    otherwise): two lists judge two versions of one item and system."""
    project = instrument.project
    by_id = {t["id"]: t for t in tasks}
    rows = []
    for combined in run.combined:
        task = by_id[combined.task_id]
        known = task_fields(task)
        item = str(known.get("item_id") or task["id"])
        system = known.get("system")
        version = known.get(project.lists.version) if project.lists is not None else None
        for slot in project.slots():
            if slot.control not in combined.values:
                continue
            criterion = project.criteria[slot.criterion]
            value = combined.values[slot.control]
            if criterion.is_numeric:
                number = float(value)
            elif criterion.scale == "ordinal" and criterion.labels and value in criterion.labels:
                number = float(criterion.labels.index(value) + 1)
            else:
                continue
            confidence = combined.confidence.get(slot.control)
            rows.append({"item": item + (f" | {slot.agent}" if slot.agent else ""),
                         "system": "" if system is None else str(system), "metric": combined.judge,
                         "criterion": slot.criterion, "value": number,
                         "confidence": "" if confidence is None or math.isnan(confidence) else round(confidence, 6),
                         "project": project.name, "version": "" if version is None else version_key(version)})
    return rows


def comparison_rows(instrument: Instrument, run: Run, tasks: list[dict]) -> list[dict]:
    """A pairwise protocol's combined verdicts as comparisons (item, annotator = the judge, left, right = the
    systems in the order the task stores them, outcome left / right / tie / both_bad), as `analyze --metrics` reads
    a judge's verdicts on comparisons. Tasks without their hidden positions and verdicts without an outcome are left
    out."""
    compare = instrument.project.compare
    control = instrument.comparison_control
    meaning = {label: outcome for outcome, label in compare.outcomes.items()}
    by_id = {t["id"]: t for t in tasks}
    rows = []
    for combined in run.combined:
        known = task_fields(by_id[combined.task_id])
        shown = known.get("candidates")
        outcome = meaning.get(combined.values.get(control))
        if not (isinstance(shown, list) and len(shown) == 2 and outcome):
            continue
        confidence = combined.confidence.get(control)
        rows.append({"item": str(known.get("item_id") or combined.task_id), "annotator": combined.judge,
                     "left": str(shown[0]), "right": str(shown[1]), "outcome": outcome,
                     "confidence": "" if confidence is None else round(confidence, 6)})
    return rows


def prediction_result(instrument: Instrument, values: dict) -> list[dict]:
    """A judge's combined answer as the result of a Label Studio prediction: each answer on the scale (`on_scale`),
    spans as pre-marked regions with their per-region answers (judge/spans.py)."""
    from evalstudio.values.results import region

    interface = instrument.project.interface
    marked = {name: v for name, v in values.items() if name in instrument.span_questions and isinstance(v, list)}
    return [region(interface, control, value) for control, value in on_scale(instrument, values).items()
            if control not in instrument.span_questions] + regions_of(marked, instrument.controls)


def on_scale(instrument: Instrument, values: dict) -> dict:
    """Combined answers as a participant could give them (a prediction in Label Studio): a mean rating rounded to
    the scale's step (halves up), within its range; labels and texts as they are."""
    out = {}
    for name, value in values.items():
        control = instrument.controls[name]
        if control.tag in ("Rating", "Number") and control.step is not None:
            steps = math.floor((float(value) - control.low) / control.step + 0.5)
            value = min(control.high, max(control.low, control.low + steps * control.step))
            value = int(value) if control.step == 1 and float(value).is_integer() else round(value, 6)
        out[name] = value
    return out
