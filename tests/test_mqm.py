"""Error-span studies re-analysed from their published files (`layout: spans`): the oracle is the TED talks en-de
MQM study of Freitag et al. 2021 (github:google/wmt-mqm-human-evaluation), whose README publishes each system's
MQM score and whose avg_seg_scores file publishes each segment's; `evalstudio analyze` reproduces both from the raw
TSV. Span agreement is checked against sets of marked characters, hostile files are refused at their line."""

from __future__ import annotations

import csv
import gzip
import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalstudio.base.errors import BadInput
from evalstudio.cli import app
from evalstudio.readers.spans import read_span_study
from evalstudio.readers.spec import Spec
from evalstudio.stats.agreement import krippendorff_alpha
from evalstudio.stats.spans import paired_permutation, span_agreement

DATA = Path(__file__).parent / "data" / "mqm_ted"
TED = DATA / "mqm_ted_ende.tsv.gz"
PUBLISHED = json.loads((DATA / "published.json").read_text(encoding="utf-8"))
HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\tcomment\n"


def analyze(folder: Path, ratings: Path, spec_text: str) -> Path:
    spec = folder / "spec.yaml"
    spec.write_text(spec_text, encoding="utf-8")
    out = folder / "out"
    result = CliRunner().invoke(app, ["analyze", str(ratings), "--spec", str(spec), "-o", str(out),
                                      "--bootstrap", "10", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def ted(tmp_path_factory) -> Path:
    return analyze(tmp_path_factory.mktemp("ted"), TED, "name: TED en-de\nlayout: spans\nspans: {format: mqm}\n")


@pytest.mark.parametrize("system,published", sorted(PUBLISHED["mqm"].items()))
def test_the_ted_system_scores_are_the_readmes(ted, system, published):
    systems = pd.read_csv(ted / "mqm_systems.csv").set_index("system")
    name = PUBLISHED["names_in_tsv"].get(system, system)
    score = systems.loc[name, "score"]
    if system in PUBLISHED["truncated"]:  # the README cut 1.9688 to 1.96 (published.json says why)
        assert f"{np.floor(score * 100) / 100:.2f}" == published and f"{score:.2f}" != published
    else:
        assert f"{score:.2f}" == published
    assert systems.loc[name, "segments"] == 529


def test_the_ted_ranking_is_the_readmes(ted):
    systems = pd.read_csv(ted / "mqm_systems.csv")
    readme = sorted(PUBLISHED["mqm"], key=lambda s: float(PUBLISHED["mqm"][s]))
    assert list(systems["system"]) == [PUBLISHED["names_in_tsv"].get(s, s) for s in readme]
    assert systems["cluster"].is_monotonic_increasing and systems["cluster"].iloc[0] == 1


def test_the_ted_segment_scores_are_the_published_ones(ted):
    with gzip.open(DATA / "mqm_ted_ende.avg_seg_scores.tsv.gz", "rt", encoding="utf-8") as f:
        published = pd.read_csv(f, sep=r"\s+", dtype=str, keep_default_na=False)
    published["system"] = published["system"].replace({"ref-A": "ref"})
    ours = pd.read_csv(ted / "mqm_segments.csv", dtype={"item": str})
    rated = published[published["mqm_avg_score"] != "None"]
    merged = rated.merge(ours, left_on=["system", "seg_id"], right_on=["system", "item"], how="outer", indicator=True)
    assert (merged["_merge"] == "both").all() and len(merged) == len(ours) == 7406
    assert np.array_equal(-merged["mqm_avg_score"].astype(float).to_numpy(), merged["score"].to_numpy())


def test_weights_are_settable_in_the_spec(tmp_path):
    """Minor Fluency/Punctuation weighed 1 instead of 0.1: each system's score grows by 0.9 x its count of such
    errors / its segments, counted here from the raw file."""
    rules = "\n".join(f"    - {{severity: {s!r}, category: {c!r}, weight: {w}}}" for s, c, w in
                      [("", "Non-translation", 25), ("Major", "", 5), ("Minor", "", 1), ("Neutral", "", 0),
                       ("No-error", "", 0)])
    out = analyze(tmp_path, TED, f"layout: spans\nspans:\n  format: mqm\n  weights:\n{rules}\n")
    (tmp_path / "default").mkdir()
    default = analyze(tmp_path / "default", TED, "layout: spans\n")
    with gzip.open(TED, "rt", encoding="utf-8") as f:
        raw = pd.read_csv(f, sep="\t", dtype=str, quoting=csv.QUOTE_NONE, keep_default_na=False)
    punctuation = raw[(raw["severity"] == "Minor") & (raw["category"] == "Fluency/Punctuation")].groupby("system").size()
    new = pd.read_csv(out / "mqm_systems.csv").set_index("system")["score"]
    old = pd.read_csv(default / "mqm_systems.csv").set_index("system")["score"]
    expected = old + 0.9 * punctuation.reindex(old.index).fillna(0) / 529
    assert np.allclose(new.reindex(old.index), expected, atol=1e-12)


def _chars(spans: pd.DataFrame, who: str) -> set:
    mine = spans[spans["annotator"] == who]
    return {(s, i) for s, a, b in zip(mine["segment"], mine["start"], mine["end"]) for i in range(int(a), int(b))}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.sampled_from(["a", "b"]),
                          st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=12))
