"""The order annotators meet the tasks in, on a real Label Studio: through the gateway, per protocol, two
participants of a seeded study work through every task; in Label Studio itself, two annotators work through its
own stream. (The order's own properties, without a server: tests/test_order.py.)"""

from __future__ import annotations

import httpx
import pytest

from evalstudio import importers
from evalstudio.crowd import ledger, participants
from evalstudio.protocols import registry
from evalstudio.tasks.importing import import_files
from evalstudio.values.results import region

from .conftest import PROJECTS, example_files, gateway_process, only_on_the_last_database
from .test_gateway import signed_in
from .test_order import adjacent, fewest_adjacent

pytestmark = pytest.mark.server
WALKERS = ["A", "B"]  # two participants (their ids get a prefix per study: one Label Studio serves every test)


def _task(label_studio, task_id: int) -> dict:
    answer = httpx.get(f"{label_studio.url}/api/tasks/{task_id}", timeout=60,
                       headers={"Authorization": f"Token {label_studio.credentials().api_key}"})
    answer.raise_for_status()
    return answer.json()


def _answer(project) -> list[dict]:
    from .test_browser import designed_values

    return [region(project.interface, name, value) for name, value in designed_values(project).items()]


@pytest.fixture(scope="module")
def walked(label_studio, client, reg, tmp_path_factory):
    """Per study, on projects of its own with room for two answers per task: the study's salt fixed (a seeded
    study), a gateway, and two participants who each answer every task they are given until the gateway says they
    are done. Yields protocol -> {participant: [(task id, item id, system), ...] in the order served}."""
    from .test_cli import _projects_file

    only_on_the_last_database(label_studio)
    walks: dict[str, dict[str, list[tuple[int, str, str]]]] = {}

    def walk(protocol: str):
        study_name = reg.entry(protocol).study_name
        if protocol in walks:
            return walks[protocol]
        base = tmp_path_factory.mktemp(f"order-{study_name}")

        def own_projects(raw):
            for entry in raw["projects"].values():
                entry["title"] = "OL: " + entry["title"][:34]
                entry["annotators_per_task"] = len(WALKERS)
                if entry.get("crowd"):
                    entry["crowd"].pop("per_participant", None)
            raw["projects"]["circa_part1"]["crowd"]["per_participant"] = 1  # Part I first, one question
            raw["projects"]["circa_part2"]["crowd"]["per_participant"] = 12  # of a list's 30 (CI budget)
        projects_file = _projects_file(base, own_projects)
        own = registry.load(projects_file)
        for part in own.parts(study_name):
            import_files(part, importers.get(part.importer), example_files(part.entry), client)
        folder = base / "participants"
        ids = {w: f"ORD{study_name.upper()}{w}" for w in WALKERS}
        participants.add(client, list(ids.values()), folder)
        ledger.open_ledger(folder).set_setting("order-salt", "a seeded study")
        accounts = participants.load_accounts(folder)
        book = ledger.open_ledger(folder)
        # in the study's order (cmv: the blind cmv_threads first, every thread; then cmv_tom, whose delta threads
        # come again: crowd.after)
        entries = list(dict.fromkeys(p.entry for p in own.parts(study_name)))
        with gateway_process(label_studio, study_name, folder, projects_file) as url:
            study = {"url": url, "accounts": accounts}
            for walker, pid in ids.items():
                web = signed_in(study, pid)
                for entry in entries:
                    served = walks.setdefault(entry, {}).setdefault(walker, [])
                    for _ in range(200):
                        task = web.get(f"/api/next/{entry}").json()
                        if "finished" in task:
                            break
                        assert "ref" in task, task
                        full = _task(label_studio, book.ref(pid, task["ref"]).task_id)
                        served.append((full["id"], str(full["data"]["item_id"]), str(full["meta"].get("system"))))
                        saved = web.post(f"/api/submit/{task['ref']}", json={"result": _answer(own.entry(entry))})
                        assert saved.json() == {"ok": True}, saved.text
        return walks[protocol]
    return walk


