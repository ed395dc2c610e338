"""Adaptive collection in projects.yaml: `assignment:` (which task the gateway serves a participant next) and
`stop_when:` (when the study has collected enough). The statistics are evalstudio/stats/adaptive.py; the gateway
applies them (evalstudio/crowd/routing.py) from the ledger's record of the answers.

    assignment:
      strategy: uncertainty   # uniform (the default: a fixed overlap), uncertainty or ability
      criterion: q1           # the criterion whose answers decide (default: the entry's first)
      min_overlap: 2          # every task gets this many answers before any task gets more
    stop_when:
      posterior: 0.9          # every task's label at least this probable (categorical criteria), or
      width: 1.0              # every task's mean rating's 95% interval at most this wide (numeric criteria)
      labels: 600             # and/or a budget: answers in all,
      money: 150              # or money, at pay_per_label each
      pay_per_label: 0.25

The maximum overlap is the entry's `annotators_per_task` (Label Studio's maximum annotations per task).

Active collection (human labels where the judge is unsure, evalstudio/stats/active.py):

    assignment:
      strategy: active
      judge: gpt-judge        # the judge whose predictions on the tasks (`evalstudio judge --to-label-studio`,
                              # model version judge:NAME, or an ML backend's NAME) give each task's uncertainty
      budget: 40              # tasks humans label, in expectation
      criterion: overall      # the numeric criterion the estimate is of (default: the entry's first)
      mix: 0.8                # the uniform share of the probabilities (every task keeps a chance; the default,
                              # evalstudio.stats.active.DEFAULT_MIX: lower only where a pilot shows the judge's
                              # confidence tells its errors, docs/active.md)

When the gateway first serves the part it draws which tasks humans label, each with a probability from the judge's
uncertainty (1 - its confidence; a task without one counts as unsure), and keeps every task's probability and draw
in the ledger; only drawn tasks are served (each to `annotators_per_task` participants). `evalstudio active
estimate --protocol` then gives each system's mean with the judge's scores and those probabilities.

PAC labels (evalstudio/stats/pac.py): a judge labels the tasks it is sure of, humans the rest, so that at most a
share epsilon of the final labels differ from the humans' with probability 1 - alpha:

    stop_when:
      pac: {judge: gpt-judge, epsilon: 0.05, alpha: 0.1, calibration: 60}

When the gateway first serves the part it draws the calibration sample (`calibration` tasks, uniformly) and keeps
it with the judge's label and confidence of every task in the ledger; it serves the calibration tasks first, then,
from their answers, the tasks whose judge uncertainty is at or above the PAC threshold, and stops when those have
their answers (the ledger records the threshold and its bound). A categorical criterion.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Assignment(BaseModel):
    """An adaptive part's `assignment:`: the routing strategy, its criterion and the least overlap per task."""
    model_config = ConfigDict(extra="forbid")
    strategy: Literal["uniform", "uncertainty", "ability", "active"] = "uniform"
    criterion: str | None = None
    min_overlap: int = Field(default=2, ge=1)
    judge: str | None = Field(default=None, min_length=1, max_length=100)  # active: whose predictions
    budget: int | None = Field(default=None, ge=2)  # active: tasks labelled by humans, in expectation
    mix: float = Field(default=0.8, gt=0, le=1)  # active: the uniform share (stats.active.DEFAULT_MIX)

    @model_validator(mode="after")
    def _active(self):
        if self.strategy == "active" and (self.judge is None or self.budget is None):
            raise ValueError("strategy active needs judge (whose predictions give the uncertainty) and budget (the "
                             "tasks humans label)")
        if self.strategy != "active" and (self.judge is not None or self.budget is not None):
            raise ValueError("judge and budget are for strategy active")
        return self


