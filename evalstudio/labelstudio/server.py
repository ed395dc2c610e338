"""Start a local Label Studio (SQLite in a data directory, or a PostgreSQL database) with a generated login
and API token."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx

from evalstudio.base.credentials import private_dir, write_private
from evalstudio.base.errors import ServerError

from .connection import Settings, shown_url

CREDENTIALS = "credentials.json"
DOTENV = "evalstudio.env"
STARTING = "starting"  # in the data folder while `evalstudio server` starts Label Studio: {"pid", "url"}
# Let a Label Studio on this machine call an ML backend on loopback. For local demos and tests only:
# these turn off Label Studio's protection against requests to private addresses.
LOOPBACK_ML_ENV = {"ML_BLOCK_LOCAL_IP": "false", "SSRF_PROTECTION_ENABLED": "false"}
# Label Studio's settings with SQLite made fit for concurrent annotators. Label Studio opens SQLite with Python's
# 5 s busy timeout and deferred transactions; several participants saving at once then get "database is locked"
# errors, and one that comes after an annotation is stored but before Label Studio releases the participant's lock
# on the task keeps that task from its last annotator for a day (TASK_LOCK_TTL). Write-ahead logging lets readers
# and the writer work at once, IMMEDIATE transactions wait for the write lock instead of failing, and 30 s of
# waiting outlasts a busy moment. Written into the data folder at every start (it imports Label Studio's own
# settings, so it works with whichever Label Studio installation runs it).
# Label Studio reports errors to HumanSignal's Sentry (server and browser) and collects usage analytics by default;
# a study server holds participants' data, so the servers evalstudio starts send nothing unless these are set.
PRIVATE_ENV = {"SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "", "COLLECT_ANALYTICS": "false"}
SETTINGS_MODULE = "evalstudio_label_studio_settings"
SETTINGS_SOURCE = '''"""Written by evalstudio at every start of this Label Studio: its settings, SQLite made fit for concurrency."""
# Label Studio's settings read Django's settings while they load (for Sentry): what they read must be here first
from core.settings.base import *  # noqa: F401,F403,E402
SENTRY_DSN = get_env("SENTRY_DSN", "")  # noqa: F405
from label_studio.core.settings.label_studio import *  # noqa: F401,F403,E402

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"].setdefault("OPTIONS", {}).update({  # noqa: F405
        "timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"})
'''


def _git_ceiling() -> dict[str, str]:
    """GIT_CEILING_DIRECTORIES for Label Studio: its version info runs `git describe`, `git show`, `git log` and
    `git branch --contains` in its own package folder at every export request (and Data Manager page), and an
    installation inside a git checkout (a virtualenv in the researcher's repository, as `make install` makes it)
    gives git the researcher's repository: five git commands a request (measured: 20 ms of the 80 ms a one-task
    export request costs), and its commit, message and branch written into the info file Label Studio keeps of
    every export. With the folder above Label Studio's package as a ceiling, git finds no repository there and
    Label Studio reads its own version file instead."""
    import importlib.util

    spec = importlib.util.find_spec("label_studio")
    if spec is None or not spec.origin:
        return {}
    ceiling = str(Path(spec.origin).resolve().parent.parent)
    current = os.environ.get("GIT_CEILING_DIRECTORIES")
    return {"GIT_CEILING_DIRECTORIES": f"{current}:{ceiling}" if current else ceiling}


@dataclass(frozen=True)
class Credentials:
    """The local server's admin account: username, password and API key."""
    username: str
    password: str
    api_key: str


def answers(url: str) -> bool:
    """True when GET url/health answers 200."""
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_healthy(url: str, timeout: float, process: subprocess.Popen | None = None, what: str = "the server") -> None:
    """Wait until url/health answers; ServerError if `process` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServerError(f"{what} exited with code {process.returncode}")
        if answers(url):
            return
        time.sleep(0.5)
    raise ServerError(f"{what} did not answer on {url} within {timeout:.0f} s")


def postgres_env(database_url: str) -> dict[str, str]:
    """Label Studio's settings for postgresql://user:password@host:port/name (DJANGO_DB=default, POSTGRE_*)."""
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    if parts.scheme not in {"postgres", "postgresql"} or not parts.hostname or not name:
        raise ValueError(f"database URL {shown_url(database_url)!r} is not of the form "
                         "postgresql://user:password@host:port/name")
    return {"DJANGO_DB": "default", "POSTGRE_NAME": unquote(name), "POSTGRE_USER": unquote(parts.username or ""),
            "POSTGRE_PASSWORD": unquote(parts.password or ""), "POSTGRE_HOST": parts.hostname,
            "POSTGRE_PORT": str(parts.port or 5432)}


def label_studio_executable() -> str:
    """The `label-studio` command next to this Python, else on PATH."""
    found = shutil.which("label-studio", path=str(Path(sys.executable).parent)) or shutil.which("label-studio")
    if not found:
        raise ServerError("the Label Studio server is not installed. Install it with: pip install 'evalstudio[server]'")
    return found


