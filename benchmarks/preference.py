"""Bradley-Terry strengths with bootstrap intervals (`evalstudio.stats.preference.bradley_terry`) at Chatbot Arena's
scale, against choix's MM fit of the point estimate, and the other preference statistics.

    python benchmarks/preference.py                 # 100,000 comparisons of 20 systems, 1,000 resamples
    python benchmarks/preference.py --comparisons 10000 --resamples 200

Time is the median of 3 runs. The comparisons come from a Bradley-Terry model with known strengths, 10% ties.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from evalstudio.stats import preference as pref


def comparisons(n: int, systems: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    true = np.exp(rng.normal(0, 1, systems))
    left = rng.integers(0, systems, n)
    right = (left + rng.integers(1, systems, n)) % systems
    outcome = np.where(rng.random(n) < true[left] / (true[left] + true[right]), "left", "right")
    outcome = np.where(rng.random(n) < 0.1, "tie", outcome)
    return pd.DataFrame({"left": [f"s{i:02d}" for i in left], "right": [f"s{i:02d}" for i in right],
                         "outcome": outcome})


def median_seconds(func, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", type=int, default=100_000)
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    frame = comparisons(args.comparisons, args.systems)
    rows = [("Bradley-Terry, point estimate", median_seconds(lambda: pref.bradley_terry(frame, n_boot=0))),
            (f"Bradley-Terry + {args.resamples} bootstrap resamples",
             median_seconds(lambda: pref.bradley_terry(frame, n_boot=args.resamples))),
            ("win rates with Wilson intervals", median_seconds(lambda: pref.win_rates(frame))),
            ("online Elo (Arena's update)", median_seconds(lambda: pref.online_elo(frame))),
            ("position bias (binomial test)", median_seconds(lambda: pref.position_bias(frame)))]
    try:
        import choix

        index = {s: i for i, s in enumerate(sorted(set(frame["left"]) | set(frame["right"])))}
        data = [(index[a], index[b]) if o == "left" else (index[b], index[a])
                for a, b, o in frame.itertuples(index=False) if o != "tie"]
        rows.append(("choix.mm_pairwise, point estimate (no ties)",
                     median_seconds(lambda: choix.mm_pairwise(len(index), data))))
    except ImportError:
        pass
    print(f"{args.comparisons:,} comparisons of {args.systems} systems (10% ties); median of 3 runs")
    print(f"{'statistic':<48} {'seconds':>8}")
    for name, seconds in rows:
        print(f"{name:<48} {seconds:>8.2f}")


if __name__ == "__main__":
    main()
