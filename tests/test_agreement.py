"""Agreement statistics against published worked examples and independent implementations."""

from __future__ import annotations

import csv

import krippendorff  # GPL: test oracle only
import numpy as np
import pandas as pd
import pytest

from evalstudio.stats import agreement as ag

from .conftest import DATA

nan = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers x 12 units, missing data.
KRIPPENDORFF_2011 = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
])


@pytest.mark.parametrize("level, published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_alpha_matches_krippendorffs_worked_example(level, published):
    assert round(ag.alpha_from_matrix(KRIPPENDORFF_2011, level), 3) == published


def _random_reliability_data(rng, decimal):
    raters, units = rng.integers(2, 7), rng.integers(2, 60)
    if decimal:
        data = rng.choice(np.round(np.arange(1, 10.01, 0.1), 1), size=(raters, units))
    else:
        data = rng.integers(-3, rng.integers(-1, 6), size=(raters, units)).astype(float)
    data[rng.random((raters, units)) < rng.uniform(0, 0.5)] = nan
    return data


@pytest.mark.parametrize("level", ag.LEVELS)
@pytest.mark.parametrize("decimal", [False, True], ids=["integers", "decimals"])
def test_alpha_equals_the_krippendorff_package_on_random_data(level, decimal):
    rng = np.random.default_rng(hash((level, decimal)) % 2**32)
    checked = 0
    for _ in range(150):
        data = _random_reliability_data(rng, decimal)
        try:
            expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        except (ValueError, ZeroDivisionError):
            continue
        if np.isnan(expected):
            continue
        assert ag.alpha_from_matrix(data, level) == pytest.approx(expected, abs=1e-9)
        checked += 1
    assert checked > 100


def test_alpha_long_input_ignores_row_order_and_unit_labels():
    rng = np.random.default_rng(7)
    data = _random_reliability_data(rng, True)
    raters, units = data.shape
    unit_ids = np.array([f"task-{u}" for u in range(units)] * raters)
    order = rng.permutation(raters * units)
    assert ag.krippendorff_alpha(unit_ids[order], data.ravel()[order], "interval") == pytest.approx(
        ag.alpha_from_matrix(data, "interval"), abs=1e-12)


def test_alpha_nominal_accepts_strings():
    labels = np.array([["Yes", "No", "Yes", None], ["Yes", "No", "No", "No"], ["Yes", "Yes", "Yes", "No"]], dtype=object)
    codes = np.vectorize(lambda v: {"Yes": 1.0, "No": 0.0}.get(v, nan))(labels)
    assert ag.alpha_from_matrix(labels, "nominal") == pytest.approx(
        krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal"), abs=1e-12)


def test_alpha_degenerate_cases():
    assert np.isnan(ag.alpha_from_matrix([[3, 3, 3], [3, 3, 3]], "interval"))  # one category: undefined
    with pytest.raises(ValueError, match="two or more annotators"):
        ag.alpha_from_matrix([[1, 2, 3]], "interval")  # one rater
    with pytest.raises(ValueError, match="two or more annotators"):
        ag.alpha_from_matrix([[1, nan], [nan, 2]], "nominal")  # no unit rated twice
    with pytest.raises(ValueError, match="level must be one of"):
        ag.krippendorff_alpha([1, 1], [1, 2], "ratio")


def long(rows):
    return pd.DataFrame(rows, columns=["item", "annotator", "value"])


def test_cohen_kappa_matches_the_textbook_example():
    # 50 items: both Yes 20, A Yes / B No 5, A No / B Yes 10, both No 15 -> kappa = 0.4 (Cohen 1960 style example)
    pairs = [("Yes", "Yes")] * 20 + [("Yes", "No")] * 5 + [("No", "Yes")] * 10 + [("No", "No")] * 15
    frame = long([(i, who, v) for i, (a, b) in enumerate(pairs) for who, v in (("A", a), ("B", b))])
    [row] = ag.cohen_kappa_pairs(frame).to_dict("records")
    assert row["items"] == 50 and row["kappa"] == pytest.approx(0.4)


def test_weighted_cohen_kappa_matches_an_independent_formula():
    rng = np.random.default_rng(3)
    a = rng.integers(1, 6, 200)
    b = np.clip(a + rng.integers(-1, 2, 200), 1, 5)
    frame = long([(i, "A", x) for i, x in enumerate(a)] + [(i, "B", x) for i, x in enumerate(b)])
    observed = np.zeros((5, 5))
    for x, y in zip(a, b):
        observed[x - 1, y - 1] += 1
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    w = np.subtract.outer(np.arange(5), np.arange(5)) ** 2
    by_formula = 1 - (w * observed).sum() / (w * expected).sum()
    [row] = ag.cohen_kappa_pairs(frame, weights="quadratic").to_dict("records")
    assert row["kappa"] == pytest.approx(by_formula, abs=1e-12)


def test_cohen_kappa_pairs_use_only_shared_items():
    frame = long([(1, "A", 1), (1, "B", 1), (2, "A", 2), (2, "B", 2), (3, "A", 1), (3, "C", 2), (4, "C", 1), (4, "B", 1)])
    table = ag.cohen_kappa_pairs(frame)
    assert table[["annotator_a", "annotator_b", "items"]].values.tolist() == [["A", "B", 2]]


def test_cohen_kappa_is_nan_without_warnings_when_a_pair_used_one_label(recwarn):
    # chance agreement is 1, so kappa is 0/0: undefined, shown as NaN, and scikit-learn's warnings are not passed on
    frame = long([(i, who, "Other") for i in range(4) for who in ("A", "B")] + [(4, "A", "No"), (4, "C", "Yes")])
    table = ag.cohen_kappa_pairs(frame, labels=["Yes", "No", "Other"])
    [row] = table.to_dict("records")
    assert (row["annotator_a"], row["annotator_b"], row["items"]) == ("A", "B", 4) and np.isnan(row["kappa"])
    assert not [w for w in recwarn if "sklearn" in w.filename]


# Fleiss (1971) as reproduced in the literature: 10 subjects, 14 raters, 5 categories, kappa = 0.210.
FLEISS_1971 = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
               [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def _fleiss_long():
    rows = []
    for subject, counts in enumerate(FLEISS_1971):
        rater = 0
        for category, count in enumerate(counts, start=1):
            for _ in range(count):
                rows.append((subject, rater, category))
                rater += 1
    return long(rows)


def test_fleiss_kappa_matches_the_published_example():
    assert round(ag.fleiss_kappa(_fleiss_long()), 3) == 0.210


def test_fleiss_kappa_ignores_missing_values_instead_of_counting_them():
    frame = _fleiss_long()
    with_nan = pd.concat([frame, long([(s, 99, nan) for s in range(10)])])
    assert ag.fleiss_kappa(with_nan) == pytest.approx(ag.fleiss_kappa(frame))


def test_fleiss_kappa_refuses_unequal_rating_counts():
    frame = _fleiss_long()
    with pytest.raises(ValueError, match="same number of ratings per item"):
        ag.fleiss_kappa(frame.iloc[1:])


def test_percent_agreement_by_hand():
    # item 1: 3 ratings all equal (6/6 ordered pairs agree); item 2: A,A,B (2/6); item 3: one rating (ignored)
    frame = long([(1, "a", "x"), (1, "b", "x"), (1, "c", "x"), (2, "a", "x"), (2, "b", "x"), (2, "c", "y"), (3, "a", "x")])
    assert ag.percent_agreement(frame) == pytest.approx((1 + 1 / 3) / 2)


RELAXED = {"Probably yes / sometimes yes": "Yes", "Probably no": "No",
           "I am not sure how X will interpret Y’s answer": "In the middle, neither yes nor no"}


@pytest.mark.parametrize("column, mapping", [("goldstandard1", {}), ("goldstandard2", RELAXED)])
def test_majority_vote_reproduces_circas_published_gold_labels(column, mapping):
    """Circa's rule: a label needs at least 3 of the 5 judgements, else no majority ('NA')."""
    with open(DATA / "circa_judgements_1000.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    votes = long([(r["id"], k, mapping.get(label, label)) for r in rows for k, label in enumerate(r["judgements"].split("#"))])
    majority = ag.majority_vote(votes, min_votes=3)
    published = {r["id"]: (ag.NO_MAJORITY if r[column] == "NA" else r[column]) for r in rows}
    assert majority.to_dict() == published
    assert (majority == ag.NO_MAJORITY).sum() > 10  # the rule matters on this data


def test_majority_vote_default_needs_more_than_half_and_no_tie():
    frame = long([(1, "a", "x"), (1, "b", "x"), (1, "c", "y"), (2, "a", "x"), (2, "b", "y"), (3, "a", "z")])
    assert ag.majority_vote(frame).to_dict() == {1: "x", 2: ag.NO_MAJORITY, 3: "z"}


def test_bootstrap_ci_brackets_the_estimate():
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 6, 80)
    frame = long([(i, k, float(np.clip(t + rng.integers(-1, 2), 1, 5))) for i, t in enumerate(truth) for k in range(3)])
    stat = lambda f: ag.krippendorff_alpha(f["item"].to_numpy(), f["value"].to_numpy(), "interval")
    lo, hi = ag.bootstrap_ci(frame, stat, n_boot=300)
    assert lo < stat(frame) < hi and hi - lo < 0.3


def test_duplicate_ratings_are_an_error():
    with pytest.raises(ValueError, match="annotator 'a' rated item '1' more than once"):
        ag.cohen_kappa_pairs(long([(1, "a", 1), (1, "a", 2), (1, "b", 1), (2, "a", 1), (2, "b", 1)]))


def test_missing_codes_are_missing_not_a_category():
    """A code such as "N/A (cannot judge)" is declared missing: the statistics equal those without those rows."""
    frame = pd.DataFrame({"item": [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4],
                          "annotator": list("abc") * 4,
                          "value": ["Yes", "Yes", "N/A (cannot judge)", "No", "No", "No", "Yes", "No", "Yes",
                                    "No", "N/A (cannot judge)", "No"]})
    na = ["N/A (cannot judge)"]
    without = frame[frame["value"] != na[0]]
    from evalstudio.stats import agreement as ag

    assert ag.krippendorff_alpha(frame["item"], frame["value"], "nominal", missing=na) == \
        pytest.approx(ag.krippendorff_alpha(without["item"], without["value"], "nominal"))
    assert ag.krippendorff_alpha(frame["item"], frame["value"], "nominal") != \
        pytest.approx(ag.krippendorff_alpha(without["item"], without["value"], "nominal"))  # as a category: differs
    assert ag.percent_agreement(frame, missing=na) == pytest.approx(ag.percent_agreement(without))
    pd.testing.assert_frame_equal(ag.cohen_kappa_pairs(frame, missing=na), ag.cohen_kappa_pairs(without))
    assert ag.majority_vote(frame, missing=na).equals(ag.majority_vote(without))


def test_agreement_messages_are_plain():
    from evalstudio.stats import agreement as ag

    uneven = pd.DataFrame({"item": [1, 1, 1, 1, 2, 2], "annotator": list("abcdab"), "value": ["x", "y", "x", "x", "y", "y"]})
    with pytest.raises(ValueError) as error:
        ag.fleiss_kappa(uneven)
    assert "found 2, 4" in str(error.value) and "np." not in str(error.value)
    mixed = pd.DataFrame({"item": [1, 1, 2, 2, 3, 3], "annotator": list("ababab"), "value": [1, "unknown", 2, 2, "x", "x"]})
    assert len(ag.cohen_kappa_pairs(mixed)) == 1  # labels of mixed types compare as text, not "unknown is not supported"
    with pytest.raises(ValueError, match="interval alpha needs numbers; got 'N/A'"):
        ag.krippendorff_alpha([1, 1, 2, 2], [1.0, "N/A", 2.0, 3.0], "interval")
    assert ag.krippendorff_alpha([1, 1, 2, 2, 3, 3], [1.0, "N/A", 2.0, 3.0, 4, 4], "interval", missing=["N/A"]) == \
        pytest.approx(ag.krippendorff_alpha([2, 2, 3, 3], [2.0, 3.0, 4, 4], "interval"))


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_vectorised_alpha_bootstrap_equals_alpha_of_each_resample(level):
    """alpha_bootstrap computes every resample from counts per unit; each must equal the kernel's alpha on the
    resampled data written out (a unit drawn twice becomes two units)."""
    from evalstudio.stats.agreement import alpha_bootstrap, resample_counts

    rng = np.random.default_rng(3)
    units = np.repeat(np.arange(40), 3)
    values = rng.integers(1, 6, len(units)).astype(float)
    values[rng.random(len(units)) < 0.3] = np.nan
    present = ~np.isnan(values)
    units, values = units[present], values[present]
    order = pd.unique(units)
    pairable = [u for u in order if (units == u).sum() >= 2]
    counts = resample_counts(np.random.default_rng(5), len(pairable), 12)
    got = alpha_bootstrap(units, values, level, counts=counts)
    for row, boot in zip(counts, got):
        new_units, new_values = [], []
        for u, c in zip(pairable, row.astype(int)):
            for copy in range(c):
                new_units += [f"{u}-{copy}"] * int((units == u).sum())
                new_values += list(values[units == u])
        assert boot == pytest.approx(ag.krippendorff_alpha(np.array(new_units), np.array(new_values), level), abs=1e-12)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_resampling_value_patterns_is_resampling_units(level):
    """On a short scale alpha_bootstrap draws how many units of each value pattern a resample holds (multinomial)
    rather than the units themselves; the bootstrap distribution must be the same: two-sample Kolmogorov-Smirnov
    against resamples of the units, and the same quantiles."""
    from scipy import stats as st

    from evalstudio.stats.agreement import alpha_bootstrap, resample_counts

    rng = np.random.default_rng(8)
    truth = rng.integers(1, 6, 400)
    units = np.repeat(np.arange(400), 3)
    values = np.clip(truth[units] + rng.integers(-1, 2, len(units)), 1, 5).astype(float)
    patterns = alpha_bootstrap(units, values, level, n_boot=3000, seed=1)
    per_unit = alpha_bootstrap(units, values, level, counts=resample_counts(np.random.default_rng(2), 400, 3000))
    assert st.ks_2samp(patterns, per_unit).pvalue > 0.01
    assert np.percentile(patterns, [2.5, 50, 97.5]) == pytest.approx(np.percentile(per_unit, [2.5, 50, 97.5]),
                                                                     abs=0.01)


def test_resample_counts_are_the_bootstrap_draws_in_the_smallest_type():
    """The counts of each resample are those of n uniform draws from the same generator, held as one byte each, and
    in a wider type as soon as a unit is drawn more often than a byte holds."""
    from evalstudio.stats.agreement import resample_counts, resampled_sums

    counts = resample_counts(np.random.default_rng(7), 500, 130)
    rng = np.random.default_rng(7)
    expected = np.stack([np.bincount(row, minlength=500) for block in (64, 64, 2)
                         for row in rng.integers(0, 500, size=(block, 500))])
    assert counts.dtype == np.uint8 and np.array_equal(counts, expected)
    assert (counts.sum(1) == 500).all()

    class Skewed:  # a generator that draws the first unit 300 times in the second resample
        def integers(self, low, high, size):
            draws = np.tile(np.arange(high), (size[0], 1))
            draws[1, :300] = 0
            return draws

    skewed = resample_counts(Skewed(), 400, 3)
    assert skewed.dtype == np.uint16 and skewed[1, 0] == 300 and skewed[0, 0] == 1 and (skewed.sum(1) == 400).all()
    # the products never copy the table into floats, and give what the whole float product gives (whole-number
    # values: their sums are exact in any order, so this holds with any BLAS)
    values = np.random.default_rng(1).integers(-50, 50, size=(500, 4)).astype(float)
    assert np.array_equal(resampled_sums(counts, values), counts.astype(float) @ values)
    assert np.array_equal(resampled_sums(counts, values[:, 0]), counts.astype(float) @ values[:, 0])


def test_icc_refuses_a_second_rating_of_an_item_by_one_annotator_and_a_gap():
    from evalstudio.stats.icc import icc

    frame = pd.DataFrame({"item": [1, 1, 2, 2, 3, 3], "annotator": ["a", "b", "a", "b", "a", "b"],
                          "value": [1.0, 2.0, 2.0, 3.0, 4.0, 4.0]})
    assert len(icc(frame)) == 6
    with pytest.raises(ValueError, match="rated twice by one annotator"):
        icc(pd.concat([frame, frame.iloc[[0]]]))
    with pytest.raises(ValueError, match=r"1 of 3 items are not"):
        icc(frame.iloc[1:])
