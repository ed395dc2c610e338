"""A throwaway PostgreSQL cluster on a loopback port for the test matrix (Debian's `postgresql` package).

The server refuses to run as root, so as root the cluster is created and run as the `postgres` user."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

USER = "evalstudio"


def bin_dir() -> Path:
    """Directory with initdb/pg_ctl: on PATH, else the newest /usr/lib/postgresql/*/bin (Debian)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not candidates:
        raise RuntimeError("PostgreSQL server binaries not found (initdb). Install Debian's `postgresql` package, "
                           "or run only the SQLite half with EVALSTUDIO_TEST_DATABASES=sqlite")
    return Path(candidates[-1]).parent


class TempPostgres:
    def __init__(self, port: int):
        self.port = port
        self.bin = bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="evalstudio-pg-"))
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        result = subprocess.run([*prefix, *command], capture_output=True, text=True, cwd=self.root)
        if result.returncode:
            log = (self.root / "postgres.log")
            raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}"
                               f"{log.read_text() if log.exists() else ''}")

    def start(self) -> "TempPostgres":
        data = self.root / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-locale")
        # fsync off: a test database that never has to survive a machine crash
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.root / "postgres.log"), "-w", "start")
        return self

    def create_database(self, name: str) -> str:
        """Create database `name`; its postgresql:// URL."""
        self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name)
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
