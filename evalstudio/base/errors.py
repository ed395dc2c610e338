"""Exceptions users see. Each message says what is wrong and where."""

from __future__ import annotations

import re
from dataclasses import dataclass

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with its control characters written out (ESC as \\x1b): what is printed or written for people holds
    file names, cell values, participant ids and e-mail addresses, and an escape sequence in them would drive the
    terminal (clear the screen, set the window title, hide what follows)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class EvalstudioError(Exception):
    """Base class: the CLI prints these without a traceback."""


class BadInput(EvalstudioError):
    """What the user gave is wrong (input files, projects.yaml, an export file, a name): the CLI exits with 2.
    Other errors (server, credentials, environment) exit with 1."""


class RegistryError(BadInput, ValueError):
    """projects.yaml or a labeling config is invalid."""


class UnknownName(BadInput, KeyError):
    """A protocol or importer name that is not registered."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.message = f"unknown {kind} '{name}'; valid names: {', '.join(sorted(valid))}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Problem:
    """One problem in an input file: `file:line: field: message`."""

    path: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class InvalidInput(BadInput, ValueError):
    """Input files failed validation; nothing was imported."""

    MAX_SHOWN = 50

    def __init__(self, problems: list[Problem], outcome: str = "nothing was imported", total: int | None = None):
        """total: how many problems there are when `problems` holds only the first of them."""
        self.problems = problems
        self.total = max(total or 0, len(problems))
        shown = "\n".join(str(p) for p in problems[: self.MAX_SHOWN])
        more = self.total - min(len(problems), self.MAX_SHOWN)
        tail = f"\n... and {more} more problem(s)" if more > 0 else ""
        super().__init__(f"{self.total} problem(s) found, {outcome}:\n{shown}{tail}")


MAX_PROBLEMS = 1000  # problems kept per input file (all are counted)


class Problems:
    """The problems of one input file as they are found: the first `limit` kept, every one counted, raised together
    (InvalidInput says how many there are)."""

    def __init__(self, path, limit: int = MAX_PROBLEMS):
        self.path, self.limit = str(path), limit
        self.items: list[Problem] = []
        self.count = 0

    def add(self, line: int | None, field: str | None, message: str) -> None:
        """Count a problem at this line and field; keep it while fewer than `limit` are kept."""
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append(Problem(self.path, line, field, message))

    def add_rows(self, mask, lines, field: str | None, message) -> None:
        """Problems at the rows in `mask` (a boolean array; `lines`: each row's line); `message` is a text or a
        function of the row index (called only for the rows kept)."""
        import numpy as np

        index = np.flatnonzero(mask)
        self.count += len(index)
        for i in index[: max(0, self.limit - len(self.items))]:
            self.items.append(Problem(self.path, int(lines[i]), field, message if isinstance(message, str) else message(i)))

    def raise_if_any(self, outcome: str = "nothing was analysed") -> None:
        """InvalidInput with the kept problems in line order and the total count, if any was found."""
        if self.count:
            raise InvalidInput(sorted(self.items, key=lambda p: p.line or 0), outcome, total=self.count)


class BadExport(BadInput, ValueError):
    """A file given as a Label Studio export is not one."""


class ServerError(EvalstudioError):
    """Label Studio is unreachable, rejected the request, or failed."""


class Transient(ServerError):
    """A failure that may pass if the request is sent again: unreachable, timeout, HTTP 5xx/429/408."""
