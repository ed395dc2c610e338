"""A study's report (`evalstudio report`): the study read (live or from an export), rejected participants left
out if asked, an active design's estimates, the report page and CSVs written with the study's status page beside
them, and the LLM judges' verdicts. Uses operations.reading, exporters.analyses (report, judges, active),
exporters.tables and evalstudio.crowd."""

from __future__ import annotations

from pathlib import Path

from evalstudio.base.errors import BadInput

from .consoles import console, err
from .reading import (quotas, read_study, study_ledger, study_spans, study_tables, without_attention_checks,
                      write_status)
from .waiting import WAIT_SECONDS


def write_report(protocol: str, output: Path, from_export, bootstrap: int, min_control_accuracy, exclude_prefilled,
                 keep_bad_instances, exclude_rejected, participants, project_id, wait: float = WAIT_SECONDS,
                 projects=None):
    """(the report page, the LLM judges' verdict lines): a study's report (agreement, alignment, plots, annotator
    QC, the judges, spans, an active design, the status page of a crowd study) written to `output` whole or not at
    all."""
    import pandas as pd

    from evalstudio.base.files import staged_folder, write_output

    from ..exporters.analyses.judges import judge_verdicts
    from ..exporters.analyses.postedit import automation_bias
    from ..exporters.tables.files import write_csv
    from ..exporters.analyses.report import build_report
    from ..exporters.tables.tidy import model_frame

    verdicts: list[str] = []  # the LLM judges' section, also said here

    def judged(tasks, kept, study, spans):
        table, lines = judge_verdicts(tasks, kept, study, spans=spans)
        bias, said = automation_bias(kept, study, tasks)  # a prefilled study with answers shown without the prediction
        if said:
            write_csv(bias, stage / "automation_bias.csv")
            lines = lines + said
        verdicts.extend(lines)
        return table, lines

    with staged_folder(output) as stage:  # written whole or not at all
        reg, parts, per_part, frames, users = read_study(protocol, projects, from_export, project_id, participants,
                                                         wait)
        crowd_study = any(part.crowd for part in parts)
        if exclude_rejected or crowd_study:
            state = study_tables(parts, per_part, frames, study_ledger(protocol, participants))
        per_part, frames = without_attention_checks(per_part, frames)  # scored in the status above, not analysed
        tasks = [task for part_tasks in per_part for task in part_tasks]
        annotations = pd.concat(frames, ignore_index=True)
        if exclude_rejected:
            annotations = without_rejected(annotations, parts, *state[:2])
        active = None
        if from_export is None and any(p.assignment is not None and p.assignment.strategy == "active"
                                       for p in parts):  # (the design is in the live study's ledger)
            from ..exporters.analyses.active import estimates
            from .reading import active_design, study_ratings

            tidy, spec, _ = study_ratings(protocol, parts, per_part, frames)  # the study read above
            active = estimates(tidy, spec, active_design(protocol, projects, participants,
                                                         {p.name: t for p, t in zip(parts, per_part)}))
        with console.status("computing statistics..."):
            page = build_report(reg.study(protocol), tasks, stage, users, n_boot=bootstrap,
                                min_control_accuracy=min_control_accuracy, annotations=annotations,
                                model=pd.concat([model_frame(t, p) for p, t in zip(parts, per_part)],
                                                ignore_index=True),
                                exclude_prefilled=exclude_prefilled, keep_bad_instances=keep_bad_instances,
                                quotas=quotas(parts, per_part),
                                judges=lambda kept, spans: judged(tasks, kept, reg.study(protocol), spans),
                                spans=study_spans(parts, per_part, users),
                                active=active)
        _span_agreement(stage, protocol, parts, per_part, [annotations], users)
        if crowd_study:  # its status page goes with the report
            write_status(stage, protocol, *state)
            index = page.read_text(encoding="utf-8")
            write_output(page, index.replace("</h1>", "</h1><p><a href='status.html'>Study status</a>: coverage, "
                                                     "participants, attention checks.</p>", 1))
        page = output / page.name
    return page, verdicts



def _span_agreement(stage, protocol, parts, per_part, frames, users) -> None:
    """span_agreement.csv in the report of an mqm or esa study, the table `analyze --protocol` writes (evalstudio's
    character measures and ESA's own), on the annotations the report keeps; nothing for other protocols or without
    two annotators of a segment."""
    from ..exporters.analyses.span_analysis import project_span_study, span_agreement
    from ..exporters.tables.files import write_csv

    found = project_span_study(protocol, parts, per_part, frames, users)
    table = span_agreement(found[2], []) if found is not None else None
    if table is not None and not table.empty:
        write_csv(table, stage / "span_agreement.csv")


def without_rejected(annotations, parts, crowd, table):
    """The annotations without the participants the study's rules reject (what `approvals` decides)."""
    from evalstudio.crowd import study

    if crowd.min_gold_accuracy is None:
        raise BadInput(f"--exclude-rejected: {parts[0].study_name} has no crowd.min_gold_accuracy in projects.yaml, "
                       "so nobody is rejected: set it (and import gold items) or leave --exclude-rejected out")
    rejected = set(study.decisions(table, crowd).query("decision == 'reject'")["annotator"])
    err.print(f"left out {len(rejected)} rejected participant(s) (failed attention checks)", highlight=False)
    return annotations[~annotations["annotator"].isin(rejected)]
