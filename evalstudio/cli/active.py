"""`evalstudio active`: human labels where the judge is unsure. `draw` says which segments humans label, from the
judge's uncertainty; `estimate` gives each system's mean human score from those labels and the judge's scores, with
intervals that stay valid; `pac` gives PAC labels of a categorical criterion (the judge where it is sure, humans
elsewhere, with a guaranteed error)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import BadInput, EvalstudioError

from .base import ProjectsOption, app, chosen_spec, console, fail_with

active_app = typer.Typer(
    help="Human labels where the judge is unsure: which segments to label (draw), the estimates they give "
         "(estimate), PAC labels (pac). docs/active.md.",
    no_args_is_help=True)
app.add_typer(active_app, name="active")

SpecOption = Annotated[Optional[Path], typer.Option(help="The analysis spec of the ratings file (as for `analyze`).")]
ProtocolOption = Annotated[Optional[str], typer.Option(help="A built-in protocol: its criteria as the spec.")]


def _scores(metrics: Path, spec=None):
    from evalstudio.readers.ratings import read_metrics
    from evalstudio.readers.spec import Spec

    spec = spec or Spec(name="scores", criteria={})
    criteria = list(spec.criteria)
    if not criteria:  # a draw before any rating: every criterion the scores name is one
        from evalstudio.readers.tables import read_table

        frame, _ = read_table(metrics)
        criteria = sorted({str(c) for c in frame.get("criterion", [])} - {""})
    return read_metrics(metrics, spec, criteria)


def _ratings(ratings: Path, spec: Path | None, protocol: str | None, projects):
    from evalstudio.readers.ratings import read_ratings

    return read_ratings(ratings, chosen_spec(spec, protocol, projects))


def _error_study(path: Path, spec: Path | None, protocol: str | None, projects):
    from evalstudio.readers.spec import read_spec

    from ..exporters.analyses.error_filter import error_study
    from .base import load_registry

    if spec is not None and protocol is not None:
        raise BadInput("give --spec or --protocol, not both")
    return error_study(path, read_spec(spec) if spec else None,
                       load_registry(projects).get(protocol) if protocol else None)


def _draws(path: Path):
    from evalstudio.readers.tables import read_table

    from ..exporters.analyses.active import check_draws

    frame, _ = read_table(path)
    return check_draws(frame, str(path))


@active_app.command("draw")
def draw(
    metrics: Annotated[Path, typer.Argument(help="The judge's scores of every segment: `evalstudio judge`'s "
                                                 "metrics.csv (with --samples, for its confidence), or any metrics "
                                                 "file `analyze --metrics` reads.")],
    metric: Annotated[str, typer.Option(help="The judge (or metric) of the file to draw from.")],
    budget: Annotated[int, typer.Option(min=2, help="Human labels to collect: the expected number (active, "
                                                    "uniform) or the exact one (pac).")],
    criterion: Annotated[Optional[str], typer.Option(
        help="The criterion whose scores and confidence count (default: the mean over the judge's criteria).")] = None,
    design: Annotated[str, typer.Option(
        help="active: each segment drawn with a probability that grows with the judge's uncertainty (1 - its "
             "confidence), mixed with uniform; uniform: every segment budget / N; pac: exactly --budget segments "
             "drawn uniformly (the calibration sample of `active pac`).")] = "active",
    mix: Annotated[float, typer.Option(min=0.01, max=1.0, help="The uniform share of the active probabilities (it "
                                                               "keeps every segment reachable; below 0.8 a judge "
                                                               "whose confidence does not tell its errors costs "
                                                               "more labels: docs/active.md).")] = 0.8,
    seed: Annotated[int, typer.Option(help="The draw's seed (written in the file).")] = 0,
    output: Annotated[Path, typer.Option("--output", "-o", help="The draws file (CSV).")] = Path("draws.csv"),
    protocol: Annotated[Optional[str], typer.Option(
        help="With --criterion has_error: the span protocol (mqm, esa) of the judge's span tables, METRICS being "
             "its annotations.csv (spans.csv beside it). docs/spans.md.")] = None,
    projects: ProjectsOption = None,
):
    """Which segments humans should label, drawn from the judge's uncertainty.

    One row per segment the judge scored, with the probability it had of being drawn and whether it was. Give
    humans the drawn segments (e.g. import only those), keep the file: the estimate needs it."""
    from ..exporters.analyses.active import draw as make_draws
    from ..exporters.tables.files import write_table

    try:
        if output.exists() and output.is_dir():
            raise BadInput(f"--output {output}: is a folder; give a file name, e.g. {output / 'draws.csv'}")
        if criterion == "has_error":  # "has an error" of each segment, from the judge's span tables
            from ..exporters.analyses.error_filter import judge_error_scores

            scores = judge_error_scores(_error_study(metrics, None, protocol, projects), metric)
        else:
            scores = _scores(metrics)
        table = make_draws(scores, metric, criterion, budget, design, mix, seed)
        write_table(table, output, "csv")
    except EvalstudioError as e:
        raise fail_with(e)
    console.print(f"{int(table['drawn'].sum())} of {len(table)} segments drawn ({table['design'].iat[0]}); "
                  f"written to {output}")


@active_app.command("estimate")
def estimate(
    ratings: Annotated[Optional[Path], typer.Argument(
        help="The human ratings of the drawn segments (any file `analyze` reads). Without it, --protocol's study is "
             "read from Label Studio and its design from the gateway's ledger.")] = None,
    draws: Annotated[Optional[Path], typer.Option(
        help="The draws file the labels were collected from (`active draw`); not with --protocol alone.")] = None,
    spec: SpecOption = None,
    protocol: ProtocolOption = None,
    participants: Annotated[Optional[Path], typer.Option(
        help="With --protocol and no ratings file: the participants folder of the gateway that ran the study "
             "(default .evalstudio/participants).")] = None,
    alpha: Annotated[float, typer.Option(min=0.001, max=0.5, help="1 - the intervals' level.")] = 0.05,
    output: Annotated[Path, typer.Option("--output", "-o",
                                         help="Folder for the CSVs and index.html.")] = Path("active"),
    projects: ProjectsOption = None,
):
    """Each system's mean from the drawn segments' labels and the judge's scores, with valid intervals.

    Each system's mean human score of every numeric criterion, and each difference between two systems, from the
    drawn segments' human labels and the judge's scores of every segment, weighted by the probabilities they were
    drawn with (active statistical inference, Zrnic & Candès 2024): unbiased whatever the judge, with intervals
    from 30 labels per system. The design is the draws file, or, for a study run through the gateway with
    `assignment: {strategy: active}`, the ledger. Writes active_systems.csv, active_pairs.csv, notes.txt and
    index.html (the estimates and differences with their intervals, plotted)."""

    from ..exporters.analyses.active import estimates, estimates_page
    from ..exporters.tables.files import write_results

    try:
        if ratings is None:
            if protocol is None or draws is not None:
                raise BadInput("give the ratings file and --draws, or --protocol alone for a study the gateway ran "
                               "with an active design")
            from evalstudio.operations.reading import active_design, read_study, study_ratings

            _, parts, per_part, frames, _ = read_study(protocol, projects, None, None, participants)
            tidy, full_spec, _ = study_ratings(protocol, parts, per_part, frames)
            design = active_design(protocol, projects, participants, {p.name: t for p, t in zip(parts, per_part)})
        else:
            if draws is None:
                raise BadInput("--draws: the draws file the labels were collected from (`active draw`)")
            tidy, full_spec = _ratings(ratings, spec, protocol, projects)
            design = _draws(draws)
        systems, pairs, notes = estimates(tidy, full_spec, design, alpha)
        page = estimates_page(systems, pairs, notes, f"Active estimates: {protocol or ratings.name}", alpha)
        write_results(output, {"active_systems": systems, "active_pairs": pairs}, notes, page)
    except EvalstudioError as e:
        raise fail_with(e)
    for r in systems.itertuples():
        shown = f"{r.estimate:.3f} [{r.lo:.3f}, {r.hi:.3f}]" if r.estimate == r.estimate else "- (too few labels)"
        console.print(f"{r.criterion}  {r.system}: {shown}  ({r.labels} labels of {r.segments} segments)")
    for note in notes:
        console.print(note)
    console.print(f"written to {output} (index.html plots them)")


@active_app.command("pac")
def pac(
    ratings: Annotated[Path, typer.Argument(help="The human labels of the calibration sample (and, once collected, "
                                                 "of every segment `pac` said needs one).")],
    draws: Annotated[Path, typer.Option(help="The calibration sample: `active draw --design pac`.")],
    criterion: Annotated[str, typer.Option(help="The categorical criterion to label; has_error: whether a segment "
                                                "has an error, from span tables (--protocol mqm / esa: an export's "
                                                "annotations.csv with its spans beside it; --spec with layout "
                                                "spans: a published span file). docs/spans.md.")],
    epsilon: Annotated[float, typer.Option(min=0.001, max=0.999, help="The largest share of wrong labels "
                                                                      "accepted.")] = 0.05,
    alpha: Annotated[float, typer.Option(min=0.001, max=0.5, help="The chance the error may exceed epsilon.")] = 0.1,
    ties: Annotated[str, typer.Option(
        help="A segment whose humans' most frequent answers tie (three raters, three labels): judge-wrong labels it "
             "'(no majority)', which counts as the judge being wrong (the gateway's rule); refuse asks for more "
             "labels of it.")] = "judge-wrong",
    spec: SpecOption = None,
    protocol: ProtocolOption = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="The labels file (CSV).")] = Path("pac_labels.csv"),
    projects: ProjectsOption = None,
):
    """PAC labels: the judge where it is sure, humans elsewhere, the error at most epsilon.

    Candès, Ilyas & Zrnic 2025: the judge keeps the segments it is surest of, humans label the rest,
    and with probability at least 1 - alpha at most a share epsilon of the final labels differ from the humans'
    majority label. From the calibration sample's human labels, the file says which segments need a human label
    (needs_human); once they have one, run again for the final labels and their source. With --criterion
    has_error, segments the judge marks error-free are skipped only where the bound allows (every segment it marks
    an error in goes to humans), and the share skipped and the realised error on the calibration sample are
    printed."""
    from ..exporters.analyses.active import pac as pac_table
    from ..exporters.tables.files import write_table

    from ..exporters.analyses.error_filter import HAS_ERROR, LABELS, filter_summary, has_error_spec, \
        human_error_ratings

    try:
        design = _draws(draws)
        if criterion == HAS_ERROR:  # the humans' "has an error" from their spans; the judge's "yes" go to humans
            tidy, full_spec = human_error_ratings(_error_study(ratings, spec, protocol, projects)), has_error_spec()
        else:
            tidy, full_spec = _ratings(ratings, spec, protocol, projects)
        table, result, tied = pac_table(tidy, full_spec, design, criterion, epsilon, alpha, ties,
                                        LABELS[1] if criterion == HAS_ERROR else None)
        write_table(table, output, "csv")
    except EvalstudioError as e:
        raise fail_with(e)
    needed = int(result.human.sum())
    if tied and ties == "judge-wrong":
        console.print(f"{tied} segments' human votes tie: labelled '(no majority)', a tie counts as the judge being "
                      "wrong (the gateway's rule; --ties refuse to collect more labels of them instead)")
    collected = int((table["human_label"] != "").sum())
    console.print(f"humans label {needed} of {len(table)} segments ({result.human_share:.0%}): the calibration "
                  f"sample of {result.sample} and every segment with uncertainty >= {result.threshold:.4g}; the "
                  f"error is at most {epsilon:g} with probability {1 - alpha:g} (bound {result.bound:.4f})")
    if criterion == HAS_ERROR:
        f = filter_summary(table, design, result.threshold)
        console.print(f"skipped by the judge (marked error-free, left unannotated): {f['skipped']} of {f['segments']} "
                      f"segments ({f['skipped'] / f['segments']:.1%}); on the calibration sample the threshold would "
                      f"skip {f['sample_would_skip']} of {f['sample']} segments, {f['sample_wrong']} of them with an "
                      f"error by the humans: a realised error of {f['realised_error']:.1%} of the sample (epsilon "
                      f"{epsilon:g})")
    if collected < needed:
        console.print(f"{needed - collected} of them have no human label yet (needs_human in {output}); "
                      "collect them and run again for the final labels")
    else:
        console.print(f"final labels written to {output} (source: human or judge)")
