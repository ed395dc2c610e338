"""The skewness factor of the finite-population interval (`analyze --ppi`, `--population finite`), checked by
simulation on the shipped data: n of a system's M published ratings drawn without replacement, many times.

    nice python benchmarks/finite_skewness.py                # 400,000 samples per system and size
    python benchmarks/finite_skewness.py --samples 50000

For each data set's most skewed system (HANNA, USR, SQuALITY as benchmarks/ppi_calibration.py reads them; mu3 the
system's third central moment, S^2 its variance with M - 1, f = n / M) it prints, simulated against the formula:

1. the third central moment of the sample mean, against (M - n)(M - 2n) / ((M - 1)(M - 2)) mu3 / n^2;
2. the covariance of the sample mean with the sample variance (n - 1), against (M - n) M / ((M - 1)(M - 2)) mu3 / n
   (both exact: tests/test_ppi.py checks them by enumerating every sample of a small set);
3. the third cumulant of the studentised mean T = (mean - mu) / (sqrt(1 - f) s / sqrt(n)) drawn without
   replacement over that of T = (mean - mu) / (s / sqrt(n)) drawn with replacement, against the factor evalstudio
   puts on Hall's g without replacement, (3 sqrt(1 - f) - (1 - 2f) / sqrt(1 - f)) / 2, and against the mean's own
   factor (1 - 2f) / sqrt(1 - f); and the leading term -2g (g = the factor x gamma / sqrt(n), gamma = mu3 / S^3)
   beside the simulated cumulant. Samples whose ratings are all equal (s = 0, T undefined) are left out of 3 and
   counted (drawn without replacement; with replacement they are left out too). The derivation is in docs/analyze.md."""

from __future__ import annotations

import argparse
import os
import platform
import sys
from datetime import date

import numpy as np

try:
    from ppi_calibration import matrices
except ImportError:  # run as a module
    from benchmarks.ppi_calibration import matrices


def factor(f: float) -> float:
    """The large-set form of c, the factor evalstudio puts on Hall's quadratic term without replacement
    (`without_replacement_factors` in evalstudio/stats/small_sample.py gives it exactly for n of M)."""
    return (3 * np.sqrt(1 - f) - (1 - 2 * f) / np.sqrt(1 - f)) / 2


def _k3(t: np.ndarray) -> tuple[float, float]:
    """The third central moment of `t` and its standard error."""
    cubes = (t - t.mean()) ** 3
    return float(cubes.mean()), float(cubes.std() / np.sqrt(len(t)))


def simulate(x: np.ndarray, n: int, samples: int, rng) -> dict[str, float]:
    """Moments of the mean, its covariance with the variance and T's third cumulant over `samples` draws without
    replacement, and T's third cumulant over as many drawn with replacement (T without the 1 - f)."""
    big_m = len(x)
    mu, centred = x.mean(), x - x.mean()
    mu3, s2 = np.mean(centred ** 3), centred.var() * big_m / (big_m - 1)
    f = n / big_m
    third, cov, t_values, t_replaced, degenerate = [], [], [], [], 0
    for chunk in np.array_split(np.arange(samples), max(1, samples // 20000)):
        picked = np.argsort(rng.random((len(chunk), big_m)), axis=1)[:, :n]
        values = x[picked]
        mean, var = values.mean(1), values.var(1, ddof=1)
        third.append((mean - mu) ** 3)
        cov.append((mean - mu) * (var - s2))
        keep = var > 1e-9 * s2  # all equal (up to rounding: a mean of three ratings is not exact in binary)
        degenerate += int((~keep).sum())
        t_values.append((mean[keep] - mu) / np.sqrt((1 - f) * var[keep] / n))
        values = x[rng.integers(0, big_m, (len(chunk), n))]
        mean, var = values.mean(1), values.var(1, ddof=1)
        keep = var > 1e-9 * s2
        t_replaced.append((mean[keep] - mu) / np.sqrt(var[keep] / n))
    third, cov = np.concatenate(third), np.concatenate(cov)
    gamma = mu3 / s2 ** 1.5
    (k3_t, k3_t_se), (k3_r, k3_r_se) = _k3(np.concatenate(t_values)), _k3(np.concatenate(t_replaced))
    return {"n": n, "f": f, "third": third.mean(), "third_se": third.std() / np.sqrt(len(third)),
            "third_formula": (big_m - n) * (big_m - 2 * n) / ((big_m - 1) * (big_m - 2)) * mu3 / n ** 2,
            "cov": cov.mean(), "cov_se": cov.std() / np.sqrt(len(cov)),
            "cov_formula": (big_m - n) * big_m / ((big_m - 1) * (big_m - 2)) * mu3 / n,
            "k3_t": k3_t, "k3_t_se": k3_t_se, "k3_r": k3_r, "k3_r_se": k3_r_se,
            "evalstudio": -2 * factor(f) * gamma / np.sqrt(n),
            "degenerate": degenerate / samples}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=400_000)
    parser.add_argument("--seed", type=int, default=1985)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{args.samples} samples drawn without replacement per system and size; {date.today()}, "
          f"{platform.machine()}, Python {platform.python_version()}; load average {os.getloadavg()[0]:.1f}",
          file=sys.stderr)
    print("| data, system (M, skewness) | n (f) | E(mean - mu)^3: simulated / formula | Cov(mean, s^2): simulated / "
          "formula | third cumulant of T without / with replacement, simulated | their ratio | evalstudio's factor | "
          "the mean's factor alone | -2g (evalstudio's), the leading term | samples with s = 0 |")
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|")
    for data in ("usr", "hanna", "squality"):
        d = matrices(data)[0]
        human = d["human"]
        skew = {s: np.mean((r - r.mean()) ** 3) / r.var() ** 1.5 for s, r in
                ((s, human.loc[s].dropna().to_numpy(float)) for s in human.index)}
        system = max(skew, key=lambda s: abs(skew[s]))
        x = human.loc[system].dropna().to_numpy(float)
        for n in (10, 20, 30, len(x) * 3 // 4):
            r = simulate(x, n, args.samples, rng)
            print(f"| {data}, {system} ({len(x)}, {skew[system]:+.2f}) | {n} ({r['f']:.2f}) | "
                  f"{r['third']:.3g} ± {2 * r['third_se']:.1g} / {r['third_formula']:.3g} | "
                  f"{r['cov']:.3g} ± {2 * r['cov_se']:.1g} / {r['cov_formula']:.3g} | "
                  f"{r['k3_t']:+.3f} ± {2 * r['k3_t_se']:.3f} / {r['k3_r']:+.3f} ± {2 * r['k3_r_se']:.3f} | "
                  f"{r['k3_t'] / r['k3_r']:.2f} | {factor(r['f']):.2f} | "
                  f"{(1 - 2 * r['f']) / np.sqrt(1 - r['f']):.2f} | "
                  f"{r['evalstudio']:+.3f} | {r['degenerate']:.3f} |")


if __name__ == "__main__":
    main()