class PACRule(BaseModel):
    """stop_when: {pac: ...}: PAC labels with a judge (Candès, Ilyas & Zrnic 2025)."""
    model_config = ConfigDict(extra="forbid")
    judge: str = Field(min_length=1, max_length=100)  # whose predictions give each task's label and confidence
    epsilon: float = Field(gt=0, lt=1)  # the largest share of final labels that may differ from the humans'
    alpha: float = Field(default=0.1, gt=0, lt=1)  # the probability that it does not hold
    calibration: int = Field(ge=10)  # tasks in the uniform calibration sample


class StopWhen(BaseModel):
    """An adaptive part's `stop_when:`: the target (PAC rule, posterior, width) that stops the collection."""
    model_config = ConfigDict(extra="forbid")
    pac: PACRule | None = None
    posterior: float | None = Field(default=None, gt=0, lt=1)
    width: float | None = Field(default=None, gt=0)
    labels: int | None = Field(default=None, ge=1)
    money: float | None = Field(default=None, gt=0)
    pay_per_label: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self):
        if self.posterior is not None and self.width is not None:
            raise ValueError("give posterior (categorical criteria) or width (numeric), not both")
        if self.money is not None and self.pay_per_label is None:
            raise ValueError("money needs pay_per_label (what one answer costs)")
        if self.pac is not None and any(v is not None for v in (self.posterior, self.width, self.labels, self.money)):
            raise ValueError("pac stops when the tasks the PAC threshold gives to humans are answered; give it alone")
        if self.pac is None and all(v is None for v in (self.posterior, self.width, self.labels, self.money)):
            raise ValueError("give a target (posterior or width), a budget (labels or money), or pac")
        return self

    @property
    def budget(self) -> int | None:
        """The answers the budget allows (labels, or money / pay_per_label, whichever is fewer)."""
        limits = [self.labels] if self.labels is not None else []
        if self.money is not None and self.pay_per_label:
            limits.append(int(self.money / self.pay_per_label + 1e-9))
        return min(limits) if limits else None


def adaptive_problems(project) -> list[str]:
    """`assignment:` and `stop_when:` against the entry: a criterion it has, of the kind the target needs."""
    assignment, stop = project.assignment, project.stop_when
    if assignment is None and stop is None:
        return []
    assignment = assignment or Assignment()
    name = assignment.criterion or next(iter(project.criteria))
    problems = []
    if name not in project.criteria:
        return [f"assignment.criterion: '{name}' is not a criterion of the entry; valid names: "
                f"{', '.join(project.criteria)}"]
    criterion = project.criteria[name]
    if assignment.strategy == "active":
        if stop is not None:
            problems.append("stop_when: an active design stops at its budget (assignment.budget); leave stop_when out")
        if criterion.labels is not None or criterion.scale != "interval":
            problems.append(f"assignment.criterion: '{name}' is not numeric; an active design estimates a numeric "
                            "criterion's mean (for labels, see `evalstudio active pac`)")
    if stop is not None and stop.pac is not None:
        if assignment.strategy != "uniform":
            problems.append("stop_when.pac: PAC labels serve the calibration sample, then the tasks the threshold "
                            "gives to humans; leave assignment out (or strategy uniform)")
        if criterion.labels is None:
            problems.append(f"stop_when.pac: '{name}' is numeric; PAC labels are for a categorical criterion")
    if len(project.controls(name)) != 1:
        problems.append(f"assignment.criterion: '{name}' has one control per agent; route by a criterion with one")
    if project.assignment is not None and assignment.strategy != "active" and \
            assignment.min_overlap > project.annotators_per_task:  # (without assignment: one answer at least)
        problems.append(f"assignment.min_overlap: {assignment.min_overlap} is more than annotators_per_task "
                        f"({project.annotators_per_task}), the most answers a task can get")
    if stop is not None and stop.posterior is not None and criterion.labels is None:
        problems.append(f"stop_when.posterior: '{name}' is numeric; a label's posterior is for categorical criteria "
                        "(use width)")
    if stop is not None and stop.width is not None and criterion.labels is not None:
        problems.append(f"stop_when.width: '{name}' is categorical; an interval width is for numeric criteria "
                        "(use posterior)")
    return problems
