"""The study's ledger on its own (no Label Studio): several processes writing at once lose nothing and break no
rule, earlier files are taken over, and a newer schema is refused. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import stat
from collections import Counter
from pathlib import Path

import pytest

from evalstudio.crowd import ledger
from evalstudio.crowd.ledger import Account, Ledger

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    """The ledger's database: SQLite in the folder, or a fresh PostgreSQL database named by EVALSTUDIO_LEDGER_URL
    (inherited by the processes a test starts)."""
    if request.param == "postgresql":
        monkeypatch.setenv(ledger.URL_ENV, request.getfixturevalue("postgres").create_database(
            f"ledger_{os.urandom(4).hex()}"))
    else:
        monkeypatch.delenv(ledger.URL_ENV, raising=False)
    return request.param


def _in_processes(target, jobs: list[tuple]) -> list:
    """Run target(*job) in one process per job, all at once; their results in job order. Spawned, not forked: a
    fork of the test process (which runs threads: pytest-xdist's, the servers' readers) can deadlock on a lock some
    thread held at that moment."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(len(jobs)) as pool:
        return pool.starmap(target, jobs)


def _sign_up(folder: str, ids: list[str], cap: int | None) -> list[str]:
    book = Ledger(Path(folder))
    taken = []
    for pid in ids:
        try:
            book.reserve(Account(pid, f"{pid.lower()}@participants.invalid", "pw", access="a" * 24), cap=cap,
                         exclusive=True)
            taken.append(pid)
        except (ledger.StudyFull, ledger.Taken):
            pass
        book.assign_list("circa_part2", pid, [1, 2, 3], None)
    return taken


def test_concurrent_sign_ups_keep_every_one_and_the_cap(backend, tmp_path):
    """Four processes sign up 40 ids each (10 of them the same in every process) and assign lists at once: every
    id is recorded exactly once, each by one process, the lists are as even as the order allows, and with a cap
    exactly the cap is taken."""
    folder = tmp_path / "study"
    Ledger(folder).close()
    shared = [f"SAME{i}" for i in range(10)]
    jobs = [(str(folder), shared + [f"P{p}X{i}" for i in range(30)], None) for p in range(4)]
    taken = _in_processes(_sign_up, jobs)
    book = Ledger(folder)
    accounts = book.accounts()
    assert len(accounts) == 10 + 4 * 30
    assert sorted(pid for t in taken for pid in t) == sorted(accounts)  # each by exactly one process
    sizes = Counter(book.lists()["circa_part2"].values())
    assert sum(sizes.values()) == len(accounts) and max(sizes.values()) - min(sizes.values()) <= 1

    capped = tmp_path / "capped"
    Ledger(capped).close()
    taken = _in_processes(_sign_up, [(str(capped), [f"C{p}X{i}" for i in range(20)], 30) for p in range(4)])
    assert sum(map(len, taken)) == 30 == Ledger(capped).count()


def _claim(folder: str, participant: str, task_id: int) -> str:
    book = Ledger(Path(folder))
    ref = book.serve(participant, "dialogue", task_id)
    return book.record(ref.ref, "[]", overlap=2)


def test_at_most_overlap_answers_per_task_whatever_the_race(backend, tmp_path):
    """Eight participants in eight processes answer one task whose overlap is 2: exactly two answers count, the
    other six are surplus; a participant served the same task twice holds one reference."""
    folder = tmp_path / "study"
    Ledger(folder).close()
    states = _in_processes(_claim, [(str(folder), f"p{i}", 7) for i in range(8)])
    assert Counter(states) == {"ok": 2, "full": 6}
    book = Ledger(folder)
    answered = [r for r in book.answers() if r.answered is not None]
    assert len(answered) == 2 and len({r.participant for r in answered}) == 2
    first, again = book.serve("p9", "dialogue", 8), book.serve("P9", "dialogue", 8)
    assert first.ref == again.ref and first.served == again.served