def test_span_overlap_is_the_share_of_marked_characters(marks):
    """Character precision, recall and F1 equal those of sets of (segment, position) marked by each annotator."""
    spans = pd.DataFrame([(s, w, min(x, y), max(x, y), "Major") for s, w, x, y in marks],
                         columns=["segment", "annotator", "start", "end", "severity"])
    r = span_agreement(spans, pd.Series({"s1": 20, "s2": 20, "s3": 20}), "a", "b")
    a, b = _chars(spans, "a"), _chars(spans, "b")
    assert r["marked_first"] == len(a) and r["marked_second"] == len(b)
    if a or b:
        assert r["f1"] == pytest.approx(2 * len(a & b) / (len(a) + len(b)))
    if b:
        assert r["precision"] == pytest.approx(len(a & b) / len(b))
    labels = {w: np.zeros(60) for w in ("a", "b")}  # the characters' labels, as krippendorff_alpha reads them
    for w, chars in (("a", a), ("b", b)):
        for segment, i in chars:
            labels[w][["s1", "s2", "s3"].index(segment) * 20 + i] = 2  # Major
    if (labels["a"] != labels["a"][0]).any() or (labels["b"] != labels["a"][0]).any():
        expected = krippendorff_alpha(np.tile(np.arange(60), 2), np.concatenate([labels["a"], labels["b"]]), "nominal")
        assert r["alpha"] == pytest.approx(expected, nan_ok=True)


def test_paired_permutation_agrees_with_scipy():
    """The one-sided p of 'a scores higher than b' is scipy's paired permutation test's (statistic: mean
    difference), up to the resampling error."""
    from scipy import stats

    rng = np.random.default_rng(3)
    a, b = rng.normal(0.3, 1, 40), rng.normal(0, 1, 40)
    ours = paired_permutation(np.vstack([a, b]), resamples=20000, seed=1)[0, 1]
    theirs = stats.permutation_test((a, b), lambda x, y: np.mean(x - y), permutation_type="samples",
                                    alternative="greater", n_resamples=20000, random_state=2).pvalue
    assert abs(ours - theirs) < 0.015


TWO_RATERS = (HEADER
              + "A\td\t1\t1\tr1\tsrc\tDas <v>ist</v> gut\tAccuracy/Mistranslation\tMajor\t\n"
              + "A\td\t1\t1\tr2\tsrc\t<v>Das ist</v> gut\tStyle/Awkward\tMinor\t\n"
              + "B\td\t1\t1\tr1\tsrc\tDas ist gut\tNo-error\tNo-error\t\n"
              + "B\td\t1\t1\tr2\tsrc\tDas ist <v>gut</v>\tFluency/Punctuation\tMinor\t\n")


def test_two_raters_of_a_segment_get_span_agreement(tmp_path):
    ratings = tmp_path / "two.tsv"
    ratings.write_text(TWO_RATERS, encoding="utf-8")
    out = analyze(tmp_path, ratings, "layout: spans\n")
    row = pd.read_csv(out / "span_agreement.csv").iloc[0]
    # r1 marks 'ist' (3 characters) of A; r2 marks 'Das ist' (7) of A and 'gut' (3) of B: 3 in common
    assert (row["first"], row["second"], row["segments"]) == ("r1", "r2", 2)
    assert (row["marked_first"], row["marked_second"]) == (3, 10)
    assert row["precision"] == pytest.approx(3 / 10) and row["recall"] == 1.0
    segments = pd.read_csv(out / "mqm_segments.csv")
    assert segments["raters"].tolist() == [2, 2]


