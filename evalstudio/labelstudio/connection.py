"""Where Label Studio is and which key opens it: the settings every command reads from the environment or a
.env file, and the checks of a server URL (messages never repeat credentials)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from evalstudio.base.credentials import check_api_key
from evalstudio.base.errors import ServerError


@dataclass(frozen=True)
class Settings:
    """Where Label Studio is and the API key to reach it (the key never shown)."""
    url: str
    api_key: str

    def __repr__(self) -> str:  # never show the key
        return f"Settings(url={self.url!r}, api_key='***')"


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a .env file (quotes stripped, comments ignored)."""
    values = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                values[key.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return values


DEFAULT_DATA_DIR = Path(".evalstudio")
DOTENV_FILES = (Path(".env"), DEFAULT_DATA_DIR / "evalstudio.env")


def settings_from_env(dotenv_files: tuple[Path, ...] = DOTENV_FILES) -> Settings:
    """LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY from the environment, else from ./.env, else from the
    file a local `evalstudio server` writes (.evalstudio/evalstudio.env)."""
    file_values: dict[str, str] = {}
    for path in reversed(dotenv_files):
        file_values.update(read_dotenv(path))
    url = os.environ.get("LABEL_STUDIO_URL") or file_values.get("LABEL_STUDIO_URL")
    key = os.environ.get("LABEL_STUDIO_API_KEY") or file_values.get("LABEL_STUDIO_API_KEY")
    missing = [n for n, v in (("LABEL_STUDIO_URL", url), ("LABEL_STUDIO_API_KEY", key)) if not v]
    if missing and dotenv_files == DOTENV_FILES and _wait_for_starting_server(DEFAULT_DATA_DIR):
        return settings_from_env(dotenv_files)
    if missing:
        raise ServerError(
            f"{' and '.join(missing)} not set. Export them or put them in ./.env "
            "(a local server started with `evalstudio server` writes .evalstudio/evalstudio.env for you)."
        )
    return Settings(url.strip().rstrip("/"), check_api_key(key))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: not this user's server
        return False
    return True


def _wait_for_starting_server(data_dir: Path, timeout: float = 900) -> bool:
    """When `evalstudio server` is starting Label Studio for this folder (its marker names a live process), wait
    until it has written the settings (True), saying so once; False when none is starting. A server that stops
    before answering is an error naming its log."""
    import json
    import sys
    import time

    marker = data_dir / "starting"
    try:
        known = json.loads(marker.read_text(encoding="utf-8"))
        pid, url = int(known["pid"]), str(known["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not _alive(pid):
        return False
    sys.stderr.write(f"waiting for the Label Studio that `evalstudio server` (process {pid}) is starting on "
                     f"{shown_url(url)}...\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if read_dotenv(data_dir / "evalstudio.env").get("LABEL_STUDIO_API_KEY"):
            return True
        if not marker.exists() or not _alive(pid):
            if read_dotenv(data_dir / "evalstudio.env").get("LABEL_STUDIO_API_KEY"):
                return True
            raise ServerError(f"the `evalstudio server` that was starting (process {pid}) stopped before Label "
                              f"Studio answered; its log is {data_dir / 'label-studio.log'}")
        time.sleep(0.5)  # polling a file for a state (the settings written), not waiting a duration
    raise ServerError(f"Label Studio was still starting after {timeout:.0f} s (process {pid}); see "
                      f"{data_dir / 'label-studio.log'}")


def check_url(url: str, name: str = "LABEL_STUDIO_URL") -> str:
    """An http(s) URL with a host, without a trailing /; an error that names `name` and does not repeat credentials."""
    from urllib.parse import urlsplit

    url = url.strip().rstrip("/")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ServerError(f"{name} contains a space or a control character; give the URL alone, e.g. "
                          "http://127.0.0.1:8080")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ServerError(f"{name} is not a valid URL: {shown_url(url)!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerError(f"{name} must be an http:// or https:// URL with a host, got {shown_url(url)!r}")
    host = parts.hostname
    if not (host.startswith("[") or ":" in host):  # an IPv6 address is checked by urlsplit
        try:
            host.encode("idna").decode("idna")  # what the HTTP client does with it (empty or bad labels fail)
        except UnicodeError:
            raise ServerError(f"{name}: {host!r} is not a valid host name") from None
    import httpx

    try:  # and what it accepts: e.g. a full-width host name, which IDNA maps but the client refuses
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError):
        raise ServerError(f"{name}: {shown_url(url)!r} is not a URL the HTTP client accepts (host "
                          f"{host!r})") from None
    return url


def check_address(value: str, name: str) -> str:
    """An IP address (a reverse proxy's), as uvicorn compares it with the connection's; one-line error otherwise."""
    import ipaddress

    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise ServerError(f"{name}: {value[:60]!r} is not an IP address (give the address your reverse proxy "
                          "connects from, e.g. 127.0.0.1)") from None


def shown_url(url: str) -> str:
    """The URL with any user:password@ replaced by ***@, and a password given as a query parameter (libpq's
    ?password=...) by ***."""
    import re

    url = re.sub(r"(?<=//)[^/?#]*@", "***@", url)  # up to the last @ of the authority: a password may hold @
    return re.sub(r"(?i)([?&](?:password|sslpassword)=)[^&#]*", r"\1***", url)
