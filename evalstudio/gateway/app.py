"""The gateway's ASGI app (Starlette, served by uvicorn): sign-in, the labeling stream of the study's projects and
Label Studio's front-end files; nothing else of Label Studio is reachable through it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import json
import secrets
import threading
import time

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import participants
from ..errors import EvalstudioError, ServerError
from . import pages
from .checks import ACCESS_CODE, ASSET_PATH, PARTICIPANT_ID, REF, Refused, check_result, lead_time, shown_data
from .sessions import SESSION_HOURS, Limiter, ListAssignments, Ref, Session
from .setup import GatewayConfig, Part

COOKIE = "evalstudio_gateway"
_UPSTREAM: contextvars.ContextVar[float] = contextvars.ContextVar("upstream_seconds", default=0.0)
HELD_WAITS = (0.5, 1.0, 2.0)  # seconds between asking Label Studio again for a task it holds for others just now
UPSTREAM_RETRIES = 3  # a request that failed inside Label Studio (5xx) is tried this many times more
MAX_BODY = 1_000_000  # bytes in one request body (an annotation is a few kB)
ASSET_HEADERS = ("content-type", "content-length", "content-encoding", "etag", "last-modified", "cache-control")


def _user_id(value) -> int | None:
    """A user id as Label Studio gives it (an id, or an object with one)."""
    value = value.get("id") if isinstance(value, dict) else value
    return value if isinstance(value, int) else None


def _error(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class Gateway:
    def __init__(self, config: GatewayConfig):
        self.config = config
        self.parts = {p.name: p for p in config.parts}
        # what participants name: each entry, with its lists' projects where it has counterbalanced lists
        self.entries: dict[str, list[Part]] = {}
        for part in config.parts:
            self.entries.setdefault(part.entry or part.name, []).append(part)
        self.lists = ListAssignments(config.participants_folder)
        self.sessions: dict[str, Session] = {}
        self.tokens: dict[str, str] = {}  # participant -> Label Studio token (fetched once, kept in memory)
        self._overlap: dict[str, int] = {}  # part -> annotations per task (Label Studio's maximum_annotations)
        self.sign_ins = Limiter(config.rate_per_minute)
        self.joins = Limiter(config.joins_per_minute)
        self.accounts_lock = threading.Lock()
        self._admin: object | None = None
        # Label Studio's front-end settings (feature flags and edition), read once as the first participant to open
        # a labeling page: the editor renders and behaves as in Label Studio's own app only with the same flags
        self.front_end: dict | None = None
        self.front_end_lock = asyncio.Lock()
        self.upstream = httpx.AsyncClient(base_url=config.label_studio_url, timeout=60,
                                          limits=httpx.Limits(max_connections=200, max_keepalive_connections=100))

    # ---- sessions ---------------------------------------------------------------------------------------------
    def session(self, request: Request) -> Session | None:
        key = request.cookies.get(COOKIE, "")
        found = self.sessions.get(key) if key else None
        if found is None or found.expires < time.time():
            return None
        return found

    def _admin_client(self):
        """The researcher's client (sign-ups, reading a participant's token), made once."""
        if self._admin is None:
            from ..client import Client
            from ..connection import Settings

            self._admin = Client(Settings(self.config.label_studio_url, self.config.api_key), timeout=60)
        return self._admin

    async def _open_session(self, account: participants.Account) -> tuple[str, Session]:
        token = self.tokens.get(account.participant_id)
        if token is None:
            token = await run_in_threadpool(self._admin_client().log_in, account.email, account.password)
            self.tokens[account.participant_id] = token
        key = secrets.token_urlsafe(32)
        session = Session(account.participant_id, account.user_id, token,
                          time.time() + SESSION_HOURS * 3600)
        if len(self.sessions) > 50_000:
            now = time.time()
            self.sessions = {k: s for k, s in self.sessions.items() if s.expires >= now}
        self.sessions[key] = session
        return key, session

    def _with_cookie(self, response: Response, key: str) -> Response:
        response.set_cookie(COOKIE, key, max_age=SESSION_HOURS * 3600, httponly=True, samesite="lax",
                            secure=self.config.public_url.startswith("https://"), path="/")
        return response

    def _account(self, participant: str, code: str) -> participants.Account | None:
        """The account `participant` when `code` is its sign-in code (compared in constant time)."""
        if not PARTICIPANT_ID.fullmatch(participant or "") or not ACCESS_CODE.fullmatch(code or ""):
            return None
        accounts = participants.load_accounts(self.config.participants_folder)
        account = next((a for pid, a in accounts.items() if pid.lower() == participant.lower()), None)
        if account is None or account.access is None or account.password is None:
            hmac.compare_digest(code, code)  # the same work whether or not the account exists
            return None
        return account if hmac.compare_digest(account.access, code) else None

    @staticmethod
    def _check_header(request: Request) -> None:
        """JSON routes answer only the gateway's own pages: a cross-site form cannot set this header."""
        if request.headers.get("x-evalstudio") != "1":
            raise Refused("missing the gateway's request header")

    def _client_key(self, request: Request) -> str:
        return request.client.host if request.client else "unknown"

    # ---- pages ------------------------------------------------------------------------------------------------
    def _html(self, render, *args, status: int = 200) -> HTMLResponse:
        nonce = secrets.token_urlsafe(16)
        response = HTMLResponse(render(nonce, *args), status_code=status)
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; media-src 'self' blob:; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
        return response

    async def home(self, request: Request) -> Response:
        session = self.session(request)
        if session is None:
            return self._html(pages.sign_in, self.config.study)
        states = []
        for entry, choices in self.entries.items():
            part = choices[0] if len(choices) == 1 else self._assigned(session, entry)
            if part is None:  # a list not chosen yet: open to the participant
                states.append({"name": entry, "title": choices[0].title, "state": "open"})
                continue
            if self._known_finished(session, part):
                state = "finished"
            elif part.after and part.after not in session.finished:
                state = f"after {self.parts[part.after].title}" if part.after in self.parts else "open"
            else:
                state = "open"
            states.append({"name": entry, "title": part.title, "state": state})
        return self._html(pages.start, self.config.study, session.participant, states, self.config.completion_code)

    async def _start(self, account: participants.Account) -> tuple[str | None, str, int]:
        """A session for `account`: (key, "", 200), or (None, what to tell the participant, HTTP status)."""
        if account.closed:
            return None, "Your part of this study is complete. Thank you!", 403
        try:
            key, _ = await self._open_session(account)
        except EvalstudioError:
            return None, "The study server is not reachable; please try again in a minute.", 502
        return key, "", 200

    async def _admit(self, request: Request, participant: str, code: str,
                     invalid: tuple[str, int]) -> tuple[str | None, str, int]:
        """Sign in with a participant id and sign-in code (rate-limited per address and per account); `invalid` is
        the message and status for a wrong pair."""
        if not self.sign_ins.allow(self._client_key(request)) or not self.sign_ins.allow("account:" + participant.lower()):
            return None, "Too many attempts; please wait a minute.", 429
        account = await run_in_threadpool(self._account, participant, code)
        if account is None:
            return None, *invalid
        return await self._start(account)

    async def personal_link(self, request: Request) -> Response:
        key, message, status = await self._admit(request, request.path_params["participant"][:100],
                                                 request.path_params["code"][:100], ("This link is not valid.", 404))
        if key is None:
            return self._html(pages.sign_in, self.config.study, "", message, status=status)
        return self._with_cookie(RedirectResponse("/", status_code=303), key)

    async def label(self, request: Request) -> Response:
        entry = request.path_params["part"]
        if entry not in self.entries:
            return _error("not found", 404)
        part = self.entries[entry][0]  # the lists of an entry share config, instructions and title
        session = self.session(request)
        if session is None:
            return RedirectResponse("/", status_code=303)
        try:
            front_end = await self._front_end(session)
        except (ServerError, httpx.HTTPError):
            return self._html(pages.sign_in, self.config.study, "",
                              "The study server is not reachable; please try again in a minute.", status=502)
        return self._html(pages.labeling, self.config.study, part.title, entry, part.config, part.instructions,
                          self.config.chunks, self.config.module, front_end)

    # ---- counterbalanced lists --------------------------------------------------------------------------------
    def _assigned(self, session: Session, entry: str) -> Part | None:
        number = self.lists.get(entry, session.participant)
        return next((p for p in self.entries[entry] if p.list_number == number), None)

    async def _part_for(self, session: Session, entry: str) -> Part | None:
        """The project of `entry` the participant works in: the entry's own, or the list they are in. A participant
        is put into a list the first time they ask for a task of the entry: the list they already annotated in (if
        Label Studio has annotations of theirs in one), else the list with the fewest participants so far."""
        choices = self.entries.get(entry)
        if not choices:
            return None
        if len(choices) == 1 and choices[0].list_number is None:
            return choices[0]
        part = self._assigned(session, entry)
        if part is not None:
            return part
        counts = {p.list_number: await self._count(session, p) for p in choices}
        worked = [number for number, n in counts.items() if n]
        self.lists.assign(entry, session.participant, [p.list_number for p in choices],
                          max(worked, key=counts.get) if worked else None)
        return self._assigned(session, entry)

    async def _front_end(self, session: Session) -> dict:
        async with self.front_end_lock:
            if self.front_end is None:
                account = participants.load_accounts(self.config.participants_folder).get(session.participant)
                if account is None or account.password is None:
                    raise ServerError("the participant's account is gone")
                self.front_end = await run_in_threadpool(self._admin_client().front_end_settings, account.email,
                                                         account.password)
            return self.front_end

    async def join_page(self, request: Request) -> Response:
        key = request.path_params["key"]
        if not self.config.join_key or not hmac.compare_digest(key, self.config.join_key):
            return _error("not found", 404)
        given = next((request.query_params.get(k) for k in ("PROLIFIC_PID", "workerId", "participant")
                      if request.query_params.get(k)), "")
        return self._html(pages.join, self.config.study, key, given if PARTICIPANT_ID.fullmatch(given) else "")

    # ---- JSON API ---------------------------------------------------------------------------------------------
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
        try:
            body = await self._body(request)
        except Refused as e:
            return _error(str(e))
        participant, code = str(body.get("participant", ""))[:100], str(body.get("code", ""))[:100]
        key, message, status = await self._admit(request, participant, code,
                                                 ("Unknown participant id or wrong sign-in code.", 403))
        if key is None:
            return _error(message, status)
        return self._with_cookie(JSONResponse({"ok": True}), key)

    async def sign_out(self, request: Request) -> Response:
        try:
            self._check_header(request)
        except Refused as e:
            return _error(str(e))
        self.sessions.pop(request.cookies.get(COOKIE, ""), None)
        response = JSONResponse({"ok": True})
        response.delete_cookie(COOKIE, path="/")
        return response

    async def join(self, request: Request) -> Response:
        try:
            body = await self._body(request)
        except Refused as e:
            return _error(str(e))
        key, participant = str(body.get("key", ""))[:100], str(body.get("participant", ""))[:100]
        if not self.config.join_key or not hmac.compare_digest(key, self.config.join_key):
            return _error("not found", 404)
        if not self.sign_ins.allow(self._client_key(request)) or not self.joins.allow("all"):
            return _error("Too many sign-ups right now; please wait a minute.", 429)
        if not PARTICIPANT_ID.fullmatch(participant):
            return _error("That is not a participant id (letters, digits, _ and -).")
        try:
            account = await run_in_threadpool(self._create, participant)
        except Refused as e:
            return _error(str(e), 409)
        except EvalstudioError:
            return _error("The study server is not reachable; please try again in a minute.", 502)
        key, message, status = await self._start(account)
        if key is None:
            return _error(message, status)
        link = participants.gateway_link(self.config.public_url, account)
        return self._with_cookie(JSONResponse({"ok": True, "link": link}), key)

    def _create(self, participant: str) -> participants.Account:
        with self.accounts_lock:
            folder = self.config.participants_folder
            if any(pid.lower() == participant.lower() for pid in participants.load_accounts(folder)):
                raise Refused("This participant id has signed up already: please use your personal link.")
            added = participants.add(self._admin_client(), [participant], folder, gateway_url=self.config.public_url)
            if not added.created:
                raise Refused("This participant id has signed up already: please use your personal link.")
            return participants.load_accounts(folder)[participant]

    def _api_session(self, request: Request) -> Session:
        self._check_header(request)
        session = self.session(request)
        if session is None:
            raise PermissionError("Please sign in again (open your personal link).")
        return session

    async def _call(self, token: str, method: str, path: str, **kwargs) -> httpx.Response:
        """One request to Label Studio with `token`, its time added to the request's upstream time. A GET that
        fails inside Label Studio (a 5xx: a busy database under many participants) is asked again, up to
        UPSTREAM_RETRIES times: the reads are safe to repeat, and so is `/next` (Label Studio gives a participant
        the task it has locked for them again)."""
        started = time.perf_counter()
        try:
            headers = {"Authorization": f"Token {token}"}
            answer = await self.upstream.request(method, path, headers=headers, **kwargs)
            for attempt in range(UPSTREAM_RETRIES if method == "GET" else 0):
                if answer.status_code < 500:
                    break
                await asyncio.sleep(0.25 * 2 ** attempt)
                answer = await self.upstream.request(method, path, headers=headers, **kwargs)
            return answer
        finally:
            _UPSTREAM.set(_UPSTREAM.get() + time.perf_counter() - started)

    async def _as(self, session: Session, method: str, path: str, **kwargs) -> httpx.Response:
        """A request as the participant (their own token: Label Studio's checks and sampling apply to them)."""
        return await self._call(session.token, method, path, **kwargs)

    async def _count(self, session: Session, part: Part) -> int:
        """The participant's annotations in the part's project, asked of Label Studio once per session."""
        if part.name not in session.counts:
            session.counts[part.name] = await self._tasks_where(part, {
                "filter": "filter:tasks:annotators", "operator": "contains", "type": "List", "value": session.user_id})
        return session.counts[part.name]

    async def _tasks_where(self, part: Part, *conditions: dict) -> int:
        """How many of the part's tasks meet all `conditions` (Data Manager filters), asked as the admin."""
        query = {"filters": {"conjunction": "and", "items": list(conditions)}}
        answer = await self._call(self.config.api_key, "GET", "/api/tasks", params={
            "project": part.project_id, "page_size": 1, "fields": "task_only", "query": json.dumps(query)})
        answer.raise_for_status()
        return int(answer.json().get("total") or 0)

    async def _held(self, session: Session, part: Part) -> bool:
        """Whether the part still has a task that this participant has not annotated and that has fewer annotations
        than the project asks for, although Label Studio just said it has no task for them: Label Studio holds
        those tasks for other participants (a lock while someone works on a task, and for a moment after each
        submission: it stores the annotation before it releases the lock, so the task briefly counts that person
        twice). Such a "no task" is not the end of the participant's work."""
        if part.name not in self._overlap:
            answer = await self._call(self.config.api_key, "GET", f"/api/projects/{part.project_id}")
            answer.raise_for_status()
            self._overlap[part.name] = int(answer.json().get("maximum_annotations") or 1)
        return await self._tasks_where(
            part, {"filter": "filter:tasks:annotators", "operator": "not_contains", "type": "List",
                   "value": session.user_id},
            {"filter": "filter:tasks:total_annotations", "operator": "less", "type": "Number",
             "value": self._overlap[part.name]}) > 0

    @staticmethod
    def _known_finished(session: Session, part: Part) -> bool:
        """Finished as far as this session knows (no question to Label Studio)."""
        return part.name in session.finished or (
            part.quota is not None and session.counts.get(part.name, 0) >= part.quota)

    async def _finished(self, session: Session, part: Part) -> bool:
        if self._known_finished(session, part):
            return True
        if part.quota is not None and await self._count(session, part) >= part.quota:
            session.finished.add(part.name)
            return True
        return False

    def _previous(self, session: Session, part: Part, before: str | None = None) -> str | None:
        done = session.history.get(part.name, [])
        if before in done:
            done = done[:done.index(before)]
        return done[-1] if done else None

    def _progress(self, session: Session, part: Part) -> str:
        count = session.counts.get(part.name)
        if count is None:
            return ""
        return f"{count} of {part.quota} done" if part.quota else f"{count} done"

    async def api(self, request: Request) -> Response:
        """Every JSON route of a signed-in participant, with one error handling."""
        started = time.perf_counter()
        _UPSTREAM.set(0.0)
        try:
            session = self._api_session(request)
            async with session.lock:  # one request of a participant at a time: no double submission
                response = await self._route(request, session)
            # what the gateway added, for the benchmark and for anyone watching: its own time vs Label Studio's
            response.headers["Server-Timing"] = (f"upstream;dur={1000 * _UPSTREAM.get():.2f}, "
                                                 f"total;dur={1000 * (time.perf_counter() - started):.2f}")
            return response
        except PermissionError as e:
            return _error(str(e), 401)
        except Refused as e:
            return _error(str(e), 400)
        except httpx.HTTPError:
            return _error("The study server is not reachable; please try again in a minute.", 502)

    async def _route(self, request: Request, session: Session) -> Response:
        action, arg = request.path_params["action"], request.path_params["arg"]
        if request.method == "GET" and action == "next":
            part = await self._part_for(session, arg)
            if part is None:
                return _error("not found", 404)
            return await self._next(session, part)
        if not REF.fullmatch(arg) or arg not in session.refs:
            return _error("not found", 404)
        ref = session.refs[arg]
        part = self.parts[ref.part]
        if request.method == "GET" and action == "task":
            return await self._task(session, part, arg, ref)
        if request.method == "POST" and action in ("submit", "update"):
            body = await self._body(request)
            return await self._save(session, part, arg, ref, body, update=action == "update")
        return _error("not found", 404)

    async def _next(self, session: Session, part: Part) -> Response:
        previous = self._previous(session, part)
        if part.after and part.after in self.parts:
            first = self.parts[part.after]
            if not await self._finished(session, first):
                return JSONResponse({"finished": f"Please finish “{first.title}” first.", "previous": previous})
        if await self._finished(session, part):
            return JSONResponse({"finished": "You have done every task of this part. Thank you!", "previous": previous})
        await self._count(session, part)
        answer = await self._as(session, "GET", f"/api/projects/{part.project_id}/next")
        waits = iter(HELD_WAITS)  # Label Studio's "no task" may be a moment's (see _held): asked again after these
        while answer.status_code == 404:
            held = await self._held(session, part)
            wait = next(waits, None)
            if not held or wait is None:
                break
            await asyncio.sleep(wait)
            answer = await self._as(session, "GET", f"/api/projects/{part.project_id}/next")
        if answer.status_code == 404:
            if held:  # the page keeps asking; the participant is not sent away
                return JSONResponse({"error": "Every task left in this part is being worked on by other participants "
                                              "just now.", "wait": True}, status_code=503)
            session.finished.add(part.name)
            return JSONResponse({"finished": "There are no more tasks for you in this part. Thank you!",
                                 "previous": previous})
        if answer.status_code in (401, 403):
            return JSONResponse({"finished": "Your part of this study is complete. Thank you!", "previous": previous})
        answer.raise_for_status()
        task = answer.json()
        ref = secrets.token_urlsafe(18)
        session.refs[ref] = Ref(int(task["id"]), part.name, len(session.refs) + 1)
        shown = {"ref": ref, "number": session.refs[ref].number, "data": shown_data(task.get("data") or {}, part.fields),
                 "previous": previous, "progress": self._progress(session, part), "update": False}
        if part.prefill:
            shown["predictions"] = [{"id": i + 1, "result": p.get("result") or []}
                                    for i, p in enumerate(task.get("predictions") or [])][:1]
        return JSONResponse(shown)

    async def _task(self, session: Session, part: Part, key: str, ref: Ref) -> Response:
        if ref.annotation_id is None:
            return _error("This task has no saved answer yet.", 404)
        task = await self._as(session, "GET", f"/api/tasks/{ref.task_id}")
        annotation = await self._as(session, "GET", f"/api/annotations/{ref.annotation_id}")
        task.raise_for_status()
        annotation.raise_for_status()
        return JSONResponse({"ref": key, "number": ref.number, "update": True,
                             "data": shown_data(task.json().get("data") or {}, part.fields),
                             "result": check_result(annotation.json().get("result") or [], part.controls),
                             "previous": self._previous(session, part, key),
                             "progress": self._progress(session, part)})

    async def _save(self, session: Session, part: Part, key: str, ref: Ref, body: dict, update: bool) -> Response:
        result = check_result(body.get("result"), part.controls)
        payload = {"result": result}
        seconds = lead_time(body.get("lead_time"))
        if seconds is not None:
            payload["lead_time"] = seconds
        if update:
            if ref.annotation_id is None:
                return _error("This task has no saved answer to update.", 409)
            answer = await self._as(session, "PATCH", f"/api/annotations/{ref.annotation_id}", json=payload)
            answer.raise_for_status()
            return JSONResponse({"ok": True})
        if ref.annotation_id is None and ref.sent:  # the page asks again after an answer that never came back
            landed = await self._landed(session, ref)
            if landed is not None:
                self._saved(session, part, key, ref, landed)
        if ref.annotation_id is not None:  # "saved": the page treats a repeated submission as done
            return JSONResponse({"error": "This task is answered already.", "saved": True}, status_code=409)
        if part.quota is not None and await self._count(session, part) >= part.quota:
            return _error("You have done every task of this part.", 409)
        ref.sent = True
        for attempt in range(UPSTREAM_RETRIES + 1):
            answer = await self._as(session, "POST", f"/api/tasks/{ref.task_id}/annotations",
                                    params={"project": part.project_id}, json=payload)
            if answer.status_code < 500 or attempt == UPSTREAM_RETRIES:
                break
            # failed inside Label Studio: it may have stored the annotation before failing; send it again only if not
            landed = await self._landed(session, ref)
            if landed is not None:
                self._saved(session, part, key, ref, landed)
                return JSONResponse({"ok": True})
            await asyncio.sleep(0.25 * 2 ** attempt)
        if answer.status_code >= 400 and answer.status_code < 500:
            return _error("The study server did not accept this answer.", 409)
        answer.raise_for_status()
        self._saved(session, part, key, ref, int(answer.json()["id"]))
        return JSONResponse({"ok": True})

    @staticmethod
    def _saved(session: Session, part: Part, key: str, ref: Ref, annotation_id: int) -> None:
        ref.annotation_id = annotation_id
        session.counts[part.name] = session.counts.get(part.name, 0) + 1
        session.history.setdefault(part.name, []).append(key)

    async def _landed(self, session: Session, ref: Ref) -> int | None:
        """The participant's annotation of the task, if Label Studio has one (a submission whose answer was lost)."""
        answer = await self._as(session, "GET", f"/api/tasks/{ref.task_id}/annotations")
        answer.raise_for_status()
        mine = [a for a in answer.json() if isinstance(a, dict) and _user_id(a.get("completed_by")) == session.user_id]
        return int(mine[0]["id"]) if mine else None

    # ---- Label Studio's front-end files, streamed ------------------------------------------------------------
    async def asset(self, request: Request) -> Response:
        path = request.path_params["path"]
        if not ASSET_PATH.fullmatch(path) or ".." in path:
            return _error("not found", 404)
        prefix = request.url.path.split("/")[1]  # react-app or static
        try:
            upstream = await self.upstream.send(self.upstream.build_request(request.method, f"/{prefix}/{path}"),
                                                stream=True)
        except httpx.HTTPError:
            return _error("The study server is not reachable; please try again in a minute.", 502)
        if upstream.status_code != 200:
            await upstream.aclose()
            return _error("not found", 404)
        headers = {k: upstream.headers[k] for k in ASSET_HEADERS if k in upstream.headers}
        headers["x-evalstudio-upstream"] = "label-studio"  # the only answers that come from Label Studio
        return StreamingResponse(upstream.aiter_raw(), status_code=200, headers=headers,
                                 background=BackgroundTask(upstream.aclose))

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "UP"})


