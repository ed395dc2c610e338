"""`evalstudio compare`: a reproduction of a human evaluation against the original."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import BadInput, EvalstudioError

from .base import ProjectsOption, app, chosen_spec, console, fail_with


def publication_ratings(path: Path) -> tuple[Path, Path | None]:
    """(the ratings file, its spec or None) of a ratings file, or of a folder `evalstudio publish` wrote (its
    data_release/data/ratings.csv and data_release/spec.yaml)."""
    if not path.is_dir():
        return path, None
    ratings, spec = path / "data_release" / "data" / "ratings.csv", path / "data_release" / "spec.yaml"
    if not ratings.is_file():
        raise BadInput(f"{path}: a folder without data_release/data/ratings.csv; give a ratings file or a folder "
                       "`evalstudio publish` wrote")
    return ratings, spec if spec.is_file() else None


@app.command()
def compare(
    original: Annotated[Path, typer.Argument(
        help="The original study's ratings (any file `analyze` reads, or a folder `evalstudio publish` wrote).")],
    reproduction: Annotated[Path, typer.Argument(help="The reproduction's ratings (a file or a publish folder), "
                                                      "read with the same spec.")],
    spec: Annotated[Optional[Path], typer.Option(help="The analysis spec of both files (as for `analyze`).")] = None,
    protocol: Annotated[Optional[str], typer.Option(help="A built-in protocol: its criteria as the spec.")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the CSVs.")] = Path("compare"),
    projects: ProjectsOption = None,
):
    """How far a reproduction agrees with the original study.

    Per criterion and system, the two studies' scores and their small-sample coefficient of variation CV* (Belz,
    Popović & Mille 2022, on the scale shifted to start at 0); and the correlation of the two studies' system scores
    and of their item-level means (Pearson with its 95% interval, Spearman, Kendall). Writes compare_systems.csv,
    compare_correlations.csv and notes.txt. Two publish folders are read with the original's data_release/spec.yaml
    (unless --spec or --protocol is given)."""
    from evalstudio.readers.ratings import read_ratings
    from evalstudio.readers.spec import read_spec

    from ..exporters.analyses.compare import compare_studies
    from ..exporters.tables.files import write_results

    try:
        original, own_spec = publication_ratings(original)
        reproduction, _ = publication_ratings(reproduction)
        given = chosen_spec(spec, protocol, projects)
        first, full_spec = read_ratings(original, given if given is not None or own_spec is None else read_spec(own_spec))
        second, _ = read_ratings(reproduction, full_spec)
        systems, correlations, notes = compare_studies(first, second, full_spec)
        if systems.empty and correlations.empty:
            raise BadInput("the two files share no numeric criterion: nothing to compare")
        write_results(output, {"compare_systems": systems, "compare_correlations": correlations}, notes)
    except EvalstudioError as e:
        raise fail_with(e)
    for criterion, g in systems.groupby("criterion", sort=False):
        console.print(f"{criterion}: CV* per system " + ", ".join(
            f"{r.system} {r.cv_star:.2f}" for r in g.itertuples() if r.cv_star == r.cv_star) + f" (mean "
            f"{g['cv_star'].mean():.2f})")
    for r in correlations.itertuples():
        shown = (f"r {r.pearson:.3f}" + (f" [{r.pearson_lo:.3f}, {r.pearson_hi:.3f}]" if r.pearson_lo == r.pearson_lo
                                         else "") + f", Spearman {r.spearman:.3f}, Kendall {r.kendall:.3f}"
                 if r.pearson == r.pearson else "too few to correlate")
        console.print(f"{r.criterion}, {r.level} level ({r.n}): {shown}")
    for note in notes:
        console.print(note)
    console.print(f"written to {output}")
