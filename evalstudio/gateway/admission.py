"""Who reaches the study through the gateway: sign-in by personal link or code, self sign-up through the study
link (capped, with the crowd platform's ids), sessions and attempt limits, all kept in the study's ledger, so that
any gateway process serves any participant and a restart signs no one out. None of it waits on Label Studio: a
sign-up is complete when the ledger has it, and its Label Studio account is made behind it (the sync writer)."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from evalstudio.crowd import participants
from evalstudio.crowd.ledger import StudyFull, Taken

from . import pages
from .checks import ACCESS_CODE, PARTICIPANT_ID, PLATFORM_ID, Refused

log = logging.getLogger(__name__)
COOKIE = "evalstudio_gateway"
ACCOUNT_ATTEMPTS = 10  # sign-ins per minute for one participant id from one address (wrong codes are held here)
SESSION_HOURS = 24
MAX_BODY = 1_000_000  # bytes in one request body (an annotation is a few kB)
SHEET_SECONDS = 2.0  # the participants' sheet is written again at most this often after sign-ups


def error_response(message: str, status: int = 400) -> JSONResponse:
    """A JSON error for the participant's page, with its HTTP status."""
    return JSONResponse({"error": message}, status_code=status)


@dataclass
class Session:
    """A signed-in participant, as the ledger knows them (read for every request: any process may serve it)."""
    participant: str  # the id as given
    user_id: int | None  # their Label Studio account (None while the sync writer has not made it yet)

    @property
    def key(self) -> str:
        """The participant's ledger key (the id in lower case)."""
        return self.participant.lower()


