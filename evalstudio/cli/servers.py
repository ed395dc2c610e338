"""Commands that run servers: server (Label Studio) and demo (Label Studio, ML backend and sample data)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Annotated, Optional
from urllib.parse import urlsplit

import typer

from evalstudio.base.errors import EvalstudioError
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import DEFAULT_DATA_DIR
from evalstudio.labelstudio.server import LocalServer

from .base import REPO_EXAMPLES, ProjectsOption, fail_with, load_registry, app, console
from evalstudio.operations.reading import import_with_progress

DATABASE_URL_ENV = "EVALSTUDIO_DATABASE_URL"


@app.command()
def server(
    data_dir: Annotated[Path, typer.Option(help="Where Label Studio keeps its SQLite database and files.")] = DEFAULT_DATA_DIR,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8080,
    database_url: Annotated[Optional[str], typer.Option(
        envvar=DATABASE_URL_ENV,
        help="Keep Label Studio's data in PostgreSQL instead: postgresql://user:password@host:port/name (the database "
             f"must exist). With a password, set it in ${DATABASE_URL_ENV} instead: a command line is visible to "
             "every local user.")] = None,
    workers: Annotated[int, typer.Option(
        help="Serve Label Studio with this many gunicorn worker processes (a study with many participants at once, "
             "best with PostgreSQL); 1: Label Studio's own one-process server.", min=1, max=32)] = 1,
):
    """Run a local Label Studio (SQLite in DATA_DIR, or PostgreSQL with --database-url) until Ctrl-C.

    The login and API token are generated on first start and kept in DATA_DIR/credentials.json; the URL
    and token for other evalstudio commands go to DATA_DIR/evalstudio.env. The server lets an ML backend
    on loopback be reached (ML_BLOCK_LOCAL_IP=false, SSRF_PROTECTION_ENABLED=false): local use only."""
    try:
        if database_url and os.environ.get(DATABASE_URL_ENV) != database_url and urlsplit(database_url).password:
            raise EvalstudioError(f"--database-url: do not put a password on the command line (every local user sees it "
                                  f"in `ps`); set {DATABASE_URL_ENV} instead")
        local = LocalServer(data_dir, port, database_url=database_url, workers=workers)
        with console.status("starting Label Studio (first start takes about a minute)..."):
            local.start()
    except (EvalstudioError, ValueError) as e:
        raise fail_with(e)
    _serve(local)


@app.command()
def demo(
    data_dir: Annotated[Path, typer.Option(help="Where Label Studio keeps its data (reused on the next run).")] = DEFAULT_DATA_DIR,
    port: Annotated[int, typer.Option(help="Label Studio port on 127.0.0.1.")] = 8080,
    ml_port: Annotated[int, typer.Option(help="ML backend port on 127.0.0.1.")] = 9090,
    examples: Annotated[Path, typer.Option(help="Folder with one sub-folder of sample files per protocol.")] = REPO_EXAMPLES,
    wait: Annotated[bool, typer.Option(help="Keep serving until Ctrl-C (--no-wait: stop after the set-up).")] = True,
    projects: ProjectsOption = None,
):
    """Start a local Label Studio and the ML backend, create the projects of the nine shipped protocols (twelve
    Label Studio projects: CMV and Circa come in parts, Circa's Part II in two lists) and import the shipped real sample
    data. Answers start empty: predictions are made only for projects with `prefill: true`."""
    local = LocalServer(data_dir, port)
    backend = None
    try:
        reg = load_registry(projects)
        with console.status("starting Label Studio (first start takes about a minute)..."):
            local.start()
        client = Client(local.settings())
        backend = _start_ml_backend(local, ml_port, projects)
        for project in reg:
            files = sorted(f for f in (examples / project.study_name).glob("*")
                           if f.suffix in {".jsonl", ".csv", ".tsv", ".xml"})
            report = import_with_progress(project, files, client)
            prefilled = "answers start empty"
            if project.prefill is True:  # model-assisted labelling, only where projects.yaml opts in
                client.connect_ml_backend(report.project_id, backend.url, backend.auth)
                prefilled = f"{client.prefill(report.project_id)[0]} prefilled"
            console.print(f"{project.name:11} {report.created:4} created, {report.already_present:4} already present, "
                          f"{prefilled} -> {local.url}/projects/{report.project_id}")
    except EvalstudioError as e:
        _stop(backend, local)
        raise fail_with(e)
    if wait:
        _serve(local, backend)
    else:
        _stop(backend, local)


def _start_ml_backend(local: LocalServer, port: int, projects: Path | None):
    """`evalstudio ml-backend` as a child process, with the local server's URL and key for the learner."""
    import os
    import subprocess
    import sys
    from types import SimpleNamespace

    from evalstudio.base.credentials import ML_AUTH_ENV, ML_AUTH_FILE, ml_auth
    from evalstudio.labelstudio.server import wait_healthy

    auth = ml_auth(local.data_dir / ML_AUTH_FILE, create=True)
    env = {**os.environ, "LABEL_STUDIO_URL": local.url, "LABEL_STUDIO_API_KEY": local.credentials().api_key,
           ML_AUTH_ENV: auth}
    command = [sys.executable, "-m", "evalstudio.cli", "ml-backend", "--port", str(port),
               "--model-dir", str(local.data_dir / "models")] + (["--projects", str(projects)] if projects else [])
    log = open(local.data_dir / "ml-backend.log", "ab")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, 60, process, "the ML backend")
    except EvalstudioError as e:
        process.terminate()
        raise EvalstudioError(f"{e}; see {local.data_dir / 'ml-backend.log'}") from None
    return SimpleNamespace(process=process, url=url, auth=auth)


def _stop(backend, local: LocalServer | None = None) -> None:
    """Stop the ML backend and Label Studio together (both are asked first, then waited for)."""
    import subprocess

    running = backend is not None and backend.process.poll() is None
    if running:
        backend.process.terminate()
    if local is not None:
        local.stop()
    if running:
        try:
            backend.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            backend.process.kill()
            backend.process.wait()


def _serve(local: LocalServer, backend=None) -> None:
    creds = local.credentials()
    stop = {"now": False}
    # Ctrl-C (SIGINT) and SIGTERM both stop. Set explicitly, before "Press Ctrl-C" is shown: a process started
    # in the background by a non-interactive shell inherits SIGINT as ignored, and Python keeps it so.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.update(now=True))
    console.print(
        f"\nLabel Studio is running at {local.url}" + (f" (ML backend at {backend.url})" if backend else "") + "\n"
        f"  login: {creds.username}  (password in {local.data_dir / 'credentials.json'})\n"
        f"  for other commands: set -a; . {local.data_dir / 'evalstudio.env'}; set +a\n"
        "Next: open a project and click Label All Tasks (answers start empty; model outputs stay hidden);\n"
        "      then `evalstudio report PROTOCOL` for agreement and human-vs-model plots.\n"
        "Press Ctrl-C to stop."
    )
    try:
        while not stop["now"] and local.process and local.process.poll() is None:
            time.sleep(0.5)
    finally:
        console.print("stopping Label Studio...")
        _stop(backend, local)
