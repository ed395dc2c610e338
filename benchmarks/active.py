"""Human labels where the judge is unsure, replayed on published labels: how many human labels uniform human-only
sampling, uniform PPI++ and active sampling need for the same interval width, whether their 95% intervals cover the
published mean, and PAC labels' realised error (evalstudio.stats.active_replay).

    python benchmarks/active.py                     # every data set, 1000 runs per budget, 500 PAC runs
    python benchmarks/active.py --runs 200 --data usr

The data sets (all shipped in this repository, their SOURCE.md files say where from):

- HANNA (Chhun et al., COLING 2022): 960 generated stories, the mean of 3 MTurk ratings per criterion; the judge is
  the published metric that correlates best with the criterion over stories (Relevance: SUPERT-PS, Complexity:
  BERTScore Recall).
- USR PersonaChat (Mehri & Eskenazi, ACL 2020): 300 responses, Overall Quality (1-5, mean of 3 ratings). Two judges:
  the unigram F1 of the response with the context's reference response (the ConvAI2 metric, computed here from the
  published text), and a proxy judge made from the same file, the mean of the raters' Natural, Maintains Context and
  Engaging ratings put on 1-5 (2m - 1): not a model, but a real predictor as good as a strong LLM judge.
- SQuALITY (Wang et al., EMNLP 2022): 300 responses (3 systems x 100 questions), overall (0-100, mean of 3
  reviewers); the judge is the reviewers' correctness rating (a proxy judge from the same file, as above).

Every judge is also replayed "useless": its scores shuffled among the items (real values that carry nothing). Each
judge's scores are put on the human scale by one linear fit over the data set, as a judge asked on the humans' own
scale answers (a fixed map: it does not touch the intervals' validity).

- The PAC labels paper's data (Candès, Ilyas & Zrnic 2025, github.com/tijana-zrnic/pac-labels, MIT): a real LLM
  judge with its own confidence. GPT-4o labelled 2,299 sentences' stance on global warming (agrees, neutral,
  disagrees), 1,923 news headlines (misinformation or real) and 5,000 phrases' sentiment (0-1), each with a stated
  confidence; the human labels are the original data sets'. A class's share is the criterion (y = 1 where the
  humans gave the class), and the judge's score is GPT-4o's label and confidence read as the class's probability
  (its confidence where it gave the class, the rest shared evenly among the other classes). Three active designs:
  what `active draw` and the gateway do (one batch, the probabilities from the stated uncertainty 1 - confidence
  mixed with uniform, the default mix and 0.5), two batches with an error model fitted on the first over the judge's score
  (which holds label and confidence; the design replayed for the other data, which evalstudio does not run), and,
  as a ceiling no study has, two batches with every score's error size known in advance (its root mean square over
  the whole data set). And the ceiling of one batch: drawn at once in proportion to the error size PPI++ leaves at
  each judge score, known in advance, with a small uniform share (CEILING_MIXES), in a table of its own.

PAC labels: USR's Uses Knowledge (0/1, the majority of 3 ratings); the judge says 1 when the response shares a
content word with the persona facts, and its uncertainty is how close the share of shared words is to that line. And
GPT-4o's stance and misinformation labels with its stated confidence (uncertainty 1 - confidence).

A pooled coverage under LOW_COVERAGE is run again on --recheck-runs fresh studies (among hundreds of coverages from
1,000 runs some fall that low by chance). Last, the confidence-driven inference paper's own published replay
(tests/data/cdi) is summarised beside evalstudio's: what active sampling from GPT-4o's confidence saved there.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.stats.active import DEFAULT_MIX
from evalstudio.stats.active_replay import STRATEGIES, labels_for_width, replay_means, replay_pac
from evalstudio.stats.ppi import resampled_studies

PRINTED = (*STRATEGIES, "analyze --ppi: human only", "analyze --ppi: PPI++")

ROOT = Path(__file__).resolve().parents[1]
USR = ROOT / "tests" / "data" / "usr" / "pc_usr_data.json"
SQUALITY = ROOT / "examples" / "analyze" / "squality" / "ratings.csv"
PAC_LABELS = ROOT / "tests" / "data" / "pac_labels"
GPT4O = f"GPT-4o, its stated confidence, one batch, mix {DEFAULT_MIX:g} (as `active draw`)"
BUDGETS = {"hanna": (30, 60, 120, 240, 480), "usr": (20, 40, 80, 160), "squality": (20, 40, 80, 160),
           "stance": (50, 100, 200, 400), "misinfo": (50, 100, 200, 400), "sentiment": (50, 100, 200, 400)}
PER_SYSTEM_BUDGETS = (10, 20, 30, 60)
THRESHOLD_SIZES = (30, 40, 50, 60)  # rated segments per system, for where analyze --ppi starts printing PPI++
LOW_COVERAGE = 0.93  # the floor every printed interval is held to: a pooled coverage under it is run again
PER_SYSTEM_POPULATION = 200
REFERENCE_BUDGET = {"hanna": 120, "usr": 80, "squality": 80, "stance": 200, "misinfo": 200,
                    "sentiment": 200}  # the uniform PPI++ width to reach
STOPWORDS = set("the a an and or but to of in on at for with is are was were be been am i you he she it we they my "
                "your his her its our their me him them this that these those what which who do does did have has "
                "had not no yes so too very just can will would could should there here from about as by if than "
                "then also like really well".split())


def on_human_scale(y: np.ndarray, f: np.ndarray) -> np.ndarray:
    slope, intercept = np.polyfit(f, y, 1)
    return intercept + slope * f


def usr_table() -> pd.DataFrame:
    rows = []
    for context in json.loads(USR.read_text(encoding="utf-8")):
        reference = next(r["response"] for r in context["responses"] if r["model"] == "Original Ground Truth")
        for r in context["responses"]:
            rows.append({"system": r["model"], "response": r["response"], "reference": reference,
                         "fact": context["fact"]} | {k: float(np.mean(v)) for k, v in r.items()
                                                     if isinstance(v, list)})
    return pd.DataFrame(rows)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def unigram_f1(response: str, reference: str) -> float:
    a, b = words(response), words(reference)
    common = sum(min(a.count(w), b.count(w)) for w in set(a))
    return 0.0 if common == 0 else 2 * common / (len(a) + len(b))


def gpt4o(name: str) -> pd.DataFrame:
    """One of the PAC labels paper's data sets: Y (the human label or score), label (GPT-4o's), confidence."""
    table = pd.read_csv(PAC_LABELS / f"{name}.csv")
    return table.rename(columns={"Yhat (GPT4o)": "label"})[["Y", "label", "confidence"]]


def class_probability(table: pd.DataFrame, target: str) -> np.ndarray:
    """GPT-4o's label and confidence as the probability of `target`: its confidence where it said `target`, the
    rest of the probability shared evenly among the other classes where it did not."""
    others = table["Y"].nunique() - 1
    c = table["confidence"].to_numpy(float)
    return np.where(table["label"].to_numpy() == target, c, (1 - c) / others)


def rms_by_score(f: np.ndarray, error: np.ndarray) -> np.ndarray:
    """Each item's root mean square of `error` over every item with its judge score `f`."""
    _, group = np.unique(f, return_inverse=True)
    return np.sqrt(np.bincount(group, weights=error ** 2) / np.bincount(group))[group]


