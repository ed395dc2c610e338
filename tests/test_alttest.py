"""The alternative annotator test (`analyze --alt-test JUDGE`, evalstudio.stats.alttest): the numbers of the
authors' implementation on USR's published ratings with 14 judges at 3 margins each (tests/data/alttest: their code
was run once to make them, and is not copied here, as it carries no licence); the same numbers as a direct
transcription of the paper's procedure (loops over annotators and items, the Benjamini-Yekutieli step-up written
out); on USR a judge that answers what the annotators agree on passes and a constant one does not; bad judges are
refused."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from evalstudio.cli import app
from evalstudio.stats.alttest import alt_test

from .conftest import DATA


def transcribed(matrix, judge, numeric, epsilon, q, min_items):
    """Calderon, Reichart & Dror (2025), Algorithm 1, item by item."""
    n_items, n_annotators = matrix.shape
    results = []
    for j in range(n_annotators):
        w_f, w_h = [], []
        for i in range(n_items):
            others = [matrix[i, k] for k in range(n_annotators) if k != j and not math.isnan(matrix[i, k])]
            if math.isnan(matrix[i, j]) or math.isnan(judge[i]) or not others:
                continue
            if numeric:
                score = lambda a: -math.sqrt(sum((a - o) ** 2 for o in others) / len(others))
            else:
                score = lambda a: sum(a == o for o in others) / len(others)
            w_f.append(1.0 if score(judge[i]) >= score(matrix[i, j]) else 0.0)
            w_h.append(1.0 if score(matrix[i, j]) >= score(judge[i]) else 0.0)
        if len(w_f) < min_items:
            results.append(None)
            continue
        d = np.array(w_h) - np.array(w_f)
        p = (0.0 if d.mean() < epsilon else 1.0) if d.std() == 0 else stats.ttest_1samp(d, epsilon,
                                                                                         alternative="less").pvalue
        results.append((float(np.mean(w_f)), float(np.mean(w_h)), float(p)))
    tested = [k for k, r in enumerate(results) if r is not None]
    m = len(tested)
    c = sum(1 / k for k in range(1, m + 1))
    order = sorted(tested, key=lambda k: results[k][2])
    largest = 0  # the step-up: reject the `largest` smallest p-values
    for rank, k in enumerate(order, 1):
        if results[k][2] <= rank * q / (m * c):
            largest = rank
    rejected = set(order[:largest])
    omega = len(rejected) / m
    return omega, float(np.mean([results[k][0] for k in tested])), results, rejected


@pytest.mark.parametrize("seed, numeric, missing", [(0, True, 0.0), (1, True, 0.3), (2, False, 0.0),
                                                    (3, False, 0.25), (4, True, 0.5)])
def test_the_same_numbers_as_the_papers_procedure_written_out(seed, numeric, missing):
    rng = np.random.default_rng(seed)
    items, annotators = 80, 6
    truth = rng.integers(1, 6, items).astype(float)
    matrix = np.clip(truth[:, None] + rng.integers(-1, 2, (items, annotators)) * (rng.random((items, annotators)) <
                                                                                  rng.uniform(0.2, 0.8, annotators)),
                     1, 5).astype(float)
    matrix[rng.random(matrix.shape) < missing] = np.nan
    judge = np.where(rng.random(items) < 0.7, truth, rng.integers(1, 6, items)).astype(float)
    judge[rng.random(items) < 0.05] = np.nan
    result, table = alt_test(matrix, judge, numeric, epsilon=0.1, q=0.05, min_items=20)
    omega, advantage, rows, rejected = transcribed(matrix, judge, numeric, 0.1, 0.05, 20)
    assert result.winning_rate == pytest.approx(omega) and result.advantage_probability == pytest.approx(advantage)
    for k, row in enumerate(rows):
        got = table.iloc[k]
        if row is None:
            assert np.isnan(got["p"]) and not got["rejected"]
        else:
            assert (got["rho_f"], got["rho_h"], got["p"]) == pytest.approx(row)
            assert bool(got["rejected"]) == (k in rejected)
    assert result.annotators == sum(r is not None for r in rows)


EPSILONS = {"Overall": (0.1, 0.2, 0.3), "Uses Knowledge": (0.05, 0.1, 0.2)}


def usr_judges() -> pd.DataFrame:
    """Judges of USR's Overall Quality (1-5) and Uses Knowledge (0 or 1), made from the annotators' ratings of the
    response (pc_usr_data.json) so that they range from the annotators' consensus to constants: the mean rating of
    another criterion put on the criterion's scale, the rounded consensus, the first listed annotator's rating."""
    import json

    rows = []
    for record in json.loads((DATA / "usr" / "pc_usr_data.json").read_text(encoding="utf-8")):
        for r in record["responses"]:
            mean = lambda c: float(np.mean(r[c]))
            judges = {"Overall": {"engaging": 2 * mean("Engaging") - 1, "context": 2 * mean("Maintains Context") - 1,
                                  "natural": 2 * mean("Natural") - 1,
                                  "understood_knowledge": 1 + 2 * mean("Understandable") + 2 * mean("Uses Knowledge"),
                                  "rounded_mean": float(np.round(mean("Overall"))), "first": float(r["Overall"][0]),
                                  "always3": 3.0},
                      "Uses Knowledge": {"majority": float(mean("Uses Knowledge") > 0.5),
                                         "understandable": float(mean("Understandable") > 0.5),
                                         "engaging": float(mean("Engaging") >= 2),
                                         "context": float(mean("Maintains Context") >= 2.5),
                                         "first": float(r["Uses Knowledge"][0]), "always0": 0.0, "always1": 1.0}}
            rows += [{"item": record["context"], "system": r["model"], "metric": name, "criterion": criterion,
                      "value": value} for criterion, named in judges.items() for name, value in named.items()]
    return pd.DataFrame(rows)


def test_the_authors_numbers_on_usr():
    """Winning rate and average advantage probability of each judge at each margin, as the authors' `alt_test`
    (nitaytech/AltTest, alt_test_example.ipynb) gave them on the same ratings and judges (SOURCE.md there); the
    judges range from passing at every margin to failing at every one, and from near chance to the consensus."""
    import json

    from evalstudio.exporters.analyses.alttest import alt_test_tables
    from evalstudio.readers.ratings import read_ratings
    from evalstudio.readers.spec import read_spec

    spec = read_spec(DATA / "alttest" / "usr.yaml")
    tidy = read_ratings(DATA / "usr" / "pc_usr_data.json", spec)[0]
    judges = usr_judges()
    reference = json.loads((DATA / "alttest" / "reference.json").read_text(encoding="utf-8"))
    assert len(reference) == 42 and {r["winning_rate"] for r in reference} == {0.0, 0.25, 0.5, 0.75, 1.0}
    for expected in reference:
        criterion, judge = expected["criterion"], expected["judge"]
        summary, _ = alt_test_tables(tidy, judges[judges["criterion"] == criterion], spec, judge,
                                     expected["epsilon"], expected["q"])
        got = summary.set_index("criterion").loc[criterion]
        assert got["winning_rate"] == expected["winning_rate"], expected
        assert got["advantage_probability"] == pytest.approx(expected["advantage_probability"], abs=1e-12), expected
        assert got["annotators"] == 4 and bool(got["passes"]) == (expected["winning_rate"] >= 0.5)


def usr_tables(tmp_path):
    """USR PersonaChat's Overall ratings (3 of 4 annotators on each of 300 responses) and two judges as a metrics file: the mean
    of the three annotators (what they agree on) and a constant 3."""
    from evalstudio.readers.ratings import read_ratings
    from evalstudio.readers.spec import read_spec

    tidy = read_ratings(DATA / "usr" / "pc_usr_data.json", read_spec(DATA / "usr" / "overall.yaml"))[0]
    means = tidy.assign(value=tidy["value"].astype(float)).groupby(["system", "item"])["value"].mean().reset_index()
    metrics = pd.concat([means.assign(metric="consensus"), means.assign(metric="always3", value=3.0)])
    metrics.to_csv(tmp_path / "judges.csv", index=False)
    return tmp_path / "judges.csv"


@pytest.mark.parametrize("judge, passes", [("consensus", True), ("always3", False)])
def test_on_usrs_published_ratings_a_consensus_judge_passes_and_a_constant_one_does_not(tmp_path, judge, passes):
    judges = usr_tables(tmp_path)
    result = CliRunner().invoke(app, ["analyze", str(DATA / "usr" / "pc_usr_data.json"), "--spec",
                                      str(DATA / "usr" / "overall.yaml"), "--metrics", str(judges), "--alt-test",
                                      judge, "--bootstrap", "10", "--resamples", "10", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(tmp_path / "out" / "alt_test.csv").iloc[0]
    annotators = pd.read_csv(tmp_path / "out" / "alt_test_annotators.csv")
    # four annotators by id: one rated every response, three rated two thirds each
    assert summary["annotators"] == 4 and sorted(annotators["items"]) == [200, 200, 200, 300]
    assert bool(summary["passes"]) is passes and summary["winning_rate"] == (1.0 if passes else 0.0)
    assert summary["scoring"] == "negative RMSE"
    said = "it may replace them" if passes else "it may not replace them"
    assert f"winning rate {summary['winning_rate']:.2f} over 4 annotator(s)" in " ".join(result.output.split())
    assert said in " ".join(result.output.split())
    assert "Can the judge replace the annotators?" in (tmp_path / "out" / "index.html").read_text()


def test_a_nominal_judge_is_scored_by_accuracy_and_a_judge_off_the_scale_is_refused(tmp_path):
    rng = np.random.default_rng(5)
    truth = rng.choice([1, 2, 3], 60)  # a judge's answers are numbers: nominal labels as codes
    rows = [{"item": i, "annotator": f"a{k}", "criterion": "answer",
             "value": truth[i] if rng.random() < 0.8 else rng.choice([1, 2, 3])}
            for i in range(60) for k in range(4)]
    pd.DataFrame(rows).to_csv(tmp_path / "r.csv", index=False)
    pd.DataFrame({"item": range(60), "metric": "llm", "value": truth}).to_csv(tmp_path / "m.csv", index=False)
    (tmp_path / "spec.yaml").write_text("criteria:\n  answer: {scale: nominal}\n")
    common = ["analyze", str(tmp_path / "r.csv"), "--spec", str(tmp_path / "spec.yaml"), "--bootstrap", "10",
              "--resamples", "10"]
    result = CliRunner().invoke(app, common + ["--metrics", str(tmp_path / "m.csv"), "--alt-test", "llm", "-o",
                                               str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(tmp_path / "out" / "alt_test.csv").iloc[0]
    assert summary["scoring"] == "accuracy" and summary["annotators"] == 4 and bool(summary["passes"])
    pd.DataFrame({"item": range(60), "metric": "llm", "value": 4}).to_csv(tmp_path / "bad.csv", index=False)
    refused = CliRunner().invoke(app, common + ["--metrics", str(tmp_path / "bad.csv"), "--alt-test", "llm", "-o",
                                                str(tmp_path / "bad")])
    # the labels as the annotators' file has them, not as float codes (issue 53: '(0.0, 1.0, 2.0)')
    assert refused.exit_code == 2 and "'4' is not an answer the annotators gave for answer (1, 2, 3)" in " ".join(
        refused.output.split())
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("options, message", [
    (["--alt-test", "consensus"], "--alt-test names a judge whose answers it uses: give --metrics"),
    (["--metrics", "JUDGES", "--alt-test", "nope"], "--alt-test nope: no such metric"),
])
def test_alt_test_options_that_do_not_fit_are_refused(tmp_path, options, message):
    judges = usr_tables(tmp_path)
    options = [str(judges) if o == "JUDGES" else o for o in options]
    result = CliRunner().invoke(app, ["analyze", str(DATA / "usr" / "pc_usr_data.json"), "--spec",
                                      str(DATA / "usr" / "overall.yaml"), *options, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "out").exists()


def test_a_numeric_judge_outside_the_scale_is_refused(tmp_path):
    judges = usr_tables(tmp_path)
    frame = pd.read_csv(judges)
    frame.loc[0, "value"] = 7.5
    frame.to_csv(judges, index=False)
    result = CliRunner().invoke(app, ["analyze", str(DATA / "usr" / "pc_usr_data.json"), "--spec",
                                      str(DATA / "usr" / "overall.yaml"), "--metrics", str(judges), "--alt-test",
                                      "consensus", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "outside the criterion's scale 1-5" in " ".join(result.output.split())
