"""Planning a study from a pilot (`evalstudio plan`): the pilot's ratings read (a file or Label Studio), the
targets' tables computed (exporters.analyses.plan, exporters.analyses.precision) and the plan's page written. Uses
evalstudio.readers, operations.reading and the exporters."""

from __future__ import annotations

from pathlib import Path

from evalstudio.base.errors import BadInput

from .reading import chosen_spec


def make_plan(ratings, delta, agreement_width, correlation_width, metrics, metric, systems, criterion, power, alpha,
              annotators: str, max_items, simulations, minutes_per_task, pay_per_hour, spec, protocol, output: Path,
              projects):
    """(tables, notes, page): a rating study planned from a pilot's ratings (a file, or --protocol's projects) for
    the targets given, its CSVs and index.html written to `output` (whole or not at all)."""
    from evalstudio.base.files import staged_folder
    from evalstudio.readers.ratings import read_ratings

    from ..exporters.analyses.plan import plan_tables, write_plan
    from ..exporters.analyses.precision import precision_tables

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
    return tables, notes, page


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
