"""Counterbalanced lists: which list's project each task of an entry with `lists:` goes to.

A between-participants design as psycholinguistics builds it (a Latin square over items and versions): every list
holds exactly one version of every item with several versions, the versions of one item are rotated over the lists,
and items with a single version (fillers) are in every list (or, with `fillers: spread`, in one list each). A
participant who works in one list therefore never sees two versions of an item (Circa Part II: never the model's
interpretation and the gold label of one conversation). The gateway keeps each participant in one list.

The rotation of an item is computed from its id alone (a hash), so the same task always goes to the same list,
whatever the order or the set of files of an import: a re-run or a later import adds no second version to a list.
The rotation balances the versions over the lists in expectation; `balance` reports the counts.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from evalstudio.base.errors import Problem
from evalstudio.protocols.registry import Lists


def version_key(value) -> str:
    """The version of a task as text (lists, e.g. Circa's shown_label_is, as their JSON)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def rotation(item_id: str, count: int) -> int:
    """The item's place in the Latin square: 0 ... count-1, from its id only."""
    return int.from_bytes(hashlib.sha256(str(item_id).encode("utf-8")).digest()[:8], "big") % count


def lists_of_task(item_id: str, version: str, versions: list[str], lists: Lists) -> list[int]:
    """The list numbers (1-based) a task of `item_id` with `version` goes to; `versions`: the item's sorted versions."""
    shift = rotation(item_id, lists.count)
    if len(versions) == 1:
        return list(range(1, lists.count + 1)) if lists.fillers == "every_list" else [shift + 1]
    return [(versions.index(version) + shift) % lists.count + 1]


def collect(tasks, lists: Lists) -> tuple[dict[str, list[str]], list[Problem]]:
    """(item id -> its sorted versions, the design's problems) from (where, task data) pairs: an item with more
    versions than lists, or two tasks of one item with the same version, would put two versions into one list."""
    found: dict[str, dict[str, str]] = {}
    problems = []
    for where, data in tasks:
        path, _, line = where.rpartition(":")
        if data.get(lists.version) is None:
            problems.append(Problem(path, int(line), lists.version, "no value: the lists tell an item's versions "
                                    "apart by this field (projects.yaml lists.version)"))
            continue
        item, version = str(data.get("item_id")), version_key(data[lists.version])
        versions = found.setdefault(item, {})
        if version in versions:
            problems.append(Problem(path, int(line), lists.version, f"item {item!r} has two tasks with version "
                                    f"{version!r} (first at {versions[version]}): one of them would share a list "
                                    "with the other"))
            continue
        versions[version] = where
    for item, versions in found.items():
        if len(versions) > lists.count:
            path, _, line = next(iter(versions.values())).rpartition(":")
            problems.append(Problem(path, int(line), lists.version, f"item {item!r} has {len(versions)} versions; "
                                    f"with {lists.count} lists one list would hold two of them (set lists.count to "
                                    f"at least {len(versions)})"))
    return {item: sorted(versions) for item, versions in found.items()}, problems


def balance(versions: dict[str, list[str]], lists: Lists) -> dict[int, Counter]:
    """Per list: how many tasks of each version it holds (fillers counted as "single version")."""
    out = {number: Counter() for number in range(1, lists.count + 1)}
    for item, item_versions in versions.items():
        for version in item_versions:
            for number in lists_of_task(item, version, item_versions, lists):
                out[number]["single version" if len(item_versions) == 1 else version] += 1
    return out
