"""Calibration of prediction-powered Bradley-Terry strengths (`analyze --ppi` on comparisons) on real published
data, per system, as benchmarks/ppi_calibration.py calibrates the means.

    nice python benchmarks/ppi_ranking.py                  # 10, 20, 30, 60 comparisons a pair, 2000 studies a cell
    python benchmarks/ppi_ranking.py --studies 300 --data usr --rated 10

The populations: the comparisons the published ratings imply (`verdicts_from_scores`: on every item, the system
rated higher wins; equal ratings tie, half a win each way) of HANNA (Chhun et al., COLING 2022; 10 story generators,
96 prompts, 45 pairs: 4,320 units a criterion) and USR PersonaChat (Mehri & Eskenazi, ACL 2020; 5 systems, 60
contexts, 10 pairs: 600 units), with the criteria and predictors of benchmarks/ppi_calibration.py: the judge's
verdicts are the comparisons a useless predictor (the real one's scores shuffled among a system's items), the real
predictor (HANNA: the metric that correlates best with the criterion; USR: unigram F1 and the other criteria) or a
good one (the human score plus noise, r about 0.9) imply. SQuALITY (Wang et al., EMNLP 2022; `--data squality`)
gives comparisons the same way, but its human-written responses are rated above both models' on every one of the
100 questions: that system never loses, its strength is infinite (Hunter 2004), and there is no truth to cover;
the run says so and goes on. The truth: the human-only Bradley-Terry fit of the whole population. Each study has
`rated` human-judged comparisons of every pair, two ways: an unlimited population (drawn with replacement, and
200 - rated judge-only ones a pair) and a finite set (the default of the means: the population's units are the
study's, `rated` of each pair's drawn without replacement and judged by humans, the rest by the judge only; USR has
60 a pair, so not at 60). Per system the share of studies whose 95% interval covers its true strength (human only,
PPI++), the share whose rank-sets all hold the true ranks, the share with finite strengths (analyze refuses the
others), and the units the judge is said to be worth (mean effective_n) against what it was worth across the
studies. Jobs (a data set's criterion and predictor) run in parallel over the cores."""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import date

import numpy as np
import pandas as pd

from evalstudio.stats.ppi_ranking import resampled_strengths, verdicts_from_scores

try:
    from ppi_calibration import STUDY, matrices, predictors
except ImportError:  # run as a module
    from benchmarks.ppi_calibration import STUDY, matrices, predictors


def cells(job: tuple) -> list[dict]:
    """One data set's criterion and predictor: every size and population."""
    data, criterion, name, systems, h, p, sizes, studies, seed = job
    rng = np.random.default_rng(seed)
    first, second, human = verdicts_from_scores(h.T)  # items x systems
    judge = verdicts_from_scores(p.T)[2]
    agrees = float(np.mean(np.abs(human - judge) < 0.5))
    rows = []
    for rated in sizes:
        for finite in (True, False):
            if finite and rated >= h.shape[1]:
                continue
            try:
                r = resampled_strengths(first, second, human, judge, len(systems), rated, STUDY - rated, studies, rng,
                                        finite=finite)
            except ValueError as e:
                print(f"{data}, {criterion}, {name}: {e}", file=sys.stderr)
                return rows
            low_c, low_p = int(np.argmin(r["covered_classical"])), int(np.argmin(r["covered_ppi"]))
            rows.append({"data": data, "criterion": criterion, "predictor": name, "agrees": agrees,
                         "systems": len(systems), "rated": rated, "population": "finite" if finite else "infinite",
                         "finite": r["finite"], "covered_classical": r["covered_classical"][low_c],
                         "system_classical": systems[low_c], "covered_ppi": r["covered_ppi"][low_p],
                         "system_ppi": systems[low_p], "rank_sets_hold_classical": r["rank_sets_hold_classical"],
                         "rank_sets_hold_ppi": r["rank_sets_hold_ppi"], "width_ratio": float(r["width_ratio"].mean()),
                         "claimed_n": r["claimed_n"], "realised_n": r["realised_n"]})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rated", type=int, nargs="+", default=[10, 20, 30, 60], help="comparisons a pair")
    parser.add_argument("--studies", type=int, default=2000)
    parser.add_argument("--data", nargs="+", default=["hanna", "usr"], choices=["hanna", "usr", "squality"])
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--csv", help="every cell into this file")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    jobs = []
    for data in args.data:
        for d in matrices(data):
            for name, h, p in predictors(d, rng):
                jobs.append((data, d["criterion"], name, [str(s) for s in d["human"].index], h, p, args.rated,
                             args.studies, int(rng.integers(2 ** 31))))
    with ProcessPoolExecutor(args.workers) as pool:
        rows = pd.DataFrame([row for part in pool.map(cells, jobs) for row in part])
    if args.csv:
        rows.to_csv(args.csv, index=False)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{', '.join(args.data)}: {args.studies} studies per cell; 95% intervals (normal, ppi-python's), PPI++ "
          f"Bradley-Terry; {date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {time.perf_counter() - start:.0f} s ({used.ru_utime + used.ru_stime:.0f} s "
          f"of CPU in {args.workers} processes; load average {os.getloadavg()[0]:.1f} at the end)", file=sys.stderr)
    report(rows)


def report(rows: pd.DataFrame) -> None:
    """Per data set, criterion, predictor and population: the lowest system's coverage at each size, named."""
    for population in ("finite", "infinite"):
        part = rows[rows.population == population]
        print(f"\n{population} population: the lowest coverage of a system's strength [that system], human only / "
              "PPI++; the rank-sets; the units the judge is said to be worth / worth\n")
        print("| data, criterion | judge (agrees with humans) | a pair | finite strengths | lowest system, human "
              "only | lowest system, PPI++ | rank-sets hold, human only / PPI++ | PPI++ width / human-only (median) | "
              "effective_n: said / worth |")
        print("|---|---|---:|---:|---|---|---|---:|---|")
        for r in part.itertuples():
            print(f"| {r.data}, {r.criterion} | {r.predictor} ({r.agrees:.0%}) | {r.rated} | {r.finite:.3f} | "
                  f"{r.covered_classical:.3f} [{r.system_classical}] | {r.covered_ppi:.3f} [{r.system_ppi}] | "
                  f"{r.rank_sets_hold_classical:.3f} / {r.rank_sets_hold_ppi:.3f} | {r.width_ratio:.2f} | "
                  f"{r.claimed_n:.0f} / {r.realised_n:.0f} |")
    print("\nOver everything: the lowest coverage of any system at each size, the lowest share of studies with "
          "finite strengths, and effective_n's largest overstatement\n")
    print("| population | a pair | human only | PPI++ | rank-sets, lowest | finite strengths, lowest | effective_n, "
          "most overstated |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for (population, rated), g in rows.groupby(["population", "rated"]):
        ratio = g.claimed_n / g.realised_n
        high = g.loc[ratio.idxmax()]
        print(f"| {population} | {rated} | {g.covered_classical.min():.3f} | {g.covered_ppi.min():.3f} | "
              f"{min(g.rank_sets_hold_classical.min(), g.rank_sets_hold_ppi.min()):.3f} | {g.finite.min():.3f} | "
              f"{ratio.max() - 1:+.0%} [{high.data}, {high.criterion}, {high.predictor}] |")


if __name__ == "__main__":
    main()
