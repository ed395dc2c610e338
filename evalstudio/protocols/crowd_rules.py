"""The crowd rules of a projects.yaml entry (`crowd:`): how a study runs with paid participants (platform, quota,
batches, bonus, completion code, the gateway's limits, gold rules) and its front matter (consent, practice, background,
exit survey: evalstudio/protocols/front_matter.py). Uses pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .front_matter import Consent, Practice, Question


class Bonus(BaseModel):
    """A bonus rule of a crowd study. all_batches: `amounts[0]` for a participant who completed `max_batches`
    batches; most_tasks: `amounts[i]` for the participant ranked i+1 by tasks done (ties share the better rank)."""

    model_config = ConfigDict(extra="forbid")
    rule: Literal["all_batches", "most_tasks"]
    amounts: list[float] | None = None  # None: the document promises a bonus without an amount; set it
    currency: str = "USD"

    @model_validator(mode="after")
    def _check(self):
        if self.amounts is not None and (not self.amounts or any(not (a >= 0) for a in self.amounts)):
            raise ValueError("amounts lists non-negative amounts (or is left out until you set them)")
        return self


class Crowd(BaseModel):
    """How a study runs with paid participants (`status` and `approvals` apply it)."""

    model_config = ConfigDict(extra="forbid")
    platform: Literal["prolific", "mturk"] | None = None  # None: lab annotators, no approvals file
    # tasks each participant does: a number, or "all" (every task of the project)
    per_participant: int | Literal["all"] | None = Field(default=None)
    batch_size: int | None = Field(default=None, ge=1)  # tasks per submission (an MTurk HIT)
    max_batches: int | None = Field(default=None, ge=1)  # batches a participant may do
    bonus: Bonus | None = None
    completion_code: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,40}$")  # Prolific: shown at the end
    after: str | None = None  # a project of the same study the participant completes first (Circa: Part I)
    min_gold_accuracy: float | None = Field(default=None, ge=0, le=1)  # below it: rejected (failed attention checks)
    min_median_seconds: float | None = Field(default=None, ge=0)  # a lower median time per task: flagged as speeder
    # share of each participant's tasks that are gold items: Label Studio's uniform sampling mixes the pool's gold
    # share into every stream, so `status` checks that the pool holds at least this share (and random order)
    gold_rate: float | None = Field(default=None, gt=0, lt=1)
    # participants the study takes in all (the gateway's study link refuses sign-ups beyond it, politely)
    max_participants: int | None = Field(default=None, ge=1)
    # the gateway's limits: sign-in and sign-up requests per client address and minute (a lab whose participants
    # share one address passes; wrong codes for one id are held at 10 a minute per address whatever this says), and
    # study-link sign-ups per minute in all (a launch of several hundred passes; a sign-up is a ledger row, cheap)
    sign_ins_per_minute: int = Field(default=300, ge=1, le=100_000)
    sign_ups_per_minute: int = Field(default=1000, ge=1, le=100_000)
    # the study's front matter (evalstudio/protocols/front_matter.py), served by the gateway around its parts
    consent: Consent | None = None
    practice: Practice | None = None
    background: list[Question] = Field(default=[], max_length=50)
    exit_survey: list[Question] = Field(default=[], max_length=50)

    @model_validator(mode="after")
    def _check(self):
        if isinstance(self.per_participant, int) and self.per_participant < 1:
            raise ValueError("per_participant is a positive number of tasks, or all")
        if self.bonus and self.bonus.rule == "all_batches" and not (self.batch_size and self.max_batches):
            raise ValueError("the all_batches bonus needs batch_size and max_batches")
        return self
