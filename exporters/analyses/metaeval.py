"""`evalstudio analyze`: the human ceiling, the meta-evaluation of metrics and the system ranking of a tidy ratings
frame (from any file, `evalstudio.readers.ratings`), as tables (no IO) and a report folder (CSVs + one HTML page).

Per criterion:
- agreement: Krippendorff's alpha at the criterion's level (bootstrap CI over items), Gwet's AC1/AC2 and Fleiss'
  kappa (categorical/ordinal), the six ICC forms (when every item has the same number of ratings), and the
  leave-one-annotator-out correlation (the ceiling USR and FED report) with each annotator's agreement with the rest;
- aggregation of labels (plurality, majority, Dawid-Skene; MACE on request);
- for each metric: system-level and segment-level (grouping none / item / system) correlations with CIs, pairwise
  accuracy, tie-calibrated accuracy (item-grouped) and soft pairwise accuracy; PERM-BOTH and Williams p-values for
  every pair of metrics and the significance clusters; metrics that answer on a categorical or ordinal scale are
  also checked as LLM judges (kappa, confusion matrix, calibration);
- the systems ranked by their mean human score, with paired-bootstrap CIs and pairwise p-values.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from itertools import permutations
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.readers.spec import Spec

from ...stats import aggregation, coefficients
from ...stats import correlation as corr
from ...stats import icc as icc_mod
from ...stats import significance as sig
from ...stats.agreement import (
    alpha_ci,
    krippendorff_alpha,
    leave_one_annotator_out,
    resample_counts,
    resampled_sums,
)
from ...stats.alignment import fisher_ci
from ..tables.segments import coded_ratings, score_matrices

SEGMENT_METHODS = ("pearson", "spearman", "kendall_b")
SYSTEM_METHODS = ("pearson", "spearman", "kendall_b", "kendall_c")


def _try(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except ValueError as e:
        return e


def _icc_design(r: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """A complete items x raters table for ICC: the items with the most common number of ratings; raters are the
    annotators when they are the same for every item (crossed), else slots in annotator order (ICC1 fits)."""
    counts = r.groupby("item")["annotator"].transform("size")
    k = int(counts.mode().iloc[0])
    sub = r[counts == k].sort_values(["item", "annotator"])
    per_annotator = sub.groupby("annotator").size()
    crossed = len(per_annotator) == k and (per_annotator == sub["item"].nunique()).all()
    if not crossed:
        sub = sub.assign(annotator=sub.groupby("item").cumcount().map(lambda i: f"slot{i + 1}"))
    design = "crossed" if crossed else "slots (ICC1 fits)"
    return sub, f"{design}; {sub['item'].nunique()} of {r['item'].nunique()} items with {k} ratings"


class Reasons(list):
    """Why a table, or a criterion's part of it, could not be computed: rows of not_computed.csv, and the content of
    a table's CSV when nothing of it could be (an empty output always says why)."""

    def add(self, table: str, criterion: str, reason: str) -> None:
        """Note why a table has no row for this criterion."""
        self.append({"table": table, "criterion": criterion, "reason": reason})


