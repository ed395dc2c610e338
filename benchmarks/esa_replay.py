"""A replay on ESA's released campaign data (issue 68.6): Kocmi et al. 2024 (ESA) and Zouhar, Kocmi & Sachan 2024,
"AI-Assisted Human Evaluation of Machine Translation" (ESA-AI), github:wmt-conference/ErrorSpanAnnotation (GPL-3.0:
nothing of it is copied here; the files are read from the path given, and docs/spans.md keeps only the numbers).

    python benchmarks/esa_replay.py /path/to/ErrorSpanAnnotation [--runs 100] [--sample 300 600]

Read with evalstudio's own readers and statistics:

1. every ESA, ESA-AI and MQM campaign file (`format: esa`, readers.spans.read_esa): rows, segments, spans, and what
   the reader said. A segment is named itemID#documentID in every file, a name Appraise's batches file maps to its
   system, WMT23 source line and translation within the batch of the annotator's account (the n-th account has the
   n-th batch; a name alone is ambiguous in one document). The ESA-AI campaigns were run from the GEMBA batches
   file (missing from the released snapshot): their names are mapped through the ESA batches file, which the script
   checks (every answer is found in its account's batch, and ESA-AI-1's segments are those the GEMBA run scored);
2. the judge the ESA-AI annotators saw: en-de.LLM.seg.score, the MQM score (minor -1, major -5) of GEMBA's
   pre-filled spans that ESA's own loader writes (utils.load_raw_appraise_campaign("LLM")), one line per system and
   source line in mt-metrics-eval's order; a score of 0 is "no error found". Its error-free share against the
   paper's; beside it, mt-metrics-eval's GEMBA-MQM-src scores (another run of GEMBA, which the replay used before);
3. the post-edit types (removed, added, severity changed, moved: ESA's post_edit_types.py) need GEMBA's spans, which
   only the missing GEMBA batches file holds (the .seg.score gives their MQM score, not the spans): not computed;
4. agreement with ESA's own measures (stats.spans.esa_overlaps and esa_segment_agreement) for the pairs of ESA's
   scripts: each first campaign against its second (-2: other annotators, "Inter AA"; for MQM, WMT23's own MQM
   annotation in mt-metrics-eval) and against its -IAA campaign (what the scripts call "Intra AA"); the "error
   recall" of ESA's set is the ESA poster's "Error overlap recall" (misc/poster_ESA.svg); on the segments both
   rated and on ESA's own set (their FIXED_IDS,
   scripts/ESA/fixed_segment_ids.py, read from the path given, and rated by every campaign, as their
   get_view(only_overlap=True).dropna() keeps); and evalstudio's character F1 and alpha
   (span_analysis.span_agreement) per pair of annotators, pooled;
5. PAC filtering on "has an error" (exporters.analyses.error_filter and active.pac, as `active pac --criterion
   has_error` runs it): the judge as in 2, the humans ESA-1's (unassisted), each run a uniform calibration sample;
   the share skipped, the realised error on the sample and the error over all segments, at epsilon 0.05.

The tutorial documents and the "#duplicate" fillers are left out everywhere, as ESA's own loader does; where a
campaign has two answers of a segment, the later row in the file is the one ESA's loader keeps, and so here.
"""

from __future__ import annotations

import argparse
import ast
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
from evalstudio.stats.correlation import pairwise_accuracy
from evalstudio.stats.spans import esa_overlaps, esa_segment_agreement

CAMPAIGN = Path("data") / "campaign-ruction-rc5"
FILES = {"ESA-1": "240315rc5ESA.scores.csv", "ESA-2": "240520rc6ESA.scores.csv", "ESA-IAA": "240521rc6ESA.scores.csv",
         "ESAAI-1": "240315rc5GEMBA.scores.csv", "ESAAI-2": "240520rc6GEMBA.scores.csv",
         "ESAAI-IAA": "240521rc6GEMBA.scores.csv", "MQM-1": "240315rc5MQM.scores.csv",
         "MQM-IAA": "240521rc6MQM.scores.csv"}
