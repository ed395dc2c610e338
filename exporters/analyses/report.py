"""`evalstudio report`: a folder with CSVs and one self-contained HTML page with plots."""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
# names in plots come from the data (systems, metrics, annotators): "$x$" is text, never mathtext to parse (a stray
# "$" would otherwise fail the whole report)
matplotlib.rcParams["text.parse_math"] = False
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from evalstudio.base.files import write_output  # noqa: E402
from evalstudio.protocols.registry import Project  # noqa: E402
from evalstudio.values.spans import span_controls  # noqa: E402

from . import analysis  # noqa: E402
from ..tables.files import write_csv
from ..tables.tidy import annotation_frame, model_frame, span_frame, task_frame, unit  # noqa: E402


def tinfo_tasks(tasks: list[dict]) -> list[dict]:
    """Every task's fields (data and meta) with its id."""
    from evalstudio.values.results import task_fields

    return [{"task_id": t["id"], **task_fields(t)} for t in tasks]


def build_report(project: Project, tasks: list[dict], out_dir: Path, users: dict[int, str] | None = None,
                 n_boot: int = 1000, min_control_accuracy: float | None = None,
                 annotations: pd.DataFrame | None = None, model: pd.DataFrame | None = None,
                 exclude_prefilled: bool = False, keep_bad_instances: bool = False,
                 quotas: dict[str, int] | None = None, judges=None, active=None,
                 spans: pd.DataFrame | None = None) -> Path:
    """Write the CSVs and index.html for one project (or a study of several: pass its frames); returns the HTML path.

    Values accepted unchanged from a model prediction (prefill opt-in) would make agreement and alignment measure
    the model: the report refuses them unless `exclude_prefilled`, which leaves them out and says how many. Items
    an annotator marked as a bad instance (CMV) are left out of agreement and alignment unless `keep_bad_instances`.
    `judges(annotations, spans)`: (the LLM judges' table, one verdict line per judge) on the annotations the report
    keeps, with the spans table the report has (None when the protocol marks none).
    `active`: (per system, per pair, notes) of a study whose parts have an active design (exporters.analyses.active.estimates
    from the ledger's design). `spans`: the study's spans (exporters.tables.tidy.span_frame), written as spans.csv."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ann = annotations if annotations is not None else annotation_frame(tasks, project, users)
    model = model if model is not None else model_frame(tasks, project)
    tinfo = task_frame(tasks)
    if spans is None and span_controls(project.interface)[0]:
        spans = span_frame(tasks, project, users)
    ann, tables, sections = _kept(project, tasks, ann, model, tinfo, spans, min_control_accuracy, exclude_prefilled,
                                  keep_bad_instances, quotas)
    verdicts, active_notes = _statistics(project, ann, model, tinfo, spans, tables, n_boot, judges, active)
    for name, table in tables.items():  # spreadsheet-safe: annotators' free text cannot run as a formula
        write_csv(table, out_dir / f"{name}.csv")
    rated = ann[~ann["cancelled"] & ann["value"].notna()] if not ann.empty else ann
    submitted = ann[~ann["cancelled"]] if not ann.empty else ann  # an answer of spans only is an annotation too
    body = (_summary(project, tasks, submitted, sections, tables, spans) + _figures(project, rated, model, tables)
            + _findings(tables, verdicts, active_notes))
    page = out_dir / "index.html"
    write_output(page, html_page(project.title, "\n".join(body)))
    return page


def _kept(project, tasks, ann, model, tinfo, spans, min_control_accuracy, exclude_prefilled, keep_bad_instances,
          quotas) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], list[str]]:
    """(the annotations the statistics use, the tables so far, the page's notes on what was left out): the read
    tables, the exclusions (prefilled, bad instances, quotas), CMV's value shift and Circa's control questions."""
    tables: dict[str, pd.DataFrame] = {"annotations": ann, "model_outputs": model}
    if spans is not None:  # every span with its per-region answers (error spans: MQM, ESA)
        tables["spans"] = spans
    ann, notes = analysis.exclusions(ann, exclude_prefilled=exclude_prefilled, keep_bad_instances=keep_bad_instances,
                                     quotas=quotas)
    sections = [f"<p>{html.escape(note)}</p>" for note in notes]
    if project.study_name == "cmv":
        tables["value_shift"] = analysis.cmv_value_shift(tinfo_tasks(tasks), ann)
    if project.importer == "circa" and "is_control" in tinfo:
        min_control_accuracy = project.min_control_accuracy if min_control_accuracy is None else min_control_accuracy
        accuracy = analysis.circa_control_accuracy(ann, tinfo)
        tables["control_accuracy"] = accuracy
        if min_control_accuracy is not None:
            ann = analysis.drop_low_accuracy_annotators(ann, accuracy, min_control_accuracy)
            sections.append(f"<p>Annotators with control accuracy below {min_control_accuracy:g} were left out: "
                            f"{html.escape(', '.join(accuracy.loc[accuracy.control_accuracy < min_control_accuracy, 'annotator']) or 'none')}.</p>")
    return ann, tables, sections


def _statistics(project, ann, model, tinfo, spans, tables, n_boot, judges, active) -> tuple[list[str], list[str]]:
    """(the judges' verdict lines, the active design's notes): agreement, alignment, annotator QC, labels with error
    bars, the judges, the active design, lists and Circa's explanation roles, added to `tables`."""
    tables["agreement"] = analysis.agreement_table(ann, project, n_boot=n_boot)
    tables["alignment"] = analysis.alignment_table(ann, model, project, n_boot=n_boot)
    tables["annotator_qc"] = analysis.annotator_qc(ann, project) if not ann.empty else pd.DataFrame()
    tables["labels"], tables["annotator_accuracy"] = (analysis.label_tables(ann, project, n_boot) if not ann.empty
                                                      else (pd.DataFrame(), pd.DataFrame()))
    verdicts, active_notes = [], []
    if judges is not None:  # (exporters.analyses.judges.judge_verdicts, computed by the caller on the same annotations)
        tables["judges"], verdicts = judges(ann, spans)
    if active is not None:
        tables["active_systems"], tables["active_pairs"], active_notes = active
    if "list" in ann and ann["list"].notna().any():
        tables["lists"] = analysis.lists_table(ann)
    if project.importer == "circa" and "shown_label_is" in tinfo:
        tables["explanation_roles"] = analysis.circa_explanation_roles(ann, tinfo, n_boot=n_boot)
    return verdicts, active_notes


def _summary(project, tasks, submitted, sections, tables, spans) -> list[str]:
    """The page's head: title, counts (the submitted annotations, whether they rated a criterion or marked only
    spans), the notes on what was left out, agreement and the spans."""
    body = [
        f"<h1>{html.escape(project.title)}</h1>",
        f"<p>{len(tasks)} tasks, {submitted['annotation_id'].nunique() if not submitted.empty else 0} annotations by "
        f"{submitted['annotator'].nunique() if not submitted.empty else 0} annotators; generated "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. CSVs of every table are in this folder.</p>",
        *sections,
        "<h2>Agreement</h2>",
        "<p>Krippendorff's alpha at each criterion's scale level, with a 95% bootstrap CI over items.</p>",
        html_table(tables["agreement"]),
    ]
    if spans is not None:
        body += span_section(spans)
    return body


def _figures(project, rated, model, tables) -> list[str]:
    """The rating distributions and human vs model, with their plots."""
    body = []
    if not rated.empty:
        body += ["<h2>Rating distributions</h2>", html_image(_distributions(rated, model, project))]
    if not tables["alignment"].empty:
        body += ["<h2>Human vs model</h2>",
                 "<p>Segment level: mean over annotators per item vs the model's value; system level: means per system. "
                 "95% CIs by Fisher z and by paired bootstrap.</p>", html_table(tables["alignment"])]
        scatter = _scatter(rated, model, project)
        if scatter is not None:
            body.append(html_image(scatter))
    return body


def _findings(tables, verdicts, active_notes) -> list[str]:
    """The sections a study has when it has their tables: judges, active design, Circa's explanation roles, CMV's
    value shift, lists, control questions; then the annotators and the labels with error bars."""
    body = []
    if verdicts:
        body += ["<h2>LLM judges</h2>",
                 "<p>The answers of <code>evalstudio judge --to-label-studio</code> (predictions judge:NAME, never "
                 "shown to annotators) against the human answers of the same tasks: agreement with the humans' "
                 "plurality label (kappa) or mean (Spearman), and the alternative annotator test (Calderon et al., "
                 "ACL 2025) at epsilon 0.2.</p>",
                 "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in verdicts) + "</ul>",
                 html_table(tables["judges"])]
    if "active_systems" in tables:
        body += ["<h2>Active design: the systems' means</h2>",
                 "<p>The gateway drew which tasks humans label from the judge's uncertainty and kept every task's "
                 "probability in the ledger; each system's mean human score from those labels and the judge's scores "
                 "of every task, weighted by the probabilities (active statistical inference, Zrnic &amp; Candès "
                 "2024), with 95% intervals from 30 labels per system (docs/active.md).</p>",
                 *(f"<p>{html.escape(note)}</p>" for note in active_notes),
                 html_table(tables["active_systems"]), html_table(tables["active_pairs"])]
    if "explanation_roles" in tables:
        body += ["<h2>Faithfulness vs plausibility</h2>",
                 "<p>Explanation ratings when the interpretation shown is the model's prediction (faithfulness) "
                 "or the gold label (plausibility).</p>", html_table(tables["explanation_roles"])]
    if "value_shift" in tables:
        body += ["<h2>Value alignment and value shift (post vs persuasive comment)</h2>",
                 "<p>Per ToM category: the extracted values of the post and of the persuasive comment, their overlap "
                 "(Jaccard), the values the comment adds and drops, next to the human judgement of the comment's values "
                 "(share of Yes).</p>", html_table(tables["value_shift"].drop(columns=["added", "dropped"], errors="ignore"))]
    if "lists" in tables:
        crossing = int(tables["lists"]["participants_in_other_lists"].sum())
        body += ["<h2>Counterbalanced lists</h2>",
                 "<p>Each list holds one version of every item; each participant should rate in one list only.</p>",
                 html_table(tables["lists"])]
        if crossing:
            body.append(f"<p class='warning'><b>{crossing} participant(s) rated in more than one list</b> and may have "
                        "seen two versions of an item (only possible outside the gateway); `evalstudio status` names "
                        "them.</p>")
    if "control_accuracy" in tables:
        body += ["<h2>Control questions</h2>", html_table(tables["control_accuracy"])]
    body += ["<h2>Annotators</h2>", html_table(tables["annotator_qc"])]
    if not tables["labels"].empty:
        uncertain = int((tables["labels"]["posterior"] < 0.8).sum())
        body += ["<h2>Labels with error bars</h2>",
                 f"<p>One-coin Dawid-Skene's label of each task (labels.csv), with the probability that it is right "
                 f"and a 95% bootstrap interval: {uncertain} of {len(tables['labels'])} labels are less than 80% "
                 "probable. Each annotator's estimated accuracy, with its interval:</p>",
                 html_table(tables["annotator_accuracy"])]
    return body


def span_section(spans: pd.DataFrame) -> list[str]:
    """The report's account of the spans: how many of each label, per system, in the answers that count."""
    kept = spans[~spans["cancelled"] & ~spans["surplus"]]
    counts = (kept.assign(labels=kept["labels"].fillna("(no label)"), system=kept["system"].fillna(""))
              .groupby(["control", "labels", "system"], dropna=False).size().rename("spans").reset_index())
    return ["<h2>Spans</h2>",
            f"<p>{len(kept)} spans marked in {kept['annotation_id'].nunique()} annotations (skipped and surplus ones "
            "left out here; spans.csv has every span with its text, offsets and per-region answers).</p>",
            html_table(counts)]


def html_table(frame: pd.DataFrame) -> str:
    """A frame as an HTML table (three decimals), or a note that there is no data."""
    if frame.empty:
        return "<p><em>no data</em></p>"
    return frame.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="", border=0, classes="t")


