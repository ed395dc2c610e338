"""Commands for running a crowd study: participants, status, approvals."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from evalstudio.base.errors import BadInput, EvalstudioError, printable
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import settings_from_env

from evalstudio.operations import status as study_status
from evalstudio.operations.reading import participant_rows, time_left_text
from evalstudio.operations.waiting import WAIT_SECONDS

from .base import ProjectsOption, WaitOption, fail_with, load_registry, app, console, err

participants_app = typer.Typer(
    help="Crowd participants as Label Studio accounts (Label Studio Community has no crowd integration).",
    no_args_is_help=True)
app.add_typer(participants_app, name="participants")


StudyOption = Annotated[Optional[str], typer.Option(
    "--study", help="The study (the protocol its gateway serves): each study has its own participants, in the "
                    "participants folder (the first study's ledger in the folder, every other one's in "
                    "FOLDER/STUDY). Without it: the ledger in the folder itself.")]


def _study_ledger(folder: Path | None, study: str | None, shared: bool = False, claim: bool = False) -> Path:
    from evalstudio.crowd import participants

    root = folder or participants.DEFAULT_FOLDER
    return participants.study_folder(root, study, shared, claim) if study or shared else root


@participants_app.command("add")
def participants_add(
    sources: Annotated[list[str], typer.Argument(
        help="Participant ids, or files of them: one id per line, or a CSV with a participant_id / WorkerId column "
             "(Prolific's and MTurk's exports).")],
    folder: Annotated[Optional[Path], typer.Option(
        "--folder", "--participants", help="Private folder (0700) for the study's ledger (ledger.sqlite3: accounts, "
        "passwords, sessions and answers, 0600) and sign_in.csv (default: .evalstudio/participants).")] = None,
    public_url: Annotated[Optional[str], typer.Option(
        help="The address participants open, if not LABEL_STUDIO_URL (e.g. behind a reverse proxy).")] = None,
    gateway_url: Annotated[Optional[str], typer.Option(
        help="The address of `evalstudio gateway` (what participants open in a crowd study): the sign-in sheet "
             "then gives each participant a personal gateway link instead of a Label Studio password.")] = None,
    study: StudyOption = None,
    shared_pool: Annotated[bool, typer.Option(
        "--shared-pool", help="Add them to the folder's pool shared by every study (as the gateway's "
                              "--shared-pool).")] = False,
    projects: ProjectsOption = None,
):
    """Create a Label Studio account per participant id, idempotently.

    Each account is <id>@participants.invalid with a generated password, so every annotation names its
    participant. Passwords stay in a private file; sign_in.csv has one personal sign-in message per participant
    to send through Prolific or MTurk. Running it again with more ids creates only the new accounts."""
    from evalstudio.crowd import participants
    from evalstudio.labelstudio.connection import check_url

    try:
        try:
            gateway_url = check_url(gateway_url, "--gateway-url") if gateway_url is not None else None
            public_url = check_url(public_url, "--public-url") if public_url is not None else None
        except EvalstudioError as e:  # a wrong option: a usage error
            raise BadInput(str(e)) from None
        ids = participants.read_ids(sources)
        client = Client(settings_from_env())
        if study is not None:
            load_registry(projects).parts(study)  # a study of projects.yaml (a miss lists them)
        target = _study_ledger(folder, study, shared_pool, claim=True)
        with Progress(TextColumn("creating accounts"), BarColumn(), MofNCompleteColumn(), console=err,
                      transient=True) as bar:
            task = bar.add_task("accounts", total=len(ids))
            added = participants.add(client, ids, target, lambda done, total: bar.update(task, completed=done),
                                     gateway_url=gateway_url)
        if public_url:
            participants.write_sheet(target, None, public_url, gateway_url)
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(f"{len(added.created)} account(s) created, {len(added.present)} already present; passwords in "
                  f"the study's ledger ({target / participants.ACCOUNTS_FILE}), sign-in messages in "
                  f"{target / participants.SHEET_FILE}",
                  highlight=False)
    if added.foreign:
        err.print(f"warning: {len(added.foreign)} account(s) existed before evalstudio created them (their password "
                  f"is not known, so they are not in the sign-in sheet): {', '.join(added.foreign[:10])}",
                  highlight=False)


@participants_app.command("link")
def participants_link():
    """Print the organisation's invite link: anyone with it can sign up (use `add` to control who)."""
    try:
        client = Client(settings_from_env())
        token = client.invite_token()
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(f"{client.url}/user/signup/?token={token}", highlight=False, soft_wrap=True)


