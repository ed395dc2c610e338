"""Adaptive collection through the gateway (projects.yaml `assignment:` and `stop_when:`): which task a participant
gets next when the strategy is `uncertainty` or `ability`, and whether the part has collected enough.

What it sees is the ledger's record of the answers given through the gateway (each answer's value of the routing
criterion is stored with it, from the checked result, never from anything else the browser sends), so every gateway
process routes from the same state and a restart loses nothing. Answers given in Label Studio itself are not seen:
an adaptive study runs through the gateway. The statistics are evalstudio/stats/adaptive.py; the constraints of
every order hold as for a fixed overlap (evalstudio/tasks/order.py): a task is never served twice to one
participant, nor beyond its overlap (`annotators_per_task`, Label Studio's maximum), nor an item a participant met in
another part, and the next task is of another context than the last one where the ranking leaves a choice among
equally uncertain tasks.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from evalstudio.base.numbers import percent
from evalstudio.stats import adaptive

from .ledger import Load, task_load

STOP_MESSAGE = "The study has collected all the answers it needs. Thank you for taking part!"


@dataclass(frozen=True)
class Routing:
    """A part's adaptive collection, as the gateway applies it."""
    strategy: str  # uncertainty or ability
    control: str  # the routing criterion's control (from_name in a result)
    labels: tuple[str, ...]  # its labels (categorical); () for numeric
    missing: frozenset[str]  # answers that mean "no rating"
    min_overlap: int
    posterior: float | None
    width: float | None
    budget: int | None
    pay_per_label: float | None

    @property
    def categorical(self) -> bool:
        """Whether the routed criterion has labels (else it is a number)."""
        return bool(self.labels)

    @property
    def target(self) -> str | None:
        """The stopping rule's target in words, or None without one."""
        if self.posterior is not None:
            return f"every task's label posterior at least {self.posterior:g}"
        if self.width is not None:
            return f"every task's mean rating's 95% interval at most {self.width:g} wide"
        return None


def routing_of(project) -> Routing | None:
    """The part's routing from its projects.yaml entry (None: a fixed overlap and no stopping rule, or an active
    design: `active_of`)."""
    assignment, stop = project.assignment, project.stop_when
    if (assignment is None and stop is None) or (assignment is not None and assignment.strategy == "active") or \
            (stop is not None and stop.pac is not None):  # (active: active_of; pac: pac_of)
        return None
    name = (assignment.criterion if assignment else None) or next(iter(project.criteria))
    criterion = project.criteria[name]
    (_, control), = project.controls(name)
    strategy = assignment.strategy if assignment else "uniform"
    return Routing(strategy, control, tuple(criterion.labels or ()), frozenset(criterion.missing),
                   assignment.min_overlap if assignment else 1,
                   stop.posterior if stop else None, stop.width if stop else None, stop.budget if stop else None,
                   stop.pay_per_label if stop else None)


@dataclass(frozen=True)
class Active:
    """A part's active design (projects.yaml `assignment: {strategy: active}`), as the gateway draws it."""
    judge: str
    budget: int
    mix: float
    control: str  # the estimated criterion's control: the judge's value of it is the task's score


def active_of(project) -> Active | None:
    """The project's active design (judge, budget, mix, control), or None."""
    assignment = project.assignment
    if assignment is None or assignment.strategy != "active":
        return None
    name = assignment.criterion or next(iter(project.criteria))
    (_, control), = project.controls(name)
    return Active(assignment.judge, assignment.budget, assignment.mix, control)


def judge_values(predictions: list[dict], judge: str, control: str) -> tuple[list[dict], float | None] | None:
    """The values of `judge`'s regions of `control` in a task's predictions (model version judge:NAME or NAME) and
    the prediction's score as its confidence (None unless a number in [0, 1]); None when the judge has none."""
    for prediction in predictions:
        if prediction.get("model_version") not in (f"judge:{judge}", judge):
            continue
        values = [region.get("value") or {} for region in prediction.get("result") or []
                  if isinstance(region, dict) and region.get("from_name") == control]
        confidence = prediction.get("score")
        if not (isinstance(confidence, (int, float)) and not isinstance(confidence, bool) and 0 <= confidence <= 1):
            confidence = None
        return values, None if confidence is None else float(confidence)
    return None


