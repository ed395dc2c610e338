"""Krippendorff's alpha: evalstudio's O(N) kernel vs the `krippendorff` package (time and peak memory).

    python benchmarks/agreement.py            # full table (3x100k and 5x1M ratings)
    python benchmarks/agreement.py --quick    # smaller sizes

Time is the median of 3 runs; peak memory is measured with tracemalloc (NumPy reports its buffers to it), around the call only; each call
gets the same long-format input (unit ids + values; 30% missing). The krippendorff package builds a
units x V x V array, so cases where that would exceed --max-gb are skipped and the estimate is shown
(`--max-gb 20` runs the 3x100k decimal case too: about 18.6 GB and 76 s on a 2-core, 24 GB machine).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np

from evalstudio.stats.agreement import krippendorff_alpha

SCALES = {
    "interval 1-5": ("interval", lambda rng, n: rng.integers(1, 6, n).astype(float)),
    "ordinal 1-5": ("ordinal", lambda rng, n: rng.integers(1, 6, n).astype(float)),
    "nominal 5 labels": ("nominal", lambda rng, n: rng.integers(0, 5, n).astype(float)),
    "interval 1-10 step 0.1": ("interval", lambda rng, n: np.round(rng.integers(10, 101, n) / 10, 1)),
}


def measure(func, repeat: int = 3):
    """(value, median seconds, peak GB) over `repeat` runs; timing runs without tracemalloc, then one traced run."""
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    func()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return value, float(np.median(times)), peak / 2**30


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3x10k and 5x100k instead of 3x100k and 5x1M")
    parser.add_argument("--max-gb", type=float, default=8.0, help="skip krippendorff when its V x V array would exceed this")
    args = parser.parse_args()
    import krippendorff

    sizes = [(3, 10_000), (5, 100_000)] if args.quick else [(3, 100_000), (5, 1_000_000)]
    rows = []
    for raters, units in sizes:
        for name, (level, make) in SCALES.items():
            rng = np.random.default_rng(0)
            truth = make(rng, units)
            data = np.where(rng.random((raters, units)) < 0.7, truth, make(rng, raters * units).reshape(raters, units))
            data[rng.random((raters, units)) < 0.3] = np.nan
            unit_ids = np.tile(np.arange(units), raters)
            values = data.ravel()
            ours, t_ours, m_ours = measure(lambda: krippendorff_alpha(unit_ids, values, level))
            domain = np.unique(values[~np.isnan(values)]).size
            need_gb = 3 * units * domain * domain * 8 / 2**30  # ~3 float arrays of units x V x V (measured)
            if need_gb > args.max_gb:
                theirs, t_theirs, m_theirs, note = np.nan, np.nan, np.nan, f"skipped: needs ~{need_gb:.0f} GB"
            else:
                theirs, t_theirs, m_theirs = measure(lambda: krippendorff.alpha(reliability_data=data, level_of_measurement=level))
                note = f"|diff| = {abs(ours - theirs):.1e}"
            rows.append((f"{raters}x{units:,}", name, t_ours, m_ours, t_theirs, m_theirs, note))

    header = f"{'ratings':>12} {'scale':<24} {'ours s':>8} {'ours GB':>8} {'kripp s':>8} {'kripp GB':>9}  note"
    print(header)
    print("-" * len(header))
    for size, name, t1, m1, t2, m2, note in rows:
        fmt = lambda v, p: "-" if np.isnan(v) else f"{v:.{p}f}"
        print(f"{size:>12} {name:<24} {fmt(t1, 3):>8} {fmt(m1, 3):>8} {fmt(t2, 3):>8} {fmt(m2, 3):>9}  {note}")


if __name__ == "__main__":
    main()
