"""Counterbalanced lists (projects.yaml `lists:`; Circa Part II uses two): each list holds one version of every
item, the versions of an item are spread over the lists, and through the gateway each participant works in one
list only, so that no participant sees two versions of one item (Circa: the model's interpretation and the gold
label of one conversation). Checked offline for the assignment, and live with several participants at the same
time through a real gateway in front of a real Label Studio, read back through Label Studio's API."""

from __future__ import annotations

import json
import random
import threading
from collections import Counter

import httpx
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalstudio import importers
from evalstudio.crowd import ledger, participants
from evalstudio.protocols import registry
from evalstudio.protocols.registry import Lists
from evalstudio.tasks import lists
from evalstudio.tasks.placement import placement_problems
from evalstudio.tasks.scanning import iter_tasks, scan

from .conftest import example_files, gateway_process, only_on_the_first_database


def _tasks(design: dict[str, list[str]]):
    return [(f"f.csv:{n}", {"item_id": item, "system": version})
            for n, (item, version) in enumerate(((i, v) for i, vs in design.items() for v in vs), start=1)]


@given(st.integers(2, 5), st.dictionaries(st.text("abcdef", min_size=1, max_size=6),
                                         st.sets(st.sampled_from("vwxyz"), min_size=1, max_size=5), max_size=30),
       st.sampled_from(["every_list", "spread"]), st.randoms())
def test_each_list_holds_one_version_of_every_item(count, design, fillers, rnd):
    spec = Lists(count=count, fillers=fillers)
    design = {item: sorted(versions) for item, versions in design.items()}
    records = _tasks(design)
    rnd.shuffle(records)  # the order of the files changes nothing: an item's rotation comes from its id
    versions, problems = lists.collect(records, spec)
    too_many = {item for item, vs in design.items() if len(vs) > count}
    assert {p.message.split("'")[1] for p in problems} == too_many
    if too_many:
        return
    held = {number: Counter() for number in range(1, count + 1)}
    for item, item_versions in versions.items():
        placed = {v: lists.lists_of_task(item, v, item_versions, spec) for v in item_versions}
        if len(item_versions) > 1:
            assert all(len(numbers) == 1 for numbers in placed.values())  # each version in exactly one list
            assert len({numbers[0] for numbers in placed.values()}) == len(item_versions)  # in different lists
        else:
            assert len(placed[item_versions[0]]) == (count if fillers == "every_list" else 1)
        for numbers in placed.values():
            for number in numbers:
                held[number][item] += 1
    assert all(n == 1 for counter in held.values() for n in counter.values())  # never two versions in one list
    if fillers == "every_list":  # every item with as many versions as lists is in every list
        full = {item for item, vs in design.items() if len(vs) in (1, count)}
        assert all(full <= set(counter) for counter in held.values())


def test_the_two_versions_of_circa_part2_go_to_different_lists(reg, importer_for):
    """The shipped Circa Part II: the 30 conversations the model got wrong have two versions (its interpretation,
    the gold label): one in each list; the 30 it got right are in both lists."""
    parts = reg.parts("circa_part2")
    assert [p.name for p in parts] == ["circa_part2_list1", "circa_part2_list2"]
    scans = [scan(p, importer_for("circa"), example_files("circa")) for p in parts]
    per_list = [[item[1] for item in iter_tasks(p, importer_for("circa"), example_files("circa"), versions=s.versions)]
                for p, s in zip(parts, scans)]
    for tasks in per_list:
        items = [t["item_id"] for t in tasks]
        assert len(items) == len(set(items)) == 60  # one version of each of the 60 conversations
    roles = [Counter(tuple(t["shown_label_is"]) for t in tasks) for tasks in per_list]
    assert [r[("prediction", "gold")] for r in roles] == [30, 30]
    assert roles[0][("prediction",)] + roles[1][("prediction",)] == 30  # every version in exactly one list
    assert roles[0][("prediction",)] == roles[1][("gold",)]
    assert {t["evalstudio_id"] for t in per_list[0]} & {t["evalstudio_id"] for t in per_list[1]} == {
        t["evalstudio_id"] for t in per_list[0] if tuple(t["shown_label_is"]) == ("prediction", "gold")}


