"""Adaptive collection on published labels: how many labels each routing strategy needs to reach the accuracy a
fixed overlap reaches, and what it does to agreement (evalstudio/stats/replay.py says how a run replays the real
annotators' labels).

    python benchmarks/adaptive.py              # 20 runs per strategy and data set
    python benchmarks/adaptive.py --runs 100

Data sets (all in this repository):
- Circa (tests/data/circa_judgements_1000.tsv): 1,000 question-answer pairs x 5 published judgements (9 labels);
  the annotators are not published, so `ability` cannot run. Target: the agreement with the 5-label labels that a
  fixed overlap of 3 reaches. At least 2 labels per pair (agreement needs them), at most 5.
- SQuALITY (examples/analyze/squality/ratings.csv): 300 summaries x 3 published `overall` ratings (0-100) by 4
  reviewers. Target: the mean absolute difference from the 3-rating means that a fixed overlap of 2 reaches. At
  least 1 rating, at most 3.
- USR PersonaChat (tests/data/usr/pc_usr_data.json): 300 responses x 3 published `Overall` ratings (1-5) by 4
  annotators. Target as for SQuALITY.

Labels to target: the labels a run had collected when it first reached the target (median and the 2.5-97.5
percentiles over runs; rounds of 25 labels for Circa, 10 for the others). Agreement (Krippendorff's alpha,
nominal for Circa): over every label collected when the target was reached, over each task's first `min_overlap`
labels (what `analyze` reports for an adaptive project), with a fixed overlap of the same labels, and over the full
data."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalstudio.stats import replay  # noqa: E402
from evalstudio.stats.agreement import krippendorff_alpha  # noqa: E402


def circa() -> replay.Labels:
    raw = pd.read_csv(ROOT / "tests" / "data" / "circa_judgements_1000.tsv", sep="\t", dtype=str)
    rows = [(i, j, label) for i, labels in enumerate(raw["judgements"]) for j, label in enumerate(labels.split("#"))]
    frame = pd.DataFrame(rows, columns=["task", "annotator", "label"])
    return replay.Labels(frame["task"].to_numpy(), frame["annotator"].to_numpy(),
                         pd.factorize(frame["label"], sort=True)[0], categorical=True)


def squality() -> replay.Labels:
    raw = pd.read_csv(ROOT / "examples" / "analyze" / "squality" / "ratings.csv")
    raw = raw[raw["criterion"] == "overall"]
    return replay.Labels(pd.factorize(raw["item"] + "/" + raw["system"])[0], pd.factorize(raw["annotator"])[0],
                         raw["value"].to_numpy(dtype=float), categorical=False)


def usr() -> replay.Labels:
    data = json.loads((ROOT / "tests" / "data" / "usr" / "pc_usr_data.json").read_text(encoding="utf-8"))
    rows = [(f"{c}/{r}", who, float(value)) for c, context in enumerate(data)
            for r, response in enumerate(context["responses"])
            for who, value in zip(context["annotators"], response["Overall"])]
    frame = pd.DataFrame(rows, columns=["task", "annotator", "value"])
    return replay.Labels(pd.factorize(frame["task"])[0], pd.factorize(frame["annotator"])[0],
                         frame["value"].to_numpy(), categorical=False)


DATA = {  # name -> (loader, strategies, min overlap, fixed overlap whose accuracy is the target, round size)
    "Circa (5 judgements)": (circa, ("uniform", "uncertainty"), 2, 3, 25),
    "SQuALITY overall (3 ratings)": (squality, ("uniform", "uncertainty", "ability"), 1, 2, 10),
    "USR Overall (3 ratings)": (usr, ("uniform", "uncertainty", "ability"), 1, 2, 10),
}


def _alpha(labels: replay.Labels, keep: np.ndarray) -> float:
    level = "nominal" if labels.categorical else "interval"
    try:
        return krippendorff_alpha(labels.tasks[keep], labels.values[keep], level=level)
    except ValueError:
        return float("nan")


def fixed_overlap_keep(labels: replay.Labels, budget: int, rng: np.random.Generator) -> np.ndarray:
    """The labels a fixed overlap collects with `budget` labels (every task its next label in turn)."""
    run = replay.replay(labels, "uniform", rng, min_overlap=1, batch=labels.n_tasks, budget=budget)
    return run.given


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"# Adaptive collection on published labels, {args.runs} runs per strategy "
          f"({date.today()}, {platform.machine()}, Python {platform.python_version()})\n")
    print("| data set | strategy | labels to target | vs fixed overlap | alpha, all labels | alpha, first labels | "
          "alpha, fixed overlap | alpha, full data |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (load, strategies, min_overlap, overlap, batch) in DATA.items():
        labels = load()
        target = replay.uniform_target(labels, overlap, np.random.default_rng(0), runs=50)
        full = _alpha(labels, np.ones(len(labels.tasks), dtype=bool))
        baseline = None
        for strategy in strategies:
            needed, alphas, firsts, fixed = [], [], [], []
            for run_number in range(args.runs):
                rng = np.random.default_rng(1000 + run_number)
                run = replay.replay(labels, strategy, rng, min_overlap=min_overlap, batch=batch, target=target)
                used = replay.labels_to(run, labels, target)
                needed.append(np.nan if used is None else used)
                alphas.append(_alpha(labels, run.given))
                firsts.append(_alpha(labels, run.given & (run.position < min_overlap)))
                fixed.append(_alpha(labels, fixed_overlap_keep(labels, int(run.given.sum()), rng)))
            needed = np.array(needed, dtype=float)
            median = np.nanmedian(needed)
            low, high = np.nanpercentile(needed, [2.5, 97.5])
            if strategy == "uniform":
                baseline = median
            saving = "" if strategy == "uniform" else f"{100 * (median / baseline - 1):+.0f}%"
            missed = int(np.isnan(needed).sum())
            cells = [name, strategy, f"{median:,.0f} [{low:,.0f}, {high:,.0f}]"
                     + (f" ({missed} runs never)" if missed else ""), saving, f"{np.nanmean(alphas):.3f}",
                     f"{np.nanmean(firsts):.3f}" if min_overlap > 1 else "n/a (1 label)",
                     f"{np.nanmean(fixed):.3f}", f"{full:.3f}"]
            print("| " + " | ".join(cells) + " |", flush=True)
        kind = "agreement" if labels.categorical else "mean absolute difference"
        print(f"|  | target: {kind} {target:.3f} (fixed overlap {overlap}) | {overlap * labels.n_tasks:,} at a "
              f"fixed overlap of {overlap} |  |  |  |  |  |", flush=True)
    print("\nAgreement when an adaptive study spends a fixed design's budget (the tilt towards hard tasks grows "
          "with the labels given beyond the minimum overlap):\n")
    print("| data set | labels | alpha, all labels | alpha, first labels | alpha, fixed overlap | alpha, full data |")
    print("|---|---|---|---|---|---|")
    for name, (load, strategies, min_overlap, overlap, batch) in DATA.items():
        labels = load()
        if min_overlap < 2:
            continue
        budget = overlap * labels.n_tasks
        full = _alpha(labels, np.ones(len(labels.tasks), dtype=bool))
        alphas, firsts, fixed = [], [], []
        for run_number in range(args.runs):
            rng = np.random.default_rng(2000 + run_number)
            run = replay.replay(labels, "uncertainty", rng, min_overlap=min_overlap, batch=batch, budget=budget)
            alphas.append(_alpha(labels, run.given))
            firsts.append(_alpha(labels, run.given & (run.position < min_overlap)))
            fixed.append(_alpha(labels, fixed_overlap_keep(labels, budget, rng)))
        spread = lambda v: f"{np.mean(v):.3f} [{np.percentile(v, 2.5):.3f}, {np.percentile(v, 97.5):.3f}]"
        print(f"| {name}, uncertainty | {budget:,} | {spread(alphas)} | {spread(firsts)} | {spread(fixed)} | "
              f"{full:.3f} |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
