"""`evalstudio` command line: one module per command group (data, model, servers, ...) on the app of cli/base.py,
which holds what the groups share. A command parses its options (typer), calls one function of the room below
(evalstudio.operations, or a room below it where one call does it) and prints; the top floor: nothing imports it.
Uses typer and rich, evalstudio.operations and the rooms below it."""

from __future__ import annotations

import typer

from . import active, analyze, compare, data, gateway, judge, model, new, plan, publish, servers, study  # noqa: F401 - the command groups register on app
from .base import REPO_EXAMPLES, ProjectsOption, fail_with, load_registry, app, console, err  # noqa: F401 - the package's API


def _one_line_summaries(typer_app: typer.Typer) -> None:
    """The command list shows each docstring's first paragraph; typer's rich mode keeps its source line breaks
    there (mid-sentence breaks in `evalstudio --help`), so give every command that paragraph as one line, and its
    own --help every paragraph as one line."""
    import inspect

    for info in [*typer_app.registered_commands, *typer_app.registered_groups]:
        doc = info.help or (info.callback.__doc__ if info.callback else None)
        sub = getattr(info, "typer_instance", None)
        if doc is None and sub is not None:
            doc = sub.info.help
        if info.short_help is None and doc:
            info.short_help = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
        if info.help is None and doc and sub is None:  # every paragraph as one line (rich keeps source breaks)
            info.help = "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))
        if sub is not None:
            _one_line_summaries(sub)


_one_line_summaries(app)
