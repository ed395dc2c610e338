"""Which task a participant of the gateway gets next. The gateway decides, not Label Studio's stream: the order is
the participant's own (evalstudio/tasks/order.py), the ledger serves each task to at most its overlap of participants in one
transaction across every gateway process, and Label Studio is asked only for the part's tasks: read as the researcher
when the gateway first needs them and again in the background every few seconds, then only those added or saved
since (a participant never waits for that read), with the fields each task shows."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from functools import cached_property

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from evalstudio.crowd import routing
from evalstudio.crowd.ledger import Ref, task_load
from evalstudio.protocols import part_order
from evalstudio.protocols.attention import CHECK_FIELD
from evalstudio.tasks.order import checks_after, choose, open_checks, participant_order, seed_of, waiting
from evalstudio.values.results import ID_FIELD

from .admission import Session
from .checks import shown_data, user_ids
from .setup import Part

# a part's tasks (ids, contexts, Label Studio's answer counts) are read again after this (the variable: for tests,
# which make the list in hand stale for as long as they need). A read of every task is one of Label Studio's
# costliest answers (every task with its annotators): at 10 s, two gateway workers' reads took a fifth of Label
# Studio's CPU during a 500-participant launch (py-spy, docs/operating.md); a participant is never told "done" from
# the list in hand
CATALOGUE_SECONDS = float(os.environ.get("EVALSTUDIO_CATALOGUE_SECONDS") or 30.0)
CATALOGUE_PAGE = 1000
# a read after the first asks Label Studio only for the tasks added or saved since the last (its cost grows with what
# changed, not with the study), and for their number (a deleted task: all are read again); tasks saved this long
# before the latest save read are asked for again (a save is stamped before it lands: one can land after a later one,
# e.g. while Label Studio's SQLite makes it wait for a lock), and every task is read again after
# CATALOGUE_FULL_SECONDS (a save that landed later still). During a launch a refresh thus reads the tasks saved in
# the last minute or so (the sync writer's answers among them): its cost follows the answers' rate
CATALOGUE_WINDOW = 30.0
CATALOGUE_FULL_SECONDS = float(os.environ.get("EVALSTUDIO_CATALOGUE_FULL_SECONDS") or 600.0)
# a participant waits at most this long for Label Studio's tasks (a fresh read before "done"); then they are told
# the study server cannot reach Label Studio (a 503 the page asks again after) while the read goes on behind
UPSTREAM_WAIT = float(os.environ.get("EVALSTUDIO_UPSTREAM_WAIT") or 10.0)


class LabelStudioSilent(Exception):
    """Label Studio did not give the part's tasks within UPSTREAM_WAIT seconds."""


