"""A study's front matter in the gateway (projects.yaml crowd: consent, practice, background, exit_survey;
evalstudio/protocols/front_matter.py): served in that order around the study's parts, each step recorded in the
ledger with the server's time, and no task route answering a participant before their consent, practice and
background are recorded.

A participant who declines consent sees no task and gets the platform's return route (Prolific's no-consent code where
the study sets one; MTurk: return the HIT, no submission), never a completion code; one below practice.min_correct
gets the screened-out route. Practice answers are checked against the part's controls, answered with the item's
explanation, kept in the ledger's front-matter table only (never an annotation: they count in no analysis)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from evalstudio.crowd import front_record
from evalstudio.protocols.front_matter import Question, check_answers, consent_text, practice_items

from . import front_pages
from .admission import Session, error_response
from .checks import Refused, check_result, shown_data

# what a participant is told where a step is not theirs to take now (a task route before the front matter)
ENDED = "You did not give your consent, so this study has no steps for you."
NOT_YET = "Please complete the study's first steps (consent, practice, questions) on the study's start page first."


@dataclass(frozen=True)
class Front:
    """The study's front matter as the gateway serves it (read from projects.yaml when it starts)."""
    consent: str  # the wording (HTML), verbatim
    statements: tuple[str, ...]
    platform: str | None  # prolific, mturk or None (a lab)
    declined_code: str | None = None
    practice_part: str | None = None  # the part whose labeling view shows the practice items
    practice: tuple[dict, ...] = ()  # {"data", "expected", "explanation"} each
    min_correct: int | None = None
    screened_out_code: str | None = None
    background: tuple[Question, ...] = ()
    exit_survey: tuple[Question, ...] = field(default=())


def front_of(projects) -> Front | None:
    """The front matter of a study's projects (declared once, on one of them), or None."""
    declaring = front_record.declaring(projects)
    if declaring is None:
        return None
    crowd = declaring.crowd
    practice = crowd.practice
    return Front(consent_text(crowd.consent, declaring.base_dir), tuple(crowd.consent.statements), crowd.platform,
                 crowd.consent.declined_code, declaring.name if practice else None,
                 tuple(practice_items(declaring)), practice.min_correct if practice else None,
                 practice.screened_out_code if practice else None, tuple(crowd.background), tuple(crowd.exit_survey))


def stage(front: Front, steps: dict) -> str:
    """Where a participant is in the front matter (evalstudio/crowd/front_record.py's stage)."""
    return front_record.stage(steps, len(front.practice), front.min_correct, bool(front.background))


def matches(result: list[dict], expected: dict) -> bool:
    """Whether a checked practice answer gives every expected control's answer (choices as a set, numbers equal)."""
    given = {r["from_name"]: r["value"] for r in result if "from_name" in r}
    for name, want in expected.items():
        value = given.get(name)
        if value is None:
            return False
        if "choices" in value:
            if set(value["choices"]) != set([want] if isinstance(want, str) else want):
                return False
        elif "number" in value or "rating" in value:
            if float(value.get("number", value.get("rating"))) != float(want):
                return False
        elif value.get("text") != ([want] if isinstance(want, str) else want):
            return False
    return True


