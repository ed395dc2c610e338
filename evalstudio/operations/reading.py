"""What several command groups read and write about a study, below all of them: its items imported with a
progress bar, its projects' tasks and annotations (live from Label Studio or from an export), the study tables
(participants, coverage, what remains) and the status files, the spec a ratings file is read with. The commands
`data` (import, export, report), `servers` (demo) and the other operations (status, analyzing, planning,
publishing) use it. Uses evalstudio.labelstudio, tasks, crowd, readers, exporters.tables and the consoles."""

from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from evalstudio.base.errors import BadInput
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import settings_from_env
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.importing import import_files

from evalstudio.protocols.registry import load as load_registry

from .consoles import console, err
from .waiting import WAIT_SECONDS, LedgerCheck, say, wait_for_sync, within


def import_with_progress(project, files, client, batch_size=500, skip_invalid=False, checked=None, in_flight=1):
    """Import input files into the project's Label Studio project with a progress bar on stderr."""
    with Progress(TextColumn(f"importing {project.name}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err, transient=True) as progress:
        bar = progress.add_task(project.name, total=None)
        return import_files(project, importer_for(project), files, client, batch_size,
                            on_progress=lambda done, total: progress.update(bar, completed=done, total=total),
                            skip_invalid=skip_invalid, checked=checked, in_flight=in_flight)


def user_names(client, folder: Path | None = None) -> dict[int, str]:
    """Label Studio's users, with the e-mails of participants closed out of the organisation put back."""
    from evalstudio.crowd import participants

    return participants.with_closed_named(client.users(), client.url, folder or participants.DEFAULT_FOLDER)


def sync_lag(folder: Path | None, wait: float = WAIT_SECONDS) -> list[str]:
    """Waits up to `wait` seconds for Label Studio to hold what the study's gateway acknowledged (answers and
    accounts are written into it behind the ledger; a line on stderr every few seconds), then says every write Label
    Studio refused, with the reason, and the tasks changed in Label Studio since the gateway recorded what they show.
    (What the output then lacks is said after the read: `LedgerCheck`.)"""
    from evalstudio.crowd import ledger, participants

    folder = Path(folder or participants.DEFAULT_FOLDER)
    if not participants.has_ledger(folder):
        return []
    book = ledger.open_ledger(folder)
    lag = wait_for_sync(book, wait)
    lines = [f"Label Studio refused: {r} (tried again while the gateway runs)" for r in lag.refused]
    changed = book.changed_tasks()
    if changed:
        import datetime

        first = datetime.datetime.fromtimestamp(min(c for _, _, c in changed), datetime.timezone.utc)
        shown = ", ".join(f"{part} task {task}" for part, task, _ in changed[:10]) + (" ..." if len(changed) > 10 else "")
        lines.append(f"{len(changed)} task(s) changed in Label Studio after the gateway recorded what they show "
                     f"(first noticed {first:%Y-%m-%d %H:%M} UTC): {shown}. Participants are still shown the recorded "
                     "version; restore the task in Label Studio, or start the gateway with --accept-changed-tasks "
                     "to show the new one from then on")
    return lines


def ledger_check(folder: Path | None) -> LedgerCheck | None:
    """The study's ledger's answers as a read begins (None: the folder holds no study)."""
    from evalstudio.crowd import participants

    folder = Path(folder or participants.DEFAULT_FOLDER)
    return LedgerCheck(folder) if participants.has_ledger(folder) else None


def project_tasks(project, from_export: Path | None, project_id: int | None = None, folder: Path | None = None,
                  wait: float = WAIT_SECONDS):
    """(tasks, users) from a Label Studio JSON export file, or live from the server (given up once it has not
    answered for `wait` seconds)."""
    from ..exporters.tables.tidy import read_export

    if from_export:
        tasks = read_export(from_export)
        used = {r.get("from_name") for t in tasks for a in t.get("annotations", []) for r in a.get("result", [])}
        known = {c.name for c in project.interface.controls}
        if used and not used & known:
            raise BadInput(f"{from_export}: its annotations use controls ({', '.join(sorted(map(str, used))[:5])}) "
                                  f"that the {project.name} protocol does not have; is it another protocol's export?")
        return tasks, {}
    client = Client(settings_from_env())

    def read(beat):
        pid = client.require_protocol(project, project_id) if project_id else client.require_project(project)
        beat()
        tasks = []
        for page in client.full_task_pages(pid):
            tasks += page
            beat()
        return tasks, user_names(client, folder)

    return within(wait, f"reading {project.name} from {client.url}", read)


def study_ledger(protocol: str, folder: Path | None = None) -> Path:
    """The folder of the study's ledger in the participants folder (default .evalstudio/participants): each study
    has its own (evalstudio.crowd.participants.study_folder)."""
    from evalstudio.crowd import participants

    return participants.study_folder(folder or participants.DEFAULT_FOLDER, protocol)


def file_conditions_note(parts) -> str | None:
    """For a prefilled study read from a Label Studio export file: what its from_prediction rests on there (None:
    no part is prefilled)."""
    if not any(part.prefill for part in parts):
        return None
    return ("note: from_prediction is read from the file, as Label Studio holds it (a parent prediction, or a region "
            "made from one), not from the study's ledger: an answer whose prediction was deleted since (e.g. the judge "
            "run again) and whose pre-marked spans were all removed reads as unassisted there; read the live study "
            "(with --participants) for the ledger's record")


def read_study(protocol, projects, from_export, project_id, folder: Path | None = None, wait: float = WAIT_SECONDS):
    """(registry, parts, tasks of each part, annotation frame of each part, users) of a protocol, read live or from
    a Label Studio export (which holds one project). `folder`: the participants folder. Live, once Label Studio
    holds what the gateway acknowledged (or `wait` seconds passed), and said after the read: what it lacks of the
    ledger's answers; annotations that are not the ledger's answer (written twice) are left out."""
    from ..exporters.tables.tidy import annotation_frame

    reg = load_registry(projects)
    parts = reg.parts(protocol)
    one_project_for(parts, "--from-export", from_export)
    one_project_for(parts, "--project-id", project_id)
    folder = study_ledger(protocol, folder)
    check = None
    if from_export is not None and (note := file_conditions_note(parts)):
        say(note)
    if from_export is None:  # the live study: once Label Studio holds what the gateway acknowledged, or said
        for line in sync_lag(folder, wait):
            say(f"warning: {line}")
        check = ledger_check(folder)
    per_part, frames, users = [], [], {}
    for part in parts:
        tasks, part_users = project_tasks(part, from_export, project_id, folder, wait)
        if check is not None:
            tasks = check.keep(tasks)
        per_part.append(tasks)
        users.update(part_users)
        frames.append(annotation_frame(tasks, part, part_users))
    for line in check.lines() if check is not None else ():
        say(f"warning: {line}")
    return reg, parts, per_part, frames, users


def without_attention_checks(per_part, frames, notes: list[str] | None = None, where: str = "the study"):
    """(tasks, annotation frames) of a study read, without its attention checks (protocols/attention.py: spoiled
    copies of tasks, which `status` and `approvals` score and no analysis counts, as ESA leaves out its BAD items);
    says how many it left out (added to `notes` where given, else printed), in the words `analyze` uses for a file's."""
    from evalstudio.protocols.attention import CHECK_FIELD
    from evalstudio.readers.ratings import attention_checks_note
    from evalstudio.values.results import task_fields

    kept = [[t for t in tasks if CHECK_FIELD not in task_fields(t)] for tasks in per_part]
    left = sum(len(t) for t in per_part) - sum(len(t) for t in kept)
    if not left:
        return per_part, frames
    note = attention_checks_note(left, "task(s)", where)
    if notes is None:
        console.print(note, highlight=False)
    else:
        notes.append(note)
    frames = [f[f["task_id"].isin({t["id"] for t in k})] for f, k in zip(frames, kept)]
    return kept, frames


def study_spans(parts, per_part, users):
    """The spans of a study's parts whose configs mark spans (<Labels>), one table (exporters.tables.tidy.span_frame); None
    when no part does."""
    import pandas as pd

    from evalstudio.values.spans import span_controls

    from ..exporters.tables.tidy import span_frame

    frames = [span_frame(tasks, part, users) for part, tasks in zip(parts, per_part) if span_controls(part.interface)[0]]
    return pd.concat(frames, ignore_index=True) if frames else None


def one_project_for(parts, option: str, value) -> None:
    """Refuse an option that reads one Label Studio project for a study of several parts."""
    if value is not None and len(parts) > 1:
        raise BadInput(f"{option} reads one Label Studio project; name one part: "
                              f"{', '.join(p.name for p in parts)}")


def quotas(parts, per_part) -> dict[str, int]:
    """Per-participant quotas of a study's parts (crowd.per_participant; `all` = the part's number of tasks)."""
    out = {}
    for part, tasks in zip(parts, per_part):
        quota = part.crowd.per_participant if part.crowd else None
        if quota is not None:
            out[part.name] = len(tasks) if quota == "all" else quota
    return out


# --- the study's tables and status files ---------------------------------------------------------------------

def _names(emails, folder: Path | None) -> dict[str, str]:
    """annotator e-mail -> participant id (evalstudio's accounts keep the id's case; Prolific's e-mails carry it)."""
    from evalstudio.crowd import participants

    from ..exporters.tables.tidy import participant_id

    known = {a.email: a.participant_id for a in participants.load_accounts(folder or participants.DEFAULT_FOLDER).values()}
    return {email: known.get(email) or participant_id(email, "prolific") or email for email in emails}


def study_tables(parts, per_part, frames, folder=None):
    """(crowd, participant table, per-part coverage, remaining annotations, annotations) of a study's parts."""
    import pandas as pd

    from evalstudio.crowd import study

    golds, coverage, remaining, n_tasks = [], {}, 0, 0
    for part, tasks, frame in zip(parts, per_part, frames):
        golds.append(study.gold_answers(tasks, part))
        coverage[part.name] = study.coverage(frame, [t["id"] for t in tasks], part.annotators_per_task)
        needed = _needed(part, folder)  # an active or PAC part: only the tasks its design gives to humans
        wanted = [t for t in tasks if needed is None or int(t["id"]) in needed]
        have = study.counted(frame)
        have = have[have["task_id"].isin([t["id"] for t in wanted])]
        remaining += len(wanted) * part.annotators_per_task - int(
            have.groupby("task_id").size().clip(upper=part.annotators_per_task).sum())
        n_tasks += len(tasks)
    annotations = pd.concat(frames, ignore_index=True)
    crowd = study.study_crowd(parts)
    table = study.participant_table(annotations, crowd, pd.concat(golds, ignore_index=True), n_tasks,
                                    study.numeric_criteria(parts), _names(annotations["annotator"].unique(), folder))
    order = study.order_warnings(annotations, parts)
    for warnings in (study.list_warnings(annotations, parts), study.shared_item_warnings(annotations, parts, per_part),
                     study.span_limit_warnings(annotations, parts)):
        for annotator, warning in warnings.items():
            order[annotator] = "; ".join(w for w in (order.get(annotator), warning) if w)
    if order:
        table["warnings"] = ["; ".join(w for w in (row_w, order.get(a, "")) if w)
                             for a, row_w in zip(table["annotator"], table["warnings"])]
    return crowd, _with_platform_ids(table, folder), coverage, remaining, annotations


def _needed(part, folder: Path | None) -> set[int] | None:
    """The tasks an active or PAC part gives to humans, from the ledger (None: every task): an active design's
    drawn tasks; a PAC part's, once it has stopped, those its threshold gave to humans (until then, every task)."""
    import json

    from evalstudio.crowd import ledger, participants, routing

    if routing.active_of(part) is None and routing.pac_of(part) is None:
        return None
    folder = Path(folder or participants.DEFAULT_FOLDER)
    if not participants.has_ledger(folder):
        return None
    book = ledger.open_ledger(folder)
    if routing.active_of(part) is not None:
        design = book.design(part.name)
        return {t for t, (_, drawn, _, _) in design.items() if drawn} if design else None
    stopped = book.stopped().get(part.name)
    return set(json.loads(stopped[1])["human"]) if stopped else None


def _with_platform_ids(table, folder: Path | None):
    """The participant table with what the crowd platform passed in the study link at sign-up (Prolific's STUDY_ID
    and SESSION_ID, MTurk's assignmentId), where the ledger has any."""
    from evalstudio.crowd import participants

    by_email = {a.email: a for a in participants.load_accounts(folder or participants.DEFAULT_FOLDER).values()
                if a.platform_study or a.platform_session}
    if by_email and not table.empty:
        table = table.copy()
        table["platform_study"] = [getattr(by_email.get(a), "platform_study", None) for a in table["annotator"]]
        table["platform_session"] = [getattr(by_email.get(a), "platform_session", None) for a in table["annotator"]]
    return table


def pd_notna(value) -> bool:
    """True for a value that is neither None nor NaN."""
    import pandas as pd

    return value is not None and bool(pd.notna(value))


def participant_rows(table):
    """The participant table as people read it (console and status page): participant, done, quota, gold,
    median s, last activity, warnings, all as text."""
    import pandas as pd

    def text(value, form="{}"):
        return form.format(value) if pd_notna(value) else "-"

    return pd.DataFrame({
        "participant": table["participant"].astype(str),
        "done": table["tasks_done"].astype(str),
        "quota": [text(q) for q in table["quota"]],
        "gold": [f"{a:.0%} of {int(n)}" if pd_notna(a) else "-" for a, n in zip(table["gold_accuracy"], table["gold_items"])],
        "median s": [text(m, "{:.0f}") for m in table["median_seconds"]],
        "last activity": [text(t, "{:%Y-%m-%d %H:%M}") for t in table["last_activity"]],
        "warnings": table["warnings"].fillna("").astype(str),
    }, columns=["participant", "done", "quota", "gold", "median s", "last activity", "warnings"])


def time_left_text(annotations, remaining: int) -> str:
    """The line saying the current rate and the time left for the remaining annotations."""
    from evalstudio.crowd import study

    rate, hours = study.time_left(annotations, remaining)
    if remaining <= 0:
        return "every task has its annotations"
    if hours is None:
        return f"{remaining} annotation(s) to go; too few so far to estimate the time left"
    return f"{remaining} annotation(s) to go at {_rate(rate)}/hour: about {_duration(hours)} left"


def write_status(folder: Path, protocol: str, crowd, table, coverage, remaining, annotations,
                 tampered: list[str] = (), adaptive: list[str] = ()) -> None:
    """participants.csv, coverage.csv and status.html (linked from the report's index.html when written there):
    the page shows what the console shows, in the report's style."""
    import html

    import pandas as pd

    from evalstudio.base.files import write_output

    from ..exporters.tables.files import write_csv
    from ..exporters.analyses.report import html_page, html_table

    folder.mkdir(parents=True, exist_ok=True)
    write_csv(table, folder / "participants.csv")
    cov = pd.concat([c.assign(project=name) for name, c in coverage.items()], ignore_index=True)
    write_csv(cov, folder / "coverage.csv")
    rules = "; ".join(f"{k}: {_rule(v)}" for k, v in crowd.model_dump(exclude_none=True).items()) or "none in projects.yaml"
    body = [f"<h1>{html.escape(protocol)}: study status</h1>", f"<p>{html.escape(time_left_text(annotations, remaining))}</p>",
            f"<p>Study rules from projects.yaml: {html.escape(rules)}</p>",
            *(f"<p>{html.escape(line)}</p>" for line in adaptive), "<h2>Tasks by number of annotations</h2>"]
    if tampered:
        body[1:1] = ["<div class='warning'><h2>Changed since setup: the study's data may have been tampered with</h2>"
                     "<ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in tampered) + "</ul></div>"]
    for name, c in coverage.items():
        body += [f"<h3>{html.escape(name)}</h3>", html_table(c)]
    body += [f"<h2>Participants ({len(table)})</h2>", html_table(participant_rows(table)),
             "<p>Every column per participant, unrounded: participants.csv.</p>"]
    write_output(folder / "status.html", html_page(f"{protocol} study status", "\n".join(body)))


def _rule(value) -> str:
    """A crowd rule's value as text: {'rule': 'all_batches', 'currency': 'USD'} -> 'rule all_batches, currency USD'."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_rule(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "/".join(map(str, value))
    return str(value)


def _rate(per_hour: float) -> str:
    """Annotations per hour as people read them: whole numbers (with thousands separators) from 10 on."""
    return f"{per_hour:,.0f}" if round(per_hour, 1) >= 10 else f"{per_hour:.1f}"


def _duration(hours: float) -> str:
    """A time left as people say it: minutes under an hour, hours with one decimal above."""
    return f"{max(1, round(hours * 60))} min" if hours < 1 else f"{hours:.1f} hours"


def label_studio_ratings(protocol: str, projects, export: Path | None):
    """(tidy ratings, spec, model outputs as the metric `model`) of a protocol's projects, live or from an export;
    what `report` leaves out (surplus annotations, bad instances) is left out here too."""
    _, parts, per_part, frames, _ = read_study(protocol, projects, export, None)
    return study_ratings(protocol, parts, *without_attention_checks(per_part, frames))


def study_ratings(protocol: str, parts, per_part, frames):
    """`label_studio_ratings` of a study read already (`read_study`'s parts, tasks and annotation frames)."""
    import pandas as pd

    from evalstudio.readers.ratings import from_label_studio
    from evalstudio.readers.spec import Spec, spec_from_protocol

    from ..exporters.analyses.analysis import exclusions
    from ..exporters.tables.tidy import model_frame, prediction_frame

    criteria = {}
    for part in parts:
        criteria.update(spec_from_protocol(part).criteria)
    spec = Spec(name=protocol, criteria=criteria)
    annotations, notes = exclusions(pd.concat(frames, ignore_index=True), quotas=quotas(parts, per_part))
    for note in notes:
        console.print(note)
    outputs = [model_frame(t, p).assign(metric="model") for p, t in zip(parts, per_part)]
    predictions = [prediction_frame(t, p) for p, t in zip(parts, per_part)]
    outputs += [f.assign(metric="prediction " + f["model_version"].astype(str)) for f in predictions if not f.empty]
    model = pd.concat(outputs, ignore_index=True)
    tidy, scores = from_label_studio(annotations, model, spec)
    answered = annotations[~annotations["cancelled"]].drop_duplicates("annotation_id")["lead_time"]
    answered = pd.to_numeric(answered, errors="coerce").dropna()
    if len(answered):  # the time an annotator spent on a task (Label Studio's lead time; the gateway's own through it)
        tidy.attrs["median_task_seconds"] = float(answered.median())
    return tidy, spec, scores


def active_design(protocol: str, projects, folder: Path | None = None, tasks: dict[str, list] | None = None):
    """The draws of a protocol's active parts (projects.yaml `assignment: {strategy: active}`) as `evalstudio active
    draw` writes them, from the study's ledger (where the gateway kept each task's probability and draw) and the
    tasks' item and system: `tasks` (part name -> its tasks, as `read_study` read them), else read from Label
    Studio."""
    import pandas as pd

    from evalstudio.crowd import ledger as ledgers
    from evalstudio.values.results import task_fields

    from ..exporters.analyses.active import DRAW_COLUMNS

    reg = load_registry(projects)
    parts = [p for p in reg.parts(protocol) if p.assignment is not None and p.assignment.strategy == "active"]
    if not parts:
        raise BadInput(f"{protocol} has no part with `assignment: {{strategy: active}}` in projects.yaml: give the "
                       "ratings file and the draws file `active draw` wrote")
    book = ledgers.open_ledger(study_ledger(protocol, folder))
    client = Client(settings_from_env()) if tasks is None else None
    rows = []
    for part in parts:
        # the ledger keeps each task's probability, not the mix it came from: the mix is named only where
        # projects.yaml states it (the default changed from 0.5 to 0.8 on 2026-11-28; an older draw keeps its own)
        mix = f" (mix {part.assignment.mix:g})" if "mix" in part.assignment.model_fields_set else ""
        design = book.design(part.name)
        if not design:
            raise BadInput(f"{part.name}: the ledger has no design yet (the gateway draws it when it first serves "
                           "the part)")
        for task in (tasks[part.name] if tasks is not None else client.export_tasks(client.require_project(part))):
            if int(task["id"]) not in design:
                continue  # imported after the draw: never served
            probability, drawn, score, confidence = design[int(task["id"])]
            known = task_fields(task)
            rows.append({"system": str(known.get("system", "")), "item": str(known.get("item_id") or task["id"]),
                         "judge": part.assignment.judge, "score": score,
                         "uncertainty": 1.0 if confidence is None else 1 - confidence, "probability": probability,
                         "drawn": drawn, "design": f"active{mix}, gateway", "seed": ""})
    draws = pd.DataFrame(rows, columns=DRAW_COLUMNS)
    unscored = draws["score"].isna()
    if unscored.any():
        first = draws[unscored].iloc[0]
        raise BadInput(f"{int(unscored.sum())} tasks have no score of the judge (e.g. system '{first['system']}', item "
                       f"'{first['item']}'): the estimate needs the judge's score of every task; run `evalstudio judge "
                       "--to-label-studio` on them")
    return draws


def chosen_spec(spec: Path | None, protocol: str | None, projects: Path | None):
    """The spec a ratings file is read with: the --spec file, a --protocol's criteria, or None (the file's usual
    columns, each criterion's scale guessed); both given is refused."""
    from evalstudio.readers.spec import read_spec, spec_from_protocol

    if spec is not None and protocol is not None:
        raise BadInput("give --spec or --protocol, not both")
    if spec is not None:
        return read_spec(spec)
    return spec_from_protocol(load_registry(projects).get(protocol)) if protocol else None