@dataclass
class Catalogue:
    """A part's tasks as Label Studio has them: context (item id) and answers stored per task, and who gave them."""
    contexts: dict[int, str]
    outside: dict[int, int]
    annotators: dict[int, set[int]]
    read: float
    data: dict[int, dict]  # task id -> the fields the part's view shows (only those), as the ledger records them
    by_user: dict[int, set[int]] = field(default_factory=dict)  # user id -> the tasks they annotated in Label Studio
    started: float = 0.0  # when the read began (time.monotonic())
    full: float = 0.0  # when the last read of every task began (time.monotonic())
    newest: int = 0  # the highest task id read
    changed: datetime.datetime | None = None  # the latest time a task read was saved in Label Studio (its clock)
    # a part with attention checks: task id -> (its evalstudio id, the original's evalstudio id for a check copy)
    ids: dict[int, tuple[str, str | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.by_user:
            for task, users in self.annotators.items():
                for user in users:
                    self.by_user.setdefault(user, set()).add(task)

    def annotated_by(self, user: int | None) -> set[int]:
        """The tasks `user` has annotations on in Label Studio (as last read)."""
        return self.by_user.get(user, set()) if user is not None else set()

    @cached_property
    def checks(self) -> dict[int, int]:
        """The part's attention checks: the copy's task id -> its original's (both in the part)."""
        task_of = {key: task for task, (key, _) in self.ids.items()}
        return {task: task_of[of] for task, (_, of) in self.ids.items() if of is not None and of in task_of}

    @cached_property
    def digest(self) -> str:
        """A SHA-256 of the part's task ids: what a participant finished the part on (ledger.finish)."""
        return hashlib.sha256(",".join(map(str, sorted(self.contexts))).encode()).hexdigest()


def _when(text) -> datetime.datetime | None:
    """A time as Label Studio gives it (ISO 8601 with its zone), or None."""
    try:
        when = datetime.datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return when if when is None or when.tzinfo is not None else when.replace(tzinfo=datetime.timezone.utc)


class Serving:
    """The gateway's choice of tasks (mixed into the Gateway)."""

    async def _catalogue(self, part: Part, since: float | None = None) -> Catalogue:
        """The part's tasks: read once, then read again in the background when older than CATALOGUE_SECONDS (the
        one in hand is used meanwhile; if Label Studio does not answer, it stays in use). With `since`, a read begun
        at or after that time (time.monotonic()), waited for: Label Studio's tasks now."""
        cached = self._catalogues.get(part.name)
        if since is not None and (cached is None or cached.started < since):
            return await self._waited(self._read_catalogue(part, since))
        if cached is not None:
            if time.monotonic() - cached.read >= CATALOGUE_SECONDS and part.name not in self._refreshing:
                task = asyncio.create_task(self._read_catalogue(part))
                self._refreshing[part.name] = task
                task.add_done_callback(lambda t, name=part.name: (self._refreshing.pop(name, None),
                                                                   t.cancelled() or t.exception()))
            return cached
        return await self._waited(self._read_catalogue(part))

    @staticmethod
    async def _waited(read) -> Catalogue:
        """A read of the tasks a participant waits for, for UPSTREAM_WAIT seconds at most (LabelStudioSilent); it
        goes on behind, and its catalogue serves the next request."""
        task = asyncio.ensure_future(read)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            return await asyncio.wait_for(asyncio.shield(task), UPSTREAM_WAIT)
        except asyncio.TimeoutError:
            raise LabelStudioSilent(f"Label Studio gave no tasks within {UPSTREAM_WAIT:g} s") from None

    async def _read_catalogue(self, part: Part, since: float | None = None) -> Catalogue:
        async with self._catalogue_locks.setdefault(part.name, asyncio.Lock()):
            cached = self._catalogues.get(part.name)
            if cached is not None and (cached.started >= since if since is not None else
                                       time.monotonic() - cached.read < CATALOGUE_SECONDS):
                return cached
            started = time.monotonic()
            read = None
            if cached is not None and started - cached.full < CATALOGUE_FULL_SECONDS:
                read = await self._changed_tasks(part, cached)
            if read is None:  # the first read, a task deleted (or added unseen), or the full read's time
                read = await self._task_pages(part, None)
                full = started
            else:
                full = cached.full
            contexts, outside, annotators, shown, newest, changed, ids = read
            if cached is not None and cached.contexts == contexts:
                contexts = cached.contexts  # the same tasks: the participants' orders drawn from them still hold
            # what participants see is the ledger's record of each task (the same for all of them); a change made in
            # Label Studio since is noted there for the operator (status) and shown only once accepted
            held = await self._w(self.ledger.record_tasks, part.name, shown, self.config.accept_changed_tasks)
            data = {t: v for t, v in cached.data.items() if t in contexts} if full != started else {}
            data.update({t: json.loads(text) for t, text in held.items()})
            self._catalogues[part.name] = Catalogue(contexts, outside, annotators, time.monotonic(), data,
                                                    started=started, full=full, newest=newest, changed=changed,
                                                    ids=ids)
            return self._catalogues[part.name]

    async def _changed_tasks(self, part: Part, cached: Catalogue) -> tuple | None:
        """The part's tasks as `cached` had them, with those Label Studio added or changed since (a new id, or saved
        within CATALOGUE_WINDOW of the latest change read: an annotation made, changed or deleted, the data
        edited) read again; None when Label Studio holds another number of tasks than that (one was deleted):
        read them all."""
        count = await self._call("GET", "/api/tasks", params={"project": part.project_id, "page": 1, "page_size": 1,
                                                              "fields": "task_only", "include": "id"})
        count.raise_for_status()
        total = count.json().get("total")
        after = cached.changed - datetime.timedelta(seconds=CATALOGUE_WINDOW) if cached.changed else None
        items = [{"filter": "filter:tasks:id", "operator": "greater", "type": "Number", "value": cached.newest}]
        if after is not None:  # Label Studio reads a time as UTC (its TIME_ZONE) in this format only
            items.append({"filter": "filter:tasks:updated_at", "operator": "greater", "type": "Datetime",
                          "value": after.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")})
        contexts, outside, annotators, shown, newest, changed, ids = await self._task_pages(
            part, {"filters": {"conjunction": "or", "items": items}, "ordering": ["tasks:id"]})
        merged = ({**cached.contexts, **contexts}, {**cached.outside, **outside},
                  {**cached.annotators, **annotators}, shown, max(newest, cached.newest),
                  max(filter(None, (changed, cached.changed)), default=None), {**cached.ids, **ids})
        return merged if isinstance(total, int) and total == len(merged[0]) else None

    async def _task_pages(self, part: Part, query: dict | None) -> tuple:
        """The part's tasks (those `query`, a Label Studio data manager query, selects): their contexts, answer
        counts, annotators and shown fields, the highest id and the latest time any was saved (Label Studio's), and
        in a part with attention checks each task's evalstudio id and a copy's original's (from its meta)."""
        contexts, outside, annotators, shown, ids = {}, {}, {}, {}, {}
        newest, changed = 0, None
        page = 1
        while True:
            params = {"project": part.project_id, "page": page, "page_size": CATALOGUE_PAGE, "fields": "task_only",
                      "review": "true", "include": "id,data,total_annotations,annotators,updated_at"
                      + (",meta" if part.attention else "")}
            if query is not None:
                params["query"] = json.dumps(query)
            answer = await self._call("GET", "/api/tasks", params=params)
            if answer.status_code == 404 and page > 1:
                break
            answer.raise_for_status()
            tasks = answer.json().get("tasks") or []
            for task in tasks:
                task_id = int(task["id"])
                data = task.get("data") or {}
                contexts[task_id] = str(data.get("item_id", task_id))
                if part.attention:
                    meta = task.get("meta")
                    check = meta.get(CHECK_FIELD) if isinstance(meta, dict) else None
                    ids[task_id] = (str(data.get(ID_FIELD)), str(check["of"]) if isinstance(check, dict) else None)
                shown[task_id] = json.dumps(shown_data(data, part.fields), sort_keys=True, ensure_ascii=False)
                annotators[task_id] = user_ids(task.get("annotators"))
                # Label Studio's counter can fall one short when two annotations of a task are saved at once
                # (it counts, then saves); the distinct annotators, read live, are a floor it cannot go under
                outside[task_id] = max(int(task.get("total_annotations") or 0), len(annotators[task_id]))
                newest = max(newest, task_id)
                saved = _when(task.get("updated_at"))
                changed = saved if changed is None or (saved is not None and saved > changed) else changed
            if len(tasks) < CATALOGUE_PAGE:
                break
            page += 1
        return contexts, outside, annotators, shown, newest, changed, ids

    async def _order_of(self, session: Session, part: Part, catalogue: Catalogue) -> list[int]:
        key = (session.key, part.name)
        cached = self._orders.get(key)
        if cached is not None and cached[0] is catalogue.contexts:  # drawn again only when the tasks change
            return cached[1]
        if part.order == "sequential":  # everyone the import's order (order.interleaved), as Label Studio's stream
            order = sorted(catalogue.contexts)
        else:
            salt = self.ledger.setting("order-salt", make=lambda: secrets.token_hex(16))
            # drawn on a worker thread: a few ms per 1,000 tasks, once per participant and process, while the event
            # loop goes on answering others
            order = await run_in_threadpool(participant_order, catalogue.contexts,
                                            seed_of(salt, session.participant, part.name))
        if catalogue.checks:  # each attention check at a later place than its original
            order = checks_after(order, catalogue.checks)
        if len(self._orders) > 10_000:
            self._orders.clear()
        self._orders[key] = (catalogue.contexts, order)
        return order

    async def _next(self, session: Session, part: Part, since: float | None = None) -> Response:
        """The participant's next task; with `since`, chosen from the part's tasks as read from Label Studio at or
        after that time (nothing left in the list in hand: "done" is decided on what the study holds now)."""
        started = time.monotonic()
        previous = self._previous(session, part)
        if part.after and part.after in self.parts:
            first = self.parts[part.after]
            if not await self._finished(session, first, ever=True):
                return JSONResponse({"finished": f"Please finish “{first.title}” first.", "previous": previous})
        overlap = await self._overlap_of(part)
        state = None
        if part.routing is not None:  # adaptive collection: the part may have collected enough (said to everyone)
            state = await self._state(part, await self._catalogue(part))
            if await self._stopped(part, state, overlap):
                return await self._collected(session, part, previous)
        if part.pac is not None and part.name in self.ledger.stopped():  # the PAC labels are complete
            return await self._collected(session, part, previous)
        if await self._finished(session, part):
            return JSONResponse({"finished": "You have done every task of this part. Thank you!", "previous": previous})
        count = await self._count(session, part)
        held = self.ledger.open_ref(session.participant, part.name)
        if held is not None and not await self._w(self.ledger.full, held.ref, overlap):
            # a task served and not answered (a reload, a new sign-in, a restart): the same one
            return await self._show(session, part, held, previous, count)
        catalogue = await self._catalogue(part, since)
        order = await self._order_of(session, part, catalogue)
        if part.active is not None:  # an active design: humans label the drawn tasks only
            design = await self._design(part, catalogue)
            order = [t for t in order if t in design and design[t][1]]
        if part.pac is not None:  # PAC labels: the calibration sample, then the tasks the threshold gives to humans
            needed = await self._pac_needed(part, await self._design(part, catalogue), overlap)
            if needed is None:
                return await self._collected(session, part, previous)
            order = [t for t in order if t in needed]
        theirs = set(catalogue.annotated_by(session.user_id))  # in Label Studio
        elsewhere = await self._items_seen_elsewhere(session, part)  # one item never twice in a study
        theirs |= {t for t, item in catalogue.contexts.items() if item in elsewhere}
        last = self.ledger.last_context_task(session.participant, part.name)
        last_context = catalogue.contexts.get(last) if last is not None else None
        seen: dict = {}
        quota_left = None if part.quota is None else max(0, part.quota - count)

        def pick(taken, mine):
            had = set(mine) | theirs
            ours = order
            if catalogue.checks:  # a check only to those who answered or hold its original (ledger and Label Studio)
                claims = {t for t, held in mine.items() if held} | catalogue.annotated_by(session.user_id)
                ours = open_checks(order, catalogue.checks, claims, quota_left=quota_left, needs=lambda t: (
                    t not in had and task_load(t, catalogue.outside, taken) < overlap))
            seen.update(taken=taken, mine=had, order=ours)
            if state is not None:
                return routing.choose_adaptive(part.routing, state, ours, catalogue.contexts, catalogue.outside,
                                               taken, had, overlap, last_context)
            return choose(ours, catalogue.contexts, catalogue.outside, taken, had, overlap, last_context, quota_left)

        ref = await self._w(self.ledger.serve_chosen, session.participant, part.name, pick)
        if ref is not None:
            return await self._show(session, part, ref, previous, count)
        if waiting(seen["order"], catalogue.outside, seen["taken"], seen["mine"], overlap):
            return JSONResponse({"error": "Every task left in this part is being worked on by other participants "
                                          "just now.", "wait": True}, status_code=503)
        if since is None:  # nothing left in the list in hand, which may be older than an import: asked again
            return await self._next(session, part, started)
        # finished on these tasks: a participant who asks again once the part holds others is served from them
        await self._w(self.ledger.finish, session.participant, part.name, catalogue.digest)
        return JSONResponse({"finished": "There are no more tasks for you in this part. Thank you!",
                             "previous": previous})

    async def _collected(self, session: Session, part: Part, previous: str | None) -> Response:
        """The part has collected what it needs (its stopping target, or its PAC labels): said to the participant,
        whose part is finished."""
        await self._w(self.ledger.finish, session.participant, part.name)
        return JSONResponse({"finished": routing.STOP_MESSAGE, "previous": previous})

    async def _design(self, part: Part, catalogue: Catalogue) -> dict:
        """An active or PAC part's design: drawn the first time any gateway process serves the part (from the
        judge's predictions, as Label Studio has them then) and kept in the ledger; read from there ever after.
        Tasks imported after the draw are not in it (and not served)."""
        kept = self._designs.get(part.name) or self.ledger.design(part.name)
        if not kept:
            answer = await self._call("GET", "/api/predictions/", params={"project": part.project_id})
            answer.raise_for_status()
            listed = answer.json()
            if not isinstance(listed, list):
                raise RuntimeError("Label Studio listed the predictions in pages; the active design needs them all")
            by_task: dict[int, list[dict]] = {}
            for prediction in listed:
                if isinstance(prediction, dict) and isinstance(prediction.get("task"), int):
                    by_task.setdefault(prediction["task"], []).append(prediction)
            if part.active is not None:
                rows = routing.draw_design(part.active, sorted(catalogue.contexts), by_task)
            else:  # a PAC part: its calibration sample, with the judge's label and confidence of every task
                rows = routing.draw_calibration(part.pac, sorted(catalogue.contexts), by_task)
            judge = part.active.judge if part.active is not None else part.pac.judge
            kept = await self._w(self.ledger.keep_design, part.name, judge, rows)
        self._designs[part.name] = kept
        return kept

    async def _pac_needed(self, part: Part, design: dict, overlap: int) -> set[int] | None:
        """The tasks of a PAC part that humans label now; None once the part has stopped (the first time, the
        ledger records the threshold and its bound). Computed again when an answer is added or changed."""
        if part.name in self.ledger.stopped():
            return None
        values = self.ledger.part_values(part.name)
        key = (hash(tuple(values)), len(design), overlap)
        cached = self._states.get(part.name)
        if cached is None or cached[0] != key:
            cached = (key, await run_in_threadpool(routing.pac_needed, part.pac, design, values, overlap))
            self._states[part.name] = cached
        needed, record = cached[1]
        if record is not None:
            await self._w(self.ledger.stop, part.name, record)
            return None
        return needed

    async def _state(self, part: Part, catalogue: Catalogue) -> routing.State:
        """The part's answers and the certainty of each task's label (computed again when an answer is added or
        changed)."""
        values = self.ledger.part_values(part.name)
        key = (hash(tuple(values)), id(catalogue.contexts))
        cached = self._states.get(part.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        state = await run_in_threadpool(routing.state_of, part.routing, sorted(catalogue.contexts), values)
        self._states[part.name] = (key, state)
        return state

    async def _stopped(self, part: Part, state: routing.State, overlap: int) -> bool:
        """Whether the part has reached its stopping target; the first time, the ledger records which, when and at
        what cost (answers, participant-minutes as the gateway measured them, money)."""
        if part.name in self.ledger.stopped():
            return True
        target = routing.reached(part.routing, state, overlap)
        if target is None:
            return False
        minutes = sum(r.seconds or 0.0 for r in self.ledger.answers()
                      if r.part == part.name and r.annotation_id is not None) / 60
        await self._w(self.ledger.stop, part.name, routing.record(part.routing, target, state, minutes))
        return True

    async def _items_seen_elsewhere(self, session: Session, part: Part) -> set[str]:
        """The items (item ids) the participant was served in the study's other projects: cmv's delta threads are in
        cmv_tom and in cmv_threads, and one participant meets each in one of them only, except in a part that comes
        after the other (crowd.after): cmv_tom after the blind cmv_threads may show a thread rated blind before."""
        seen: set[str] = set()
        earlier = part_order.earlier_entries(list(self.parts.values()), part_order.entry_of(part))
        for name, tasks in self.ledger.served_by_part(session.participant).items():
            if name == part.name or name not in self.parts or part_order.entry_of(self.parts[name]) in earlier:
                continue
            contexts = (await self._catalogue(self.parts[name])).contexts
            seen |= {contexts[t] for t in tasks if t in contexts}
        return seen

    async def _show(self, session: Session, part: Part, ref: Ref, previous: str | None, count: int) -> Response:
        data = (await self._catalogue(part)).data.get(ref.task_id)
        if data is None:  # deleted in Label Studio since the reference was served: never answered
            await self._w(self.ledger.full, ref.ref, 0)
            return JSONResponse({"error": "This task was withdrawn; one moment.", "wait": True}, status_code=503)
        # a prefilled part's task shown unassisted (unassisted_share's draw) carries no prediction at all
        assisted = part.prefill and await self._assisted(part, ref)
        predictions = await self._predictions(ref.task_id, part.prefill) if assisted else None
        return self._shown(part, ref, data, previous, count, predictions)