class FrontMatter:
    """The gateway's front-matter steps (a part of Gateway, which gives it config, ledger, parts and pages)."""

    def front_block(self, session: Session) -> str | None:
        """Why a task route does not answer this participant now (None: it does)."""
        front = self.config.front
        if front is None:
            return None
        return None if stage(front, self.ledger.steps_of(session.participant)) == "working" else NOT_YET

    def front_page(self, session: Session, states: list[dict]) -> Response | None:
        """The page of the participant's front-matter step (None: the study's start page)."""
        front = self.config.front
        if front is None:
            return None
        steps = self.ledger.steps_of(session.participant)
        now = stage(front, steps)
        study = self.config.study
        if now == "consent":
            return self._html(front_pages.consent, study, front.consent, list(front.statements))
        if now in ("declined", "screened_out"):
            code = front.declined_code if now == "declined" else front.screened_out_code
            return self._html(front_pages.ended, study, now, front.platform, code)
        if now == "practice":
            return RedirectResponse("/practice", status_code=303)
        if now == "background":
            return self._html(front_pages.questions, study, "background", front.background)
        done = all(s["state"] == "finished" for s in states)
        if done and front.exit_survey and "exit" not in steps:
            return self._html(front_pages.questions, study, "exit", front.exit_survey)
        return None

    async def practice_page(self, request: Request) -> Response:
        """GET /practice: the practice items in the practice part's labeling view, for a participant at that step."""
        session = await self.session(request)
        front = self.config.front
        if session is None or front is None or not front.practice or \
                stage(front, self.ledger.steps_of(session.participant)) != "practice":
            return RedirectResponse("/", status_code=303)
        part = self.parts[front.practice_part]
        return self._html(front_pages.practice_labeling, self.config.study, part, self.config.chunks,
                          self.config.module, self.config.front_end)

    async def front_route(self, request: Request, session: Session, action: str, arg: str) -> Response:
        """/api/front/{consent,background,exit} and /api/practice/{next,N}: each only at its own step."""
        front = self.config.front
        if front is None:
            return error_response("not found", 404)
        steps = self.ledger.steps_of(session.participant)
        now = stage(front, steps)
        if action == "practice":
            if now != "practice":
                return error_response(NOT_YET if now == "consent" else ENDED if now == "declined" else
                                      "The practice round is over.", 403)
            if request.method == "GET" and arg == "next":
                return self._practice_item(front, steps)
            # an item's reference is the number the gateway gave ("1", "2", ...): str.isdigit() also takes "²" and
            # "١", on which int() fails or which name an item by another spelling
            if request.method == "POST" and re.fullmatch(r"[1-9][0-9]{0,5}", arg):
                return await self._practice_answer(request, session, front, steps, int(arg))
            return error_response("not found", 404)
        if request.method != "POST" or arg not in ("consent", "background", "exit"):
            return error_response("not found", 404)
        body = await self._body(request)
        if arg == "consent":
            if now != "consent":
                return error_response("Your answer to the consent form is recorded already.", 409)
            accept = body.get("accept")
            ticked = body.get("statements")
            if accept is not True and accept is not False:
                raise Refused("accept is true or false")
            if accept and (not isinstance(ticked, list) or len(ticked) != len(front.statements)
                           or not all(t is True for t in ticked)):
                raise Refused("To take part, please tick every statement; or choose “I do not consent”.")
            answer = {"accepted": accept, "statements": list(front.statements) if accept else []}
            step = await self._w(self.ledger.take_step, session.participant, "consent",
                                 json.dumps(answer, ensure_ascii=False), "given" if accept else "declined")
            return JSONResponse({"ok": True, "outcome": step.outcome})
        if (arg == "background" and now != "background") or (arg == "exit" and (
                now != "working" or "exit" in steps or not self._all_finished(session))):
            return error_response("This step is not open now.", 409)
        questions = front.background if arg == "background" else front.exit_survey
        try:
            answers = check_answers(list(questions), body.get("answers"))
        except ValueError as e:
            raise Refused(str(e)) from None
        await self._w(self.ledger.take_step, session.participant, arg, json.dumps(answers, ensure_ascii=False))
        return JSONResponse({"ok": True})

    def _practice_item(self, front: Front, steps: dict) -> Response:
        number = next(n for n in range(1, len(front.practice) + 1) if f"practice:{n}" not in steps)
        part = self.parts[front.practice_part]
        item = front.practice[number - 1]
        return JSONResponse({"ref": str(number), "number": number, "data": shown_data(item["data"], part.fields),
                             "previous": None, "update": False, "guide": "open" if number == 1 else "folded",
                             "progress": f"Practice item {number} of {len(front.practice)}"})

    async def _practice_answer(self, request: Request, session: Session, front: Front, steps: dict,
                               number: int) -> Response:
        if not 1 <= number <= len(front.practice) or f"practice:{number}" in steps:
            return error_response("not found", 404)
        # the items come in the gateway's order: only the one it serves next is answered (a script could otherwise
        # answer item 3 from the practice file before seeing item 2's explanation)
        serving = next(n for n in range(1, len(front.practice) + 1) if f"practice:{n}" not in steps)
        if number != serving:
            return error_response(f"Please answer practice item {serving} first.", 409)
        part = self.parts[front.practice_part]
        item = front.practice[number - 1]
        body = await self._body(request)
        result = check_result(body.get("result"), part.controls, complete=True,
                              data=shown_data(item["data"], part.fields))
        correct = matches(result, item["expected"])
        step = await self._w(self.ledger.take_step, session.participant, f"practice:{number}",
                             json.dumps(result, ensure_ascii=False), "correct" if correct else "wrong")
        return JSONResponse({"practice": True, "correct": step.outcome == "correct", "expected": item["expected"],
                             "explanation": item["explanation"], "last": number == len(front.practice)})

    def _all_finished(self, session: Session) -> bool:
        return all(s["state"] == "finished" for s in self._part_states(session))
