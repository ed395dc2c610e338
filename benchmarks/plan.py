"""`evalstudio plan` at the size the issue asks for: a pilot of 100 items x 5 systems x 3 annotators, 1,000
simulated studies per cheapest design, every target at once (a difference between two systems, alpha's and a
metric's correlation's interval width), from the file to the report folder, as the command runs it.

    python benchmarks/plan.py                  # 100 items x 5 systems x 3 annotators, 1000 simulations
    python benchmarks/plan.py --items 300 --simulations 5000

The pilot is drawn like benchmarks/analysis.py's data (latent quality + annotator bias and noise, 1-5 ratings; a
metric that is a noisy copy of the latent quality). Each run is timed once (wall clock, in this process, after the
command's imports), then the whole command once more in a fresh process (imports included)."""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner


def make_pilot(folder: Path, items: int, systems: int, annotators: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    z = 3 + rng.normal(0, 0.4, (systems, 1)) + rng.normal(0, 0.7, (1, items)) + rng.normal(0, 0.5, (systems, items))
    s, i = np.meshgrid(np.arange(systems), np.arange(items), indexing="ij")
    frames = [pd.DataFrame({"system": [f"S{x}" for x in s.ravel()], "item": i.ravel(), "annotator": f"A{a + 1}",
                            "value": np.clip(np.rint(z + rng.normal(0.2 * a - 0.2, 0.6, z.shape)), 1, 5)
                            .ravel().astype(int)}) for a in range(annotators)]
    pd.concat(frames).to_csv(folder / "ratings.csv", index=False)
    pd.DataFrame({"system": [f"S{x}" for x in s.ravel()], "item": i.ravel(), "metric": "m",
                  "value": np.round(z + rng.normal(0, 0.5, z.shape), 4).ravel()}).to_csv(folder / "metrics.csv",
                                                                                          index=False)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--systems", type=int, default=5)
    parser.add_argument("--annotators", type=int, default=3)
    parser.add_argument("--simulations", type=int, default=1000)
    args = parser.parse_args(argv)
    from evalstudio.cli import app

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_pilot(folder, args.items, args.systems, args.annotators)
        command = ["plan", str(folder / "ratings.csv"), "--delta", "0.2", "--system", "S0", "--system", "S1",
                   "--agreement-width", "0.1", "--correlation-width", "0.1", "--metrics", str(folder / "metrics.csv"),
                   "--metric", "m", "--simulations", str(args.simulations), "-o", str(folder / "plan")]
        start = time.perf_counter()
        result = CliRunner().invoke(app, command)
        in_process = time.perf_counter() - start
        if result.exit_code != 0:
            raise SystemExit(result.output)
        start = time.perf_counter()
        subprocess.run([str(Path(sys.executable).with_name("evalstudio")), *command[:-1], str(folder / "again")],
                       check=True, capture_output=True)
        fresh = time.perf_counter() - start
    print(f"evalstudio plan, pilot of {args.items} items x {args.systems} systems x {args.annotators} annotators "
          f"({args.items * args.systems * args.annotators:,} ratings), {args.simulations} simulations per cheapest "
          f"design, every target; {date.today()}, {platform.machine()}, Python {platform.python_version()}\n")
    print("| run | seconds |")
    print("|---|---:|")
    print(f"| in this process (after imports) | {in_process:.1f} |")
    print(f"| a fresh `evalstudio plan` process (imports included) | {fresh:.1f} |")


if __name__ == "__main__":
    main()
