"""Analysing ratings (`evalstudio analyze`): the options checked, ratings read from any file or a protocol's
projects (live or from an export), comparisons and best-worst annotations analysed on their own terms, the
meta-evaluation run and written, what was found said on the terminal. Uses evalstudio.readers,
exporters.analyses, operations.reading and the consoles."""

from __future__ import annotations

from pathlib import Path

from evalstudio.base.errors import BadInput
from evalstudio.protocols.registry import load as load_registry

from .consoles import console
from .reading import chosen_spec
from .reading import read_study, study_ratings, without_attention_checks


def run_analysis(ratings, output: Path, metrics, spec, protocol, bootstrap, resamples, lower_is_better, mace, ppi,
                 alt_test, epsilon, projects, population: str = "finite"):
    """(the page written, the analysis' tables; None for comparisons and best-worst annotations, which said what they
    found on the terminal as they went): ratings from a file or a protocol's projects analysed as `evalstudio
    analyze` asks, the CSVs and index.html written to `output` whole or not at all."""
    from evalstudio.base.files import staged_folder
    from evalstudio.base.memory import use_returning_allocator

    from ..exporters.analyses.metaeval import analyze as run
    from ..exporters.analyses.metaeval import write_analysis

    use_returning_allocator()
    with staged_folder(output) as stage:  # written whole or not at all
        _check_options(ratings, spec, protocol, mace)
        page = _other_kinds(ratings, spec, protocol, stage, bootstrap, metrics, ppi, alt_test, lower_is_better,
                            projects)
        if page is not None:  # comparisons or best-worst annotations, analysed on their own terms
            return page, None
        tidy, full_spec, scores, flipped, study = _ratings_and_scores(ratings, spec, protocol, metrics, ppi, alt_test,
                                                                      lower_is_better, projects)
        notes = tidy.attrs.get("notes", [])  # e.g. rejected MTurk assignments left out
        for note in notes:
            console.print(note)
        console.print(_summary(tidy, full_spec, scores))
        with console.status("computing statistics..."):
            tables = run(tidy, full_spec, scores, n_boot=bootstrap, resamples=resamples, mace=mace, ppi=ppi,
                         alt=alt_test, epsilon=epsilon, population=population)
            if study is not None:  # layout spans: the systems' MQM or ESA scores, span agreement
                from ..exporters.analyses.span_analysis import add_span_tables
                tables = add_span_tables(tables, study, resamples)
            if "automation_bias" in tidy.attrs:  # a prefilled study that showed a share of tasks without it
                tables["automation_bias"] = tidy.attrs["automation_bias"]
            page = write_analysis(tables, f"{full_spec.name}: analysis", stage,
                                  [f"Ratings: {ratings.name if ratings else 'Label Studio'}"
                                   + (f"; metrics: {metrics.name}" if metrics else "")]
                                  + ([f"Lower is better, scores negated: {', '.join(flipped)}"] if flipped else [])
                                  + notes)
    return page, tables


def _automation_bias(tidy, project, per_part, frames) -> None:
    """A prefilled study's answers with and without the prediction shown (exporters.analyses.postedit.automation_bias):
    its table and verdict lines kept on `tidy` (attrs: the table, and the notes the analysis prints and shows)."""
    import pandas as pd

    from ..exporters.analyses.postedit import automation_bias

    tasks = [task for part_tasks in per_part for task in part_tasks]
    table, lines = automation_bias(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), project, tasks)
    if lines:
        tidy.attrs["automation_bias"] = table
        tidy.attrs["notes"] = [*tidy.attrs.get("notes", []), *lines]


def _check_options(ratings, spec, protocol, mace) -> None:
    from ..stats.aggregation import crowdkit_available

    if spec is not None and protocol is not None:
        raise BadInput("give --spec or --protocol, not both")
    if mace and not crowdkit_available():
        raise BadInput("--mace needs crowd-kit: pip install 'evalstudio[crowd]'")
    if not crowdkit_available():
        console.print("Dawid-Skene is left out: crowd-kit is not installed (pip install 'evalstudio[crowd]').")
    if ratings is None and protocol is None:
        raise BadInput("give a ratings file, or --protocol to read that protocol's projects from Label Studio")


