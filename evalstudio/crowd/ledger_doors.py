"""The ledger's doors, as statements inside one of its transactions: the rate limits' attempts and the sessions
(evalstudio/crowd/ledger.py's allow, open_session and sign_up, which runs them all in one transaction)."""

from __future__ import annotations

import hashlib
import secrets


def digest(key: str) -> str:
    """What the ledger stores of a session's key (the cookie itself never is): its SHA-256."""
    return hashlib.sha256(key.encode()).hexdigest()


def count_attempt(tx, key: str, limit: int, seconds: float, now: float) -> bool:
    """One event of `key` counted inside `tx`, unless `key` has `limit` events within `seconds` (then False)."""
    tx.run("DELETE FROM attempts WHERE key = ? AND at < ?", (key, now - seconds))
    if int(tx.one("SELECT COUNT(*) FROM attempts WHERE key = ?", (key,))[0]) >= limit:
        return False
    tx.run("INSERT INTO attempts (key, at) VALUES (?, ?)", (key, now))
    if secrets.randbelow(1000) == 0:  # now and then, forget idle keys
        tx.run("DELETE FROM attempts WHERE at < ?", (now - 3600,))
    return True


def new_session(tx, who: str, hours: float, now: float) -> str:
    """A session of the participant `who` (their key, lower-case) inside `tx`, expired sessions deleted: its key."""
    key = secrets.token_urlsafe(32)
    tx.run("DELETE FROM sessions WHERE expires < ?", (now,))
    tx.run("INSERT INTO sessions (digest, participant, expires) VALUES (?, ?, ?)",
           (digest(key), who, now + hours * 3600))
    return key