def test_an_item_with_more_versions_than_lists_is_refused(reg, importer_for, tmp_path):
    project = reg.entry("health").model_copy(update={"lists": Lists(count=2), "list_of": "health", "list_number": 1,
                                                     "name": "health_list1", "design": {}})
    result = scan(project, importer_for("health"), example_files("health"))
    assert result.design and all("with 2 lists one list would hold two of them" in p.message for p in result.design)


def test_registry_expands_lists_and_refuses_what_cannot_work(tmp_path):
    from .test_cli import _projects_file

    def long_title(raw):
        raw["projects"]["circa_part2"]["title"] = "x" * 45
    with pytest.raises(registry.RegistryError, match="longer than Label Studio's 50 characters"):
        registry.load(_projects_file(tmp_path, long_title))

    def set_by_hand(raw):
        raw["projects"]["dialogue"]["list_number"] = 2
    with pytest.raises(registry.RegistryError, match="list_of and list_number are set by the registry"):
        registry.load(_projects_file(tmp_path, set_by_hand))

    def first_has_lists(raw):
        raw["projects"]["circa_part1"]["lists"] = {"count": 2}
    with pytest.raises(registry.RegistryError, match="a part done first cannot have lists"):
        registry.load(_projects_file(tmp_path, first_has_lists))
    reg = registry.load(_projects_file(tmp_path, lambda raw: None))
    assert reg.study("circa").title == "Circa Part II: explain indirect answers"  # no list in the study's title
    assert [p.entry for p in reg.parts("circa")] == ["circa_part1", "circa_part2", "circa_part2"]


# ---- live: a real Label Studio, the real gateway process, several participants at the same time --------------
PARTICIPANTS = ["LIST1", "LIST2", "LIST3", "LIST4", "LIST5"]
TASKS_EACH = 14


def _work(url: str, account, found: dict, failures: list) -> None:
    """One participant through the gateway's API, as the labeling page calls it: next task, submit, repeated."""
    try:
        with httpx.Client(base_url=url, timeout=120, headers={"X-Evalstudio": "1"}) as web:
            assert web.get(f"/s/{account.participant_id}/{account.access}").status_code == 303
            seen = []
            for _ in range(TASKS_EACH):
                task = web.get("/api/next/circa_part2").json()
                if "finished" in task:
                    break
                seen.append(task["data"])
                result = [{"from_name": "explanation_rating", "to_name": "explanation", "type": "rating",
                           "value": {"rating": random.randint(1, 5)}}]
                answer = web.post(f"/api/submit/{task['ref']}", json={"result": result})
                assert answer.status_code == 200, answer.text
            # the participant cannot pick a list (nor name a list's project)
            assert web.get("/api/next/circa_part2_list1").status_code == 404
            assert web.get("/api/next/circa_part2_list2").status_code == 404
            found[account.participant_id] = seen
    except Exception as e:  # noqa: BLE001 - reported by the test thread
        failures.append(f"{account.participant_id}: {type(e).__name__}: {e}")