def _other_kinds(ratings, spec, protocol, stage, bootstrap, metrics, ppi, alt_test, lower_is_better, projects):
    """The page of a file (or a protocol's projects) of comparisons or best-worst annotations; None for ratings."""
    from evalstudio.readers.comparisons import header, looks_best_worst, looks_pairwise
    from evalstudio.readers.spec import read_spec

    given = read_spec(spec) if spec else None
    # without a spec, the columns say whether a file holds comparisons or best-worst annotations
    columns = header(ratings) if ratings is not None and protocol is None and given is None else []
    for layout, looks, run_layout, what in (
            ("best_worst", looks_best_worst, _best_worst, "best-worst annotations"),
            ("pairwise", looks_pairwise, _comparisons, "comparisons")):  # analysed on their own terms
        if ratings is not None and protocol is None and (
                (given is not None and given.layout == layout)
                or (given is None and looks(columns))):
            if alt_test is not None or (ppi is not None and layout != "pairwise"):
                raise BadInput(f"--alt-test{'' if layout == 'pairwise' else ' and --ppi'} work on ratings; "
                               f"{what} are analysed without {'it' if layout == 'pairwise' else 'them'}")
            if ppi is not None and metrics is None:
                raise BadInput("--ppi names a judge whose verdicts it uses: give --metrics")
            if lower_is_better or (metrics is not None and layout != "pairwise"):
                raise BadInput(f"{what} are analysed without --metrics and --lower-is-better"
                               + (" (--metrics takes an LLM judge's verdicts on comparisons)"
                                  if layout != "pairwise" else ""))
            return run_layout(ratings, given, stage, bootstrap, metrics, ppi)
    if protocol is not None and (ratings is None or ratings.suffix.lower() == ".json") and \
            load_registry(projects).study(protocol).compare is not None:
        if lower_is_better or alt_test is not None:
            raise BadInput("comparisons and best-worst annotations are analysed without --lower-is-better "
                           "and --alt-test")
        return _preference_project(protocol, projects, ratings, stage, bootstrap, metrics, ppi)
    return None


def _ratings_and_scores(ratings, spec, protocol, metrics, ppi, alt_test, lower_is_better, projects):
    """(tidy ratings, their spec, metric scores oriented higher-is-better or None, the metrics negated)."""
    from evalstudio.readers.ratings import orient_metrics, read_metrics, read_ratings_or_spans

    study = None  # a span study (layout spans) has tables of its own
    if protocol is not None and (ratings is None or ratings.suffix.lower() == ".json"):
        from ..exporters.analyses.span_analysis import project_span_study
        read = read_study(protocol, projects, ratings, None)  # (registry, parts, tasks, annotations, users)
        notes: list[str] = []  # the attention checks left out, as a file's are (readers.ratings)
        read = (read[0], read[1], *without_attention_checks(read[2], read[3], notes, ratings.name if ratings
                                                            else "Label Studio"), read[4])
        tidy, full_spec, model = study_ratings(protocol, *read[1:4])
        tidy, full_spec, study = project_span_study(protocol, *read[1:]) or (tidy, full_spec, None)  # mqm, esa
        tidy.attrs["notes"] = [*notes, *tidy.attrs.get("notes", [])]
        _automation_bias(tidy, read[0].study(protocol), read[2], read[3])
        scores = read_metrics(metrics, full_spec, list(full_spec.criteria)) if metrics else model
    elif protocol is not None and (exported := _exported_span_study(ratings, protocol, projects)) is not None:
        tidy, full_spec, study = exported  # an export's annotations table and the spans table beside it
        scores = read_metrics(metrics, full_spec, list(full_spec.criteria)) if metrics else None
    else:
        tidy, full_spec, study = read_ratings_or_spans(ratings, chosen_spec(spec, protocol, projects))
        scores = read_metrics(metrics, full_spec, list(full_spec.criteria)) if metrics else None
    if tidy.empty:
        raise BadInput("no ratings to analyse")
    if ppi is not None and scores is None:
        raise BadInput("--ppi names a metric whose scores it uses: give --metrics")
    if alt_test is not None and scores is None:
        raise BadInput("--alt-test names a judge whose answers it uses: give --metrics")
    flipped = list(dict.fromkeys([*(full_spec.lower_is_better), *(lower_is_better or [])]))
    if flipped:
        if scores is None:
            raise BadInput("--lower-is-better / lower_is_better names metrics, but there are none: give --metrics")
        scores = orient_metrics(scores, flipped, str(metrics or "the model outputs"))
    return tidy, full_spec, scores, flipped, study


