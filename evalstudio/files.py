"""Reading the small text files a researcher names (projects.yaml, labeling configs) as hostile input: a regular
file only (a FIFO would hang the command, /dev/zero would fill the memory), of a bounded size."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
