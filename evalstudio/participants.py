"""Crowd participants (Prolific PIDs, MTurk WorkerIds) as Label Studio accounts.

Label Studio Community has no API to create an account with a password, so evalstudio signs each participant up
through the organisation's invite link (the same form a person would fill in), with a generated password. The
account's e-mail is `<participant id, lower case>@participants.invalid` (a reserved domain: no mail is ever sent
there), so every annotation names its participant without anyone typing an id. Passwords are kept in a private
file (0600) next to a sign-in sheet with one personal line per participant; re-running `add` with the same ids
creates nothing twice.
"""

from __future__ import annotations

import csv
import io
import json
import re
import secrets
import string
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from .credentials import private_dir, write_private
from .errors import BadInput, EvalstudioError, InvalidInput, Problem

DOMAIN = "participants.invalid"
REMOVED = "removed user "  # how Client.users names a member removed from the organisation
PARTICIPANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
ID_COLUMNS = ("participant_id", "participant id", "prolific_pid", "prolific_id", "workerid", "worker_id")
DEFAULT_FOLDER = Path(".evalstudio") / "participants"
ACCOUNTS_FILE = "participants.json"
SHEET_FILE = "sign_in.csv"


@dataclass
class Account:
    participant_id: str
    email: str
    password: str | None  # None: the account existed before evalstudio knew it (its password is the person's)
    user_id: int | None = None
    closed: str | None = None  # when `close` took the account out of the organisation (ISO time)
    # the participant's sign-in code for the gateway (`evalstudio gateway`): the Label Studio password never leaves
    # this machine; participants sign in at the gateway with their personal link
    access: str | None = None


def email_for(participant_id: str) -> str:
    return f"{participant_id.lower()}@{DOMAIN}"


def participant_of(email: str | None) -> str | None:
    """The participant id (lower case) of an account `add` created, else None."""
    local, _, domain = (email or "").rpartition("@")
    return local if domain == DOMAIN and PARTICIPANT_ID.fullmatch(local) else None


def read_ids(sources: Iterable[str]) -> list[str]:
    """Participant ids from files (one per line, or a CSV with a participant_id / WorkerId column, as Prolific and
    MTurk export them) and from ids given directly. Problems are `file:line: participant id: message`."""
    ids: dict[str, str] = {}  # lower case -> as given
    problems: list[Problem] = []

    def take(value: str, path: str, line: int | None) -> None:
        value = value.strip()
        if not PARTICIPANT_ID.fullmatch(value):
            shown = value if len(value) <= 40 else value[:40] + "..."
            problems.append(Problem(path, line, "participant id", f"{shown!r} is not an id (letters, digits, _ and -; "
                                                                  "at most 64)"))
        elif ids.setdefault(value.lower(), value) != value:
            problems.append(Problem(path, line, "participant id", f"{value!r} differs from {ids[value.lower()]!r} only "
                                                                  "in upper/lower case (accounts would collide)"))

    for number, source in enumerate(sources, 1):
        path = Path(source)
        if not path.is_file():
            take(source, f"argument {number}", None)
            continue
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as e:
            problems.append(Problem(str(path), None, None, f"cannot read it as UTF-8 text ({type(e).__name__})"))
            continue
        lines = text.splitlines()
        try:
            header = [h.strip().lower() for h in next(csv.reader([lines[0]]), [])] if lines else []
        except csv.Error:  # a first line that is no CSV header (e.g. one huge cell): read as one id per line
            header = []
        column = next((header.index(c) for c in ID_COLUMNS if c in header), None)
        if column is not None:
            reader = csv.reader(io.StringIO(text))
            try:
                for line, row in enumerate(reader, 1):
                    if line > 1 and any(cell.strip() for cell in row):
                        take(row[column] if column < len(row) else "", str(path), line)
            except csv.Error as e:  # e.g. a cell over 131,072 characters: no participant export has one
                problems.append(Problem(str(path), reader.line_num, None, "a cell is longer than 131,072 characters"
                                        if "field larger" in str(e) else f"not readable as CSV ({e})"))
        else:
            for line, value in enumerate(lines, 1):
                if value.strip() and not value.lstrip().startswith("#"):
                    take(value, str(path), line)
    if problems:
        raise InvalidInput(problems, "no account was created")
    if not ids:
        raise InvalidInput([Problem("participants", None, None, "no participant id given")], "no account was created")
    return list(ids.values())


