"""`evalstudio` command line."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from . import importers, registry
from .client import DEFAULT_DATA_DIR, Client, settings_from_env
from .errors import EvalstudioError, InvalidInput
from .importing import import_files, scan
from .server import LocalServer

app = typer.Typer(
    help="Published human-evaluation protocols (sotopia, cmv, circa, dialogue, health) as ready-to-run "
    "Label Studio projects.\n\nConnects to Label Studio with LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY "
    "(environment, ./.env, or the file `evalstudio server` writes).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)
REPO_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

ProjectsOption = Annotated[
    Optional[Path],
    typer.Option("--projects", help="projects.yaml to use (default: $EVALSTUDIO_PROJECTS, ./projects.yaml, packaged copy)."),
]


@app.callback()
def _main():
    # retries and skipped tasks are logged as warnings; show them as one readable line each
    import logging

    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")


def _fail(error: Exception) -> typer.Exit:
    err.print(f"[bold red]error:[/] {error}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(1 if not isinstance(error, InvalidInput) else 2)


def _load(projects: Path | None) -> registry.Registry:
    return registry.load(projects)


@app.command("projects")
def list_projects(projects: ProjectsOption = None):
    """List the protocols in projects.yaml with their Label Studio projects (Circa has two: Part I and Part II),
    criteria and whether model predictions prefill the answers (checks every labeling config)."""
    try:
        reg = _load(projects)
    except EvalstudioError as e:
        raise _fail(e)
    table = Table("protocol", "project", "title", "criteria", "annotators/task", "prefill", title=str(reg.path))
    for p in reg:
        table.add_row(p.study_name, p.name if p.study else "", p.title, ", ".join(p.criteria), str(p.annotators_per_task),
                      "on (model-assisted)" if p.prefill else "off")
    console.print(table)


@app.command()
def setup(
    names: Annotated[Optional[list[str]], typer.Argument(help="Protocols to set up (default: all).")] = None,
    projects: ProjectsOption = None,
):
    """Create the Label Studio projects from projects.yaml, or update them (idempotent)."""
    try:
        reg = _load(projects)
        client = Client(settings_from_env())
        chosen = [p for n in names for p in reg.parts(n)] if names else list(reg)
        table = Table("protocol", "project id", "status", "tasks")
        for p in chosen:
            pid, status = client.ensure_project(p)
            table.add_row(p.name, str(pid), status, str(client.project(pid).task_number or 0))
    except EvalstudioError as e:
        raise _fail(e)
    console.print(table)


@app.command()
def validate(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    files: Annotated[list[Path], typer.Argument(help="Input files in the protocol's native format.")],
    projects: ProjectsOption = None,
):
    """Dry run: check every record of FILES and report all problems as file:line: field: message."""
    try:
        reg = _load(projects)
        results = {p.name: scan(p, importers.get(p.importer), files) for p in reg.parts(protocol)}
    except EvalstudioError as e:
        raise _fail(e)
    problems = list(dict.fromkeys(problem for r in results.values() for problem in r.problems))
    if problems:
        raise _fail(InvalidInput(problems))
    counts = ", ".join(f"{r.tasks} for {name}" for name, r in results.items()) if len(results) > 1 else \
        f"{next(iter(results.values())).tasks}"
    console.print(f"{counts} task(s) valid for '{protocol}' in {len(files)} file(s).")


@app.command("import")
def import_(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    files: Annotated[list[Path], typer.Argument(help="Input files in the protocol's native format.")],
    batch_size: Annotated[int, typer.Option(min=1, help="Tasks per request to Label Studio.")] = 500,
    projects: ProjectsOption = None,
):
    """Validate FILES, then import them as tasks (creating the project if needed).

    Nothing is imported if any record is invalid. Tasks already in the project (same id) are skipped,
    so running the same import twice adds nothing."""
    try:
        reg = _load(projects)
        parts = reg.parts(protocol)
        if len(parts) > 1:  # a study of several projects: every part valid before any is imported
            problems = list(dict.fromkeys(pr for p in parts for pr in scan(p, importers.get(p.importer), files).problems))
            if problems:
                raise InvalidInput(problems)
        client = Client(settings_from_env())
        reports = [(project, _import(project, files, client, batch_size)) for project in parts]
    except EvalstudioError as e:
        raise _fail(e)
    for project, report in reports:
        console.print(f"{project.name}: {report.created} task(s) created, {report.already_present} already present "
                      f"(project id {report.project_id}).")


def _import(project, files, client, batch_size=500):
    with Progress(TextColumn(f"importing {project.name}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err, transient=True) as progress:
        bar = progress.add_task(project.name, total=None)
        return import_files(project, importers.get(project.importer), files, client, batch_size,
                            on_progress=lambda done, total: progress.update(bar, completed=done, total=total))


def _project_tasks(project, from_export: Path | None, project_id: int | None = None):
    """(tasks, users) from a Label Studio JSON export file, or live from the server."""
    from .exporters.tidy import read_export

    if from_export:
        return read_export(from_export), {}
    client = Client(settings_from_env())
    project_id = project_id or client.require_project(project)
    with console.status(f"exporting {project.name} from {client.url}..."):
        return client.export_tasks(project_id), client.users()


def _single(parts, option: str, value) -> None:
    if value is not None and len(parts) > 1:
        raise EvalstudioError(f"{option} reads one Label Studio project; name one part: "
                              f"{', '.join(p.name for p in parts)}")


ProjectIdOption = Annotated[Optional[int], typer.Option(
    help="Read this Label Studio project (e.g. a second run of the protocol) instead of the one titled as in projects.yaml.")]
FromExport = Annotated[Optional[Path], typer.Option("--from-export", help="Read a Label Studio JSON export file instead of the server.")]


@app.command()
def export(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="CSV file to write.")] = Path("annotations.csv"),
    from_export: FromExport = None,
    project_id: ProjectIdOption = None,
    projects: ProjectsOption = None,
):
    """Write all annotations (skipped ones flagged) as one tidy CSV: project, task_id, item_id, system,
    annotator, criterion, value, annotation_id, created_at, lead_time, cancelled, agent, rationale.

    Live exports are read page by page (1000 tasks per request, each retried on transient failures) and
    written as they arrive, so memory stays flat however large the project is."""
    from .exporters.tidy import annotation_frame, write_annotation_csv

    try:
        parts = _load(projects).parts(protocol)
        _single(parts, "--from-export", from_export)
        _single(parts, "--project-id", project_id)
        if from_export:
            tasks, users = _project_tasks(parts[0], from_export)
            frame = annotation_frame(tasks, parts[0], users)
            frame.to_csv(output, index=False)
            rows, annotations = len(frame), frame["annotation_id"].nunique()
        else:
            client = Client(settings_from_env())
            users = client.users()
            rows = annotations = 0
            for number, project in enumerate(parts):  # a study's parts go to one CSV (column `project`)
                pid = project_id or client.require_project(project)
                with Progress(TextColumn(f"exporting {project.name}"), BarColumn(), MofNCompleteColumn(),
                              TimeRemainingColumn(), console=err, transient=True) as progress:
                    bar = progress.add_task(project.name, total=client.task_count(pid))
                    r, a = write_annotation_csv(client.full_task_pages(pid), project, users, output,
                                                on_page=lambda n: progress.advance(bar, n), append=number > 0)
                rows, annotations = rows + r, annotations + a
    except EvalstudioError as e:
        raise _fail(e)
    console.print(f"{rows} rows ({annotations} annotations) written to {output}")


@app.command()
def report(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. circa.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for index.html and the CSVs.")] = Path("report"),
    from_export: FromExport = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap resamples for confidence intervals.")] = 1000,
    min_control_accuracy: Annotated[Optional[float], typer.Option(
        help="Circa: leave out annotators whose Part I accuracy on control questions is below this "
             "(default: min_control_accuracy in projects.yaml, 0.5 for circa; 0 keeps everyone).")] = None,
    exclude_prefilled: Annotated[bool, typer.Option(
        "--exclude-prefilled", help="Leave out values accepted unchanged from a model prediction (prefill opt-in); "
        "without it the report refuses to compute agreement and alignment on them.")] = False,
    keep_bad_instances: Annotated[bool, typer.Option(
        "--keep-bad-instances", help="CMV: keep items an annotator marked as a bad instance (left out by default).")] = False,
    project_id: ProjectIdOption = None,
    projects: ProjectsOption = None,
):
    """Agreement (per criterion, by its scale), human-vs-model alignment, plots and annotator QC as a
    self-contained HTML page plus CSVs. For a study of several projects (circa) both parts go into one report."""
    import pandas as pd

    from .exporters.report import build_report
    from .exporters.tidy import annotation_frame, model_frame

    try:
        reg = _load(projects)
        parts = reg.parts(protocol)
        _single(parts, "--from-export", from_export)
        _single(parts, "--project-id", project_id)
        tasks, frames, models, users = [], [], [], {}
        for project in parts:
            part_tasks, part_users = _project_tasks(project, from_export, project_id)
            users.update(part_users)
            tasks += part_tasks
            frames.append(annotation_frame(part_tasks, project, part_users))
            models.append(model_frame(part_tasks, project))
        with console.status("computing statistics..."):
            page = build_report(reg.study(protocol), tasks, output, users, n_boot=bootstrap,
                                min_control_accuracy=min_control_accuracy, annotations=pd.concat(frames, ignore_index=True),
                                model=pd.concat(models, ignore_index=True), exclude_prefilled=exclude_prefilled,
                                keep_bad_instances=keep_bad_instances)
    except EvalstudioError as e:
        raise _fail(e)
    console.print(f"report written to {page}")


@app.command("ml-backend")
def ml_backend(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 9090,
    host: Annotated[str, typer.Option(help="Interface to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    model_dir: Annotated[Path, typer.Option(help="Where trained learners and job files are kept.")] = DEFAULT_DATA_DIR / "models",
    basic_auth: Annotated[Optional[str], typer.Option(help="Require HTTP basic auth 'user:password' (give the same to `connect`).")] = None,
    workers: Annotated[int, typer.Option(min=1, help="gunicorn worker processes (8 threads each).")] = 2,
    dev: Annotated[bool, typer.Option("--dev", help="Use Flask's single-process development server instead of gunicorn.")] = False,
    projects: ProjectsOption = None,
):
    """Run the ML backend that prefills every protocol (label-studio-ml; predictor per project in projects.yaml).

    Serves with gunicorn (the WSGI entry is evalstudio.ml_backend.wsgi:app). A Label Studio on the same machine
    can reach a backend on loopback only with ML_BLOCK_LOCAL_IP=false and SSRF_PROTECTION_ENABLED=false (set by
    `evalstudio server`). The learner retrains when Label Studio sends annotation webhooks; it reads
    LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY to fetch the annotations."""
    import logging
    import os

    if projects:
        os.environ["EVALSTUDIO_PROJECTS"] = str(projects.resolve())
    os.environ["EVALSTUDIO_MODEL_DIR"] = str(model_dir.resolve())
    if basic_auth:
        os.environ["EVALSTUDIO_ML_BASIC_AUTH"] = basic_auth
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    from .ml_backend.app import create_app

    try:
        _load(projects)
        flask_app = create_app(basic_auth)
    except (EvalstudioError, ValueError) as e:
        raise _fail(e)
    console.print(f"ML backend on http://{host}:{port} (models in {model_dir})")
    if dev:
        from werkzeug.serving import WSGIRequestHandler

        WSGIRequestHandler.protocol_version = "HTTP/1.1"  # keep-alive: no new TCP connection per prediction
        flask_app.run(host=host, port=port, threaded=True)
        return
    from gunicorn.app.base import BaseApplication

    class Server(BaseApplication):
        def load_config(self):
            for key, value in {"bind": f"{host}:{port}", "workers": workers, "worker_class": "gthread", "threads": 8,
                               "timeout": 120, "loglevel": "info"}.items():
                self.cfg.set(key, value)

        def load(self):
            return flask_app

    Server().run()


@app.command()
def connect(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    url: Annotated[str, typer.Option(help="URL of the ML backend as Label Studio can reach it.")] = "http://127.0.0.1:9090",
    basic_auth: Annotated[Optional[str], typer.Option(help="'user:password' if the backend requires it.")] = None,
    projects: ProjectsOption = None,
):
    """Register the ML backend with the protocol's Label Studio project (once; running it again is harmless)."""
    try:
        parts = _load(projects).parts(protocol)
        for project in parts:
            Client.require_prefill(project)
        client = Client(settings_from_env())
        connected = []
        for project in parts:
            connected.append((project, *client.connect_ml_backend(client.require_project(project), url, basic_auth)))
    except EvalstudioError as e:
        raise _fail(e)
    for project, backend_id, created in connected:
        console.print(f"{project.name}: ML backend {url} {'connected' if created else 'already connected'} (id {backend_id})")


