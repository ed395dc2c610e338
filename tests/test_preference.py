"""Pairwise preference and best-worst statistics (`evalstudio.stats.preference`) against independent
implementations (choix for Bradley-Terry, statsmodels for Wilson intervals, scipy for the binomial test) and
hand-computed examples."""

from __future__ import annotations

import choix  # the test oracle (a test dependency, pyproject's `test` extra)
import numpy as np
import pandas as pd
import pytest

from evalstudio.stats import preference as pref


def _simulated(n_systems: int = 6, n: int = 3000, ties: float = 0.0, seed: int = 1) -> tuple[pd.DataFrame, np.ndarray]:
    """Comparisons drawn from a Bradley-Terry model with known strengths (and a share of ties)."""
    rng = np.random.default_rng(seed)
    true = np.exp(rng.normal(0, 1, n_systems))
    left = rng.integers(0, n_systems, n)
    right = (left + rng.integers(1, n_systems, n)) % n_systems
    p_left = true[left] / (true[left] + true[right])
    outcome = np.where(rng.random(n) < p_left, "left", "right")
    outcome = np.where(rng.random(n) < ties, rng.choice(["tie", "both_bad"], n), outcome)
    return pd.DataFrame({"left": [f"s{i}" for i in left], "right": [f"s{i}" for i in right], "outcome": outcome}), true


def _choix_data(frame: pd.DataFrame, systems: list[str]) -> list[tuple[int, int]]:
    """(winner, loser) pairs for choix; each decisive judgement twice and a tie once each way (= half a win each)."""
    index = {s: i for i, s in enumerate(systems)}
    data = []
    for left, right, outcome in frame[["left", "right", "outcome"]].itertuples(index=False):
        i, j = index[left], index[right]
        data += {"left": [(i, j), (i, j)], "right": [(j, i), (j, i)]}.get(outcome, [(i, j), (j, i)])
    return data


@pytest.mark.parametrize("ties", [0.0, 0.2])
def test_bradley_terry_equals_choix(ties):
    frame, _ = _simulated(ties=ties)
    ours = pref.bradley_terry(frame, n_boot=0).set_index("system").sort_index()
    systems = list(ours.index)
    theirs = choix.mm_pairwise(len(systems), _choix_data(frame, systems), tol=1e-12, max_iter=100_000)
    assert np.allclose(np.log(ours["strength"].to_numpy()), theirs - theirs.mean(), atol=1e-6)
    assert np.allclose(ours["elo"], 400 * np.log10(np.exp(theirs - theirs.mean())) + 1000, atol=1e-4)


def test_bradley_terry_intervals_cover_the_truth_and_refuse_an_unbeaten_system():
    frame, true = _simulated(n=4000, seed=3)
    table = pref.bradley_terry(frame, n_boot=300).set_index("system").sort_index()
    log_true = np.log(true) - np.log(true).mean()
    inside = (np.log(table["lo"]) <= log_true) & (log_true <= np.log(table["hi"]))
    assert inside.mean() >= 0.8 and table["resamples_used"].iloc[0] == 300
    assert (table["lo"] <= table["strength"]).all() and (table["strength"] <= table["hi"]).all()
    unbeaten = pd.DataFrame({"left": ["a", "a", "b"], "right": ["b", "c", "c"], "outcome": ["left", "left", "tie"]})
    with pytest.raises(ValueError, match="never beat"):
        pref.bradley_terry(unbeaten, n_boot=0)


