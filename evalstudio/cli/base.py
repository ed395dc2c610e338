"""What the command groups share: the app, the consoles, the --projects option and the error exit. Below every
command module (they import it; the package's __init__ imports them), so the command line has no import circle."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.text import Text

from evalstudio.base.errors import BadInput, printable
from evalstudio.protocols import registry

app = typer.Typer(
    help="Published human-evaluation protocols as ready-to-run Label Studio projects: nine ship with it (sotopia, "
    "cmv, circa, dialogue, health from their documents; squality, squality_pairwise, mqm, esa as data), your own "
    "from `evalstudio new`.\n\nConnects to Label Studio with LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY "
    "(environment, ./.env, or the file `evalstudio server` writes).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
class _Console(Console):
    """Markup off: a participant can sign up as "[/x]"@x.com, and rich would read the brackets as markup and crash
    the command; styles are given as Text, never as markup in a string. Every string it renders (printed, or a
    table cell) has its control characters written out (`printable`); Text built here uses `printable` itself."""

    def __init__(self, **options):
        super().__init__(markup=False, highlight=False, **options)

    def render_str(self, text: str, **options):
        return super().render_str(printable(text), **options)


console = _Console()
err = _Console(stderr=True)
REPO_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

ProjectsOption = Annotated[
    Optional[Path],
    typer.Option("--projects", help="projects.yaml to use (default: $EVALSTUDIO_PROJECTS, ./projects.yaml, packaged copy)."),
]


@app.callback()
def _main():
    # retries and skipped tasks are logged as warnings; show them as one readable line each
    import logging

    class Printable(logging.Formatter):  # control characters written out, as on the consoles
        def format(self, record):
            return printable(super().format(record))

    handler = logging.StreamHandler()
    handler.setFormatter(Printable("warning: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    # a terminated command (kill, a job scheduler's time limit) cleans up as Ctrl-C does: the import's private
    # spool of validated tasks and its validation workers go, and an import in progress reports what it wrote
    import signal

    def terminated(number, frame):
        raise SystemExit(128 + number)

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, terminated)


def fail_with(error: Exception) -> typer.Exit:
    err.print(Text.assemble(("error:", "bold red"), f" {printable(str(error))}"), soft_wrap=True)
    return typer.Exit(2 if isinstance(error, BadInput) else 1)  # 2: the input given is wrong


def load_registry(projects: Path | None) -> registry.Registry:
    return registry.load(projects)


def chosen_spec(spec: Path | None, protocol: str | None, projects: Path | None):
    """The spec a ratings file is read with: the --spec file, a --protocol's criteria, or None (the file's usual
    columns, each criterion's scale guessed); both given is refused."""
    from evalstudio.readers.spec import read_spec, spec_from_protocol

    if spec is not None and protocol is not None:
        raise BadInput("give --spec or --protocol, not both")
    if spec is not None:
        return read_spec(spec)
    return spec_from_protocol(load_registry(projects).get(protocol)) if protocol else None