def test_an_answer_counts_once_the_ledger_has_it_and_label_studio_receives_it_behind(backend, tmp_path):
    """An answer is recorded with its measured time and counts at once; a second submission is its next version;
    the quota counts recorded answers only. What Label Studio does not hold yet is pending (in the order
    answered), and the lag says so until the sync writer records each version Label Studio holds."""
    book = Ledger(tmp_path / "study")
    book.reserve(Account("P1", "p1@participants.invalid", "pw", None, access="c" * 24))
    ref = book.serve("p1", "dialogue", 1)
    assert book.record(ref.ref, '[{"a": 1}]', quota=1) == "ok"
    assert book.answered_count("P1", "dialogue") == 1 and book.open_ref("p1", "dialogue") is None
    assert book.history("p1", "dialogue") == [ref.ref]
    other = book.serve("p1", "dialogue", 2)
    assert book.record(other.ref, "[]", quota=1) == "quota"  # one answer is the quota: nothing recorded
    assert book.record(ref.ref, '[{"a": 2}]', quota=1) == "updated"
    lag = book.lag()
    assert (lag.answers, lag.accounts) == (1, 1)
    assert book.pending_accounts() == [("P1", "p1@participants.invalid", True)]
    assert [p.user_id for p in book.pending_answers(["dialogue"])] == [None]  # (the writer makes its account first)
    book.account_made("P1", 7)
    [pending] = book.pending_answers(["dialogue"])
    assert (pending.user_id, pending.result, pending.version) == (7, '[{"a": 2}]', 2) and pending.seconds >= 0
    assert book.pending_answers(["circa_part1"]) == []  # another part: another gateway's writer
    book.answer_synced(ref.ref, 55, 1)  # an earlier version arrived: still behind
    assert book.lag().answers == 1
    book.answer_refused(ref.ref, "HTTP 400: no")
    assert book.lag().refused == ("answer of p1 to task 1: HTTP 400: no",)
    book.answer_synced(ref.ref, 55, 2)
    assert book.lag().behind == 0 and book.lag().refused == () and book.times()[55] >= 0


def test_one_sync_writer_per_study(backend, tmp_path):
    """The sync lease: one holder per study; taken over at once from a process of this host that is gone."""
    book = Ledger(tmp_path / "study")
    assert book.sync_lease("dialogue", "host-a:1")
    assert not book.sync_lease("dialogue", "host-b:2") and book.sync_lease("circa", "host-b:2")
    assert book.sync_lease("dialogue", "host-a:1")  # renewed
    gone = _in_processes(_own_lease, [(str(tmp_path / "study"),)])  # a process of this host that took it and ended
    assert gone == [True] and book.sync_lease("cmv")  # void at once


def test_what_tasks_show_is_the_ledgers_record(backend, tmp_path):
    """Every participant is shown what the ledger first recorded of a task; a change made in Label Studio later is
    noted for the operator (once, however often it is read again) and shown only once accepted."""
    book = Ledger(tmp_path / "study")
    assert book.record_tasks("dialogue", {1: '{"text": "a"}', 2: '{"text": "b"}'}) == {1: '{"text": "a"}',
                                                                                   2: '{"text": "b"}'}
    changed = {1: '{"text": "a, changed"}', 2: '{"text": "b"}', 3: '{"text": "c"}'}
    assert book.record_tasks("dialogue", changed) == {1: '{"text": "a"}', 2: '{"text": "b"}', 3: '{"text": "c"}'}
    [(part, task, when)] = book.changed_tasks()
    assert (part, task) == ("dialogue", 1)
    book.record_tasks("dialogue", changed)
    assert book.changed_tasks() == [(part, task, when)]  # noted once
    assert book.record_tasks("circa_part1", {1: "{}"}) == {1: "{}"}  # another part's task 1
    assert book.record_tasks("dialogue", changed, accept=True)[1] == '{"text": "a, changed"}'
    assert book.changed_tasks() == [] and book.record_tasks("dialogue", changed)[1] == '{"text": "a, changed"}'
    assert book.record_tasks("dialogue", {2: '{"text": "b"}'}) == {2: '{"text": "b"}'}  # a task gone: not served


def _own_lease(folder: str) -> bool:
    return Ledger(Path(folder)).sync_lease("cmv", seconds=3600)


