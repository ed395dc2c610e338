"""What the command groups share: the app, the consoles, the --projects option and the error exit. Below every
command module (they import it; the package's __init__ imports them), so the command line has no import circle."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from evalstudio.base.errors import BadInput, printable
from evalstudio.operations.consoles import console, err
from evalstudio.operations.reading import chosen_spec  # noqa: F401 - the commands' spec option
from evalstudio.operations.waiting import WAIT_SECONDS
from evalstudio.protocols import registry

app = typer.Typer(
    help="Published human-evaluation protocols as ready-to-run Label Studio projects: nine ship with it (sotopia, "
    "cmv, circa, dialogue, health from their documents; squality, squality_pairwise, mqm, esa as data), your own "
    "from `evalstudio new`.\n\nConnects to Label Studio with LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY "
    "(environment, ./.env, or the file `evalstudio server` writes).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
REPO_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

ProjectsOption = Annotated[
    Optional[Path],
    typer.Option("--projects", help="projects.yaml to use (default: $EVALSTUDIO_PROJECTS, ./projects.yaml, packaged copy)."),
]

WaitOption = Annotated[float, typer.Option(
    "--wait", min=1, metavar="SECONDS",
    help="How long to wait for Label Studio: to receive what the study's gateway acknowledged (then the command "
         "goes on and says what its output lacks), and for each answer to its reads (then it gives up, writing "
         "nothing); a line on stderr every few seconds meanwhile.")]


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
    """Print the error as the operator reads it and give the command's exit (2: the input given is wrong)."""
    err.print(Text.assemble(("error:", "bold red"), f" {printable(str(error))}"), soft_wrap=True)
    return typer.Exit(2 if isinstance(error, BadInput) else 1)  # 2: the input given is wrong


def load_registry(projects: Path | None) -> registry.Registry:
    """The protocol registry from --projects (or $EVALSTUDIO_PROJECTS, ./projects.yaml, the packaged copy)."""
    return registry.load(projects)