@participants_app.command("close")
def participants_close(
    ids: Annotated[list[str], typer.Argument(help="Participant ids (as given to `add`).")],
    folder: Annotated[Optional[Path], typer.Option(
        "--folder", "--participants", help="The folder `add` wrote (default: .evalstudio/participants).")] = None,
    study: StudyOption = None,
):
    """Stop participants from getting more tasks: their accounts leave the Label Studio organisation (Label
    Studio's "remove member"; they can no longer open any project). Their annotations stay and count. For a
    quota reached, `status --close-finished` does this by itself."""
    from evalstudio.crowd import participants

    try:
        now, before = participants.close(Client(settings_from_env()), ids, _study_ledger(folder, study))
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(f"{len(now)} participant(s) closed" + (f", {len(before)} closed before" if before else ""),
                  highlight=False)


@participants_app.command("backup")
def participants_backup(
    destination: Annotated[Path, typer.Argument(help="A new file for the copy (it holds passwords: keep it private).")],
    folder: Annotated[Optional[Path], typer.Option(
        "--folder", "--participants", help="The folder `add` wrote (default: .evalstudio/participants).")] = None,
    study: StudyOption = None,
):
    """Copy the study's ledger (participants, sign-in codes, sessions, served tasks and answers with their measured
    times, lists) to a new file, consistently, while gateways keep running. Restore by putting the copy back as
    ledger.sqlite3 in the participants folder with every gateway stopped."""
    from evalstudio.crowd import ledger, participants

    try:
        target = _study_ledger(folder, study)
        if not participants.has_ledger(target):
            raise BadInput(f"{target}: no study ledger here (run `participants add` or the gateway first)")
        ledger.open_ledger(target).backup(destination)
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(f"ledger copied to {destination}", highlight=False)


# --- status and approvals -----------------------------------------------------------------------------------------


FolderOption = Annotated[Optional[Path], typer.Option(
    "--participants", help="The folder `participants add` wrote (default: .evalstudio/participants), to name "
                           "participants by their platform id.")]


@app.command()
def status(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. dialogue.")],
    from_export: Annotated[Optional[Path], typer.Option(help="Read a Label Studio JSON export instead of the server.")] = None,
    project_id: Annotated[Optional[int], typer.Option(help="Read this Label Studio project instead of the one titled "
                                                           "as in projects.yaml.")] = None,
    participants_folder: FolderOption = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Also write participants.csv, coverage.csv "
                                                                          "and status.html to this folder.")] = None,
    close_finished: Annotated[bool, typer.Option(
        "--close-finished", help="Take participants who have reached their quota (crowd.per_participant) out of "
                                 "the Label Studio organisation, so that the stream gives them no more tasks "
                                 "(accounts made by `participants add` only; their annotations stay).")] = False,
    watch: Annotated[Optional[float], typer.Option(
        help="Check again every this many seconds until interrupted (Ctrl-C); with --close-finished, this is how a "
             "quota is enforced while a study runs.", min=5)] = None,
    wait: WaitOption = WAIT_SECONDS,
    projects: ProjectsOption = None,
):
    """How far the study is: tasks with 0..N annotations, per participant tasks done, gold accuracy, median time
    and last activity, the time left at the current rate, and warnings (speeders, straight-liners, failed gold,
    over quota, parts done out of order)."""
    import time

    if (close_finished or watch) and from_export is not None:
        raise fail_with(BadInput("--close-finished and --watch need the live server, not --from-export"))
    while True:
        _status_once(protocol, from_export, project_id, participants_folder, output, close_finished, projects, wait)
        if not watch:
            return
        try:
            time.sleep(watch)
        except KeyboardInterrupt:
            return


def _status_once(protocol, from_export, project_id, participants_folder, output, close_finished, projects,
                 wait=WAIT_SECONDS):
    try:
        seen = study_status.look(protocol, from_export, project_id, participants_folder, output, close_finished,
                                 projects, wait)
    except EvalstudioError as e:
        raise fail_with(e)
    _print_status(seen)