def test_rate_limits_hold_across_processes(backend, tmp_path):
    folder = tmp_path / "study"
    Ledger(folder).close()
    allowed = _in_processes(_allow_many, [(str(folder),)] * 4)
    assert sum(allowed) == 20


def _allow_many(folder: str) -> int:
    book = Ledger(Path(folder))
    return sum(book.allow("address:203.0.113.9", 20) for _ in range(10))


def test_files_of_earlier_versions_are_taken_over_once(tmp_path, monkeypatch):
    """participants.json, lists.json and gateway.json of an earlier evalstudio: every account, list and the study
    link's key are in the ledger afterwards; the old files are renamed, not deleted."""
    from evalstudio.operations.serving import join_key

    monkeypatch.delenv(ledger.URL_ENV, raising=False)
    folder = tmp_path / "participants"
    folder.mkdir(mode=0o700)
    old = [{"participant_id": "OLD1", "email": "old1@participants.invalid", "password": "pw1", "user_id": 4,
            "closed": None, "access": "x" * 24},
           {"participant_id": "Old2", "email": "old2@participants.invalid", "password": None, "user_id": 5,
            "closed": "2026-11-01T10:00:00+00:00", "access": None}]
    (folder / "participants.json").write_text(json.dumps({"label_studio": "http://127.0.0.1:8080", "accounts": old}))
    (folder / "lists.json").write_text(json.dumps({"circa_part2": {"OLD1": 2}}))
    (folder / "gateway.json").write_text(json.dumps({"join_key": "k" * 24}))
    book = ledger.open_ledger(folder)
    accounts = book.accounts()
    assert {pid: (a.email, a.password, a.user_id, a.closed, a.access) for pid, a in accounts.items()} == {
        a["participant_id"]: (a["email"], a["password"], a["user_id"], a["closed"], a["access"]) for a in old}
    assert book.lists() == {"circa_part2": {"OLD1": 2}}
    assert join_key(folder) == "k" * 24
    assert book.setting("label_studio") == "http://127.0.0.1:8080"
    assert sorted(p.name for p in folder.iterdir() if "json" in p.name) == [
        "gateway.json", "lists.json.taken-over", "participants.json.taken-over"]
    assert stat.S_IMODE(os.stat(folder / ledger.FILE).st_mode) == 0o600
    assert Ledger(folder).accounts() == accounts  # opened again: nothing taken twice


def test_a_broken_or_newer_ledger_is_refused_with_its_path(tmp_path, monkeypatch):
    monkeypatch.delenv(ledger.URL_ENV, raising=False)
    folder = tmp_path / "newer"
    Ledger(folder).close()
    with sqlite3.connect(folder / ledger.FILE) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(ledger.LedgerError, match="newer evalstudio"):
        Ledger(folder)
    broken = tmp_path / "broken"
    broken.mkdir(mode=0o700)
    (broken / ledger.FILE).write_bytes(b"not a database" * 100)
    with pytest.raises(ledger.LedgerError, match=str(broken / ledger.FILE)):
        Ledger(broken)
    (broken / ledger.FILE).unlink()
    (broken / "participants.json").write_text("{not json")
    with pytest.raises(ledger.LedgerError, match="participants.json: not a participants file"):
        Ledger(broken)


def test_a_postgresql_ledger_opened_without_its_url_is_refused_never_started_anew(tmp_path, monkeypatch):
    """A folder whose ledger is in PostgreSQL (its ledger.json pointer), opened from a shell without the ledger's
    URL, made a new empty SQLite ledger beside the pointer: `export` said 0 background answers, a gateway would have
    asked everyone's consent again."""
    monkeypatch.delenv(ledger.URL_ENV, raising=False)
    folder = tmp_path / "participants"
    folder.mkdir(mode=0o700)
    (folder / ledger.POINTER).write_text('{"schema": "evalstudio_0123456789ab"}\n')
    with pytest.raises(ledger.LedgerError, match=f"{ledger.POINTER}: this study's ledger is in PostgreSQL; set "
                                                 f"{ledger.URL_ENV}"):
        ledger.open_ledger(folder)
    assert not (folder / ledger.FILE).exists()


