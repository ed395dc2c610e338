"""Secrets on disk and in the environment: private folders and files, the ML backend's basic-auth secret, API keys.

Secrets never go on a command line (other local users see it in `ps`), in a log or in an error message.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from .errors import BadInput, EvalstudioError

ML_AUTH_ENV = "EVALSTUDIO_ML_BASIC_AUTH"  # "user:password"
ML_AUTH_FILE = "ml-backend.auth"  # default file name, next to the backend's model folder
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]+")


def private_dir(path: Path) -> Path:
    """A folder for secrets: created readable by this user only (0700) when it does not exist. An existing one is
    refused when it belongs to someone else or others can write to it (a shared folder such as /tmp: its mode is
    never changed, and a secret there could be swapped or removed); one of this user's own that others can only
    read is tightened to 0700."""
    if not path.exists():
        path.mkdir(parents=True, mode=0o700)
        return path
    info = path.stat()
    if not path.is_dir():
        raise BadInput(f"{path}: not a folder")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise BadInput(f"{path}: belongs to another user; give a folder of your own for evalstudio's secrets")
    if info.st_mode & 0o022:
        raise BadInput(f"{path}: other users can write to this folder, so it cannot hold evalstudio's secrets "
                              f"(its mode is left as it is); give a folder of your own, e.g. {path / 'evalstudio'}")
    if info.st_mode & 0o077:
        path.chmod(0o700)
    return path


def write_private(path: Path, text: str) -> None:
    """Write a file that only this user can read (0600 from creation on, never briefly world-readable)."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def create_private(path: Path, text: str) -> bool:
    """Create a private file (as write_private) unless it exists: whether this call created it. Atomic: of processes
    creating it at once, exactly one succeeds and the others find its whole text, never a part."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def check_basic_auth(value: str, where: str) -> str:
    """'user:password' with no whitespace or control characters; the message never repeats the value."""
    value = value.strip()
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise EvalstudioError(f"{where}: expected 'user:password'")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise EvalstudioError(f"{where}: the user and password must not contain spaces or control characters")
    return value


def basic_auth_header(value: str) -> str:
    """The HTTP Authorization header value for 'user:password'."""
    import base64

    return "Basic " + base64.b64encode(value.encode()).decode()


def ml_auth(auth_file: Path | None, create: bool = False) -> str:
    """The ML backend's 'user:password': $EVALSTUDIO_ML_BASIC_AUTH, else the file (created with a random password
    when `create` and it does not exist)."""
    from_env = os.environ.get(ML_AUTH_ENV, "")
    if from_env.strip():
        return check_basic_auth(from_env, ML_AUTH_ENV)
    if auth_file is None:
        raise EvalstudioError(f"the ML backend needs basic auth: set {ML_AUTH_ENV}=user:password or give "
                              "--basic-auth-file")
    if not auth_file.is_file():
        if not create:
            raise EvalstudioError(f"{auth_file}: no such file (the ML backend writes it on its first start; or set "
                                  f"{ML_AUTH_ENV}=user:password)")
        write_private(auth_file, f"evalstudio:{secrets.token_urlsafe(24)}\n")
    if auth_file.stat().st_mode & 0o077:
        auth_file.chmod(0o600)
    try:
        text = auth_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise EvalstudioError(f"{auth_file}: cannot read the ML backend's credentials ({type(e).__name__})") from None
    return check_basic_auth(text, str(auth_file))


def check_api_key(key: str, where: str = "LABEL_STUDIO_API_KEY") -> str:
    """An API token stripped of surrounding whitespace (a CRLF .env leaves a '\\r'); an error that never shows it."""
    key = key.strip()
    if not key:
        raise EvalstudioError(f"{where} is empty")
    if not _TOKEN.fullmatch(key):
        raise EvalstudioError(f"{where} contains characters an API token cannot have (spaces, quotes or control "
                              "characters); copy it again from Label Studio's Account & Settings page")
    return key