def _exported_span_study(path: Path, protocol: str, projects):
    """(tidy ratings, spec, span study) of `evalstudio export`'s files of an mqm or esa study (NAME.EXT and the spans
    beside it, NAME.spans.EXT), as the live study gives them (exporters.analyses.span_analysis.project_span_study);
    None for any other protocol. Without the spans file it is refused, never analysed span-less."""
    from evalstudio.readers.spec import CriterionSpec, Spec
    from evalstudio.values.spans import span_controls

    from ..exporters.analyses.error_filter import read_span_tables
    from ..exporters.analyses.span_analysis import offset_controls, over_max_notes, span_protocol

    parts = load_registry(projects).parts(protocol)
    kind = span_protocol(parts[0]) if len(parts) == 1 else None
    if kind is None:
        if any(span_controls(part.interface)[0] for part in parts):  # as live: span tables are mqm's and esa's
            console.print(f"Not read: the spans beside {path.name} (span tables are analysed for the mqm and esa "
                          "protocols only); the answers of the other controls are.")
        return None
    from evalstudio.readers.spec import spec_from_protocol

    study = read_span_tables(path, kind, offset_controls(kind, parts[0].interface),
                             spec_from_protocol(parts[0]).criteria, checks=parts[0].attention_checks is not None)
    over = study.spans.loc[study.spans["over_max"].astype(str).str.lower().isin(["true", "1"]), "annotation_id"] \
        .nunique() if "over_max" in study.spans else 0
    study.notes += over_max_notes(over)
    study.tidy.attrs["notes"] = study.notes
    return study.tidy, Spec(name=protocol, layout="spans",
                            criteria={study.criterion: CriterionSpec(scale="interval")}), study


def _comparisons(path: Path, spec, output: Path, bootstrap: int, judges_file: Path | None = None,
                 ppi: str | None = None) -> Path:
    """Pairwise comparisons of a file (and an LLM judge's verdicts on them, in the same columns): read, analysed,
    summarised on the terminal, written; the page's path."""
    from evalstudio.readers.comparisons import read_comparisons

    comparisons = read_comparisons(path, spec.columns if spec else None, spec.outcomes if spec else None)
    return _run_comparisons(comparisons, _judges(judges_file, spec), path.stem, f"Comparisons: {path.name}",
                            output, bootstrap, judges_file, sides_shown=spec is None or spec.sides == "shown", ppi=ppi)


def _judges(judges_file: Path | None, spec=None):
    from evalstudio.readers.comparisons import read_comparisons

    if judges_file is None:
        return None
    judges = read_comparisons(judges_file, spec.columns if spec else None, spec.outcomes if spec else None)
    if (judges["annotator"] == "").all():
        judges["annotator"] = judges_file.stem  # one judge, named after its file
    return judges


def _run_comparisons(comparisons, judges, name: str, source: str, output: Path, bootstrap: int,
                     judges_file: Path | None = None, notes: list[str] = (), sides_shown: bool = True,
                     ppi: str | None = None) -> Path:
    import pandas as pd
    from rich import box
    from rich.table import Table

    from ..exporters.analyses.preference import analyze_comparisons, write_comparison_analysis

    if comparisons.empty:
        raise BadInput("no comparisons to analyse" + (f" ({'; '.join(notes)})" if notes else ""))
    if ppi is not None and (judges is None or ppi not in set(judges["annotator"])):
        known = sorted(set(judges["annotator"])) if judges is not None else []
        raise BadInput(f"--ppi {ppi}: no such judge " + (f"(the judges are: {', '.join(map(str, known[:20]))})" if known
                                                          else "(give its verdicts with --metrics)"))
    systems = sorted(set(comparisons["left"]) | set(comparisons["right"]))
    ties = comparisons["outcome"].isin(["tie", "both_bad"]).mean()
    annotators = comparisons["annotator"].nunique() if (comparisons["annotator"] != "").any() else 0
    console.print(f"{_count(len(comparisons), 'comparison')} of {_count(len(systems), 'system')} on "
                  f"{_count(comparisons['item'].nunique(), 'item')}"
                  + (f" by {_count(annotators, 'annotator')}" if annotators else "") + f"; {ties:.0%} ties or both bad")
    with console.status("computing statistics..."):
        tables, computed = analyze_comparisons(comparisons, n_boot=bootstrap, judges=judges, sides_shown=sides_shown,
                                               ppi=ppi)
    strengths = tables.get("bradley_terry")
    if strengths is not None:
        table = Table(title="Bradley-Terry strengths on the Elo scale (95% bootstrap interval) and win rates",
                      title_justify="left", box=box.SIMPLE_HEAD)
        for column in ("system", "Elo", "95% interval", "win rate"):
            table.add_column(column, justify="left" if column == "system" else "right", overflow="fold")
        rates = tables["win_rates"].set_index("system")["win_rate"]
        for r in strengths.itertuples():
            interval = f"[{r.elo_lo:.0f}, {r.elo_hi:.0f}]" if hasattr(r, "elo_lo") and r.elo_lo == r.elo_lo else "-"
            table.add_row(str(r.system), f"{r.elo:.0f}", interval, f"{rates[r.system]:.1%}")
        console.print(table)
    bias = tables["position_bias"].iloc[0] if "position_bias" in tables else {"decisive": 0}
    if bias["decisive"]:
        console.print(f"Position bias: the left output won {bias['left_share']:.1%} of {int(bias['decisive'])} "
                      f"decisive judgements (binomial p = {bias['p']:.3g})")
    agreement = tables["agreement"].iloc[0]
    if agreement["units"]:
        console.print(f"Agreement on the winner: alpha {agreement['alpha']:.3f}, {agreement['percent_agreement']:.1%} "
                      f"of judgement pairs agree ({int(agreement['units'])} items judged twice or more)")
    for r in tables.get("judge_agreement", pd.DataFrame()).itertuples():
        console.print(f"Judge {r.judge} against the humans: agrees on {r.agreement:.1%} of {r.units} items and pairs "
                      f"({r.agreement_without_ties:.1%} without ties), kappa {r.kappa:.3f}")
    if "ppi_bradley_terry" in tables:
        console.print(_ppi_strengths(tables["ppi_bradley_terry"]))
    return _written(write_comparison_analysis, tables, computed, f"{name}: pairwise comparisons", output,
                    source + (f"; judges: {judges_file.name}" if judges_file else ""), notes)