def test_participants_work_in_one_list_each_and_never_see_two_versions(label_studio, client, tmp_path):
    """Five participants at the same time through the gateway of Circa Part II (two lists): the gateway spreads them
    evenly (3 and 2), each participant's annotations are all in their list's project, no participant annotated two
    versions of one conversation, a second sign-in keeps the list, the export names every rating's list, and a
    participant who annotates in the other list anyway (possible only in Label Studio itself) is named by `status`.
    Once, on the first database (the CMV lists' test below runs on the last): the lists are the import's and the
    gateway's (its ledger is the participants folder's SQLite whatever Label Studio's database)."""
    only_on_the_first_database(label_studio)
    from .test_cli import _projects_file, run

    def own(raw):  # projects of its own; Part II without Part I first
        raw["projects"]["circa_part2"]["title"] = "Lists test: explanations"
        raw["projects"]["circa_part2"]["crowd"].pop("after")
    projects_file = _projects_file(tmp_path, own)
    reg = registry.load(projects_file)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file), "EVALSTUDIO_RECORDS": str(tmp_path / "records")}
    files = [str(f) for f in example_files("circa") if "model_explanations" in f.name]
    imported = run("import", "circa_part2", *files, env=env)
    assert imported.returncode == 0, imported.stderr
    assert "list 1 of 2: " in imported.stdout and "list 2 of 2: " in imported.stdout
    ids = {p.list_number: client.require_project(p) for p in reg.parts("circa_part2")}
    folder = tmp_path / "participants"
    participants.add(client, PARTICIPANTS, folder)
    accounts = participants.load_accounts(folder)
    with gateway_process(label_studio, "circa_part2", folder, projects_file) as url:
        found, failures = {}, []
        threads = [threading.Thread(target=_work, args=(url, accounts[pid], found, failures)) for pid in PARTICIPANTS]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        assert not failures, failures
        assigned = ledger.open_ledger(folder).lists()["circa_part2"]
        assert sorted(Counter(assigned.values()).values()) == [2, 3]  # evenly, as far as five allow
        # a new session (signing in again) stays in the list: its next answer lands there (checked below)
        with httpx.Client(base_url=url, timeout=120, headers={"X-Evalstudio": "1"}) as web:
            assert web.get(f"/s/LIST1/{accounts['LIST1'].access}").status_code == 303
            task = web.get("/api/next/circa_part2").json()
            assert "finished" not in task, task
            result = [{"from_name": "explanation_rating", "to_name": "explanation", "type": "rating",
                       "value": {"rating": 2}}]
            assert web.post(f"/api/submit/{task['ref']}", json={"result": result}).status_code == 200
            found["LIST1"].append(task["data"])

    by_user = {a.user_id: pid for pid, a in accounts.items()}
    annotated: dict[str, list[tuple[int, str]]] = {pid: [] for pid in PARTICIPANTS}
    for number, project_id in ids.items():  # read back through Label Studio's API
        for page in client.full_task_pages(project_id):
            for task in page:
                for annotation in task["annotations"]:
                    user = annotation["completed_by"]
                    pid = by_user.get(user.get("id") if isinstance(user, dict) else user)
                    if pid:
                        annotated[pid].append((number, task["data"]["item_id"]))
    for pid, done in annotated.items():
        assert len(done) == len(found[pid]) > 0
        assert {number for number, _ in done} == {assigned[pid]}  # one list only
        items = [item for _, item in done]
        assert len(items) == len(set(items))  # never two versions of one conversation

    out = tmp_path / "annotations.csv"
    exported = run("export", "circa_part2", "-o", str(out), env=env)
    assert exported.returncode == 0, exported.stderr
    frame = pd.read_csv(out)
    assert (frame["project"].str.rsplit("_list", n=1).str[1].astype(int) == frame["list"]).all()
    assert set(frame["list"]) == {1, 2}

    # a participant who rates in the other list too (through Label Studio itself, not the gateway) is named
    crossing = "LIST2"
    other = 3 - assigned[crossing]
    task = next(t for page in client.full_task_pages(ids[other]) for t in page if not t["annotations"])
    client.sdk.annotations.create(id=task["id"], completed_by=accounts[crossing].user_id, result=[
        {"from_name": "explanation_rating", "to_name": "explanation", "type": "rating", "value": {"rating": 3}}])
    status = run("status", "circa_part2", "--participants", str(folder), env={**env, "COLUMNS": "250"})
    assert status.returncode == 0, status.stderr
    assert "worked in lists 1, 2 of circa_part2" in " ".join(status.stdout.split())


