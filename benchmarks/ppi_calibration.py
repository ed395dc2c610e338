"""Calibration of `analyze --ppi` on real published data: HANNA (Chhun et al., COLING 2022; 10 story generators x
96 stories, the mean of three MTurk ratings per story and criterion, and the scores of the metrics the paper
discusses).

    python benchmarks/ppi_calibration.py          # 10, 20, 30, 60 rated + 600 scored stories, 2000 studies each
    python benchmarks/ppi_calibration.py --rated 20 --scored 200 --studies 500 --predictor best

For every criterion, with a useless predictor (the best metric's scores shuffled), the metric that correlates best
with it over segments, and a good predictor (the human score plus noise, r about 0.9), and every system: studies are
drawn from that system's published stories (with replacement: the 96 stories are the population, their published
mean the truth), each with --rated stories rated by humans and --scored scored by the metric only. The table gives,
per criterion and over the ten systems, how often the 95% intervals cover the truth (human-only and PPI++), the
mean width of the PPI++ interval relative to the human-only one, and the human labels the metric is said to be worth
(`effective_n` of ppi_systems.csv, the mean over studies) against what it is worth (n times the variance of the
human-only estimates over that of the PPI++ ones across the studies)."""

from __future__ import annotations

import argparse
import importlib.util
import platform
import tempfile
import time
from datetime import date
from pathlib import Path

import pandas as pd

from evalstudio.exporters.analyses.ppi import calibration

HANNA = Path(__file__).resolve().parents[1] / "examples" / "analyze" / "hanna"
CRITERIA = ("Relevance", "Coherence", "Empathy", "Surprise", "Engagement", "Complexity")


def hanna_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    spec = importlib.util.spec_from_file_location("hanna_prepare", HANNA / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as folder:
        module.main(["-o", folder])
        return pd.read_csv(Path(folder) / "ratings.csv"), pd.read_csv(Path(folder) / "metrics.csv")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rated", type=int, nargs="+", default=[10, 20, 30, 60])
    parser.add_argument("--scored", type=int, default=600)
    parser.add_argument("--studies", type=int, default=2000)
    parser.add_argument("--predictor", nargs="+", default=["useless", "best", "good"],
                        choices=["useless", "best", "good"])
    parser.add_argument("--seed", type=int, default=2022)
    args = parser.parse_args(argv)
    ratings, metrics = hanna_tables()
    start = time.perf_counter()
    tables = []
    for predictor in args.predictor:
        for rated in args.rated:
            rows = calibration(ratings, metrics, CRITERIA, rated, args.scored, args.studies, args.seed, predictor)
            tables.append(rows.assign(predictor=predictor, rated=rated))
    rows = pd.concat(tables, ignore_index=True)
    print(f"HANNA, {args.scored} scored stories per study, {args.studies} studies per system and size (10 systems, "
          f"6 criteria); 95% intervals (t, lengthened on the skewed side: Hall 1992); {date.today()}, "
          f"{platform.machine()}, Python {platform.python_version()}, {time.perf_counter() - start:.1f} s\n")
    print("| predictor (segment r) | rated per system | coverage, human only: mean [lowest criterion, lowest "
          "system] | coverage, PPI++: mean [lowest criterion, lowest system] | PPI++ width / human-only | labels the "
          "predictor is said to be worth | labels it is worth |")
    print("|---|---:|---|---|---:|---:|---:|")
    for (predictor, rated), g in rows.groupby(["predictor", "rated"], sort=False):
        by_criterion = g.groupby("criterion")[["covered_classical", "covered_ppi"]].mean()
        print(f"| {predictor} ({g.r.min():.2f}-{g.r.max():.2f}) | {rated} | {g.covered_classical.mean():.3f} "
              f"[{by_criterion.covered_classical.min():.3f}, {g.covered_classical.min():.3f}] | "
              f"{g.covered_ppi.mean():.3f} [{by_criterion.covered_ppi.min():.3f}, {g.covered_ppi.min():.3f}] | "
              f"{g.width_ratio.mean():.2f} | {g.claimed_n.mean():.1f} | {g.realised_n.mean():.1f} |")


if __name__ == "__main__":
    main()