class LocalServer:
    """A Label Studio server run by evalstudio on this machine (its data folder, port and log)."""
    def __init__(self, data_dir: Path, port: int = 8080, host: str = "127.0.0.1",
                 allow_loopback_ml: bool = True, extra_env: dict[str, str] | None = None,
                 database_url: str | None = None, workers: int = 1):
        """database_url: postgresql://... to keep Label Studio's data in PostgreSQL instead of
        SQLite in data_dir (the database must exist; Label Studio creates its tables). workers > 1: Label Studio is
        served by that many gunicorn worker processes (after `label-studio start` has set the database up), as a
        study with many participants at once should run it; `label-studio start` alone is one process."""
        if not 1 <= workers <= 32:
            raise ServerError(f"--workers {workers}: give 1 to 32 worker processes")
        self.workers = workers
        self.data_dir = Path(data_dir).resolve()
        self.database_env = postgres_env(database_url) if database_url else {}
        self.database_url = database_url
        self.port = port
        self.host = host
        self.allow_loopback_ml = allow_loopback_ml
        self.extra_env = extra_env or {}
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The server's base URL (http://host:port)."""
        return f"http://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where the server's output is logged, in its data folder."""
        return self.data_dir / "label-studio.log"

    def credentials(self) -> Credentials:
        """Load the data directory's login, creating it on first use (the database keeps it afterwards)."""
        path = self.data_dir / CREDENTIALS
        if path.is_file():
            return Credentials(**json.loads(path.read_text(encoding="utf-8")))
        creds = Credentials("admin@evalstudio.local", secrets.token_urlsafe(12), secrets.token_hex(20))
        write_private(path, json.dumps(creds.__dict__, indent=2))
        return creds

    def settings(self) -> Settings:
        """The connection settings for this server: its URL and the admin's API key."""
        return Settings(self.url, self.credentials().api_key)

    def healthy(self) -> bool:
        """Whether something answers Label Studio's health check at the URL."""
        return answers(self.url)

    def start(self, timeout: float = 300) -> "LocalServer":
        """Start Label Studio (own process group, admin account) and wait up to `timeout` s until it answers."""
        if self.healthy():
            raise ServerError(f"something already answers on {self.url}; choose another --port")
        creds = self.credentials()
        env = {
            **PRIVATE_ENV,  # before the environment: a researcher who wants the reports sets them
            **os.environ,
            "LABEL_STUDIO_BASE_DATA_DIR": str(self.data_dir),
            "LABEL_STUDIO_USERNAME": creds.username,
            "LABEL_STUDIO_PASSWORD": creds.password,
            "LABEL_STUDIO_USER_TOKEN": creds.api_key,
            # Label Studio >= 1.22 ignores a preset token unless legacy tokens are enabled at first start.
            "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
            "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
            **(LOOPBACK_ML_ENV if self.allow_loopback_ml else {}),
            **self.database_env,
            **_git_ceiling(),
            **self.extra_env,
        }
        private_dir(self.data_dir)  # 0700: the database, its token and the logs are this user's alone
        if not self.database_env:
            env.update(self._sqlite_settings(env))
        log = open(self.log_path, "ab")
        self.log_path.chmod(0o600)
        command = [label_studio_executable(), "start", "--no-browser", "--port", str(self.port),
                   "--internal-host", self.host, "--data-dir", str(self.data_dir / "label-studio")]
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True, umask=0o077)
        log.close()
        # other commands started meanwhile (`evalstudio server &` then `evalstudio import`) wait for this one
        # (connection.settings_from_env) instead of failing on the settings it has not written yet
        marker = self.data_dir / STARTING
        write_private(marker, json.dumps({"pid": os.getpid(), "url": self.url}))
        try:
            wait_healthy(self.url, timeout, self.process, "Label Studio")
            if self.workers > 1:
                self._serve_with_workers(env)
                wait_healthy(self.url, timeout, self.process, "Label Studio's workers")
        except ServerError as e:
            self.stop()
            raise ServerError(f"{e}:\n{self.log_tail()}") from None
        finally:
            if self.healthy():
                self.write_dotenv()
            marker.unlink(missing_ok=True)
        return self

    def _serve_with_workers(self, env: dict[str, str]) -> None:
        """Replace the set-up server (`label-studio start`: migrations, the login and its token, then Django's
        one-process server) by gunicorn with `workers` processes of Label Studio's WSGI application, which serves
        the same routes, front-end files included."""
        import label_studio

        self.stop()
        package = str(Path(label_studio.__file__).resolve().parent)
        env = {"DJANGO_SETTINGS_MODULE": "label_studio.core.settings.label_studio", **env}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), package) if p)
        log = open(self.log_path, "ab")
        # gthread workers: a request waiting on the database does not hold a whole process
        command = [sys.executable, "-m", "gunicorn", "label_studio.core.wsgi:application", "--workers",
                   str(self.workers), "--threads", "4", "--worker-class", "gthread", "--bind",
                   f"{self.host}:{self.port}", "--timeout", "120", "--log-level", "warning"]
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True, umask=0o077)
        log.close()

    def _sqlite_settings(self, env: dict[str, str]) -> dict[str, str]:
        """The environment that makes Label Studio use SETTINGS_MODULE (written into the data folder)."""
        folder = self.data_dir / "settings"
        folder.mkdir(mode=0o700, exist_ok=True)
        write_private(folder / f"{SETTINGS_MODULE}.py", SETTINGS_SOURCE)
        path = os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH", "")) if p)
        return {"DJANGO_SETTINGS_MODULE": SETTINGS_MODULE, "PYTHONPATH": path}

    def stop(self) -> None:
        """Stop the server this object started (its process group: SIGTERM, then SIGKILL after 20 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass

    def write_dotenv(self) -> Path:
        """LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY for other evalstudio commands (file readable by the owner only);
        with PostgreSQL also EVALSTUDIO_LEDGER_URL, so that the study's ledger (evalstudio.crowd.ledger) lives in the same
        database as Label Studio's data."""
        path = self.data_dir / DOTENV
        ledger = f"EVALSTUDIO_LEDGER_URL={self.database_url}\n" if self.database_url else ""
        write_private(path, f"LABEL_STUDIO_URL={self.url}\nLABEL_STUDIO_API_KEY={self.credentials().api_key}\n{ledger}")
        return path

    def log_tail(self, lines: int = 30) -> str:
        """The log's last `lines` lines (for an error message), or '(no log)'."""
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
