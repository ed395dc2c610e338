"""Calibration of `evalstudio plan` on published ratings: is the power a plan promises the power a study of that size
has? SQuALITY's human evaluation (Wang et al., EMNLP 2022: 100 questions, 3 systems, the same 3 of 4 reviewers
rating every system's answer, 0-100) and USR's PersonaChat ratings (Mehri & Eskenazi, ACL 2020: 60 contexts,
5 responses each, 3 annotators, Overall 1-5).

    python benchmarks/plan_calibration.py                       # 2000 studies per design, 50 pilots of 20 items
    python benchmarks/plan_calibration.py --simulations 500 --pilots 20

The items are the population and the full data's mean difference between the two systems the effect to detect.
For each design and number of annotators per item: the items the full data's variance components plan for power
0.8, the power planned there, the power realised by studies of that size drawn from the published ratings (items
with replacement, each item's annotators without), and what plans made from pilots of 20 random items promise for
the same size (mean and standard deviation over the pilots). Then the interval-width targets (`plan
--agreement-width`, `--correlation-width`): the width planned against the central 95% range of the estimates over
studies of that size drawn from the data."""

from __future__ import annotations

import argparse
import platform
import time
from datetime import date
from pathlib import Path

import pandas as pd

from evalstudio.exporters.analyses.plan import calibration
from evalstudio.readers.ratings import read_ratings
from evalstudio.readers.spec import read_spec

ROOT = Path(__file__).resolve().parents[1]
SQUALITY = ROOT / "examples" / "analyze" / "squality" / "ratings.csv"
USR = ROOT / "tests" / "data" / "usr" / "pc_usr_data.json"


def usr_ratings() -> pd.DataFrame:
    return read_ratings(USR, read_spec(USR.with_name("overall.yaml")))[0]


CASES = [("SQuALITY", lambda: read_ratings(SQUALITY)[0], criterion, ("bart", "bart-dpr"))
         for criterion in ("overall", "correctness", "selection")] + [
    ("USR PersonaChat", usr_ratings, "Overall", pair)
    for pair in (("Language Model", "Seq2Seq"), ("Original Ground Truth", "New Human Generated"))]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=2000)
    parser.add_argument("--pilots", type=int, default=50)
    parser.add_argument("--pilot-items", type=int, default=20)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    tables = []
    for name, load, criterion, pair in CASES:
        rows = calibration(load(), criterion, pair, simulations=args.simulations, pilots=args.pilots,
                           pilot_items=args.pilot_items)
        tables.append(rows.assign(data=name))
    result = pd.concat(tables, ignore_index=True)
    print(f"{args.simulations} studies per design, {args.pilots} pilots of {args.pilot_items} items; {date.today()}, "
          f"{platform.machine()}, Python {platform.python_version()}, {time.perf_counter() - start:.0f} s\n")
    print("| data | criterion | difference | design | annotators | items | planned | realised | pilots promise |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for r in result.itertuples():
        print(f"| {r.data} | {r.criterion} | {r.systems}: {r.delta:.2f} | {r.design} | {r.annotators} | {r.items} | "
              f"{r.planned:.3f} | {r.realised:.3f} | {r.pilot_planned_mean:.2f} ± {r.pilot_planned_sd:.2f} |")
    widths(args)


def widths(args) -> None:
    """The interval-width targets: alpha on SQuALITY and USR (2 and 3 annotators per output), the correlation on
    HANNA (each criterion with the metric that correlates most with it over stories)."""
    from ppi_calibration import CRITERIA, hanna_tables

    from evalstudio.exporters.analyses.precision import agreement_calibration, correlation_calibration

    start = time.perf_counter()
    agreement = [agreement_calibration(load(), criterion, studies=args.simulations, pilots=args.pilots,
                                       pilot_outputs=args.pilot_items).assign(data=name)
                 for name, load, criterion in [("SQuALITY", CASES[0][1], "overall"),
                                               ("SQuALITY", CASES[0][1], "correctness"),
                                               ("USR PersonaChat", usr_ratings, "Overall")]]
    print(f"\nWidth of Krippendorff's alpha's 95% interval: planned, and the central 95% range of alpha over "
          f"{args.simulations} studies of that size drawn from the data; pilots of {args.pilot_items} outputs "
          f"({time.perf_counter() - start:.0f} s)\n")
    print("| data | criterion | alpha | variance inflation | annotators | outputs | planned | realised | "
          "pilots promise |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in pd.concat(agreement, ignore_index=True).itertuples():
        print(f"| {r.data} | {r.criterion} | {r.alpha:.3f} | {r.inflation:.2f} | {r.annotators} | {r.outputs} | "
              f"{r.planned:.3f} | {r.realised:.3f} | {r.pilot_planned_mean:.3f} ± {r.pilot_planned_sd:.3f} |")
    ratings, metrics = hanna_tables()
    print("\nWidth of the metric-human correlation's 95% interval on HANNA (each story's mean of three ratings)\n")
    print("| criterion | metric | r | variance inflation | outputs | planned | realised |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for criterion in CRITERIA:
        table = metrics.pivot_table(index=["system", "item"], columns="metric", values="value").join(
            ratings.set_index(["system", "item"])[criterion])
        best = table.drop(columns=criterion).corrwith(table[criterion]).abs().idxmax()
        rows = correlation_calibration(table[criterion].to_numpy(), table[best].to_numpy(), studies=args.simulations)
        for r in rows.itertuples():
            print(f"| {criterion} | {best} | {r.r:.3f} | {r.inflation:.2f} | {r.outputs} | {r.planned:.3f} | "
                  f"{r.realised:.3f} |")


if __name__ == "__main__":
    main()