def test_a_backup_is_a_private_consistent_copy(tmp_path, monkeypatch):
    from .test_cli import run

    monkeypatch.delenv(ledger.URL_ENV, raising=False)
    folder = tmp_path / "participants"
    book = Ledger(folder)
    book.reserve(Account("B1", "b1@participants.invalid", "secret-pw", 7, access="c" * 24))
    ref = book.serve("B1", "dialogue", 3)
    book.record(ref.ref, "[]")
    book.answer_synced(ref.ref, 11, 1)
    copy = tmp_path / "backup.sqlite3"
    done = run("participants", "backup", str(copy), "--folder", str(folder))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(os.stat(copy).st_mode) == 0o600
    restored = tmp_path / "restored"
    restored.mkdir(mode=0o700)
    copy.rename(restored / ledger.FILE)
    again = Ledger(restored)
    assert again.accounts() == book.accounts() and again.times() == book.times() and list(again.times()) == [11]
    (tmp_path / "taken").write_text("x")
    refused = run("participants", "backup", str(tmp_path / "taken"), "--folder", str(folder))
    assert refused.returncode != 0 and "exists already" in refused.stderr
    assert (tmp_path / "taken").read_text() == "x"


# where each study's ledger is in a participants folder: (steps, each a study served or added with its options,
# and the folder each step must get, relative to the participants folder)
NAMESPACES = [
    ("two studies: the first keeps the folder, the second its own", [("dialogue", False, "."), ("circa", False, "circa"),
                                                                     ("dialogue", False, "."), ("circa", False, "circa")]),
    ("a shared pool serves every study", [(None, True, "."), ("dialogue", False, "."), ("circa", False, ".")]),
    ("--shared-pool on a study's folder makes it the pool", [("dialogue", False, "."), ("circa", True, "."),
                                                            ("health", False, ".")]),
    ("a folder of an earlier version (no owner) is taken by the first study", [("", False, "."),
                                                                               ("circa", False, "."),
                                                                               ("dialogue", False, "dialogue")]),
]


@pytest.mark.parametrize("steps", [row[1] for row in NAMESPACES], ids=[row[0] for row in NAMESPACES])
def test_each_study_has_its_ledger_in_the_participants_folder(tmp_path, backend, steps):
    from evalstudio.crowd import participants

    root = tmp_path / "participants"
    for study, shared, expected in steps:
        if study == "":  # an earlier version's ledger: in the folder, owned by no study
            root.mkdir(mode=0o700)
            ledger.open_ledger(root)
            continue
        got = participants.study_folder(root, study, shared=shared, claim=True)
        assert got == (root / expected).resolve() or got == root / expected, (study, got)
        ledger.open_ledger(got)  # (the gateway opens it)
        if study is not None:  # and read back without claiming, as status and report find it
            assert participants.study_folder(root, study) == got


def _steps(folder: str, participant: str, outcome: str) -> str:
    return Ledger(Path(folder)).take_step(participant, "consent", json.dumps({"accepted": outcome == "given"}),
                                          outcome).outcome


def test_a_front_matter_step_is_recorded_once_whatever_the_race(backend, tmp_path):
    """Issue 70: two processes record one participant's consent at once, one as given and one as declined (a
    participant clicking both in two tabs): the ledger keeps one, both processes read that one, and a later step
    of another kind is kept beside it with the server's time."""
    outcomes = _in_processes(_steps, [(str(tmp_path), "P1", "given"), (str(tmp_path), "p1", "declined")])
    assert outcomes[0] == outcomes[1] in ("given", "declined")
    book = Ledger(tmp_path)
    book.take_step("P1", "background", json.dumps({"age": 30}))
    steps = book.steps_of("p1")
    assert sorted(steps) == ["background", "consent"] and steps["consent"].outcome == outcomes[0]
    assert steps["consent"].at <= steps["background"].at and [s.step for s in book.all_steps()] == ["consent",
                                                                                                   "background"]
