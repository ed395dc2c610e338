"""The study's ledger: who may answer what, once, completely, and when.

Everything the gateway and the command line share about a crowd study lives here, in one transactional database:
participants and their sign-in secrets, sessions, the task references the gateway served with the server-side time
it served them, answers given through the gateway with their measured time, finished parts, counterbalanced lists,
sign-up and sign-in attempts. A restart, a crash or a second gateway process loses nothing and doubles nothing.

Where it lives: SQLite in the participants folder (`ledger.sqlite3`, WAL, a busy timeout, private 0600 in a 0700
folder), safe for several processes at once; or a PostgreSQL database when EVALSTUDIO_LEDGER_URL names one (e.g.
the one Label Studio keeps its data in), in a schema of its own whose name the folder's `ledger.json` records.

Every write is one short transaction taken exclusively (SQLite's BEGIN IMMEDIATE; a transaction-scoped advisory
lock on PostgreSQL), so read-check-write sequences such as "sign up unless the study is full" or "count this
answer unless the task has its answers" cannot interleave between processes. The schema has a version and a
migration path (MIGRATIONS); a participants.json and lists.json of earlier versions are taken over on first use.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

from .assistance import Assisted
from .ledger_doors import count_attempt, digest, new_session
from .ledger_front import FrontSteps
from .ledger_schema import LedgerError, LedgerUnreachable
from .ledger_store import FILE, POINTER, URL_ENV, Store, Transaction
from .ledger_sync import Lag, Synced

__all__ = ["FILE", "POINTER", "URL_ENV", "Ledger", "Account", "Ref", "Load", "task_load", "LedgerError", "LedgerUnreachable", "StudyFull",
           "Taken", "Lag", "open_ledger", "close_all", "digest"]

OLD_ACCOUNTS = "participants.json"  # where earlier versions kept the accounts (taken over)
HOLD_SECONDS = 1800  # a task served and not answered is held for its participant this long (Label Studio's lock)


class StudyFull(LedgerError):
    """The study has as many participants as crowd.max_participants allows."""


class Taken(LedgerError):
    """The participant id is in the ledger already."""


@dataclass
class Account:
    """A participant's account in the ledger: ids, e-mail, Label Studio password and user, sign-in code, origin."""
    participant_id: str
    email: str
    password: str | None  # None: the account existed before evalstudio knew it (its password is the person's)
    user_id: int | None = None
    closed: str | None = None  # when `close` took the account out of the organisation (ISO time)
    # the participant's sign-in code for the gateway (`evalstudio gateway`): the Label Studio password never leaves
    # this machine; participants sign in at the gateway with their personal link
    access: str | None = None
    source: str = "add"
    platform_study: str | None = None
    platform_session: str | None = None


ACCOUNT_COLUMNS = [f.name for f in fields(Account)]


@dataclass
class Ref:
    """A task the gateway served a participant."""
    ref: str
    participant: str
    part: str
    task_id: int
    number: int
    served: float
    lease: float | None = None  # (lease, owner: how versions before the ledger-first gateway sent answers)
    owner: str | None = None
    sent: bool = False  # a write of the answer went out to Label Studio: it may hold it
    annotation_id: int | None = None  # the answer's annotation in Label Studio, once it holds it
    answered: float | None = None  # when the ledger recorded the answer (server time): from then on it counts
    seconds: float | None = None
    surplus: bool = False
    result: str | None = None  # the checked answer, with each region's origin (JSON), as Label Studio receives it
    version: int = 0  # the participant's submissions of this answer (a change is a new version)
    synced: int = 0  # the version Label Studio holds
    sync_error: str | None = None  # why Label Studio refused the last write (tried again)


REF_COLUMNS = [f.name for f in fields(Ref)]


@dataclass(frozen=True)
class Load:
    """What the ledger knows of one task when a participant is served: answers stored, and holds (served to
    another participant who has not answered yet, within HOLD_SECONDS)."""
    answered: int = 0
    holding: int = 0


