"""The one place that talks to Label Studio (through label-studio-sdk)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from label_studio_sdk import LabelStudio
from label_studio_sdk.core.api_error import ApiError

from .errors import ServerError
from .importing import ID_FIELD
from .registry import Project

PAGE_SIZE = 1000


@dataclass(frozen=True)
class Settings:
    url: str
    api_key: str

    def __repr__(self) -> str:  # never show the key
        return f"Settings(url={self.url!r}, api_key='***')"


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a .env file (quotes stripped, comments ignored)."""
    values = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                values[key.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return values


DEFAULT_DATA_DIR = Path(".evalstudio")
DOTENV_FILES = (Path(".env"), DEFAULT_DATA_DIR / "evalstudio.env")


def settings_from_env(dotenv_files: tuple[Path, ...] = DOTENV_FILES) -> Settings:
    """LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY from the environment, else from ./.env, else from the
    file a local `evalstudio server` writes (.evalstudio/evalstudio.env)."""
    file_values: dict[str, str] = {}
    for path in reversed(dotenv_files):
        file_values.update(read_dotenv(path))
    url = os.environ.get("LABEL_STUDIO_URL") or file_values.get("LABEL_STUDIO_URL")
    key = os.environ.get("LABEL_STUDIO_API_KEY") or file_values.get("LABEL_STUDIO_API_KEY")
    missing = [n for n, v in (("LABEL_STUDIO_URL", url), ("LABEL_STUDIO_API_KEY", key)) if not v]
    if missing:
        raise ServerError(
            f"{' and '.join(missing)} not set. Export them or put them in ./.env "
            "(a local server started with `evalstudio server` writes .evalstudio/evalstudio.env for you)."
        )
    return Settings(url.rstrip("/"), key)


@contextmanager
def _translated(url: str, action: str):
    """Turn SDK/HTTP failures into ServerError messages a user can act on."""
    try:
        yield
    except httpx.ConnectError:
        raise ServerError(f"cannot reach Label Studio at {url} while trying to {action}. Is it running?") from None
    except httpx.TimeoutException:
        raise ServerError(f"Label Studio at {url} timed out while trying to {action}") from None
    except ApiError as e:
        detail = e.body.get("detail") if isinstance(e.body, dict) else e.body
        if isinstance(e.body, dict) and e.body.get("validation_errors"):
            detail = f"{detail}: {e.body['validation_errors']}"
        if e.status_code == 401:
            detail = f"{detail}. Check LABEL_STUDIO_API_KEY"
        raise ServerError(f"Label Studio refused to {action} (HTTP {e.status_code}): {detail}") from None


class Client:
    def __init__(self, settings: Settings, timeout: float = 120.0):
        self.url = settings.url
        self.sdk = LabelStudio(base_url=settings.url, api_key=settings.api_key, timeout=timeout)

    def _call(self, action: str):
        return _translated(self.url, action)

    def find_project(self, title: str) -> int | None:
        with self._call("list projects"):
            for p in self.sdk.projects.list(page_size=100):
                if p.title == title:
                    return p.id
        return None

    def require_project(self, project: Project) -> int:
        """Id of the project titled like `project`; ServerError naming the fix when there is none."""
        project_id = self.find_project(project.title)
        if project_id is None:
            raise ServerError(f"no project titled '{project.title}' on {self.url}; run `evalstudio setup` or `import` first")
        return project_id

    def ensure_project(self, project: Project) -> tuple[int, str]:
        """Create the project, or bring an existing one (same title) up to date.

        Returns (id, status) with status "created", "updated" or "unchanged"."""
        fields = dict(
            label_config=project.label_config,
            expert_instruction=project.instructions,
            show_instruction=True,
            maximum_annotations=project.annotators_per_task,
            description=f"evalstudio protocol: {project.name}",
        )
        project_id = self.find_project(project.title)
        if project_id is None:
            with self._call(f"create project '{project.title}'"):
                return self.sdk.projects.create(title=project.title, **fields).id, "created"
        with self._call(f"update project '{project.title}'"):
            current = self.sdk.projects.get(id=project_id)
            changed = {k: v for k, v in fields.items() if getattr(current, k, None) != v}
            if changed:
                self.sdk.projects.update(id=project_id, **changed)
        return project_id, "updated" if changed else "unchanged"

    def project(self, project_id: int):
        with self._call(f"read project {project_id}"):
            return self.sdk.projects.get(id=project_id)

    def tasks(self, project_id: int) -> Iterator:
        """All tasks of a project, page by page."""
        with self._call(f"list tasks of project {project_id}"):
            yield from self.sdk.tasks.list(project=project_id, page_size=PAGE_SIZE, fields="task_only")

    def task_ids(self, project_id: int) -> set[str]:
        """evalstudio ids of the tasks already in a project."""
        return {t.data.get(ID_FIELD) for t in self.tasks(project_id) if t.data.get(ID_FIELD)}

    def _full_tasks(self, project_id: int, action: str) -> list[dict]:
        """All tasks with annotations and predictions as plain dicts (the layout of a JSON export), page by page."""
        plain = lambda items: [x if isinstance(x, dict) else x.model_dump() for x in items or []]
        with self._call(f"{action} of project {project_id}"):
            return [{"id": t.id, "data": t.data, "annotations": plain(t.annotations), "predictions": plain(t.predictions)}
                    for t in self.sdk.tasks.list(project=project_id, page_size=PAGE_SIZE, fields="all")]

    def export_tasks(self, project_id: int) -> list[dict]:
        """All tasks with their annotations (and predictions) as plain dicts."""
        return self._full_tasks(project_id, "export tasks")

    def download_export(self, project_id: int, path: Path) -> Path:
        """Label Studio's own JSON export of all tasks, written to `path`."""
        with self._call(f"export project {project_id} as JSON"), open(path, "wb") as f:
            for chunk in self.sdk.projects.exports.download_sync(project_id, export_type="JSON", download_all_tasks=True):
                f.write(chunk)
        return path

    def connect_ml_backend(self, project_id: int, url: str, basic_auth: str | None = None,
                           title: str = "evalstudio") -> tuple[int, bool]:
        """Register an ML backend with a project (once per URL). Returns (backend id, created)."""
        with self._call(f"connect the ML backend {url} to project {project_id}"):
            for backend in self.sdk.ml.list(project=project_id):
                if backend.url.rstrip("/") == url.rstrip("/"):
                    return backend.id, False
            auth = {}
            if basic_auth:
                user, _, password = basic_auth.partition(":")
                auth = dict(auth_method="BASIC_AUTH", basic_auth_user=user, basic_auth_pass=password)
            backend = self.sdk.ml.create(project=project_id, url=url, title=title, is_interactive=False, **auth)
            return backend.id, True

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

    def predictions(self, project_id: int) -> dict[int, list[dict]]:
        """Task id -> its predictions."""
        return {t["id"]: t["predictions"] for t in self._full_tasks(project_id, "list predictions")}

    def users(self) -> dict[int, str]:
        """User id -> email, to name annotators."""
        with self._call("list users"):
            return {u.id: u.email or u.username for u in self.sdk.users.list()}

    def import_tasks(self, project_id: int, tasks: list[dict]) -> list[int]:
        with self._call(f"import {len(tasks)} tasks into project {project_id}"):
            response = self.sdk.projects.import_tasks(id=project_id, request=tasks, return_task_ids=True)
        return list(response.task_ids or [])
