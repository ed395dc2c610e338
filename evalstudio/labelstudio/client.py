"""The one place that talks to Label Studio (through label-studio-sdk)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
from label_studio_sdk import LabelStudio
from label_studio_sdk.core.api_error import ApiError

from evalstudio.base.credentials import basic_auth_header, check_api_key
from evalstudio.base.errors import BadInput, ServerError, Transient
from evalstudio.base.retry import RetryPolicy
from evalstudio.protocols.registry import Project
from evalstudio.values.results import ID_FIELD

from .accounts import RETRY_STATUS, Accounts
from .connection import Settings, check_url, shown_url
from .relay import CLOSE, left_out_of_collections, one_process, regrouped, relayed, requests, sent_trace

PAGE_SIZE = 1000
ID_PAGE_SIZE = 10_000  # task ids per listing request (ids only: small answers)
EXPORT_IDS = 500  # task ids per page of the export (the pages, and so the CSV's bytes, as they always were)
# task ids per export request: Label Studio (Django) refuses a request with more than 1,000 query fields (998 ids,
# exportType and download_all_tasks)
EXPORT_REQUEST_IDS = 998
EXPORT_IN_FLIGHT = 2  # chunks asked for at a time (the export endpoint's from a one-process server: one, relay.py)
log = logging.getLogger(__name__)


class _RequestTooLong(Exception):
    """The server refused a request line as too long (HTTP 414): ask for fewer task ids at a time."""


def _translate(error: Exception, url: str, action: str) -> ServerError | None:
    """A ServerError a user can act on for an SDK/HTTP failure (None for anything else)."""
    if isinstance(error, httpx.ConnectError):
        return Transient(f"cannot reach Label Studio at {url} while trying to {action}. Is it running?")
    if isinstance(error, httpx.TimeoutException):
        return Transient(f"Label Studio at {url} timed out while trying to {action}")
    if isinstance(error, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return Transient(f"Label Studio at {url} dropped the connection while trying to {action}")
    if isinstance(error, ApiError):
        body = error.body
        detail = body.get("detail") if isinstance(body, dict) else str(body)[:300]
        if isinstance(body, dict) and body.get("validation_errors"):
            detail = f"{detail}: {body['validation_errors']}"
        if error.status_code == 401:
            detail = f"{str(detail).rstrip('.')}. Check LABEL_STUDIO_API_KEY"
        kind = Transient if error.status_code in RETRY_STATUS else ServerError
        return kind(f"Label Studio refused to {action} (HTTP {error.status_code}): {detail}")
    return None


def _raise_for_status(response: httpx.Response) -> None:
    """A failed plain request as the SDK's ApiError (status and body), so `_translate` words it like the SDK's."""
    if response.status_code >= 400:
        try:
            detail = response.json()
        except ValueError:
            detail = response.text[:300]
        raise ApiError(status_code=response.status_code, body=detail)


class Client(Accounts):
    """evalstudio's calls to Label Studio. Reads are retried with backoff on transient failures; writes
    are sent once (the SDK's own blind retries are off) and callers decide what is safe to repeat."""

    def __init__(self, settings: Settings, timeout: float = 120.0, retry: RetryPolicy | None = None):
        base = check_url(settings.url)
        self.url = shown_url(base)  # what messages show: never a user:password@ part
        self.retry = retry if retry is not None else RetryPolicy.from_environment()
        self.sdk = LabelStudio(base_url=base, api_key=check_api_key(settings.api_key), timeout=timeout, max_retries=0)
        self._base, self._timeout = base, timeout
        self._auth = {"Authorization": f"Token {check_api_key(settings.api_key)}"}
        self._plain: httpx.Client | None = None  # made on first use (see _web)
        self._plain_lock = threading.Lock()

    @contextmanager
    def _call(self, action: str):
        """Run one request, turning failures into ServerError (Transient when a retry may help)."""
        try:
            yield
        except (httpx.HTTPError, ApiError) as e:
            translated = _translate(e, self.url, action)
            if translated is None:
                raise
            raise translated from None

    def _read(self, action: str, request):
        """Result of the idempotent `request()`, retried with backoff while failures are transient."""
        for delay in [*self.retry.delays(), None]:
            try:
                with self._call(action):
                    return request()
            except Transient as e:
                if delay is None:
                    raise Transient(f"{e} (gave up after {self.retry.attempts} attempt{'s' if self.retry.attempts != 1 else ''})") from None
                log.warning("%s; retrying in %.1f s", e, delay)
                time.sleep(delay)

    def _pages(self, action: str, page_size: int = PAGE_SIZE, **params) -> Iterator[list]:
        """Pages of /api/tasks, one request per page, each retried on its own (constant memory)."""
        page = 1
        while True:
            try:
                items = self._read(f"{action} (page {page})", lambda: self.sdk.tasks.list(
                    page=page, page_size=page_size, **params).items or [])
            except ServerError as e:
                if page > 1 and "HTTP 404" in str(e):  # past the last page
                    return
                raise
            if items:
                yield items
            if len(items) < page_size:
                return
            page += 1

    def find_project(self, title: str) -> int | None:
        """The id of the project with this title, or None."""
        found = self._listed(title, "id,title")
        return found.id if found is not None else None

    def find_project_counted(self, title: str) -> tuple[int | None, int]:
        """(id, number of tasks) of the project titled `title`, in one request; (None, 0) when there is none."""
        found = self._listed(title, "id,title,task_number")
        return (found.id, found.task_number or 0) if found is not None else (None, 0)

    def _listed(self, title: str, include: str):
        """The project titled exactly `title` as the project list gives it (only the fields in `include`), or None."""
        # filtered by title on the server (a case-insensitive "contains", so compare exactly here), and only the
        # fields asked for: without `include` Label Studio computes every count of every project (slow on a busy
        # server)
        projects = self._read("list projects", lambda: list(self.sdk.projects.list(title=title, include=include, page_size=100)))
        return next((p for p in projects if p.title == title), None)

    def require_project(self, project: Project) -> int:
        """Id of the project titled like `project`; ServerError naming the fix when there is none."""
        project_id = self.find_project(project.title)
        if project_id is None:
            raise ServerError(f"no project titled '{project.title}' on {self.url}; run `evalstudio setup` or `import` first")
        return project_id

    def overlap(self, project_id: int) -> int:
        """How many annotations the project asks per task (its maximum_annotations)."""
        found = self._read(f"read project {project_id}", lambda: self.sdk.projects.get(id=project_id))
        return int(found.maximum_annotations or 1)

    def ensure_project(self, project: Project) -> tuple[int, str]:
        """Create the project, or bring an existing one (same title) up to date.

        Returns (id, status) with status "created", "updated" or "unchanged"."""
        project_id, status, _ = self.ensure_project_counted(project)
        return project_id, status

    def ensure_project_counted(self, project: Project) -> tuple[int, str, int]:
        """ensure_project, and the number of tasks the project holds: one request for a project that exists
        unchanged (the project list gives its settings and task count; the import asks this before every run)."""
        fields = self.project_fields(project)
        current = self._listed(project.title, ",".join(["id", "title", "task_number", *fields]))
        if current is None:
            try:
                with self._call(f"create project '{project.title}'"):
                    return self.sdk.projects.create(title=project.title, **fields).id, "created", 0
            except Transient:  # the create may have landed before the failure: look before giving up
                project_id, count = self.find_project_counted(project.title)
                if project_id is None:
                    raise
                return project_id, "created", count
        changed = self._drift(project, current)
        if changed:  # an update sets fields to fixed values, so repeating it is safe
            self._read(f"update project '{project.title}'", lambda: self.sdk.projects.update(id=current.id, **changed))
        return current.id, "updated" if changed else "unchanged", current.task_number or 0

    @staticmethod
    def project_fields(project: Project) -> dict:
        """The Label Studio project settings that evalstudio sets from projects.yaml."""
        return dict(
            label_config=project.config_for("label-studio"),
            expert_instruction=project.instructions_for("label-studio"),
            show_instruction=True,
            maximum_annotations=project.annotators_per_task,
            description=f"evalstudio protocol: {project.name}",
            # No anchoring: predictions fill answer controls only when the project opts in to model-assisted
            # labelling (projects.yaml `prefill: true`). Label Studio never fetches predictions by itself (they
            # come from `evalstudio prefill`, once per task), and evalstudio creates none without the opt-in.
            show_collab_predictions=bool(project.prefill),
            evaluate_predictions_automatically=False,
            sampling="Uniform sampling" if project.order == "random" else "Sequential sampling",
        )

    def project_drift(self, project: Project, project_id: int) -> dict:
        """The settings of Label Studio project `project_id` that differ from projects.yaml: name -> the value
        projects.yaml gives (`setup` writes them back)."""
        return self._drift(project, self.project(project_id))

    def _drift(self, project: Project, current) -> dict:
        return {k: v for k, v in self.project_fields(project).items() if getattr(current, k, None) != v}

    def project(self, project_id: int):
        """The project as Label Studio's API returns it (retried on transient failures)."""
        return self._read(f"read project {project_id}", lambda: self.sdk.projects.get(id=project_id))

    def require_protocol(self, project: Project, project_id: int) -> int:
        """`project_id` if that Label Studio project runs `project`'s protocol (the same controls in its labeling
        config), else ServerError: exporting a Sotopia project as dialogue would give rows of nothing."""
        from label_studio_sdk.label_interface import LabelInterface

        config = self.project(project_id).label_config or ""
        try:
            controls = {c.name for c in LabelInterface(config).controls}
        except Exception:
            controls = set()
        if controls != {c.name for c in project.interface.controls}:
            raise BadInput(f"Label Studio project {project_id} does not run the {project.name} protocol (its labeling "
                              f"config has other controls); check --project-id")
        return project_id

    def task_count(self, project_id: int) -> int:
        """How many tasks the project holds."""
        return self.project(project_id).task_number or 0

    def tasks(self, project_id: int) -> Iterator:
        """All tasks of a project (id and data), page by page."""
        for page in self._pages(f"list tasks of project {project_id}", project=project_id, fields="task_only",
                                include="id,data"):
            yield from page

    def task_ids(self, project_id: int, after: int = 0) -> dict[str, int]:
        """evalstudio id -> Label Studio task id, of the project's tasks (only those with task id > `after`)."""
        query = None
        if after:
            query = json.dumps({"filters": {"conjunction": "and", "items": [
                {"filter": "filter:tasks:id", "operator": "greater", "type": "Number", "value": after}]}})
        found = {}
        for page in self._pages(f"list tasks of project {project_id}", project=project_id, fields="task_only",
                                include="id,data", query=query):
            found.update((t.data[ID_FIELD], t.id) for t in page if t.data.get(ID_FIELD))
        return found

    def task_items(self, project_id: int) -> dict[str, str]:
        """evalstudio id -> item id, of the project's tasks."""
        return {str(t.data[ID_FIELD]): str(t.data.get("item_id")) for t in self.tasks(project_id) if t.data.get(ID_FIELD)}

    def task_id_list(self, project_id: int) -> list[int]:
        """The ids of the project's tasks, ascending (one cheap listing: ids only)."""
        ids: list[int] = []
        for page in self._pages(f"list the tasks of project {project_id}", ID_PAGE_SIZE, project=project_id,
                                fields="task_only", include="id"):
            ids.extend(t.id for t in page)
        return sorted(ids)

    def full_task_pages(self, project_id: int, action: str = "export tasks", page_size: int = PAGE_SIZE,
                        export_endpoint: bool = False) -> Iterator[list[dict]]:
        """Pages of tasks with annotations and predictions as plain dicts (the layout of a JSON export), asked for
        `page_size` task ids at a time (a range of consecutive ids, or the listed ids when the project's are
        sparse), yielded in id order, in constant memory, each chunk retried on its own after a transient failure.

        `export_endpoint`: through Label Studio's own export (`/api/projects/ID/export`, JSON), its fastest path
        (the task API computes far more per task), in requests of up to EXPORT_REQUEST_IDS ids (halved on HTTP 414);
        a page with predictions through the task API (the export names them by id only). Label Studio keeps a copy
        of all it exports (export/: JSON and info files, never deleted): only `evalstudio export` does it.
        Otherwise the Data Manager's task API, which leaves nothing behind: what `status`, `approvals`, `report`,
        `prefill` and the learner's retraining (after every annotation) read, perhaps many times a day."""
        from itertools import islice

        first, last, total, serial = self._id_span(project_id)
        if total == 0:
            return
        # consecutive ranges of ids when the project's are dense enough (at most half of the span other projects' or
        # deleted tasks): listing every id costs Label Studio about 0.35 ms a task (17 s at 50,000); else listed
        ids = range(first, last + 1) if last - first + 1 <= 2 * total else self.task_id_list(project_id)
        listed = not isinstance(ids, range)
        page_size = min(page_size, EXPORT_IDS)
        where = lambda chunk: f"{action} of project {project_id} (task ids {chunk[0]}-{chunk[-1]}, of {total} tasks)"
        if export_endpoint:  # back to back, one at a time from a one-process server (relay.py says why)
            pages = [list(ids[start:start + page_size]) for start in range(0, len(ids), page_size)]
            parsed = relayed(requests(ids, page_size, EXPORT_REQUEST_IDS),
                             lambda chunk, on_sent: self._export_bodies(project_id, chunk, where(chunk), on_sent),
                             lambda chunk, bodies: (chunk, self._export_tasks(project_id, bodies)),
                             at_once=1 if serial else EXPORT_IN_FLIGHT)
            with left_out_of_collections():
                for chunk, page in regrouped(parsed, pages):
                    if listed and len(page) != len(chunk):  # deleted meanwhile: the export says so by leaving it out
                        log.info("project %s: %d of %d task(s) were no longer there to export", project_id, len(chunk) - len(page), len(chunk))
                    if any(task["predictions"] for task in page):  # (the docstring says why)
                        page = self._api_chunk(where(chunk), project_id, chunk[0], chunk[-1])
                    if page:  # (a range of ids may hold none of its tasks)
                        yield page
            return

        def fetch(start: int) -> list[dict]:
            chunk = ids[start:start + page_size]
            return self._api_chunk(where(chunk), project_id, chunk[0], chunk[-1])

        # task API: EXPORT_IN_FLIGHT chunks asked for at a time (parsed by the SDK, here), yielded in order
        starts = iter(range(0, len(ids), page_size))
        with ThreadPoolExecutor(EXPORT_IN_FLIGHT, thread_name_prefix="export") as pool:
            pending = [pool.submit(fetch, start) for start in islice(starts, EXPORT_IN_FLIGHT)]
            try:
                while pending:
                    page = pending.pop(0).result()
                    pending += [pool.submit(fetch, start) for start in islice(starts, 1)]  # the next chunk, if any
                    if page:  # a range of ids holding none of this project's tasks gives none
                        yield page
            finally:
                for future in pending:  # the caller stopped early, or a chunk failed for good: ask for no more
                    future.cancel()

    def _api_chunk(self, action: str, project_id: int, first: int, last: int) -> list[dict]:
        """The tasks with ids first..last, with annotations and predictions, from the Data Manager's task API (its
        pages read and retried by `_pages`)."""
        plain = lambda items: [x if isinstance(x, dict) else x.model_dump() for x in items or []]
        query = json.dumps({"filters": {"conjunction": "and", "items": [
            {"filter": "filter:tasks:id", "operator": "greater_or_equal", "type": "Number", "value": first},
            {"filter": "filter:tasks:id", "operator": "less_or_equal", "type": "Number", "value": last}]}})
        out = [{"id": t.id, "data": t.data, "meta": t.meta or {}, "annotations": plain(t.annotations),
                "predictions": plain(t.predictions)}
               for page in self._pages(action, project=project_id, fields="all", query=query) for t in page]
        return sorted(out, key=lambda t: t["id"])

    def _id_span(self, project_id: int) -> tuple[int, int, int, bool]:
        """(lowest task id, highest task id, number of tasks, whether the server serves from one process) of a
        project, from two one-task pages of the Data Manager (ordered by id both ways), asked for at once."""
        def probe(order: str) -> tuple[int, int, bool]:
            def ask():  # a fresh connection (CLOSE says why)
                response = self._web().get("/api/tasks", headers=CLOSE, params={
                    "project": project_id, "page": 1, "page_size": 1, "fields": "task_only", "include": "id",
                    "query": json.dumps({"ordering": [order]})})
                _raise_for_status(response)
                return response.json(), one_process(response.headers)
            try:
                body, serial = self._read(f"find the task ids of project {project_id}", ask)
                tasks, total = body.get("tasks") or [], int(body.get("total") or 0)
                return int(tasks[0]["id"]) if tasks else 0, total, serial
            except (ValueError, TypeError, KeyError, AttributeError, IndexError):
                raise ServerError(f"Label Studio's task list of project {project_id} is not what it should be") from None
        with ThreadPoolExecutor(2, thread_name_prefix="ids") as pool:
            (first, total, serial), (last, _, _) = pool.map(probe, ("tasks:id", "-tasks:id"))
        return (first, last, total if first and last >= first else 0, serial)

    def _export_bodies(self, project_id: int, ids: list[int], where: str, on_sent=lambda: None) -> list[bytes]:
        """The JSON bytes of Label Studio's export of these tasks, retried, in halves when the request line is too
        long (HTTP 414; gunicorn's limit: 4,094 bytes; 500 ids: 7,000); `on_sent`: once a request is sent."""
        params = [("exportType", "JSON"), ("download_all_tasks", "true")] + [("ids[]", str(i)) for i in ids]

        def ask() -> bytes:
            response = self._web().get(f"/api/projects/{project_id}/export", params=params, headers=CLOSE,
                                       extensions=sent_trace(on_sent))
            if response.status_code == 414:
                raise _RequestTooLong()
            _raise_for_status(response)
            return response.content
        try:
            return [self._read(where, ask)]
        except _RequestTooLong:
            if (half := len(ids) // 2) == 0:
                raise ServerError(f"{where}: the server refuses even one task id in the request (HTTP 414)") from None
            log.info("%s: HTTP 414 (request line too long); asking for %d ids at a time", where, half)
            return [b for part in (ids[:half], ids[half:]) for b in self._export_bodies(project_id, part, where, on_sent)]

    def _export_tasks(self, project_id: int, bodies: list[bytes]) -> list[dict]:  # the tasks in the export's bytes
        try:
            return [{"id": int(t["id"]), "data": t.get("data") or {}, "meta": t.get("meta") or {},
                     "annotations": t.get("annotations") or [], "predictions": t.get("predictions") or []}
                    for body in bodies for t in json.loads(body)]
        except (ValueError, TypeError, KeyError, AttributeError):
            raise ServerError(f"Label Studio's export of project {project_id} is not the JSON it should be") from None

    def export_tasks(self, project_id: int) -> list[dict]:
        """All tasks with their annotations (and predictions) as plain dicts."""
        return [task for page in self.full_task_pages(project_id) for task in page]

    def download_export(self, project_id: int, path: Path) -> Path:
        """Label Studio's own JSON export of all tasks, written to `path`."""
        from evalstudio.base.files import open_output

        with self._call(f"export project {project_id} as JSON"), open_output(path, "wb") as f:
            for chunk in self.sdk.projects.exports.download_sync(project_id, export_type="JSON", download_all_tasks=True):
                f.write(chunk)
        return path

    def connect_ml_backend(self, project_id: int, url: str, basic_auth: str | None = None,
                           title: str = "evalstudio") -> tuple[int, bool]:
        """Register an ML backend with a project (once per URL; the credentials are renewed when it exists) and
        give the project's /webhook to the backend the same basic auth. Returns (backend id, created)."""
        auth = {}
        if basic_auth:
            user, _, password = basic_auth.partition(":")
            auth = dict(auth_method="BASIC_AUTH", basic_auth_user=user, basic_auth_pass=password)
        with self._call(f"connect the ML backend {url} to project {project_id}"):
            existing = next((b for b in self.sdk.ml.list(project=project_id) if b.url.rstrip("/") == url.rstrip("/")), None)
            if existing is not None:
                if auth:  # Label Studio 1.23.2 checks an update like a new backend: it needs URL and project (else 500)
                    self.sdk.ml.update(existing.id, url=existing.url, project=project_id, **auth)
                backend_id, created = existing.id, False
            else:
                backend_id, created = self.sdk.ml.create(project=project_id, url=url, title=title, is_interactive=False,
                                                         **auth).id, True
            # Label Studio creates the backend's annotation webhook (URL/webhook) without auth headers
            if basic_auth:
                header = {"Authorization": basic_auth_header(basic_auth)}
                hook_url = url.rstrip("/") + "/webhook"
                for hook in self.sdk.webhooks.list(project=str(project_id)):
                    if hook.url.rstrip("/") == hook_url:
                        self.sdk.webhooks.update(hook.id, url=hook.url, headers=header)
        return backend_id, created

    @staticmethod
    def require_prefill(project: Project) -> None:
        """Predictions are model-assisted labelling: refused unless the project opts in (prefill: true)."""
        if isinstance(project.prefill, str):
            raise ServerError(
                f"{project.name}: prefill is {project.prefill} in projects.yaml: the prediction shown is that LLM "
                "judge's (`evalstudio judge --to-label-studio`), not the ML backend's")
        if not project.prefill:
            raise ServerError(
                f"{project.name}: prefill is off in projects.yaml, so evalstudio creates no predictions: in Label Studio a "
                "prediction fills the annotator's answer controls (anchoring). The model outputs stay in the tasks for "
                f"the analysis. For model-assisted labelling set `prefill: true` under projects.{project.name}.")

    def request_predictions(self, project_id: int, task_ids: list[int]) -> None:
        """Ask Label Studio to fetch predictions for these tasks from the project's ML backend."""
        with self._call(f"request predictions for {len(task_ids)} tasks of project {project_id}"):
            self.sdk.actions.create(id="retrieve_tasks_predictions", project=project_id,
                                    selected_items={"all": False, "included": task_ids})

    def prefill(self, project_id: int, batch_size: int = 25, on_progress=None) -> tuple[int, int]:
        """Request predictions for the tasks that have none yet (so re-running adds no duplicates).
        Returns (tasks with a prediction, tasks)."""
        have = self.predictions(project_id)
        todo = sorted(task_id for task_id, predictions in have.items() if not predictions)
        for start in range(0, len(todo), batch_size):
            self.request_predictions(project_id, todo[start:start + batch_size])
            if on_progress:
                on_progress(min(start + batch_size, len(todo)), len(todo))
        have = self.predictions(project_id)
        return sum(1 for predictions in have.values() if predictions), len(have)

    def delete_tasks(self, project_id: int, task_ids: list[int]) -> None:
        """Delete these tasks of the project (Data Manager action `delete_tasks`)."""
        for start in range(0, len(task_ids), 1000):
            chunk = task_ids[start:start + 1000]
            with self._call(f"delete {len(chunk)} tasks of project {project_id}"):
                self.sdk.actions.create(id="delete_tasks", project=project_id,
                                        selected_items={"all": False, "included": chunk})

    def put_prediction(self, task_id: int, result: list[dict], model_version: str, score: float | None,
                       replacing: int | None = None) -> None:
        """Store one prediction of a task (an LLM judge's answer), or replace the earlier one of the same model
        version (`replacing`: its id), so that running the same judge again stores no second one."""
        fields = {"result": result, "model_version": model_version, **({"score": score} if score is not None else {})}
        with self._call(f"store the prediction {model_version} of task {task_id}"):
            if replacing is None:
                self.sdk.predictions.create(task=task_id, **fields)
            else:
                self.sdk.predictions.update(replacing, **fields)

    def predictions(self, project_id: int) -> dict[int, list[dict]]:
        """Task id -> its predictions."""
        return {t["id"]: t["predictions"] for page in self.full_task_pages(project_id, "list predictions") for t in page}

    def users(self) -> dict[int, str]:
        """User id -> email, to name annotators."""
        users = self._read("list users", lambda: list(self.sdk.users.list()))
        # Label Studio answers "Deleted" for every member removed from the organisation: keep them apart
        # (participants.with_closed_named puts back the names of the participants evalstudio closed)
        return {u.id: (f"removed user {u.id}" if u.email == "Deleted" else u.email or u.username) for u in users}

    def import_tasks(self, project_id: int, tasks: list[dict | str]) -> list[int]:
        """Send one batch, once: a failed import may still have landed (see importing.send_batch). A task is a dict,
        or its JSON text as the import's validation pass serialised it.

        The same request as the SDK's `projects.import_tasks`, with the body serialised by the json module: the
        SDK's encoder walks every value of every task in Python, which cost more than a second per 10,000 tasks."""
        action = f"import {len(tasks)} tasks into project {project_id}"
        body = ("[" + ",".join(t if isinstance(t, str) else json.dumps(t, ensure_ascii=False, allow_nan=False)
                               for t in tasks) + "]").encode("utf-8")
        with self._call(action):
            response = self._web().post(f"/api/projects/{project_id}/import", params={"return_task_ids": "true"},
                                        content=body, headers={"Content-Type": "application/json"})
            _raise_for_status(response)
        try:
            return [int(i) for i in response.json().get("task_ids") or []]
        except (ValueError, TypeError, AttributeError):
            raise ServerError(f"Label Studio answered something unexpected while trying to {action}") from None

    def _web(self) -> httpx.Client:
        """A plain HTTP client for the requests the SDK makes slowly (one per Client, kept alive)."""
        with self._plain_lock:  # an import may send batches from two threads
            if self._plain is None:
                self._plain = httpx.Client(base_url=self._base, timeout=self._timeout, headers=self._auth)
            return self._plain
