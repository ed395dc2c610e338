"""What the ledger records of Label Studio receiving the study behind it (a part of the Ledger).

The ledger is the study's system of record: a sign-up is complete when the ledger has the participant, an answer
counts when the ledger has it, and the gateway acknowledges both without asking Label Studio. One sync writer per
study (evalstudio/gateway/sync.py: in whichever gateway process holds the study's sync lease) writes the accounts
and annotations into Label Studio behind it, and records here what Label Studio holds: an account's user id, an
answer's annotation id and the version of the answer it holds, or why Label Studio refused a write. Nothing here
is ever deleted because a remote call failed.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import dataclass

LEASE_SECONDS = 120.0  # the sync writer renews its lease well within this; another host's lease runs out after it


@dataclass(frozen=True)
class Pending:
    """An answer Label Studio does not hold yet (or holds an earlier version of)."""
    ref: str
    participant: str  # the ledger's key (lower-case id)
    part: str
    task_id: int
    user_id: int | None  # the participant's Label Studio account (None: not made yet)
    annotation_id: int | None
    result: str  # JSON
    seconds: float | None
    version: int
    sent: float  # when a write of it last went out (epoch seconds; 0: never): Label Studio may hold it
    signs_in: bool  # the participant may sign in to Label Studio itself (`participants add`): it may hold theirs
    prediction: int | None = None  # the prediction the answer started from (prefill), its annotation's parent


@dataclass(frozen=True)
class Lag:
    """How far Label Studio is behind the ledger."""
    answers: int  # answers (or changes) the ledger acknowledged that Label Studio does not hold yet
    accounts: int  # participants without a Label Studio account yet
    oldest: float | None  # seconds since the oldest of them was acknowledged
    refused: tuple[str, ...]  # what Label Studio refused, with its reason (tried again)

    @property
    def behind(self) -> int:
        """Answers and accounts Label Studio has not received yet."""
        return self.answers + self.accounts


def owner() -> str:
    """This process's name as a sync owner: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def alive(holder: str | None) -> bool:
    """Whether the process `holder` (host:pid) may still be running: another host's is taken to be; on this host,
    only while that process exists."""
    host, _, pid = (holder or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Synced:
    """The ledger's side of the sync (mixed into Ledger, which gives `_read` and `_write`)."""

    def sync_lease(self, study: str, me: str | None = None, seconds: float = LEASE_SECONDS) -> bool:
        """Take or renew the sync lease of `study` for `me` (host:pid): one sync writer per study at a time across
        every gateway process and host. Taken over at once from a process of this host that is gone, from another
        host's once its lease has run out."""
        me, now, key = me or owner(), time.time(), f"sync-lease:{study}"
        with self._write() as tx:
            row = tx.one("SELECT value FROM settings WHERE key = ?", (key,))
            holder, _, until = (row[0] if row else "").rpartition("@")
            if holder and holder != me and alive(holder) and float(until or 0) > now:
                return False
            value = f"{me}@{now + seconds}"
            tx.run("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = ?",
                   (key, value, value))
            return True

    def pending_accounts(self, limit: int = 100) -> list[tuple[str, str, bool]]:
        """(participant id, e-mail, whether it signs in to Label Studio itself) of participants whose Label Studio
        account is not made yet, first joined first."""
        with self._read() as tx:
            rows = tx.all("SELECT participant_id, email, source FROM participants WHERE user_id IS NULL AND "
                          "password IS NOT NULL ORDER BY joined LIMIT ?", (limit,))
        return [(p, e, source != "join") for p, e, source in rows]

    def account_made(self, participant: str, user_id: int) -> None:
        """Record the Label Studio user made for the participant (clearing any earlier refusal)."""
        with self._write() as tx:
            tx.run("UPDATE participants SET user_id = ?, sync_error = NULL WHERE key = ? AND user_id IS NULL",
                   (int(user_id), participant.lower()))

    def account_refused(self, participant: str, reason: str) -> None:
        """Record why Label Studio refused the participant's account."""
        with self._write() as tx:
            tx.run("UPDATE participants SET sync_error = ? WHERE key = ?", (reason[:500], participant.lower()))

    def pending_answers(self, parts: list[str], limit: int = 200) -> list[Pending]:
        """Answers in `parts` the ledger acknowledged that Label Studio does not hold (in this version), oldest
        first."""
        if not parts:
            return []
        with self._read() as tx:
            rows = tx.all("SELECT r.ref, r.participant, r.part, r.task_id, p.user_id, r.annotation_id, r.result, "
                          "r.seconds, r.version, r.sent_at, p.source, r.prediction "
                          "FROM refs r LEFT JOIN participants p ON p.key = r.participant "
                          f"WHERE r.synced < r.version AND r.result IS NOT NULL AND r.part IN ({', '.join('?' * len(parts))}) "
                          "ORDER BY r.answered LIMIT ?", (*parts, limit))
        return [Pending(ref, who, part, int(task), None if uid is None else int(uid),
                        None if aid is None else int(aid), result, seconds, int(version), float(sent or 0.0),
                        source != "join", None if prediction is None else int(prediction))
                for ref, who, part, task, uid, aid, result, seconds, version, sent, source, prediction in rows]

    def answer_sending(self, ref: str) -> None:
        """A write of the answer is about to go out (now): from now on Label Studio may hold it."""
        with self._write() as tx:
            tx.run("UPDATE refs SET sent = 1, sent_at = ? WHERE ref = ?", (time.time(), ref))

    def answer_synced(self, ref: str, annotation_id: int, version: int) -> None:
        """Label Studio holds `version` of the answer, as annotation `annotation_id`."""
        with self._write() as tx:
            tx.run("UPDATE refs SET annotation_id = ?, synced = CASE WHEN synced > ? THEN synced ELSE ? END, "
                   "sync_error = NULL WHERE ref = ?", (int(annotation_id), version, version, ref))

    def answer_refused(self, ref: str, reason: str) -> None:
        """Record why Label Studio refused this answer."""
        with self._write() as tx:
            tx.run("UPDATE refs SET sync_error = ? WHERE ref = ?", (reason[:500], ref))

    def lag(self) -> Lag:
        """What Label Studio still lacks: answers and accounts not synced, the oldest's age, and the refusals."""
        now = time.time()
        with self._read() as tx:
            answers, oldest = tx.one("SELECT COUNT(*), MIN(answered) FROM refs WHERE synced < version AND "
                                     "result IS NOT NULL")
            accounts, joined = tx.one("SELECT COUNT(*), MIN(joined) FROM participants WHERE user_id IS NULL AND "
                                      "password IS NOT NULL")
            refused = [f"answer of {p} to task {t}: {e}" for p, t, e in tx.all(
                "SELECT participant, task_id, sync_error FROM refs WHERE sync_error IS NOT NULL ORDER BY answered")]
            refused += [f"account of {p}: {e}" for p, e in tx.all(
                "SELECT participant_id, sync_error FROM participants WHERE sync_error IS NOT NULL ORDER BY joined")]
        first = min((t for t in (oldest, joined if accounts else None) if t is not None), default=None)
        return Lag(int(answers), int(accounts), None if first is None else max(0.0, now - float(first)),
                   tuple(refused))

    # ---- what tasks show ---------------------------------------------------------------------------------------
    def record_tasks(self, part: str, shown: dict[int, str], accept: bool = False) -> dict[int, str]:
        """What each task of `part` shows participants (JSON of its displayed fields), as the ledger holds it: the
        content first read from Label Studio, the same for every participant and process. `shown` is what Label
        Studio has now; a task new to the ledger is recorded, one whose content differs from the recorded is noted
        as changed (and served as recorded) unless `accept`, which records Label Studio's content instead."""
        digests = {t: hashlib.sha256(text.encode("utf-8")).hexdigest() for t, text in shown.items()}
        with self._read() as tx:  # only the tasks in `shown` (a catalogue's later reads give those changed)
            known = {int(t): (d, s, c) for t, d, s, c in _of_tasks(
                tx, "SELECT task_id, digest, shown, changed_digest FROM tasks WHERE part = ?", part, list(shown))}
        new = [t for t in shown if t not in known]
        changed = [t for t in shown if t in known and digests[t] != known[t][0]]
        noted = [t for t in changed if digests[t] != known[t][2]]
        if new or (changed if accept else noted):
            now = time.time()
            with self._write() as tx:
                for t in new:
                    tx.run("INSERT INTO tasks (part, task_id, shown, digest, recorded) VALUES (?, ?, ?, ?, ?) "
                           "ON CONFLICT (part, task_id) DO NOTHING", (part, t, shown[t], digests[t], now))
                for t in changed if accept else noted:
                    if accept:
                        tx.run("UPDATE tasks SET shown = ?, digest = ?, recorded = ?, changed = NULL, "
                               "changed_digest = NULL WHERE part = ? AND task_id = ?", (shown[t], digests[t], now,
                                                                                         part, t))
                    else:
                        tx.run("UPDATE tasks SET changed = ?, changed_digest = ? WHERE part = ? AND task_id = ?",
                               (now, digests[t], part, t))
                held = {int(t): s for t, s in _of_tasks(tx, "SELECT task_id, shown FROM tasks WHERE part = ?", part,
                                                        list(shown))}
        else:
            held = {t: v[1] for t, v in known.items()}
        return {t: held[t] for t in shown if t in held}

    def changed_tasks(self) -> list[tuple[str, int, float]]:
        """(part, task id, when noticed) of tasks whose content changed in Label Studio after the gateway recorded
        it (participants are still shown the recorded content)."""
        with self._read() as tx:
            rows = tx.all("SELECT part, task_id, changed FROM tasks WHERE changed IS NOT NULL ORDER BY part, task_id")
        return [(p, int(t), float(c)) for p, t, c in rows]

    def wait_synced(self, seconds: float, poll: float = 0.2) -> Lag:
        """Wait until Label Studio holds everything the ledger acknowledged, or `seconds` have passed: the lag
        then (`behind` 0 when everything arrived)."""
        deadline = time.monotonic() + seconds
        while True:
            lag = self.lag()
            if lag.behind == 0 or time.monotonic() >= deadline:
                return lag
            time.sleep(poll)


def _of_tasks(tx, sql: str, part: str, tasks: list[int], chunk: int = 500) -> list[tuple]:
    """The rows `sql` (... WHERE part = ?) gives for these task ids, asked `chunk` ids at a time."""
    rows = []
    for i in range(0, len(tasks), chunk):
        ids = tasks[i:i + chunk]
        rows += tx.all(f"{sql} AND task_id IN ({', '.join('?' * len(ids))})", (part, *ids))
    return rows
