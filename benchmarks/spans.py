"""Error-span studies analysed from their files (`analyze` with layout: spans), timed: the published TED talks en-de
MQM file (tests/data/mqm_ted, 8,435 rows) and a synthetic MQM file of 1,000,000 error rows (two raters per segment,
so span agreement has pairs). Each row: read (readers.spans) and the span tables (scores, ranking with clusters at
1,000 permutations, span agreement), the median of --repeats runs. Targets (issue 67): TED under 3 s, 1M rows under
20 s.

    python benchmarks/spans.py [--rows 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.readers.spans import read_span_study
from evalstudio.readers.spec import Spec
from evalstudio.exporters.analyses.span_analysis import span_tables

TED = Path(__file__).resolve().parents[1] / "tests" / "data" / "mqm_ted" / "mqm_ted_ende.tsv.gz"
CATEGORIES = np.array(["Accuracy/Mistranslation", "Fluency/Grammar", "Fluency/Punctuation", "Style/Awkward",
                       "Terminology/Inappropriate for context", "Non-translation!", "No-error"])
SEVERITIES = np.array(["Major", "Minor", "Neutral"])


def synthetic(path: Path, rows: int, seed: int = 0) -> None:
    """An MQM TSV of `rows` error rows: 20 systems, two raters per segment, two errors per rater on average, each
    marked <v>...</v> at a random place of a 60-character target (vectorised: no loop over rows)."""
    rng = np.random.default_rng(seed)
    per_segment = 4  # two raters x two errors
    segments = rows // per_segment
    seg = np.repeat(np.arange(segments), per_segment)[:rows]
    system = (seg % 20).astype(str)
    rater = np.where(np.arange(rows) % per_segment < 2, "r1", "r2")
    start = rng.integers(0, 50, rows)
    length = rng.integers(1, 10, rows)
    prefixes = np.array(["x" * k for k in range(61)], dtype=object)  # the target: 60 characters
    target = prefixes[start] + "<v>" + prefixes[length] + "</v>" + prefixes[60 - start - length]
    category = CATEGORIES[rng.integers(0, len(CATEGORIES) - 1, rows)]
    severity = SEVERITIES[rng.choice(3, rows, p=[0.3, 0.65, 0.05])]
    frame = pd.DataFrame({"system": "sys" + pd.Series(system), "doc": "d", "doc_id": "1", "seg_id": seg // 20,
                          "rater": rater, "source": "source text", "target": target, "category": category,
                          "severity": severity, "comment": ""})
    frame.to_csv(path, sep="\t", index=False, quoting=3)  # csv.QUOTE_NONE: as the MQM files are written


def timed(path: Path, repeats: int) -> tuple[float, float, int, str]:
    """(median wall-clock seconds to read, and for the span tables; median CPU seconds of both (the process's, all
    its threads: what the machine's other load does not inflate as much); segments; the top system)."""
    reads, tables, cpu = [], [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        study = read_span_study(path, Spec(layout="spans"))
        t1 = time.perf_counter()
        out, _ = span_tables(study, resamples=1000)
        tables.append(time.perf_counter() - t1)
        reads.append(t1 - t0)
        cpu.append(time.process_time() - c0)
    top = out["mqm_systems"].iloc[0]
    return (statistics.median(reads), statistics.median(tables), statistics.median(cpu), len(study.segments),
            f"{top.system} ({top.score:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, pandas {pd.__version__}")
    print("| file | rows | segments | read (s) | scores, clusters, agreement (s) | total (s) | CPU (s) | target | best |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        big = Path(folder) / "synthetic.tsv"
        synthetic(big, args.rows)
        for name, path, rows, target in (("TED en-de (published)", TED, 8435, 3.0),
                                         ("synthetic", big, args.rows, 20.0)):
            read, tables, cpu, segments, best = timed(path, args.repeats)
            total = read + tables
            print(f"| {name} | {rows:,} | {segments:,} | {read:.2f} | {tables:.2f} | {total:.2f} | {cpu:.2f} | "
                  f"< {target:g} s: {'met' if total < target else 'MISSED'} | {best} |")


if __name__ == "__main__":
    main()