def judge_reading(predictions: list[dict], active: Active) -> tuple[float | None, float | None]:
    """(score, confidence) of the design's judge on a task, from the task's predictions: the judge's value of the
    criterion (a rating or a number) and the prediction's score (the judge's mean confidence); None where missing
    or not a finite number."""
    found = judge_values(predictions, active.judge, active.control)
    if found is None:
        return None, None
    values, confidence = found
    score = None
    for value in values:
        for number in finite_numbers(value):
            score = number
    return score, confidence


def finite_numbers(value: dict) -> list[float]:
    """The finite numbers a region's value holds as its rating or number, in that order (a bool is not one)."""
    return [float(number) for number in (value.get("rating"), value.get("number"))
            if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number)]


def draw_design(active: Active, task_ids: list[int], predictions: dict[int, list[dict]], rng=None) -> list[tuple]:
    """The draw of an active part: (task id, the judge's score, its confidence, probability, drawn) per task. The
    probabilities come from the judge's uncertainty, 1 - its confidence (a task it did not score, or scored without
    a confidence, counts as unsure: 1), mixed with uniform (`sampling_probabilities`), the budget capped at the
    number of tasks; the draw is from the operating system's randomness unless `rng` is given."""
    import secrets

    import numpy as np

    from evalstudio.stats.active import sampling_probabilities

    if not task_ids:
        return []
    readings = [judge_reading(predictions.get(t, []), active) for t in task_ids]
    uncertainty = np.array([1.0 if c is None else 1.0 - c for _, c in readings])
    probability = sampling_probabilities(uncertainty, min(active.budget, len(task_ids)), active.mix)
    rng = rng or np.random.default_rng(secrets.randbits(128))
    drawn = rng.random(len(task_ids)) < probability
    return [(t, s, c, float(p), bool(d)) for t, (s, c), p, d in zip(task_ids, readings, probability, drawn)]


def value_of(result: list[dict], routing: Routing) -> str | None:
    """The routing criterion's answer in a checked result, as JSON; None when it has none (or a "no rating")."""
    for region in result:
        if region.get("from_name") != routing.control:
            continue
        value = region.get("value") or {}
        if routing.categorical:
            chosen = value.get("choices") or []
            if len(chosen) == 1 and chosen[0] in routing.labels and chosen[0] not in routing.missing:
                return json.dumps(chosen[0])
            return None
        numbers = finite_numbers(value)
        if numbers:
            return json.dumps(numbers[0])
    return None


@dataclass
class State:
    """A part's answers as codes over its tasks (task ids sorted), and their certainty."""
    task_ids: list[int]
    certainty: adaptive.Certainty
    answers: int  # answers given through the gateway (with or without a value)


def state_of(routing: Routing, task_ids: list[int], values: list[tuple[int, str, str | None]]) -> State:
    """The certainty of each task's label from the answers (task id, participant, value JSON) in the ledger."""
    index = {t: i for i, t in enumerate(task_ids)}
    people: dict[str, int] = {}
    tasks, annotators, numbers = [], [], []
    for task_id, participant, raw in values:
        if task_id not in index or raw is None:
            continue
        value = json.loads(raw)
        if routing.categorical:
            if value not in routing.labels:
                continue
            value = routing.labels.index(value)
        tasks.append(index[task_id])
        annotators.append(people.setdefault(participant, len(people)))
        numbers.append(value)
    weighted = routing.strategy == "ability"
    if routing.categorical:
        certainty = adaptive.categorical_certainty(tasks, annotators, numbers, n_tasks=len(task_ids),
                                                   n_classes=len(routing.labels), weighted=weighted)
    else:
        certainty = adaptive.numeric_certainty(tasks, annotators, numbers, n_tasks=len(task_ids), weighted=weighted)
    return State(task_ids, certainty, len(values))


def reached(routing: Routing, state: State, overlap: int) -> str | None:
    """Which stopping target the part has reached (None: not yet)."""
    if routing.budget is not None and state.answers >= routing.budget:
        return f"the budget of {routing.budget} answers"
    if routing.target and adaptive.study_done(state.certainty, min_overlap=routing.min_overlap,
                                              max_overlap=overlap, posterior=routing.posterior, width=routing.width):
        return routing.target
    return None