@pytest.mark.parametrize("protocol", PROJECTS)
def test_each_participant_of_the_gateway_has_an_order_of_their_own(reg, walked, protocol):
    """Through the gateway: the two participants meet the tasks (or, with counterbalanced lists, the items) in
    different orders; neither meets two tasks of one context back to back where the part has others to put between;
    where a context has several versions (dialogue: the human reference and a system; health: four versions), they
    come in another order for the other participant."""
    walks = walked(protocol)
    a, b = (walks[pid] for pid in WALKERS)
    assert a and b, walks
    for served in (a, b):
        contexts = [item for _, item, _ in served]
        assert adjacent(contexts, lambda c: c) == fewest_adjacent(contexts), served
    if len(a) >= 5:  # (of four tasks, 1 pair of participants in 24 shares an order by chance, as this seeded study's
        # two do in cmv_tom's example; that orders are uniform over participants is tested in test_order.py)
        assert [(t, item) for t, item, _ in a] != [(t, item) for t, item, _ in b]
    versions = {w: {} for w in walks}
    for walker, served in walks.items():
        for _, item, system in served:
            versions[walker].setdefault(item, []).append(system)
    several = [item for item, systems in versions["A"].items() if len(systems) > 1]
    if several:  # the versions of one context come in another order for the other participant
        assert any(versions["A"][item] != versions["B"].get(item) for item in several), versions


@pytest.fixture(scope="module")
def label_studio_annotators(label_studio, client, tmp_path_factory) -> dict[str, str]:
    """Two annotators' accounts in Label Studio (each test gives them a project of its own): walker -> API token."""
    only_on_the_last_database(label_studio)
    folder = tmp_path_factory.mktemp("ls-annotators") / "participants"
    ids = {w: f"LSORDER{w}" for w in WALKERS}
    participants.add(client, list(ids.values()), folder)
    accounts = participants.load_accounts(folder)
    return {w: client.log_in(accounts[pid].email, accounts[pid].password) for w, pid in ids.items()}


# (circa_part2's lists are Label Studio projects like circa_part1's: its stream is the same)
@pytest.mark.parametrize("protocol, order", [(p, "random") for p in PROJECTS if p != "circa_part2"]
                         + [("dialogue", "sequential")])
def test_label_studio_s_own_stream(label_studio, client, label_studio_annotators, tmp_path, protocol, order):
    """In Label Studio itself (annotators who work there, not through the gateway), per protocol, two annotators
    work through its own stream. With `order: random` (every shipped protocol) they get different orders and no
    system has a fixed place in the contexts that have several versions (Label Studio's uniform sampling, which can
    put two tasks of one context back to back: docs/participants.md says so, and the gateway is the channel that
    rules it out). With `order: sequential` (dialogue's example: ten contexts, the human reference listed first in
    each) the first annotator gets the import's order, which has no context twice in a row and the reference first
    in only some contexts."""
    from .test_cli import _projects_file

    only_on_the_last_database(label_studio)

    def own(raw):
        for entry in raw["projects"].values():
            entry.pop("crowd", None)
            entry.pop("after", None)
        raw["projects"][protocol].update(
            {"title": f"LS order {protocol} {order}", "order": order, "annotators_per_task": len(WALKERS)})
    project = registry.load(_projects_file(tmp_path, own)).entry(protocol)
    report = import_files(project, importers.get(project.importer), example_files(protocol), client)
    project_id = report.project_id
    orders = {}
    for walker, token in label_studio_annotators.items():
        with httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {token}"}, timeout=60) as web:
            served = []
            while (task := web.get(f"/api/projects/{project_id}/next")).status_code == 200:
                task = task.json()  # (Label Studio's annotators' own API: the task with its data and meta)
                served.append((task["id"], str(task["data"]["item_id"]), str(task["meta"].get("system"))))
                web.post(f"/api/tasks/{task['id']}/annotations", params={"project": project_id},
                         json={"result": _answer(project)}).raise_for_status()
            orders[walker] = served
    a, b = (orders[walker] for walker in WALKERS)
    assert sorted(a) == sorted(b) and len(a) == len(list(client.tasks(project_id))) > 0
    firsts, chance = {}, 1.0  # the system each annotator met first in each context that has several versions
    for walker, served in orders.items():
        versions = {}
        for _, item, system in served:
            versions.setdefault(item, []).append(system)
        for item, systems in versions.items():
            if len(systems) > 1:
                chance *= 1 / len(systems) if firsts else 1
                firsts[walker, item] = systems[0]
    if order == "random":
        if len(a) >= 5:
            assert a != b
        if chance < 1e-4:  # (the same system first everywhere by chance: 2 in 2**20 for dialogue; health's example,
            # one scenario, is too small to tell)
            assert len(set(firsts.values())) > 1, firsts
    else:  # the first annotator meets the import's order; Label Studio then gives the second the tasks others
        # started first (breadth first), in random order: its sequential stream is the same for everyone only
        # while no task has its first answer yet
        assert [t for t, _, _ in a] == sorted(t for t, _, _ in a)
        contexts = [item for _, item, _ in a]
        assert adjacent(contexts, lambda c: c) == 0
        assert len({system for (walker, _), system in firsts.items() if walker == "A"}) == 2, firsts