def _print_status(seen) -> None:
    """The status on the consoles: coverage, participants, time left, adaptive progress, warnings, tampering."""
    from rich.table import Table

    from evalstudio.crowd import study

    coverage, table, crowd, closed = seen.coverage, seen.table, seen.crowd, seen.closed
    for name, cov in coverage.items():
        grid = Table("annotations", "tasks", title=f"{name}: tasks by number of annotations")
        for k, n in zip(cov["annotations"], cov["tasks"]):
            grid.add_row(str(k), str(n))
        console.print(grid)
    # the warnings are sentences: a column where the terminal has room, else one line each under the table (a
    # narrow column would cut "straight-liner")
    shown = participant_rows(table)
    as_column = console.width >= 120
    people = Table(*(shown.columns if as_column else shown.columns[:-1]), title=f"{len(table)} participant(s)")
    for row in shown.itertuples(index=False):
        people.add_row(*(row if as_column else row[:-1]))
    console.print(people)
    if not as_column:
        for who, warnings in zip(shown["participant"], shown["warnings"]):
            if warnings:
                console.print(f"{who}: {warnings}", highlight=False, soft_wrap=True)
    if seen.front is not None:  # the study's front matter: where each participant is
        import pandas as pd

        steps = Table(*seen.front.columns, title="front matter: " + ", ".join(
            f"{n} {k}" for k, n in seen.front["step"].value_counts().items()))
        for row in seen.front.itertuples(index=False):
            steps.add_row(*(printable("" if pd.isna(v) else str(v)) for v in row))
        console.print(steps)
    console.print(time_left_text(seen.annotations, seen.remaining))
    for line in study_status.adaptive_lines(seen.parts, seen.per_part, seen.folder):
        console.print(line, highlight=False, soft_wrap=True)
    for warning in study.gold_rate_warnings(seen.parts, seen.per_part):
        err.print(f"warning: {warning}", highlight=False)
    if crowd.platform == "prolific" and not crowd.completion_code:
        err.print("warning: no crowd.completion_code in projects.yaml: Prolific participants need one at the end")
    if crowd.bonus and not crowd.bonus.amounts:
        err.print("warning: the study promises a bonus without an amount: set crowd.bonus.amounts in projects.yaml")
    if closed:
        console.print(f"closed {len(closed)} participant(s) who reached the quota of {crowd.per_participant}: "
                      f"{', '.join(closed)}", highlight=False, soft_wrap=True)
    for note in seen.unchecked:
        err.print(f"note: {note}", soft_wrap=True)
    if seen.tampered:  # loudly, last, where it is seen
        from rich.text import Text

        err.print(Text(f"CHANGED SINCE SETUP: {len(seen.tampered)} finding(s); the study's data may have been "
                       "tampered with", style="bold red"), soft_wrap=True)
        for finding in seen.tampered:
            err.print(Text(printable(f"  - {finding}"), style="red"), soft_wrap=True)


@app.command()
def approvals(
    protocol: Annotated[str, typer.Argument(help="Protocol name, e.g. sotopia.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the approval files.")] = Path("approvals"),
    platform: Annotated[Optional[str], typer.Option(
        help="prolific or mturk (default: crowd.platform in projects.yaml).")] = None,
    mturk_results: Annotated[Optional[Path], typer.Option(
        help="MTurk: the batch's results CSV; its Approve/Reject columns are filled for upload.")] = None,
    from_export: Annotated[Optional[Path], typer.Option(help="Read a Label Studio JSON export instead of the server.")] = None,
    project_id: Annotated[Optional[int], typer.Option(help="Read this Label Studio project.")] = None,
    participants_folder: FolderOption = None,
    wait: WaitOption = WAIT_SECONDS,
    projects: ProjectsOption = None,
):
    """Approve / reject (with reason) / bonus per participant, by the study's rules in projects.yaml (crowd:
    gold threshold, bonus rule), as files Prolific or MTurk take for bulk upload. Only failed attention checks
    reject; speeders and straight-liners are listed by `status` for you to decide."""
    from ..exporters.payments.approvals import not_platform_ids

    try:
        decided, chosen, written = study_status.approve(protocol, output, platform, mturk_results, from_export,
                                                        project_id, participants_folder, wait, projects)
    except EvalstudioError as e:
        raise fail_with(e)
    counts = decided["decision"].value_counts()
    console.print(f"{counts.get('approve', 0)} approved, {counts.get('reject', 0)} rejected, "
                  f"{int((decided['bonus'] > 0).sum())} bonus(es); files: {', '.join(str(p) for p in written)}",
                  highlight=False, soft_wrap=True)
    if chosen == "mturk" and mturk_results is None:
        err.print("warning: without --mturk-results the MTurk files have no AssignmentId, which MTurk's Upload CSV "
                  "and `aws mturk send-bonus` need: download the batch's results (Manage, Results, Download CSV) and "
                  "run again with --mturk-results FILE")
    odd = not_platform_ids(decided)
    if odd:
        err.print(f"warning: {len(odd)} participant(s) have an id that is not a {chosen} id and are left out of the "
                  f"{chosen} files (their decisions are in approvals.csv; handle them by hand): "
                  f"{', '.join(repr(p) for p in odd[:10])}", soft_wrap=True)
    if decided["bonus"].isna().any():
        err.print("warning: bonuses are owed but projects.yaml has no amount (crowd.bonus.amounts); they are left "
                  "out of the bonus file")
