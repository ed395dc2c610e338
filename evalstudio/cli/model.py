"""Commands on the ML backend: ml-backend, connect, prefill, train, generate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from evalstudio.base.credentials import ML_AUTH_FILE
from evalstudio.base.errors import BadInput, EvalstudioError
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import DEFAULT_DATA_DIR, settings_from_env

from .base import ProjectsOption, fail_with, load_registry, app, console, err


@app.command("ml-backend")
def ml_backend(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 9090,
    host: Annotated[str, typer.Option(help="Interface to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    model_dir: Annotated[Path, typer.Option(help="Where trained learners and job files are kept.")] = DEFAULT_DATA_DIR / "models",
    basic_auth_file: Annotated[Optional[Path], typer.Option(
        help="File holding the basic-auth 'user:password' every request must carry (default: ml-backend.auth next to "
             "--model-dir, created with a random password on first start; $EVALSTUDIO_ML_BASIC_AUTH wins).")] = None,
    workers: Annotated[int, typer.Option(min=1, help="gunicorn worker processes (8 threads each).")] = 2,
    dev: Annotated[bool, typer.Option("--dev", help="Use Flask's single-process development server instead of gunicorn.")] = False,
    projects: ProjectsOption = None,
):
    """Run the ML backend that prefills every protocol (label-studio-ml; predictor per project in projects.yaml) and
    writes missing judged outputs (`evalstudio generate`).

    Every request but /health needs HTTP basic auth; `connect` gives Label Studio the same credentials (from the same
    file or $EVALSTUDIO_ML_BASIC_AUTH). Secrets are never taken from the command line.

    Serves with gunicorn (the WSGI entry is evalstudio.ml_backend.wsgi:app). A Label Studio on the same machine
    can reach a backend on loopback only with ML_BLOCK_LOCAL_IP=false and SSRF_PROTECTION_ENABLED=false (set by
    `evalstudio server`). The learner retrains when Label Studio sends annotation webhooks; it reads
    LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY to fetch the annotations."""
    from ..ml_backend.serving import backend_app, serve_backend

    try:
        flask_app, where = backend_app(model_dir, basic_auth_file, projects)
    except (EvalstudioError, ValueError) as e:
        raise fail_with(e)
    console.print(f"ML backend on http://{host}:{port} (models in {model_dir}; basic auth required, credentials in {where})",
                  soft_wrap=True, highlight=False)
    serve_backend(flask_app, host, port, workers, dev)


@app.command()
def connect(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    url: Annotated[str, typer.Option(help="URL of the ML backend as Label Studio can reach it.")] = "http://127.0.0.1:9090",
    basic_auth_file: Annotated[Optional[Path], typer.Option(
        help="The backend's credentials file (default: .evalstudio/ml-backend.auth, as `evalstudio ml-backend` writes "
             "it; $EVALSTUDIO_ML_BASIC_AUTH wins).")] = None,
    projects: ProjectsOption = None,
):
    """Register the ML backend with the protocol's Label Studio project, with the backend's basic auth for
    predictions and for the annotation webhook (once; running it again renews the credentials)."""
    from evalstudio.base.credentials import ml_auth
    from evalstudio.labelstudio.connection import check_url

    try:
        try:
            url = check_url(url, "--url")
        except EvalstudioError as e:  # a wrong option: a usage error
            raise BadInput(str(e)) from None
        parts = load_registry(projects).parts(protocol)
        for project in parts:
            Client.require_prefill(project)
        basic_auth = ml_auth(basic_auth_file or DEFAULT_DATA_DIR / ML_AUTH_FILE)
        client = Client(settings_from_env())
        connected = []
        for project in parts:
            connected.append((project, *client.connect_ml_backend(client.require_project(project), url, basic_auth)))
    except EvalstudioError as e:
        raise fail_with(e)
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
        parts = load_registry(projects).parts(protocol)
        for project in parts:  # every part of a study (circa) must opt in before any is prefilled
            Client.require_prefill(project)
        client = Client(settings_from_env())
        counts = []
        for project in parts:
            project_id = client.require_project(project)
            with Progress(TextColumn(f"prefilling {project.name}"), BarColumn(), MofNCompleteColumn(),
                          TimeRemainingColumn(), console=err, transient=True) as progress:
                bar = progress.add_task(project.name, total=None)
                counts.append((project, *client.prefill(
                    project_id, batch_size, lambda done, todo: progress.update(bar, completed=done, total=todo))))
    except EvalstudioError as e:
        raise fail_with(e)
    for project, with_prediction, total in counts:
        console.print(f"{project.name}: {with_prediction} of {total} task(s) have predictions "
                      "(tasks without model outputs get none; the backend log says why).")


@app.command()
def train(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. dialogue.")],
    model_dir: Annotated[Path, typer.Option(help="The ML backend's --model-dir.")] = DEFAULT_DATA_DIR / "models",
    projects: ProjectsOption = None,
):
    """Train the learner predictor on the project's submitted annotations (the backend also retrains on each
    annotation webhook) and save it where the ML backend loads it."""
    from ..ml_backend.model import fetch_annotated_tasks
    from ..ml_backend.predictors import LearnerPredictor, NoPrediction

    try:
        project = load_registry(projects).entry(protocol)  # an entry with lists: one learner, trained on every list
        summary = LearnerPredictor(model_dir).train(project, fetch_annotated_tasks(project, settings_from_env()))
    except (EvalstudioError, NoPrediction) as e:
        raise fail_with(e)
    console.print(f"{protocol}: trained {summary['version']} on {summary['tasks']} annotated task(s); "
                  f"controls: {', '.join(f'{c} ({n})' for c, n in summary['controls'].items())}")


@app.command()
def generate(
    protocol: Annotated[str, typer.Argument(help="Protocol name: cmv (ToM values) or circa (Part II explanations).")],
    files: Annotated[list[Path], typer.Argument(help="Input files in the protocol's native format.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write the completed records to "
                                         "(JSONL for cmv, CSV for circa); import it with `evalstudio import`.")],
    ml_url: Annotated[str, typer.Option(help="URL of the evalstudio ML backend.")] = "http://127.0.0.1:9090",
    batch_size: Annotated[int, typer.Option(min=1, max=32, help="Records per request to the backend.")] = 4,
    basic_auth_file: Annotated[Optional[Path], typer.Option(
        help="The backend's credentials file (default: .evalstudio/ml-backend.auth; $EVALSTUDIO_ML_BASIC_AUTH wins).")] = None,
    price_in: Annotated[Optional[float], typer.Option(help="Price per million prompt tokens, for the cost.")] = None,
    price_out: Annotated[Optional[float], typer.Option(help="Price per million answer tokens.")] = None,
    projects: ProjectsOption = None,
):
    """Have the ML backend's LLM write the model outputs annotators judge where FILES lack them, and write every
    record (complete ones unchanged) to OUTPUT.

    CMV: the ToM values of the post and of the persuasive comment (e.g. threads read from XML). Circa: the
    explanation of Part II rows whose explanation cell is empty. What the model writes is shown read-only in the
    item, never in an answer control; the import records the model in the task's meta (tom_generated_by,
    explanation_generated_by). Nothing is written unless every record was completed and is valid.

    The backend uses EVALSTUDIO_LLM_BASE_URL, EVALSTUDIO_LLM_MODEL and EVALSTUDIO_LLM_API_KEY (set them where
    `evalstudio ml-backend` runs); its requests are retried on 429, 5xx and timeouts, and its answers cached in its
    model folder, so running the same generate again asks the LLM nothing it asked before. Its basic auth is read from the file it writes (or $EVALSTUDIO_ML_BASIC_AUTH);
    credentials are never taken from the command line."""
    from evalstudio.base.credentials import ml_auth
    from evalstudio.protocols.mapping import importer_for
    from evalstudio.tasks.generation import BackendClient, generate_files

    try:
        parts = [p for p in load_registry(projects).parts(protocol) if p.generate]
        if not parts:
            raise BadInput(f"{protocol} has nothing for a model to generate; protocols with generated outputs: "
                                  f"{', '.join(sorted({p.study_name for p in load_registry(projects) if p.generate}))}")
        project = parts[0]
        backend = BackendClient(ml_url, ml_auth(basic_auth_file or DEFAULT_DATA_DIR / ML_AUTH_FILE))
        with Progress(TextColumn(f"generating {project.generate} for {project.name}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=err, transient=True) as progress:
            bar = progress.add_task(project.name, total=None)
            done = generate_files(project, importer_for(project), files, output, backend, batch_size,
                                  lambda n, total: progress.update(bar, completed=n, total=total))
    except EvalstudioError as e:
        raise fail_with(e)
    spent = backend.usage
    if spent["requests"] or spent["cached"]:
        cost = (spent["tokens_in"] / 1e6 * (price_in or 0) + spent["tokens_out"] / 1e6 * (price_out or 0)
                if price_in is not None or price_out is not None else None)
        console.print(f"the LLM was asked {spent['requests']} time(s), {spent['cached']} answer(s) came from its "
                      f"cache; {spent['tokens_in']} tokens in, {spent['tokens_out']} out"
                      + (f", cost {cost:.4f}" if cost is not None else ""), highlight=False)
    if done.output is None:
        console.print(f"all {done.records} record(s) already have their {project.generate}; nothing written.")
    else:
        console.print(f"{done.generated} of {done.records} record(s) completed by {done.model_version}; all written to "
                      f"{done.output}.\nNext: evalstudio import {protocol} {done.output}")