def test_cmv_measures_persuasiveness_blind_and_nothing_moves_after_generate(label_studio, client, tmp_path):
    """CMV, as a study runs: the threads are imported (delta threads without ToM values, and non-delta ones); then
    `generate` gives the delta threads their ToM values and the same files are imported again. The delta threads go
    to cmv_tom and stay, unchanged, in cmv_threads: cmv_threads, the instrument that measures persuasiveness, holds
    delta and non-delta threads mixed; nothing is deleted or moved, and `status` finds nothing changed. Through the
    gateway a participant rates their blind sample first, drawn from every thread, then cmv_tom, where the delta
    threads come again; with the order removed, one who answered a delta thread in cmv_tom never gets it in
    cmv_threads. Without
    `shares_items` an item still belongs to one project of a study: the import refuses it with file:line, and once
    the researcher has deleted the task(s) it names (the move it asks for), imports it and `status` is clean."""
    from .conftest import only_on_the_last_database
    from .test_cli import _projects_file, run
    from .test_gateway import signed_in

    only_on_the_last_database(label_studio)  # (what it checks is the import's and the gateway's, not the database's)

    def own(raw):
        raw["projects"]["cmv_tom"].update(title="Blind test: tom", annotators_per_task=2)  # (two participants)
        raw["projects"]["cmv_threads"].update(title="Blind test: threads", annotators_per_task=2)
    projects_file = _projects_file(tmp_path, own)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file), "EVALSTUDIO_RECORDS": str(tmp_path / "records")}
    delta = [json.loads(line) for line in example_files("cmv")[-1].read_text(encoding="utf-8").splitlines()]
    assert all(r.get("delta", True) and r.get("tom") for r in delta)
    # and as many non-delta threads (the contrast): the same posts, another comment, no delta awarded
    records = [x for r in delta for x in (r, {
        "id": f"{r['id']}-nd", "post": r["post"], "delta": False,
        "comment": {"id": "nd", "author": "someone", "text": "I do not think so, but I have no argument."},
        "op_reply": {"author": r["post"].get("author", "op"), "text": "Thanks, that does not change my view."}})]
    before = tmp_path / "threads.jsonl"  # as read before `generate`: no ToM values
    before.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "tom"}) + "\n" for r in records))
    after = tmp_path / "threads_tom.jsonl"  # as `generate` writes it
    after.write_text("".join(json.dumps(r) + "\n" for r in records))
    first = run("import", "cmv", str(before), env=env)
    assert first.returncode == 0 and f"cmv_threads: {len(records)} task(s) created" in first.stdout, first.stderr
    second = run("import", "cmv", str(after), env=env)
    assert second.returncode == 0, second.stderr
    assert f"cmv_tom: {len(delta)} task(s) created" in second.stdout
    assert f"cmv_threads: 0 task(s) created, {len(records)} already present" in second.stdout, second.stdout
    threads_id = client.find_project("Blind test: threads")
    threads = client.export_tasks(threads_id)
    assert {t["meta"]["delta"] for t in threads} == {True, False}  # mixed in the one instrument
    assert all("delta_reply" not in t["data"] and "tom" not in t["meta"] for t in threads)
    status = run("status", "cmv", env={**env, "COLUMNS": "250"})
    assert status.returncode == 0 and "CHANGED SINCE SETUP" not in status.stderr, status.stderr

    folder = tmp_path / "participants"
    participants.add(client, ["BLIND1"], folder)
    with gateway_process(label_studio, "cmv", folder, projects_file) as url:
        web = signed_in({"url": url, "accounts": participants.load_accounts(folder)}, "BLIND1")
        book = ledger.open_ledger(folder)
        # the blind part first (issue 53): cmv_tom shows that a comment got a delta, so it opens only after
        # cmv_threads, and the blind sample is drawn from every thread, delta and non-delta alike
        assert "Please finish “Blind test: threads” first" in web.get("/api/next/cmv_tom").json()["finished"]
        assert "Starts once you have finished “Blind test: threads”" in web.get("/").text
        seen = {}
        for entry in ("cmv_threads", "cmv_tom"):
            seen[entry] = []
            while "ref" in (task := web.get(f"/api/next/{entry}").json()):
                seen[entry].append(task["data"]["post"])
                controls = registry.load(projects_file).get(entry).interface.controls
                result = [{"from_name": c.name, "to_name": c.to_name[0], "type": "choices",
                           "value": {"choices": ["Yes"]}} for c in controls if c.name.startswith("q")]
                assert web.post(f"/api/submit/{task['ref']}", json={"result": result}).json() == {"ok": True}
        assert len(seen["cmv_threads"]) == len(records)  # every thread, blind: nothing taken out of the pool
        assert len(seen["cmv_tom"]) == len(delta)  # and every delta sample after it, met again with its delta
        assert book.answered_count("BLIND1", "cmv_threads") == len(records)
    # met twice, in order: not a warning (status flags only an item met in two unordered parts)
    status = run("status", "cmv", "--participants", str(folder), env={**env, "COLUMNS": "250"})
    assert status.returncode == 0 and "two projects" not in " ".join(status.stdout.split()), status.stdout

    def unordered(raw):  # a researcher's study without the order: one item, once per participant
        own(raw)
        raw["projects"]["cmv_tom"]["crowd"].pop("after")
    (tmp_path / "unordered").mkdir()
    participants.add(client, ["BLIND2"], folder)
    with gateway_process(label_studio, "cmv", folder, _projects_file(tmp_path / "unordered", unordered)) as url:
        web = signed_in({"url": url, "accounts": participants.load_accounts(folder)}, "BLIND2")
        for entry, expected in (("cmv_tom", len(delta)), ("cmv_threads", len(records) - len(delta))):
            served = 0
            while "ref" in (task := web.get(f"/api/next/{entry}").json()):
                controls = registry.load(projects_file).get(entry).interface.controls
                result = [{"from_name": c.name, "to_name": c.to_name[0], "type": "choices",
                           "value": {"choices": ["No"]}} for c in controls if c.name.startswith("q")]
                assert web.post(f"/api/submit/{task['ref']}", json={"result": result}).json() == {"ok": True}
                served += 1
            assert served == expected, entry  # the delta threads: met once, in cmv_tom

    def one_project_per_item(raw):
        own(raw)
        raw["projects"]["cmv_threads"].pop("shares_items")
        raw["projects"]["cmv_tom"]["title"] = "Placement test: tom"
        raw["projects"]["cmv_threads"]["title"] = "Placement test: threads"
    strict = tmp_path / "strict"
    strict.mkdir()
    env["EVALSTUDIO_PROJECTS"] = str(_projects_file(strict, one_project_per_item))
    assert run("import", "cmv", str(before), env=env).returncode == 0
    refused = run("import", "cmv", str(after), env=env)
    assert refused.returncode == 2  # invalid input
    line = 1 + records.index(delta[0])
    assert f"{after}:{line}: item_id: item '{delta[0]['id']}' is already in cmv_threads" in refused.stderr
    assert client.find_project("Placement test: tom") is None or \
        client.task_count(client.find_project("Placement test: tom")) == 0  # nothing half-imported
    # the move it asks for: delete the item's task from cmv_threads, import again; status calls it no tampering
    strict_threads = client.find_project("Placement test: threads")
    named = [t["id"] for t in client.export_tasks(strict_threads)
             if t["data"]["item_id"] in {r["id"] for r in delta}]
    assert len(named) == len(delta)
    client.delete_tasks(strict_threads, named)
    moved = run("import", "cmv", str(after), env=env)
    assert moved.returncode == 0 and f"cmv_tom: {len(delta)} task(s) created" in moved.stdout, moved.stderr
    status = run("status", "cmv", env={**env, "COLUMNS": "250"})
    assert status.returncode == 0 and "CHANGED SINCE SETUP" not in status.stderr, status.stderr
    # Label Studio is asked only about the projects a check reads: both projects of the CMV study, none for a
    # protocol of one project without lists (whose import then spends no request on the placement)
    reg = registry.load(env["EVALSTUDIO_PROJECTS"])
    asked = []

    class Counting:
        def __getattr__(self, name):
            return getattr(client, name)

        def find_project_counted(self, title):
            asked.append(title)
            return client.find_project_counted(title)

    parts = reg.parts("cmv")
    assert placement_problems(Counting(), parts, [scan(p, importers.get("cmv"), [after]) for p in parts], parts) == []
    assert sorted(set(asked)) == ["Placement test: threads", "Placement test: tom"]
    asked.clear()
    dialogue = reg.entry("dialogue")
    dialogue_scan = scan(dialogue, importers.get("dialogue"), example_files("dialogue")[:1])
    assert placement_problems(Counting(), [dialogue], [dialogue_scan], [dialogue]) == [] and asked == []