PAIRS = (("ESA-1", "ESA-2", "inter"), ("ESAAI-1", "ESAAI-2", "inter"), ("ESA-1", "ESA-IAA", "intra"),
         ("ESAAI-1", "ESAAI-IAA", "intra"), ("MQM-1", "MQM-IAA", "intra"), ("MQM-1", "WMT-MQM", "inter"))
ESA_WEIGHTS = {"Minor": -1.0, "Major": -5.0, "Undecided": 0.0}  # ESA's MQM_WEIGHTS (utils.py) for the MQM campaigns
ESA_BATCHES = CAMPAIGN / "data" / "batches_wmt23_en-de_esa.json"
MQM_BATCHES = CAMPAIGN / "data" / "batches_wmt23_en-de_mqm.json"
GEMBA_BATCHES = CAMPAIGN / "data" / "batches_wmt23_en-de_gemba.json"
LLM_SCORES = CAMPAIGN / "en-de.LLM.seg.score"
MME = Path("data") / "mt-metrics-eval-v2" / "wmt23"
GEMBA_MME = MME / "metric-scores" / "en-de" / "GEMBA-MQM-src.seg.score"
WMT_HUMAN = (MME / "human-scores" / "en-de.mqm.seg.score", MME / "human-scores" / "en-de.da-sqm.seg.score")
WMT_RATINGS = MME / "human-scores" / "en-de.mqm.merged.seg.rating"  # WMT23's MQM errors, JSON per segment
FIXED_IDS = Path("scripts") / "ESA" / "fixed_segment_ids.py"


def read(repo: Path) -> dict[str, SpanStudy]:
    """Each campaign file as evalstudio reads it (Appraise's export of the MQM campaigns has the same layout; their
    segment score is the MQM score of the spans as ESA's loader computes it: minor -1, major -5; a Minor
    Punctuation error weighs -0.1 there, here -1, as the reader keeps no error type)."""
    spec = Spec(name="esa", layout="spans", spans={"format": "esa"})
    studies = {name: read_span_study(repo / CAMPAIGN / file, spec) for name, file in FILES.items()}
    for name, study in studies.items():
        if name.startswith("MQM"):
            spans = study.spans.assign(weight=study.spans["labels"].map(ESA_WEIGHTS).fillna(0.0))
            total = spans.groupby(["system", "item_id", "annotator"])["weight"].sum()
            keys = pd.MultiIndex.from_frame(study.segments[["system", "item", "annotator"]])
            study.segments["score"] = total.reindex(keys, fill_value=0.0).to_numpy()
    return studies


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


def batch_items(path: Path) -> dict[tuple[int, str], tuple[str, int, int]]:
    """(batch number, itemID#documentID: the name read_esa gives a segment) -> (system, source line, target length),
    from Appraise's batches file. A name alone is not enough: one document of the released campaign was split
    between two accounts with the same item numbers (ESA's loader repairs it by hand)."""
    out: dict = {}
    for number, batch in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        for item in batch["items"]:
            parts = str(item.get("_item", "")).split(" | ")
            if len(parts) == 3 and parts[1].isdigit():
                name = f"{item['itemID']}#{item['documentID']}"
                out[number, name] = (parts[0], int(parts[1]), len(item["targetText"]))
    return out


def locate(items: dict, names, logins) -> list:
    """Each answer's (system, line, length), None where not found: its name in the batch of its annotator's account
    (Appraise gives the n-th account, login ending in n in hexadecimal, the n-th batch; the replay counts the
    answers this does not find)."""
    def number(login: str) -> int:
        try:
            return int(str(login)[-2:], 16) - 1
        except ValueError:
            return -1
    return [items.get((number(who), str(name))) for name, who in zip(names, logins)]


def key(system: str, line: int) -> str:
    """A segment's key across campaigns and score files: its system and WMT23 source line."""
    return f"{system}\t{line}"