def task_load(task_id: int, outside: dict[int, int], taken: dict[int, Load]) -> int:
    """A task's answers (Label Studio's count, `outside`, or the ledger's, whichever is more) plus the holds of
    participants it was served to and who have not answered yet."""
    t = taken.get(task_id, Load())
    return max(outside.get(task_id, 0), t.answered) + t.holding


def _key(participant: str) -> str:
    return participant.lower()


class Ledger(FrontSteps, Synced, Assisted, Store):
    """One study's ledger (see the module's docstring): what it records, on its Store's connections. Thread-safe."""

    # ---- settings ---------------------------------------------------------------------------------------------
    def setting(self, key: str, make=None) -> str | None:
        """A study setting; with `make`, created by it the first time (one value for every process)."""
        with self._read() as tx:
            row = tx.one("SELECT value FROM settings WHERE key = ?", (key,))
        if row or make is None:
            return row[0] if row else None
        with self._write() as tx:
            tx.run("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, make()))
            return tx.one("SELECT value FROM settings WHERE key = ?", (key,))[0]

    def set_setting(self, key: str, value: str) -> None:
        """Store a study setting (replacing its value)."""
        with self._write() as tx:
            tx.run("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = ?",
                   (key, value, value))

    # ---- participants -----------------------------------------------------------------------------------------
    def accounts(self) -> dict[str, Account]:
        """Every participant's account by participant id, in the order they joined."""
        with self._read() as tx:
            rows = tx.all(f"SELECT {', '.join(ACCOUNT_COLUMNS)} FROM participants ORDER BY joined, key")
        return {row[0]: Account(*row) for row in rows}

    def account(self, participant: str) -> Account | None:
        """The participant's account, or None."""
        with self._read() as tx:
            row = tx.one(f"SELECT {', '.join(ACCOUNT_COLUMNS)} FROM participants WHERE key = ?", (_key(participant),))
        return Account(*row) if row else None

    def count(self) -> int:
        """How many participants the ledger holds."""
        with self._read() as tx:
            return int(tx.one("SELECT COUNT(*) FROM participants")[0])

    def reserve(self, account: Account, cap: int | None = None, exclusive: bool = False) -> tuple[Account, bool]:
        """Record `account` unless its id is there already: (the ledger's account, whether it was recorded now).
        With `cap`, refused (StudyFull) when the study has that many participants; with `exclusive`, an id that is
        there already is refused (Taken) instead of returned."""
        with self._write() as tx:
            return _reserve(tx, account, cap, exclusive)

    def sign_up(self, limits: list[tuple[str, int]], account: Account | None = None, cap: int | None = None,
                hours: float = 24.0) -> str | None:
        """A sign-up through the study link, in one transaction: the rate limits ((key, events a minute), each
        counted while those before it allow), then `account` recorded as reserve(exclusive=True) does and a
        session of `hours` opened for it: the session's key. None: a limit refused. Taken and StudyFull are raised
        after the attempts are counted (committed). Without `account`, only the limits ("" when they allow)."""
        now, refused = time.time(), None
        with self._write() as tx:
            if not all(count_attempt(tx, key, limit, 60.0, now) for key, limit in limits):
                return None
            if account is None:
                return ""
            try:
                _reserve(tx, account, cap, exclusive=True)
            except (Taken, StudyFull) as e:
                refused = e
            else:
                return new_session(tx, _key(account.participant_id), hours, now)
        raise refused

    def update(self, participant: str, **values) -> None:
        """Set columns of a participant's row (user_id, password, access, closed, token)."""
        allowed = {"user_id", "password", "access", "closed", "token", "email"}
        if not values or set(values) - allowed:
            raise ValueError(f"cannot set {sorted(set(values) - allowed)} of a participant")
        with self._write() as tx:
            tx.run(f"UPDATE participants SET {', '.join(f'{k} = ?' for k in values)} WHERE key = ?",
                   (*values.values(), _key(participant)))

    # ---- sessions ---------------------------------------------------------------------------------------------
    def open_session(self, participant: str, hours: float) -> str:
        """A new session key for the participant, valid for `hours`."""
        with self._write() as tx:
            return new_session(tx, _key(participant), hours, time.time())

    def session(self, key: str) -> str | None:
        """The participant (lower-case id) of a live session cookie, else None."""
        if not key:
            return None
        with self._read() as tx:
            row = tx.one("SELECT participant, expires FROM sessions WHERE digest = ?", (digest(key),))
        return row[0] if row and row[1] >= time.time() else None

    def end_session(self, key: str) -> None:
        """End the session of this key."""
        with self._write() as tx:
            tx.run("DELETE FROM sessions WHERE digest = ?", (digest(key),))

    # ---- served tasks and answers -----------------------------------------------------------------------------
    def serve(self, participant: str, part: str, task_id: int) -> Ref:
        """The participant's reference to a task: the one they hold already, else a new one (first served now)."""
        who = _key(participant)
        with self._write() as tx:
            row = tx.one(f"SELECT {', '.join(REF_COLUMNS)} FROM refs WHERE participant = ? AND task_id = ?",
                         (who, task_id))
            if row:
                return _ref(row)
            return _new_ref(tx, who, part, task_id, time.time())

    def serve_chosen(self, participant: str, part: str, choose) -> Ref | None:
        """Serve the participant the task `choose(taken, mine)` picks, in one transaction with what it sees: `taken`
        maps each task of the part to its answers stored and its holds (served within HOLD_SECONDS to another
        participant who has not answered and whose reference is not surplus), `mine` maps the tasks the participant
        has had to whether they still claim it (answered or held: not surplus). Two processes never serve one task
        beyond what `choose` allows. None: nothing chosen."""
        who, now = _key(participant), time.time()
        with self._write() as tx:
            rows = tx.all("SELECT task_id, participant, answered, surplus, served FROM refs WHERE part = ?", (part,))
            counts: dict[int, list[int]] = {}
            mine: dict[int, bool] = {}
            for task_id, owner, answered, surplus, served in rows:
                if owner == who:
                    mine[int(task_id)] = mine.get(int(task_id), False) or not surplus
                    continue
                c = counts.setdefault(int(task_id), [0, 0])
                if answered is not None:
                    c[0] += 1
                elif not surplus and served > now - HOLD_SECONDS:
                    c[1] += 1
            task_id = choose({t: Load(a, h) for t, (a, h) in counts.items()}, mine)
            if task_id is None:
                return None
            return _new_ref(tx, who, part, task_id, now)

    def served_by_part(self, participant: str) -> dict[str, set[int]]:
        """part -> the tasks the participant was served there (answered or not)."""
        with self._read() as tx:
            rows = tx.all("SELECT part, task_id FROM refs WHERE participant = ?", (_key(participant),))
        out: dict[str, set[int]] = {}
        for part, task_id in rows:
            out.setdefault(part, set()).add(int(task_id))
        return out

    def last_context_task(self, participant: str, part: str) -> int | None:
        """The task the participant was served last in `part` (answered or not)."""
        with self._read() as tx:
            row = tx.one("SELECT task_id FROM refs WHERE participant = ? AND part = ? ORDER BY number DESC LIMIT 1",
                         (_key(participant), part))
        return int(row[0]) if row else None

    def ref(self, participant: str, ref: str) -> Ref | None:
        """A reference of this participant's (someone else's is None)."""
        with self._read() as tx:
            row = tx.one(f"SELECT {', '.join(REF_COLUMNS)} FROM refs WHERE ref = ? AND participant = ?",
                         (ref, _key(participant)))
        return _ref(row) if row else None

    def open_ref(self, participant: str, part: str) -> Ref | None:
        """The task the participant was served in `part` and has not answered (they reloaded, or came back)."""
        with self._read() as tx:
            row = tx.one(f"SELECT {', '.join(REF_COLUMNS)} FROM refs WHERE participant = ? AND part = ? AND "
                         "answered IS NULL AND surplus = 0 ORDER BY number LIMIT 1", (_key(participant), part))
        return _ref(row) if row else None

    def record(self, ref: str, result: str, value: str | None = None, overlap: int | None = None,
               quota: int | None = None) -> str:
        """Record a participant's answer to a reference, in one transaction with the checks that decide whether it
        counts: 'ok' (recorded now: it counts, with its time on the task from serving to now as the server measured
        it), 'updated' (the reference had its answer: this submission is its new version), 'full' (the task has
        `overlap` answers from others: this one is surplus, never recorded) or 'quota' (the participant has `quota`
        answers in the part). `result` is the checked answer (JSON), `value` the routing criterion's answer (JSON,
        adaptive collection). Label Studio receives what the ledger records behind it (`pending_answers`)."""
        now = time.time()
        with self._write() as tx:
            task_id, answered, surplus, participant, part, served = tx.one(
                "SELECT task_id, answered, surplus, participant, part, served FROM refs WHERE ref = ?", (ref,))
            if answered is not None:
                tx.run("UPDATE refs SET result = ?, value = ?, version = version + 1, sync_error = NULL WHERE ref = ?",
                       (result, value, ref))
                return "updated"
            if surplus:
                return "full"
            if overlap is not None and _taken(tx, "task_id = ?", (task_id,), ref) >= overlap:
                tx.run("UPDATE refs SET surplus = 1 WHERE ref = ?", (ref,))
                return "full"
            if quota is not None and _taken(tx, "participant = ? AND part = ?", (participant, part), ref) >= quota:
                return "quota"
            tx.run("UPDATE refs SET answered = ?, seconds = ?, result = ?, value = ?, version = 1 WHERE ref = ?",
                   (now, now - served, result, value, ref))
            return "ok"

    def full(self, ref: str, overlap: int) -> bool:
        """Whether the task of `ref` has its `overlap` of answers (or answers being sent) from other participants;
        if so the reference is marked surplus: never sent."""
        with self._read() as tx:  # (read first: the common answer, "not full", writes nothing)
            task_id, surplus = tx.one("SELECT task_id, surplus FROM refs WHERE ref = ?", (ref,))
            if surplus:
                return True
            if _taken(tx, "task_id = ?", (task_id,), ref) < overlap:
                return False
        with self._write() as tx:
            tx.run("UPDATE refs SET surplus = 1 WHERE ref = ?", (ref,))
        return True

    def set_value(self, ref: str, value: str | None) -> None:
        """The routing criterion's answer of an answered reference, after the participant changed their answer."""
        with self._write() as tx:
            tx.run("UPDATE refs SET value = ? WHERE ref = ? AND answered IS NOT NULL", (value, ref))

    def part_values(self, part: str) -> list[tuple[int, str, str | None]]:
        """(task id, participant, value) of every answer given through the gateway in `part`, in the order
        answered: what adaptive routing and the stopping rule see."""
        with self._read() as tx:
            rows = tx.all("SELECT task_id, participant, value FROM refs WHERE part = ? AND answered IS NOT NULL "
                          "ORDER BY answered, ref", (part,))
        return [(int(t), p, v) for t, p, v in rows]

    def stop(self, part: str, record: str) -> tuple[float, str]:
        """Record that `part` reached its stopping target (the first record stays): (when, record)."""
        with self._write() as tx:
            tx.run("INSERT INTO stopped (part, at, record) VALUES (?, ?, ?) ON CONFLICT (part) DO NOTHING",
                   (part, time.time(), record))
            at, kept = tx.one("SELECT at, record FROM stopped WHERE part = ?", (part,))
        return float(at), kept

    def stopped(self) -> dict[str, tuple[float, str]]:
        """part -> (when it reached its stopping target, the JSON record)."""
        with self._read() as tx:
            return {p: (float(a), r) for p, a, r in tx.all("SELECT part, at, record FROM stopped")}

    def design(self, part: str) -> dict[int, tuple[float, bool, float | None, float | None]]:
        """An active part's design: task id -> (probability, drawn, the judge's score, its confidence)."""
        with self._read() as tx:
            rows = tx.all("SELECT task_id, probability, drawn, score, confidence FROM design WHERE part = ?", (part,))
        return {int(t): (float(p), bool(d), s, c) for t, p, d, s, c in rows}

    def keep_design(self, part: str, judge: str, rows) -> dict[int, tuple[float, bool, float | None, float | None]]:
        """Record an active part's draw, (task id, score, confidence, probability, drawn) per task, unless one is
        recorded already (the first draw stays: another process may have drawn it first); returns the kept one."""
        with self._write() as tx:
            if not tx.one("SELECT COUNT(*) FROM design WHERE part = ?", (part,))[0]:
                now = time.time()
                for task_id, score, confidence, probability, drawn in rows:
                    tx.run("INSERT INTO design (part, task_id, judge, score, confidence, probability, drawn, at) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (part, task_id) DO NOTHING",
                           (part, int(task_id), judge, score, confidence, float(probability), int(bool(drawn)), now))
        return self.design(part)

    def first_number(self, participant: str, part: str) -> int | None:
        """The number of the participant's first task in `part` (None: none served yet)."""
        with self._read() as tx:
            row = tx.one("SELECT MIN(number) FROM refs WHERE participant = ? AND part = ?", (_key(participant), part))
        return None if row is None or row[0] is None else int(row[0])

    def answered_count(self, participant: str, part: str) -> int:
        """How many tasks of the part the participant has answered."""
        with self._read() as tx:
            return int(tx.one("SELECT COUNT(*) FROM refs WHERE participant = ? AND part = ? AND answered IS NOT NULL",
                              (_key(participant), part))[0])

    def history(self, participant: str, part: str) -> list[str]:
        """The participant's answered references in `part`, in the order answered."""
        with self._read() as tx:
            rows = tx.all("SELECT ref FROM refs WHERE participant = ? AND part = ? AND answered IS NOT NULL "
                          "ORDER BY answered, number", (_key(participant), part))
        return [r[0] for r in rows]

    def answers(self) -> list[Ref]:
        """Every reference, answered or not (for `status` and the tests)."""
        with self._read() as tx:
            return [_ref(r) for r in tx.all(f"SELECT {', '.join(REF_COLUMNS)} FROM refs ORDER BY served")]

    def times(self) -> dict[int, float]:
        """annotation id -> seconds on the task as the gateway measured them."""
        with self._read() as tx:
            rows = tx.all("SELECT annotation_id, seconds FROM refs WHERE annotation_id IS NOT NULL")
        return {int(a): float(s) for a, s in rows if s is not None}

    # ---- parts and lists --------------------------------------------------------------------------------------
    def finish(self, participant: str, part: str, tasks: str | None = None) -> None:
        """Record that the participant finished `part`: for good (`tasks` None: the part stopped, or their quota), or
        because nothing was left for them among the part's tasks whose digest is `tasks` (looked at again once the
        part holds other tasks). A record for good stays so."""
        with self._write() as tx:
            tx.run("INSERT INTO finished (participant, part, at, tasks) VALUES (?, ?, ?, ?) ON CONFLICT (participant, "
                   "part) DO UPDATE SET at = excluded.at, tasks = excluded.tasks WHERE finished.tasks IS NOT NULL",
                   (_key(participant), part, time.time(), tasks))

    def finished(self, participant: str) -> set[str]:
        """The parts the participant finished at some time (for good or not)."""
        return set(self.finished_on(participant))

    def finished_on(self, participant: str) -> dict[str, str | None]:
        """part -> the digest of the part's tasks the participant finished it on (None: finished for good)."""
        with self._read() as tx:
            return {p: t for p, t in tx.all("SELECT part, tasks FROM finished WHERE participant = ?",
                                            (_key(participant),))}

    def list_of(self, entry: str, participant: str) -> int | None:
        """The counterbalanced list the participant was given in this entry, or None."""
        with self._read() as tx:
            row = tx.one("SELECT number FROM lists WHERE entry = ? AND participant = ?", (entry, participant))
        return int(row[0]) if row else None

    def assign_list(self, entry: str, participant: str, numbers: list[int], worked: int | None) -> int:
        """The participant's list: `worked` (the list with their annotations) if given, else the list with the
        fewest participants (the lowest number on a tie)."""
        with self._write() as tx:
            row = tx.one("SELECT number FROM lists WHERE entry = ? AND participant = ?", (entry, participant))
            if row:
                return int(row[0])
            sizes = {n: 0 for n in numbers}
            for number, count in tx.all("SELECT number, COUNT(*) FROM lists WHERE entry = ? GROUP BY number", (entry,)):
                if number in sizes:
                    sizes[number] = int(count)
            chosen = worked if worked in sizes else min(numbers, key=lambda n: (sizes[n], n))
            tx.run("INSERT INTO lists (entry, participant, number) VALUES (?, ?, ?)", (entry, participant, chosen))
            return chosen

    def lists(self) -> dict[str, dict[str, int]]:
        """Every entry's lists: entry -> participant -> list number."""
        with self._read() as tx:
            rows = tx.all("SELECT entry, participant, number FROM lists ORDER BY entry, participant")
        out: dict[str, dict[str, int]] = {}
        for entry, participant, number in rows:
            out.setdefault(entry, {})[participant] = int(number)
        return out

    # ---- rate limits ------------------------------------------------------------------------------------------
    def allow(self, key: str, limit: int, seconds: float = 60.0) -> bool:
        """At most `limit` events per key within `seconds`, counted over every process of the study."""
        with self._write() as tx:
            return count_attempt(tx, key, limit, seconds, time.time())


def _reserve(tx: Transaction, account: Account, cap: int | None, exclusive: bool) -> tuple[Account, bool]:
    """Ledger.reserve inside `tx`."""
    found = tx.one(f"SELECT {', '.join(ACCOUNT_COLUMNS)} FROM participants WHERE key = ?",
                   (_key(account.participant_id),))
    if found:
        if exclusive:
            raise Taken(account.participant_id)
        return Account(*found), False
    if cap is not None and int(tx.one("SELECT COUNT(*) FROM participants")[0]) >= cap:
        raise StudyFull(f"the study has its {cap} participants")
    tx.run(f"INSERT INTO participants ({', '.join(ACCOUNT_COLUMNS)}, key, joined) "
           f"VALUES ({', '.join('?' * (len(ACCOUNT_COLUMNS) + 2))})",
           (*(getattr(account, c) for c in ACCOUNT_COLUMNS), _key(account.participant_id), time.time()))
    return account, True


def _taken(tx: "Transaction", where: str, params: tuple, ref: str) -> int:
    """How many references other than `ref` that match `where` have an answer."""
    return int(tx.one(f"SELECT COUNT(*) FROM refs WHERE {where} AND ref <> ? AND answered IS NOT NULL",
                      (*params, ref))[0])


def _new_ref(tx: Transaction, who: str, part: str, task_id: int, served: float) -> Ref:
    """A new reference of participant `who` (key) to a task, served now: their next number, inside `tx`."""
    number = int(tx.one("SELECT COUNT(*) FROM refs WHERE participant = ?", (who,))[0]) + 1
    ref = Ref(secrets.token_urlsafe(18), who, part, int(task_id), number, served)
    tx.run(f"INSERT INTO refs ({', '.join(REF_COLUMNS)}) VALUES ({', '.join('?' * len(REF_COLUMNS))})",
           tuple(int(v) if isinstance(v, bool) else v for v in (getattr(ref, c) for c in REF_COLUMNS)))
    return ref


def _ref(row) -> Ref:
    ref = Ref(*row)
    ref.sent, ref.surplus = bool(ref.sent), bool(ref.surplus)
    return ref


_OPEN: dict[tuple[str, str, int], Ledger] = {}
_OPEN_LOCK = threading.Lock()


def open_ledger(folder: Path) -> Ledger:
    """The ledger of a participants folder, opened once per process (and per ledger URL; a forked process opens its
    own: a database connection is never shared across a fork)."""
    key = (str(Path(folder).resolve()), os.environ.get(URL_ENV, ""), os.getpid())
    with _OPEN_LOCK:
        ledger = _OPEN.get(key)
        if ledger is None or not Path(folder).is_dir() or (
                ledger.kind == "sqlite" and not (Path(folder) / FILE).exists()):
            ledger = _OPEN[key] = Ledger(folder)
        return ledger


def close_all() -> None:
    """Close this process's ledgers (before it forks workers: a database connection must not cross a fork)."""
    with _OPEN_LOCK:
        for key in [k for k in _OPEN if k[2] == os.getpid()]:
            _OPEN.pop(key).close()