class Admission:
    """The gateway's doors (a part of Gateway, which gives it `config`, `ledger` and `sync`)."""

    @staticmethod
    async def _w(write, *args, **kwargs):
        """A ledger write, in a worker thread: its commit waits for the disk without holding up the other
        participants' requests on the event loop (reads stay on the loop: they never wait for a commit)."""
        return await run_in_threadpool(write, *args, **kwargs)

    # ---- sessions ---------------------------------------------------------------------------------------------
    async def session(self, request: Request) -> Session | None:
        """The signed-in participant of the request's cookie, or None (no session, closed or foreign account)."""
        participant = self.ledger.session(request.cookies.get(COOKIE, ""))
        account = self.ledger.account(participant) if participant else None
        if account is None or account.closed or account.password is None:
            return None
        return Session(account.participant_id, account.user_id)

    def _with_cookie(self, response: Response, key: str) -> Response:
        response.set_cookie(COOKIE, key, max_age=SESSION_HOURS * 3600, httponly=True, samesite="lax",
                            secure=self.config.public_url.startswith("https://"), path="/")
        return response

    def _account(self, participant: str, code: str) -> participants.Account | None:
        """The account `participant` when `code` is its sign-in code (compared in constant time)."""
        if not PARTICIPANT_ID.fullmatch(participant or "") or not ACCESS_CODE.fullmatch(code or ""):
            return None
        account = self.ledger.account(participant)
        if account is None or account.access is None or account.password is None:
            hmac.compare_digest(code, code)  # the same work whether or not the account exists
            return None
        return account if hmac.compare_digest(account.access, code) else None

    @staticmethod
    def _check_header(request: Request) -> None:
        """JSON routes answer only the gateway's own pages: a cross-site form cannot set this header."""
        if request.headers.get("x-evalstudio") != "1":
            raise Refused("missing the gateway's request header")

    @staticmethod
    def _client_key(request: Request) -> str:
        """The participant's address: the connection's, or what a reverse proxy named by --trusted-proxy forwarded
        (uvicorn reads X-Forwarded-For only from those; from anyone else it is ignored)."""
        return request.client.host if request.client else "unknown"

    def _html(self, render, *args, status: int = 200) -> HTMLResponse:
        nonce = secrets.token_urlsafe(16)
        response = HTMLResponse(render(nonce, *args), status_code=status)
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; media-src 'self' blob:; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
        return response

    async def _start(self, account: participants.Account) -> tuple[str | None, str, int]:
        """A session for `account`: (cookie, "", 200), or (None, what to tell the participant, HTTP status)."""
        if account.closed:
            return None, "Your part of this study is complete. Thank you!", 403
        return await self._w(self.ledger.open_session, account.participant_id, SESSION_HOURS), "", 200

    async def _allowed(self, *keys: str, limit: int) -> bool:
        for key in keys:
            if not await self._w(self.ledger.allow, key, limit):
                return False
        return True

    async def _admit(self, request: Request, participant: str, code: str,
                     invalid: tuple[str, int]) -> tuple[str | None, str, int]:
        """Sign in with a participant id and sign-in code, rate-limited per address and per address and account:
        someone who knows a participant's id and not their code uses up only their own address's attempts."""
        address = self._client_key(request)
        if not await self._allowed(f"address:{address}", limit=self.config.rate_per_minute) or \
                not await self._allowed(f"account:{participant.lower()}:{address}", limit=ACCOUNT_ATTEMPTS):
            return None, "Too many attempts; please wait a minute.", 429
        account = self._account(participant, code)
        if account is None:
            return None, *invalid
        return await self._start(account)

    async def personal_link(self, request: Request) -> Response:
        """GET /s/PARTICIPANT/CODE: sign in with a personal link and go to the start page."""
        key, message, status = await self._admit(request, request.path_params["participant"][:100],
                                                 request.path_params["code"][:100], ("This link is not valid.", 404))
        if key is None:
            return self._html(pages.sign_in, self.config.study, "", message, status=status)
        return self._with_cookie(RedirectResponse("/", status_code=303), key)

    async def join_page(self, request: Request) -> Response:
        """GET /join/KEY: the sign-up page of the study link, with the platform's ids it passes."""
        key = request.path_params["key"]
        if not self.config.join_key or not hmac.compare_digest(key, self.config.join_key):
            return error_response("not found", 404)
        given = next((request.query_params.get(k) for k in ("PROLIFIC_PID", "workerId", "participant")
                      if request.query_params.get(k)), "")
        # what the platform passes about the study and this sitting (Prolific's STUDY_ID and SESSION_ID, MTurk's
        # assignmentId), kept with the sign-up
        platform = {name: request.query_params.get(k, "") for name, k in (
            ("study", "STUDY_ID"), ("session", "SESSION_ID"), ("session", "assignmentId")) if request.query_params.get(k)}
        platform = {k: v for k, v in platform.items() if PLATFORM_ID.fullmatch(v)}
        return self._html(pages.join, self.config.study, key, given if PARTICIPANT_ID.fullmatch(given) else "",
                          platform)

    async def _body(self, request: Request) -> dict:
        self._check_header(request)
        if int(request.headers.get("content-length") or 0) > MAX_BODY:
            raise Refused("the request is too large")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise Refused("the request is too large")
            chunks.append(chunk)
        try:
            body = json.loads(b"".join(chunks) or b"{}")
        except ValueError:
            raise Refused("the request is not JSON") from None
        if not isinstance(body, dict):
            raise Refused("the request is not a JSON object")
        return body

    async def sign_in(self, request: Request) -> Response:
        """POST /api/sign-in: sign in with participant id and code; a session cookie when they match."""
        try:
            body = await self._body(request)
        except Refused as e:
            return error_response(str(e))
        participant, code = str(body.get("participant", ""))[:100], str(body.get("code", ""))[:100]
        key, message, status = await self._admit(request, participant, code,
                                                 ("Unknown participant id or wrong sign-in code.", 403))
        if key is None:
            return error_response(message, status)
        return self._with_cookie(JSONResponse({"ok": True}), key)

    async def sign_out(self, request: Request) -> Response:
        """POST /api/sign-out: end the session and clear its cookie."""
        try:
            self._check_header(request)
        except Refused as e:
            return error_response(str(e))
        await self._w(self.ledger.end_session, request.cookies.get(COOKIE, ""))
        response = JSONResponse({"ok": True})
        response.delete_cookie(COOKIE, path="/")
        return response

    async def join(self, request: Request) -> Response:
        """POST /api/join: sign up through the study link (rate-limited): account and session in one transaction."""
        try:
            body = await self._body(request)
        except Refused as e:
            return error_response(str(e))
        key, participant = str(body.get("key", ""))[:100], str(body.get("participant", ""))[:100]
        if not self.config.join_key or not hmac.compare_digest(key, self.config.join_key):
            return error_response("not found", 404)
        # one ledger transaction: the rate limits (per address, then all sign-ups), the account and its session
        limits = [(f"address:{self._client_key(request)}", self.config.rate_per_minute),
                  ("joins", self.config.joins_per_minute)]
        platform = tuple(str(body.get(k) or "")[:100] or None for k in ("study", "session"))
        rule = participants.PARTICIPANT_ID_RULE
        problem = f"That is not a participant id ({rule} characters)." if not PARTICIPANT_ID.fullmatch(
            participant) else "The study link carries an id that is not one." if any(
            v is not None and not PLATFORM_ID.fullmatch(v) for v in platform) else None
        account = participants.joining(participant, platform) if problem is None else None
        try:
            key = await self._w(self.ledger.sign_up, limits, account, self.config.max_participants, SESSION_HOURS)
        except Taken:
            return error_response("This participant id has signed up already: please use your personal link.", 409)
        except StudyFull:
            return error_response("Thank you for your interest: this study has all the participants it needs.", 409)
        if key is None:
            return error_response("Too many sign-ups right now; please wait a minute.", 429)
        if problem is not None:  # (counted against the limits all the same)
            return error_response(problem)
        self.sync.wake.set()  # its Label Studio account is made behind the sign-up
        self._sheet_later()
        link = participants.gateway_link(self.config.public_url, account)
        return self._with_cookie(JSONResponse({"ok": True, "link": link}), key)

    def _sheet_later(self) -> None:
        """The participants' sheet (sign_in.csv, written from the ledger) written again off the sign-up's path, once
        for the sign-ups of the last SHEET_SECONDS: a write reads every account, so one per sign-up grew with the
        study (and waited on the sheet's lock of every gateway process)."""
        self._sheet_due = True
        if self._sheet_task is None or self._sheet_task.done():
            self._sheet_task = asyncio.create_task(self.write_sheet())

    async def write_sheet(self) -> None:
        """Write the participants' sheet now if a sign-up is not in it yet (also when the gateway stops)."""
        while self._sheet_due:
            self._sheet_due = False
            try:
                await run_in_threadpool(participants.write_sheet, self.config.participants_folder, None,
                                        self.config.label_studio_url, self.config.public_url)
            except OSError as e:  # the ledger has every sign-up; the sheet is written again at the next
                log.warning("the participants' sheet was not written (%s)", e)
            await asyncio.sleep(SHEET_SECONDS)

    async def _api_session(self, request: Request) -> Session:
        self._check_header(request)
        session = await self.session(request)
        if session is None:
            raise PermissionError("Please sign in again (open your personal link).")
        return session

