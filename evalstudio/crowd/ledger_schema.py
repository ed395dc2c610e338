"""The ledger's tables, one list of statements per schema version (a new version appends its own: existing
ledgers are migrated on first use), and the take-over of the files earlier versions of evalstudio kept."""

from __future__ import annotations

import json
import time
from pathlib import Path

from evalstudio.base.errors import EvalstudioError

OLD_ACCOUNTS, OLD_LISTS = "participants.json", "lists.json"


class LedgerError(EvalstudioError):
    """A participants file the ledger would take over is not one evalstudio wrote."""
    pass


class LedgerUnreachable(LedgerError):
    """The ledger's database did not answer in time, or its connection broke: nothing of the request was recorded
    (its transaction is rolled back), and the next request tries the database again."""


MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE participants (
             key TEXT PRIMARY KEY,              -- the participant id in lower case (accounts are per lower-case id)
             participant_id TEXT NOT NULL,      -- as given
             email TEXT NOT NULL,
             password TEXT,                     -- NULL: an account that existed before evalstudio knew it
             user_id BIGINT,
             access TEXT,                       -- the gateway sign-in code
             closed TEXT,                       -- when `close` took the account out (ISO time)
             joined DOUBLE PRECISION NOT NULL,  -- when the ledger first recorded it (server time)
             source TEXT NOT NULL,              -- add, join (the study link) or taken-over (participants.json)
             platform_study TEXT,               -- what the crowd platform passed in the study link
             platform_session TEXT,
             token TEXT                         -- the participant's Label Studio API token, once the gateway read it
           )""",
        """CREATE TABLE sessions (
             digest TEXT PRIMARY KEY,           -- sha256 of the cookie (the cookie itself is never stored)
             participant TEXT NOT NULL,
             expires DOUBLE PRECISION NOT NULL
           )""",
        """CREATE TABLE refs (
             ref TEXT PRIMARY KEY,
             participant TEXT NOT NULL,
             part TEXT NOT NULL,
             task_id BIGINT NOT NULL,
             number INTEGER NOT NULL,           -- the participant's n-th task (what the page shows)
             served DOUBLE PRECISION NOT NULL,  -- first served (server time)
             lease DOUBLE PRECISION,            -- a submission is being sent until then
             owner TEXT,                        -- by this process (host:pid): a lease of a dead process is void
             sent INTEGER NOT NULL DEFAULT 0,   -- a submission went out: Label Studio may have it
             annotation_id BIGINT,              -- the answer, once Label Studio stored it
             answered DOUBLE PRECISION,         -- when it was stored (server time)
             seconds DOUBLE PRECISION,          -- answered - served: the time on the task as the server measured it
             surplus INTEGER NOT NULL DEFAULT 0,  -- refused: the task had its answers already
             UNIQUE (participant, task_id)
           )""",
        "CREATE INDEX refs_task ON refs (task_id)",
        "CREATE INDEX refs_part ON refs (participant, part)",
        """CREATE TABLE finished (
             participant TEXT NOT NULL, part TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
             PRIMARY KEY (participant, part)
           )""",
        """CREATE TABLE lists (
             entry TEXT NOT NULL, participant TEXT NOT NULL, number INTEGER NOT NULL,
             PRIMARY KEY (entry, participant)
           )""",
        "CREATE TABLE attempts (key TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX attempts_key ON attempts (key, at)",
        "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ],
    2: [
        # adaptive collection (projects.yaml assignment:/stop_when:): each answer's value of the routing criterion,
        # as JSON (a label or a number; NULL: not routed, or no answer to it), and when a part reached its target
        "ALTER TABLE refs ADD COLUMN value TEXT",
        """CREATE TABLE stopped (
             part TEXT PRIMARY KEY,
             at DOUBLE PRECISION NOT NULL,      -- when the gateway found the target reached (server time)
             record TEXT NOT NULL               -- JSON: which target, answers, participant-minutes, money
           )""",
    ],
    3: [
        # the ledger is the study's system of record: an answer counts once the ledger has it (`answered`, with the
        # checked result and its origins in `result`), and Label Studio receives it behind (evalstudio/gateway/sync.py).
        # `version` counts the participant's submissions of the answer (a change is a new version), `synced` is the
        # version Label Studio holds, `sync_error` why Label Studio refused the last write (it is tried again)
        "ALTER TABLE refs ADD COLUMN result TEXT",
        "ALTER TABLE refs ADD COLUMN version INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE refs ADD COLUMN synced INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE refs ADD COLUMN sync_error TEXT",
        # when a write of the answer last went out to Label Studio (it may hold it from then on; earlier versions'
        # `sent` flag: long ago)
        "ALTER TABLE refs ADD COLUMN sent_at DOUBLE PRECISION",
        "UPDATE refs SET sent_at = 1 WHERE sent = 1",
        "UPDATE refs SET version = 1, synced = 1 WHERE annotation_id IS NOT NULL",
        "UPDATE refs SET answered = NULL WHERE annotation_id IS NULL",
        "CREATE INDEX refs_unsynced ON refs (synced, version)",
        # a participant's Label Studio account is made behind the sign-up too; why Label Studio refused it, if so
        "ALTER TABLE participants ADD COLUMN sync_error TEXT",
        # what each task shows participants (its displayed fields, JSON), as the gateway first read it from Label
        # Studio: served from here, the same to every participant; a later change in Label Studio is noted
        # (changed, changed_digest) and served only once the operator accepts it (gateway --accept-changed-tasks)
        """CREATE TABLE tasks (
             part TEXT NOT NULL,
             task_id BIGINT NOT NULL,
             shown TEXT NOT NULL,
             digest TEXT NOT NULL,
             recorded DOUBLE PRECISION NOT NULL,
             changed DOUBLE PRECISION,
             changed_digest TEXT,
             PRIMARY KEY (part, task_id)
           )""",
    ],
    4: [
        # active collection (projects.yaml assignment: {strategy: active}): each task's probability of a human label,
        # from the judge's uncertainty, and whether it was drawn; drawn once, the first time a gateway serves the part
        """CREATE TABLE design (
             part TEXT NOT NULL,
             task_id BIGINT NOT NULL,
             judge TEXT NOT NULL,
             score DOUBLE PRECISION,            -- the judge's value of the criterion (NULL: it has none)
             confidence DOUBLE PRECISION,       -- the judge's confidence (NULL: none; the task counted as unsure)
             probability DOUBLE PRECISION NOT NULL,
             drawn INTEGER NOT NULL,            -- 1: humans label this task
             at DOUBLE PRECISION NOT NULL,      -- when it was drawn (server time)
             PRIMARY KEY (part, task_id)
           )""",
    ],
    5: [
        # a part a participant finished because nothing was left for them is finished for the part's tasks as they
        # were then (a SHA-256 of its task ids, `tasks`): once the part holds other tasks (an import), the gateway
        # looks again. NULL: finished for good (the part stopped, or its quota reached). Rows of earlier versions
        # are looked at again once (''), as a participant told "done" from a stale list of tasks must be
        "ALTER TABLE finished ADD COLUMN tasks TEXT",
        "UPDATE finished SET tasks = ''",
    ],
    6: [
        # a study's front matter (projects.yaml crowd: consent, practice, background, exit_survey): each step a
        # participant took, once (the first answer stays), with the server's time. `step` is consent, practice:N (the
        # N-th practice item, from 1), background or exit; `answer` the checked answer (JSON); `outcome` consent's
        # given or declined, a practice item's correct or wrong
        """CREATE TABLE front (
             participant TEXT NOT NULL,
             step TEXT NOT NULL,
             at DOUBLE PRECISION NOT NULL,
             answer TEXT NOT NULL,
             outcome TEXT,
             PRIMARY KEY (participant, step)
           )""",
    ],
    7: [
        # a prefilled part's answers (projects.yaml prefill:): whether the participant was shown the prediction
        # (1) or not (0: unassisted_share's draw, evalstudio/crowd/assistance.py), and the prediction's id in Label
        # Studio (the annotation's parent_prediction); NULL: a part without prefill, or not answered yet
        "ALTER TABLE refs ADD COLUMN assisted INTEGER",
        "ALTER TABLE refs ADD COLUMN prediction BIGINT",
    ],
}

def take_over(folder: Path, tx) -> None:
    """Accounts and lists from the files earlier versions wrote, once (the files are then renamed)."""
    accounts, lists = folder / OLD_ACCOUNTS, folder / OLD_LISTS
    if accounts.is_file():
        try:
            raw = json.loads(accounts.read_text(encoding="utf-8"))
            old = [dict(a) for a in raw["accounts"]]
            url = raw.get("label_studio")
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise LedgerError(f"{accounts}: not a participants file written by evalstudio ({type(e).__name__}); "
                              "move it away to start a new one") from None
        now = time.time()
        for a in old:
            if not isinstance(a.get("participant_id"), str) or not isinstance(a.get("email"), str):
                raise LedgerError(f"{accounts}: an account without participant_id or email; move the file away")
            tx.run("INSERT INTO participants (key, participant_id, email, password, user_id, access, closed, "
                   "joined, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'taken-over') ON CONFLICT (key) DO NOTHING",
                   (a["participant_id"].lower(), a["participant_id"], a["email"], a.get("password"),
                    a.get("user_id"), a.get("access"), a.get("closed"), now))
        if isinstance(url, str):
            tx.run("INSERT INTO settings (key, value) VALUES ('label_studio', ?) ON CONFLICT (key) DO NOTHING",
                   (url,))
        accounts.rename(accounts.with_name(OLD_ACCOUNTS + ".taken-over"))
    if lists.is_file():
        try:
            loaded = json.loads(lists.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = {}
        for entry, people in (loaded.items() if isinstance(loaded, dict) else []):
            for participant, number in (people.items() if isinstance(people, dict) else []):
                if isinstance(number, int):
                    tx.run("INSERT INTO lists (entry, participant, number) VALUES (?, ?, ?) "
                           "ON CONFLICT (entry, participant) DO NOTHING", (str(entry), str(participant), number))
        lists.rename(lists.with_name(OLD_LISTS + ".taken-over"))
