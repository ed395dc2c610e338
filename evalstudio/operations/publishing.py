"""What `evalstudio publish` and `evalstudio reproduce` do, below the commands (cli/publish.py): the facts of a
study gathered from Label Studio, the ledger and projects.yaml, and the package written from them
(exporters/publication: datasheet, release, instrument); a package set up again on a Label Studio and checked
against its manifest. Uses operations.reading, exporters.publication and exporters.analyses, evalstudio.crowd."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from evalstudio.base.errors import BadInput, InvalidInput
from evalstudio.base.numbers import percent

from evalstudio.values.spans import limited_controls, span_controls

from ..exporters.publication import datasheet, instrument, release
from .reading import read_study, study_ledger, study_spans, study_tables

AGREEMENT_NAMES = {"alpha": "Krippendorff's alpha", "fleiss_kappa": "Fleiss' kappa", "gwet_ac": "Gwet's AC",
                   "percent_agreement": "percent agreement", "cohen_kappa_mean": "mean pairwise Cohen's kappa"}


def publish_study(protocol: str, projects, folder: Path | None, stage: Path, key_file: Path, output: Path,
                  pay: float | None, currency: str | None, licence: str, n_boot: int) -> dict:
    """Writes the publication of a study into `stage`; returns a summary (counts) for the terminal."""
    from evalstudio.crowd import participants, study

    from evalstudio.protocols.attention import check_rows

    from ..exporters.analyses.analysis import agreement_table

    key = release.read_key(key_file, output)
    reg, parts, per_part, frames, users = read_study(protocol, projects, None, None, folder)
    folder = study_ledger(protocol, folder)
    crowd, table, _, _, annotations = study_tables(parts, per_part, frames, folder)
    counted = study.counted(annotations)
    if counted.empty:
        raise BadInput(f"{protocol}: no counted answer yet; publish a study once it has ratings")
    accounts = participants.load_accounts(folder)
    secrets = [s for a in accounts.values() for s in (a.participant_id, a.email, a.access, a.password,
                                                       a.platform_study, a.platform_session) if s]
    secrets += [str(s) for column in ("participant", "annotator") if column in table for s in table[column]]
    metadata = list(dict.fromkeys(m for p in parts for m in p.metadata_controls))  # a note, a bad-instance mark
    free_text = [m for m in metadata if any(_tag(p, m) == "TextArea" for p in parts)]
    criteria = {k: v for p in parts for k, v in p.criteria.items()}
    per_region = [m for p in parts for m in span_controls(p.interface)[1]]
    ratings = release.ratings_table(annotations, key, [m for m in metadata if m not in per_region], criteria)
    ratings, review = release.scrub(ratings, ["rationale", *[m for m in free_text if m not in per_region]], secrets)
    spans = study_spans(parts, per_part, users)
    spans = release.spans_table(spans, key, counted["annotation_id"]) if spans is not None else None
    if spans is not None:  # error spans: their free text (a per-region comment) reviewed like the rest
        spans, span_review = release.scrub(spans, [m for m in free_text if m in per_region], secrets)
        review = pd.concat([review, span_review.assign(column="spans." + span_review["column"])], ignore_index=True)
    decisions = study.decisions(table, crowd) if not table.empty else pd.DataFrame()
    if crowd.min_gold_accuracy is not None and not decisions.empty:  # who `approvals` rejects, by pseudonym
        rejected = {release.pseudonym(key, a) for a in decisions.loc[decisions["decision"] == "reject", "annotator"]}
        ratings["rejected"] = ratings["annotator"].isin(rejected)
    rows = study.counted_rows(annotations)  # an attention check's rows (a spoiled copy) count in no agreement
    agreement = agreement_table(rows[~check_rows(rows)], reg.study(protocol), n_boot=n_boot)  # all criteria
    facts = _facts(protocol, parts, per_part, counted, table, crowd, decisions, agreement, pay, currency, folder)
    facts["free_text"], facts["comment_box"] = len(review), ", ".join(free_text)  # (the notes are a comment box)
    if spans is not None:
        facts["spans"] = {"count": len(spans), "columns": list(spans.columns), "controls": _span_text(parts)}

    data = stage / "data_release"
    files = release.write_data(data, ratings, review)
    _front_matter(parts, folder, key, facts, data)
    span_files = release.write_spans(data, spans) if spans is not None else None
    (stage / "review_free_text.csv").write_bytes(files["review"].read_bytes())
    files["review"].unlink()
    titles = list(dict.fromkeys(p.entry_title for p in parts))
    title = titles[0] if len(titles) == 1 else f"{protocol}: {'; '.join(titles)}"
    (data / "README.md").write_text(release.dataset_card(protocol, title, ratings, facts, licence, len(review)),
                                    encoding="utf-8")
    release.write_croissant(data / "croissant.json", release.croissant(protocol, title, ratings, files, data, licence,
                                                                       spans, span_files))
    (data / "spec.yaml").write_text(release.analysis_spec(protocol, ratings, criteria), encoding="utf-8")
    heds = datasheet.heds_answers(facts)
    datasheet.write_datasheet(stage, title, heds, datasheet.checklist_d(facts))
    shown = _write_instrument(stage / instrument.INSTRUMENT, reg, parts, per_part, key, folder)
    instrument.write_manifest(stage, shown, protocol)
    return {"ratings": len(ratings), "annotators": facts["annotators"], "free_text": len(review),
            "open": sum(a.status == datasheet.OPEN for a in heds), "warnings": facts["warnings"]}


def _front_matter(parts, folder: Path, key: bytes, facts: dict, data: Path) -> None:
    """The front matter's facts for the datasheet (counts) and data/background.csv: each participant's background
    answers under the pseudonym their ratings have, apart from the ratings; free-text answers are not released."""
    from evalstudio.crowd import front_record, ledger, participants

    from ..exporters.tables.files import write_csv

    project = front_record.declaring(parts)
    if project is None or not participants.has_ledger(folder):
        return
    book = ledger.open_ledger(folder)
    facts["front"] = front_record.front_facts(book, project)
    frame = front_record.background_frame(book, project)
    kept = [q.name for q in project.crowd.background if q.type != "text"] + \
        [f"exit.{q.name}" for q in project.crowd.exit_survey if q.type != "text"]
    released = frame[kept].copy()
    released.insert(0, "annotator", [release.pseudonym(key, a) for a in frame["annotator"]])
    write_csv(released, data / "data" / "background.csv")


def _span_text(parts) -> str:
    """What the span controls offer, for the datasheet: each control with its labels and per-region answers."""
    out = []
    for part in parts:
        spans, per_region = span_controls(part.interface)
        for name in spans:
            control = part.interface.get_control(name)
            labels = ", ".join(control.labels)
            cap = "".join(f"; at most {n} per answer" + (f" of {' and '.join(limited_controls(key))} together"
                                                         if "+" in key else "")
                          for key, n in part.max_spans.items() if name in limited_controls(key))
            asked = [r for r in per_region  # the per-region questions of this control's text
                     if set(part.interface.get_control(r).to_name or ()) & set(control.to_name or ())]
            out.append(f"{name} ({labels}{cap}" + (f"; per span: {', '.join(asked)})" if asked else ")"))
    return "; ".join(dict.fromkeys(out))


def publish_ratings(path: Path, spec, stage: Path, key_file: Path, output: Path, pay: float | None,
                    currency: str | None, licence: str, n_boot: int) -> dict:
    """Writes the publication of a study from its ratings file (e.g. an MTurk batch results file) into `stage`: the
    datasheet (what the file tells: counts, agreement and, from an MTurk batch, recruitment, rejections, time and
    pay) and the data release. The interface is not in a ratings file: its questions stay open, no instrument/."""
    from evalstudio.readers.ratings import read_ratings
    from evalstudio.readers.tables import read_table

    from ..exporters.analyses.metaeval import agreement
    from ..exporters.payments.mturk import batch_facts

    key = release.read_key(key_file, output)
    tidy, spec = read_ratings(path, spec)
    batch = None
    if spec.layout != "nested":  # (a nested JSON file is no table: it has no MTurk batch's columns)
        frame, lines = read_table(path)
        batch = batch_facts(frame)
    seconds = dict(zip(lines, batch["seconds"].reindex(frame.index))) if batch else {}
    values = tidy["value"].copy()
    for name, crit in spec.criteria.items():  # ordinal labels are read as their position: released as the label
        if crit.scale == "ordinal" and crit.labels:
            mine = tidy["criterion"] == name
            values[mine] = [crit.labels[int(float(v)) - 1] if pd.notna(v) else None for v in values[mine]]
    rows = pd.DataFrame({"project": spec.name, "task_id": tidy["item"], "item_id": tidy["item"],
                         "system": tidy["system"].replace("", None), "annotator": tidy["annotator"],
                         "criterion": tidy["criterion"], "agent": tidy["agent"].replace("", None),
                         "value": values, "rationale": None, "cancelled": False,
                         "lead_time": tidy["line"].map(seconds)})
    ratings = release.ratings_table(rows, key, (), spec.criteria)
    ratings, review = release.scrub(ratings, [], list(tidy["annotator"].unique()) + (batch["ids"] if batch else []))
    table = agreement(tidy, spec, n_boot)[0]
    per_system = rows.assign(system=rows["system"].fillna("(one system)")).groupby("system")["item_id"].nunique()
    facts = {"live": False, "protocol": spec.name, "annotators": int(tidy["annotator"].nunique()),
             "items": int(tidy["item"].nunique()), "systems": len(per_system),
             "items_per_system": per_system.astype(int).to_dict(), "platform": "mturk" if batch else None,
             "paid": bool(pay or (batch and batch["reward"] > 0)), "rejected": batch["rejected"] if batch else 0,
             "gold_items": 0, "free_text": 0, "criteria": _spec_criteria(spec, table)}
    facts["warnings"] = []
    if batch:
        facts["pay"], problem = _batch_pay(batch, pay, currency, int(tidy["annotator"].nunique()))
        facts["warnings"] += [f"no pay per hour in the datasheet (3.3.2): {problem}"] if problem else []
        facts["time_limit"] = batch["time_limit"]
    data = stage / "data_release"
    files = release.write_data(data, ratings, review)
    files["review"].unlink()  # (nothing free-text in a ratings file's tidy table)
    title = spec.name
    (data / "README.md").write_text(release.dataset_card(spec.name, title, ratings, facts, licence, 0), encoding="utf-8")
    release.write_croissant(data / "croissant.json", release.croissant(spec.name, title, ratings, files, data, licence))
    (data / "spec.yaml").write_text(release.analysis_spec(spec.name, ratings, spec.criteria), encoding="utf-8")
    heds = datasheet.heds_answers(facts)
    datasheet.write_datasheet(stage, title, heds, datasheet.checklist_d(facts))
    return {"ratings": len(ratings), "annotators": facts["annotators"], "free_text": 0,
            "open": sum(a.status == datasheet.OPEN for a in heds), "warnings": facts["warnings"]}


def _batch_pay(batch: dict, pay: float | None, currency: str | None, workers: int) -> tuple[str, str | None]:
    """(the pay an MTurk batch shows: rewards of its counted assignments over MTurk's work time (WorkTimeInSeconds),
    and --pay per worker when given (e.g. compensation outside MTurk); why no pay per hour is given, or None)."""
    rewards = ", ".join(f"${r:.2f}" for r in batch["rewards"])
    total = batch["reward"] + (pay or 0) * workers
    text = (f"{rewards} per assignment ({batch['assignments']} counted assignments: ${batch['reward']:.2f})"
            + (f" and {pay:.2f} {currency or 'USD'} per worker (--pay)" if pay else "")
            + f", for {batch['hours']:.2f} hours of work as MTurk measured it (WorkTimeInSeconds)")
    problem = datasheet.time_problem(batch["hours"], batch["median_seconds"]) if total > 0 else None
    if problem:
        text += f": no pay per hour is given: {problem}"
    elif total > 0 and (not pay or (currency or "USD") == "USD"):
        text += f": an effective ${total / batch['hours']:.2f} per hour"
    elif total == 0:
        text += ": no pay in the file (compensation outside MTurk, such as a raffle or coupons, is not in it: --pay)"
    if batch["median_seconds"] is not None:
        text += f"; median {batch['median_seconds']:.0f} s per assignment"
    return text, problem


def _spec_criteria(spec, table: pd.DataFrame) -> list[dict]:
    out = []
    for name, crit in spec.criteria.items():
        control = {"tag": None, "prompt": "", "attributes": {"step": crit.step} if crit.step else {}, "choices": []}
        size, values = datasheet.scale_size(crit, control) if crit.labels or crit.min is not None else ("", "")
        row = table[table["criterion"] == name] if "criterion" in table else table.iloc[0:0]
        out.append({"number": len(out) + 1, "name": name, "control": None, "size": size, "values": values,
                    "presented": "", "prompt": "", "agreement": _agreement_text(row.iloc[0]) if len(row) else None})
    return out


def _tag(project, control: str) -> str | None:
    return next((c.tag for c in project.interface.controls if c.name == control), None)


def _facts(protocol, parts, per_part, counted, table, crowd, decisions, agreement, pay, currency, folder) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from evalstudio.crowd import participants, study

    def installed(name, fallback):
        try:
            return version(name)
        except PackageNotFoundError:
            return fallback

    systems = counted.assign(system=counted["system"].fillna("(one system)").astype(str))
    per_system = systems.groupby("system")["item_id"].nunique().astype(int).to_dict()
    gold = sum(len(study.gold_answers(t, p)["task_id"].unique()) for p, t in zip(parts, per_part))
    currency = currency or (crowd.bonus.currency if crowd.bonus else None)
    facts = {
        "protocol": protocol, "annotators": int(counted["annotator"].nunique()),
        "items": int(counted["item_id"].nunique()), "systems": len(per_system), "items_per_system": per_system,
        "platform": crowd.platform, "paid": bool(crowd.platform or pay), "max_participants": crowd.max_participants,
        "quota": crowd.per_participant if crowd.per_participant != "all" else None,
        "gold_items": gold, "min_gold_accuracy": crowd.min_gold_accuracy,
        "rejected": int((decisions.get("decision", pd.Series(dtype=str)) == "reject").sum()),
        "flagged": int((table.get("warnings", pd.Series(dtype=str)).fillna("") != "").sum()),
        "gateway": bool(participants.load_accounts(folder)),
        "label_studio": installed("label-studio", "1.23.2"), "evalstudio": installed("evalstudio", "0.1.0"),
        "order_of_parts": " then ".join(dict.fromkeys(p.entry_title for p in parts))
        if any(p.crowd and p.crowd.after for p in parts) else None,
        "active": "by an automatic random process: an active design drew each task for a human label with a "
                  "probability from the judge's uncertainty (each probability is in the gateway's ledger)"
        if any(p.assignment is not None and p.assignment.strategy == "active" for p in parts) else
        "PAC labels: humans labelled a calibration sample drawn uniformly at random, then every task whose judge "
        "uncertainty was at or above the PAC threshold; the judge labelled the rest (the threshold and its bound "
        "are in the gateway's ledger)" if any(p.stop_when is not None and p.stop_when.pac is not None for p in parts)
        else None,
        "parts": [{"title": p.entry_title, "controls": ", ".join(f"{c.name} ({c.tag})" for c in p.interface.controls)}
                  for p in dict((p.entry, p) for p in parts).values()],
    }
    if crowd.min_gold_accuracy is not None:
        facts["excluded"] = (f"participants below {percent(crowd.min_gold_accuracy)} correct on the gold items are "
                             "rejected")
    facts["warnings"] = []
    seconds = pd.to_numeric(counted["lead_time"], errors="coerce")
    # through the gateway each task's time is the ledger's (from serving it to the answer); in Label Studio itself
    # its lead_time is what the annotator's browser reported
    measured = "as the server measured them" if facts["gateway"] else "as Label Studio recorded them (browser-measured)"
    hours = float(seconds.sum()) / 3600
    bonuses = pd.to_numeric(decisions.get("bonus", pd.Series(dtype=float)), errors="coerce")
    bonus = float(bonuses.fillna(0).sum())
    approved = int((decisions.get("decision", pd.Series(dtype=str)) == "approve").sum())
    median = float(seconds.median()) if seconds.notna().any() else None
    per_task = f"; median {median:.0f} s per task" if median is not None else ""
    if bonuses.isna().any():  # a bonus earned whose amount projects.yaml does not give (dialogue's document)
        facts["pay"] = (f"{bonuses.isna().sum()} participant(s) earned a bonus whose amount is not set "
                        f"(crowd.bonus.amounts in projects.yaml), so no pay per hour is given; {hours:.2f} hours on "
                        f"tasks {measured}{per_task}")
    elif pay is not None:
        total = pay * approved + bonus
        given = (f"{pay:.2f} {currency or ''} per participant ({approved} approved) and {bonus:.2f} in bonuses: "
                 f"{total:.2f} for {hours:.2f} hours on tasks {measured}")
        if problem := datasheet.time_problem(hours, median):
            facts["warnings"].append(f"no pay per hour in the datasheet (3.3.2): {problem}")
            facts["pay"] = f"{given}{per_task}; no pay per hour is given: {problem}".replace("  ", " ")
        else:
            facts["pay"] = f"{given}, an effective {total / hours:.2f} {currency or ''} per hour{per_task}".replace(
                "  ", " ")
    elif median is not None:
        facts["pay"] = (f"base pay not given (--pay); bonuses {bonus:.2f} {currency or ''}; {hours:.2f} hours on tasks "
                        f"{measured}{per_task}").replace("  ", " ")
    facts["hours"], facts["median_seconds"], facts["bonus_total"], facts["approved"] = hours, median, bonus, approved
    facts["criteria"] = _criteria(parts, agreement)
    return facts


def _criteria(parts, agreement: pd.DataFrame) -> list[dict]:
    out, seen = [], set()
    for part in parts:
        config = part.config_for("gateway")
        for name, spec in part.criteria.items():
            if name in seen:
                continue
            seen.add(name)
            slot = part.slots(name)[0]
            control = datasheet.control_facts(config, slot.control)
            size, values = datasheet.scale_size(spec, control)
            row = agreement[agreement["criterion"] == name] if "criterion" in agreement else agreement.iloc[0:0]
            out.append({"number": len(out) + 1, "name": name, "control": slot.control, "size": size,
                        "relative": getattr(part, "compare", None) is not None,  # outputs side by side
                        "values": values, "presented": datasheet.presentation(control), "prompt": control["prompt"],
                        "agreement": _agreement_text(row.iloc[0]) if len(row) else None})
    return out


def _agreement_text(row) -> str | None:
    if pd.isna(row.get("alpha")):
        return None
    text = (f"{AGREEMENT_NAMES['alpha']} ({row['scale']}) {row['alpha']:.3f}, 95% bootstrap interval "
            f"[{row['alpha_lo']:.3f}, {row['alpha_hi']:.3f}], over {int(row['items'])} items, {int(row['ratings'])} "
            f"ratings by {int(row['annotators'])} annotators")
    others = [f"{AGREEMENT_NAMES[k]} {row[k]:.3f}" for k in ("fleiss_kappa", "gwet_ac", "percent_agreement",
                                                             "cohen_kappa_mean") if k in row and pd.notna(row[k])]
    return text + ("; " + ", ".join(others) if others else "") + "; intra-annotator agreement not measured."


def _write_instrument(target: Path, reg, parts, per_part, key: bytes, folder: Path) -> dict[str, str]:
    """instrument/ (see exporters/publication/instrument.py); returns the digests of every text annotators saw."""
    import yaml

    from evalstudio.crowd import ledger as ledger_module, participants
    from evalstudio.values.results import ID_FIELD

    (target / "labeling_configs").mkdir(parents=True)
    (target / "instructions").mkdir()
    shown: dict[str, str] = {}
    entries = dict((p.entry, p) for p in parts)
    configs, files = {}, {}
    for entry, project in entries.items():
        name = f"labeling_configs/{entry}.xml"
        (target / name).write_text(project.label_config + "\n", encoding="utf-8")
        configs[entry] = name
        shown[f"config/{entry}"] = instrument.sha256_text(project.config_for("gateway"))
        files[entry] = {}
        for channel in instrument.CHANNEL_NAMES:  # what each channel showed (dialogue's are Label Studio's only)
            instructions = project.instructions_for(channel)
            if file := instrument.instruction_file(entry, channel, instructions):
                (target / "instructions" / file).write_text(instructions, encoding="utf-8")
                shown[f"instructions/{entry}/{channel}"] = instrument.sha256_text(instructions)
            files[entry][channel] = file
    used = "gateway" if participants.has_ledger(folder) else "label-studio"
    (target / "instructions" / "README.md").write_text(instrument.instructions_readme(files, configs, used),
                                                       encoding="utf-8")
    raw = yaml.safe_load(Path(reg.path).read_text(encoding="utf-8"))["projects"]
    (target / "projects.yaml").write_text(instrument.entries_yaml({e: raw[e] for e in entries}, configs),
                                          encoding="utf-8")
    order: dict = {"parts": {}, "served": {}, "lists": {}}
    ids_of: dict[int, str] = {}
    with (target / "tasks.jsonl").open("w", encoding="utf-8") as out:
        for project, tasks in zip(parts, per_part):
            ordered = sorted(tasks, key=lambda t: t["id"])
            order["parts"][project.name] = {"order": project.order,
                                            "tasks": [str(t["data"][ID_FIELD]) for t in ordered]}
            for task in ordered:
                record = instrument.package_task(project, task)
                out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
                ids_of[int(task["id"])] = str(task["data"][ID_FIELD])
                shown[f"task/{project.name}/{task['data'][ID_FIELD]}"] = instrument.shown_digest(project, task["data"])
    if participants.has_ledger(folder):
        book = ledger_module.open_ledger(folder)
        for ref in sorted(book.answers(), key=lambda r: (r.participant, r.part, r.number)):
            if ref.answered is not None and ref.task_id in ids_of:
                served = order["served"].setdefault(release.pseudonym(key, ref.participant), {})
                served.setdefault(ref.part, []).append(ids_of[ref.task_id])
        order["lists"] = {entry: {release.pseudonym(key, p): n for p, n in members.items()}
                          for entry, members in book.lists().items()}
    (target / "order.json").write_text(json.dumps(order, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return shown


# --- reproduce ----------------------------------------------------------------------------------------------

def reproduce_package(package: Path, client, on_progress=None) -> list[str]:
    """Sets the package's study up on `client`'s Label Studio (projects, tasks in the published order) once the
    files match the manifest; returns what was checked, each line saying equal. InvalidInput when the study set up
    differs from the manifest (a config, a task's shown fields or the order)."""
    from evalstudio.base.errors import Problem
    from evalstudio.protocols import registry
    from evalstudio.tasks.importing import import_files
    from evalstudio.tasks.scanning import scan

    manifest = instrument.check_package(package)
    reg = registry.load(package / instrument.INSTRUMENT / "projects.yaml")
    parts = reg.parts(manifest["protocol"])
    inside = (package / instrument.INSTRUMENT).resolve()
    for part in parts:  # a package names its own files only (its manifest vouches for nothing else)
        if not part.config_path.is_relative_to(inside):
            raise BadInput(f"{package / instrument.INSTRUMENT / 'projects.yaml'}: projects.{part.entry}.config: "
                           f"{part.config} is outside the package; a published instrument holds its configs")
    tasks_file = package / instrument.INSTRUMENT / "tasks.jsonl"
    scans = [scan(p, instrument.PackageImporter, [tasks_file], spool=True) for p in parts]
    try:
        if problems := list(dict.fromkeys(pr for s in scans for pr in s.problems + s.design)):
            raise InvalidInput(problems)
        ids = {}
        for part, checked in zip(parts, scans):
            report = import_files(part, instrument.PackageImporter, [tasks_file], client, checked=checked,
                                  on_progress=on_progress, as_listed=True)  # the published order
            ids[part.name] = report.project_id
    finally:
        for checked in scans:
            checked.discard()
    published = json.loads((package / instrument.INSTRUMENT / "order.json").read_text(encoding="utf-8"))["parts"]
    from evalstudio.values.results import ID_FIELD

    lines, problems = [], []
    for part in parts:
        stored = client.project(ids[part.name]).label_config
        if instrument.sha256_text(part.config_for("gateway")) != manifest["shown"].get(f"config/{part.entry}") or \
                stored.strip() != part.config_for("label-studio").strip():
            problems.append(Problem(part.name, None, "config", "differs from the published labeling config"))
        tasks = sorted(client.export_tasks(ids[part.name]), key=lambda t: t["id"])
        differ = [t["data"].get(ID_FIELD) for t in tasks if instrument.shown_digest(part, t["data"]) !=
                  manifest["shown"].get(f"task/{part.name}/{t['data'].get(ID_FIELD)}")]
        if differ:
            problems.append(Problem(part.name, None, "tasks", f"{len(differ)} task(s) show other fields than "
                                                              f"published, e.g. {differ[0]}"))
        problems += instrument.order_problems({part.name: published[part.name]["tasks"]},
                                              {part.name: [str(t["data"][ID_FIELD]) for t in tasks]})
        lines.append(f"{part.name}: project {ids[part.name]}, config, {len(tasks)} task(s) and their order equal "
                     "the published instrument (SHA-256)")
    if problems:
        raise InvalidInput(problems)
    return lines
