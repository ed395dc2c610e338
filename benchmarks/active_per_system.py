"""What a judge saves per system against human-only sampling, replayed on HANNA (Chhun et al., COLING 2022): the
human labels each strategy of benchmarks/active.py needs for the width uniform PPI++ reaches with 40 labels per
system, in studies of 200 segments drawn from one system's 96 published stories (as benchmarks/active.py's
per-system table draws them), the judge the published metric that tracks the criterion best.

    python benchmarks/active_per_system.py              # 1000 runs per system and budget
    python benchmarks/active_per_system.py --runs 200

benchmarks/active.py's savings against human-only sampling are of a criterion's mean over all of a data set's items;
`active estimate` and `analyze --ppi` estimate each system's, where a metric tracks the ratings less (the
differences between systems no longer help it)."""

from __future__ import annotations

import argparse
import importlib.util
import platform
import time
from datetime import date
from pathlib import Path

import numpy as np

from evalstudio.stats.active_replay import STRATEGIES, labels_for_width, replay_means

BUDGETS = (20, 30, 40, 60, 80)
REFERENCE = 40  # labels per system: uniform PPI++'s width with them is the target


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    spec = importlib.util.spec_from_file_location("active_benchmark", Path(__file__).parent / "active.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    lines = []
    for d in benchmark.datasets("hanna"):
        if d["judge"].startswith("useless"):
            continue
        saved = {s: [] for s in STRATEGIES[1:]}
        within = []
        for system in sorted(set(d["system"])):
            mine = d["system"] == system
            results = [replay_means(d["y"][mine], d["f"][mine], b, args.runs, rng, population=200) for b in BUDGETS]
            widths = {s: [r[s]["width"] for r in results] for s in STRATEGIES}
            target = widths["uniform PPI++"][BUDGETS.index(REFERENCE)]
            needed = {s: labels_for_width(np.asarray([r[s]["labels"] for r in results]), widths[s], target)
                      for s in STRATEGIES}
            for s in saved:
                saved[s].append(1 - needed[s] / needed["human only"])
            within.append(np.corrcoef(d["y"][mine], d["f"][mine])[0, 1])
        lines.append(f"| hanna, {d['criterion']} | {d['judge']} ({min(within):.2f}-{max(within):.2f}) | "
                     + " | ".join(f"{100 * min(v):.0f}% to {100 * max(v):.0f}% (mean {100 * np.mean(v):.0f}%)"
                                  for v in saved.values()) + " |")
    print(f"HANNA per system: labels saved against human-only sampling for the width uniform PPI++ reaches with "
          f"{REFERENCE} labels, studies of 200 segments, {args.runs} runs per system and budget; {date.today()}, "
          f"{platform.machine()}, Python {platform.python_version()}, {time.perf_counter() - start:.0f} s\n")
    print("| data, criterion | judge (r within a system) | uniform PPI++ vs human only, over the 10 systems | active "
          "(two batches) vs human only |")
    print("|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
