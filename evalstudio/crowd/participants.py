"""Crowd participants (Prolific PIDs, MTurk WorkerIds) as Label Studio accounts.

Label Studio Community has no API to create an account with a password, so evalstudio signs each participant up
through the organisation's invite link (the same form a person would fill in), with a generated password. The
account's e-mail is `<participant id, lower case>@participants.invalid` (a reserved domain: no mail is ever sent
there), so every annotation names its participant without anyone typing an id. Accounts and passwords are kept in
the study's ledger (evalstudio.crowd.ledger: a private database in the participants folder), beside a sign-in sheet with
one personal line per participant; re-running `add` with the same ids creates nothing twice, and `add`, `close` and
the gateway's self sign-up can run at the same time.
"""

from __future__ import annotations

import csv
import fcntl
import io
import os
import re
import secrets
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from evalstudio.base.credentials import private_dir, write_private
from evalstudio.base.errors import BadInput, EvalstudioError, InvalidInput, Problem

from . import ledger
from .ledger import Account

__all__ = ["Account", "add", "close", "join", "load_accounts", "read_ids", "write_sheet", "study_folder",
           "ledger_folders", "SHARED"]

DOMAIN = "participants.invalid"
REMOVED = "removed user "  # how Client.users names a member removed from the organisation
PARTICIPANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PARTICIPANT_ID_RULE = "letters, digits, _ and -, starting with a letter or digit; at most 64"  # what PARTICIPANT_ID takes
ID_COLUMNS = ("participant_id", "participant id", "prolific_pid", "prolific_id", "workerid", "worker_id")
DEFAULT_FOLDER = Path(".evalstudio") / "participants"
ACCOUNTS_FILE = ledger.FILE  # the ledger: accounts, passwords and sign-in codes (0600)
SHEET_FILE = "sign_in.csv"


def email_for(participant_id: str) -> str:
    """The Label Studio e-mail of a participant id (lower-case, at the study's domain)."""
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
            problems.append(Problem(path, line, "participant id", f"{shown!r} is not an id ({PARTICIPANT_ID_RULE})"))
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


def has_ledger(folder: Path) -> bool:
    """Whether `folder` holds a study's participants (a ledger, or a participants.json to take over)."""
    return any((Path(folder) / name).exists() for name in (ledger.FILE, ledger.POINTER, ledger.OLD_ACCOUNTS))


SHARED = "(shared pool)"  # the "study" setting of a participants folder whose ledger every study served from it shares
STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def study_folder(root: Path, study: str | None, shared: bool = False, claim: bool = False) -> Path:
    """The folder of a study's ledger in a participants folder `root`: one namespace per study (its participants,
    sign-in codes and sessions, study-link key, cap and sign-up limits; issue 50).

    The first study served from `root` keeps its ledger in `root` itself (the layout of earlier versions, so a
    running study keeps its ledger); every other study has `root/STUDY`. A folder whose ledger the operator shared
    (`shared`: the gateway's --shared-pool) is one pool for every study served from it. `claim` (the gateway,
    `participants add --study`): the root's ledger is taken for this study when no study owns it yet."""
    root = Path(root)
    if shared and study is None:  # (participants add --shared-pool: the pool, whichever study it serves)
        if claim:
            private_dir(root)
            ledger.open_ledger(root).set_setting("study", SHARED)
        return root
    if not STUDY_NAME.fullmatch(study or ""):
        raise BadInput(f"{study!r} is not a study name (letters, digits, _ . and -)")
    own = root / study
    if not shared and has_ledger(own):
        return own
    if claim:
        private_dir(root)
        book = ledger.open_ledger(root)
        owner = book.setting("study", make=lambda: SHARED if shared else study)
        if shared and owner != SHARED:
            book.set_setting("study", SHARED)
            owner = SHARED
    elif has_ledger(root):
        owner = ledger.open_ledger(root).setting("study")
    else:
        return own if own.is_dir() else root  # nothing recorded yet
    if shared or owner in (None, study, SHARED):  # None: a ledger of an earlier version, or of `add` alone
        return root
    return own


def ledger_folders(root: Path) -> list[Path]:
    """Every study ledger in a participants folder: the root's own and its studies' (root/STUDY)."""
    root = Path(root)
    found = [root] if has_ledger(root) else []
    if root.is_dir():
        found += sorted(p for p in root.iterdir() if p.is_dir() and STUDY_NAME.fullmatch(p.name) and has_ledger(p))
    return found