def choose_adaptive(routing: Routing, state: State, order: list[int], contexts: dict[int, str],
                    outside: dict[int, int], taken: dict[int, Load], mine: set[int], overlap: int,
                    last_context: str | None) -> int | None:
    """The participant's next task under the strategy: `adaptive.rank` over the tasks in the participant's own
    order (which breaks ties), skipping tasks they had and tasks with `overlap` answers or holds; of the tasks as
    uncertain as the first, one of another context than the last one's."""
    if routing.budget is not None:
        held = sum(t.holding for t in taken.values())
        if state.answers + held >= routing.budget:
            return None
    position = {t: i for i, t in enumerate(state.task_ids)}
    codes = [position[t] for t in order if t in position]
    done = adaptive.met(state.certainty, routing.posterior, routing.width) if routing.target else None
    ranked = adaptive.rank(state.certainty, codes, min_overlap=routing.min_overlap, max_overlap=overlap, done=done)
    open_tasks = [c for c in ranked if state.task_ids[c] not in mine
                  and task_load(state.task_ids[c], outside, taken) < overlap]
    if not open_tasks:
        return None
    group, score = adaptive.sort_keys(state.certainty, open_tasks, routing.min_overlap)
    for c, g, k in zip(open_tasks, group, score):
        if (g, k) != (group[0], score[0]):
            break
        if contexts.get(state.task_ids[c]) != last_context:
            return state.task_ids[c]
    return state.task_ids[open_tasks[0]]


def record(routing: Routing, target: str, state: State, minutes: float) -> str:
    """What the ledger keeps of a part's stop (JSON): the target, answers, participant-minutes and money."""
    money = state.answers * routing.pay_per_label if routing.pay_per_label else None
    return json.dumps({"target": target, "answers": state.answers, "minutes": round(minutes, 2),
                       "money": None if money is None else round(money, 2)})


def progress_lines(parts, per_part: list[list[dict]], ledger) -> list[str]:
    """What `status` says of each adaptive part: the target it reached, when and at what cost, or how far it is."""
    import datetime

    stopped = ledger.stopped() if ledger is not None else {}
    lines = []
    for part, tasks in zip(parts, per_part):
        pac = pac_of(part)
        if pac is not None:  # PAC labels: the threshold and its bound once stopped
            how = f"{part.name}: PAC labels with judge {pac.judge} (epsilon {pac.epsilon:g}, alpha {pac.alpha:g})"
            if part.name in stopped:
                at, kept = stopped[part.name]
                when = datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
                lines.append(f"{how}: stopped at {when}: {json.loads(kept)['target']}")
            else:
                answered = len(ledger.part_values(part.name)) if ledger is not None else 0
                lines.append(f"{how}: collecting; {answered} answers through the gateway")
            continue
        route = routing_of(part)
        if route is None:
            continue
        how = f"{part.name}: adaptive collection ({route.strategy}, at least {route.min_overlap} answer(s) per task)"
        if part.name in stopped:
            at, kept = stopped[part.name]
            record = json.loads(kept)
            when = datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            cost = f"{record['answers']} answers, {record['minutes']:g} participant-minutes"
            if record.get("money") is not None:
                cost += f", {record['money']:g} in pay"
            lines.append(f"{how}: stopped at {when}, target reached: {record['target']}; cost: {cost}")
            continue
        values = ledger.part_values(part.name) if ledger is not None else []
        state = state_of(route, sorted(int(t["id"]) for t in tasks), values)
        overlap = part.annotators_per_task
        parts_of_it = [f"{state.answers} answers through the gateway"]
        if route.budget is not None:
            parts_of_it.append(f"a budget of {route.budget}")
        if route.target:
            ready = int(adaptive.settled(state.certainty, min_overlap=route.min_overlap, max_overlap=overlap,
                                         posterior=route.posterior, width=route.width).sum())
            parts_of_it.append(f"{ready} of {len(state.task_ids)} tasks at the target ({route.target})")
        lines.append(f"{how}: collecting; {', '.join(parts_of_it)}")
    return lines


# --- PAC labels through the gateway (projects.yaml stop_when: {pac: ...}) --------------------------------------

@dataclass(frozen=True)
class Pac:
    """A part's PAC labelling: a calibration sample first, then the tasks the threshold gives to humans."""
    judge: str
    epsilon: float
    alpha: float
    calibration: int
    control: str  # the criterion's control: the judge's label of it, and the participants' answers (value_of)
    labels: tuple[str, ...]
    missing: frozenset[str]

    categorical = True  # (value_of reads a Pac as it reads a Routing)


