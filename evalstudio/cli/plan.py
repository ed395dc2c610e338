"""`evalstudio plan`: how many items and annotators a study needs, from a pilot's ratings (the planning:
evalstudio.operations.planning)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import EvalstudioError
from evalstudio.operations.planning import make_plan

from .base import ProjectsOption, app, console, fail_with


@app.command()
def plan(
    ratings: Annotated[Optional[Path], typer.Argument(
        help="The pilot's ratings, any file `analyze` reads (see --spec). Without it, --protocol's projects are read "
             "live from Label Studio (or from a JSON export given here).")] = None,
    delta: Annotated[Optional[float], typer.Option(
        help="Target: the smallest difference between the two systems' mean scores worth detecting, in the "
             "criterion's units (e.g. 0.3 on a 1-5 scale), with the power asked for.")] = None,
    agreement_width: Annotated[Optional[float], typer.Option(
        help="Target: the widest acceptable 95% interval of Krippendorff's alpha (interval), e.g. 0.2.")] = None,
    correlation_width: Annotated[Optional[float], typer.Option(
        help="Target: the widest acceptable 95% interval of the Pearson correlation between --metric and the mean "
             "human score over outputs, e.g. 0.2.")] = None,
    metrics: Annotated[Optional[Path], typer.Option(
        help="The metric or judge scores of the pilot's outputs (as for `analyze --metrics`), for "
             "--correlation-width.")] = None,
    metric: Annotated[Optional[str], typer.Option(help="The metric of --metrics to plan the correlation for.")] = None,
    systems: Annotated[Optional[list[str]], typer.Option(
        "--system", help="One of the two systems to compare; give it twice (default: the pilot's two systems).")] = None,
    criterion: Annotated[Optional[str], typer.Option(
        help="The criterion to plan for (default: the pilot's only numeric criterion).")] = None,
    power: Annotated[float, typer.Option(help="The power the study should have.")] = 0.8,
    alpha: Annotated[float, typer.Option(help="The test's level (two-sided).")] = 0.05,
    annotators: Annotated[str, typer.Option(help="Annotators per item to consider, e.g. 1,2,3,4,5.")] = "1,2,3,4,5",
    max_items: Annotated[int, typer.Option(min=4, max=100_000, help="The most items (outputs, for an interval "
                                                                      "width) to consider.")] = 2000,
    simulations: Annotated[int, typer.Option(min=10, max=100_000, help="Studies simulated per cheapest design, "
                                                                        "to check the closed-form power.")] = 1000,
    minutes_per_task: Annotated[Optional[float], typer.Option(
        help="Minutes an annotator spends on one task (one system's output of one item, every criterion); from "
             "Label Studio the pilot's median lead time is used.")] = None,
    pay_per_hour: Annotated[Optional[float], typer.Option(help="Pay per participant-hour, for the cost column.")] = None,
    spec: Annotated[Optional[Path], typer.Option(help="The analysis spec of the pilot's file (as for `analyze`).")] = None,
    protocol: Annotated[Optional[str], typer.Option(help="A built-in protocol: its criteria as the spec, or its "
                                                         "projects' annotations as the pilot.")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for index.html and the CSVs.")] = Path("plan"),
    projects: ProjectsOption = None,
):
    """Plan a rating study from a pilot, for one or more targets. --delta: the items and annotators per item needed
    to detect a difference DELTA between two systems with the power asked for, in the paired design (every
    annotator of an item rates both systems' outputs) and the unpaired one, from the pilot's variance components;
    the cheapest design, its power checked by simulation. --agreement-width and --correlation-width: the outputs
    and annotators per output for Krippendorff's alpha's, or a metric-human correlation's, 95% interval to be
    narrower than the width given (Bonett 2002; Fisher's z with Spearman-Brown), widened by the pilot's own
    bootstrap range where its ratings are not normal. Each with its cost in participant-minutes and money. Writes
    the CSVs (components, power, cheapest; agreement, correlation, precision, precision_cheapest) and index.html
    with the curves to -o."""
    from ..exporters.analyses.plan import best_design

    try:
        tables, notes, page = make_plan(ratings, delta, agreement_width, correlation_width, metrics, metric, systems,
                                        criterion, power, alpha, annotators, max_items, simulations, minutes_per_task,
                                        pay_per_hour, spec, protocol, output, projects)
    except EvalstudioError as e:
        raise fail_with(e)
    for note in notes:
        console.print(note)
    if "precision_cheapest" in tables:
        console.print(_cheapest_width(tables["precision"], tables["precision_cheapest"]))
    if "cheapest" not in tables:
        console.print(f"plan written to {output / page.name}")
        return
    console.print(_cheapest(tables["cheapest"]))
    best = best_design(tables["cheapest"])
    if best is None:
        console.print(f"No design within {max_items} items reaches power {power:g}: a larger difference, more "
                      "items or more annotators per item.")
    else:
        console.print(f"Cheapest: {best['design']}, {int(best['items'])} items"
                      + (" per system" if best["design"] == "unpaired" else "")
                      + f" x {int(best['annotators'])} annotator(s) = {int(best['tasks'])} tasks"
                      + (f", {best['minutes']:.0f} participant-minutes" if best["minutes"] == best["minutes"] else "")
                      + (f", cost {best['cost']:.2f}" if best["cost"] == best["cost"] else ""))
    console.print(f"plan written to {output / page.name}")


def _cheapest(rows):
    from rich import box
    from rich.table import Table

    table = Table(title="Fewest items that reach the power, per design and annotators per item", box=box.SIMPLE_HEAD,
                  title_justify="left")
    for column in ("design", "annotators", "items", "tasks", "power", "simulated", "minutes", "cost"):
        table.add_column(column, justify="left" if column == "design" else "right", no_wrap=True)
    number = lambda v, f: "-" if v != v else format(v, f)  # NaN -> -
    for r in rows.itertuples():
        table.add_row(r.design, str(r.annotators), number(r.items, ".0f"), number(r.tasks, ".0f"),
                      number(r.power, ".3f"), number(r.simulated_power, ".3f"), number(r.minutes, ".0f"),
                      number(r.cost, ".2f"))
    return table


def _cheapest_width(pilot, rows):
    from rich import box
    from rich.table import Table

    facts = pilot.iloc[0]
    alpha = f"{facts['alpha']:.3f}" if facts["alpha"] == facts["alpha"] else "- (no repeated ratings)"
    r = f", r {facts['r']:.3f} with {facts['metric']}" if "r" in pilot else ""
    title = f"Fewest outputs for the interval targets (pilot: {facts['outputs']} outputs, alpha {alpha}{r})"
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("target", "annotators", "outputs", "tasks", "width", "minutes", "cost"):
        table.add_column(column, justify="left" if column == "target" else "right", no_wrap=True)
    number = lambda v, f: "-" if v != v else format(v, f)  # NaN -> -
    for r in rows.itertuples():
        table.add_row(r.design, str(r.annotators), number(r.items, ".0f"), number(r.tasks, ".0f"),
                      number(r.width, ".3f"), number(r.minutes, ".0f"), number(r.cost, ".2f"))
    return table
