"""One importer module per protocol, named like the protocol. Uses evalstudio.values (the record helpers of
sources) and evalstudio.base; the registry (evalstudio.protocols) finds them.

Each module provides:
  NAME                         the protocol name
  prepare(paths)               -> (context, paths to read)   cross-file lookups, e.g. Circa gold labels
  read(path)                   -> iterator of (line, record | Problem)   streaming, one record at a time
  convert(record, project, ctx) -> list of task data dicts   raises FieldError / RecordInvalid
"""

from __future__ import annotations

from types import ModuleType

from evalstudio.base.errors import UnknownName

from . import circa, cmv, dialogue, health, sotopia

IMPORTERS: dict[str, ModuleType] = {m.NAME: m for m in (sotopia, cmv, circa, dialogue, health)}


def get(name: str) -> ModuleType:
    """The importer module of that name, or an error listing them."""
    try:
        return IMPORTERS[name]
    except KeyError:
        raise UnknownName("importer", name, list(IMPORTERS)) from None