def test_win_rates_count_ties_half_with_wilson_intervals():
    from statsmodels.stats.proportion import proportion_confint

    frame = pd.DataFrame({"left": ["a", "a", "b", "a", "c", "b"], "right": ["b", "c", "c", "b", "a", "a"],
                          "outcome": ["left", "right", "tie", "both_bad", "left", "left"]})
    table = pref.win_rates(frame).set_index("system")
    # a: beat b, lost to c, tie with b, lost to c (c left wins), lost to b (b left wins): 1 win, 1 tie, 3 losses
    assert table.loc["a", ["comparisons", "wins", "ties", "losses"]].tolist() == [5, 1, 1, 3]
    assert table.loc["a", "win_rate"] == pytest.approx(1.5 / 5)
    decisive = frame[frame["outcome"].isin(["left", "right"])]
    plain = pref.win_rates(decisive).set_index("system")
    for system, row in plain.iterrows():
        lo, hi = proportion_confint(row["wins"], row["comparisons"], method="wilson")
        assert (row["lo"], row["hi"]) == pytest.approx((lo, hi), abs=1e-5)


def test_online_elo_follows_the_arena_update_by_hand():
    frame = pd.DataFrame({"left": ["a", "b", "a"], "right": ["b", "c", "c"], "outcome": ["left", "tie", "right"]})
    ra = rb = rc = 1000.0
    e = 1 / (1 + 10 ** ((rb - ra) / 400)); ra, rb = ra + 4 * (1 - e), rb + 4 * (0 - (1 - e))  # noqa: E702
    e = 1 / (1 + 10 ** ((rc - rb) / 400)); rb, rc = rb + 4 * (0.5 - e), rc + 4 * (0.5 - (1 - e))  # noqa: E702
    e = 1 / (1 + 10 ** ((rc - ra) / 400)); ra, rc = ra + 4 * (0 - e), rc + 4 * (1 - (1 - e))  # noqa: E702
    table = pref.online_elo(frame).set_index("system")["elo"]
    assert table.to_dict() == pytest.approx({"a": ra, "b": rb, "c": rc})


def test_position_bias_is_a_binomial_test_on_decisive_judgements():
    from scipy.stats import binomtest

    frame = pd.DataFrame({"left": "a", "right": "b", "outcome": ["left"] * 62 + ["right"] * 38 + ["tie"] * 9})
    found = pref.position_bias(frame)
    assert found["decisive"] == 100 and found["left_share"] == pytest.approx(0.62)
    assert found["p"] == pytest.approx(binomtest(62, 100, 0.5).pvalue)
    with pytest.raises(ValueError, match="outcome must be one of"):
        pref.position_bias(frame.assign(outcome="A"))


def test_best_worst_counting_scores_by_hand():
    """Two annotators, two tuples: the counts worked out by hand (Kiritchenko & Mohammad 2016's definition)."""
    rows = [("t1", "x", "a", "best"), ("t1", "x", "b", ""), ("t1", "x", "c", ""), ("t1", "x", "d", "worst"),
            ("t1", "y", "a", ""), ("t1", "y", "b", "best"), ("t1", "y", "c", ""), ("t1", "y", "d", "worst"),
            ("t2", "x", "a", "best"), ("t2", "x", "c", "worst"), ("t2", "x", "e", ""), ("t2", "x", "f", "")]
    frame = pd.DataFrame(rows, columns=["tuple", "annotator", "item", "choice"])
    frame["annotation"] = frame["tuple"] + "/" + frame["annotator"]
    scores = pref.bws_scores(frame).set_index("item")["score"]
    # a: 3 appearances, best twice -> 2/3; b: 2, best once -> 1/2; c: 3, worst once -> -1/3; d: 2, worst twice -> -1
    assert scores.to_dict() == pytest.approx({"a": 2 / 3, "b": 0.5, "c": -1 / 3, "d": -1.0, "e": 0.0, "f": 0.0})
    with pytest.raises(ValueError, match="exactly one best and one worst"):
        pref.bws_scores(frame.assign(choice=frame["choice"].replace("worst", "")))


