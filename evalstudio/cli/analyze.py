"""`evalstudio analyze`: agreement, meta-evaluation and system ranking of ratings from any file (the analysis:
evalstudio.operations.analyzing; this module parses the options and prints the outcome)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from evalstudio.base.errors import EvalstudioError
from evalstudio.operations.analyzing import run_analysis

from .base import ProjectsOption, app, console, fail_with


@app.command()
def analyze(
    ratings: Annotated[Optional[Path], typer.Argument(
        help="Ratings file (.csv, .tsv, .jsonl or .parquet): long (item, annotator, criterion, value, and optionally "
             "system and agent; criterion may be left out with one criterion) or wide (see --spec); nested JSON "
             "(.json array or .jsonl: a context with its responses, each with a list of ratings per criterion, as "
             "USR and FED publish them; --spec with layout: nested); or a Label Studio JSON export (.json) of a "
             "--protocol project, or evalstudio's own export of a --protocol mqm or esa study (`evalstudio export`'s "
             "NAME.csv, .jsonl or .parquet, read with its spans file beside it, NAME.spans.EXT). Without it, --protocol's projects are read live from Label Studio.")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for index.html and the CSVs.")] = Path("analysis"),
    metrics: Annotated[Optional[Path], typer.Option(
        help="Metric scores: item, system, metric, criterion, value, and optionally confidence (system and "
             "criterion may be left out; a metric without criterion is compared with every criterion; a metric whose "
             "scores are answers of a categorical or ordinal scale is also checked as an LLM judge).")] = None,
    spec: Annotated[Optional[Path], typer.Option(
        help="YAML: layout (long | wide_criteria | wide_annotators | nested | pairwise), columns (item, annotator, system, agent, "
             "criterion, value -> your column names), metric_columns, criteria (scale, min/max or labels, missing), "
             "missing (codes such as N/A); for nested JSON (a context with its responses, each with a list of ratings "
             "per criterion), nested: expand, item, system, ratings, annotators (docs/reference/analysis-spec.md); for comparisons of two outputs, "
             "layout: pairwise with columns left, right, outcome and outcomes (codes); for best-worst annotations, layout: "
             "best_worst with columns best, worst and tuple_columns; for a published error-span study (MQM's TSV, ESA's "
             "Appraise export), layout: spans with spans: format (mqm | esa) and weights (docs/spans.md). Without it the long layout with usual column names is assumed and each "
             "criterion's scale is guessed (interval if every value is a number, else nominal).")] = None,
    protocol: Annotated[Optional[str], typer.Option(
        help="Use a built-in protocol's criteria as the spec (e.g. dialogue).")] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap resamples for confidence intervals.")] = 1000,
    resamples: Annotated[int, typer.Option(min=10, help="Permutations for PERM-BOTH and soft pairwise accuracy.")] = 1000,
    lower_is_better: Annotated[Optional[list[str]], typer.Option(
        "--lower-is-better", help="A metric for which lower scores are better (a distance, an error rate): its "
                                  "scores are negated so that every metric reads as higher-is-better. Repeat for "
                                  "several; the spec's lower_is_better list is added.")] = None,
    mace: Annotated[bool, typer.Option("--mace", help="Also aggregate labels with MACE (slow: seconds per "
                                                        "thousand labels).")] = False,
    ppi: Annotated[Optional[str], typer.Option("--ppi", metavar="METRIC", help=(
        "Prediction-powered estimates (PPI++, lambda cross-fitted): when METRIC (a metric or judge of --metrics) "
        "scored segments no human rated, each system's mean human score and each difference, beside the human-only "
        "ones, each printed from the size at which it held on published data, with the labels it is worth "
        "(ppi_systems.csv, ppi_pairs.csv). On comparisons METRIC names a judge of --metrics (or a model version "
        "whose verdicts the tasks store): prediction-powered Bradley-Terry strengths (ppi_bradley_terry.csv)."))] = None,
    population: Annotated[Literal["finite", "infinite"], typer.Option(help=(
        "--ppi's question: finite, the mean of the study's own segments (the rated ones a sample of them: the "
        "finite-population correction), or infinite, of a population they were drawn from."))] = "finite",
    alt_test: Annotated[Optional[str], typer.Option(
        "--alt-test", metavar="JUDGE", help="The alternative annotator test (Calderon et al., ACL 2025): may JUDGE (a "
                                            "metric of --metrics that answers on the criterion's scale, such as an "
                                            "LLM's ratings) replace the annotators? Per criterion, the winning rate "
                                            "over annotators (leave one out, Benjamini-Yekutieli at q 0.05; it passes "
                                            "at 0.5 or more) and the average advantage probability (alt_test.csv, "
                                            "alt_test_annotators.csv). Annotators need 30 or more rated segments.")] = None,
    epsilon: Annotated[float, typer.Option(
        min=0.0, max=0.99, help="The alternative annotator test's cost-benefit margin: 0.2 for crowd workers, 0.1 for "
                                "skilled annotators or experts (the paper's advice).")] = 0.2,
    projects: ProjectsOption = None,
):
    """Human ceiling (alpha, ICC, Gwet's AC, leave-one-annotator-out), label aggregation (majority, Dawid-Skene,
    MACE), metric correlations at system and segment level with CIs, pairwise and tie-calibrated accuracy, soft
    pairwise accuracy, PERM-BOTH / Williams significance clusters, and the system ranking, for ratings made
    anywhere. A file of pairwise comparisons (left, right, outcome; or Chatbot Arena's model_a, model_b, winner)
    gets Bradley-Terry strengths with bootstrap intervals, win rates, Elo, position bias and agreement instead; a
    file of best-worst annotations (item1..itemN, best, worst) gets counting scores and split-half reliability. Writes CSVs and index.html to -o. Bad files are reported as file:line: column: message and nothing
    is analysed."""
    try:
        page, tables = run_analysis(ratings, output, metrics, spec, protocol, bootstrap, resamples, lower_is_better,
                                    mace, ppi, alt_test, epsilon, projects, population)
    except EvalstudioError as e:
        raise fail_with(e)
    if tables is not None:  # ratings (comparisons and best-worst annotations said what they found as they went)
        _print_outcome(tables, ppi)
    console.print(f"analysis written to {output / page.name}")


def _print_outcome(tables, ppi) -> None:
    """What the terminal says after an analysis of ratings: the summary, the PPI table, the alt-test's verdicts and
    what was not computed."""
    console.print(_results(tables))
    if ppi is not None and not tables["ppi_systems"].empty:
        console.print(_ppi_results(tables["ppi_systems"]))
        skipped = tables["not_computed"]
        for reason in skipped[(skipped["table"] == "ppi_systems") & (skipped["criterion"] == "")]["reason"]:
            console.print(f"note: {reason}", highlight=False)
    for r in tables["alt_test"].itertuples() if "alt_test" in tables else ():
        console.print(f"Alternative annotator test, {r.judge} on {r.criterion}: winning rate {r.winning_rate:.2f} over "
                      f"{r.annotators} annotator(s) (epsilon {r.epsilon:g}, q {r.q:g}): "
                      + ("it may replace them" if r.passes else "it may not replace them")
                      + f"; average advantage probability {r.advantage_probability:.3f}")
    not_computed = tables.get("not_computed")
    if not_computed is not None and not not_computed.empty:
        console.print(f"Not computed ({len(not_computed)}; why, in not_computed.csv and the page): "
                      + "; ".join(dict.fromkeys(f"{r.table} for {r.criterion}" if r.criterion else f"parts of {r.table}"
                                                 for r in not_computed.itertuples())))


def _results(tables, width: int | None = None):
    """The per-criterion summary as a table: scale, n, alpha [CI], leave-one-out ceiling, best metric. Where it would
    not fit `width` (the terminal's) with names unbroken, each alpha's interval goes on a line below it."""
    table = _results_table(tables, stacked=False)
    if _narrowest(table) > (width or console.width):
        table = _results_table(tables, stacked=True)
    return table


def _narrowest(table) -> int:
    """The fewest columns `table` (box SIMPLE_HEAD, padding 1) takes without cutting a cell of a no_wrap column or a
    word of another: rich's own measure lets no_wrap columns shrink (and cuts them)."""
    def needs(column) -> int:
        cells = [str(c) for c in (column.header, *column.cells)]
        if column.no_wrap:
            return max(len(line) for cell in cells for line in cell.splitlines() or [""])
        return max([column.min_width or 0] + [len(word) for cell in cells for word in cell.split()])
    return sum(needs(c) + 2 for c in table.columns) + len(table.columns) + 1  # padding, the separators and edges


def _results_table(tables, stacked: bool):
    """`_results`' table; `stacked`: each alpha's interval, and the words of two headers, on lines of their own."""
    from rich import box
    from rich.table import Table

    from ..exporters.analyses.metaeval import summary

    rows = summary(tables)
    number = lambda v: "-" if v != v else f"{v:.3f}"  # NaN -> -
    table = Table(title="Results per criterion (LOO rho: the leave-one-annotator-out ceiling, Spearman, as USR and "
                        "FED report it; Pearson and Kendall in agreement.csv; best metric: Pearson r at system level, "
                        "or over segments)", title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("criterion", "scale", "n", "alpha [95% CI]", "LOO rho", "best metric", "r"):
        header = column.replace(" ", "\n", 1) if stacked and column in ("alpha [95% CI]", "LOO rho", "best metric") else column
        table.add_column(header, justify="right" if column in ("n", "r", "LOO rho") else "left", overflow="fold",
                         no_wrap=column in ("alpha [95% CI]", "n", "r", "LOO rho"),
                         min_width=8 if column in ("criterion", "scale", "best metric") else None)
    for r in rows.itertuples():
        alpha = number(r.alpha) + (("\n" if stacked else " ") + f"[{r.alpha_lo:.2f}, {r.alpha_hi:.2f}]"
                                   if r.alpha_lo == r.alpha_lo else "")
        best = f"{r.best_metric} ({r.best_level})" if r.best_metric else "-"
        table.add_row(str(r.criterion), str(r.scale), str(r.ratings), alpha, number(r.loo_spearman), best,
                      number(r.best_r))
    return _whole_words(table)


LONGEST_UNBROKEN = 30  # a word longer than this (a path, a hash) may still be folded: the table must fit somewhere


def _whole_words(table):
    """The table with no word split across lines: every column that wraps is at least as wide as its longest word
    (a criterion's, system's or metric's name), so rich wraps names between words and narrows the other columns."""
    for column in table.columns:
        if column.no_wrap:
            continue
        longest = max((len(word) for cell in (column.header, *column.cells) for word in str(cell).split()), default=0)
        column.min_width = max(column.min_width or 0, min(longest, LONGEST_UNBROKEN))
    return table


def _ppi_results(rows):
    """Per criterion and system: the human-only mean and the prediction-powered one, with their intervals."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"Prediction-powered means (PPI++ with {rows['metric'].iloc[0]}; 95% t intervals, "
                        f"{rows['population'].iloc[0]} population; eff.n: "
                        "the human labels it is worth; '-': too few rated segments for the number to hold, see "
                        "not_computed.csv; the scored-only segments: ppi_systems.csv)", title_justify="left",
                  box=box.SIMPLE_HEAD)
    # fits 80 columns, rows told apart (issue 53): criterion / system folds a long name, an interval below its estimate
    table.add_column("criterion / system", min_width=14, overflow="fold")
    for column in ("rated", "human only", "PPI++", "eff.n"):
        table.add_column(column, justify="right", no_wrap=True)
    for r in rows.itertuples():
        table.add_row(f"{r.criterion} / {r.system}", str(r.n_labelled),
                      f"{r.classical:.3f}\n[{r.classical_lo:.3f}, {r.classical_hi:.3f}]",
                      f"{r.ppi:.3f}\n[{r.ppi_lo:.3f}, {r.ppi_hi:.3f}]" if r.ppi == r.ppi else "-",
                      f"{r.effective_n:.0f}" if r.effective_n == r.effective_n else "-")
    return _whole_words(table)
