"""`evalstudio plan`: how many items and annotators a study needs, from a pilot's ratings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import BadInput, EvalstudioError

from .base import ProjectsOption, _fail, _load, app, console


@app.command()
def plan(
    ratings: Annotated[Optional[Path], typer.Argument(
        help="The pilot's ratings, any file `analyze` reads (see --spec). Without it, --protocol's projects are read "
             "live from Label Studio (or from a JSON export given here).")] = None,
    delta: Annotated[float, typer.Option(
        help="The smallest difference between the two systems' mean scores worth detecting, in the criterion's "
             "units (e.g. 0.3 on a 1-5 scale).")] = ...,
    systems: Annotated[Optional[list[str]], typer.Option(
        "--system", help="One of the two systems to compare; give it twice (default: the pilot's two systems).")] = None,
    criterion: Annotated[Optional[str], typer.Option(
        help="The criterion to plan for (default: the pilot's only numeric criterion).")] = None,
    power: Annotated[float, typer.Option(help="The power the study should have.")] = 0.8,
    alpha: Annotated[float, typer.Option(help="The test's level (two-sided).")] = 0.05,
    annotators: Annotated[str, typer.Option(help="Annotators per item to consider, e.g. 1,2,3,4,5.")] = "1,2,3,4,5",
    max_items: Annotated[int, typer.Option(min=2, max=100_000, help="The most items to consider.")] = 2000,
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
    """Plan a rating study from a pilot: the items and annotators per item needed to detect a difference DELTA
    between two systems with the power asked for, in the paired design (every annotator of an item rates both
    systems' outputs) and the unpaired one, from the pilot's variance components; the cheapest design, its power
    checked by simulation, and its cost in participant-minutes and money. Writes components.csv, power.csv,
    cheapest.csv and index.html (power against items) to -o."""
    from evalstudio.base.files import staged_folder
    from evalstudio.readers.ratings import read_ratings
    from evalstudio.readers.spec import read_spec, spec_from_protocol

    from ..exporters.plan import best_design, plan_tables, write_plan

    try:
        counts = _annotator_counts(annotators)
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
                chosen = read_spec(spec) if spec else (spec_from_protocol(_load(projects).get(protocol))
                                                       if protocol else None)
                tidy, full_spec = read_ratings(ratings, chosen)
            name = _criterion(full_spec, criterion)
            pair = _pair(tidy, systems)
            minutes = minutes_per_task if minutes_per_task is not None else (lead / 60 if lead else None)
            tables = plan_tables(tidy, name, pair, delta, power, alpha, counts, max_items, simulations, minutes,
                                 pay_per_hour)
            notes = [f"Target: power {power:g} to detect a difference of {delta:g} in {name} between {pair[0]} and "
                     f"{pair[1]} at alpha {alpha:g} (two-sided t-test); {simulations} simulated studies per "
                     "cheapest design.",
                     "Minutes per task: " + (f"{minutes:.2f}" + (" (the pilot's median lead time)"
                                                                if minutes_per_task is None else "")
                                             if minutes is not None else "not given (--minutes-per-task)")]
            page = write_plan(tables, f"{full_spec.name}: plan", stage, notes, power)
    except EvalstudioError as e:
        raise _fail(e)
    for note in notes:
        console.print(note)
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