def agreement(ratings: pd.DataFrame, spec: Spec, n_boot: int = 1000, why: Reasons | None = None):
    """(agreement per criterion, leave-one-out per annotator, ICC forms)."""
    why = Reasons() if why is None else why
    rows, loo_rows, icc_rows = [], [], []
    for name, crit in spec.criteria.items():
        r = ratings[ratings["criterion"] == name]
        if r.empty:
            why.add("agreement", name, "no ratings of this criterion")
            continue
        r, names = coded_ratings(r)
        row = {"criterion": name, "scale": crit.scale, "items": r["item"].nunique(), "ratings": len(r),
               "annotators": r["annotator"].nunique()}
        values = r["value"].to_numpy(dtype=float) if crit.numeric else r["value"].astype(str).to_numpy()
        alpha = _try(krippendorff_alpha, r["item"].to_numpy(), values, crit.scale)
        row["alpha"] = alpha if isinstance(alpha, float) else np.nan
        row["alpha_lo"], row["alpha_hi"] = alpha_ci(r["item"].to_numpy(), values, crit.scale, n_boot) \
            if not np.isnan(row["alpha"]) else (np.nan, np.nan)
        categories = _categories(crit, values)
        if categories is not None and len(categories) >= 2:
            weights = "identity" if crit.scale == "nominal" else ("ordinal" if crit.scale == "ordinal" else "quadratic")
            r_cat = r.assign(value=values)
            for coef, key in (("gwet", "gwet_ac"), ("fleiss", "fleiss_kappa")):
                result = _try(coefficients.chance_corrected, r_cat, coef, weights, categories)
                row[key] = result["value"] if isinstance(result, dict) else np.nan
            row["ac_weights"] = weights
        if isinstance(alpha, ValueError):
            why.add("agreement", name, f"Krippendorff's alpha: {alpha}")
        if crit.numeric:
            numeric = r.assign(value=values)
            loo = _try(leave_one_annotator_out, numeric)
            if isinstance(loo, pd.DataFrame) and names is not None:  # the annotators' names again
                loo["annotator"] = [a if isinstance(a, str) else names[a] for a in loo["annotator"]]
            if isinstance(loo, pd.DataFrame):
                avg = loo.iloc[-1]
                row.update({f"loo_{m}": avg[m] for m in SEGMENT_METHODS})
                loo_rows.append(loo.assign(criterion=name))
            else:
                why.add("leave_one_out", name, str(loo))
            sub, design = _icc_design(numeric)
            table = _try(icc_mod.icc, sub)
            if isinstance(table, pd.DataFrame):
                row["icc1"] = float(table.loc[table["type"] == "ICC1", "value"].iloc[0])
                row["icc2k"] = float(table.loc[table["type"] == "ICC2k", "value"].iloc[0])
                icc_rows.append(table.assign(criterion=name, design=design))
            else:
                why.add("icc", name, f"{table} ({design})")
        else:
            for table_name in ("leave_one_out", "icc"):
                why.add(table_name, name, f"{crit.scale} scale: correlations and ICC need numbers")
        rows.append(row)
    cat = lambda parts: pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return pd.DataFrame(rows), cat(loo_rows), cat(icc_rows)


