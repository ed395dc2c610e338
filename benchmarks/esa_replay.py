"""A replay on ESA's released campaign data (issue 68.6): Zouhar, Kocmi & Sachan 2024, "AI-Assisted Human
Evaluation of Machine Translation" (ESA-AI), github:wmt-conference/ErrorSpanAnnotation (GPL-3.0: nothing of it is
copied here; the files are read from the path given, and docs/spans.md keeps only the numbers).

    python benchmarks/esa_replay.py /path/to/ErrorSpanAnnotation [--runs 100] [--sample 300 600]

Read with evalstudio's own readers and statistics:

1. every campaign file (`format: esa`, readers.spans.read_esa): rows, segments, spans, and what the reader said;
2. the post-edit types (kept / edited / removed / added, exporters.analyses.postedit's categories) need the LLM's
   spans the ESA-AI annotators started from (data/campaign-ruction-rc5/data/batches_wmt23_en-de_gemba.json);
   without that file they are not computed, and the script says so;
3. span agreement (exporters.analyses.span_analysis.span_agreement: character-level F1, and alpha where the texts
   give the lengths) between the first campaign and its re-annotation by other annotators (ESA-1 vs ESA-IAA, the
   texts from batches_wmt23_en-de_esa.json; ESA-AI-1 vs ESA-AI-IAA, without texts: F1 only);
4. PAC filtering on "has an error" (exporters.analyses.error_filter and active.pac, as `active pac --criterion
   has_error` runs it): the judge GEMBA-MQM (its WMT23 segment scores in mt-metrics-eval: a score of 0 is no error
   found), the humans ESA-1 (unassisted), each run a uniform calibration sample; the share skipped, the realised
   error on the sample and the error over all segments, at epsilon 0.05.

The tutorial documents and the "#duplicate" fillers are left out everywhere, as ESA's own loader does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from evalstudio.exporters.analyses.active import pac
from evalstudio.exporters.analyses.error_filter import LABELS, filter_summary, has_error, has_error_spec
from evalstudio.exporters.analyses.span_analysis import span_agreement
from evalstudio.readers.spans import SpanStudy, read_span_study
from evalstudio.readers.spec import Spec

CAMPAIGN = Path("data") / "campaign-ruction-rc5"
FILES = {"ESA-1": "240315rc5ESA.scores.csv", "ESA-IAA": "240521rc6ESA.scores.csv",
         "ESAAI-1": "240315rc5GEMBA.scores.csv", "ESAAI-IAA": "240521rc6GEMBA.scores.csv"}
ESA_BATCHES = CAMPAIGN / "data" / "batches_wmt23_en-de_esa.json"
GEMBA_BATCHES = CAMPAIGN / "data" / "batches_wmt23_en-de_gemba.json"
GEMBA_SCORES = Path("data") / "mt-metrics-eval-v2" / "wmt23" / "metric-scores" / "en-de" / "GEMBA-MQM-src.seg.score"


def read(repo: Path) -> dict[str, SpanStudy]:
    """Each campaign file as evalstudio reads it."""
    spec = Spec(name="esa", layout="spans", spans={"format": "esa"})
    return {name: read_span_study(repo / CAMPAIGN / file, spec) for name, file in FILES.items()}


def without_fillers(study: SpanStudy) -> SpanStudy:
    """The campaign's segments without the tutorial and the "#duplicate" documents that fill a batch to 100 items
    (every annotator has the same tutorial; ESA's own loader leaves both out)."""
    filler = study.segments["doc"].astype(str).str.contains("tutorial|#duplicate")
    kept = study.segments[~filler].reset_index(drop=True)
    names = set(zip(kept["system"].astype(str), kept["item"].astype(str), kept["annotator"].astype(str)))
    spans = study.spans[[k in names for k in zip(study.spans["system"].astype(str), study.spans["item_id"].astype(str),
                                                 study.spans["annotator"].astype(str))]].reset_index(drop=True)
    return SpanStudy(spans, kept, study.tidy, study.criterion, study.higher_is_better,
                     study.notes + [f"{int(filler.sum())} tutorial or filler segment(s) left out"])


def batch_items(path: Path) -> dict[str, tuple[str, int, int]]:
    """itemID#documentID (the name read_esa gives a segment) -> (system, source line, target length), from
    Appraise's batches file."""
    out = {}
    for batch in json.loads(path.read_text(encoding="utf-8")):
        for item in batch["items"]:
            parts = str(item.get("_item", "")).split(" | ")
            if len(parts) == 3 and parts[1].isdigit():
                out[f"{item['itemID']}#{item['documentID']}"] = (parts[0], int(parts[1]), len(item["targetText"]))
    return out


def pooled_agreement(first: SpanStudy, second: SpanStudy, lengths: dict | None) -> dict:
    """Span agreement of every pair of annotators, one of each campaign, on the segments both annotated: the
    pairs, their segments, the pooled character F1 (both marked / the mean marked) and the mean alpha."""
    def named(study, campaign):
        segments = study.segments.assign(annotator=campaign + ":" + study.segments["annotator"].astype(str))
        if lengths is not None:
            segments["length"] = [lengths.get(i, (None, None, np.nan))[2] for i in segments["item"]]
        spans = study.spans.assign(annotator=campaign + ":" + study.spans["annotator"].astype(str))
        return segments, spans
    (sa, pa), (sb, pb) = named(first, "a"), named(second, "b")
    both = SpanStudy(pd.concat([pa, pb], ignore_index=True), pd.concat([sa, sb], ignore_index=True),
                     pd.DataFrame(), "ESA", True, [])
    table = span_agreement(both, [])
    table = table[table["first"].str.startswith("a:") & table["second"].str.startswith("b:")]
    marked = table["marked_first"].sum() + table["marked_second"].sum()
    return {"pairs": len(table), "segments": int(table["segments"].sum()),
            "f1": 2 * table["both"].sum() / marked if marked else np.nan,
            "f1_label": 2 * table["same_label"].sum() / marked if marked else np.nan,
            "alpha": float(table["alpha"].mean()) if table["alpha"].notna().any() else np.nan}


def pac_replay(humans: SpanStudy, items: dict, gemba: pd.DataFrame, runs: int, sample: int, epsilon: float,
               alpha: float) -> dict:
    """PAC labels on has_error, GEMBA-MQM as the judge and ESA-1's annotators as the humans, `runs` calibration
    samples of `sample` segments."""
    marked = has_error(humans)
    where = [items.get(i) for i in marked["item"]]
    keep = np.array([w is not None for w in where])
    marked = marked[keep].reset_index(drop=True)
    lines = [w for w in where if w is not None]
    judge = np.array([gemba.at[(system, line), "score"] < 0 for system, line, _ in lines])
    draws_base = pd.DataFrame({"system": marked["system"].astype(str), "item": marked["item"].astype(str),
                               "judge": "GEMBA-MQM", "score": np.where(judge, 2.0, 1.0),
                               "uncertainty": np.where(judge, 1.0, 0.0), "probability": sample / len(marked),
                               "design": f"pac sample of {sample}", "seed": 0})
    ratings = pd.DataFrame({"project": "esa", "item": marked["item"], "system": marked["system"], "agent": "",
                            "annotator": marked["annotator"], "criterion": "has_error",
                            "value": np.where(marked["has_error"], LABELS[1], LABELS[0]), "line": 0})
    truth = marked["has_error"].to_numpy(bool)
    out = {"segments": len(marked), "left_out": int((~keep).sum()), "judge_error_free": float((~judge).mean()),
           "error_skipping_all": float((~judge & truth).mean()), "runs": []}
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        drawn = np.zeros(len(marked), dtype=bool)
        drawn[rng.choice(len(marked), size=sample, replace=False)] = True
        draws = draws_base.assign(drawn=drawn, seed=seed)
        table, result, _ = pac(ratings, has_error_spec(), draws, "has_error", epsilon, alpha, to_humans=LABELS[1])
        f = filter_summary(table, draws, result.threshold)
        skipped = ~table["needs_human"].to_numpy(bool)
        out["runs"].append({"skipped": f["skipped"] / f["segments"], "realised": f["realised_error"],
                            "error": float((skipped & truth).mean())})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a copy of github:wmt-conference/ErrorSpanAnnotation")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--sample", type=int, nargs="+", default=[300, 600],
                        help="calibration sample sizes (segments)")
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--alpha", type=float, default=0.1)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"# ESA / ESA-AI replay, {date.today()}, {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load {os.getloadavg()[0]:.1f}")
    studies = {name: without_fillers(study) for name, study in read(args.repo).items()}
    print("\n| campaign | file | segments | annotators | spans | segments with a span | what the reader said |")
    print("|---|---|---:|---:|---:|---:|---|")
    for name, study in studies.items():
        flags = has_error(study)["has_error"]
        said = "; ".join(n.split(": ", 1)[-1][:70] for n in study.notes)
        print(f"| {name} | {FILES[name]} | {len(study.segments)} | {study.segments['annotator'].nunique()} | "
              f"{len(study.spans)} | {flags.mean():.1%} | {said} |")

    print("\nPost-edit types (kept / edited / removed / added):", end=" ")
    if (args.repo / GEMBA_BATCHES).exists():
        print(f"{GEMBA_BATCHES} is present, but this script does not read it yet: not computed")
    else:
        print(f"not computed: {GEMBA_BATCHES} (the LLM's spans the ESA-AI annotators started from) is not in the "
              "copy given; the score exports hold only the humans' final spans")

    items = batch_items(args.repo / ESA_BATCHES)
    print("\n| span agreement | annotator pairs | segments | character F1 | F1, same severity | alpha (mean) |")
    print("|---|---:|---:|---:|---:|---:|")
    for first, second, lengths in (("ESA-1", "ESA-IAA", items), ("ESAAI-1", "ESAAI-IAA", None)):
        r = pooled_agreement(studies[first], studies[second], lengths)
        print(f"| {first} vs {second} | {r['pairs']} | {r['segments']} | {r['f1']:.3f} | {r['f1_label']:.3f} | "
              f"{'-' if np.isnan(r['alpha']) else format(r['alpha'], '.3f')} |")

    gemba = pd.read_csv(args.repo / GEMBA_SCORES, sep="\t", header=None, names=["system", "score"])
    gemba["line"] = gemba.groupby("system").cumcount()
    gemba = gemba.set_index(["system", "line"])
    results = {n: pac_replay(studies["ESA-1"], items, gemba, args.runs, n, args.epsilon, args.alpha)
               for n in args.sample}
    r = results[args.sample[0]]
    print(f"\nPAC filtering on has_error: GEMBA-MQM (WMT23 segment scores) as the judge, ESA-1's annotators as the "
          f"humans, {r['segments']} segments ({r['left_out']} not found in the ESA batches file left out); GEMBA-MQM "
          f"finds no error in {r['judge_error_free']:.1%} of them; skipping all of those would leave "
          f"{r['error_skipping_all']:.1%} of all segments with an error the humans marked unannotated.")
    print(f"\n| epsilon | alpha | calibration sample | runs | runs that skip | share skipped (mean [min, max]) | "
          "realised error on the sample (mean) | error over all segments (mean [max]) | runs with error > epsilon |")
    print("|---:|---:|---:|---:|---:|---|---:|---|---:|")
    for n, r in results.items():
        runs = pd.DataFrame(r["runs"])
        print(f"| {args.epsilon:g} | {args.alpha:g} | {n} | {len(runs)} | {(runs['skipped'] > 0).mean():.0%} | "
              f"{runs['skipped'].mean():.1%} [{runs['skipped'].min():.1%}, {runs['skipped'].max():.1%}] | "
              f"{runs['realised'].mean():.2%} | {runs['error'].mean():.2%} [{runs['error'].max():.2%}] | "
              f"{(runs['error'] > args.epsilon).mean():.3f} |")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
