"""The command line as a Click command, for the documentation site's reference page (docs/reference/cli.md, which
mkdocs-click renders from it): generated from the Typer app, so the reference says what `--help` says."""

from __future__ import annotations

import typer.main

from . import app

command = typer.main.get_command(app)