def test_best_worst_tuples_are_balanced():
    items = [f"i{k}" for k in range(40)]
    tuples = pref.bws_tuples(items, size=4, per_item=8, tries=30)
    assert len(tuples) == 80 and all(len(set(t)) == 4 for t in tuples)
    counts = pd.Series([i for t in tuples for i in t]).value_counts()
    assert (counts == 8).all() and len(counts) == 40
    pairs = pd.Series([tuple(sorted((x, y))) for t in tuples for x in t for y in t if x < y]).value_counts()
    assert pairs.max() <= 3  # 480 pair slots over 780 pairs: as even as a random design of the best of 30 gets
    with pytest.raises(ValueError, match="whole number of tuples"):
        pref.bws_tuples(items[:7], size=4, per_item=1)


def test_split_half_reliability_is_high_for_consistent_annotators_and_low_for_random_ones():
    rng = np.random.default_rng(4)
    items = [f"i{k}" for k in range(40)]
    value = dict(zip(items, rng.normal(size=40)))
    tuples = pref.bws_tuples(items, tries=5)

    def annotate(noise: float) -> pd.DataFrame:
        rows = []
        for t, members in enumerate(tuples):
            for annotator in range(6):
                seen = {i: value[i] + rng.normal(0, noise) for i in members}
                best, worst = max(seen, key=seen.get), min(seen, key=seen.get)
                rows += [(t, f"{t}/{annotator}", i, "best" if i == best else "worst" if i == worst else "")
                         for i in members]
        return pd.DataFrame(rows, columns=["tuple", "annotation", "item", "choice"])
    consistent = pref.split_half_reliability(annotate(0.3), splits=20)
    random = pref.split_half_reliability(annotate(100.0), splits=20)
    assert consistent["splits"] == 20 and consistent["spearman"] > 0.85
    assert abs(random["spearman"]) < 0.3


# ---- `evalstudio analyze` of a comparisons file --------------------------------------------------------------------

def _arena_file(path, n: int = 2500, seed: int = 5) -> pd.DataFrame:
    """Chatbot Arena's battle format (model_a shown first; winner model_a / model_b / tie / tie (bothbad)), with
    annotators judging the same pairs of the same questions."""
    rng = np.random.default_rng(seed)
    true = np.exp(rng.normal(0, 1, 5))
    a = rng.integers(0, 5, n)
    b = (a + rng.integers(1, 5, n)) % 5
    winner = np.where(rng.random(n) < true[a] / (true[a] + true[b]), "model_a", "model_b")
    winner = np.where(rng.random(n) < 0.1, rng.choice(["tie", "tie (bothbad)"], n), winner)
    frame = pd.DataFrame({"question_id": rng.integers(0, 150, n), "judge": [f"j{x}" for x in rng.integers(0, 4, n)],
                          "model_a": [f"m{x}" for x in a], "model_b": [f"m{x}" for x in b], "winner": winner})
    pair = np.where(frame["model_a"] < frame["model_b"], frame["model_a"] + frame["model_b"],
                    frame["model_b"] + frame["model_a"])
    frame = frame[~frame.assign(pair=pair).duplicated(["question_id", "judge", "pair"])].reset_index(drop=True)
    frame.to_json(path, orient="records", lines=True)
    return frame


