"""The gateway's ASGI app (Starlette, served by uvicorn): sign-in, the labeling stream of the study's projects and
Label Studio's front-end files; nothing else of Label Studio is reachable through it.

Participants are answered from the study's ledger: a sign-up, a next task and an answer never wait on Label Studio
(the tasks' shown fields are read from it in the background, the answers reach it behind the ledger through the
sync writer, evalstudio/gateway/sync.py). The gateway acts in Label Studio as the researcher's account only."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from evalstudio.base.errors import EvalstudioError
from evalstudio.crowd import routing
from evalstudio.crowd.assistance import unassisted
from evalstudio.crowd.ledger import Ledger, LedgerUnreachable, Ref
from evalstudio.values.origins import prefill_predictions, region_key, same_value, shown_prediction

from . import pages, sync
from .admission import Admission, Session, error_response
from .checks import ASSET_PATH, REF, Refused, check_result, shown_data
from .front import FrontMatter
from .serving import CATALOGUE_SECONDS, Catalogue, LabelStudioSilent, Serving
from .setup import GatewayConfig, Part

_UPSTREAM: contextvars.ContextVar[float] = contextvars.ContextVar("upstream_seconds", default=0.0)
UPSTREAM_RETRIES = 3  # a read that failed inside Label Studio (5xx) is tried this many times more
ASSET_HEADERS = ("content-type", "content-length", "content-encoding", "etag", "last-modified", "cache-control")
# what a participant is told when the gateway's host cannot reach what it stands on (a 503: the page asks again)
NO_LEDGER = ("The study server cannot reach its database just now. The answers it confirmed are saved; "
             "please try again in a minute.")
NO_LABEL_STUDIO = ("The study server cannot reach Label Studio just now. The answers it confirmed are saved; "
                   "please try again in a minute.")


class Gateway(FrontMatter, Serving, Admission):
    """The gateway's routes: the study's front matter (FrontMatter), sign-in and sign-up (Admission), next task and
    answers (Serving), pages, assets."""
    def __init__(self, config: GatewayConfig):
        self.config = config
        self.parts = {p.name: p for p in config.parts}
        # what participants name: each entry, with its lists' projects where it has counterbalanced lists
        self.entries: dict[str, list[Part]] = {}
        for part in config.parts:
            self.entries.setdefault(part.entry or part.name, []).append(part)
        # the study's ledger: participants, sessions, served tasks, answers, finished parts, lists, attempts. This
        # process keeps nothing that another gateway process or a restart would need.
        self.ledger = Ledger(config.participants_folder)
        self._sheet_due, self._sheet_task = False, None  # the participants' sheet, written behind sign-ups
        self.locks: dict[str, asyncio.Lock] = {}  # one request of a participant at a time in this process
        self._catalogues: dict[str, Catalogue] = {}  # part -> its tasks as Label Studio has them (a cache)
        self._catalogue_locks: dict[str, asyncio.Lock] = {}
        self._refreshing: dict[str, asyncio.Task] = {}  # part -> its catalogue being read again in the background
        # (participant, part) -> their order, with the part's tasks (contexts) it was drawn from
        self._orders: dict[tuple[str, str], tuple[dict[int, str], list[int]]] = {}
        self._states: dict[str, tuple] = {}  # part -> (what it was computed from, routing.State): adaptive parts
        self._designs: dict[str, dict] = {}  # part -> its active design as the ledger keeps it (drawn once)
        self._seed: str | None = None  # the study's seed of unassisted_share's draw, as the ledger keeps it
        self.upstream = httpx.AsyncClient(base_url=config.label_studio_url, timeout=60,
                                          limits=httpx.Limits(max_connections=200, max_keepalive_connections=100))
        # Label Studio receives the ledger's accounts and answers behind it (started with the app)
        self.sync = sync.SyncWriter(self.ledger, config.label_studio_url, config.api_key,
                                    {p.name: p.project_id for p in config.parts}, config.sync_name)

    # ---- pages ------------------------------------------------------------------------------------------------
    async def home(self, request: Request) -> Response:
        """GET /: the sign-in page, or the participant's parts with their state and the completion code."""
        session = await self.session(request)
        if session is None:
            return self._html(pages.sign_in, self.config.study)
        states = self._part_states(session)
        # the study's front matter first (consent, practice, background), and its exit survey at the end
        if (front := self.front_page(session, states)) is not None:
            return front
        return self._html(pages.start, self.config.study, session.participant, states, self.config.completion_code,
                          self.config.platform)

    def _part_states(self, session: Session) -> list[dict]:
        """Each entry of the study as the participant's start page shows it: finished, open, or after another."""
        finished = self.ledger.finished_on(session.participant)
        states = []
        for entry, choices in self.entries.items():
            part = choices[0] if len(choices) == 1 else self._assigned(session, entry)
            # a list not chosen yet (Circa's Part II) has its lists' gate: no Start before the part it follows
            first = part or choices[0]
            if part is not None and self._known_finished(session, part, finished):
                state = "finished"
            elif first.after and first.after in self.parts and not self._known_finished(
                    session, self.parts[first.after], finished, ever=True):
                state = f"Starts once you have finished “{self.parts[first.after].title}”."
            else:
                state = "open"
            states.append({"name": entry, "title": first.title, "state": state})
        return states

    async def label(self, request: Request) -> Response:
        """GET /label/PART: the labeling page of a part for a signed-in participant."""
        entry = request.path_params["part"]
        if entry not in self.entries:
            return error_response("not found", 404)
        part = self.entries[entry][0]  # the lists of an entry share config, instructions and title
        session = await self.session(request)
        if session is None or self.front_block(session) is not None:
            return RedirectResponse("/", status_code=303)
        return self._html(pages.labeling, self.config.study, part.title, entry, part.config, part.instructions,
                          self.config.chunks, self.config.module, self.config.front_end, part.first_config)

    # ---- counterbalanced lists --------------------------------------------------------------------------------
    def _assigned(self, session: Session, entry: str) -> Part | None:
        number = self.ledger.list_of(entry, session.participant)
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
        await self._w(self.ledger.assign_list, entry, session.participant, [p.list_number for p in choices],
                                max(worked, key=counts.get) if worked else None)
        return self._assigned(session, entry)

    # ---- JSON API ---------------------------------------------------------------------------------------------
    async def _call(self, method: str, path: str, **kwargs) -> httpx.Response:
        """One read of Label Studio as the researcher, its time added to the request's upstream time. A read that
        fails inside Label Studio (a 5xx: a busy database) is asked again, up to UPSTREAM_RETRIES times."""
        started = time.perf_counter()
        try:
            headers = {"Authorization": f"Token {self.config.api_key}"}
            answer = await self.upstream.request(method, path, headers=headers, **kwargs)
            for attempt in range(UPSTREAM_RETRIES if method == "GET" else 0):
                if answer.status_code < 500:
                    break
                await asyncio.sleep(0.25 * 2 ** attempt)
                answer = await self.upstream.request(method, path, headers=headers, **kwargs)
            return answer
        finally:
            _UPSTREAM.set(_UPSTREAM.get() + time.perf_counter() - started)

    async def _count(self, session: Session, part: Part) -> int:
        """The participant's answers in the part: the ledger's, and the annotations Label Studio has of theirs on
        tasks the ledger never served them (made in Label Studio itself, or before the ledger). An annotation on a
        task the ledger served them is the ledger's answer or none: never counted twice, nor counted before the
        ledger has it (an answer Label Studio stored whose acknowledgement a killed gateway lost is the answer its
        resubmission records, not one more)."""
        counted = self.ledger.answered_count(session.participant, part.name)
        if session.user_id is None:
            return counted
        catalogue = await self._catalogue(part)
        served = self.ledger.served_by_part(session.participant).get(part.name, set())
        return counted + len(catalogue.annotated_by(session.user_id) - served)

    async def _overlap_of(self, part: Part) -> int:
        return part.overlap

    def _known_finished(self, session: Session, part: Part, finished: dict[str, str | None] | None = None,
                        ever: bool = False) -> bool:
        """Finished as the ledger knows (no question to Label Studio): for good, by the quota, or with nothing left
        among the part's tasks as this process last read them (`ever`: finished at some time, which opens the parts
        that come after it for good)."""
        finished = self.ledger.finished_on(session.participant) if finished is None else finished
        if part.name in finished:
            tasks, catalogue = finished[part.name], self._catalogues.get(part.name)
            if ever or tasks is None or catalogue is None or catalogue.digest == tasks:
                return True
        return part.quota is not None and self.ledger.answered_count(session.participant, part.name) >= part.quota

    async def _finished(self, session: Session, part: Part, ever: bool = False) -> bool:
        """Finished as the ledger knows; a participant who finished because nothing was left for them is finished
        only while the part's tasks are those (a list of them older than CATALOGUE_SECONDS: looked at again)."""
        tasks = self.ledger.finished_on(session.participant).get(part.name, "")
        if ever or tasks is None:
            if self._known_finished(session, part, ever=ever):
                return True
        elif tasks:
            catalogue = await self._catalogue(part)
            if catalogue.digest == tasks and time.monotonic() - catalogue.read < CATALOGUE_SECONDS:
                return True
        if part.quota is not None and await self._count(session, part) >= part.quota:
            await self._w(self.ledger.finish, session.participant, part.name)
            return True
        return False

    def _previous(self, session: Session, part: Part, before: str | None = None) -> str | None:
        done = self.ledger.history(session.participant, part.name)
        if before in done:
            done = done[:done.index(before)]
        return done[-1] if done else None

    def _progress(self, count: int, part: Part) -> str:
        """What the page shows of the participant's progress: with batches (dialogue: 11 questions per HIT, at most
        5 HITs) the HIT and the question in it, as the document's HIT page numbers them."""
        if part.batch:
            size, most = part.batch
            hit = min(count // size + 1, most)
            return f"HIT {hit} of {most}, question {count - (hit - 1) * size + 1} of {size}"
        # of the quota, or of the part's tasks when it has fewer (nobody answers a task twice): issue 53's "0 of 30
        # done" for a study of 4 tasks
        catalogue = self._catalogues.get(part.name)
        tasks = len(catalogue.contexts) if catalogue else None
        if part.active is not None and part.name in self._designs:  # an active part: its drawn tasks
            tasks = sum(drawn for _, drawn, _, _ in self._designs[part.name].values())
        total = min(part.quota, tasks) if part.quota and tasks is not None else part.quota
        return f"{count} of {total} done" if total else f"{count} done"

    async def api(self, request: Request) -> Response:
        """Every JSON route of a signed-in participant, with one error handling."""
        started = time.perf_counter()
        _UPSTREAM.set(0.0)
        try:
            session = await self._api_session(request)
            lock = self.locks.setdefault(session.key, asyncio.Lock())
            async with lock:  # one request of a participant at a time in this process (the ledger decides between)
                response = await self._route(request, session)
            if not lock.locked() and len(self.locks) > 10_000:
                self.locks.pop(session.key, None)
            # what the gateway added, for the benchmark and for anyone watching: its own time vs Label Studio's
            response.headers["Server-Timing"] = (f"upstream;dur={1000 * _UPSTREAM.get():.2f}, "
                                                 f"total;dur={1000 * (time.perf_counter() - started):.2f}")
            return response
        except PermissionError as e:
            return error_response(str(e), 401)
        except Refused as e:
            return error_response(str(e), 400)
        except LedgerUnreachable:
            return error_response(NO_LEDGER, 503)
        except (httpx.HTTPError, LabelStudioSilent):
            return error_response(NO_LABEL_STUDIO, 503)
        except EvalstudioError:
            return error_response("The study server is not reachable; please try again in a minute.", 502)

    async def _route(self, request: Request, session: Session) -> Response:
        action, arg = request.path_params["action"], request.path_params["arg"]
        if action in ("front", "practice"):  # the study's front matter: each step only at its turn
            return await self.front_route(request, session, action, arg)
        if (blocked := self.front_block(session)) is not None:  # no task route before consent, practice, background
            return error_response(blocked, 403)
        if request.method == "GET" and action == "next":
            part = await self._part_for(session, arg)
            if part is None:
                return error_response("not found", 404)
            return await self._next(session, part)
        ref = self.ledger.ref(session.participant, arg) if REF.fullmatch(arg) else None
        if ref is None or ref.part not in self.parts:
            return error_response("not found", 404)
        part = self.parts[ref.part]
        if request.method == "GET" and action == "task":
            return await self._task(session, part, ref)
        if request.method == "POST" and action in ("submit", "update"):
            body = await self._body(request)
            return await self._save(session, part, ref, body)
        return error_response("not found", 404)

    def _shown(self, part: Part, ref: Ref, data: dict, previous: str | None, count: int,
               predictions: list | None = None) -> Response:
        shown = {"ref": ref.ref, "number": ref.number, "data": shown_data(data, part.fields),
                 "previous": previous, "progress": self._progress(count, part), "update": False,
                 # the participant's first task of the part: its guide open (setup.panels_open)
                 "guide": "open" if self.ledger.first_number(ref.participant, part.name) == ref.number else "folded"}
        if part.prefill and predictions is not None:  # (None: shown unassisted, nothing of the prediction sent)
            shown["predictions"] = [{"id": i + 1, "result": shown_prediction(p.get("result"), part.prefill)}
                                    for i, p in enumerate(predictions)][:1]
        return JSONResponse(shown)

    async def _task(self, session: Session, part: Part, ref: Ref) -> Response:
        """A task the participant answered, with their answer as the ledger holds it (to change it)."""
        if ref.answered is None or ref.result is None:
            return error_response("This task has no saved answer yet.", 404)
        catalogue = await self._catalogue(part)
        data = shown_data(catalogue.data.get(ref.task_id) or {}, part.fields)
        return JSONResponse({"ref": ref.ref, "number": ref.number, "update": True, "data": data,
                             "result": check_result(json.loads(ref.result), part.controls, data=data),
                             "previous": self._previous(session, part, ref.ref),
                             "progress": self._progress(await self._count(session, part), part)})

    async def _save(self, session: Session, part: Part, ref: Ref, body: dict) -> Response:
        """The participant's answer to a task they were served. Only `result` is read from the request, checked
        against the labeling config (every required control answered, every value on its control's scale); its
        origin and its time on the task are the gateway's: the time from serving the task to the submission the
        ledger recorded. One answer per participant and task: a second submission is a new version of the first.
        Acknowledged once the ledger has it; Label Studio receives it behind (the sync writer)."""
        catalogue = await self._catalogue(part)  # the text a span marks is the task's as shown
        result = check_result(body.get("result"), part.controls, complete=True,
                              data=shown_data(catalogue.data.get(ref.task_id) or {}, part.fields))
        if ref.answered is None and part.quota is not None and await self._count(session, part) >= part.quota:
            return error_response("You have done every task of this part.", 409)
        rule = part.routing or part.pac  # adaptive or PAC: what routing reads
        value = routing.value_of(result, rule) if rule else None
        stored = json.dumps(await self._with_origin(part, ref, result), ensure_ascii=False, allow_nan=False)
        state = await self._w(self.ledger.record, ref.ref, stored, value, await self._overlap_of(part), part.quota)
        if state == "full":
            return JSONResponse({"error": "Other participants have given this task all the answers it needs, so "
                                          "yours is not needed; here is your next task.", "next": True},
                                status_code=409)
        if state == "quota":
            return error_response("You have done every task of this part.", 409)
        self.sync.wake.set()
        return JSONResponse({"ok": True})

    async def _with_origin(self, part: Part, ref: Ref, result: list[dict]) -> list[dict]:
        """Each region's origin as the gateway knows it: `manual`, or with prefilling on (model-assisted labelling)
        `prediction` where the answer is the prediction shown and `prediction-changed` where the participant changed
        it (a span and its per-region answers: the predicted region of the same id, its extent and label compared).
        Never what the browser says. The ledger records whether the task was shown with the prediction (and which:
        the annotation's parent in Label Studio) or without it (unassisted_share's draw: every region `manual`)."""
        predicted: dict[object, object] = {}
        if part.prefill:
            assisted = await self._assisted(part, ref)
            first = ((await self._predictions(ref.task_id, part.prefill)) or [{}])[0] if assisted else {}
            predicted = {region_key(r): r.get("value") for r in shown_prediction(first.get("result"), part.prefill)}
            shown = first.get("id") if isinstance(first.get("id"), int) and not isinstance(first.get("id"), bool) \
                else None
            await self._w(self.ledger.set_assisted, ref.ref, assisted, shown)
        out = []
        for region in result:
            key = region_key(region)
            origin = "manual" if key not in predicted else (
                "prediction" if same_value(predicted[key], region["value"]) else "prediction-changed")
            out.append({**region, "origin": origin})
        return out

    async def _assisted(self, part: Part, ref: Ref) -> bool:
        """Whether the participant is shown this task of a prefilled part with the prediction: always, unless the part
        has unassisted_share, whose draw (evalstudio/crowd/assistance.py) is the ledger's: the study's secret seed,
        the participant and the task's place among theirs in the part. Nothing the browser sends enters it."""
        if part.unassisted_share is None:
            return True
        if self._seed is None:
            self._seed = await self._w(self.ledger.assistance_seed)
        position = self.ledger.position_in_part(ref.ref)
        return not unassisted(self._seed, ref.participant, part.name, position, part.unassisted_share)

    async def _predictions(self, task_id: int, part_prefill: bool | str = True) -> list[dict]:
        """A prefilled part's predictions of a task (read from Label Studio: prefilling is an opt-in of a study run in
        Label Studio's pace); with `prefill: judge:NAME` that judge's only."""
        task = await self._call("GET", f"/api/tasks/{task_id}")
        task.raise_for_status()
        return prefill_predictions(task.json().get("predictions"), part_prefill)

    # ---- Label Studio's front-end files, streamed ------------------------------------------------------------
    async def asset(self, request: Request) -> Response:
        """GET /react-app/... and /static/...: Label Studio's editor files, streamed from Label Studio."""
        path = request.path_params["path"]
        if not ASSET_PATH.fullmatch(path) or ".." in path:
            return error_response("not found", 404)
        prefix = request.url.path.split("/")[1]  # react-app or static
        try:
            upstream = await self.upstream.send(self.upstream.build_request(request.method, f"/{prefix}/{path}"),
                                                stream=True)
        except httpx.HTTPError:
            return error_response("The study server is not reachable; please try again in a minute.", 502)
        if upstream.status_code != 200:
            await upstream.aclose()
            return error_response("not found", 404)
        headers = {k: upstream.headers[k] for k in ASSET_HEADERS if k in upstream.headers}
        headers["x-evalstudio-upstream"] = "label-studio"  # the only answers that come from Label Studio
        return StreamingResponse(upstream.aiter_raw(), status_code=200, headers=headers,
                                 background=BackgroundTask(upstream.aclose))

    async def health(self, request: Request) -> Response:
        """GET /health: the gateway is up."""
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
    """The gateway's Starlette app for this configuration: its routes, headers and lifespan."""
    gateway = Gateway(config)
    routes = [
        Route("/", gateway.home, methods=["GET"]),
        Route("/health", gateway.health, methods=["GET"]),
        Route("/s/{participant}/{code}", gateway.personal_link, methods=["GET"]),
        Route("/join/{key}", gateway.join_page, methods=["GET"]),
        Route("/label/{part}", gateway.label, methods=["GET"]),
        Route("/practice", gateway.practice_page, methods=["GET"]),
        Route("/api/sign-in", gateway.sign_in, methods=["POST"]),
        Route("/api/sign-out", gateway.sign_out, methods=["POST"]),
        Route("/api/join", gateway.join, methods=["POST"]),
        Route("/api/{action:str}/{arg:str}", gateway.api, methods=["GET", "POST"]),
        Route("/react-app/{path:path}", gateway.asset, methods=["GET"]),
        Route("/static/{path:path}", gateway.asset, methods=["GET"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        for part in config.parts:  # the tasks' shown fields, before the first participant: no next waits for them
            await gateway._read_catalogue(part)
        thread, stop = sync.start(gateway.sync)
        try:
            yield
        finally:
            stop.set()
            gateway.sync.wake.set()
            await run_in_threadpool(thread.join, 10)
            await gateway.write_sheet()
            await gateway.upstream.aclose()

    async def unreachable(request: Request, exc: Exception) -> Response:
        """A page or sign-in whose ledger did not answer: said, as a 503 (the API's routes say it themselves)."""
        if request.url.path.startswith("/api/"):
            return error_response(NO_LEDGER, 503)
        return PlainTextResponse(NO_LEDGER, 503)  # a page: read in the browser as it is

    app = Starlette(routes=routes, middleware=[Middleware(_Headers)], lifespan=lifespan,
                    exception_handlers={LedgerUnreachable: unreachable})
    app.router.redirect_slashes = False  # a path is served exactly as routed, or not at all
    app.state.gateway = gateway
    return app
