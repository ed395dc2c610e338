"""Commands on protocols and their data: projects, setup, validate, import, export, report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from evalstudio.base.errors import BadInput, EvalstudioError, InvalidInput, ServerError
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import settings_from_env
from evalstudio.protocols.judges import unassisted_note
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.scanning import scan

from evalstudio.operations import status as study_status
from evalstudio.operations.importing import import_study, imported_lines
from evalstudio.operations.reading import (file_conditions_note, ledger_check, one_project_for, project_tasks,
                                           study_ledger, sync_lag, user_names)
from evalstudio.operations.reporting import write_report
from evalstudio.operations.waiting import WAIT_SECONDS, say, within

from .base import ProjectsOption, WaitOption, fail_with, load_registry, app, console, err


@app.command("projects")
def list_projects(projects: ProjectsOption = None):
    """List the protocols in projects.yaml with their Label Studio projects (Circa has two: Part I and Part II),
    criteria and whether model predictions prefill the answers (checks every labeling config)."""
    try:
        reg = load_registry(projects)
    except EvalstudioError as e:
        raise fail_with(e)
    table = Table("protocol", "project", "title", "criteria", "annotators/task", "prefill", title=str(reg.path))
    for p in reg:
        table.add_row(p.study_name, p.name if p.study else "", p.title, ", ".join(p.criteria), str(p.annotators_per_task),
                      ((p.prefill if isinstance(p.prefill, str) else "on (model-assisted)")
                       + (f", {p.unassisted_share:g} of tasks unassisted" if p.unassisted_share else ""))
                      if p.prefill else "off")
    console.print(table)


@app.command()
def setup(
    names: Annotated[Optional[list[str]], typer.Argument(help="Protocols to set up (default: all).")] = None,
    projects: ProjectsOption = None,
):
    """Create the Label Studio projects from projects.yaml, or update them (idempotent)."""
    try:
        reg = load_registry(projects)
        client = Client(settings_from_env())
        chosen = [p for n in names for p in reg.parts(n)] if names else list(reg)
        table = Table("protocol", "project id", "status", "tasks")
        for p in chosen:
            pid, status = client.ensure_project(p)
            table.add_row(p.name, str(pid), status, str(client.project(pid).task_number or 0))
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(table)


@app.command()
def validate(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    files: Annotated[list[Path], typer.Argument(help="Input files in the protocol's native format.")],
    projects: ProjectsOption = None,
):
    """Dry run: check every record of FILES and report all problems as file:line: field: message."""
    try:
        reg = load_registry(projects)
        results = {p.name: scan(p, importer_for(p), files) for p in reg.parts(protocol)}
        merged = next(iter(results.values()))
        for result in list(results.values())[1:]:  # a study's parts read the same files: one warning per file
            for path, names in result.unknown.items():
                merged.unknown.setdefault(path, set()).update(names)
        merged.warn_unknown(reg.study(protocol))
    except EvalstudioError as e:
        raise fail_with(e)
    problems = list(dict.fromkeys(problem for r in results.values() for problem in r.problems))
    if problems:  # (a dry run: nothing is ever imported by validate, so the message says what to do instead)
        raise fail_with(InvalidInput(problems, "fix them before importing"))
    files_text = f"{len(files)} file(s)"
    if len(results) > 1:  # a study's projects: one line each ("cmv_tom: 0 valid task(s)")
        console.print(f"Valid task(s) for '{protocol}' in {files_text}:")
        for name, r in results.items():
            console.print(f"  {name}: {r.tasks}")
    else:
        result = next(iter(results.values()))
        checks = (f" ({result.checks} of them attention checks made from the others: attention_checks in "
                  "projects.yaml)") if result.checks else ""
        console.print(f"{result.tasks} valid task(s) for '{protocol}' in {files_text}{checks}.")
    for part in reg.parts(protocol):  # a design only the gateway can serve
        if note := unassisted_note(part):
            console.print(note)


@app.command("import")
def import_(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    files: Annotated[list[Path], typer.Argument(help="Input files in the protocol's native format.")],
    batch_size: Annotated[int, typer.Option(min=1, help="Tasks per request to Label Studio.")] = 500,
    in_flight: Annotated[int, typer.Option(
        "--in-flight", min=1, max=4, help="Batches sent at a time. Label Studio on PostgreSQL imports two at a "
        "time about 20% faster; keep 1 on SQLite (one writer at a time). Only for projects with order: random "
        "(batches in flight together interleave the task ids a sequential project is shown in).")] = 1,
    skip_invalid: Annotated[bool, typer.Option(
        "--skip-invalid", help="Import the valid records and write the rejected ones, with their problems, to "
        "--rejected (by default nothing is imported when any record is invalid).")] = False,
    rejected: Annotated[Path, typer.Option(help="With --skip-invalid: the JSONL file for the rejected records.")] =
        Path("rejected.jsonl"),
    projects: ProjectsOption = None,
):
    """Validate FILES, then import them as tasks (creating the project if needed).

    Nothing is imported if any record is invalid (unless --skip-invalid). Tasks already in the project (same id)
    are skipped, so running the same import twice adds nothing. A project with `prefill: true` and the stored
    predictor gets each task's model outputs as its Label Studio prediction in the same request (no ML backend
    round trip); an entry with counterbalanced lists is imported into each list's project."""
    try:
        imported = import_study(protocol, files, batch_size, in_flight, skip_invalid, rejected, projects)
    except EvalstudioError as e:
        raise fail_with(e)
    for line in imported_lines(imported):
        console.print(line, highlight=False)


