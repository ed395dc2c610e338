"""Files as hostile ground. Reading the small text files a researcher names (projects.yaml, labeling configs): a
regular file only (a FIFO would hang the command, /dev/zero would fill the memory), of a bounded size. Writing an
output: readable by this user only, never through a symbolic link, a folder written whole or not at all."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import BadInput

MAX_TEXT_BYTES = 8 * 1024 * 1024  # far above any projects.yaml or labeling config


class NotReadable(OSError):
    """The file is no regular file, or too large; strerror says which, in words for the researcher."""


def read_text_file(path: Path, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (NotReadable / OSError / UnicodeDecodeError)."""
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotReadable(0, "not a regular file (a device, a pipe or a folder)")
        if info.st_size > limit:
            raise NotReadable(0, f"larger than {limit // (1024 * 1024)} MB")
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, limit + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            raise NotReadable(0, f"larger than {limit // (1024 * 1024)} MB")
    finally:
        os.close(fd)
    return data.decode("utf-8")


def open_output(path: Path, mode: str = "w", **options) -> IO:
    """An output file opened for writing ("w", "wb") or appending ("a"), readable by this user only (0600: exports,
    reports, status and approval files name participants), never through a symbolic link: a link planted where an
    output goes (by another user of a shared folder) would make us overwrite whatever it points to."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    try:
        descriptor = os.open(path, flags, 0o600)
    except OSError as e:
        if Path(path).is_symlink():
            raise BadInput(f"{path}: is a symbolic link; evalstudio does not write through one (remove it, or give "
                           "another output name)") from None
        raise BadInput(f"{path}: cannot write it: {e.strerror}") from None
    try:
        os.fchmod(descriptor, 0o600)
        return os.fdopen(descriptor, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""}) | options)
    except BaseException:
        os.close(descriptor)
        raise


def write_output(path: Path, text: str) -> None:
    """A text output file, as `open_output` opens it."""
    with open_output(path) as f:
        f.write(text)


@contextlib.contextmanager
def staged_folder(output: Path) -> Iterator[Path]:
    """An output folder written as a whole or not at all: the files are written into a private folder beside it and
    moved into `output` (made if missing) only when everything is written; on an error nothing is left. A symbolic
    link as `output` is refused (it would send the files wherever it points, over what is there)."""
    output = Path(output)
    if output.is_symlink():
        raise BadInput(f"{output}: is a symbolic link; evalstudio does not write through one (give a folder)")
    if output.exists() and not output.is_dir():
        raise BadInput(f"{output}: is a file; -o names the folder for index.html and the CSVs")
    parent = output.parent
    if not parent.is_dir():
        raise BadInput(f"{output}: the folder {parent} does not exist")
    stage = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=parent))
    try:
        yield stage
        output.mkdir(exist_ok=True)
        if output.is_symlink():  # made a link in the meantime
            raise BadInput(f"{output}: is a symbolic link; evalstudio does not write through one (give a folder)")
        for item in sorted(stage.iterdir()):
            os.replace(item, output / item.name)  # a link in the folder is replaced itself, never followed
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def check_output_file(path: Path) -> None:
    """An output file path whose folder exists and that is not a folder itself."""
    if path.is_dir():
        raise BadInput(f"{path}: is a folder; give a file name with -o")
    if not path.parent.is_dir():
        raise BadInput(f"{path}: the folder {path.parent} does not exist")