def _ppi_strengths(rows):
    import pandas as pd
    from rich import box
    from rich.table import Table

    first = rows.iloc[0]
    table = Table(title=f"Prediction-powered Bradley-Terry strengths (PPI++ with {first.judge}, lambda "
                        f"{first['lambda']:.2f}; {first.n_labelled} items and pairs judged by humans, "
                        f"{first.n_unlabelled} by the judge only; " + (
                            f"worth {first.effective_n:.0f} human-judged ones)" if pd.notna(first.effective_n)
                            else "what it is worth: see the notes)"),
                  title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("system", "human only (95% interval)", "ranks", "PPI++ (95% interval)", "ranks "):
        table.add_column(column, justify="left" if column == "system" else "right", overflow="fold")
    for r in rows.itertuples():
        table.add_row(str(r.system), f"{r.classical_elo:.0f} [{r.classical_lo:.0f}, {r.classical_hi:.0f}]",
                      _ranks(r.classical_rank_best, r.classical_rank_worst),
                      f"{r.ppi_elo:.0f} [{r.ppi_lo:.0f}, {r.ppi_hi:.0f}]", _ranks(r.ppi_rank_best, r.ppi_rank_worst))
    return table


def _ranks(best: int, worst: int) -> str:
    return str(best) if best == worst else f"{best}-{worst}"


def _best_worst(path: Path, spec, output: Path, bootstrap: int, _metrics: Path | None = None, _ppi=None) -> Path:
    """Best-worst annotations of a file: read, scored, summarised on the terminal, written; the page's path."""
    from evalstudio.readers.comparisons import read_best_worst

    annotations = read_best_worst(path, spec.columns if spec else None, spec.tuple_columns if spec else None)
    return _run_best_worst(annotations, path.stem, f"Annotations: {path.name}", output, bootstrap)


def _run_best_worst(annotations, name: str, source: str, output: Path, bootstrap: int, notes: list[str] = ()) -> Path:
    from ..exporters.analyses.preference import analyze_best_worst, write_best_worst_analysis

    if annotations.empty:
        raise BadInput("no best-worst annotations to analyse" + (f" ({'; '.join(notes)})" if notes else ""))
    tuples = annotations["tuple"].nunique()
    count = annotations["annotation"].nunique()
    console.print(f"{_count(count, 'annotated tuple')} ({_count(tuples, 'tuple')}) of "
                  f"{_count(annotations['item'].nunique(), 'item')}")
    with console.status("computing statistics..."):
        tables, computed = analyze_best_worst(annotations, splits=min(max(bootstrap, 1), 100))
    scores = tables["bws_scores"]
    top = ", ".join(f"{r.item} ({r.score:+.2f})" for r in scores.head(3).itertuples())
    bottom = ", ".join(f"{r.item} ({r.score:+.2f})" for r in scores.tail(3).iloc[::-1].itertuples())
    console.print(f"Highest scores: {top}; lowest: {bottom}")
    reliability = tables["reliability"].iloc[0]
    if reliability["splits"]:
        console.print(f"Split-half reliability (Spearman, mean of {int(reliability['splits'])} random splits): "
                      f"{reliability['spearman']:.3f}")
    return _written(write_best_worst_analysis, tables, computed, f"{name}: best-worst scaling", output, source, notes)


def _written(write, tables, notes: list[str], title: str, output: Path, source: str, left_out=()) -> Path:
    """What could not be computed said on the terminal, then the tables and page written by `write` (the page also
    says what was left out of the analysis, `left_out`)."""
    for note in notes:
        console.print(f"Not computed: {note}")
    return write(tables, title, output, [source, *left_out] + notes)


def _count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _summary(tidy, spec, scores) -> str:
    """'5760 ratings of 960 segments (10 systems x 96 items) by 1 annotator, 6 criteria; 17 metrics'."""
    items, systems = tidy["item"].nunique(), tidy["system"].nunique()
    what = _count(items, "item")
    if systems > 1:
        segments = len(tidy.drop_duplicates(["system", "item"]))
        what = f"{_count(segments, 'segment')} ({_count(systems, 'system')} x {_count(items, 'item')})"
    text = (f"{_count(len(tidy), 'rating')} of {what} by {_count(tidy['annotator'].nunique(), 'annotator')}, "
            f"{_count(len(spec.criteria), 'criterion', 'criteria')}")
    if scores is not None:
        text += f"; {_count(scores['metric'].nunique(), 'metric')}"
    present = set(tidy["criterion"].unique())  # once, not once per criterion (a million values: 0.4 s each)
    text += ". Scales: " + ", ".join(f"{name} ({_scale(c)})" for name, c in spec.criteria.items() if name in present)
    per_segment = tidy.groupby(["system", "item", "criterion"]).size()
    if per_segment.max() < 2:
        text += ". One rating per item: no agreement statistics (they need two or more)"
    return text


def _scale(criterion) -> str:
    """'interval 1-5, step 1', 'ordinal: bad < ok < good', 'nominal'."""
    if criterion.labels:
        order = " < " if criterion.scale == "ordinal" else ", "
        return f"{criterion.scale}: {order.join(criterion.labels[:6])}" + (", ..." if len(criterion.labels) > 6 else "")
    text = criterion.scale
    if criterion.min is not None and criterion.max is not None:
        text += f" {criterion.min:g}-{criterion.max:g}"
    if criterion.step is not None:
        text += f", step {criterion.step:g}"
    return text


def _preference_project(protocol: str, projects, export: Path | None, output: Path, bootstrap: int,
                        judges_file: Path | None, ppi: str | None = None) -> Path:
    """A pairwise or best-worst protocol's projects (live or from an export): the answers turned into comparisons
    or best-worst annotations through the positions each task showed (hidden in its meta), then analysed like a
    file of them. An LLM judge's verdicts (--metrics, or the tasks' predictions from the ML backend, one judge per
    model_version) are compared with the humans' on pairwise protocols."""
    import pandas as pd

    from ..exporters.analyses.analysis import exclusions
    from ..exporters.analyses.preference import (
        best_worst_from_annotations,
        comparisons_from_annotations,
        judge_comparisons_from_tasks,
        positions_of,
    )
    from .reading import quotas, read_study, without_attention_checks

    reg, parts, per_part, frames, _ = read_study(protocol, projects, export, None)
    per_part, frames = without_attention_checks(per_part, frames)
    project = reg.study(protocol)
    if (judges_file is not None or ppi is not None) and project.compare.kind != "pairwise":
        raise BadInput("--metrics and --ppi take an LLM judge's verdicts on comparisons; a best-worst protocol has "
                       "none")
    annotations, notes = exclusions(pd.concat(frames, ignore_index=True), quotas=quotas(parts, per_part))
    positions = {k: v for tasks in per_part for k, v in positions_of(tasks).items()}
    source = f"Label Studio projects of {protocol}" if export is None else f"Export: {export.name}"
    if project.compare.kind == "pairwise":
        comparisons, left_out = comparisons_from_annotations(annotations, positions, project)
        judges = _judges(judges_file)
        # an LLM judge's verdicts stored as the tasks' predictions (the ML backend): compared like --metrics
        predicted, judge_notes = judge_comparisons_from_tasks([t for tasks in per_part for t in tasks], positions,
                                                              project)
        if not predicted.empty:
            judges = predicted if judges is None else pd.concat([judges, predicted], ignore_index=True)
            left_out += judge_notes
        for note in notes + left_out:
            console.print(note)
        return _run_comparisons(comparisons, judges, protocol, source, output, bootstrap, judges_file,
                                notes + left_out, ppi=ppi)
    chosen, left_out = best_worst_from_annotations(annotations, positions, project)
    for note in notes + left_out:
        console.print(note)
    return _run_best_worst(chosen, protocol, source, output, bootstrap, notes + left_out)