def test_a_chatbot_arena_battle_file_is_analysed_as_comparisons(tmp_path):
    import krippendorff

    from .test_analyze_input import invoke

    battles = _arena_file(tmp_path / "battles.jsonl")
    result = invoke(tmp_path / "battles.jsonl", "-o", tmp_path / "out", "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    assert f"{len(battles)} comparisons of 5 systems on" in result.stdout and "Position bias" in result.stdout
    out = tmp_path / "out"
    strengths = pd.read_csv(out / "bradley_terry.csv").set_index("system").sort_index()
    outcome = battles["winner"].map({"model_a": "left", "model_b": "right"}).fillna("tie")
    frame = pd.DataFrame({"left": battles["model_a"], "right": battles["model_b"], "outcome": outcome})
    theirs = choix.mm_pairwise(5, _choix_data(frame, list(strengths.index)), tol=1e-12, max_iter=100_000)
    assert np.allclose(np.log(strengths["strength"]), theirs - theirs.mean(), atol=1e-6)
    assert strengths.loc[strengths["elo"].idxmax(), "elo"] > 1000 > strengths["elo"].min()
    rates = pd.read_csv(out / "win_rates.csv").set_index("system")
    assert rates["comparisons"].sum() == 2 * len(battles)
    agreement = pd.read_csv(out / "agreement.csv").iloc[0]
    pair = np.where(battles["model_a"] < battles["model_b"], battles["model_a"] + "|" + battles["model_b"],
                    battles["model_b"] + "|" + battles["model_a"])
    unit = battles["question_id"].astype(str) + "/" + pair
    winner = np.select([outcome == "left", outcome == "right"], [battles["model_a"], battles["model_b"]], "tie")
    table = pd.DataFrame({"unit": unit, "coder": battles["judge"], "winner": winner})
    wide = table.pivot(index="coder", columns="unit", values="winner")
    codes = {w: i for i, w in enumerate(sorted(set(winner)))}
    matrix = wide.apply(lambda col: col.map(codes)).to_numpy(dtype=float)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert agreement["alpha"] == pytest.approx(expected, abs=1e-9)
    assert "Strengths" in (out / "index.html").read_text(encoding="utf-8")


def test_bad_comparisons_are_reported_at_their_lines(tmp_path):
    from .test_analyze_input import invoke, write

    path = write(tmp_path, "c.csv", "item,annotator,left,right,outcome\n1,a,x,y,left\n2,a,x,x,right\n3,a,x,y,"
                                    "better\n,a,x,y,tie\n1,a,x,y,right\n1,a,y,x,left\n")
    result = invoke(path, "-o", tmp_path / "out")
    assert result.exit_code == 2 and not (tmp_path / "out").exists()
    for expected in (":3: right: the same system on both sides", ":4: outcome: 'better' is not an outcome",
                     ":5: item: empty", ":6: item: annotator 'a' compared this pair on this item twice",
                     ":7: item: annotator 'a' compared this pair on this item twice"):  # (the sides swapped)
        assert f"{path}{expected}" in result.stderr, result.stderr
    spec = write(tmp_path, "spec.yaml", "layout: pairwise\ncolumns: {left: first, right: second, outcome: pick}\n"
                                        "outcomes: {left: ['1'], right: ['2'], tie: ['0']}\n")
    mapped = write(tmp_path, "m.csv", "item,first,second,pick\n1,x,y,1\n2,y,z,2\n3,z,x,0\n4,x,z,1\n5,y,x,2\n")
    result = invoke(mapped, "--spec", spec, "-o", tmp_path / "out2", "--bootstrap", "10")
    assert result.exit_code == 0, result.output
    rates = pd.read_csv(tmp_path / "out2" / "win_rates.csv").set_index("system")
    # x: won 1 (vs y), tie with z, won vs z, won vs y (y left lost: "2" means right, x) -> 3 wins 1 tie of 4
    assert rates.loc["x", ["wins", "ties", "comparisons"]].tolist() == [3, 1, 4]


def test_a_best_worst_file_is_scored_with_its_reliability(tmp_path):
    """One row per annotated tuple (item1..item4, best, worst, annotator), as Kiritchenko & Mohammad's annotation
    files are: scores equal the hand-countable definition and the split-half reliability of consistent annotators
    is high."""
    from .test_analyze_input import invoke

    rng = np.random.default_rng(9)
    items = [f"w{k}" for k in range(24)]
    value = dict(zip(items, np.linspace(-2, 2, 24)))
    rows = []
    for t, members in enumerate(pref.bws_tuples(items, tries=5)):
        for annotator in range(4):
            seen = {i: value[i] + rng.normal(0, 0.4) for i in members}
            rows.append({**{f"item{k + 1}": m for k, m in enumerate(members)}, "annotator": f"a{annotator}",
                         "best": max(seen, key=seen.get), "worst": min(seen, key=seen.get)})
    frame = pd.DataFrame(rows)
    frame.to_csv(tmp_path / "bws.csv", index=False)
    result = invoke(tmp_path / "bws.csv", "-o", tmp_path / "out", "--bootstrap", "20")
    assert result.exit_code == 0, result.output
    assert "Split-half reliability" in result.stdout
    scores = pd.read_csv(tmp_path / "out" / "bws_scores.csv").set_index("item")
    members = frame[[f"item{k}" for k in range(1, 5)]]
    for item in ("w0", "w11", "w23"):
        appearances = int((members == item).to_numpy().sum())
        expected = ((frame["best"] == item).sum() - (frame["worst"] == item).sum()) / appearances
        assert scores.loc[item, "appearances"] == appearances and scores.loc[item, "score"] == pytest.approx(expected)
    assert pd.read_csv(tmp_path / "out" / "reliability.csv")["spearman"].iloc[0] > 0.9
    assert scores.index[0] == "w23" or scores.loc["w23", "score"] > 0.8


def test_bad_best_worst_rows_are_reported_at_their_lines(tmp_path):
    from .test_analyze_input import invoke, write

    path = write(tmp_path, "bws.csv", "item1,item2,item3,item4,best,worst\na,b,c,d,a,d\na,b,c,d,e,d\n"
                                      "a,a,c,d,a,d\na,b,c,d,b,b\na,b,,d,a,d\n")
    result = invoke(path, "-o", tmp_path / "out")
    assert result.exit_code == 2 and not (tmp_path / "out").exists()
    for expected in (":3: best: the best item 'e' is not one of the tuple's items",
                     ":4: item1: the same item twice in one tuple", ":5: worst: the same item chosen best and worst",
                     ":6: item1: an item cell is empty"):
        assert f"{path}{expected}" in result.stderr, result.stderr


def test_an_llm_judges_verdicts_are_compared_with_the_humans_plurality(tmp_path):
    """MT-Bench's agreement: per item and pair (the position taken out), the judge's verdict against the humans'
    plurality; checked by hand and Cohen's kappa against scikit-learn."""
    from sklearn.metrics import cohen_kappa_score

    from .test_analyze_input import invoke, write

    humans = write(tmp_path, "h.csv", "item,annotator,left,right,outcome\n"
                   "1,a,x,y,left\n1,b,y,x,right\n1,c,x,y,right\n"   # item 1: x, x, y -> x ("first")
                   "2,a,x,y,tie\n2,b,x,y,tie\n"                     # item 2: tie
                   "3,a,y,z,left\n3,b,z,y,right\n"                  # item 3: y, y -> y ("first" of y|z)
                   "4,a,x,z,left\n4,b,x,z,right\n")                 # item 4: x vs z: no plurality, left out
    judge = write(tmp_path, "j.csv", "item,judge,left,right,outcome\n"
                  "1,gpt,y,x,right\n"       # x: agrees
                  "2,gpt,x,y,left\n"        # x, humans tie: disagrees
                  "3,gpt,z,y,left\n"        # z, humans y: disagrees
                  "4,gpt,x,z,left\n")       # no human plurality
    result = invoke(humans, "--metrics", judge, "-o", tmp_path / "out", "--bootstrap", "0")
    assert result.exit_code == 0, result.output
    row = pd.read_csv(tmp_path / "out" / "judge_agreement.csv").iloc[0]
    assert (row["judge"], row["units"], row["human_no_plurality"]) == ("gpt", 3, 1)
    assert row["agreement"] == pytest.approx(1 / 3)
    assert row["decisive_units"] == 2 and row["agreement_without_ties"] == pytest.approx(0.5)
    expected = cohen_kappa_score(["first", "tie", "first"], ["first", "first", "second"],
                                 labels=["first", "second", "tie"])
    assert row["kappa"] == pytest.approx(expected)
    assert "Judge gpt against the humans: agrees on 33.3% of 3" in result.stdout
