"""`evalstudio new`: a protocol of your own from a template, as data (a projects.yaml entry and a labeling config)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evalstudio.base.errors import EvalstudioError
from evalstudio.operations.creating import create

from .base import fail_with, app, console



@app.command()
def new(
    name: Annotated[str, typer.Argument(help="The new protocol's name: lower-case letters, digits and _ (e.g. "
                                             "my_study). It names the entry, the config and the example folder.")],
    template: Annotated[str, typer.Option(
        help="likert (5-point rating scales of each response to a context), slider (a 0-100 slider per summary, "
             "from a CSV), pairwise (two responses side by side: A better, B better, tie, both bad; sides drawn "
             "per task) or best-worst (four outputs: the best and the worst; balanced tuples).")] = "likert",
    folder: Annotated[Path, typer.Option("--dir", help="Folder of the projects.yaml to add the entry to (created "
                                                       "with only this entry if it has none).")] = Path("."),
):
    """Start a protocol of your own with no Python: writes a projects.yaml entry, its labeling config
    (labeling_configs/NAME.xml) and an example input (examples/NAME/), with comments saying what to change; they
    validate and import as they are. Then: `evalstudio validate NAME examples/NAME/*` and `evalstudio import NAME
    examples/NAME/*` in that folder (evalstudio reads ./projects.yaml there)."""
    try:
        written = create(name, template, folder)
    except EvalstudioError as e:
        raise fail_with(e)
    for path in written:
        console.print(f"wrote {path}")
    example = next(p for p in written if p.parent.name == name)
    console.print(("Next: " if folder == Path(".") else f"Next, in {folder}: ") + f"evalstudio validate {name} {example.relative_to(folder)}\n"
                  f"Then edit the entry and {Path('labeling_configs') / (name + '.xml')} for your study; the view "
                  "is checked against the entry every time projects.yaml is read.")