BAD_ROWS = [
    ("A\td\t1\t1\tr1\tsrc\tt\tAccuracy\tCritical\t\n", "severity", "no weight for severity 'Critical'"),
    ("A\td\t1\t1\t\tsrc\tt\tAccuracy\tMajor\t\n", "rater", "empty"),
    ("A\td\t1\t1\tr1\tsrc\tt\n", None, "cell(s), the header has 10"),
    ("\td\t1\t1\tr1\tsrc\tt\tAccuracy\tMajor\t\n", "system", "empty"),
]


@pytest.mark.parametrize("row,field,message", BAD_ROWS)
def test_a_bad_row_is_reported_at_its_line(tmp_path, row, field, message):
    ratings = tmp_path / "bad.tsv"
    ratings.write_text(HEADER + "A\td\t1\t2\tr1\tsrc\tt\tNo-error\tNo-error\t\n" + row, encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text("layout: spans\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["analyze", str(ratings), "--spec", str(spec), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    where = f"{ratings}:3: " + (f"{field}: " if field else "")
    assert where in result.output.replace("\n", "") and message in result.output.replace("\n", "")
    assert not (tmp_path / "o").exists()


CELL = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"), max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.one_of(CELL, st.sampled_from(["Major", "Minor", "No-error", "<v>x</v>", "<v>", ""])),
                         min_size=8, max_size=11), max_size=8))
