"""`evalstudio analyze` at scale: 1M ratings x 10 metrics, from files to the report folder, stage by stage.

    python benchmarks/analysis.py            # 20 systems x 16,667 items x 3 annotators = 1,000,020 ratings, 10 metrics
    python benchmarks/analysis.py --quick    # 100k ratings

The data are drawn like tests/data/metaeval's synthetic set (latent quality + annotator bias and noise; metrics are
noisy copies of the latent quality), written as CSV, then read and analysed as `evalstudio analyze` does, with its
defaults: 1000 bootstrap resamples for every CI and 1000 permutations for PERM-BOTH (all 45 metric pairs) and soft
pairwise accuracy. The tables of the ratings alone (agreement, aggregated labels, system ranking) are computed on a
thread beside the meta-evaluation, as the command does; `--parts` also times each part alone. Each stage is timed
once (wall clock); the peak memory is the process's maximum resident set.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.base.memory import use_returning_allocator
from evalstudio.exporters.analyses import metaeval
from evalstudio.exporters.tables.aggregated import aggregate
from evalstudio.readers.ratings import read_metrics, read_ratings
from evalstudio.readers.spec import CriterionSpec, Spec


def make_data(folder: Path, systems: int, items: int, annotators: int, metrics: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = 3 + rng.normal(0, 0.6, (systems, 1)) + rng.normal(0, 0.8, (1, items)) + rng.normal(0, 0.5, (systems, items))
    sys_idx, item_idx = np.meshgrid(np.arange(systems), np.arange(items), indexing="ij")
    frames = []
    for a in range(annotators):
        rating = np.clip(np.rint(z + rng.normal(0.2 * a - 0.2, 0.5 + 0.2 * a, z.shape)), 1, 5)
        frames.append(pd.DataFrame({"system": [f"S{s}" for s in sys_idx.ravel()], "item": item_idx.ravel(),
                                    "annotator": f"A{a + 1}", "value": rating.ravel().astype(int)}))
    ratings = pd.concat(frames, ignore_index=True)
    ratings.to_csv(folder / "ratings.csv", index=False)
    scores = []
    for m in range(metrics):
        noise = 0.3 + 0.15 * m
        scores.append(pd.DataFrame({"system": [f"S{s}" for s in sys_idx.ravel()], "item": item_idx.ravel(),
                                    "metric": f"m{m:02d}", "value": np.round(z + rng.normal(0, noise, z.shape), 4).ravel()}))
    pd.concat(scores, ignore_index=True).to_csv(folder / "metrics.csv", index=False)
    return len(ratings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100k ratings instead of 1M")
    parser.add_argument("--parts", action="store_true", help="also time each part of the analysis alone")
    args = parser.parse_args()
    systems, items, annotators, n_metrics = (20, 1_667, 3, 10) if args.quick else (20, 16_667, 3, 10)
    spec = Spec(name="benchmark", criteria={"quality": CriterionSpec(scale="interval", min=1, max=5)})
    use_returning_allocator()  # as the command does
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # the data are made in a child process, so that the peak memory below is the analysis's alone
        maker = multiprocessing.get_context("fork").Process(target=make_data,
                                                            args=(folder, systems, items, annotators, n_metrics))
        maker.start()
        maker.join()
        n = systems * items * annotators
        stages, part_times = [], []

        def stage(name, func):
            start = time.perf_counter()
            value = func()
            stages.append((name, time.perf_counter() - start))
            return value

        tidy, full = stage("read ratings (CSV, validated)", lambda: read_ratings(folder / "ratings.csv", spec))
        scores = stage("read metrics (CSV, validated)", lambda: read_metrics(folder / "metrics.csv", full, ["quality"]))
        tables = stage("every table, as the command computes them (below)", lambda: metaeval.analyze(tidy, full, scores))
        stage("report: CSVs + index.html", lambda: metaeval.write_analysis(tables, "benchmark", folder / "out"))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if args.parts:  # each part alone, one after the other (the command runs the first three beside the rest)
            parts = [
                ("agreement: alpha + 1000-bootstrap CI, AC, ICC, leave-one-out", lambda: metaeval.agreement(tidy, full, 1000)),
                ("aggregated labels (with posteriors) where the scale allows",
                 lambda: aggregate(tidy, full, metaeval.Reasons())),
                ("system ranking, 1000 paired bootstraps", lambda: metaeval.system_ranking(tidy, full, 1000)),
                ("meta-evaluation: correlations + CIs, accuracies, SPA, PERM-BOTH x 45 pairs",
                 lambda: metaeval.meta_evaluation(tidy, scores, full, 1000, 1000)),
                ("judge checks", lambda: metaeval.judge_checks(tidy, scores, full))]
            for name, func in parts:
                start = time.perf_counter()
                func()
                part_times.append((name, time.perf_counter() - start))
    total = sum(t for _, t in stages)
    print(f"{n:,} ratings ({systems} systems x {items:,} items x {annotators} annotators), {n_metrics} metrics; "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}; peak memory "
          f"{peak:,.0f} MB\n")
    print("| stage | seconds |\n|---|---:|")
    for name, seconds in stages:
        print(f"| {name} | {seconds:.1f} |")
    print(f"| **total** | **{total:.1f}** |")
    if part_times:
        print("\n| part, alone | seconds |\n|---|---:|")
        for name, seconds in part_times:
            print(f"| {name} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