@app.command()
def prefill(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    batch_size: Annotated[int, typer.Option(min=1, help="Tasks per request.")] = 20,
    projects: ProjectsOption = None,
):
    """Model-assisted labelling (only for projects with `prefill: true` in projects.yaml): ask the connected ML
    backend for predictions on every task that has none yet, in batches; annotators then see the model's values in
    their answer controls and can change them. The export flags values accepted unchanged."""
    try:
        [project] = _load(projects).parts(protocol)[:1]
        Client.require_prefill(project)
        client = Client(settings_from_env())
        project_id = client.require_project(project)
        with Progress(TextColumn(f"prefilling {protocol}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=err, transient=True) as progress:
            bar = progress.add_task(protocol, total=None)
            with_prediction, total = client.prefill(project_id, batch_size,
                                                    lambda done, todo: progress.update(bar, completed=done, total=todo))
    except EvalstudioError as e:
        raise _fail(e)
    console.print(f"{protocol}: {with_prediction} of {total} task(s) have predictions "
                  "(tasks without model outputs get none; the backend log says why).")


@app.command()
def train(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. dialogue.")],
    model_dir: Annotated[Path, typer.Option(help="The ML backend's --model-dir.")] = DEFAULT_DATA_DIR / "models",
    projects: ProjectsOption = None,
):
    """Train the learner predictor on the project's submitted annotations (the backend also retrains on each
    annotation webhook) and save it where the ML backend loads it."""
    from .ml_backend.model import fetch_annotated_tasks
    from .ml_backend.predictors import LearnerPredictor, NoPrediction

    try:
        project = _load(projects).get(protocol)
        summary = LearnerPredictor(model_dir).train(project, fetch_annotated_tasks(project, settings_from_env()))
    except (EvalstudioError, NoPrediction) as e:
        raise _fail(e)
    console.print(f"{protocol}: trained {summary['version']} on {summary['tasks']} annotated task(s); "
                  f"controls: {', '.join(f'{c} ({n})' for c, n in summary['controls'].items())}")


@app.command()
def server(
    data_dir: Annotated[Path, typer.Option(help="Where Label Studio keeps its SQLite database and files.")] = DEFAULT_DATA_DIR,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8080,
    database_url: Annotated[Optional[str], typer.Option(
        help="Keep Label Studio's data in PostgreSQL instead: postgresql://user:password@host:port/name "
             "(the database must exist).")] = None,
):
    """Run a local Label Studio (SQLite in DATA_DIR, or PostgreSQL with --database-url) until Ctrl-C.

    The login and API token are generated on first start and kept in DATA_DIR/credentials.json; the URL
    and token for other evalstudio commands go to DATA_DIR/evalstudio.env. The server lets an ML backend
    on loopback be reached (ML_BLOCK_LOCAL_IP=false, SSRF_PROTECTION_ENABLED=false): local use only."""
    try:
        local = LocalServer(data_dir, port, database_url=database_url)
        with console.status("starting Label Studio (first start takes about a minute)..."):
            local.start()
    except (EvalstudioError, ValueError) as e:
        raise _fail(e)
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
    """Start a local Label Studio and the ML backend, create all five projects, import the shipped real sample
    data and prefill the model outputs it carries as predictions."""
    local = LocalServer(data_dir, port)
    backend = None
    try:
        reg = _load(projects)
        with console.status("starting Label Studio (first start takes about a minute)..."):
            local.start()
        client = Client(local.settings())
        backend = _start_ml_backend(local, ml_port, projects)
        for project in reg:
            files = sorted(f for f in (examples / project.study_name).glob("*")
                           if f.suffix in {".jsonl", ".csv", ".tsv", ".xml"})
            report = _import(project, files, client)
            prefilled = "answers start empty"
            if project.prefill:  # model-assisted labelling, only where projects.yaml opts in
                client.connect_ml_backend(report.project_id, backend.url)
                prefilled = f"{client.prefill(report.project_id)[0]} prefilled"
            console.print(f"{project.name:11} {report.created:4} created, {report.already_present:4} already present, "
                          f"{prefilled} -> {local.url}/projects/{report.project_id}")
    except EvalstudioError as e:
        _stop(backend, local)
        raise _fail(e)
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

    from .server import wait_healthy

    env = {**os.environ, "LABEL_STUDIO_URL": local.url, "LABEL_STUDIO_API_KEY": local.credentials().api_key}
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
    return SimpleNamespace(process=process, url=url)


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
        f"\nLabel Studio is running at [bold]{local.url}[/]" + (f" (ML backend at {backend.url})" if backend else "") + "\n"
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


if __name__ == "__main__":
    app()
