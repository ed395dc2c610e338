"""Ratings from anywhere: layouts, specs and formats give the same tidy frame; bad files are reported as
`file:line: column: message` with exit code 2 and nothing analysed; fuzzed files never crash `analyze`."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalstudio.base.errors import BadInput, InvalidInput
from evalstudio.cli import app
from evalstudio.readers.ratings import read_metrics, read_ratings
from evalstudio.readers.spec import Spec, read_spec

from .conftest import CLI_FUZZ_EXAMPLES

SPEC_1_5 = "criteria:\n  quality: {scale: interval, min: 1, max: 5}\n  fluency: {scale: ordinal, labels: [bad, ok, good]}\n"
LONG = "item,annotator,criterion,value\n1,a,quality,4\n1,b,quality,5\n2,a,quality,2\n2,b,quality,N/A\n1,a,fluency,good\n"


def invoke(*args):
    result = CliRunner().invoke(app, ["analyze", *map(str, args)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.output
    return result


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def analyze_with_metrics(folder: Path, ratings: list[dict], scores: list[dict], scale: str):
    """`analyze` of these ratings and metric scores (one criterion q on 1-5 at `scale`), 10 bootstrap resamples."""
    pd.DataFrame(ratings).to_csv(folder / "r.csv", index=False)
    pd.DataFrame(scores).to_csv(folder / "m.csv", index=False)
    spec = write(folder, "spec.yaml", f"criteria:\n  q: {{scale: {scale}, min: 1, max: 5}}\n")
    return invoke(folder / "r.csv", "--metrics", folder / "m.csv", "--spec", spec, "-o", folder / "out",
                  "--bootstrap", "10")


BAD = [
    # (file content, expected `file:line: column: message` fragment)
    ("item,annotator,criterion,value\n1,a,quality,4\n1,b,quality,four\n", ":3: value: 'four' is not a number"),
    ("item,annotator,criterion,value\n1,a,quality,4\n1,b,qualty,4\n", ":3: criterion: unknown criterion 'qualty'"),
    ("item,annotator,criterion,value\n1,a,quality,4\n1,a,quality,5\n", ":3: item: annotator 'a' rated item '1' on 'quality' twice (first at line 2)"),
    ("item,annotator,criterion,value\n1,a,quality,7\n", ":2: value: outside quality's range [1, 5]"),
    ("item,annotator,criterion,value\n1,a,fluency,great\n", ":2: value: 'great' is not one of fluency's labels"),
    ("item,annotator,criterion,value\n1,a,quality,1_0\n", ":2: value: '1_0' is not a number"),
    ("item,annotator,criterion,value\n1,a,quality,\u0667\n", ":2: value: '\u0667' is not a number"),
    ("item,annotator,criterion,value\n1,a,quality,inf\n", ":2: value: 'inf' is not a number"),
    ("item,annotator,criterion,value\n,a,quality,3\n", ":2: item: empty"),
    ("item,judge,criterion,value\n1,a,quality,3\n", ":1: annotator: no annotator column"),
    ('item,annotator,criterion,value\n"1\nx",a,quality,3\n2,a,quality,9\n', ":4: value: outside quality's range"),
]


@pytest.mark.parametrize("content, expected", BAD, ids=[e.split(": ")[1] + str(i) for i, (_, e) in enumerate(BAD)])
def test_bad_ratings_files_are_reported_as_file_line_column_message(tmp_path, content, expected):
    ratings = write(tmp_path, "ratings.csv", content)
    spec = write(tmp_path, "spec.yaml", SPEC_1_5)
    result = invoke(ratings, "--spec", spec, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert f"{ratings}{expected}" in result.stderr
    assert "nothing was analysed" in result.stderr and not (tmp_path / "out").exists()


def _ratings_1_5(rows: int = 40) -> list[str]:
    """A long file of 1-5 ratings: 20 items, 2 annotators (no spec: the scale is inferred)."""
    rng = np.random.default_rng(3)
    return ["item,annotator,criterion,value"] + [f"{i // 2},{'ab'[i % 2]},quality,{rng.integers(1, 6)}"
                                                 for i in range(rows)]


@pytest.mark.parametrize("stray", ["three", "inf", "1_0", "\u0667", "True", "1e400", "N/A (cannot judge)"])
def test_one_stray_value_in_a_rating_column_is_reported_not_a_new_scale(tmp_path, stray):
    """Without a spec, one value that is not a number in a column of 1-5 ratings is a problem at its line; the
    criterion stays a number scale (it once became nominal and the analysis went on with other numbers)."""
    rows = _ratings_1_5()
    rows[7] = rows[7].rsplit(",", 1)[0] + f",{stray}"
    ratings = write(tmp_path, "ratings.csv", "\n".join(rows) + "\n")
    result = invoke(ratings, "-o", tmp_path / "out")
    assert result.exit_code == 2 and f"{ratings}:8: value: '{stray}' is not a number (interval criterion" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_column_of_words_with_a_number_among_them_stays_nominal(tmp_path):
    rows = ["item,annotator,criterion,value"] + [f"{i},a,label,{'yes' if i % 3 else 'no'}" for i in range(20)]
    rows.append("20,a,label,5")
    result = invoke(write(tmp_path, "ratings.csv", "\n".join(rows) + "\n"), "-o", tmp_path / "out")
    assert result.exit_code == 0 and "label (nominal)" in result.stdout


@pytest.mark.parametrize("value", ["2.5", "3.25", "1.0000001"])
def test_a_protocols_steps_are_checked(tmp_path, value):
    """`--protocol dialogue`: its Ratings are whole stars, so a value between them is a problem at its line."""
    rows = ["item,annotator,criterion,value", "1,a,appropriateness,2", f"1,b,appropriateness,{value}"]
    ratings = write(tmp_path, "ratings.csv", "\n".join(rows) + "\n")
    result = invoke(ratings, "--protocol", "dialogue", "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert f"{ratings}:3: value: '{value}' is not on appropriateness's steps (1, 2, ...)" in result.stderr


def test_missing_codes_as_patterns_are_counted(tmp_path):
    rows = _ratings_1_5()
    for i, text in ((3, "N/A (not applicable)"), (9, "N/A (cannot judge)"), (15, "N/A")):
        rows[i] = rows[i].rsplit(",", 1)[0] + f",{text}"
    ratings = write(tmp_path, "ratings.csv", "\n".join(rows) + "\n")
    spec = write(tmp_path, "spec.yaml", "missing: ['', 're:N/A \\(.*\\)']\n")
    result = invoke(ratings, "--spec", spec, "-o", tmp_path / "out")
    assert result.exit_code == 2 and f"{ratings}:16: value: 'N/A' is not a number" in result.stderr  # not a pattern
    rows[15] = rows[15].rsplit(",", 1)[0] + ",3"
    write(tmp_path, "ratings.csv", "\n".join(rows) + "\n")
    result = invoke(ratings, "--spec", spec, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "missing code 're:N/A \\(.*\\)' matched 2 value(s)" in result.stdout
    assert "38 ratings" in result.stdout and "quality (interval)" in result.stdout
    bad = write(tmp_path, "bad.yaml", "missing: ['re:N/A (']\n")
    refused = invoke(ratings, "--spec", bad, "-o", tmp_path / "out2")
    assert refused.exit_code == 2 and "is not a regular expression" in refused.stderr


def test_every_problem_is_reported_not_only_the_first(tmp_path):
    rows = "".join(f"{i},a,quality,x{i}\n" for i in range(30))
    ratings = write(tmp_path, "ratings.csv", "item,annotator,criterion,value\n" + rows)
    with pytest.raises(InvalidInput) as e:
        read_ratings(ratings, read_spec(write(tmp_path, "spec.yaml", SPEC_1_5)))
    assert [p.line for p in e.value.problems] == list(range(2, 32))


def test_bad_metric_files_and_specs(tmp_path):
    spec = read_spec(write(tmp_path, "spec.yaml", SPEC_1_5))
    metrics = write(tmp_path, "m.csv", "item,metric,criterion,value\n1,bleu,quality,0.5\n1,bleu,quality,0.6\n2,bleu,qual,1\n3,bleu,,nan\n")
    with pytest.raises(InvalidInput) as e:
        read_metrics(metrics, spec, list(spec.criteria))
    shown = [str(p) for p in e.value.problems]
    assert f"{metrics}:3: item: a second score of this metric for this item and system" in shown
    assert any(s.startswith(f"{metrics}:4: criterion: unknown criterion 'qual'") for s in shown)
    assert f"{metrics}:5: value: 'nan' is not a number" in shown
    for text, fragment in [("layout: sideways\n", "layout"), ("criteria: {q: {scale: interval, labels: [a]}}\n", "criteria.q"),
                           ("- a\n", "a spec is a mapping"), ("columns: {item: [1]}\n", "columns.item"),
                           ("criteria: {q: {scale: nominal, labels: [yes, no]}}\n", "put yes/no/on/off labels in quotes")]:
        with pytest.raises(BadInput, match=fragment):
            read_spec(write(tmp_path, "bad.yaml", text))


def _tidy(frame: pd.DataFrame) -> pd.DataFrame:
    keep = ["item", "system", "annotator", "criterion", "value"]
    return frame[keep].astype({"value": float}).sort_values(keep[:-1]).reset_index(drop=True)


@pytest.mark.parametrize("layout, name, content, spec", [
    ("long", "r.jsonl", "\n".join(json.dumps(r) for r in [
        {"item": 1, "system": "s", "annotator": "a", "criterion": "quality", "value": 4},
        {"item": 1, "system": "s", "annotator": "b", "criterion": "quality", "value": 5},
        {"item": 1, "system": "s", "annotator": "a", "criterion": "fluency", "value": "ok"}]) + "\n", {}),
    ("wide_criteria", "r.csv", "item,system,annotator,quality,fluency\n1,s,a,4,ok\n1,s,b,5,\n", {"layout": "wide_criteria"}),
    ("wide_annotators", "r.csv", "item,system,a,b\n1,s,4,5\n", {"layout": "wide_annotators"}),
])
def test_long_and_wide_layouts_give_the_same_tidy_frame(tmp_path, layout, name, content, spec):
    criteria = {"quality": {"scale": "interval", "min": 1, "max": 5}}
    if layout != "wide_annotators":
        criteria["fluency"] = {"scale": "ordinal", "labels": ["bad", "ok", "good"]}
    tidy, _ = read_ratings(write(tmp_path, name, content), Spec(criteria=criteria, **spec))
    expected = pd.DataFrame({"item": ["1", "1", "1"], "system": "s", "annotator": ["a", "a", "b"],
                             "criterion": ["fluency", "quality", "quality"], "value": [2.0, 4.0, 5.0]})
    if layout == "wide_annotators":
        expected = expected[expected["criterion"] == "quality"]
    assert _tidy(tidy).equals(_tidy(expected.reset_index(drop=True)))


def test_parquet_and_protocol_spec(tmp_path):
    frame = pd.DataFrame({"item": ["1", "1", "2", "2"], "annotator": ["a", "b", "a", "b"],
                          "criterion": "appropriateness", "value": ["4", "5", "2", "3"]})
    frame.to_parquet(tmp_path / "r.parquet")
    result = invoke(tmp_path / "r.parquet", "--protocol", "dialogue", "-o", tmp_path / "out", "--bootstrap", "20")
    assert result.exit_code == 0, result.output
    agreement = pd.read_csv(tmp_path / "out" / "agreement.csv")
    assert agreement["criterion"].tolist() == ["appropriateness"] and agreement["ratings"].iloc[0] == 4
    bad = invoke(tmp_path / "r.parquet", "--protocol", "nosuch", "-o", tmp_path / "out2")
    assert bad.exit_code == 2 and "valid names" in bad.stderr


def _jsonl(rows) -> bytes:
    return ("\n".join(json.dumps(r) for r in rows) + "\n").encode()


fuzz_items = st.one_of(st.integers(0, 3), st.text(max_size=3))
fuzz_systems = st.sampled_from(["s1", "s2", "", "=x"])
# well-formed files whose ids are hostile ('²' and '--3' look like integers), so that the statistics themselves run;
# drawn half of the time: one_of picks its branches evenly, and `_copy` makes another branch of the same strategy


def _copy(strategy):
    """The same strategy as a branch of its own (one_of keeps a strategy it is given twice only once)."""
    return strategy.map(lambda value: value)


wellformed_items = st.sampled_from(["1", "2", "10", "\u00b2", "--3", "=x"])
wellformed_systems = st.sampled_from(["s1", "s2", "s3"])
wellformed_ratings = st.lists(st.fixed_dictionaries({
    "item": wellformed_items, "system": wellformed_systems, "annotator": st.sampled_from(["a", "b", "c"]),
    "criterion": st.just("quality"), "value": st.integers(1, 5)}),
    min_size=2, max_size=24, unique_by=lambda r: (r["item"], r["system"], r["annotator"]))  # rows, not bytes
wellformed_metrics = st.lists(st.fixed_dictionaries({
    "item": wellformed_items, "system": wellformed_systems, "metric": st.sampled_from(["m1", "m2", "m3"]),
    "value": st.one_of(st.integers(1, 5), st.floats(-10, 10))}, optional={"confidence": st.floats(0, 1)}),
    min_size=2, max_size=40, unique_by=lambda r: (r["item"], r["system"], r["metric"])).map(_jsonl)
ratings_files = st.one_of(
    st.binary(max_size=300),
    st.lists(st.fixed_dictionaries({"item": fuzz_items,
                                    "annotator": st.sampled_from(["a", "b", "", "=cmd"]),
                                    "criterion": st.sampled_from(["quality", "fluency", "x"]),
                                    "value": st.one_of(st.integers(-2, 9), st.floats(allow_nan=True), st.text(max_size=5),
                                                       st.none())}, optional={"system": fuzz_systems}), max_size=8)
    .map(_jsonl),
    wellformed_ratings, _copy(wellformed_ratings))
# metric scores: none, junk, hostile rows, or (half of the time) well-formed scores on the ratings' items and systems
metrics_files = st.one_of(
    st.none(), st.binary(max_size=200),
    st.lists(st.fixed_dictionaries(
        {"item": fuzz_items, "metric": st.sampled_from(["m1", "m2", ""]),
         "value": st.one_of(st.integers(-2, 9), st.floats(allow_nan=True), st.text(max_size=4), st.none())},
        optional={"system": fuzz_systems, "criterion": st.sampled_from(["quality", "fluency", "", "x"]),
                  "confidence": st.one_of(st.floats(-1, 2), st.text(max_size=3))}), max_size=12).map(_jsonl),
    wellformed_metrics, _copy(wellformed_metrics), _copy(_copy(wellformed_metrics)))


@settings(max_examples=CLI_FUZZ_EXAMPLES, deadline=None)
@given(data=ratings_files, suffix=st.sampled_from([".csv", ".jsonl", ".parquet"]), metrics=metrics_files)
def test_fuzzed_ratings_through_analyze_exit_0_or_2(data, suffix, metrics):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-analyze-"))
    path = folder / f"ratings{suffix}"
    if isinstance(data, list):  # well-formed rows, written in the file type drawn
        rows = pd.DataFrame(data)
        {".csv": lambda: rows.to_csv(path, index=False), ".parquet": lambda: rows.to_parquet(path),
         ".jsonl": lambda: path.write_bytes(_jsonl(data))}[suffix]()
    else:
        path.write_bytes(data)
    spec = write(folder, "spec.yaml", SPEC_1_5)
    extra = []
    if metrics is not None:
        (folder / "metrics.jsonl").write_bytes(metrics)
        extra = ["--metrics", folder / "metrics.jsonl"]
    result = invoke(path, "--spec", spec, *extra, "-o", folder / "out", "--bootstrap", "5", "--resamples", "10")
    assert result.exit_code in (0, 2), result.output
    event(f"exit {result.exit_code}" + (", metrics compared" if (folder / "out" / "correlations.csv").exists() else ""))
    if result.exit_code == 2:  # the message names the file at fault
        assert "error:" in result.stderr and any(str(f) in result.stderr for f in [path, *extra[1:]]), result.stderr


def test_a_label_studio_export_analyses_like_a_file(reg, tmp_path):
    """`analyze EXPORT.json --protocol dialogue`: the same frames as `report` (surplus annotations left out), with the
    model ratings the tasks carry as the metric `model` and stored predictions (an LLM judge's) by model version."""
    from scipy import stats

    from evalstudio.values.results import region

    from .test_study import make_tasks

    dialogue = reg.entry("dialogue")
    tasks = make_tasks(dialogue)
    rng = np.random.default_rng(1)
    for task in tasks:
        task["data"]["model_ratings"] = {c: int(rng.integers(1, 6)) for c in dialogue.criteria}
        judged = int(rng.integers(1, 6))
        task["predictions"] = [{"model_version": "judge-v1", "result": [
            region(dialogue.interface, control, judged) for _, control in dialogue.controls("appropriateness")]}]
    export = write(tmp_path, "export.json", json.dumps(tasks))
    result = invoke(export, "--protocol", "dialogue", "-o", tmp_path / "out", "--bootstrap", "20")
    assert result.exit_code == 0, result.output
    assert "surplus" in result.stdout  # w4's repeats of tasks 1..10 are left out, as in `report`
    agreement = pd.read_csv(tmp_path / "out" / "agreement.csv").set_index("criterion")
    assert agreement.loc["appropriateness", "ratings"] == 55 + 20 + 12 + 10 - 10
    correlations = pd.read_csv(tmp_path / "out" / "correlations.csv")
    row = correlations.query("criterion == 'appropriateness' and metric == 'model' and level == 'segment' "
                             "and grouping == 'none' and method == 'pearson'").iloc[0]
    counted = {}  # first 3 annotators per task, in id order
    for task in tasks:
        for a in task["annotations"][:3]:
            value = next(r["value"]["rating"] for r in a["result"] if r["from_name"] == "appropriateness")
            counted.setdefault(task["id"], []).append(float(value))
    human = [np.mean(v) for t, v in sorted(counted.items())]
    model = [tasks[t - 1]["data"]["model_ratings"]["appropriateness"] for t in sorted(counted)]
    assert row["value"] == pytest.approx(stats.pearsonr(human, model)[0], abs=1e-12)
    assert row["n"] == len(counted)
    judge_row = correlations.query("criterion == 'appropriateness' and metric == 'prediction judge-v1' and "
                                   "level == 'segment' and grouping == 'none' and method == 'pearson'").iloc[0]
    judged = [next(r["value"]["rating"] for r in tasks[t - 1]["predictions"][0]["result"]) for t in sorted(counted)]
    assert judge_row["value"] == pytest.approx(stats.pearsonr(human, judged)[0], abs=1e-12)
    judges = pd.read_csv(tmp_path / "out" / "judges.csv")
    assert {"model", "prediction judge-v1"} <= set(judges.query("criterion == 'appropriateness'")["metric"])


def test_a_metric_on_the_criterion_scale_is_checked_as_a_judge(tmp_path):
    """Integer scores within the ordinal scale make a metric a judge: weighted kappa against the human plurality
    (computed here independently), confusion matrix and ECE from its stated confidence."""
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(0)
    ratings, scores = [], []
    for item in range(30):
        true = int(rng.integers(1, 6))
        votes = [int(np.clip(true + rng.integers(-1, 2), 1, 5)) for _ in "abc"]
        ratings += [{"item": item, "annotator": a, "value": v} for a, v in zip("abc", votes)]
        scores.append({"item": item, "metric": "judge", "value": int(np.clip(true + rng.integers(-1, 2), 1, 5)),
                       "confidence": round(float(rng.uniform(0.2, 1.0)), 3)})
        scores.append({"item": item, "metric": "bleu", "value": float(rng.random()), "confidence": ""})
    result = analyze_with_metrics(tmp_path, ratings, scores, "ordinal")
    assert result.exit_code == 0, result.output
    judges = pd.read_csv(tmp_path / "out" / "judges.csv")
    assert judges["metric"].tolist() == ["judge"]  # bleu's scores are not answers of the scale
    frame = pd.DataFrame(ratings)
    plurality = frame.groupby("item")["value"].agg(lambda v: min(v.mode()))  # most frequent, ties to the smallest
    judge = pd.DataFrame([s for s in scores if s["metric"] == "judge"]).set_index("item")
    expected = cohen_kappa_score(plurality.sort_index(), judge["value"].sort_index(), weights="quadratic")
    assert judges["kappa"].iloc[0] == pytest.approx(expected, abs=1e-12)
    correct = (plurality.sort_index() == judge["value"].sort_index()).to_numpy()
    bins = np.clip(np.ceil(judge["confidence"].sort_index().to_numpy() * 10).astype(int) - 1, 0, 9)
    ece = sum((bins == b).sum() / 30 * abs(correct[bins == b].mean() - judge["confidence"].sort_index().to_numpy()[bins == b].mean())
              for b in set(bins))
    assert judges["ece"].iloc[0] == pytest.approx(ece, abs=1e-12)
    confusion = pd.read_csv(tmp_path / "out" / "judge_confusion.csv")
    assert confusion["count"].sum() == 30


def test_majority_needs_the_votes_the_spec_asks_for(tmp_path):
    """Circa's rule: a label needs 3 of 5 votes; 2-2-1 has a plurality but no majority."""
    votes = {"i1": ["yes", "yes", "yes", "no", "no"], "i2": ["yes", "yes", "no", "no", "maybe"]}
    rows = "".join(f"{item},w{k},{v}\n" for item, vs in votes.items() for k, v in enumerate(vs))
    ratings = write(tmp_path, "r.csv", "item,annotator,value\n" + rows)
    spec = write(tmp_path, "s.yaml", "criteria:\n  answer: {scale: nominal, labels: ['yes', 'no', maybe], min_votes: 3}\n")
    result = invoke(ratings, "--spec", spec, "-o", tmp_path / "out", "--bootstrap", "10")
    assert result.exit_code == 0, result.output
    labels = pd.read_csv(tmp_path / "out" / "aggregated_labels.csv").set_index("item")
    assert labels["majority"].to_dict() == {"i1": "yes", "i2": "no majority"}
    assert labels["plurality"].to_dict() == {"i1": "yes", "i2": "no"}  # tie between no and yes: smallest label


def test_lower_is_better_negates_the_named_metrics_and_rejects_unknown_names(tmp_path):
    ratings = write(tmp_path, "r.csv", "item,system,annotator,value\n" + "".join(
        f"{i},{s},a{k},{(i + k + ord(s)) % 5 + 1}\n" for i in range(6) for s in "xyz" for k in range(2)))
    metrics = write(tmp_path, "m.csv", "item,system,metric,value\n" + "".join(
        f"{i},{s},{m},{(i * 7 + ord(s) * 3 + len(m)) % 11}\n" for i in range(6) for s in "xyz" for m in ("dist", "sim")))
    plain, flipped = tmp_path / "plain", tmp_path / "flipped"
    assert invoke(ratings, "--metrics", metrics, "-o", plain, "--bootstrap", 0, "--resamples", 10).exit_code == 0
    assert invoke(ratings, "--metrics", metrics, "-o", flipped, "--bootstrap", 0, "--resamples", 10,
                  "--lower-is-better", "dist").exit_code == 0
    a, b = (pd.read_csv(f / "correlations.csv").set_index(["metric", "level", "grouping", "method"])["value"]
            for f in (plain, flipped))
    assert np.allclose(a.loc["dist"], -b.loc["dist"], equal_nan=True) and np.allclose(a.loc["sim"], b.loc["sim"], equal_nan=True)
    bad = invoke(ratings, "--metrics", metrics, "--lower-is-better", "ter", "-o", tmp_path / "bad")
    assert bad.exit_code == 2 and "lower_is_better: ter not among the metrics (dist, sim)" in bad.output
    spec = write(tmp_path, "s.yaml", "lower_is_better: [dist]\n")
    from_spec = invoke(ratings, "--metrics", metrics, "--spec", spec, "-o", tmp_path / "spec", "--bootstrap", 0, "--resamples", 10)
    assert from_spec.exit_code == 0
    c = pd.read_csv(tmp_path / "spec" / "correlations.csv").set_index(["metric", "level", "grouping", "method"])["value"]
    assert np.allclose(b, c, equal_nan=True)


def test_rejected_mturk_assignments_are_left_out_of_the_analysis(tmp_path):
    """The real Circa MTurk batch as downloaded: marking two assignments Rejected gives the analysis of the file
    without those rows (built with the csv module), and the command says so. A worker whose rejected assignment was
    redone is not a duplicate rating."""
    import csv

    root = Path(__file__).resolve().parents[1]
    source, spec = root / "tests" / "data" / "circa_mturk_final_results.csv", root / "examples" / "analyze" / "circa_mturk.yaml"
    with open(source, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0])
    rejected = [rows[0]["AssignmentId"], rows[5]["AssignmentId"]]
    redo = dict(rows[5], AssignmentId="REDO", **{"Answer.explanation-quality.label": "2"})  # same worker, same HIT
    marked = [dict(r, AssignmentStatus="Rejected") if r["AssignmentId"] in rejected else r for r in rows] + [redo]
    kept = [r for r in marked if r["AssignmentId"] not in rejected]
    for name, table in (("marked.csv", marked), ("kept.csv", kept)):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, header)
            writer.writeheader()
            writer.writerows(table)
    with_rejected, _ = read_ratings(tmp_path / "marked.csv", read_spec(spec))
    without, _ = read_ratings(tmp_path / "kept.csv", read_spec(spec))
    assert len(with_rejected) == len(rows) - 1 == len(without)
    assert _tidy(with_rejected).equals(_tidy(without))
    assert with_rejected.attrs["notes"] == ["marked.csv: 2 rejected MTurk assignment(s) left out (AssignmentStatus Rejected)"]
    result = invoke(tmp_path / "marked.csv", "--spec", spec, "-o", tmp_path / "out", "--bootstrap", "20")
    assert result.exit_code == 0, result.output
    assert "2 rejected MTurk assignment(s) left out" in result.output
    assert "2 rejected MTurk assignment(s) left out" in (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert pd.read_csv(tmp_path / "out" / "agreement.csv")["ratings"].iloc[0] == len(rows) - 1


def test_item_ids_that_look_like_digits_but_are_not_integers(tmp_path):
    """Items are ordered numerically only when every id is an ASCII integer: '²' passes str.isdigit() and '--3'
    passed a stripped check, but int() refuses both; found by the long fuzz run's sibling in the ML backend."""
    items = ["\u00b2", "--3", "10", "2"]
    rows = [f"{item},{system},{annotator},{score}" for i, item in enumerate(items) for system in ("s1", "s2", "s3")
            for annotator, score in (("a", (i + len(system)) % 5 + 1), ("b", (i * 2 + len(system)) % 5 + 1))]
    ratings = write(tmp_path, "r.csv", "item,system,annotator,value\n" + "\n".join(rows) + "\n")
    metrics = write(tmp_path, "m.csv", "item,system,metric,value\n" + "\n".join(
        f"{item},{system},m,{i + int(system[1])}" for i, item in enumerate(items) for system in ("s1", "s2", "s3")) + "\n")
    result = invoke(ratings, "--metrics", metrics, "-o", tmp_path / "out", "--bootstrap", "20", "--resamples", "20")
    assert result.exit_code == 0, result.output
    assert set(pd.read_csv(tmp_path / "out" / "correlations.csv")["metric"]) == {"m"}


def test_dollar_signs_in_system_and_metric_names_are_text(tmp_path):
    """matplotlib reads "$...$" as mathtext: names from the data with dollar signs once crashed the plots and left
    no index.html. They are plain text in every plot and table."""
    rng = np.random.default_rng(1)
    systems = ["$\\alpha$", "sys$", "$x^$"]
    ratings, scores = [], []
    for item in range(12):
        for system in systems:
            base = int(rng.integers(1, 6))
            ratings += [{"item": item, "system": system, "annotator": a, "value": int(np.clip(base + d, 1, 5))}
                        for a, d in zip("abc", rng.integers(-1, 2, 3))]
            scores += [{"item": item, "system": system, "metric": m, "value": float(base + rng.random())}
                       for m in ("$BLEU$", "$\\undefinedcommand$")]
    result = analyze_with_metrics(tmp_path, ratings, scores, "interval")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "$BLEU$" in page and "<img" in page


def test_an_output_that_cannot_be_computed_says_why(tmp_path):
    """Issue 28.4: interval ratings gave 1-byte aggregated_labels.csv and judges.csv; item-grouped correlations came
    out with n = 0 and no reason when each item has one system; the leave-one-out "average" row showed n as a sum
    of items beside a mean of correlations. Every output now says why it is empty, and the average's n counts the
    annotators averaged."""
    rng = np.random.default_rng(5)
    ratings = [{"item": f"i{i}", "system": f"s{i % 4}", "annotator": a, "criterion": "q",
                "value": int(rng.integers(1, 6))} for i in range(24) for a in ("a", "b", "c")]  # one system per item
    scores = [{"item": f"i{i}", "system": f"s{i % 4}", "metric": "m", "value": float(rng.normal())} for i in range(24)]
    result = analyze_with_metrics(tmp_path, ratings, scores, "interval")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert all(path.stat().st_size > 1 for path in out.glob("*.csv"))  # nothing is silently empty
    labels, judges = pd.read_csv(out / "aggregated_labels.csv"), pd.read_csv(out / "judges.csv")
    assert list(labels.columns) == ["criterion", "reason"] and "interval scale" in labels["reason"].iloc[0]
    assert "interval scale" in judges["reason"].iloc[0]
    corrs = pd.read_csv(out / "correlations.csv", keep_default_na=False)
    item = corrs[(corrs["grouping"] == "item")]
    assert not item.empty and (item["value"] == "").all() and (item["n"] == 0).all()
    assert item["reason"].str.contains("each item has one system").all()
    why = pd.read_csv(out / "not_computed.csv")
    assert set(why["table"]) >= {"aggregated_labels", "judges", "correlations"}
    assert why["reason"].str.contains("every item has one rated system").any()
    loo = pd.read_csv(out / "leave_one_out.csv").set_index("annotator")
    assert loo.loc["average", "n"] == 3 and loo.loc["average", "n_counts"] == "annotators"
    assert (loo.drop(index="average")["n"] == 24).all() and (loo.drop(index="average")["n_counts"] == "items").all()
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "Not computed" in page and "aggregated_labels.csv: interval scale" in page