class _Headers:
    """Security headers on every answer (ASGI middleware)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                for name, value in ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                                    (b"x-frame-options", b"DENY"), (b"cache-control", b"no-store")):
                    if name not in names:
                        headers.append((name, value))
                message = {**message, "headers": headers}
            await send(message)
        await self.app(scope, receive, with_headers)


def build_app(config: GatewayConfig) -> Starlette:
    gateway = Gateway(config)
    routes = [
        Route("/", gateway.home, methods=["GET"]),
        Route("/health", gateway.health, methods=["GET"]),
        Route("/s/{participant}/{code}", gateway.personal_link, methods=["GET"]),
        Route("/join/{key}", gateway.join_page, methods=["GET"]),
        Route("/label/{part}", gateway.label, methods=["GET"]),
        Route("/api/sign-in", gateway.sign_in, methods=["POST"]),
        Route("/api/sign-out", gateway.sign_out, methods=["POST"]),
        Route("/api/join", gateway.join, methods=["POST"]),
        Route("/api/{action:str}/{arg:str}", gateway.api, methods=["GET", "POST"]),
        Route("/react-app/{path:path}", gateway.asset, methods=["GET"]),
        Route("/static/{path:path}", gateway.asset, methods=["GET"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await gateway.upstream.aclose()

    app = Starlette(routes=routes, middleware=[Middleware(_Headers)], lifespan=lifespan)
    app.router.redirect_slashes = False  # a path is served exactly as routed, or not at all
    app.state.gateway = gateway
    return app