def _one_blas_thread():
    """The BLAS (OpenBLAS, MKL) at one thread while the analysis runs its own threads: two of ours each calling a
    BLAS of two threads, which wait for work spinning, spent half as much CPU again for nothing (1M ratings: the
    tables took 8.3 s of wall clock and 15.7 s of CPU; with one BLAS thread, 6.3 s and 12 s)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def meta_evaluation(ratings: pd.DataFrame, metrics: pd.DataFrame, spec: Spec, n_boot: int = 1000,
                    resamples: int = 1000, seed: int = 0, why: Reasons | None = None):
    """(correlations, pairwise/accuracy table, metric-pair significance, clusters) for every numeric criterion."""
    why = Reasons() if why is None else why
    corr_rows, acc_rows, pair_rows, cluster_rows = [], [], [], []
    rng = np.random.default_rng(seed)
    for criterion, crit in spec.criteria.items():
        if not (ratings["criterion"] == criterion).any():
            continue
        if not crit.numeric:
            why.add("correlations", criterion, f"{crit.scale} scale: correlations need numbers (a metric answering "
                                               "on this scale is checked as a judge, judges.csv)")
            continue
        systems, items, human, scores = score_matrices(ratings, metrics, criterion)
        scores = {k: v for k, v in scores.items() if (~np.isnan(v) & ~np.isnan(human)).sum() >= 3}
        if not scores:
            why.add("correlations", criterion, "no metric has scores for 3 or more of the rated segments (matched by "
                                               "item and system)")
            continue
        n_sys = len(systems)
        if n_sys < 3:
            why.add("correlations", criterion, f"system level: needs 3 or more systems, the ratings have {n_sys}")
        per_item = np.sum(~np.isnan(human), axis=0)
        if n_sys >= 2 and not (per_item >= 2).any():
            why.add("correlations", criterion, "item-grouped: every item has one rated system, so there is nothing "
                                               "to compare within an item")
        counts = resample_counts(rng, len(items), n_boot) if n_boot else None
        human_sys = sig.system_scores(human)
        boot_h = sig.system_scores(human, counts) if counts is not None and n_sys >= 3 else None
        human_p = {}  # the humans' permutation p-values, shared by metrics scoring the same items

        def one(metric, mat):
            """(correlation rows, accuracy rows, system scores or None) of one metric."""
            own_corr, own_acc, m_sys = [], [], None
            base = {"criterion": criterion, "metric": metric}
            if n_sys >= 3:
                m_sys = sig.system_scores(mat)
                boot_m = sig.system_scores(mat, counts) if boot_h is not None else None
                for method in SYSTEM_METHODS:
                    value, _ = corr.grouped_correlation(human_sys, m_sys, method)
                    lo = hi = np.nan
                    if boot_m is not None:
                        b = corr.batch_correlation(boot_h[:, None, :], boot_m[:, None, :], method)[:, 0]
                        b = b[~np.isnan(b)]
                        lo, hi = np.percentile(b, [2.5, 97.5]) if len(b) else (np.nan, np.nan)
                    own_corr.append({**base, "level": "system", "grouping": "none", "method": method, "value": value,
                                     "lo": lo, "hi": hi, "n": n_sys, "groups": 1,
                                     "reason": "" if not np.isnan(value) else "undefined (constant system scores)"})
                acc, pairs = corr.pairwise_accuracy(human_sys, m_sys)
                own_acc.append({**base, "statistic": "pairwise_accuracy_system", "value": acc, "pairs": pairs,
                                "epsilon": np.nan})
                own_acc.append({**base, "statistic": "soft_pairwise_accuracy_system",
                                "value": corr.soft_pairwise_accuracy(human, mat, resamples, cache=human_p),
                                "pairs": pairs,
                                "epsilon": np.nan})
            for grouping in (("none", "item", "system") if n_sys >= 2 else ("none",)):
                # tau_23 counts pairs: within items only (Deutsch et al. 2023 use it item-grouped)
                for method in SEGMENT_METHODS + (("kendall_23",) if grouping == "item" else ()):
                    g_h, g_m = corr.arrange(human, grouping), corr.arrange(mat, grouping)
                    per_group = corr.batch_correlation(g_h, g_m, method)
                    value, n_groups = corr.average(per_group)
                    if grouping == "none":
                        n = int((~np.isnan(g_h) & ~np.isnan(g_m)).sum())
                        lo, hi = fisher_ci(value, n, method.split("_")[0])
                    elif grouping == "system":  # a few large groups: no CI from resampling them
                        n, lo, hi = n_groups, np.nan, np.nan
                    else:  # resample the items' correlations with the same counts
                        kept = ~np.isnan(per_group)
                        n = int(kept.sum())
                        lo = hi = np.nan
                        if counts is not None and n >= 2:
                            with np.errstate(invalid="ignore", divide="ignore"):  # no copy of the counts' columns
                                b = (resampled_sums(counts, np.where(kept, per_group, 0.0))
                                     / resampled_sums(counts, kept))
                            lo, hi = np.nanpercentile(b, [2.5, 97.5])
                    reason = ""
                    if np.isnan(value):
                        reason = (_GROUPING_EMPTY[grouping] if n_groups == 0 else
                                  "the correlation is undefined (constant scores)")
                    own_corr.append({**base, "level": "segment", "grouping": grouping, "method": method,
                                     "value": value, "lo": lo, "hi": hi, "n": n, "groups": n_groups,
                                     "reason": reason})
            if n_sys >= 2:
                acc, eps = corr.tie_calibrated_accuracy(human, mat, "item")
                own_acc.append({**base, "statistic": "tie_calibrated_accuracy_item", "value": acc, "pairs": np.nan,
                                "epsilon": eps})
            return own_corr, own_acc, m_sys

        # the metrics two at a time: most of the work is numpy's sorting, which runs outside the GIL
        with _one_blas_thread(), ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
            done = list(pool.map(one, scores, scores.values()))
        system_level = {}
        for metric, (own_corr, own_acc, m_sys) in zip(scores, done):
            corr_rows += own_corr
            acc_rows += own_acc
            if m_sys is not None:
                system_level[metric] = m_sys
        pairs, clusters = _significance(criterion, human, human_sys, scores, system_level, resamples, seed)
        pair_rows += pairs
        cluster_rows += clusters
    frame = lambda rows: pd.DataFrame(rows)
    return frame(corr_rows), frame(acc_rows), frame(pair_rows), frame(cluster_rows)


_GROUPING_EMPTY = {
    "none": "fewer than 3 segments with a human and a metric score, or constant scores",
    "item": "no item has two or more systems with a human and a metric score (each item has one system): "
            "nothing to compare within an item",
    "system": "no system has three or more items with a human and a metric score, or the scores are constant",
}


def _significance(criterion, human, human_sys, scores, system_level, resamples, seed):
    """PERM-BOTH (and Williams at system level) for every ordered pair of metrics; clusters at alpha 0.05."""
    if len(scores) < 2:
        return [], []
    at_system = len(system_level) == len(scores)
    level, method = ("system", "pearson") if at_system else ("segment", "pearson")
    target = {k: (system_level[k] if at_system else v) for k, v in scores.items()}
    gold = human_sys if at_system else human
    value = {k: corr.grouped_correlation(gold, v, method)[0] for k, v in target.items()}
    rows = []
    p = pd.DataFrame(np.nan, index=list(target), columns=list(target))
    for better, worse in permutations(target, 2):
        if value[better] < value[worse] or (value[better] == value[worse] and better > worse):
            continue
        p_perm, delta = sig.perm_both(gold, target[worse], target[better], method, "none", resamples, seed)
        row = {"criterion": criterion, "level": level, "method": method, "metric_better": better,
               "metric_worse": worse, "corr_better": value[better], "corr_worse": value[worse], "delta": delta,
               "p_perm_both": p_perm, "p_williams": np.nan}
        if at_system and len(gold) > 3:
            r23 = corr.grouped_correlation(target[better], target[worse], "pearson")[0]
            row["p_williams"] = sig.williams_test(value[better], value[worse], r23, len(gold))
        rows.append(row)
        p.loc[better, worse] = p_perm
    clusters = sig.significance_clusters(pd.Series(value), p)
    return rows, [{"criterion": criterion, "level": level, "method": method, "metric": k, "correlation": value[k],
                   "cluster": int(clusters[k])} for k in clusters.index]


def _categories(crit, values) -> list | None:
    """The answer categories of a categorical or ordinal criterion (numbers as the analysis holds them)."""
    if crit.labels is not None:
        return crit.labels if crit.scale == "nominal" else [float(i + 1) for i in range(len(crit.labels))]
    if crit.min is not None and crit.max is not None and float(crit.min).is_integer() and crit.max - crit.min <= 20:
        return [float(v) for v in range(int(crit.min), int(crit.max) + 1)]
    found = sorted(set(values))
    return found if len(found) <= 50 else None


def judge_checks(ratings: pd.DataFrame, metrics: pd.DataFrame, spec: Spec, why: Reasons | None = None):
    """LLM-judge checks for categorical and ordinal criteria: every metric whose scores are all answers of the
    criterion's scale is a judge; it is compared with the human plurality label of each segment (weighted kappa,
    quadratic for ordinal; accuracy; confusion matrix) and, when the metrics file gives a confidence, calibrated
    (ECE with its reliability table). Returns (judges, confusion, calibration)."""
    from ...stats.alignment import expected_calibration_error, judge_agreement

    why = Reasons() if why is None else why
    judges, confusions, calibrations = [], [], []
    for criterion, crit in spec.criteria.items():
        r = ratings[ratings["criterion"] == criterion]
        if r.empty:
            continue
        if crit.scale == "interval":
            why.add("judges", criterion, "interval scale: judges are checked on categorical and ordinal criteria "
                                         "(an interval criterion's metrics are in correlations.csv)")
            continue
        categories = _categories(crit, r["value"])
        if categories is None:
            why.add("judges", criterion, "more than 50 distinct answers and no labels or range in the spec")
            continue
        before = len(judges)
        key = lambda f: f["system"].astype(str) + " | " + f["item"].astype(str)
        human = aggregation.plurality(pd.DataFrame({"item": key(r).to_numpy(), "annotator": r["annotator"].to_numpy(),
                                                    "value": r["value"].to_numpy()}))
        m = metrics[metrics["criterion"].isin([criterion, ""])]
        for metric, g in m.groupby("metric", sort=True, observed=True):
            if not g["value"].isin(categories).all():
                continue  # a continuous metric, not a judge on this scale
            judge = pd.Series(g["value"].to_numpy(), index=key(g).to_numpy())
            both = human.index.intersection(judge.index)
            if len(both) == 0:
                continue
            weights = "quadratic" if crit.scale == "ordinal" else None
            row, confusion = judge_agreement(human[both].to_numpy(), judge[both].to_numpy(), weights, categories)
            row = {"criterion": criterion, "metric": metric, **row}
            names = (lambda v: crit.labels[int(v) - 1]) if crit.labels is not None and crit.scale == "ordinal" else str
            long = confusion.stack().rename("count").reset_index()
            confusions.append(long.assign(criterion=criterion, metric=metric, human=long["human"].map(names),
                                          judge=long["judge"].map(names)))
            if "confidence" in g and g["confidence"].notna().any():
                conf = pd.Series(g["confidence"].to_numpy(), index=judge.index)[both]
                ece, table = expected_calibration_error(conf.to_numpy(), (human[both] == judge[both]).to_numpy())
                row["ece"] = ece
                calibrations.append(table.assign(criterion=criterion, metric=metric))
            judges.append(row)
        if len(judges) == before:
            why.add("judges", criterion, "no metric answers on this criterion's scale for the rated segments "
                                         f"(a judge's scores must all be among {_shown(categories)})")
    cat = lambda parts: pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return pd.DataFrame(judges), cat(confusions), cat(calibrations)


def _shown(categories) -> str:
    text = ", ".join(f"{c:g}" if isinstance(c, float) else str(c) for c in categories[:8])
    return text + (", ..." if len(categories) > 8 else "")


def system_ranking(ratings: pd.DataFrame, spec: Spec, n_boot: int = 1000, why: Reasons | None = None):
    """(ranking per criterion, pairwise p-values) from the mean human score per system."""
    why = Reasons() if why is None else why
    tables, pairs = [], []
    for criterion, crit in spec.criteria.items():
        r = ratings[ratings["criterion"] == criterion]
        if r.empty:
            continue
        if not crit.numeric:
            why.add("systems", criterion, f"{crit.scale} scale: systems are ranked by mean score, which needs numbers")
            continue
        if r["system"].nunique() < 2:
            why.add("systems", criterion, "one system (or no system column): nothing to rank")
            continue
        human = r.assign(value=r["value"].astype(float)).groupby(["system", "item"])["value"].mean().unstack()
        table, p = sig.system_ranking(human.to_numpy(), human.index, max(n_boot, 1))
        tables.append(table.assign(criterion=criterion))
        long = p.stack().rename("p_not_better").rename_axis(["system_a", "system_b"]).reset_index()
        pairs.append(long.assign(criterion=criterion))
    cat = lambda parts: pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return cat(tables), cat(pairs)


def analyze(ratings: pd.DataFrame, spec: Spec, metrics: pd.DataFrame | None = None, n_boot: int = 1000,
            resamples: int = 1000, mace: bool = False, ppi: str | None = None, alt: str | None = None,
            epsilon: float = 0.2, population: str = "finite") -> dict[str, pd.DataFrame]:
    """Every table of the analysis, by name (the CSV file names). `ppi`: a metric whose scores give
    prediction-powered estimates of the systems' means and differences, of a finite or infinite `population`
    (exporters/analyses/ppi.py); `alt`: a judge put to the alternative annotator test with margin `epsilon`
    (exporters/analyses/alttest.py)."""
    tables = {}
    why, why_metrics = Reasons(), Reasons()  # in this order in not_computed.csv, however the threads finish
    from ..tables.aggregated import aggregate

    def of_the_ratings(ratings):
        """The tables of the ratings alone, on a thread of their own beside the meta-evaluation (each side has its
        own shallow copy of the frame: pandas' lazily built caches are not shared between threads)."""
        out = {}
        out["agreement"], out["leave_one_out"], out["icc"] = agreement(ratings, spec, n_boot, why)
        out["aggregated_labels"], out["annotator_accuracy"] = aggregate(ratings, spec, why, mace, n_boot)
        out["systems"], out["system_pairs"] = system_ranking(ratings, spec, n_boot, why)
        return out

    with _one_blas_thread(), ThreadPoolExecutor(max_workers=1) as pool:
        ratings_side = pool.submit(of_the_ratings, ratings.copy(deep=False))
        if metrics is not None and not metrics.empty:
            (tables["correlations"], tables["accuracy"], tables["metric_pairs"],
             tables["clusters"]) = meta_evaluation(ratings, metrics, spec, n_boot, resamples, why=why_metrics)
            tables["judges"], tables["judge_confusion"], tables["judge_calibration"] = judge_checks(
                ratings, metrics, spec, why_metrics)
        tables = {**ratings_side.result(), **tables}
    why.extend(why_metrics)
    from .alttest import alt_test_tables
    from .ppi import ppi_tables

    if ppi is not None:
        tables["ppi_systems"], tables["ppi_pairs"] = ppi_tables(ratings, metrics, spec, ppi, why=why,
                                                                        population=population)
    if alt is not None:
        tables["alt_test"], tables["alt_test_annotators"] = alt_test_tables(ratings, metrics, spec, alt, epsilon, why=why)
    tables["not_computed"] = pd.DataFrame(why, columns=["table", "criterion", "reason"])
    return tables


def summary(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per criterion, what `analyze` prints: scale, ratings, items, alpha with its CI, the leave-one-out
    ceiling (mean Spearman rho of each annotator with the rest, as USR and FED report it), and the metric that correlates best with the humans
    (Pearson r at system level when there are 3 or more systems, else over segments)."""
    rows = []
    agreement_table = tables["agreement"]
    corrs = tables.get("correlations", pd.DataFrame())
    for _, a in agreement_table.iterrows():
        row = {"criterion": a["criterion"], "scale": a["scale"], "ratings": int(a["ratings"]),
               "items": int(a["items"]), "alpha": a.get("alpha", np.nan), "alpha_lo": a.get("alpha_lo", np.nan),
               "alpha_hi": a.get("alpha_hi", np.nan), "loo_spearman": a.get("loo_spearman", np.nan),
               "best_metric": "", "best_level": "", "best_r": np.nan}
        if not corrs.empty:
            c = corrs[(corrs["criterion"] == a["criterion"]) & (corrs["method"] == "pearson")
                      & (corrs["grouping"] == "none") & corrs["value"].notna()]
            level = "system" if (c["level"] == "system").any() else "segment"
            c = c[c["level"] == level]
            if not c.empty:
                best = c.loc[c["value"].idxmax()]
                row.update(best_metric=best["metric"], best_level=level, best_r=float(best["value"]))
        rows.append(row)
    return pd.DataFrame(rows)


# what an empty table's CSV says when no criterion gave a reason of its own
_FOLLOWS = {"system_pairs": "systems", "accuracy": "correlations", "metric_pairs": "correlations",
            "clusters": "correlations", "judge_confusion": "judges", "judge_calibration": "judges",
            "ppi_pairs": "ppi_systems"}
_EMPTY = {"metric_pairs": "significance needs two or more metrics with correlations for the same criterion",
          "clusters": "significance clusters need two or more metrics with correlations for the same criterion",
          "judge_calibration": "calibration needs a confidence column in the metrics file",
          "accuracy": "pairwise accuracy needs two or more systems"}


def empty_reasons(name: str, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """(criterion, reason) rows for an empty table: the reasons recorded for it (or for the table it follows from),
    else the general one."""
    why = tables.get("not_computed", pd.DataFrame(columns=["table", "criterion", "reason"]))
    rows = why[why["table"] == name]
    if rows.empty and name not in _EMPTY:
        rows = why[why["table"] == _FOLLOWS.get(name, name)]
    if rows.empty:
        return pd.DataFrame({"criterion": [""], "reason": [_EMPTY.get(name, "nothing to compute from these ratings")]})
    return rows[["criterion", "reason"]].reset_index(drop=True)


def write_analysis(tables: dict[str, pd.DataFrame], title: str, out_dir: Path, notes: list[str] = ()) -> Path:
    """CSVs (spreadsheet-safe) and index.html with plots."""
    from evalstudio.base.files import write_output

    from ..tables.files import write_csv
    from .metaeval_page import page

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        if name == "not_computed" and table.empty:
            continue  # everything was computed
        # an output that could not be computed says why instead of being empty
        write_csv(empty_reasons(name, tables) if table.empty else table, out_dir / f"{name}.csv")
    index = out_dir / "index.html"
    write_output(index, page(tables, title, notes))
    return index
