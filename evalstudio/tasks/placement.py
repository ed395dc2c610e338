"""What an import would do wrong to a study, found before anything is sent: the study design of projects.yaml
(every item with its versions) and the placement of items among the study's projects (an item in one project of
a study unless the entries share items; one version of an item per counterbalanced list)."""

from __future__ import annotations

from collections.abc import Sequence

from evalstudio.base.errors import Problem
from evalstudio.protocols.registry import Project


def parse_where(where: str) -> tuple[str, int]:
    """(file, line) of a `file:line` place."""
    path, _, line = where.rpartition(":")
    return path, int(line)


def design_problems(project: Project, versions: dict[str, dict[str, str]]) -> list[Problem]:
    """The study design of projects.yaml (`design: {versions: 4[, items: 5]}`): every item has exactly `versions`
    systems, the same set for every item; with `items`, exactly that many items."""
    want, items = project.design.get("versions"), project.design.get("items")
    problems = []
    every = sorted({system for systems in versions.values() for system in systems})
    for item, systems in versions.items():
        path, _, line = next(iter(systems.values())).rpartition(":")
        missing = [s for s in every if s not in systems]
        if want is not None and len(systems) != want:
            problems.append(Problem(path, int(line), "system", f"item {item!r} has {len(systems)} version(s) "
                                    f"({', '.join(sorted(systems))}); the design needs exactly {want}"))
        elif missing:
            problems.append(Problem(path, int(line), "system", f"item {item!r} lacks version(s) {', '.join(missing)} "
                                    "that other items have"))
    if items is not None and len(versions) != items:
        first = next(iter(next(iter(versions.values())).values()), ":0") if versions else ":0"
        path, _, line = first.rpartition(":")
        problems.append(Problem(path or "input", int(line) or None, "item_id",
                                f"{len(versions)} item(s) found; the design needs exactly {items}"))
    return problems


def placement_problems(client, parts: Sequence[Project], scans: Sequence,
                       study: Sequence[Project], moves: dict | None = None) -> list[Problem]:
    """What importing `parts` (with their `scans`, scanning.Scan) would do wrong to the study's projects on the server (`study`:
    every project of the parts' studies): an item that is already in another project of the study (an item belongs
    to exactly one project of a study: cmv_tom or cmv_threads, never both), or, in a list's project, a second version
    of an item the list already holds (its participants would see both)."""
    entry_of = {project.name: project.entry for project in study}
    shared = {(a.entry, b) for a in study for b in a.shares_items}
    shared |= {(b, a) for a, b in shared}  # (either entry may say so)
    on_server: dict[str, dict[str, str]] = {}  # project name -> evalstudio id -> item id
    ids_of: dict[str, int] = {}  # project name -> its Label Studio id
    for project in study:
        # only the projects a check below reads: another entry's project, or a part with lists (a protocol of one
        # project without lists asks Label Studio nothing here)
        if not any(entry_of[project.name] != part.entry or (project.name == part.name and part.lists)
                   for part in parts):
            continue
        project_id, count = client.find_project_counted(project.title)
        if project_id is not None and count:
            on_server[project.name] = client.task_items(project_id)
            ids_of[project.name] = project_id
    problems = []
    for part, checked in zip(parts, scans):
        incoming: dict[str, tuple[str, str]] = {}  # item id -> (evalstudio id, where) of its first incoming task
        for key, (item, where) in checked.items.items():
            incoming.setdefault(item, (key, where))
        for other, tasks in on_server.items():
            if other == part.name or entry_of[other] == part.entry or (part.entry, entry_of[other]) in shared:
                continue  # the part itself, another list of the same entry (every list holds every item), or an
                # entry that shares its items (projects.yaml shares_items)
            for item in sorted(set(tasks.values()) & incoming.keys()):
                if moves is not None:  # (the tasks the message tells the researcher to delete: a move, not tampering)
                    moves.setdefault(ids_of[other], {}).update(
                        {key: part.name for key, held in tasks.items() if held == item})
                path, line = parse_where(incoming[item][1])
                problems.append(Problem(path, line, "item_id", f"item {item!r} is already in {other}, another "
                                        f"project of the study '{part.study_name}': an item belongs to one project "
                                        f"of a study. To move it, delete its task(s) from {other} in Label Studio "
                                        "first (their annotations go with them), then import again"))
        if part.lists and part.name in on_server:
            held: dict[str, set[str]] = {}
            for key, item in on_server[part.name].items():
                held.setdefault(item, set()).add(key)
            for key, (item, where) in checked.items.items():
                if item in held and key not in held[item]:
                    path, line = parse_where(where)
                    problems.append(Problem(path, line, "item_id", f"{part.name} already holds another version of "
                                            f"item {item!r} ({', '.join(sorted(held[item]))}); importing this one "
                                            "would show both to the participants of that list (did the item's "
                                            "versions change since the first import?)"))
    return list(dict.fromkeys(problems))