def known_error_sizes(y: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The ceiling: each item's uncertainty is the root mean square of y - f over every item with its judge score
    (what a study's error model could at best learn)."""
    return rms_by_score(f, y - f)


CEILING_MIXES = (0.1, 0.3)  # the one-batch ceiling's uniform shares (of stats.active.MIXES)


def residual_error_sizes(y: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The one-batch ceiling's uncertainty: per judge score, the root mean square over the whole data set of the
    error PPI++ leaves, y - lambda f about its mean with lambda the data set's own. Drawing labels in proportion to
    it is the optimal design for the judge's score (Zrnic & Candès 2024); a study would have to learn it from the
    labels it has."""
    residual = y - np.cov(y, f)[0, 1] / np.var(f, ddof=1) * f
    return rms_by_score(f, residual - residual.mean())


def replay_budgets(d: dict, runs: int, rng, **design) -> list[dict]:
    """`replay_means` of a data set at each of its BUDGETS, in order (`design`: its uncertainty, design, mix)."""
    return [replay_means(d["y"], d["f"], budget, runs, rng, **design) for budget in BUDGETS[d["data"]]]


def labels_for_reference(d: dict, results: list[dict]) -> tuple[float, dict[str, float]]:
    """(the width uniform PPI++ reaches with the data set's REFERENCE_BUDGET, the labels each strategy needs for it)
    from `replay_budgets`' results."""
    widths = {s: [r[s]["width"] for r in results] for s in STRATEGIES}
    target = widths["uniform PPI++"][BUDGETS[d["data"]].index(REFERENCE_BUDGET[d["data"]])]
    return target, {s: labels_for_width(np.asarray([r[s]["labels"] for r in results]), widths[s], target)
                    for s in STRATEGIES}


def one_batch_ceiling(d: dict, runs: int, rng, mix: float) -> dict:
    """Coverage and labels for uniform PPI++'s reference width when one batch is drawn in proportion to
    `residual_error_sizes` with the uniform share `mix`, against uniform PPI++ on the same studies."""
    size = residual_error_sizes(d["y"], d["f"])
    results = replay_budgets(d, runs, rng, uncertainty=size, design="one batch", mix=mix)
    coverage = [r["active"]["coverage"] for r in results]
    target, needed = labels_for_reference(d, results)
    return {"coverage": (min(coverage), max(coverage)), "needed": needed, "width": target,
            "told": float(np.corrcoef(size, np.abs(d["y"] - d["f"]))[0, 1])}


def gpt4o_sets(only=None) -> list[dict]:
    criteria = [("stance", "share that disagrees", "disagrees"), ("stance", "share that agrees", "agrees"),
                ("misinfo", "share of misinformation", "misinfo"), ("sentiment", "sentiment (0-1)", None)]
    out = []
    for data, criterion, target in criteria:
        if only not in (None, data):
            continue
        table = gpt4o(data)
        if target is None:
            y, f = table["Y"].to_numpy(float), table["label"].to_numpy(float)
        else:
            y, f = (table["Y"] == target).to_numpy(float), class_probability(table, target)
        f = on_human_scale(y, f)
        stated = 1 - table["confidence"].to_numpy(float)
        base = {"data": data, "criterion": criterion, "y": y, "f": f, "system": None, "stated": stated,
                "shuffled": "useless (GPT-4o's scores shuffled)"}
        out += [base | {"judge": GPT4O, "uncertainty": stated, "design": "one batch"},
                base | {"judge": "GPT-4o, its stated confidence, one batch, mix 0.5", "uncertainty": stated,
                        "design": "one batch", "mix": 0.5,
                        "shuffled": "useless (GPT-4o's scores shuffled), one batch, mix 0.5"},
                base | {"judge": "GPT-4o, two batches, an error model fitted on the first (not in evalstudio)",
                        "variant": True},
                base | {"judge": "GPT-4o, two batches, error sizes known in advance (a ceiling)",
                        "uncertainty": known_error_sizes(y, f), "variant": True}]
    return out


def datasets(only=None) -> list[dict]:
    """[{data, criterion, judge, y, f, r, system}] for every replayed data set and judge (system None: the data
    set has none; `uncertainty`: the judge's own, used as it is)."""
    out = []
    if only in (None, "hanna"):
        sys.path.insert(0, str(Path(__file__).parent))
        from ppi_calibration import hanna_tables

        ratings, metrics = hanna_tables()
        table = metrics.pivot_table(index=["system", "item"], columns="metric", values="value", observed=True)
        for criterion, metric in (("Relevance", "SUPERT-PS"), ("Complexity", "BERTScore Recall")):
            joined = table[[metric]].join(ratings.groupby(["system", "item"])[criterion].mean())
            out.append({"data": "hanna", "criterion": criterion, "judge": metric,
                        "y": joined[criterion].to_numpy(float), "f": joined[metric].to_numpy(float),
                        "system": joined.index.get_level_values("system").astype(str).to_numpy()})
    if only in (None, "usr"):
        usr = usr_table()
        f1 = np.array([unigram_f1(r, g) for r, g in zip(usr.response, usr.reference)])
        proxy = 2 * usr[["Natural", "Maintains Context", "Engaging"]].mean(axis=1).to_numpy() - 1
        for name, f in (("unigram F1 with the reference", f1), ("proxy: Natural, Context, Engaging", proxy)):
            out.append({"data": "usr", "criterion": "Overall", "judge": name, "y": usr["Overall"].to_numpy(float),
                        "f": f, "system": usr["system"].to_numpy()})
    if only in (None, "squality"):
        ratings = pd.read_csv(SQUALITY)
        wide = ratings.pivot_table(index=["item", "system"], columns="criterion", values="value", aggfunc="mean")
        out.append({"data": "squality", "criterion": "overall", "judge": "proxy: correctness",
                    "y": wide["overall"].to_numpy(float), "f": wide["correctness"].to_numpy(float),
                    "system": wide.index.get_level_values("system").to_numpy()})
    rng = np.random.default_rng(0)
    for d in list(out):
        d["f"] = on_human_scale(d["y"], d["f"])
    out += gpt4o_sets(only)
    for d in list(out):
        d["r"] = float(np.corrcoef(d["y"], d["f"])[0, 1])
        if d.get("variant"):
            continue
        shuffled = on_human_scale(d["y"], rng.permutation(d["f"]))
        out.append({k: v for k, v in d.items() if k != "stated"}
                   | {"judge": d.get("shuffled", f"useless ({d['judge']} shuffled)"), "f": shuffled,
                      "r": float(np.corrcoef(d["y"], shuffled)[0, 1])})
    return out


def per_system(d: dict, budget: int, runs: int, rng, population: int = PER_SYSTEM_POPULATION) -> pd.DataFrame:
    """Coverage per system: studies of `population` segments drawn from one system's published ones (the judge
    scoring all of them) with `budget` human labels, as `active estimate` prints per system."""
    rows = []
    for system in sorted(set(d["system"])):
        mine = d["system"] == system
        result = replay_means(d["y"][mine], d["f"][mine], budget, runs, rng, population=population)
        # `analyze --ppi`'s estimates (evalstudio.stats.ppi): `budget` rated and the rest scored only
        ppi = resampled_studies(d["y"][mine], d["f"][mine], budget, population - budget, runs, rng)
        rows.append({"system": system} | {s: result[s]["coverage"] for s in STRATEGIES}
                    | {"analyze --ppi: human only": ppi["covered_classical"], "analyze --ppi: PPI++": ppi["covered_ppi"]})
    return pd.DataFrame(rows)


def uses_knowledge_judge() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(judge label, uncertainty, human label) per USR response, for PAC labels."""
    usr = usr_table()
    share = []
    for response, fact in zip(usr.response, usr.fact):
        content = [w for w in words(response) if w not in STOPWORDS and len(w) > 2]
        known = set(words(fact.replace("your persona:", " ")))
        share.append(sum(w in known for w in content) / len(content) if content else 0.0)
    share = np.asarray(share)
    judge = (share > 0).astype(int)
    line = np.min(share[share > 0]) / 2  # halfway between sharing nothing and sharing the fewest words
    uncertainty = -np.abs(share - line)
    human = (usr["Uses Knowledge"].to_numpy() >= 0.5).astype(int)
    return judge, uncertainty, human


def gpt4o_pac(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(GPT-4o's label, its uncertainty 1 - stated confidence, the human label) per item, for PAC labels."""
    table = gpt4o(name)
    return (table["label"].to_numpy(object), 1 - table["confidence"].to_numpy(float),
            table["Y"].to_numpy(object))


def authors_pac(data: str, method: str, epsilon: float, alpha: float, sample: int) -> dict:
    """The authors' PAC labels on the same setting, run once (tests/data/pac_labels/reference.json says how)."""
    reference = json.loads((PAC_LABELS / "reference.json").read_text(encoding="utf-8"))
    return next(r for r in reference["results"] if (r["data"], r["method"], r["epsilon"], r["alpha"], r["sample"])
                == (data, method, epsilon, alpha, sample))


CDI = ROOT / "tests" / "data" / "cdi"
CDI_SETTINGS = {  # the paper's estimands (its notebooks), one per published table
    "stance_nhuman500": "stance: odds ratio of agreeing, with an affirming device or not",
    "bias_left_leaning_nhuman500": "political bias: share left-leaning",
    "bias_right_leaning_nhuman500": "political bias: share right-leaning",
    "politeness_hedge_nhuman500": "politeness: logistic coefficient of a hedge",
    "politeness_1st_person_pl_nhuman500": "politeness: logistic coefficient of 1st person plural"}


def published_cdi() -> pd.DataFrame:
    """The confidence-driven inference paper's own replay (tests/data/cdi, its published tables): per setting the
    mean effective sample size of each estimator over its 100 runs of 500 human labels, and the labels
    confidence-driven sampling saves at equal variance against its uniform baseline (lambda 1) and human-only
    sampling (1 - their effective size / its own)."""
    rows = []
    for name, setting in CDI_SETTINGS.items():
        table = pd.read_csv(CDI / f"{name}.csv").groupby("estimator")
        ess, covered = table["effective sample size"].mean(), table["coverage"].mean()
        cdi = ess["human + LLM (confidence)"]
        rows.append({"setting": setting, "confidence-driven": cdi, "uniform, lambda 1": ess["human + LLM (uniform)"],
                     "human only": ess["human only"],
                     "saved vs uniform": 1 - ess["human + LLM (uniform)"] / cdi,
                     "saved vs human only": 1 - ess["human only"] / cdi,
                     "coverage (90%)": covered["human + LLM (confidence)"]})
    return pd.DataFrame(rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--pac-runs", type=int, default=500)
    parser.add_argument("--per-system-runs", type=int, default=2000, help="0: skip the per-system table")
    parser.add_argument("--data", choices=sorted(BUDGETS))
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--threshold-runs", type=int, default=8000,
                        help="runs per system and size for where analyze --ppi starts printing PPI++ (0: skip)")
    parser.add_argument("--recheck-runs", type=int, default=10000,
                        help=f"runs for a second look at coverages under {LOW_COVERAGE} (0: none)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    print(f"{date.today()}, {platform.machine()}, Python {platform.python_version()}; {args.runs} runs per budget\n")
    print("| data, criterion | judge (r with humans) | labels (budget) | coverage: human only / uniform PPI++ / active "
          "| width: human only / uniform PPI++ / active |")
    print("|---|---|---:|---|---|")
    summary, low = [], []
    replayed = datasets(args.data)  # read once: HANNA's tables are rebuilt from its release on every call
    for d in replayed:
        budgets = BUDGETS[d["data"]]
        results = replay_budgets(d, args.runs, rng, uncertainty=d.get("uncertainty"),
                                 design=d.get("design", "two batches"), mix=d.get("mix", DEFAULT_MIX))
        for budget, result in zip(budgets, results):
            print(f"| {d['data']}, {d['criterion']} | {d['judge']} ({d['r']:.2f}) | {budget} | "
                  + " / ".join(f"{result[s]['coverage']:.3f}" for s in STRATEGIES) + " | "
                  + " / ".join(f"{result[s]['width']:.3g}" for s in STRATEGIES) + " |")
            if min(result[s]["coverage"] for s in STRATEGIES) < LOW_COVERAGE:
                low.append((d, budget))
        summary.append((d, *labels_for_reference(d, results), budgets))
    if low and args.recheck_runs:
        print(f"\nCoverages under {LOW_COVERAGE} above, each run again on {args.recheck_runs} fresh studies (in "
              f"batches of {args.runs}): a coverage from {args.runs} runs is within about "
              f"{1.96 * np.sqrt(0.95 * 0.05 / args.runs):.3f} of the true one 95% of the time, so among hundreds some "
              "fall that low by chance\n")
        print("| data, criterion | judge (r) | labels (budget) | coverage: human only / uniform PPI++ / active |")
        print("|---|---|---:|---|")
        again = np.random.default_rng(args.seed + 2)  # its own draws: the tables after it stay as they were
        for d, budget in low:
            batches = [replay_means(d["y"], d["f"], budget, args.runs, again, uncertainty=d.get("uncertainty"),
                                    design=d.get("design", "two batches"), mix=d.get("mix", DEFAULT_MIX))
                       for _ in range(max(1, args.recheck_runs // args.runs))]
            print(f"| {d['data']}, {d['criterion']} | {d['judge']} ({d['r']:.2f}) | {budget} | "
                  + " / ".join(f"{np.mean([b[s]['coverage'] for b in batches]):.3f}" for s in STRATEGIES) + " |")
    print("\nHuman labels needed for the width uniform PPI++ reaches with the reference budget (interpolated):\n")
    print("| data, criterion | judge (r) | width | human only | uniform PPI++ | active | active vs uniform PPI++ | "
          "active vs human only |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for d, target, needed, budgets in summary:
        print(f"| {d['data']}, {d['criterion']} | {d['judge']} ({d['r']:.2f}) | {target:.3g} | "
              + " | ".join(f"{needed[s]:.0f}" if needed[s] == needed[s] else f"> {max(budgets)}"
                         for s in STRATEGIES)
              + f" | {needed['active'] / needed['uniform PPI++'] - 1:+.0%} | "
                + (f"{needed['active'] / needed['human only'] - 1:+.0%}" if needed["human only"] == needed["human only"]
                   else "fewer") + " |")
    if args.per_system_runs:
        print(f"\nPer system, as `active estimate` prints: studies of {PER_SYSTEM_POPULATION} segments drawn from one "
              f"system's published ones, {args.per_system_runs} runs per system and size; coverage of the 95% "
              "intervals, the mean over systems [the lowest system]\n")
        print("| data, criterion | judge (r) | labels per system | " + " | ".join(PRINTED) + " |")
        print("|---|---|---:|" + "---|" * len(PRINTED))
        lowest = {}
        for d in replayed:
            if d["system"] is None:
                continue
            for budget in PER_SYSTEM_BUDGETS:
                table = per_system(d, budget, args.per_system_runs, rng)
                lowest[budget] = min(lowest.get(budget, 1.0), float(table[list(PRINTED)].mean().min()))
                print(f"| {d['data']}, {d['criterion']} | {d['judge']} ({d['r']:.2f}) | {budget} | "
                      + " | ".join(f"{table[s].mean():.3f} [{table[s].min():.3f}]" for s in PRINTED) + " |")
        print("\nLowest mean coverage over systems, per size: "
              + ", ".join(f"{b} labels: {c:.3f}" for b, c in lowest.items()))
    shipped = [d for d in replayed if d.get("design") == "one batch" and d.get("mix") is None]
    if shipped and args.per_system_runs:
        print(f"\nThe shipped design at the sizes a system has: studies of {PER_SYSTEM_POPULATION} items drawn from "
              f"the PAC labels data, {args.per_system_runs} runs per size; coverage of the 95% intervals\n")
        print("| data, criterion | judge (r) | labels | " + " | ".join(STRATEGIES) + " |")
        print("|---|---|---:|" + "---:|" * len(STRATEGIES))
        own = np.random.default_rng(args.seed + 1)  # its own draws: the tables after it stay as they were
        for d in shipped:
            for budget in PER_SYSTEM_BUDGETS:
                r = replay_means(d["y"], d["f"], budget, args.per_system_runs, own, uncertainty=d["uncertainty"],
                                 population=PER_SYSTEM_POPULATION, design="one batch")
                print(f"| {d['data']}, {d['criterion']} | {d['judge']} ({d['r']:.2f}) | {budget} | "
                      + " | ".join(f"{r[s]['coverage']:.3f}" for s in STRATEGIES) + " |")
    if args.threshold_runs and any(d["system"] is not None for d in replayed):
        print(f"\nWhere `analyze --ppi` starts printing PPI++ intervals (exporters/analyses/ppi.py MIN_RATED_PPI): each "
              f"system's studies of {PER_SYSTEM_POPULATION} segments, {args.threshold_runs} runs per system and size; "
              "the lowest system's coverage of the 95% PPI++ interval [that system]\n")
        print("| data, criterion | judge (r) | " + " | ".join(f"{b} rated" for b in THRESHOLD_SIZES) + " |")
        print("|---|---|" + "---|" * len(THRESHOLD_SIZES))
        own = np.random.default_rng(args.seed + 3)  # its own draws: the tables after it stay as they were
        for d in replayed:
            if d["system"] is None:
                continue
            cells = []
            for rated in THRESHOLD_SIZES:
                covered = {s: resampled_studies(d["y"][d["system"] == s], d["f"][d["system"] == s], rated,
                                                PER_SYSTEM_POPULATION - rated, args.threshold_runs, own)["covered_ppi"]
                           for s in sorted(set(d["system"]))}
                worst = min(covered, key=covered.get)
                cells.append(f"{covered[worst]:.3f} [{worst}]")
            print(f"| {d['data']}, {d['criterion']} | {d['judge']} ({d['r']:.2f}) | " + " | ".join(cells) + " |")
    told = [d for d in replayed if "stated" in d and d["judge"] == GPT4O]
    if told:
        print("\nHow well GPT-4o's uncertainty tells its errors: the correlation with |human - judge| of its stated "
              "uncertainty (1 - confidence) and of the error sizes known in advance (the ceiling's uncertainty)\n")
        print("| data, criterion | judge (r with humans) | r(stated uncertainty, error size) | "
              "r(error sizes known in advance, error size) |")
        print("|---|---|---:|---:|")
        for d in told:
            size = np.abs(d["y"] - d["f"])
            print(f"| {d['data']}, {d['criterion']} | GPT-4o ({d['r']:.2f}) | "
                  f"{np.corrcoef(d['stated'], size)[0, 1]:.2f} | "
                  f"{np.corrcoef(known_error_sizes(d['y'], d['f']), size)[0, 1]:.2f} |")
    if told:
        print(f"\nThe ceiling of one batch: labels drawn at once in proportion to each judge score's error size known "
              f"in advance (the error PPI++ leaves, over the whole data set), with a small uniform share; "
              f"{args.runs} runs per budget; human labels for the width uniform PPI++ reaches with the reference "
              "budget\n")
        print("| data, criterion | judge (r with humans) | r(error sizes known in advance, error size) | uniform share "
              "| coverage (active, over the budgets) | width | uniform PPI++ | active | active vs uniform PPI++ |")
        print("|---|---|---:|---:|---|---:|---:|---:|---:|")
        own = np.random.default_rng(args.seed + 4)  # its own draws: the other tables stay as they were
        for d, mix in [(d, mix) for d in told for mix in CEILING_MIXES]:
            c = one_batch_ceiling(d, args.runs, own, mix)
            needed = c["needed"]
            print(f"| {d['data']}, {d['criterion']} | GPT-4o ({d['r']:.2f}) | {c['told']:.2f} | {mix:g} | "
                  f"{c['coverage'][0]:.3f}-{c['coverage'][1]:.3f} | {c['width']:.3g} | "
                  f"{needed['uniform PPI++']:.0f} | {needed['active']:.0f} | "
                  f"{needed['active'] / needed['uniform PPI++'] - 1:+.0%} |")
    pac_sets = [(name, *gpt4o_pac(name)) for name in ("stance", "misinfo") if args.data in (None, name)]
    for name, judge, uncertainty, human in pac_sets:
        print(f"\nPAC labels, {name}: {len(judge)} items, GPT-4o wrong on {np.mean(judge != human):.1%}, its "
              f"uncertainty 1 - its stated confidence; {args.pac_runs} runs each. The last two columns: the authors' "
              "implementation on the same data (run once, tests/data/pac_labels/reference.json), share humans "
              "labelled [runs with error > epsilon], with its betting interval (valid at any size) and its normal "
              "one\n")
        print("| epsilon | alpha | calibration sample | runs with error > epsilon | mean error | largest error | "
              "share humans labelled | authors', betting | authors', normal |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for epsilon, alpha, sample in ((0.05, 0.1, 200), (0.1, 0.1, 200), (0.15, 0.1, 100)):
            r = replay_pac(judge, uncertainty, human, sample, epsilon, alpha, args.pac_runs, rng)
            theirs = [authors_pac(name, method, epsilon, alpha, sample) for method in ("wsr", "clt")]
            print(f"| {epsilon} | {alpha} | {sample} | {r['over_epsilon']:.3f} | {r['mean_error']:.3f} | "
                  f"{r['max_error']:.3f} | {r['human_share']:.2f} | "
                  + " | ".join(f"{t['human_share']:.2f} [{t['over_epsilon']:.3f}]" for t in theirs) + " |")
    if args.data in (None, "usr"):
        judge, uncertainty, human = uses_knowledge_judge()
        print(f"\nPAC labels, USR Uses Knowledge: {len(judge)} responses, the judge wrong on "
              f"{np.mean(judge != human):.1%}; {args.pac_runs} runs each\n")
        print("| epsilon | alpha | calibration sample | runs with error > epsilon | mean error | largest error | "
              "share humans labelled |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for epsilon, alpha, sample in ((0.05, 0.1, 60), (0.1, 0.1, 60), (0.1, 0.05, 100), (0.15, 0.1, 40)):
            r = replay_pac(judge, uncertainty, human, sample, epsilon, alpha, args.pac_runs, rng)
            print(f"| {epsilon} | {alpha} | {sample} | {r['over_epsilon']:.3f} | {r['mean_error']:.3f} | "
                  f"{r['max_error']:.3f} | {r['human_share']:.2f} |")
    if args.data is None:
        print("\nThe confidence-driven inference paper's own replay (Gligorić, Zrnic, Lee, Candès & Jurafsky, NAACL "
              "2025; GPT-4o's stated confidence; tests/data/cdi, its published tables): mean effective sample size "
              "over its 100 runs of 500 human labels, and the labels confidence-driven sampling saves at equal "
              "variance\n")
        print("| setting | confidence-driven | uniform, lambda 1 | human only | saved vs uniform | saved vs human only "
              "| coverage of its 90% intervals |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for _, r in published_cdi().iterrows():
            print(f"| {r['setting']} | {r['confidence-driven']:.0f} | {r['uniform, lambda 1']:.0f} | "
                  f"{r['human only']:.0f} | {r['saved vs uniform']:.0%} | {r['saved vs human only']:.0%} | "
                  f"{r['coverage (90%)']:.2f} |")
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
