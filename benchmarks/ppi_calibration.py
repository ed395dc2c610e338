"""Calibration of `analyze --ppi` on real published data: HANNA (Chhun et al., COLING 2022; 10 story generators x
96 stories, the mean of three MTurk ratings per story and criterion, and the scores of the metrics the paper
discusses).

    python benchmarks/ppi_calibration.py                 # 60 rated + 600 scored stories per study, 2000 studies
    python benchmarks/ppi_calibration.py --rated 20 --scored 200 --studies 500

For every criterion, with the metric that correlates best with it over segments, and every system: studies are
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

from evalstudio.exporters.ppi import calibration

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
    parser.add_argument("--rated", type=int, default=60)
    parser.add_argument("--scored", type=int, default=600)
    parser.add_argument("--studies", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=2022)
    args = parser.parse_args(argv)
    ratings, metrics = hanna_tables()
    start = time.perf_counter()
    rows = calibration(ratings, metrics, CRITERIA, args.rated, args.scored, args.studies, args.seed)
    result = rows.groupby(["criterion", "metric"], sort=False).agg(
        r=("r", "first"), covered_classical=("covered_classical", "mean"), covered_ppi=("covered_ppi", "mean"),
        width_ratio=("width_ratio", "mean"), claimed_n=("claimed_n", "mean"), realised_n=("realised_n", "mean"))
    print(f"HANNA, {args.rated} rated + {args.scored} scored stories per study, {args.studies} studies per system "
          f"(10 systems); {date.today()}, {platform.machine()}, Python {platform.python_version()}, "
          f"{time.perf_counter() - start:.1f} s\n")
    print("| criterion | metric (segment r) | coverage, human only | coverage, PPI++ | PPI++ width / human-only "
          "| labels the metric is said to be worth | labels it is worth |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (criterion, metric), r in result.iterrows():
        print(f"| {criterion} | {metric} ({r.r:.2f}) | {r.covered_classical:.3f} | {r.covered_ppi:.3f} | "
              f"{r.width_ratio:.2f} | {r.claimed_n:.1f} | {r.realised_n:.1f} |")


if __name__ == "__main__":
    main()
