"""The gateway pairs ESA's attention checks with their originals (evalstudio/tasks/order.py `checks_after`,
`open_checks`; evalstudio/gateway/serving.py): a spoiled copy is served only to a participant who answered or holds
its original, at a later place in their order, so that with one answer per task every check whose original was
answered is scored; the pairing is read from the ledger's references (any gateway process decides the same). A
participant who leaves leaves their checks unanswered without keeping anyone waiting; one who never met an original
never gets its check."""

from __future__ import annotations

import asyncio
import json

import pytest

from evalstudio.crowd import ledger
from evalstudio.gateway.admission import Session
from evalstudio.gateway.app import Gateway
from evalstudio.gateway.setup import GatewayConfig, load_parts
from evalstudio.protocols import registry
from evalstudio.protocols.attention import CHECK_FIELD
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.importing import import_files
from evalstudio.tasks.order import checks_after, open_checks
from evalstudio.values.results import ID_FIELD

from .test_attention_checks import SAMPLE
from .test_cli import _projects_file

CHECKS = {10: 1, 11: 2, 12: 3}  # copy -> original


ORDER = [10, 5, 1, 6, 2, 3, 11, 12]


@pytest.mark.parametrize("claims, quota_left, had, expected", [
    (set(), None, set(), [5, 1, 6, 2, 3]),  # no original answered or held: no check
    ({1, 3}, None, set(), [10, 5, 1, 6, 2, 3, 12]),
    ({1, 3}, 2, set(), [10, 12]),  # the quota left holds only the checks owed
    ({1}, 2, set(), [10, 5, 6]),  # room for one more: no original whose check would then not fit
    ({1}, 3, set(), [10, 5, 1, 6, 2, 3]),
    ({1}, 1, {10}, [10, 5, 1, 6]),  # its check answered: nothing owed, still no original whose check cannot fit
])
def test_a_check_is_open_only_to_whoever_has_its_original(claims, quota_left, had, expected):
    """(The order keeps tasks the participant had: `choose` passes over them; `had` makes a check no longer owed.)"""
    assert open_checks(ORDER, CHECKS, claims, lambda t: t not in had and t not in claims, quota_left) == expected


def test_a_check_comes_after_its_original_in_the_same_sequence_of_items():
    order = [10, 5, 1, 11, 6, 2, 3, 12]
    item = {5: "e", 6: "f", 1: "a", 10: "a", 2: "b", 11: "b", 3: "c", 12: "c"}
    after = checks_after(order, CHECKS)
    assert after == [1, 5, 10, 2, 6, 11, 3, 12]
    assert [item[t] for t in after] == [item[t] for t in order]  # the items' sequence: unchanged


def esa_study(tmp_path, client, title: str, overlap: int):
    """The ESA sample in a project of its own, with an attention check for about half its translations."""
    projects_file = _projects_file(tmp_path, lambda raw: raw["projects"]["esa"].update(
        title=title, annotators_per_task=overlap, order="random",
        attention_checks={**raw["projects"]["esa"]["attention_checks"], "share": 0.5}))
    project = registry.load(projects_file).get("esa")
    import_files(project, importer_for(project), [SAMPLE], client)
    return project


async def work(config, part, people: list[str], leaves: dict[str, int]) -> dict[str, list[tuple[int, str]]]:
    """The participants take turns: each asks the gateway for their next task and answers it, until told they are
    finished; one in `leaves` stops after that many answers. Returns each one's (task id, shown target) in order."""
    gateway = Gateway(config)
    done: dict[str, list[tuple[int, str]]] = {p: [] for p in people}
    working = list(people)
    try:
        while working:
            for p in list(working):
                if len(done[p]) == leaves.get(p, -1):
                    working.remove(p)
                    continue
                body = json.loads((await gateway._next(Session(p, None), part)).body)
                if "ref" not in body:
                    assert "finished" in body, body  # never "wait": no check keeps anyone waiting
                    working.remove(p)
                    continue
                ref = gateway.ledger.ref(p, body["ref"])
                assert gateway.ledger.record(ref.ref, "[]") == "ok"
                done[p].append((ref.task_id, body["data"]["target"]))
        late = json.loads((await gateway._next(Session("late", None), part)).body)
        assert "finished" in late, late
        return done
    finally:
        await gateway.upstream.aclose()


@pytest.mark.server
@pytest.mark.parametrize("overlap, leaves", [(1, {}), (1, {"p1": 4}), (2, {})])
def test_every_answered_originals_check_goes_to_whoever_answered_it(label_studio, client, tmp_path, monkeypatch,
                                                                     overlap, leaves):
    """Three participants (one leaving after four answers) work through the ESA sample with its checks, one answer
    per task (or two): each check is answered by exactly those who answered its original and nobody else, after
    it (right after it only where nothing else was left for them: others took the rest); every original has its
    answers; the one who left leaves their other checks unanswered, and one who comes last, when every original is
    answered, is told they are finished (no check open to them, none to wait for). Once, on the last database: who
    gets which check is the gateway's rule over its ledger (the folder's SQLite here, whatever Label Studio's)."""
    from .conftest import only_on_the_last_database

    only_on_the_last_database(label_studio)
    monkeypatch.delenv(ledger.URL_ENV, raising=False)
    project = esa_study(tmp_path, client, f"attention pairing {overlap} {len(leaves)}", overlap)
    [part] = load_parts(client, [project])
    config = GatewayConfig(study="pairing", parts=[part], label_studio_url=label_studio.url, api_key=label_studio.credentials().api_key,
                           participants_folder=tmp_path / "participants", public_url="http://127.0.0.1:9")
    people = ["p1", "p2", "p3"]
    done = asyncio.run(work(config, part, people, leaves))
    checks = checks_in(client, part.project_id)
    assert len(checks) >= 6, checks  # (about half of the sample's translations are long enough)
    by_task: dict[int, set[str]] = {}
    for p, tasks in done.items():
        for task, _ in tasks:
            by_task.setdefault(task, set()).add(p)
    originals = {t for t in client.task_id_list(part.project_id) if t not in checks}
    assert all(len(by_task.get(t, ())) == overlap for t in originals)  # the study completes
    for copy, original in checks.items():
        stayed = {p for p in by_task[original] if p not in leaves}
        assert stayed <= by_task.get(copy, set()) <= by_task[original], (copy, original, by_task.get(copy))
    for p, tasks in done.items():
        ids = [t for t, _ in tasks]
        for copy, original in checks.items():
            if copy in ids:  # later; right after it only once nothing but checks was left for them
                at = ids.index(copy)
                assert at > ids.index(original) and (at > ids.index(original) + 1 or set(ids[at:]) <= set(checks))


def checks_in(client, project_id: int) -> dict[int, int]:
    """The project's attention checks as Label Studio holds them, read as the researcher: copy -> original."""
    tasks = [t for page in client.full_task_pages(project_id) for t in page]
    task_of = {t["data"][ID_FIELD]: t["id"] for t in tasks}
    return {t["id"]: task_of[t["meta"][CHECK_FIELD]["of"]] for t in tasks if CHECK_FIELD in (t.get("meta") or {})}