def line_scores(path: Path) -> pd.Series:
    """A score file in mt-metrics-eval's layout (system<TAB>score, each system's source lines in order; 'None':
    not scored) as a Series indexed by `key`, NaN where not scored."""
    frame = pd.read_csv(path, sep="\t", header=None, names=["system", "score"], dtype=str, keep_default_na=False)
    line = frame.groupby("system").cumcount()
    score = pd.to_numeric(frame["score"].replace("None", np.nan), errors="coerce")
    return pd.Series(score.to_numpy(), index=[key(s, n) for s, n in zip(frame["system"], line)])


def one_answer(study: SpanStudy, items: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per rated segment, keyed by (system, line): annotator, item, score, hid (ESA's hypothesisID:
    line#documentID); the spans of those answers with their segment key), keeping of two answers of a segment the
    later row in the file, as ESA's loader does; names not in the batches file are left out."""
    where = locate(items, study.segments["item"], study.segments["annotator"])
    seg = study.segments.assign(
        key=[None if w is None else key(*w[:2]) for w in where],
        hid=[None if w is None else f"{w[1]}#{d}" for w, d in zip(where, study.segments["doc"])])
    seg = seg[seg["key"].notna()].sort_values("line").drop_duplicates("key", keep="last").set_index("key")
    answer = dict(zip(zip(seg["item"], seg["annotator"]), seg.index))
    spans = study.spans.assign(segment=[answer.get(k) for k in zip(study.spans["item_id"], study.spans["annotator"])])
    return seg, spans[spans["segment"].notna()].reset_index(drop=True)


def wmt_mqm(repo: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """WMT23's own MQM annotation (mt-metrics-eval: the segment scores and, per segment, its errors as JSON) as a
    campaign's answers: (segments keyed by `key` with score, spans with segment, start, end, labels). An error marked
    in the source has no target offsets here, as ESA's [MISSING] (ESA's rule lets it agree only with such a span)."""
    score = line_scores(repo / WMT_HUMAN[0])
    frame = pd.read_csv(repo / WMT_RATINGS, sep="\t", header=None, names=["system", "rating"], dtype=str,
                        keep_default_na=False, quoting=3)
    frame["key"] = [key(s, n) for s, n in zip(frame["system"], frame.groupby("system").cumcount())]
    rows, rated = [], []
    for k, rating in zip(frame["key"], frame["rating"]):
        try:
            errors = json.loads(rating)["errors"]
        except (ValueError, TypeError, KeyError):
            continue  # 'None': not rated
        rated.append(k)
        for e in errors:
            source = bool(e.get("is_source_error"))
            rows.append({"segment": k, "start": np.nan if source else e["start"], "end": np.nan if source else e["end"],
                         "labels": str(e["severity"]).capitalize()})
    seg = pd.DataFrame({"score": score.reindex(rated).to_numpy(), "hid": ""}, index=pd.Index(rated, name="key"))
    return seg[seg["score"].notna()], pd.DataFrame(rows, columns=["segment", "start", "end", "labels"])


def esa_measures(a: tuple, b: tuple, keys: list) -> dict:
    """ESA's own agreement of two campaigns (one answer per segment each) on the segment keys given."""
    (sa, pa), (sb, pb) = a, b
    wanted = set(keys)
    pa, pb = pa[pa["segment"].isin(wanted)], pb[pb["segment"].isin(wanted)]
    def spans(frame: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"segment": frame["segment"].to_numpy(), "start": frame["start"].to_numpy(float),
                             "end": frame["end"].to_numpy(float), "severity": frame["labels"].to_numpy()})

    def errors(frame: pd.DataFrame) -> pd.DataFrame:
        sev = frame["labels"].astype(str).str.lower().to_numpy()
        kinds = pd.DataFrame({"error": True, "minor": sev == "minor", "major": sev == "major"},
                             index=frame["segment"].to_numpy())
        return kinds.groupby(level=0).any().reindex(keys, fill_value=False)

    hit, same = esa_overlaps(spans(pa), spans(pb))
    back, back_same = esa_overlaps(spans(pb), spans(pa))
    seg = esa_segment_agreement(sa.loc[keys, "score"], sb.loc[keys, "score"], errors(pa), errors(pb))
    return {"segments": len(keys), "spans": (len(pa), len(pb)), "overlap": hit.mean(), "same": same.mean(),
            "back": back.mean(), "back_same": back_same.mean(), **seg}


def pooled_agreement(first: SpanStudy, second: SpanStudy, items: dict) -> dict:
    """evalstudio's span agreement of every pair of annotators, one of each campaign, on the segments both
    annotated (named by system and source line, their lengths from the batches file): the pairs, their segments,
    the pooled character F1 (both marked / the mean marked) and the mean alpha."""
    def named(study, campaign):
        where = locate(items, study.segments["item"], study.segments["annotator"])
        segments = study.segments.assign(
            annotator=campaign + ":" + study.segments["annotator"].astype(str),
            item=[n if w is None else key(*w[:2]) for n, w in zip(study.segments["item"], where)],
            length=[np.nan if w is None else w[2] for w in where])
        found = locate(items, study.spans["item_id"], study.spans["annotator"])
        spans = study.spans.assign(
            annotator=campaign + ":" + study.spans["annotator"].astype(str),
            item_id=[n if w is None else key(*w[:2]) for n, w in zip(study.spans["item_id"], found)])
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


def pac_replay(humans: SpanStudy, items: dict, judge: pd.Series, name: str, runs: int, sample: int, epsilon: float,
               alpha: float) -> dict:
    """PAC labels on has_error, `judge` (a score per (system, line); 0: no error found) as the judge and the
    annotators of `humans` as the humans, `runs` calibration samples of `sample` segments."""
    marked = has_error(humans)
    where = locate(items, marked["item"], marked["annotator"])
    score = np.array([np.nan if w is None else judge.get(key(*w[:2]), np.nan) for w in where], dtype=float)
    keep = ~np.isnan(score)
    marked, score = marked[keep].reset_index(drop=True), score[keep]
    flagged = score < 0
    draws_base = pd.DataFrame({"system": marked["system"].astype(str), "item": marked["item"].astype(str),
                               "judge": name, "score": np.where(flagged, 2.0, 1.0),
                               "uncertainty": np.where(flagged, 1.0, 0.0), "probability": sample / len(marked),
                               "design": f"pac sample of {sample}", "seed": 0})
    ratings = pd.DataFrame({"project": "esa", "item": marked["item"], "system": marked["system"], "agent": "",
                            "annotator": marked["annotator"], "criterion": "has_error",
                            "value": np.where(marked["has_error"], LABELS[1], LABELS[0]), "line": 0})
    truth = marked["has_error"].to_numpy(bool)
    out = {"segments": len(marked), "left_out": int((~keep).sum()), "judge_error_free": float((~flagged).mean()),
           "error_skipping_all": float((~flagged & truth).mean()), "runs": []}
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


def ranking_without_error_free(segments: pd.DataFrame, judge: pd.Series) -> dict:
    """ESA-AI's check that filtering keeps the ranking (their filtering_with_gemba.py, the ESA-AI poster's "1 pair
    mismatched"): the systems' mean scores of `segments` (ESA-AI-1's answers keyed by `key`, with their score)
    against the same means (a) with every segment the judge finds error-free scored 100 ("substitute 100") and (b)
    without the source lines where at least 5 systems' translations are error-free for the judge ("filter easy");
    per variant the system pairs ordered otherwise and the share of segments it leaves out."""
    seg = pd.DataFrame({"score": segments["score"].astype(float).to_numpy(),
                        "free": judge.reindex(segments.index).to_numpy() == 0,
                        "system": [k.split("\t")[0] for k in segments.index],
                        "line": [int(k.split("\t")[1]) for k in segments.index]}, index=segments.index)
    base = seg.groupby("system")["score"].mean()
    free_per_line = seg.groupby("line")["free"].sum()
    easy = seg["line"].isin(free_per_line.index[free_per_line >= 5])
    variants = {"substitute 100": (seg.assign(score=np.where(seg["free"], 100.0, seg["score"])),
                                   float(seg["free"].mean()), "scored 100"),
                "filter easy": (seg[~easy], float(easy.mean()), "left out")}
    out = {"mean": float(seg["score"].mean()), "systems": len(base)}
    for name, (frame, share, how) in variants.items():
        other = frame.groupby("system")["score"].mean().reindex(base.index)
        accuracy, pairs = pairwise_accuracy(base.to_numpy(), other.to_numpy())
        out[name] = {"mismatched": int(round((1 - accuracy) * pairs)), "pairs": pairs, "share": share, "how": how}
    return out


def fmt(x: float, digits: int = 3) -> str:
    """A number for the table, '-' where undefined."""
    return "-" if x is None or np.isnan(x) else f"{x:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a copy of github:wmt-conference/ErrorSpanAnnotation")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--sample", type=int, nargs="+", default=[300, 600],
                        help="calibration sample sizes (segments)")
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--alpha", type=float, default=0.1)
    args = parser.parse_args()
    needed = [CAMPAIGN / f for f in FILES.values()] + [ESA_BATCHES, MQM_BATCHES, LLM_SCORES, GEMBA_MME, *WMT_HUMAN,
                                                        WMT_RATINGS]
    missing = [str(p) for p in needed if not (args.repo / p).is_file()]
    if missing:
        parser.error(f"{args.repo}: not a copy of wmt-conference/ErrorSpanAnnotation with its data: missing "
                     f"{', '.join(missing[:3])}{' and more' if len(missing) > 3 else ''}")
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

    items = batch_items(args.repo / ESA_BATCHES)
    mqm_items = batch_items(args.repo / MQM_BATCHES)
    named = {name: mqm_items if name.startswith("MQM") else items for name in studies}
    llm = line_scores(args.repo / LLM_SCORES)
    scored = set(llm.index[llm.notna()])
    answers = {name: one_answer(study, named[name]) for name, study in studies.items()}
    answers["WMT-MQM"] = wmt_mqm(args.repo)
    esaai = answers["ESAAI-1"][0]
    lost = {n: sum(w is None for w in locate(named[n], s.segments["item"], s.segments["annotator"]))
            for n, s in studies.items()}
    print(f"\nSegment names: each answer's name is looked up in its account's batch (ESA's batches file; MQM's for "
          f"MQM); not found: {sum(lost.values())} answers of {sum(len(s.segments) for s in studies.values())}. "
          f"ESAAI-1's {len(esaai)} segments so found are "
          f"{len(set(esaai.index) & scored)} of the {len(scored)} the GEMBA run scored (en-de.LLM.seg.score).")
    llm_zero = llm.reindex(esaai.index).to_numpy() == 0
    esaai_none = ~esaai.index.isin(set(answers["ESAAI-1"][1]["segment"]))
    print(f"Check of that mapping: where GEMBA found no error, the ESA-AI annotators marked none in "
          f"{esaai_none[llm_zero].mean():.1%} of the segments, against {esaai_none[~llm_zero].mean():.1%} where it "
          f"found one (ESA-AI's poster: 'When QE pre-annotates no errors, 90% annotators agree').")

    print(f"\nThe judge the ESA-AI annotators saw (GEMBA's pre-filled spans as MQM scores, {LLM_SCORES.name}): "
          f"{int((llm == 0).sum())} of {len(scored)} segments error-free, {(llm == 0).sum() / len(scored):.1%} "
          f"(the paper: the budget 'can be reduced by up to 24%', arXiv v1; 'almost 25%', v3). Scores are whole "
          f"numbers from {llm.min():g} to {llm.max():g}; a 0 is no span or only spans that weigh 0 (ESA's "
          "MQM_WEIGHTS give 'undecided' 0), which the scores cannot tell apart.")
    mme = line_scores(args.repo / GEMBA_MME)
    print(f"mt-metrics-eval's GEMBA-MQM-src (another GEMBA run): error-free in "
          f"{(mme.reindex(sorted(scored)) == 0).mean():.1%} of the same segments.")

    ranks = ranking_without_error_free(esaai, llm)
    print(f"ESA-AI-1's mean score {ranks['mean']:.2f} (the ESA-AI poster: 76.7). Filtering and the ranking of its "
          f"{ranks['systems']} systems (ESA's filtering_with_gemba.py; the poster: '1 pair mismatched'): "
          + "; ".join(f"{name} ({r['share']:.1%} of the segments {r['how']}): {r['mismatched']} of {r['pairs']} "
                      "pairs ordered otherwise" for name, r in ranks.items() if isinstance(r, dict)) + ".")

    print("\nPost-edit types (removed, added, severity changed, moved; ESA's post_edit_types.py): not computed. They "
          f"need the spans GEMBA pre-filled, which only {GEMBA_BATCHES.name} holds"
          + (" (present in this copy, but this script does not read it yet)." if (args.repo / GEMBA_BATCHES).exists()
             else " (missing from this copy); the released .seg.score gives each segment's prefill as an MQM score, "
                  "not its spans, and the score exports hold only the humans' final spans."))

    fixed_file = args.repo / FIXED_IDS
    fixed = set(ast.literal_eval(fixed_file.read_text(encoding="utf-8").split("=", 1)[1].strip())) \
        if fixed_file.exists() else None
    every = set.intersection(*(set(seg.index) for seg, _ in answers.values()), scored,
                             *(set(s.index[s.notna()]) for s in (line_scores(args.repo / p) for p in WMT_HUMAN)))
    print("\n| ESA's measures | kind | segments | spans (first, second) | first's spans overlapping the second's | "
          "same severity | second's overlapping the first's | same severity | Kendall tau-c | Pearson | "
          "error agreement | minor | major |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for first, second, kind in PAIRS:
        a, b = answers[first], answers[second]
        both = sorted(set(a[0].index) & set(b[0].index))
        sets = [("both rated", both)]
        if fixed is not None:
            ids = set(a[0]["hid"])
            sets.append(("ESA's set", [k for k in both if k in every and a[0].at[k, "hid"] in fixed and
                                       a[0].at[k, "hid"] in ids]))
        for label, keys in sets:
            r = esa_measures(a, b, keys)
            print(f"| {first} vs {second} | {kind} | {label}: {r['segments']} | {r['spans'][0]}, {r['spans'][1]} | "
                  f"{r['overlap']:.1%} | {r['same']:.1%} | {r['back']:.1%} | {r['back_same']:.1%} | "
                  f"{fmt(r['kendall_tau_c'])} | {fmt(r['pearson'])} | {r['error']:.1%} | {r['minor']:.1%} | "
                  f"{r['major']:.1%} |")

    print("\n| evalstudio's span agreement | annotator pairs | segments | character F1 | F1, same severity | "
          "alpha (mean) |")
    print("|---|---:|---:|---:|---:|---:|")
    for first, second, _ in PAIRS[:-1]:  # (WMT's MQM is no campaign file)
        r = pooled_agreement(studies[first], studies[second], named[first])
        print(f"| {first} vs {second} | {r['pairs']} | {r['segments']} | {r['f1']:.3f} | {r['f1_label']:.3f} | "
              f"{fmt(r['alpha'])} |")

    results = {n: pac_replay(studies["ESA-1"], items, llm, "GEMBA (ESA-AI's prefill)", args.runs, n, args.epsilon,
                             args.alpha) for n in args.sample}
    r = results[args.sample[0]]
    print(f"\nPAC filtering on has_error: GEMBA's prefill (en-de.LLM.seg.score) as the judge, ESA-1's annotators as "
          f"the humans, {r['segments']} segments ({r['left_out']} without a name in the batches file or a judge "
          f"score left out); the judge finds no error in {r['judge_error_free']:.1%} of them; skipping all of those "
          f"would leave {r['error_skipping_all']:.1%} of all segments with an error the humans marked unannotated.")
    print("\n| epsilon | alpha | calibration sample | runs | runs that skip | share skipped (mean [min, max]) | "
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
