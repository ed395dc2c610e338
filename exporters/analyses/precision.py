"""`evalstudio plan --agreement-width W` and `--correlation-width W`: from a pilot, how many outputs and annotators
per output a study needs for Krippendorff's alpha's 95% interval, or a metric-human correlation's, to be narrower
than W (evalstudio.stats.precision). Tables: agreement.csv and correlation.csv (width against outputs for each
number of annotators per output), and a cheapest row per target in cheapest.csv.

An output is one system's output for one item (the unit alpha is computed over: (system, item)); a task is one
output rated by one annotator. The correlation is the Pearson correlation over outputs between the metric's score
and the mean of the output's human ratings, all systems pooled."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalstudio.base.errors import BadInput

from ...stats.agreement import alpha_bootstrap, krippendorff_alpha
from ...stats.power import drawn_studies
from ...stats.precision import (
    alpha_inflation,
    alpha_width,
    balanced_alpha,
    central_width,
    correlation_at,
    correlation_inflation,
    correlation_width,
    pearson_bootstrap,
)
from .ppi import segment_matrices

GRID = (5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200, 250, 300, 400, 500, 600, 800, 1000, 1500, 2000,
        3000, 5000)


def pilot_agreement(ratings: pd.DataFrame, criterion: str, seed: int = 0) -> tuple[float, float, int, float]:
    """(alpha, mean annotators per output, outputs, inflation) of one criterion's ratings (interval alpha over
    outputs; inflation: the bootstrap's variance over normal theory's, from 2000 resamples of the outputs)."""
    r = ratings[ratings["criterion"] == criterion]
    units = r["system"].astype(str) + "\x00" + r["item"].astype(str)
    counts = units.value_counts()
    if (counts >= 2).sum() < 2:
        raise BadInput(f"{criterion}: fewer than 2 outputs of the pilot have two or more ratings; alpha needs "
                       "repeated ratings")
    alpha = krippendorff_alpha(units.to_numpy(), r["value"].astype(float).to_numpy(), "interval")
    if not np.isfinite(alpha):
        raise BadInput(f"{criterion}: every rating of the pilot is the same value, so alpha is undefined")
    k, n = float(counts[counts >= 2].mean()), int((counts >= 2).sum())
    boot = alpha_bootstrap(units.to_numpy(), r["value"].astype(float).to_numpy(), "interval", 2000, seed)
    return alpha, k, n, alpha_inflation(boot, alpha, n, k)


def pilot_correlation(ratings: pd.DataFrame, metrics: pd.DataFrame, criterion: str, metric: str,
                      seed: int = 0) -> tuple[float, int, float]:
    """(Pearson r, outputs, inflation) between the metric's score and the mean human rating, over the outputs that
    have both (inflation from 1000 bootstrap resamples of them)."""
    human, prediction = segment_matrices(ratings, metrics, criterion, metric)
    both = human.notna() & prediction.notna()
    x, y = prediction.to_numpy()[both.to_numpy()], human.to_numpy()[both.to_numpy()]
    if len(x) < 4 or np.ptp(x) == 0 or np.ptp(y) == 0:
        raise BadInput(f"{metric} and {criterion}: a correlation needs 4 or more outputs with both a score and a "
                       f"rating, neither constant (the pilot has {len(x)})")
    return float(np.corrcoef(x, y)[0, 1]), int(len(x)), correlation_inflation(pearson_bootstrap(x, y, seed=seed), len(x))


def _count(k) -> int | float:
    """Annotators per output: a whole number, or the pilot's mean where it plans for the pilot's own."""
    return int(k) if float(k).is_integer() else round(float(k), 2)


def _target_rows(kind: str, criterion: str, widths: np.ndarray, every: np.ndarray, m: np.ndarray, target: float,
                 minutes_per_task, pay_per_hour, note: str) -> tuple[list[dict], list[dict]]:
    curve_rows, cheapest_rows = [], []
    for j, k in enumerate(m):
        for n in GRID:
            if n <= every[-1]:
                curve_rows.append({"criterion": criterion, "annotators": _count(k), "outputs": n,
                                   "width": widths[n - every[0], j]})
        reached = np.nonzero(widths[:, j] <= target)[0]
        row = {"criterion": criterion, "design": kind, "annotators": _count(k)}
        if len(reached) == 0:
            cheapest_rows.append(row | {"items": np.nan, "tasks": np.nan, "width": np.nan if np.isnan(widths[:, j]).all()
                                        else np.nanmin(widths[:, j]),
                                        "minutes": np.nan, "cost": np.nan,
                                        "note": "no interval" if np.isnan(widths[:, j]).all()
                                        else f"not reached with {every[-1]} outputs"})
            continue
        n = int(every[reached[0]])
        tasks = int(round(n * k))
        minutes = tasks * minutes_per_task if minutes_per_task is not None else np.nan
        cost = minutes / 60 * pay_per_hour if pay_per_hour is not None and minutes == minutes else np.nan
        cheapest_rows.append(row | {"items": n, "tasks": tasks, "width": widths[n - every[0], j], "minutes": minutes,
                                    "cost": cost, "note": note})
    return curve_rows, cheapest_rows


def precision_tables(ratings: pd.DataFrame, criterion: str, annotators=(1, 2, 3, 4, 5), max_items: int = 5000,
                     agreement_width: float | None = None, correlation_width_target: float | None = None,
                     metrics: pd.DataFrame | None = None, metric: str | None = None,
                     minutes_per_task: float | None = None, pay_per_hour: float | None = None,
                     level: float = 0.95) -> dict[str, pd.DataFrame]:
    """agreement / correlation (width against outputs per annotators per output), precision (the pilot's alpha,
    r and their sizes) and cheapest (per target and annotators: the fewest outputs whose expected interval is at
    most the target)."""
    for name, w in (("--agreement-width", agreement_width), ("--correlation-width", correlation_width_target)):
        if w is not None and not 0 < w < 2:
            raise BadInput(f"{name}: the width of an interval of a coefficient between -1 and 1, above 0 and below "
                           f"2, got {w}")
    m = np.asarray(sorted(set(annotators)), dtype=float)
    every = np.arange(4, max_items + 1)
    try:
        alpha, pilot_k, units, inflation = pilot_agreement(ratings, criterion)
    except BadInput:
        if agreement_width is not None:
            raise
        # no repeated ratings (a published file of mean scores): the correlation is planned for the pilot's own
        # human score only, since how it changes with more annotators needs their agreement
        r = ratings[ratings["criterion"] == criterion]
        alpha, units, inflation = np.nan, int(r.groupby(["system", "item"]).ngroups), np.nan
        pilot_k = float(r.groupby(["system", "item"]).size().mean())
        m = np.asarray([pilot_k])
    facts = {"criterion": criterion, "alpha": alpha, "annotators_per_output": pilot_k, "outputs": units,
             "variance_inflation": inflation}
    tables, cheapest = {}, []
    if agreement_width is not None:
        widths = alpha_width(alpha, every, m, level, inflation)
        curve, rows = _target_rows("agreement", criterion, widths, every, m, agreement_width, minutes_per_task,
                                   pay_per_hour, "outputs; alpha's interval")
        tables["agreement"] = pd.DataFrame(curve)
        cheapest += rows
    if correlation_width_target is not None:
        if metrics is None or metric is None:
            raise BadInput("--correlation-width needs --metrics FILE and --metric NAME")
        known = sorted(set(metrics["metric"]))
        if metric not in known:
            raise BadInput(f"--metric {metric}: no such metric in the metrics file (it has: {', '.join(known[:20])})")
        r, scored, r_inflation = pilot_correlation(ratings, metrics, criterion, metric)
        try:
            r_k = correlation_at(r, alpha, pilot_k, m) if np.isfinite(alpha) else np.asarray([r])
        except ValueError as e:
            raise BadInput(f"{criterion}: {e}") from None
        widths = correlation_width(r_k, every, level, r_inflation)
        curve, rows = _target_rows("correlation", criterion, widths, every, m, correlation_width_target,
                                   minutes_per_task, pay_per_hour, f"outputs; r with {metric}")
        tables["correlation"] = pd.DataFrame(curve).assign(
            r=lambda t: t["annotators"].map(dict(zip(m.tolist(), r_k.tolist()))))
        cheapest += rows
        facts |= {"metric": metric, "r": r, "outputs_scored": scored, "r_variance_inflation": r_inflation}
    tables["precision"] = pd.DataFrame([facts])
    tables["precision_cheapest"] = pd.DataFrame(cheapest)
    return tables


def agreement_calibration(ratings: pd.DataFrame, criterion: str, annotators=(2, 3), outputs=(25, 50, 100, 200),
                          studies: int = 2000, pilots: int = 50, pilot_outputs: int = 20, seed: int = 0,
                          level: float = 0.95) -> pd.DataFrame:
    """Planned against realised width of alpha's interval on published ratings (the outputs are the population).
    Per annotators per output and number of outputs: the width planned from the full data's alpha, the realised
    width (the central `level` range of alpha over `studies` studies of that size drawn from the data), and what
    pilots of `pilot_outputs` random outputs would have planned (mean and standard deviation)."""
    rng = np.random.default_rng(seed)
    r = ratings[ratings["criterion"] == criterion].assign(value=lambda t: t["value"].astype(float))
    units = r["system"].astype(str) + "\x00" + r["item"].astype(str)
    groups = [g.to_numpy() for _, g in r.groupby(units)["value"]]
    alpha, _, _, inflation = pilot_agreement(r, criterion, seed)
    keys = sorted(set(units))
    pilot_fits = []
    for p in range(pilots):
        chosen = set(rng.choice(keys, size=min(pilot_outputs, len(keys)), replace=False))
        try:
            fit = pilot_agreement(r[units.isin(chosen)], criterion, seed + p)
        except BadInput:
            continue
        pilot_fits.append((fit[0], fit[3]))
    rows = []
    for k in annotators:
        for n in outputs:
            realised = central_width(balanced_alpha(drawn_studies(groups, n, k, studies, rng)), level)
            promised = [float(alpha_width(rho, [n], [k], level, f)[0, 0]) for rho, f in pilot_fits]
            rows.append({"criterion": criterion, "alpha": alpha, "inflation": inflation, "annotators": k,
                         "outputs": n, "planned": float(alpha_width(alpha, [n], [k], level, inflation)[0, 0]),
                         "realised": realised,
                         "pilot_planned_mean": float(np.mean(promised)), "pilot_planned_sd": float(np.std(promised))})
    return pd.DataFrame(rows)


def correlation_calibration(human: np.ndarray, metric: np.ndarray, outputs=(25, 50, 100, 200), studies: int = 2000,
                            seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Planned against realised width of the correlation's interval, at the annotators per output the data has:
    `human` and `metric` are per-output scores (the population); studies of n outputs are drawn with replacement and
    the central `level` range of their r is the realised width."""
    rng = np.random.default_rng(seed)
    human, metric = np.asarray(human, dtype=float), np.asarray(metric, dtype=float)
    r = float(np.corrcoef(human, metric)[0, 1])
    inflation = correlation_inflation(pearson_bootstrap(metric, human, seed=seed), len(human), level)
    rows = []
    for n in outputs:
        picked = rng.integers(0, len(human), (studies, n))
        x, y = metric[picked], human[picked]
        x, y = x - x.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            drawn = (x * y).sum(1) / np.sqrt((x * x).sum(1) * (y * y).sum(1))
        rows.append({"r": r, "inflation": inflation, "outputs": n,
                     "planned": float(correlation_width([r], [n], level, inflation)[0, 0]),
                     "realised": central_width(drawn, level)})
    return pd.DataFrame(rows)
