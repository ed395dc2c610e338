"""The HTML page of `evalstudio analyze`: per criterion the human ceiling, each metric's correlations with CIs,
the significance clusters and the system ranking (tables and plots)."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from .report import html_image, html_page, html_table, plt

_EXPLAIN = {
    "ceiling": "How well people agree: Krippendorff's alpha (95% bootstrap CI over items), Gwet's AC and Fleiss' "
               "kappa (weights by scale), ICC1 / ICC2k, and the leave-one-annotator-out correlation (each annotator "
               "against the mean of the others). A metric correlating near the LOO value is as good as one more "
               "annotator.",
    "correlations": "Correlation of each metric with the mean human score. System level: over system means (95% "
                    "paired bootstrap CI over items). Segment level: over all segments (none; Fisher CI) or per item "
                    "across systems, averaged (item; bootstrap CI over items).",
    "clusters": "Metrics sorted by correlation; a new cluster starts at a metric significantly worse (PERM-BOTH, "
                "p < 0.05) than the best of the current one. Same cluster = no significant difference.",
    "judges": "A metric whose scores are answers of the criterion's scale is treated as a judge: compared with the "
              "human plurality label of each segment (Cohen's kappa, quadratic weights for ordinal scales; accuracy), "
              "and, when the metrics file has a confidence column, calibrated (expected calibration error, 10 bins).",
    "systems": "Systems by mean human score with 95% paired bootstrap CIs over items; p = share of resamples in "
               "which the row system is not better than the column system.",
    "ppi": "Each system's mean human score, and each difference between two systems, estimated from the segments "
           "humans rated and, through the named metric's scores, from those they did not (PPI++, Angelopoulos, Duchi "
           "& Zrnic 2023), beside the classical interval of the rated segments alone; both are 95% Student-t "
           "intervals. effective_n: the human labels the classical interval would need to be as narrow; lambda: "
           "how much the metric is trusted (0: not at all, the classical mean). Empty cells: too few rated segments "
           "for the number to hold its promise on real data (PPI++ intervals from 20, effective_n from 60; "
           "not_computed.csv says why).",
    "alt_test": "The alternative annotator test (Calderon, Reichart & Dror, ACL 2025): each annotator is left out in "
                "turn, and on the segments they rated the judge's answer and theirs are compared with the other "
                "annotators' (accuracy, or minus the RMSE); rho_f is how often the judge aligns at least as well, "
                "rho_h how often the annotator does. The judge wins against an annotator when rho_f > rho_h - "
                "epsilon (one-sided t-test, Benjamini-Yekutieli over annotators); it may replace them when it wins "
                "against at least half (winning rate >= 0.5). The average advantage probability compares judges.",
}


def _sel(frame: pd.DataFrame, criterion: str) -> pd.DataFrame:
    if frame is None or frame.empty or "criterion" not in frame:
        return pd.DataFrame()
    return frame[frame["criterion"] == criterion].drop(columns="criterion")


def _wide_correlations(corrs: pd.DataFrame, accuracy: pd.DataFrame) -> pd.DataFrame:
    """One row per metric: every correlation as `value [lo, hi]`, then the accuracies (the CSVs stay long)."""
    fmt = lambda r: f"{r['value']:.3f}" + ("" if pd.isna(r["lo"]) else f" [{r['lo']:.2f}, {r['hi']:.2f}]")
    cells = corrs.assign(column=corrs["level"] + " " + np.where(corrs["level"] == "system", "", corrs["grouping"] + " ")
                         + corrs["method"], cell=corrs.apply(fmt, axis=1))
    wide = cells.pivot(index="metric", columns="column", values="cell")[list(dict.fromkeys(cells["column"]))]
    if not accuracy.empty:
        acc = accuracy.assign(cell=accuracy.apply(lambda r: f"{r['value']:.3f}" + (
            f" (eps {r['epsilon']:.3g})" if pd.notna(r["epsilon"]) else ""), axis=1))
        wide = wide.join(acc.pivot(index="metric", columns="statistic", values="cell"))
    return wide.reset_index()


def _correlation_plot(corrs: pd.DataFrame, clusters: pd.DataFrame):
    rows = corrs[(corrs["method"] == "pearson")]
    level = "system" if (rows["level"] == "system").any() else "segment"
    rows = rows[(rows["level"] == level) & (rows["grouping"] == "none")].sort_values("value", ascending=True)
    if rows.empty:
        return None
    cluster = clusters.set_index("metric")["cluster"] if not clusters.empty else pd.Series(dtype=int)
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(rows) + 1.2))
    y = np.arange(len(rows))
    err = np.vstack([rows["value"] - rows["lo"], rows["hi"] - rows["value"]])
    # a percentile CI need not contain the estimate: draw the part of it that lies beyond
    # as lists: matplotlib turns a 2 x 1 array into a scalar, which NumPy deprecates
    ax.barh(y, rows["value"], xerr=np.clip(np.nan_to_num(err), 0, None).tolist(), capsize=3,
            color=[colours((int(cluster.get(m, 1)) - 1) % 10) for m in rows["metric"]])
    ax.set_yticks(y, [f"{m}  (cluster {int(cluster[m])})" if m in cluster else m for m in rows["metric"]], fontsize=8)
    ax.set_xlabel(f"Pearson r, {level} level", fontsize=8)
    ax.axvline(0, color="grey", lw=0.8)
    fig.tight_layout()
    return fig


def _system_plot(systems: pd.DataFrame):
    if systems.empty:
        return None
    rows = systems.sort_values("mean")
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(rows) + 1.2))
    y = np.arange(len(rows))
    err = np.vstack([rows["mean"] - rows["lo"], rows["hi"] - rows["mean"]])
    ax.errorbar(rows["mean"], y, xerr=np.clip(np.nan_to_num(err), 0, None).tolist(), fmt="o", capsize=3)
    ax.set_yticks(y, rows["system"].astype(str).str[:30], fontsize=8)
    ax.set_xlabel("mean human score", fontsize=8)
    fig.tight_layout()
    return fig


def page(tables: dict[str, pd.DataFrame], title: str, notes=()) -> str:
    """The meta-evaluation's HTML page from its tables."""
    esc = html.escape
    body = [f"<h1>{esc(title)}</h1>"] + [f"<p>{esc(n)}</p>" for n in notes]
    criteria = list(tables["agreement"]["criterion"]) if not tables["agreement"].empty else []
    for criterion in criteria:
        body.append(f"<h2>{esc(str(criterion))}</h2>")
        agreement = _sel(tables["agreement"], criterion)
        body += ["<h3>Human ceiling</h3>", f"<p>{_EXPLAIN['ceiling']}</p>"]
        if not agreement.empty and agreement["ratings"].max() <= agreement["items"].max():
            body.append("<p><b>One rating per item:</b> agreement needs two or more ratings of the same item, so there "
                        "is no human ceiling here (give one row per annotator, not their mean).</p>")
        else:
            body.append(html_table(agreement))
        loo = _sel(tables["leave_one_out"], criterion)
        if not loo.empty:
            body += ["<p>Each annotator against the rest:</p>", html_table(loo)]
        icc = _sel(tables["icc"], criterion)
        if not icc.empty:
            body += [f"<p>ICC ({esc(str(icc['design'].iloc[0]))}):</p>", html_table(icc.drop(columns="design"))]
        corrs = _sel(tables.get("correlations"), criterion)
        if not corrs.empty:
            body += ["<h3>Metrics</h3>", f"<p>{_EXPLAIN['correlations']}</p>",
                     html_table(_wide_correlations(corrs, _sel(tables.get("accuracy"), criterion)))]
            clusters = _sel(tables.get("clusters"), criterion)
            fig = _correlation_plot(corrs, clusters)
            if fig is not None:
                body.append(html_image(fig))
            if not clusters.empty:
                body += ["<h3>Significance clusters</h3>", f"<p>{_EXPLAIN['clusters']}</p>", html_table(clusters),
                         html_table(_sel(tables.get("metric_pairs"), criterion))]
        judges = _sel(tables.get("judges"), criterion)
        if not judges.empty:
            body += ["<h3>Judges</h3>", f"<p>{_EXPLAIN['judges']}</p>", html_table(judges)]
            confusion = _sel(tables.get("judge_confusion"), criterion)
            for metric, g in confusion.groupby("metric", sort=True) if not confusion.empty else []:
                body += [f"<p>{esc(str(metric))}: confusion (rows human, columns judge)</p>",
                         html_table(g.pivot(index="human", columns="judge", values="count").reset_index())]
            calibration = _sel(tables.get("judge_calibration"), criterion)
            if not calibration.empty:
                body += ["<p>Reliability (confidence vs accuracy per bin):</p>", html_table(calibration)]
        systems = _sel(tables["systems"], criterion)
        if not systems.empty:
            body += ["<h3>System ranking</h3>", f"<p>{_EXPLAIN['systems']}</p>", html_table(systems)]
            fig = _system_plot(systems)
            if fig is not None:
                body.append(html_image(fig))
            pairs = _sel(tables["system_pairs"], criterion)
            if not pairs.empty:
                body.append(html_table(pairs.pivot(index="system_a", columns="system_b", values="p_not_better")
                                   .reset_index()))
        ppi = _sel(tables.get("ppi_systems"), criterion)
        if not ppi.empty:
            body += ["<h3>Prediction-powered estimates</h3>", f"<p>{_EXPLAIN['ppi']}</p>", html_table(ppi),
                     html_table(_sel(tables.get("ppi_pairs"), criterion))]
        alt = _sel(tables.get("alt_test"), criterion)
        if not alt.empty:
            body += ["<h3>Can the judge replace the annotators?</h3>", f"<p>{_EXPLAIN['alt_test']}</p>", html_table(alt),
                     html_table(_sel(tables.get("alt_test_annotators"), criterion))]
        not_computed = _sel(tables.get("not_computed"), criterion)
        if not not_computed.empty:
            body += ["<h3>Not computed</h3>", "<ul>" + "".join(
                f"<li>{esc(str(r['table']))}.csv: {esc(str(r['reason']))}</li>" for _, r in not_computed.iterrows())
                     + "</ul>"]
    labels = tables.get("aggregated_labels")
    if labels is not None and not labels.empty:
        body += ["<h2>Aggregated labels</h2>", f"<p>{len(labels)} item labels in aggregated_labels.csv "
                 "(plurality, majority, Dawid-Skene, and MACE when asked for). One-coin Dawid-Skene's label comes "
                 "with its posterior probability and a 95% interval (<code>posterior</code>, <code>posterior_lo</code>, "
                 "<code>posterior_hi</code>): the chance that the label is right, calibrated on simulations from "
                 "published crowd labels.</p>"]
        if "posterior" in labels:
            uncertain = labels[labels["posterior"] < 0.8]
            body.append(f"<p>{len(uncertain)} of {len(labels)} labels are less than 80% probable: the items to "
                        "look at, or to give more answers.</p>")
    accuracy = tables.get("annotator_accuracy")
    if accuracy is not None and not accuracy.empty:
        shown = accuracy.assign(accuracy=accuracy.apply(
            lambda r: f"{r['accuracy']:.2f}" + ("" if pd.isna(r["accuracy_lo"]) else
                                                f" [{r['accuracy_lo']:.2f}, {r['accuracy_hi']:.2f}]"), axis=1))
        body += ["<h2>Annotators' estimated accuracy</h2>",
                 "<p>One-coin Dawid-Skene: the probability that each annotator's label is right, with a 95% bootstrap "
                 "interval over items (annotator_accuracy.csv). An accuracy near chance with an interval that "
                 "excludes the others' is worth a look.</p>",
                 html_table(shown[["criterion", "annotator", "accuracy", "labels"]])]
    return html_page(title, "\n".join(body))