def load_accounts(folder: Path) -> dict[str, Account]:
    """Every participant of the ledger in `folder` (none when the folder holds no study)."""
    if not has_ledger(folder):
        return {}
    return ledger.open_ledger(folder).accounts()


def new_password(length: int = 18) -> str:
    # letters and digits only: safe in a CSV cell (never read as a formula) and in a chat message
    """A random password of letters and digits."""
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(length))


def new_access_code() -> str:
    """A random sign-in code for the gateway (24 letters and digits)."""
    return new_password(24)


def gateway_link(gateway_url: str, account: Account) -> str:
    """The participant's personal sign-in link at the gateway."""
    return f"{gateway_url.rstrip('/')}/s/{account.participant_id}/{account.access}"


@dataclass
class Added:
    """What `add` did: accounts created, already present, and foreign (existing, password unknown)."""
    created: list[str]
    present: list[str]  # already there, created by an earlier `add`
    foreign: list[str]  # an account with that e-mail exists but evalstudio does not know its password


def _sign_up(client, book: ledger.Ledger, account: Account, token: str) -> int:
    """Create the Label Studio account of a ledger row (its password is in the ledger before the account exists: a
    crash in between loses nothing). A sign-up refused because the e-mail exists is this row's account when the
    ledger's password opens it (another process signed it up at the same moment)."""
    try:
        uid = client.sign_up(account.email, account.password, token)
    except EvalstudioError:
        uid = {e.lower(): u for u, e in client.users().items()}.get(account.email.lower())
        if uid is None:
            raise
        try:
            client.log_in(account.email, account.password)
        except EvalstudioError:
            raise EvalstudioError(f"an account {account.email} exists in Label Studio that evalstudio did not "
                                  "create") from None
    book.update(account.participant_id, user_id=uid)
    return uid


def add(client, ids: list[str], folder: Path = DEFAULT_FOLDER, on_progress: Callable[[int, int], None] | None = None,
        gateway_url: str | None = None) -> Added:
    """Create the missing accounts, then write the sign-in sheet for every known participant (with their personal
    gateway links when `gateway_url` is given). Safe beside a gateway signing people up through the study link:
    both go through the study's ledger."""
    private_dir(folder)
    book = ledger.open_ledger(folder)
    book.set_setting("label_studio", client.url)
    existing = {email.lower(): uid for uid, email in with_closed_named(client.users(), client.url, folder).items()}
    token = None
    result = Added([], [], [])
    for done, pid in enumerate(ids, 1):
        email = email_for(pid)
        known = book.account(pid)
        if known is None and email in existing:  # another study's participant, or made outside evalstudio
            sibling = _in_other_study(folder, pid)
            known, _ = book.reserve(Account(pid, email, sibling.password, existing[email], access=new_access_code(),
                                            source=sibling.source) if sibling else Account(pid, email, None,
                                                                                           existing[email]))
        if known is None or (known.password is None and email not in existing):
            if known is not None:  # a foreign account that is gone: evalstudio makes it now
                book.update(pid, password=new_password(), access=new_access_code())
            else:
                book.reserve(Account(pid, email, new_password(), access=new_access_code()))
            known = book.account(pid)
        if known.password is None:
            result.foreign.append(pid)
        elif known.user_id is not None or email in existing:
            if known.user_id is None:
                book.update(pid, user_id=existing[email])
            result.present.append(pid)
        else:
            token = token or client.invite_token()
            _sign_up(client, book, known, token)
            result.created.append(pid)
        if on_progress:
            on_progress(done, len(ids))
    write_sheet(folder, None, client.url, gateway_url)
    return result


def _in_other_study(folder: Path, participant: str) -> Account | None:
    """The participant's account as another study of the same participants folder made it (one Label Studio
    account per person: the same e-mail), with the password evalstudio gave it."""
    folder = Path(folder)
    for other in dict.fromkeys(ledger_folders(folder.parent) + ledger_folders(folder)):
        if other.resolve() != folder.resolve():
            account = ledger.open_ledger(other).account(participant)
            if account is not None and account.password is not None:  # (a joined one has no password to sign in)
                return account
    return None


def joining(participant: str, platform: tuple[str | None, str | None] = (None, None)) -> Account:
    """The account of one participant signing up through the study link (the gateway records it with its session in
    one ledger transaction, Ledger.sign_up: refused with ledger.Taken when the id is known, ledger.StudyFull beyond
    the cap). Their Label Studio account is made behind it by the gateway's sync writer, without a password (they
    never sign in to Label Studio: the gateway writes their answers): nothing Label Studio does or fails to do takes
    the person back out of the ledger. The ledger's password is never used for a joined account; it marks the
    account as evalstudio's."""
    return Account(participant, email_for(participant), new_password(), access=new_access_code(), source="join",
                   platform_study=platform[0], platform_session=platform[1])


