"""Calibration of `analyze --ppi` on real published data, per system and per pair of systems: HANNA (Chhun et al.,
COLING 2022; 10 story generators x 96 stories, the mean of three MTurk ratings per story and criterion, and the
metrics the paper discusses), USR PersonaChat (Mehri & Eskenazi, ACL 2020; 5 systems x 60 contexts, Overall
Quality) and SQuALITY (Wang et al., EMNLP 2022; 3 systems x 100 questions, overall), as benchmarks/active.py
reads them; and a mean of three annotators' 0/1 labels (values 0, 1/3, 2/3, 1), not a rating and not a share:
Circa (Louis, Roth & Radlinski, EMNLP 2020; tests/data/circa_judgements_1000.tsv, five crowd judgements of each
indirect answer, CC BY-SA 4.0), its 10 situations as the systems (80-129 answers each), a segment's score the share of
its first three judgements that chose a label (plain "Yes"; a hedged yes or no; "neither": in the middle, not sure,
other) and the real predictor the share of the other two judgements (`--data circa`).

    nice python benchmarks/ppi_calibration.py               # 10, 20, 30, 60 rated, 2000 studies per cell
    python benchmarks/ppi_calibration.py --studies 300 --data usr --rated 10 30
    nice python benchmarks/ppi_calibration.py --data circa  # the mean of 0/1 labels (MIN_RATED_BINARY_MEAN)

Predictors, for every criterion: a useless one (the real predictor's scores shuffled among a system's items), the
real ones (HANNA: the metric that correlates best with the criterion over segments; USR: the unigram F1 with the
reference and the raters' other criteria; SQuALITY: the reviewers' correctness rating; the last two put on the human
scale by one linear fit, as in benchmarks/active.py), and a good one (the human score plus normal noise of half its
standard deviation within the system, r about 0.9). Each system's (and each pair's, for a difference: the per-item
differences of two systems rated on the same items: the systems adjacent in name order, or with --all-pairs every
pair) studies are drawn from its published items, their mean the
truth, two ways: an unlimited population (`--population infinite`: drawn with replacement, `rated` rated and
200 - rated scored only) and a finite set (the default of `analyze --ppi`: the system's published items are the
study's outputs, `rated` of them rated, drawn without replacement, the rest scored only; USR has 60 a system, so
not at 60). Studies run in parallel over the cores (one process per data set and predictor)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import date
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.stats.ppi import resampled_studies

ROOT = Path(__file__).resolve().parents[1]
HANNA = ROOT / "examples" / "analyze" / "hanna"
CRITERIA = ("Relevance", "Coherence", "Empathy", "Surprise", "Engagement", "Complexity")
CIRCA = ROOT / "tests" / "data" / "circa_judgements_1000.tsv"
# Circa's labels, as three 0/1 criteria (an annotator chose one of them or not)
CIRCA_CRITERIA = {"yes": ("Yes",),
                  "hedged": ("Probably yes / sometimes yes", "Probably no", "Yes, subject to some conditions"),
                  "neither": ("In the middle, neither yes nor no", "I am not sure how X will interpret Y’s answer",
                              "Other")}
DATA = ("hanna", "usr", "squality", "circa")
STUDY = 200  # rated + scored-only items of a study drawn from an unlimited population


def hanna_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """HANNA's (ratings, metrics) as examples/analyze/hanna/prepare.py writes them."""
    import tempfile

    spec = importlib.util.spec_from_file_location("hanna_prepare", HANNA / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as folder:
        module.main(["-o", folder])
        return pd.read_csv(Path(folder) / "ratings.csv"), pd.read_csv(Path(folder) / "metrics.csv")


def _active():
    spec = importlib.util.spec_from_file_location("active_benchmark", Path(__file__).parent / "active.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def matrices(data: str) -> list[dict]:
    """[{data, criterion, predictor, human, prediction}]: systems x items arrays of the real predictors."""
    out = []
    if data == "hanna":
        ratings, metrics = hanna_tables()
        table = metrics.pivot_table(index=["system", "item"], columns="metric", values="value", observed=True)
        for criterion in CRITERIA:
            joined = table.join(ratings.groupby(["system", "item"])[criterion].mean())
            best = joined.drop(columns=criterion).corrwith(joined[criterion]).idxmax()
            human = joined[criterion].unstack("item")
            out.append({"data": data, "criterion": criterion, "predictor": best, "human": human,
                        "prediction": joined[best].unstack("item").loc[human.index, human.columns]})
    elif data == "usr":
        active = _active()
        usr = active.usr_table()
        usr["item"] = usr.groupby("system").cumcount()  # the context, in the file's order
        f1 = np.array([active.unigram_f1(r, g) for r, g in zip(usr.response, usr.reference)])
        proxy = 2 * usr[["Natural", "Maintains Context", "Engaging"]].mean(axis=1).to_numpy() - 1
        for name, f in (("unigram F1", f1), ("proxy: Natural, Context, Engaging", proxy)):
            usr["f"] = active.on_human_scale(usr["Overall"].to_numpy(float), f)
            out.append({"data": data, "criterion": "Overall", "predictor": name,
                        "human": usr.pivot(index="system", columns="item", values="Overall"),
                        "prediction": usr.pivot(index="system", columns="item", values="f")})
    elif data == "circa":
        table = pd.read_csv(CIRCA, sep="\t")
        judged = table["judgements"].str.split("#", expand=True)
        for criterion, labels in CIRCA_CRITERIA.items():
            chose = judged.isin(labels).to_numpy(float)
            frame = pd.DataFrame({"system": table["context"], "item": table["id"],
                                  "human": chose[:, :3].mean(1), "f": chose[:, 3:].mean(1)})
            human = frame.pivot(index="system", columns="item", values="human")
            out.append({"data": data, "criterion": f"{criterion}, 3 of 5 judgements",
                        "predictor": "the other 2 judgements", "human": human,
                        "prediction": frame.pivot(index="system", columns="item", values="f")})
    else:
        active = _active()
        wide = pd.read_csv(active.SQUALITY).pivot_table(index=["item", "system"], columns="criterion",
                                                        values="value", aggfunc="mean").reset_index()
        wide["f"] = active.on_human_scale(wide["overall"].to_numpy(float), wide["correctness"].to_numpy(float))
        out.append({"data": data, "criterion": "overall", "predictor": "proxy: correctness",
                    "human": wide.pivot(index="system", columns="item", values="overall"),
                    "prediction": wide.pivot(index="system", columns="item", values="f")})
    return out


def predictors(d: dict, rng) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, human, prediction) arrays (systems x items): useless, the real predictor, good. NaN where a system
    has no such item (Circa: each answer is in one situation), left so."""
    h, p = d["human"].to_numpy(float), d["prediction"].to_numpy(float)
    useless = p.copy()
    for row in useless:
        row[~np.isnan(row)] = rng.permutation(row[~np.isnan(row)])
    good = h + rng.normal(0, 1, h.shape) * 0.5 * np.nanstd(h, axis=1, keepdims=True)
    return [(f"useless ({d['predictor']} shuffled)", h, useless), (d["predictor"], h, p), ("good (r 0.9)", h, good)]


def cells(job: tuple) -> list[dict]:
    """One data set's criterion and predictor: every system and pair, size and population."""
    data, criterion, name, systems, h, p, sizes, studies, seed, all_pairs = job
    rng = np.random.default_rng(seed)
    units = [(str(s), h[i][~np.isnan(h[i])], p[i][~np.isnan(h[i])]) for i, s in enumerate(systems)]
    pairs = combinations(range(len(systems)), 2) if all_pairs else zip(range(len(systems) - 1), range(1, len(systems)))
    if np.isnan(h).any():  # systems rated on different items (Circa's situations): no per-item differences
        pairs = []
    units += [(f"{systems[a]} - {systems[b]}", h[a] - h[b], p[a] - p[b]) for a, b in pairs]
    rows = []
    for unit, y, f in units:
        kind = "pair" if " - " in unit else "system"
        r = float(np.corrcoef(y, f)[0, 1]) if np.std(f) > 0 else 0.0
        for rated in sizes:
            for finite in (True, False):
                if finite and rated >= len(y):
                    continue
                result = resampled_studies(y, f, rated, STUDY - rated, studies, rng, finite=finite)
                rows.append({"data": data, "criterion": criterion, "predictor": name, "unit": unit, "kind": kind,
                             "r": r, "rated": rated, "population": "finite" if finite else "infinite"} | result)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rated", type=int, nargs="+", default=[10, 20, 30, 60])
    parser.add_argument("--studies", type=int, default=2000)
    parser.add_argument("--data", nargs="+", default=list(DATA[:3]), choices=DATA, help="circa: the mean of three "
                        "annotators' 0/1 labels, calibrated on its own (analyze's MIN_RATED_BINARY_MEAN)")
    parser.add_argument("--seed", type=int, default=2022)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--all-pairs", action="store_true", help="every pair of systems (HANNA: 45 a criterion), "
                        "not only those adjacent in name order (9)")
    parser.add_argument("--csv", type=Path, help="every cell (system or pair, size, population) into this file")
    parser.add_argument("--report", type=Path, help="print the tables of a --csv file written before, and stop")
    args = parser.parse_args(argv)
    if args.report:
        return report(pd.read_csv(args.report))
    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    jobs = []
    for data in args.data:
        for d in matrices(data):
            for name, h, p in predictors(d, rng):
                jobs.append((data, d["criterion"], name, list(d["human"].index), h, p, args.rated, args.studies,
                             int(rng.integers(2 ** 31)), args.all_pairs))
    with ProcessPoolExecutor(args.workers) as pool:
        rows = pd.DataFrame([row for part in pool.map(cells, jobs) for row in part])
    if args.csv:
        rows.to_csv(args.csv, index=False)
    load = os.getloadavg()[0]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{', '.join(args.data)}: {args.studies} studies per system (or pair) and size; 95% intervals (t, "
          f"lengthened on the skewed side: Hall 1992), PPI++ with lambda cross-fitted (leave one out); {date.today()}, "
          f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{time.perf_counter() - start:.0f} s ({used.ru_utime + used.ru_stime:.0f} s of CPU in {args.workers} "
          f"processes; load average {load:.1f} at the end)", file=sys.stderr)
    report(rows)


def report(rows: pd.DataFrame) -> None:
    """The tables: per data set, criterion, predictor and population, the lowest system's (and pair's) coverage at
    each size, with the system named; then per size the lowest over everything, and effective_n's worst error."""
    for population in ("finite", "infinite"):
        part = rows[rows.population == population]
        print(f"\n{population} population: the lowest coverage of a system [that system] and of a pair of systems, "
              "human only / PPI++\n")
        print("| data, criterion | predictor (r within systems) | rated | lowest system, human only | lowest system, "
              "PPI++ | lowest pair, human only | lowest pair, PPI++ |")
        print("|---|---|---:|---|---|---:|---:|")
        for (data, criterion, predictor, rated), g in part.groupby(["data", "criterion", "predictor", "rated"],
                                                                   sort=False):
            s, pairs = g[g.kind == "system"], g[g.kind == "pair"]
            low_c, low_p = s.loc[s.covered_classical.idxmin()], s.loc[s.covered_ppi.idxmin()]
            print(f"| {data}, {criterion} | {predictor} ({s.r.min():.2f}-{s.r.max():.2f}) | {rated} | "
                  f"{low_c.covered_classical:.3f} [{low_c.unit}] | {low_p.covered_ppi:.3f} [{low_p.unit}] | "
                  + (f"{pairs.covered_classical.min():.3f} | {pairs.covered_ppi.min():.3f} |" if len(pairs)
                     else "- | - |"))
    if (rows.data == "circa").any():
        print("\nCirca (the mean of three annotators' 0/1 labels): the lowest coverage of any system at each size, over "
              "its criteria and predictors (`analyze --ppi` prints such a criterion from MIN_RATED_BINARY_MEAN)\n")
        print("| mean of 0/1 labels | population | rated | human only [criterion, system] | PPI++ [criterion, system] |")
        print("|---|---|---:|---|---|")
        for (population, rated), g in rows[rows.data == "circa"].groupby(["population", "rated"]):
            low_c, low_p = g.loc[g.covered_classical.idxmin()], g.loc[g.covered_ppi.idxmin()]
            print(f"| circa | {population} | {rated} | {low_c.covered_classical:.3f} [{low_c.criterion.split(',')[0]}, "
                  f"{low_c.unit}] | {low_p.covered_ppi:.3f} [{low_p.criterion.split(',')[0]}, {low_p.unit}] |")
    print("\nOver everything: the lowest coverage of any system or pair at each size, and the labels a predictor is "
          "said to be worth (effective_n, the mean over studies) against what it was worth across them, on the system "
          "where they differed most either way\n")
    print("| population | rated | human only | PPI++ | effective_n, most overstated: said, worth [system] | effective_n, "
          "most understated |")
    print("|---|---:|---:|---:|---|---|")
    for (population, rated), g in rows.groupby(["population", "rated"]):
        systems = g[g.kind == "system"].assign(ratio=lambda t: t.claimed_n / t.realised_n)
        high, low = systems.loc[systems.ratio.idxmax()], systems.loc[systems.ratio.idxmin()]
        print(f"| {population} | {rated} | {g.covered_classical.min():.3f} | {g.covered_ppi.min():.3f} | "
              + " | ".join(f"{r.ratio - 1:+.0%}: said {r.claimed_n:.0f}, worth {r.realised_n:.0f} [{r.data}, "
                           f"{r.criterion}, {r.predictor}, {r.unit}]" for r in (high, low)) + " |")


if __name__ == "__main__":
    main()