def html_image(fig) -> str:
    """A matplotlib figure as an inline PNG image (the figure is closed)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}"/>'


def _grid(n: int):
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def _distributions(rated: pd.DataFrame, model: pd.DataFrame, project: Project):
    criteria = [c for c in project.criteria if (rated["criterion"] == c).any()]
    fig, axes = _grid(len(criteria))
    for ax, criterion in zip(axes, criteria):
        spec = project.criteria[criterion]
        human = rated.loc[rated["criterion"] == criterion, "value"]
        machine = model.loc[model["criterion"] == criterion, "value"] if not model.empty else pd.Series(dtype=object)
        if spec.is_numeric:
            bins = _bins(spec)
            ax.hist(human.astype(float), bins=bins, alpha=0.7, label="human", density=True)
            if not machine.empty:
                ax.hist(machine.astype(float), bins=bins, alpha=0.5, label="model", density=True)
        else:
            labels = spec.labels
            ax.bar(range(len(labels)), [(human == l).mean() for l in labels], alpha=0.7, label="human")
            if not machine.empty:
                ax.bar(range(len(labels)), [(machine == l).mean() for l in labels], alpha=0.5, label="model")
            ax.set_xticks(range(len(labels)), [l[:12] for l in labels], rotation=30, ha="right", fontsize=7)
        ax.set_title(criterion, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _bins(spec):
    return np.arange(spec.min - 0.5, spec.max + 1.0, 1.0)


def _scatter(rated: pd.DataFrame, model: pd.DataFrame, project: Project):
    numeric = [c for c, s in project.criteria.items() if s.is_numeric and not model.empty and (model["criterion"] == c).any()
               and (rated["criterion"] == c).any()]
    if not numeric:
        return None
    fig, axes = _grid(len(numeric))
    for ax, criterion in zip(axes, numeric):
        spec = project.criteria[criterion]
        h = rated[rated["criterion"] == criterion]
        m = model[model["criterion"] == criterion]
        human = h["value"].astype(float).groupby(unit(h)).mean()
        machine = m["value"].astype(float).groupby(unit(m)).mean()
        joined = pd.concat([human.rename("human"), machine.rename("model")], axis=1, join="inner")
        ax.scatter(joined["model"], joined["human"], s=14, alpha=0.7)
        ax.plot([spec.min, spec.max], [spec.min, spec.max], color="grey", lw=0.8, ls="--")
        ax.set_xlim(spec.min - 0.5, spec.max + 0.5)
        ax.set_ylim(spec.min - 0.5, spec.max + 0.5)
        ax.set_xlabel("model", fontsize=8)
        ax.set_ylabel("human mean", fontsize=8)
        ax.set_title(criterion, fontsize=9)
    fig.tight_layout()
    return fig


def html_page(title: str, body: str) -> str:
    """A self-contained HTML page with the report's style."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} - evalstudio report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
table.t {{ border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1.5em; }}
table.t th, table.t td {{ padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: right; }}
table.t th {{ background: #f4f4f4; }}
img {{ max-width: 100%; }}
.warning {{ border: 2px solid #b00020; background: #fff0f0; padding: 0 1em; color: #7a0016; }}
</style></head><body>
{body}
</body></html>
"""
