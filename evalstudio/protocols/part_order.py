"""The order of a study's parts: each part after the one its participants finish first (crowd.after; Circa: Part I
before Part II, CMV: the blind cmv_threads before cmv_tom), otherwise projects.yaml's order."""
from __future__ import annotations


def after_of(project) -> str | None:
    """The entry a participant finishes before this project (crowd.after), or None; a project of projects.yaml or
    a gateway part (which carries it as `after`)."""
    crowd = getattr(project, "crowd", None)
    return crowd.after if crowd is not None else getattr(project, "after", None)


def entry_of(project) -> str:
    """The projects.yaml entry a project (or a list's project, or a gateway part) belongs to."""
    return getattr(project, "entry", None) or project.name


def in_order(parts: list) -> list:
    """The parts, each placed after the entry it comes after; otherwise in the given order. Parts that wait for
    each other in a circle (refused when projects.yaml is read) keep the given order."""
    placed: list = []
    left = list(parts)
    while left:
        waiting = {entry_of(p) for p in left}
        ready = next((p for p in left if after_of(p) not in waiting or after_of(p) == entry_of(p)), None)
        if ready is None:  # a circle
            return placed + left
        placed.append(ready)
        left.remove(ready)
    return placed


def earlier_entries(parts: list, entry: str) -> set[str]:
    """The entries a participant finishes before `entry`, directly or through others (CMV: cmv_tom -> {cmv_threads})."""
    after = {entry_of(p): after_of(p) for p in parts}
    out: set[str] = set()
    current = after.get(entry)
    while current and current not in out and current != entry:
        out.add(current)
        current = after.get(current)
    return out


def circle(projects: list) -> list[str] | None:
    """Entries whose crowd.after lead back to themselves (a before b before a), in their order; None if none do."""
    after = {entry_of(p): after_of(p) for p in projects}
    for start in after:
        path, current = [start], after[start]
        while current and current in after:
            if current == start:
                return path
            if current in path:
                break
            path.append(current)
            current = after[current]
    return None
