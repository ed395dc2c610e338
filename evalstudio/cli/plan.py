"""`evalstudio plan`: how many items and annotators a study needs, from a pilot's ratings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import BadInput, EvalstudioError

from .base import ProjectsOption, app, chosen_spec, console, fail_with


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
    from evalstudio.base.files import staged_folder
    from evalstudio.readers.ratings import read_ratings

    from ..exporters.plan import best_design, plan_tables, write_plan
    from ..exporters.precision import precision_tables

    try:
        counts = _annotator_counts(annotators)
        if delta is None and agreement_width is None and correlation_width is None:
            raise BadInput("give a target: --delta (a difference to detect), --agreement-width or --correlation-width")
        if (metrics is None) != (metric is None) or (correlation_width is not None and metrics is None):
            raise BadInput("--correlation-width needs --metrics FILE and --metric NAME, and they are for it")
        with staged_folder(output) as stage:
            if spec is not None and protocol is not None:
                raise BadInput("give --spec or --protocol, not both")
            if ratings is None and protocol is None:
                raise BadInput("give the pilot's ratings file, or --protocol to read that protocol's projects")
            lead = None
            if protocol is not None and (ratings is None or ratings.suffix.lower() == ".json"):
                from .reading import label_studio_ratings

                tidy, full_spec, _ = label_studio_ratings(protocol, projects, ratings)
                lead = tidy.attrs.get("median_task_seconds")
            else:
                tidy, full_spec = read_ratings(ratings, chosen_spec(spec, protocol, projects))
            name = _criterion(full_spec, criterion)
            minutes = minutes_per_task if minutes_per_task is not None else (lead / 60 if lead else None)
            tables, notes = {}, []
            if delta is not None:
                pair = _pair(tidy, systems)
                tables = plan_tables(tidy, name, pair, delta, power, alpha, counts, max_items, simulations, minutes,
                                     pay_per_hour)
                notes.append(f"Target: power {power:g} to detect a difference of {delta:g} in {name} between "
                             f"{pair[0]} and {pair[1]} at alpha {alpha:g} (two-sided t-test); {simulations} simulated "
                             "studies per cheapest design.")
            if agreement_width is not None or correlation_width is not None:
                scores = None
                if metrics is not None:
                    from evalstudio.readers.ratings import read_metrics

                    scores = read_metrics(metrics, full_spec, list(full_spec.criteria))
                tables |= precision_tables(tidy, name, counts, max_items, agreement_width, correlation_width, scores,
                                           metric, minutes, pay_per_hour)
                notes += [f"Target: Krippendorff's alpha of {name} with a 95% interval at most {agreement_width:g} "
                          "wide." for _ in [agreement_width] if agreement_width is not None]
                notes += [f"Target: the correlation of {metric} with {name} with a 95% interval at most "
                          f"{correlation_width:g} wide." for _ in [correlation_width] if correlation_width is not None]
            notes.append("Minutes per task: " + (f"{minutes:.2f}" + (" (the pilot's median lead time)"
                                                                    if minutes_per_task is None else "")
                                                 if minutes is not None else "not given (--minutes-per-task)"))
            page = write_plan(tables, f"{full_spec.name}: plan", stage, notes, power,
                              {"agreement": agreement_width, "correlation": correlation_width})
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


def _annotator_counts(text: str) -> list[int]:
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise BadInput(f"--annotators: whole numbers separated by commas, e.g. 1,2,3, got {text[:40]!r}") from None
    if not counts or counts[0] < 1 or counts[-1] > 100:
        raise BadInput(f"--annotators: from 1 to 100 annotators per item, got {text[:40]!r}")
    return counts


def _criterion(spec, given: str | None) -> str:
    numeric = [name for name, crit in spec.criteria.items() if crit.numeric]
    if given is not None:
        if given not in numeric:
            raise BadInput(f"--criterion {given}: not a numeric criterion of the pilot ({', '.join(numeric) or 'none'})")
        return given
    if len(numeric) != 1:
        raise BadInput(f"--criterion: the pilot has {len(numeric)} numeric criteria ({', '.join(numeric)}); name one")
    return numeric[0]


def _pair(tidy, given: list[str] | None) -> tuple[str, str]:
    found = sorted(set(tidy["system"]) - {""}, key=str)
    if given:
        if len(given) != 2 or given[0] == given[1]:
            raise BadInput("--system: give two different systems, e.g. --system bart --system human")
        missing = [s for s in given if s not in found]
        if missing:
            raise BadInput(f"--system {missing[0]}: not a system of the pilot ({', '.join(found[:20])})")
        return given[0], given[1]
    if len(found) != 2:
        raise BadInput(f"--system: the pilot has {len(found)} systems ({', '.join(found[:20])}); name the two to "
                       "compare with --system twice")
    return found[0], found[1]


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