ProjectIdOption = Annotated[Optional[int], typer.Option(
    help="Read this Label Studio project (e.g. a second run of the protocol) instead of the one titled as in projects.yaml.")]
FromExport = Annotated[Optional[Path], typer.Option("--from-export", help="Read a Label Studio JSON export file instead of the server.")]


@app.command()
def export(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write (default: annotations.FORMAT).")] = None,
    format: Annotated[str, typer.Option(
        "--format", help="csv (safe to open in a spreadsheet: text cells starting with = + - @ get a leading '), "
        "jsonl or parquet (every value exactly as given).")] = "csv",
    from_export: FromExport = None,
    project_id: ProjectIdOption = None,
    wait: WaitOption = WAIT_SECONDS,
    participants: Annotated[Optional[Path], typer.Option(
        "--participants", help="The participants folder of the study's gateway (default: .evalstudio/participants): "
                               "its ledger decides which annotation is each participant's answer and whether it was "
                               "shown the prediction (from_prediction), what the output still lacks, and gives the "
                               "front matter's answers.")] = None,
    projects: ProjectsOption = None,
):
    """Write all annotations (skipped ones flagged) as one tidy table: project, task_id, item_id, system,
    annotator, criterion, value, annotation_id, created_at, lead_time, cancelled, agent, rationale, ...,
    attention_check_of (on an attention check's rows, the evalstudio_id of the task it copies). A protocol
    with span controls (<Labels>: error spans) also gets one row per span in a second file beside it,
    NAME.spans.FORMAT (annotations.spans.csv): control, region_id, start, end, text, labels and the per-region
    answers. A study with a front matter (projects.yaml crowd: consent, background, exit_survey) also gets its
    participants' background and exit-survey answers, one row per participant and apart from the ratings, in
    NAME.background.FORMAT (annotations.background.csv).

    Live exports are read through Label Studio's export endpoint, up to 998 tasks per request (each retried on
    transient failures), and written as they arrive, so memory stays flat however large the project is. Label
    Studio keeps a copy of what it exports in its data folder (export/), as for its own Export button; delete
    old ones there when disk space matters. (status, approvals, report and prefill read through the task API,
    which leaves no copy.)"""
    from evalstudio.base.files import check_output_file

    from ..exporters.tables.files import FORMATS, write_table
    from evalstudio.values.spans import span_controls

    from ..exporters.tables.tidy import annotation_frame, span_frame, spans_path, write_annotations

    try:
        if format not in FORMATS:
            raise BadInput(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
        output = output or Path(f"annotations.{format}")
        check_output_file(output)
        parts = load_registry(projects).parts(protocol)
        one_project_for(parts, "--from-export", from_export)
        one_project_for(parts, "--project-id", project_id)
        spans = spans_path(output) if any(span_controls(part.interface)[0] for part in parts) else None
        if spans:
            check_output_file(spans)
        if from_export:
            if note := file_conditions_note(parts):
                say(note)
            tasks, users = project_tasks(parts[0], from_export)
            frame = annotation_frame(tasks, parts[0], users)
            write_table(frame, output, format)
            rows, annotations = len(frame), frame["annotation_id"].nunique()
            if spans:
                span_rows = span_frame(tasks, parts[0], users)
                write_table(span_rows, spans, format)
                spans_written = len(span_rows)
        else:
            rows, annotations, spans_written = _export_live(protocol, parts, project_id, output, format, wait, spans,
                                                            participants)
        # the front matter's background and exit-survey answers: a file of their own, apart from the ratings
        background = None if from_export else study_status.write_background(protocol, parts, output, format,
                                                                            participants)
        if not from_export and background is None and (missing := study_status.front_matter_unread(
                protocol, parts, participants)):
            say(f"warning: {missing}")
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(f"{rows} rows ({annotations} annotations) written to {output}")
    if spans:
        console.print(f"{spans_written} spans written to {spans}")
    if background:
        console.print(f"{background[1]} participants' background answers written to {background[0]}")


def _export_live(protocol, parts, project_id, output: Path, format: str, wait: float,
                 spans: Path | None, participants: Path | None = None) -> tuple[int, int, int]:
    """`export` of the live study: (rows, annotations, spans) written to `output` (and the spans to `spans`), once
    Label Studio holds what the gateway acknowledged (or --wait passed: what the output lacks is said after the
    read); given up, and the partial files removed, once Label Studio has not answered for --wait seconds."""
    from ..exporters.tables.tidy import annotation_frame, span_frame, write_annotations

    folder = study_ledger(protocol, participants)
    for line in sync_lag(folder, wait):
        say(f"warning: {line}")
    check = ledger_check(folder)

    def read(beat):
        client = Client(settings_from_env())
        users = user_names(client)
        beat()
        rows = annotations = spans_written = 0
        columns = list(dict.fromkeys(c for part in parts for c in annotation_frame([], part, users).columns))
        span_columns = list(dict.fromkeys(c for part in parts for c in span_frame([], part, users).columns))
        for number, project in enumerate(parts):  # a study's parts go to one CSV (column `project`)
            pid = client.require_protocol(project, project_id) if project_id else client.require_project(project)
            pages = client.full_task_pages(pid, export_endpoint=True)
            if check is not None:  # (annotations that are not the ledger's answer left out; what it lacks, noted)
                pages = (check.keep(page) for page in pages)
            with Progress(TextColumn(f"exporting {project.name}"), BarColumn(), MofNCompleteColumn(),
                          TimeRemainingColumn(), console=err, transient=True) as progress:
                bar = progress.add_task(project.name, total=client.task_count(pid))
                r, a, n = write_annotations(pages, project, users, output,
                                            on_page=lambda n: (progress.advance(bar, n), beat()), append=number > 0,
                                            fmt=format, columns=columns, spans=spans, span_columns=span_columns)
            rows, annotations, spans_written = rows + r, annotations + a, spans_written + n
        return rows, annotations, spans_written

    try:
        written = within(wait, f"exporting {protocol}", read)
    except ServerError as e:
        output.unlink(missing_ok=True)
        if spans is not None:
            spans.unlink(missing_ok=True)
        raise ServerError(f"{e} ({output} removed: it was not complete)") from None
    for line in check.lines() if check is not None else ():
        say(f"warning: {line}")
    return written


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
    exclude_rejected: Annotated[bool, typer.Option(
        "--exclude-rejected", help="Leave out participants `evalstudio approvals` rejects (failed attention checks: "
        "crowd.min_gold_accuracy in projects.yaml).")] = False,
    participants: Annotated[Optional[Path], typer.Option(
        "--participants", help="The participants folder of the study's gateway (default: .evalstudio/participants): "
                               "its ledger gives the study's status, an active design and whether each answer was "
                               "shown the prediction (from_prediction).")] = None,
    project_id: ProjectIdOption = None,
    wait: WaitOption = WAIT_SECONDS,
    projects: ProjectsOption = None,
):
    """Agreement (per criterion, by its scale), human-vs-model alignment, plots and annotator QC as a
    self-contained HTML page plus CSVs. For a study of several projects (circa) both parts go into one report."""
    try:
        page, verdicts = write_report(protocol, output, from_export, bootstrap, min_control_accuracy,
                                      exclude_prefilled, keep_bad_instances, exclude_rejected, participants,
                                      project_id, wait, projects)
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(f"report written to {page}")
    if verdicts:
        console.print(f"LLM judges (the page's section \"LLM judges\", {output / 'judges.csv'}):", soft_wrap=True)
        for line in verdicts:
            console.print(f"  {line}", soft_wrap=True)