def pac_of(project) -> Pac | None:
    """The project's PAC stopping rule with its control and labels, or None."""
    stop = project.stop_when
    if stop is None or stop.pac is None:
        return None
    name = (project.assignment.criterion if project.assignment else None) or next(iter(project.criteria))
    (_, control), = project.controls(name)
    criterion = project.criteria[name]
    return Pac(stop.pac.judge, stop.pac.epsilon, stop.pac.alpha, stop.pac.calibration, control,
               tuple(criterion.labels or ()), frozenset(criterion.missing))


def judge_label(predictions: list[dict], pac: Pac) -> tuple[float | None, float | None]:
    """(the position of the judge's label among the criterion's labels, its confidence) on a task; None where the
    judge gave none (or a label not of the criterion) or no confidence in [0, 1]."""
    found = judge_values(predictions, pac.judge, pac.control)
    if found is None:
        return None, None
    values, confidence = found
    position = None
    for value in values:
        chosen = value.get("choices") or []
        if len(chosen) == 1 and chosen[0] in pac.labels:
            position = float(pac.labels.index(chosen[0]))
    return position, confidence


def draw_calibration(pac: Pac, task_ids: list[int], predictions: dict[int, list[dict]], rng=None) -> list[tuple]:
    """A PAC part's design: (task id, the judge's label position, its confidence, probability, in the calibration
    sample) per task; the sample is `calibration` tasks drawn uniformly without replacement (all when there are
    fewer), from the operating system's randomness unless `rng` is given."""
    import secrets

    import numpy as np

    if not task_ids:
        return []
    m = min(pac.calibration, len(task_ids))
    rng = rng or np.random.default_rng(secrets.randbits(128))
    sample = set(rng.choice(len(task_ids), size=m, replace=False).tolist())
    readings = [judge_label(predictions.get(t, []), pac) for t in task_ids]
    return [(t, label, confidence, m / len(task_ids), i in sample)
            for i, (t, (label, confidence)) in enumerate(zip(task_ids, readings))]


def pac_needed(pac: Pac, design: dict, values: list[tuple[int, str, str | None]], overlap: int):
    """(tasks humans label now, the stop record or None). Until every calibration task has its `overlap` answers:
    the calibration sample. Then the PAC threshold from the sample's human labels (the most frequent answer; a tie
    counts as the judge being wrong) against the judge's: the sample and every task whose uncertainty (1 - the
    judge's confidence; 1 where it has none) is at or above it; once those have their answers, the record."""
    import numpy as np

    from evalstudio.stats.pac import NO_MAJORITY, pac_threshold

    answers: dict[int, list[str]] = {}
    for task_id, _, value in values:
        answers.setdefault(task_id, []).append(value)
    tasks = sorted(design)
    sample = [t for t in tasks if design[t][1]]
    if any(len(answers.get(t, [])) < overlap for t in sample):
        return set(sample), None
    judge = [None if design[t][2] is None else pac.labels[int(design[t][2])] for t in tasks]
    uncertainty = np.array([1.0 if design[t][3] is None else 1.0 - design[t][3] for t in tasks])
    index = {t: i for i, t in enumerate(tasks)}
    human = []
    for t in sample:
        given = [json.loads(v) for v in answers[t] if v is not None]
        counts = {label: given.count(label) for label in set(given)}
        top = [label for label, n in counts.items() if n == max(counts.values(), default=0)]
        human.append(top[0] if len(top) == 1 else NO_MAJORITY)  # never equal to a judge's label
    result = pac_threshold(judge, uncertainty, [index[t] for t in sample], human, pac.epsilon, pac.alpha)
    needed = {t for t in tasks if result.human[index[t]]}
    if any(len(answers.get(t, [])) < overlap for t in needed):
        return needed, None
    target = (f"humans labelled {len(needed)} of {len(tasks)} tasks (the calibration sample of {len(sample)} and "
              f"every task with the judge's uncertainty at or above {result.threshold:.4g}); the judge's labels of the "
              f"others are wrong on at most {result.bound:.1%} of all tasks with probability "
              f"{percent(1 - pac.alpha)} (epsilon {pac.epsilon:g}; Candès, Ilyas & Zrnic 2025)")
    return needed, json.dumps({"target": target, "answers": len(values), "threshold": result.threshold,
                               "bound": result.bound, "human": sorted(needed)})