def load_accounts(folder: Path) -> dict[str, Account]:
    path = folder / ACCOUNTS_FILE
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {a["participant_id"]: Account(**a) for a in raw["accounts"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EvalstudioError(f"{path}: not a participants file written by evalstudio ({type(e).__name__}); "
                              "move it away to start a new one") from None


def save_accounts(folder: Path, accounts: dict[str, Account], url: str) -> None:
    write_private(folder / ACCOUNTS_FILE, json.dumps(
        {"label_studio": url, "accounts": [asdict(a) for a in accounts.values()]}, indent=1, ensure_ascii=False) + "\n")


def new_password(length: int = 18) -> str:
    # letters and digits only: safe in a CSV cell (never read as a formula) and in a chat message
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(length))


def new_access_code() -> str:
    return new_password(24)


def gateway_link(gateway_url: str, account: Account) -> str:
    """The participant's personal sign-in link at the gateway."""
    return f"{gateway_url.rstrip('/')}/s/{account.participant_id}/{account.access}"


@dataclass
class Added:
    created: list[str]
    present: list[str]  # already there, created by an earlier `add`
    foreign: list[str]  # an account with that e-mail exists but evalstudio does not know its password


def add(client, ids: list[str], folder: Path = DEFAULT_FOLDER, on_progress: Callable[[int, int], None] | None = None,
        gateway_url: str | None = None) -> Added:
    """Create the missing accounts, then write the sign-in sheet for every known participant (with their personal
    gateway links when `gateway_url` is given)."""
    private_dir(folder)
    accounts = load_accounts(folder)
    existing = {email.lower(): uid for uid, email in with_closed_named(client.users(), client.url, folder).items()}
    token = None
    result = Added([], [], [])
    for done, pid in enumerate(ids, 1):
        email = email_for(pid)
        account = accounts.get(pid)
        if email in existing:
            if account is None or account.password is None:
                accounts[pid] = Account(pid, email, None, existing[email])
                result.foreign.append(pid)
            else:
                account.user_id = existing[email]
                result.present.append(pid)
        else:
            if account is None or account.password is None:
                account = accounts[pid] = Account(pid, email, new_password())
            # the password is on disk before the account exists: a crash in between loses nothing
            save_accounts(folder, accounts, client.url)
            token = token or client.invite_token()
            account.user_id = client.sign_up(email, account.password, token)
            result.created.append(pid)
        if accounts[pid].password is not None and accounts[pid].access is None:
            accounts[pid].access = new_access_code()
        if on_progress:
            on_progress(done, len(ids))
    save_accounts(folder, accounts, client.url)
    write_sheet(folder, accounts.values(), client.url, gateway_url)
    return result


def with_closed_named(users: dict[int, str], url: str, folder: Path = DEFAULT_FOLDER) -> dict[int, str]:
    """`users` (id -> e-mail, as Client.users gives them) with the members Label Studio shows as removed named again
    from the accounts file, when that file was written for this server (`url`): the participants `close` took out
    of the organisation keep their annotations' names. Other users are never renamed."""
    try:
        raw = json.loads((folder / ACCOUNTS_FILE).read_text(encoding="utf-8"))
        if raw.get("label_studio") != url:
            return users
        known = {a.user_id: a.email for a in load_accounts(folder).values() if a.user_id is not None}
    except (OSError, ValueError, AttributeError, EvalstudioError):
        return users
    return {uid: known.get(uid, email) if email.startswith(REMOVED) else email for uid, email in users.items()}


def close(client, ids: Iterable[str], folder: Path = DEFAULT_FOLDER) -> tuple[list[str], list[str]]:
    """Take participants' accounts out of the Label Studio organisation, so that they get no more tasks (a quota
    reached, a participant excluded); their annotations stay and count as before. Only accounts `add` created are
    touched. Returns (closed now, closed before). Unknown ids are an error and nothing is closed."""
    from datetime import datetime, timezone

    accounts = load_accounts(folder)
    by_key = {pid.lower(): a for pid, a in accounts.items()}
    wanted = list(dict.fromkeys(ids))
    unknown = [pid for pid in wanted if pid.lower() not in by_key or by_key[pid.lower()].password is None]
    if unknown:
        raise BadInput(f"{folder / ACCOUNTS_FILE}: no account created by evalstudio for {', '.join(unknown[:10])}"
                       + (" ..." if len(unknown) > 10 else ""))
    now, before = [], []
    for pid in wanted:
        account = by_key[pid.lower()]
        if account.user_id is None:
            account.user_id = {e.lower(): uid for uid, e in client.users().items()}.get(account.email.lower())
        removed = account.user_id is not None and client.remove_member(account.user_id)
        (now if removed else before).append(account.participant_id)
        account.closed = account.closed or datetime.now(timezone.utc).isoformat(timespec="seconds")
        save_accounts(folder, accounts, client.url)
    return now, before


def write_sheet(folder: Path, accounts: Iterable[Account], url: str, gateway_url: str | None = None) -> Path:
    """One line per participant with a personal sign-in message (private: it holds passwords and sign-in codes).
    With `gateway_url` (a crowd study behind `evalstudio gateway`) the message is the participant's personal
    gateway link and holds no Label Studio password."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["participant_id", "email", "password", "sign_in_url", "message", "gateway_link"])
    for a in accounts:
        if a.password is None:
            continue
        link = gateway_link(gateway_url, a) if gateway_url and a.access else ""
        if link:
            message = f"Please open your personal link {link} to take part (keep it to yourself; it signs you in)."
        else:
            message = (f"Please sign in at {url}/user/login/ with the e-mail {a.email} and the password {a.password}, "
                       "then open the project named in the study instructions and press 'Label All Tasks'.")
        writer.writerow([a.participant_id, a.email, a.password, f"{url}/user/login/", message, link])
    path = folder / SHEET_FILE
    write_private(path, out.getvalue())
    return path