def test_hostile_mqm_files_are_read_or_refused_at_a_line(rows):
    """Any file is read or refused with `file:line: field: message`; nothing else escapes."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "h.tsv"
        path.write_text(HEADER + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
        try:
            study = read_span_study(path, Spec(layout="spans"))
        except BadInput as e:
            assert re.search(rf"{re.escape(str(path))}(:\d+)?: ", str(e)), str(e)
            return
        assert len(study.segments) <= len(rows)
        assert study.segments["score"].ge(0).all()
        marked = study.spans.dropna(subset=["start"])
        assert (marked["end"] >= marked["start"]).all()


ESA = ('u1,wmt23.A,1,TGT,eng,deu,80,doc1#A,False,"[{""start_i"":0,""end_i"":4,""severity"":""major"",""error_type"":null}]",1,2\n'
       'u2,wmt23.A,1,TGT,eng,deu,60,doc1#A,False,"[{""start_i"":2,""end_i"":4,""severity"":""minor"",""error_type"":null},'
       '{""start_i"":""missing"",""end_i"":""missing"",""severity"":""major"",""error_type"":null}]",1,2\n'
       'u1,wmt23.B,1,TGT,eng,deu,100,doc1#B,False,[],1,2\n'
       'u1,wmt23.B,2,BAD,eng,deu,10,doc1#B#bad,False,[],1,2\n')


def test_an_esa_export_is_read_with_scores_and_spans(tmp_path):
    """Appraise's export as ESA's repository publishes it: the attention check (BAD) is left out, the span for
    missing content has no offsets, systems are ranked by their mean 0-100 score."""
    ratings = tmp_path / "esa.csv"
    ratings.write_text(ESA, encoding="utf-8")
    study = read_span_study(ratings, Spec(layout="spans", spans={"format": "esa"}))
    assert len(study.segments) == 3 and "1 row(s) that are not TGT" in study.notes[0]
    assert study.spans["start"].isna().sum() == 1 and len(study.spans) == 3
    out = analyze(tmp_path, ratings, "layout: spans\nspans: {format: esa}\n")
    systems = pd.read_csv(out / "esa_systems.csv").set_index("system")
    assert systems.loc["wmt23.A", "score"] == 70 and systems.loc["wmt23.B", "score"] == 100
    agreement = pd.read_csv(out / "span_agreement.csv").iloc[0]
    assert (agreement["precision"], agreement["recall"]) == (1.0, 0.5) and np.isnan(agreement["alpha"])


# ---- the MQM TSV imported as tasks of the mqm and esa protocols -----------------------------------------------------

@pytest.mark.parametrize("protocol", ["mqm", "esa"])
def test_the_ted_tsv_imports_as_one_task_per_translated_segment(reg, tmp_path, protocol):
    from evalstudio.protocols.mapping import importer_for
    from evalstudio.tasks.scanning import iter_tasks, scan, split_task

    path = TED  # the file as the tree holds it, gzipped (docs/spans.md: import mqm tests/data/mqm_ted/mqm_ted_ende.tsv.gz)
    project = reg.get(protocol)
    result = scan(project, importer_for(project), [path])
    with gzip.open(TED, "rt", encoding="utf-8") as f:
        raw = pd.read_csv(f, sep="\t", dtype=str, quoting=csv.QUOTE_NONE, keep_default_na=False)
    tasks = [split_task(project, data) for _, data in iter_tasks(project, importer_for(project), [path])]
    originals = [t for t in tasks if "attention_check" not in t["meta"]]  # (esa: and its attention checks)
    assert result.problems == [] and result.tasks == len(tasks)
    assert len(originals) == len(raw.drop_duplicates(["system", "seg_id"]))
    assert (len(tasks) > len(originals)) == (project.attention_checks is not None)
    first = next(t for t in tasks if t["meta"]["system"] == "Nemo" and t["data"]["target"].startswith("Ich"))
    shown = json.dumps([t["data"] for t in tasks], ensure_ascii=False)
    assert "<v>" not in shown and "</v>" not in shown and "Nemo" not in shown  # the system is hidden
    row = raw[(raw["system"] == "Nemo") & (raw["seg_id"] == "1")].iloc[0]
    assert first["data"]["target"] == row["target"].replace("<v>", "").replace("</v>", "")
    if protocol == "mqm":  # the document context: the same system's earlier segments of the talk
        second = next(t for t in tasks if t["meta"]["system"] == "Nemo" and t["data"]["target"] ==
                      raw[(raw["system"] == "Nemo") & (raw["seg_id"] == "2")].iloc[0]["target"]
                      .replace("<v>", "").replace("</v>", ""))
        assert second["data"]["context"] == first["data"]["target"]
    else:
        assert first["data"]["missing"] == "[MISSING]"


def test_two_rows_of_a_segment_with_different_texts_are_reported(reg, tmp_path):
    from evalstudio.protocols.mapping import importer_for
    from evalstudio.tasks.scanning import scan

    path = tmp_path / "two.tsv"
    path.write_text(HEADER + "A\td\t1\t1\tr1\tsrc\tDas <v>ist</v> gut\tStyle/Awkward\tMinor\t\n"
                    + "A\td\t1\t1\tr2\tsrc\tDas ist schlecht\tNo-error\tNo-error\t\n", encoding="utf-8")
    problems = scan(reg.get("mqm"), importer_for(reg.get("mqm")), [path]).problems
    assert [(p.line, p.field) for p in problems] == [(3, "target")] and "differs from line 2" in problems[0].message


# ---- metrics against MQM: meta-evaluation and PPI++ -----------------------------------------------------------------

def test_a_metric_is_meta_evaluated_and_ppi_estimated_against_mqm(tmp_path):
    """A metric (here: minus the target's length, scored on every translated segment, rated or not) is correlated
    with the TED MQM scores at system and segment level, as scipy correlates the same numbers, and PPI++ estimates
    each system's MQM from it beside the human-only mean, which is the README's score negated."""
    from scipy import stats

    with gzip.open(TED, "rt", encoding="utf-8") as f:
        raw = pd.read_csv(f, sep="\t", dtype=str, quoting=csv.QUOTE_NONE, keep_default_na=False)
    with gzip.open(DATA / "mqm_ted_ende.avg_seg_scores.tsv.gz", "rt", encoding="utf-8") as f:
        every = pd.read_csv(f, sep=r"\s+", dtype=str, keep_default_na=False)
    every["system"] = every["system"].replace({"ref-A": "ref"})
    length = raw.assign(n=raw["target"].str.replace("<v>", "").str.replace("</v>", "").str.len()) \
        .drop_duplicates(["system", "seg_id"]).set_index(["system", "seg_id"])["n"]
    metric = every[["system", "seg_id"]].assign(metric="short", value=-length.reindex(
        pd.MultiIndex.from_frame(every[["system", "seg_id"]])).fillna(100).to_numpy())
    metric = metric.rename(columns={"seg_id": "item"})
    metrics = tmp_path / "metrics.csv"
    metric.to_csv(metrics, index=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text("layout: spans\n", encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["analyze", str(TED), "--spec", str(spec), "--metrics", str(metrics), "--ppi",
                                      "short", "-o", str(out), "--bootstrap", "10", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    correlations = pd.read_csv(out / "correlations.csv")
    pearson = correlations[(correlations["method"] == "pearson") & (correlations["grouping"] == "none")
                           & (correlations["criterion"] == "MQM")].set_index("level")["value"]
    systems = pd.read_csv(out / "mqm_systems.csv").set_index("system")["score"]
    rated = metric.merge(pd.read_csv(out / "mqm_segments.csv", dtype={"item": str}), on=["system", "item"])
    per_system = rated.groupby("system")["value"].mean().reindex(systems.index)
    assert pearson["system"] == pytest.approx(stats.pearsonr(-systems, per_system)[0], abs=1e-9)
    assert pearson["segment"] == pytest.approx(stats.pearsonr(-rated["score"], rated["value"])[0], abs=1e-9)
    ppi = pd.read_csv(out / "ppi_systems.csv")
    assert set(ppi["criterion"]) == {"MQM"} and len(ppi) == 14 and (ppi["n_labelled"] == 529).all()
    unrated = (every["mqm_avg_score"] == "None").groupby(every["system"]).sum()
    assert (ppi.set_index("system")["n_unlabelled"] == unrated.reindex(ppi["system"]).to_numpy()).all()
    assert np.allclose(ppi.set_index("system")["classical"], -systems.reindex(ppi["system"]).to_numpy())


SPAN_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.text(max_size=6),
                                   st.just("missing"), st.sampled_from(["minor", "major", "Major", "critical"])),
                         lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                 st.dictionaries(st.sampled_from(["start_i", "end_i", "severity"]),
                                                                 inner, max_size=3)), max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["u1", "u2", ""]), st.sampled_from(["A", "B"]), st.integers(0, 3),
                          st.sampled_from(["TGT", "BAD"]), st.one_of(st.integers(-10, 120).map(str), CELL),
                          st.one_of(SPAN_JSON.map(json.dumps), CELL)), min_size=1, max_size=6))
def test_hostile_esa_exports_are_read_or_refused_at_a_line(rows):
    """Any Appraise export is read or refused with `file:line: field: message`."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "esa.csv"
        with open(path, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            for who, system, item, kind, score, spans in rows:
                writer.writerow([who, system, item, kind, "eng", "deu", score, "doc#" + system, "False", spans, 1, 2])
        try:
            study = read_span_study(path, Spec(layout="spans", spans={"format": "esa"}))
        except BadInput as e:
            assert re.search(rf"{re.escape(str(path))}(:\d+)?: ", str(e)), str(e)
            return
        assert study.segments["score"].between(0, 100).all()
        marked = study.spans.dropna(subset=["start"])
        assert (marked["end"] >= marked["start"]).all() and set(study.spans["labels"]) <= {"Minor", "Major", "Undecided"}


def test_a_label_studio_export_gives_the_study_a_published_file_gives(tmp_path):
    """The TWO_RATERS file as a Label Studio export of the mqm protocol would hold it (the spans table and the
    annotations table of exporters.tables.tidy): the same segment scores and span agreement as read from the file."""
    from evalstudio.exporters.analyses.span_analysis import span_tables
    from evalstudio.readers.spans import study_from_export

    path = tmp_path / "two.tsv"
    path.write_text(TWO_RATERS, encoding="utf-8")
    published = read_span_study(path, Spec(layout="spans"))
    ids = {("A", "r1"): 1, ("A", "r2"): 2, ("B", "r1"): 3, ("B", "r2"): 4}
    tasks = {"A": 10, "B": 11}
    spans = published.spans.assign(annotation_id=[ids[(s, a)] for s, a in zip(published.spans["system"],
                                                                                published.spans["annotator"])],
                                   task_id=[tasks[s] for s in published.spans["system"]])
    annotations = pd.DataFrame({"task_id": [tasks[s] for s, _ in ids], "item_id": "1", "system": [s for s, _ in ids],
                                "annotator": [a for _, a in ids], "annotation_id": list(ids.values()),
                                "criterion": "non_translation", "value": None, "cancelled": False, "surplus": False})
    lengths = pd.Series({10: len("Das ist gut"), 11: len("Das ist gut")})
    exported = study_from_export(spans, annotations, "mqm", lengths)
    ours, _ = span_tables(exported, resamples=100)
    theirs, _ = span_tables(published, resamples=100)
    for name in ("mqm_segments", "mqm_systems", "span_agreement"):
        pd.testing.assert_frame_equal(ours[name], theirs[name], check_dtype=False)
    ticked = annotations.assign(value=["Non-translation", None, None, None])
    assert study_from_export(spans, ticked, "mqm", lengths).segments["score"].iloc[0] == \
        exported.segments["score"].iloc[0] + 25  # the whole-segment error: five Major errors


def test_no_error_rows_weigh_nothing_whatever_the_rules(tmp_path):
    """A spec's own rules need no rule for No-error rows (before: every No-error row was reported as unweighted)."""
    path = tmp_path / "two.tsv"
    path.write_text(TWO_RATERS, encoding="utf-8")
    rules = [{"severity": "Major", "weight": 10}, {"severity": "Minor", "weight": 2}]
    study = read_span_study(path, Spec(layout="spans", spans={"weights": rules}))
    weight = {"Major": 10, "Minor": 2, "No-error": 0}
    rows = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    expected = rows.assign(w=rows["severity"].map(weight)).groupby(["system", "seg_id", "rater"])["w"].sum()
    assert study.segments.set_index(["system", "item", "annotator"])["score"].tolist() == expected.tolist()


# ---- `analyze --protocol mqm|esa` on a Label Studio export: the same tables as the published file -----------------

def _region(ident, control, to_name, text, start, end, label, category=None):
    where = {"start": start, "end": end, "text": text[start:end]}
    out = [{"id": ident, "from_name": control, "to_name": to_name, "type": "labels", "value": {**where, "labels": [label]}}]
    if category:
        out.append({"id": ident, "from_name": "category", "to_name": to_name, "type": "choices",
                    "value": {**where, "choices": [category]}})
    return out


UNDECIDED = '[{""start_i"":0,""end_i"":4,""severity"":""undecided"",""error_type"":null}]'
# what ESA's released campaigns hold (ErrorSpanAnnotation data/campaign-ruction-rc5): one row per case, the rows
# (annotator, system, item, score, document, spans, end time), and what the reader must make of them
RELEASED = [
    ("a span whose severity was never chosen", [("u1", "A", "1", "70", "d1#A", f'"{UNDECIDED}"', "5")],
     [("A", "1", "u1", 70.0)], ["Undecided"], None),
    ("a row exported twice, cell for cell", [("u1", "A", "1", "70", "d1#A", "[]", "5")] * 2,
     [("A", "1", "u1", 70.0)], [], "repeating an earlier row cell for cell"),
    ("an answer given again: the last one counts", [("u1", "A", "1", "90", "d1#A", "[]", "9"),
                                                    ("u1", "A", "1", "70", "d1#A", "[]", "5")],
     [("A", "1", "u1", 90.0)], [], "answered again left out"),
    ("one item number in two documents: two segments", [("u1", "A", "1", "70", "d1#A", "[]", "5"),
                                                       ("u2", "A", "1", "40", "d2#A", "[]", "6")],
     [("A", "1#d1#A", "u1", 70.0), ("A", "1#d2#A", "u2", 40.0)], [], "item numbers repeat across documents"),
]


@pytest.mark.parametrize("why, rows, segments, labels, note", RELEASED, ids=[r[0] for r in RELEASED])
def test_what_the_released_esa_campaigns_hold_is_read(tmp_path, why, rows, segments, labels, note):
    """The released ESA campaigns were refused whole: an 'undecided' severity, a row exported twice, an answer
    given again, and Appraise's item numbers (positions in a batch) naming segments of several documents, which
    were taken for one segment (agreement between annotators of different segments)."""
    path = tmp_path / "esa.csv"
    path.write_text("".join(f"{who},{system},{item},TGT,eng,deu,{score},{doc},False,{spans},1,{end}\n"
                            for who, system, item, score, doc, spans, end in rows), encoding="utf-8")
    study = read_span_study(path, Spec(layout="spans", spans={"format": "esa"}))
    got = sorted(zip(study.segments["system"], study.segments["item"], study.segments["annotator"],
                     study.segments["score"]))
    assert got == segments and list(study.spans["labels"]) == labels
    assert note is None or any(note in n for n in study.notes), study.notes


TEXT = "Das ist gut"
# the spans of TWO_RATERS and ESA above, as Label Studio's editor stores them in a project of the mqm or esa protocol
AS_EXPORTED = {
    "mqm": (TWO_RATERS, "two.tsv", "layout: spans\n", {
        ("A", "r1"): _region("a", "errors", "target", TEXT, 4, 7, "Major", "Accuracy/Mistranslation"),
        ("A", "r2"): _region("b", "errors", "target", TEXT, 0, 7, "Minor", "Style/Awkward"),
        ("B", "r1"): [],
        ("B", "r2"): _region("c", "errors", "target", TEXT, 8, 11, "Minor", "Fluency/Punctuation")}),
    "esa": (ESA, "esa.csv", "layout: spans\nspans: {format: esa}\n", {
        ("wmt23.A", "u1"): _region("a", "errors", "target", TEXT, 0, 4, "Major") + [80],
        ("wmt23.A", "u2"): _region("b", "errors", "target", TEXT, 2, 4, "Minor")
        + _region("c", "missing_errors", "missing", "[MISSING]", 0, 9, "Major") + [60],
        ("wmt23.B", "u1"): [100]}),
}


def write_export(tmp_path: Path, protocol: str) -> tuple[str, str]:
    """AS_EXPORTED[protocol] written to tmp_path: projects.yaml (the shipped entry, two annotators per task),
    export.json (the Label Studio export) and the published file with its spec.yaml; (the file's name, the spec)."""
    import yaml

    text, name, spec, answers = AS_EXPORTED[protocol]
    root = Path(__file__).resolve().parents[1]
    raw = yaml.safe_load((root / "projects.yaml").read_text())
    entry = {**raw["projects"][protocol], "config": str(root / raw["projects"][protocol]["config"]),
             "annotators_per_task": 2}
    (tmp_path / "projects.yaml").write_text(yaml.safe_dump({"projects": {protocol: entry}}))
    tasks, ids = {}, iter(range(1, 100))
    for (system, rater), result in answers.items():
        task = tasks.setdefault(system, {"id": 10 + len(tasks), "annotations": [], "data": {
            "item_id": "1", "system": system, "source_text": "src", "target": TEXT, "context": "", "missing": "[MISSING]"}})
        regions = [r for r in result if isinstance(r, dict)]
        regions += [{"from_name": "score", "to_name": "target", "type": "number", "value": {"number": r}}
                    for r in result if not isinstance(r, dict)]
        task["annotations"].append({"id": next(ids), "completed_by": {"id": len(task["annotations"]) + 1, "email": rater},
                                    "result": regions, "was_cancelled": False})
    (tmp_path / "export.json").write_text(json.dumps(list(tasks.values())))
    (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "spec.yaml").write_text(spec)
    return name, spec


@pytest.mark.parametrize("protocol", ["mqm", "esa"])
def test_analyze_of_a_label_studio_export_gives_the_published_files_tables(tmp_path, protocol):
    """The same spans (and ESA's scores) as a published file and as a Label Studio export of the shipped protocol:
    `evalstudio analyze --protocol` on the export writes the systems, segments and span agreement tables that
    `evalstudio analyze --spec` writes for the file (ESA's file holds no texts: its alpha is not computed)."""
    name, _ = write_export(tmp_path, protocol)
    runner = CliRunner()
    exported = runner.invoke(app, ["analyze", str(tmp_path / "export.json"), "--protocol", protocol, "--projects",
                                   str(tmp_path / "projects.yaml"), "-o", str(tmp_path / "ours"), "--bootstrap", "0",
                                   "--resamples", "100"])
    assert exported.exit_code == 0, exported.output
    published = runner.invoke(app, ["analyze", str(tmp_path / name), "--spec", str(tmp_path / "spec.yaml"), "-o",
                                    str(tmp_path / "theirs"), "--bootstrap", "0", "--resamples", "100"])
    assert published.exit_code == 0, published.output
    for table in (f"{protocol}_systems.csv", f"{protocol}_segments.csv", "span_agreement.csv"):
        ours, theirs = (pd.read_csv(tmp_path / side / table) for side in ("ours", "theirs"))
        if protocol == "esa" and table == "span_agreement.csv":
            assert ours["alpha"].notna().all() and theirs["alpha"].isna().all()  # the export has the texts
            ours, theirs = ours.drop(columns=["alpha", "characters"]), theirs.drop(columns=["alpha", "characters"])
        pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
