"""Calibration of prediction-powered Bradley-Terry strengths (`analyze --ppi` on comparisons) on real published data.

    python benchmarks/ppi_ranking.py                     # 1,000 studies for each n in 250, 500, 1000
    python benchmarks/ppi_ranking.py --studies 200 --rated 500

The population: the comparisons HANNA's published ratings imply (Chhun et al., COLING 2022): for each of the 96
prompts and each of the 45 pairs of its 10 story generators, the story with the higher mean Coherence rating wins
(equal means: a tie, half a win each way); 4,320 units. The truth: the Bradley-Terry strengths fitted to all of
them. Each study draws, with replacement, n human-judged units and 3,000 judge-only ones, and the judge's verdict on
a unit is either the comparison a metric's scores imply (chrF, the metric whose verdicts agree most often with
Coherence's) or the one another criterion's ratings imply (Engagement, standing in for an LLM judge that tracks the
humans better). The table gives the share of the 10 systems' 95% intervals that cover the truth (human-only and
PPI++), the share of studies whose rank-sets (simultaneous 95%) all hold the true ranks, the mean width of the PPI++
interval relative to the human-only one, and the human-judged units the judge is said to be worth (`effective_n`,
mean over studies) against what it is worth (n times the total variance of the human-only strengths over that of
the PPI++ ones across studies). A study is one process's work; two run at once."""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from datetime import date

import numpy as np
import pandas as pd

from evalstudio.stats.ppi_ranking import resampled_strengths, verdicts_from_scores

try:
    from ppi_calibration import hanna_tables
except ImportError:  # run as a module
    from benchmarks.ppi_calibration import hanna_tables

JUDGES = {"chrF (metric)": ("metric", "chrF"), "Engagement ratings (stand-in judge)": ("rating", "Engagement")}


def population() -> tuple[list, dict[str, tuple]]:
    ratings, metrics = hanna_tables()
    systems = sorted(ratings["system"].unique())

    def verdicts(frame, column):
        return verdicts_from_scores(frame.pivot(index="item", columns="system", values=column)[systems].to_numpy())

    first, second, human = verdicts(ratings, "Coherence")
    judges = {}
    for name, (kind, column) in JUDGES.items():
        source = ratings if kind == "rating" else metrics[metrics["metric"] == column]
        judges[name] = verdicts(source, column if kind == "rating" else "value")[2]
    return systems, {"first": first, "second": second, "human": human, "judges": judges}


def _run(job):
    name, n, big_n, studies, seed = job
    warnings.simplefilter("ignore")
    systems, data = population()
    judge = data["judges"][name]
    agreement = float(np.mean(np.abs(data["human"] - judge) < 0.5))
    start = time.perf_counter()
    result = resampled_strengths(data["first"], data["second"], data["human"], judge, systems, n, big_n, studies,
                                 np.random.default_rng(seed))
    return {"judge": name, "agrees": agreement, **result, "seconds": time.perf_counter() - start}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rated", type=int, nargs="+", default=[250, 500, 1000])
    parser.add_argument("--scored", type=int, default=3000)
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    jobs = [(name, n, args.scored, args.studies, args.seed + i) for i, (name, n) in
            enumerate((name, n) for name in JUDGES for n in args.rated)]
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        rows = pd.DataFrame(list(pool.map(_run, jobs)))
    print(f"HANNA Coherence comparisons (4,320 units of 10 systems), {args.scored} judge-only units and "
          f"{args.studies} studies per row; {date.today()}, {platform.machine()}, Python {platform.python_version()}, "
          f"{time.perf_counter() - start:.0f} s\n")
    print("| judge (agrees with humans) | human-judged units | studies with finite strengths | coverage, human only | coverage, PPI++ | rank-sets "
          "hold, human only | rank-sets hold, PPI++ | PPI++ width / human-only | units the judge is said to be "
          "worth | units it is worth |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows.itertuples():
        print(f"| {r.judge} ({r.agrees:.0%}) | {r.n} | {r.finite:.3f} | {r.covered_classical:.3f} | {r.covered_ppi:.3f} | "
              f"{r.rank_sets_hold_classical:.3f} | {r.rank_sets_hold_ppi:.3f} | {r.width_ratio:.2f} | "
              f"{r.claimed_n:.0f} | {r.realised_n:.0f} |")


if __name__ == "__main__":
    main()
