"""The ledger's storage: one SQLite file in the participants folder or a schema of a PostgreSQL database, two
connections (one for the write transactions, serialised, one for reads, so that a read never waits for a write's
commit to reach the disk), exclusive write transactions, the versioned schema and its migrations, and an online
backup. What the ledger records, and its rules, are evalstudio/crowd/ledger.py's."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from evalstudio.base.credentials import create_private, private_dir

from .ledger_schema import MIGRATIONS, LedgerError, LedgerUnreachable, take_over

FILE = "ledger.sqlite3"
POINTER = "ledger.json"  # with a PostgreSQL ledger: which schema holds this folder's ledger
URL_ENV = "EVALSTUDIO_LEDGER_URL"
BUSY_SECONDS = 30
# a PostgreSQL ledger that has not answered for this long (a network partition, a host gone) is reported
# unreachable (LedgerUnreachable) instead of being waited for: a participant is told so, never left hanging
TIMEOUT_ENV = "EVALSTUDIO_LEDGER_TIMEOUT"
RETRY_SECONDS = 3.0  # after a broken connection, requests fail at once for this long before one tries again
SCHEMA = max(MIGRATIONS)


class Store:
    """A ledger's connections and transactions (Ledger adds what it records). Thread-safe."""

    def __init__(self, folder: Path, url: str | None = None):
        self.folder = Path(folder)
        private_dir(self.folder)
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._down_until = 0.0  # (time.monotonic()) a broken PostgreSQL connection: unreachable until then
        self._broken: set[str] = set()  # the connections ("_db", "_reader") to open again before their next use
        url = url if url is not None else os.environ.get(URL_ENV) or None
        if url:
            self._open_postgres(url)
        else:
            self._open_sqlite()
        self._migrate()
        self._reader = self._connect()

    # ---- connections ------------------------------------------------------------------------------------------
    def _open_sqlite(self) -> None:
        self.kind, path = "sqlite", self.folder / FILE
        self.where = str(path)
        if (self.folder / POINTER).exists() and not path.exists():
            # the study's ledger is in PostgreSQL: a new, empty SQLite ledger beside its pointer would start the
            # study again (consent asked again, tasks served again) and make every command report an empty study
            raise LedgerError(f"{self.folder / POINTER}: this study's ledger is in PostgreSQL; set {URL_ENV} to its "
                              "database (`evalstudio server --database-url` writes it into evalstudio.env)")
        if not path.exists():  # created private: 0600 from the start (SQLite's -wal and -shm files copy its mode)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))

        def connect():
            try:
                db = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                # FULL: a committed answer survives a power cut too, not only a killed process
                db.execute("PRAGMA synchronous=FULL")
                db.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
            except sqlite3.DatabaseError as e:
                raise LedgerError(f"{path}: not a ledger evalstudio can open ({e}); move it away to start a new "
                                  "one") from None
            return db
        self._connect = connect
        self._db = connect()

    def _open_postgres(self, url: str) -> None:
        import re

        try:
            import psycopg
        except ImportError:  # pragma: no cover - psycopg comes with label-studio
            raise LedgerError(f"{URL_ENV} names a PostgreSQL ledger, but psycopg is not installed") from None
        from evalstudio.labelstudio.connection import shown_url

        pointer = self.folder / POINTER
        # the first process to open a new ledger names its schema; one opening it at the same moment reads that name
        # (a check, then a write, let two processes each write their own: two ledgers for one study)
        create_private(pointer, json.dumps({"schema": f"evalstudio_{secrets.token_hex(6)}"}) + "\n")
        try:
            schema = json.loads(pointer.read_text(encoding="utf-8"))["schema"]
        except (OSError, ValueError, KeyError, TypeError):
            schema = None
        if not isinstance(schema, str) or not re.fullmatch(r"evalstudio_[a-f0-9]{12}", schema):
            raise LedgerError(f"{pointer}: not a ledger pointer written by evalstudio; move it away to start anew")
        self.kind, self.where = "postgresql", f"{shown_url(url)} (schema {schema})"

        timeout = max(2, round(float(os.environ.get(TIMEOUT_ENV) or 10)))

        def connect():
            try:
                # both ends give up on a silent peer after `timeout` seconds: the client (libpq's connect timeout,
                # TCP user timeout and keepalives), and the server, whose session of a cut-off gateway would
                # otherwise hold the ledger's write lock until its TCP stack gives up (about 15 minutes)
                db = psycopg.connect(url, autocommit=True, connect_timeout=timeout, tcp_user_timeout=timeout * 1000,
                                     keepalives=1, keepalives_idle=timeout, keepalives_interval=max(1, timeout // 3),
                                     keepalives_count=3)
                try:
                    db.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
                except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
                    pass  # another process created it at the same moment (IF NOT EXISTS does not cover the race)
                db.execute(f"SET search_path TO {schema}")
                db.execute(f"SET tcp_user_timeout = {timeout * 1000}")
                db.execute(f"SET tcp_keepalives_idle = {timeout}")
                db.execute(f"SET tcp_keepalives_interval = {max(1, timeout // 3)}")
                db.execute("SET tcp_keepalives_count = 3")
                db.execute(f"SET idle_in_transaction_session_timeout = {3 * timeout * 1000}")
            except psycopg.Error as e:
                raise LedgerUnreachable(f"cannot open the ledger in PostgreSQL at {shown_url(url)} "
                                        f"({type(e).__name__})") from None
            return db
        self._connect = connect
        self._db = connect()
        self._lock_id = int.from_bytes(hashlib.sha256(schema.encode()).digest()[:7], "big")

    def close(self) -> None:
        """Close the writing and reading connections."""
        with self._lock, self._read_lock:
            self._db.close()
            self._reader.close()

    def backup(self, destination: Path) -> None:
        """A consistent copy of a SQLite ledger, taken while gateways keep writing (SQLite's online backup), private
        (0600). A PostgreSQL ledger is backed up with the database (pg_dump --schema NAME)."""
        if self.kind != "sqlite":
            raise LedgerError(f"the ledger is in PostgreSQL ({self.where}): back it up with pg_dump --schema of that "
                              "schema, or with the whole database")
        destination = Path(destination)
        if destination.exists():
            raise LedgerError(f"{destination}: exists already; give a new file name")
        os.close(os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        with self._lock, contextlib.closing(sqlite3.connect(destination)) as copy:
            self._db.backup(copy)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.kind == "postgresql" else sql

    @contextlib.contextmanager
    def _write(self) -> Iterator["Transaction"]:
        """One exclusive transaction (writers queue; readers go on)."""
        with self._lock, self._reachable("_db") as db:
            if self.kind == "sqlite":
                db.execute("BEGIN IMMEDIATE")
            else:
                db.execute("BEGIN")
                db.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
            try:
                yield Transaction(self, db)
            except BaseException:
                if not getattr(db, "broken", False):
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextlib.contextmanager
    def _read(self) -> Iterator["Transaction"]:
        """A read on the read connection (SQLite: a snapshot of the last commit; it never waits for a writer)."""
        with self._read_lock, self._reachable("_reader") as db:
            yield Transaction(self, db)

    @contextlib.contextmanager
    def _reachable(self, name: str):
        """The connection `name`, opened again if it broke; a PostgreSQL connection that breaks in use (the database
        silent for the timeout, or gone) raises LedgerUnreachable, and so does every use for RETRY_SECONDS after."""
        if self.kind == "sqlite":
            yield getattr(self, name)
            return
        import psycopg

        if name in self._broken:
            if time.monotonic() < self._down_until:
                raise LedgerUnreachable(f"the ledger in PostgreSQL ({self.where}) did not answer just now")
            with contextlib.suppress(Exception):  # (a connection cut off: closed on this side only)
                getattr(self, name).close()
            try:
                setattr(self, name, self._connect())
            except LedgerUnreachable:
                self._down_until = time.monotonic() + RETRY_SECONDS
                raise
            self._broken.discard(name)
        db = getattr(self, name)
        try:
            yield db
        except psycopg.Error as e:
            if not (db.broken or db.closed):
                raise
            self._broken.update(("_db", "_reader"))  # one database behind both: the other is found out the same
            self._down_until = time.monotonic() + RETRY_SECONDS
            raise LedgerUnreachable(f"the ledger in PostgreSQL ({self.where}) did not answer "
                                    f"({type(e).__name__})") from None

    def _migrate(self) -> None:
        with self._write() as tx:
            tx.run("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = tx.one("SELECT value FROM meta WHERE key = 'schema'")
            version = int(row[0]) if row else 0
            if version > SCHEMA:
                raise LedgerError(f"{self.where}: the ledger was written by a newer evalstudio (schema {version}, "
                                  f"this one knows {SCHEMA}); upgrade evalstudio")
            for number in range(version + 1, SCHEMA + 1):
                for statement in MIGRATIONS[number]:
                    tx.run(statement)
            if version < SCHEMA:
                tx.run("INSERT INTO meta (key, value) VALUES ('schema', ?) ON CONFLICT (key) DO UPDATE SET value = ?",
                       (str(SCHEMA), str(SCHEMA)))
            take_over(self.folder, tx)


class Transaction:
    """Statements of one transaction ("?" placeholders, as SQLite writes them, on either database)."""

    def __init__(self, ledger: Store, connection):
        self.ledger, self.connection = ledger, connection

    def run(self, sql: str, params: tuple = ()):
        """Execute one statement (written with ? placeholders) in this transaction."""
        return self.connection.execute(self.ledger._sql(sql), params)

    def one(self, sql: str, params: tuple = ()):
        """The first row of the statement's result, or None."""
        return self.run(sql, params).fetchone()

    def all(self, sql: str, params: tuple = ()):
        """Every row of the statement's result."""
        return self.run(sql, params).fetchall()