def with_closed_named(users: dict[int, str], url: str, folder: Path = DEFAULT_FOLDER) -> dict[int, str]:
    """`users` (id -> e-mail, as Client.users gives them) with the members Label Studio shows as removed named again
    from the ledgers of the participants folder (every study's) written for this server (`url`): the participants `close` took out of the
    organisation keep their annotations' names. Other users are never renamed."""
    known: dict[int, str] = {}
    for found in ledger_folders(folder):  # every study's ledger of the participants folder
        try:
            book = ledger.open_ledger(found)
            made = {a.user_id: a.email for a in book.accounts().values() if a.user_id is not None}
            if book.setting("label_studio") == url or _made_here(made, users):
                known.update(made)
        except (OSError, EvalstudioError):
            continue
    return {uid: known.get(uid, email) if email.startswith(REMOVED) else email for uid, email in users.items()}


def _made_here(made: dict[int, str], users: dict[int, str]) -> bool:
    """Whether a ledger's accounts (user id -> e-mail) are members of the server whose users are `users` though the
    ledger names it by another address (a second gateway host, a proxy: the last gateway started records its own):
    some are members there with their e-mails, and none of their user ids is someone else's."""
    live = {uid: users[uid].lower() for uid in made if uid in users and not users[uid].startswith(REMOVED)}
    return bool(live) and all(made[uid].lower() == email for uid, email in live.items())


def close(client, ids: Iterable[str], folder: Path = DEFAULT_FOLDER) -> tuple[list[str], list[str]]:
    """Take participants' accounts out of the Label Studio organisation, so that they get no more tasks (a quota
    reached, a participant excluded); their annotations stay and count as before. Only accounts `add` created are
    touched. Returns (closed now, closed before). Unknown ids are an error and nothing is closed."""
    from datetime import datetime, timezone

    book = ledger.open_ledger(folder) if has_ledger(folder) else None
    wanted = list(dict.fromkeys(ids))
    found = {pid: book.account(pid) if book else None for pid in wanted}
    unknown = [pid for pid, a in found.items() if a is None or a.password is None]
    if unknown:
        raise BadInput(f"{folder / ledger.FILE}: no account created by evalstudio for {', '.join(unknown[:10])}"
                       + (" ..." if len(unknown) > 10 else ""))
    now, before = [], []
    for pid in wanted:
        account = found[pid]
        if account.user_id is None:
            account.user_id = {e.lower(): uid for uid, e in client.users().items()}.get(account.email.lower())
        removed = account.user_id is not None and client.remove_member(account.user_id)
        (now if removed else before).append(account.participant_id)
        book.update(pid, user_id=account.user_id,
                    closed=account.closed or datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return now, before


def write_sheet(folder: Path, accounts: Iterable[Account] | None, url: str, gateway_url: str | None = None) -> Path:
    """One line per participant with a personal sign-in message (private: it holds passwords and sign-in codes).
    With `gateway_url` (a crowd study behind `evalstudio gateway`) the message is the participant's personal
    gateway link and holds no Label Studio password. `accounts` None: every account of the ledger, read under a
    lock on the sheet, so that of several processes writing it the last one writes what all of them recorded."""
    private_dir(folder)
    path = folder / SHEET_FILE
    fd = os.open(folder / f".{SHEET_FILE}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        shown = load_accounts(folder).values() if accounts is None else accounts
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["participant_id", "email", "password", "sign_in_url", "message", "gateway_link"])
        for a in shown:
            if a.password is None:
                continue
            link = gateway_link(gateway_url, a) if gateway_url and a.access else ""
            if link:
                message = f"Please open your personal link {link} to take part (keep it to yourself; it signs you in)."
            else:
                message = (f"Please sign in at {url}/user/login/ with the e-mail {a.email} and the password "
                           f"{a.password}, then open the project named in the study instructions and press "
                           "'Label All Tasks'.")
            # a participant who joined through the study link has no Label Studio password (only the gateway link)
            password = "" if a.source == "join" else a.password
            writer.writerow([a.participant_id, a.email, password, f"{url}/user/login/", message, link])
        write_private(path, out.getvalue())
    finally:
        os.close(fd)
    return path
