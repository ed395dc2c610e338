"""Adaptive collection without a server: the certainty of each task's label (one-coin Dawid-Skene against
crowd-kit's predict_proba on real crowd labels; the numeric intervals against a transcription), the ranking's
constraints (Hypothesis), the projects.yaml settings, and the replay of published labels. (Through the gateway on a
real Label Studio: tests/test_adaptive_live.py.)"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalstudio.base.errors import RegistryError
from evalstudio.crowd import routing
from evalstudio.protocols import registry
from evalstudio.stats import adaptive, replay

from .conftest import DATA, ROOT

crowdkit = pytest.importorskip("crowdkit.aggregation")


def _circa_mturk() -> pd.DataFrame:
    """Circa's published MTurk explanation ratings: 12 real workers, 1-5 taken as classes."""
    raw = pd.read_csv(DATA / "circa_mturk_final_results.csv", dtype=str)
    return pd.DataFrame({"task": raw["Input.explanation"], "worker": raw["WorkerId"],
                         "label": raw["Answer.explanation-quality.label"]}).dropna()


def _circa_judgements() -> pd.DataFrame:
    """Circa's published judgements (5 per question-answer pair, annotators not given)."""
    raw = pd.read_csv(DATA / "circa_judgements_1000.tsv", sep="\t", dtype=str)
    rows = [(i, j, label) for i, labels in enumerate(raw["judgements"]) for j, label in enumerate(labels.split("#"))]
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


def _codes(frame: pd.DataFrame):
    tasks, task_names = pd.factorize(frame["task"])
    workers, _ = pd.factorize(frame["worker"])
    labels, label_names = pd.factorize(frame["label"], sort=True)
    return tasks, workers, labels, list(task_names), list(label_names)


@pytest.mark.parametrize("source, shared", [(_circa_mturk, False), (_circa_mturk, True), (_circa_judgements, True)])
def test_posteriors_are_crowd_kit_s_one_coin_dawid_skene(source, shared):
    """The posteriors that route the tasks are crowd-kit's OneCoinDawidSkene `predict_proba` (run the same number of
    EM iterations), with each worker's skill (ability) or with one skill for all (uncertainty: crowd-kit given every
    label as one worker's)."""
    frame = source()
    tasks, workers, labels, task_names, label_names = _codes(frame)
    probas, skills = adaptive.one_coin(tasks, workers, labels, shared=shared)
    oracle_input = pd.DataFrame({"task": tasks, "worker": 0 if shared else workers, "label": labels})
    model = crowdkit.OneCoinDawidSkene(n_iter=adaptive.ITERATIONS, tol=-np.inf).fit(oracle_input)
    expected = model.probas_.reindex(index=range(len(task_names)), columns=range(len(label_names))).fillna(0.0)
    np.testing.assert_allclose(probas, expected.to_numpy(), atol=1e-9)
    oracle_skills = model.skills_.sort_index().to_numpy()
    np.testing.assert_allclose(skills, oracle_skills, atol=1e-9)


def _transcribed_numeric(frame: pd.DataFrame, weighted: bool):
    """The numeric certainty written out task by task (the module's formulas, in loops)."""
    groups = {t: g for t, g in frame.groupby("task")}
    dof = sum(len(g) - 1 for g in groups.values())
    pooled = sum(((g.value - g.value.mean()) ** 2).sum() for g in groups.values()) / dof
    means, halves = {}, {}
    if not weighted:
        for t, g in groups.items():
            n = len(g)
            ss = ((g.value - g.value.mean()) ** 2).sum()
            var = (adaptive.PRIOR_DF * pooled + ss) / (adaptive.PRIOR_DF + n - 1)
            means[t], halves[t] = g.value.mean(), adaptive.Z95 * math.sqrt(var / n)
        return means, halves
    ss, count = {}, {}
    for t, g in groups.items():
        n = len(g)
        if n < 2:
            continue
        for _, row in g.iterrows():
            ss[row.annotator] = ss.get(row.annotator, 0.0) + (row.value - g.value.mean()) ** 2 * n / (n - 1)
            count[row.annotator] = count.get(row.annotator, 0) + 1
    variance = {a: (adaptive.PRIOR_DF * pooled + ss.get(a, 0.0)) / (adaptive.PRIOR_DF + count.get(a, 0))
                for a in frame.annotator.unique()}
    for t, g in groups.items():
        w = np.array([1 / variance[a] for a in g.annotator])
        means[t] = float((w * g.value).sum() / w.sum())
        halves[t] = adaptive.Z95 / math.sqrt(w.sum())
    return means, halves


@pytest.mark.parametrize("weighted", [False, True])
def test_numeric_intervals_follow_their_formulas_on_squality(weighted):
    """SQuALITY's published overall ratings (4 reviewers, 3 per summary, some summaries cut to 1 or 2 ratings)."""
    ratings = pd.read_csv(ROOT / "examples" / "analyze" / "squality" / "ratings.csv")
    frame = ratings[ratings.criterion == "overall"].copy()
    frame["task"] = pd.factorize(frame["item"] + "/" + frame["system"])[0]
    frame = frame[~((frame.task % 3 == 0) & frame.duplicated("task"))]  # one task in three keeps one rating
    frame = frame[~((frame.task % 3 == 1) & frame.duplicated("task", keep="last") & frame.duplicated("task"))]
    annotators = pd.factorize(frame["annotator"])[0]
    certainty = adaptive.numeric_certainty(frame.task, annotators, frame.value, weighted=weighted)
    means, halves = _transcribed_numeric(frame.assign(annotator=annotators), weighted)
    tasks = sorted(means)
    np.testing.assert_allclose(certainty.label[tasks], [means[t] for t in tasks], rtol=1e-12)
    np.testing.assert_allclose(certainty.half_width[tasks], [halves[t] for t in tasks], rtol=1e-12)


@given(counts=st.lists(st.integers(0, 4), min_size=1, max_size=30), seed=st.integers(0, 2 ** 32 - 1),
       min_overlap=st.integers(1, 3), max_overlap=st.integers(1, 5))
def test_the_ranking_keeps_its_constraints(counts, seed, min_overlap, max_overlap):
    """Whatever the labels: no task at the maximum overlap is ranked, every task below the minimum comes before
    every task at or above it (those with more labels first), and the rest come by uncertainty, most uncertain
    first, ties in the participant's order."""
    rng = np.random.default_rng(seed)
    min_overlap = min(min_overlap, max_overlap)
    tasks = np.repeat(np.arange(len(counts)), counts)
    labels = rng.integers(0, 3, len(tasks))
    certainty = adaptive.categorical_certainty(tasks, rng.integers(0, 4, len(tasks)), labels,
                                               n_tasks=len(counts), n_classes=3)
    order = list(rng.permutation(len(counts)))
    ranked = adaptive.rank(certainty, order, min_overlap=min_overlap, max_overlap=max_overlap)
    assert set(ranked) == {t for t in order if counts[t] < max_overlap}
    below = [t for t in ranked if counts[t] < min_overlap]
    assert ranked[:len(below)] == below
    assert [counts[t] for t in below] == sorted((counts[t] for t in below), reverse=True)
    rest = ranked[len(below):]
    scores = [round(1 - certainty.posterior[t], 12) for t in rest]
    assert all(a >= b - 1e-12 for a, b in zip(scores, scores[1:]))
    for a, b in zip(rest, rest[1:]):
        if scores[rest.index(a)] == scores[rest.index(b)]:
            assert order.index(a) < order.index(b)


def test_a_task_at_the_target_gets_no_more_labels_and_the_study_is_done_when_all_are():
    """Three tasks: three votes for one label, a 1:1 split (uncertain: the priors keep the first labels of a study
    from being taken as perfect), one label."""
    tasks, labels = np.array([0, 0, 0, 1, 1, 2]), np.array([1, 1, 1, 0, 1, 2])
    certainty = adaptive.categorical_certainty(tasks, np.arange(6) % 3, labels, n_classes=3)
    done = adaptive.met(certainty, posterior=0.9)
    assert done[0] and not done[1]
    ranked = adaptive.rank(certainty, [0, 1, 2], min_overlap=2, max_overlap=5, done=done)
    assert ranked == [2, 1]  # task 2 (one label) first: below the minimum; task 0 is at the target
    assert not adaptive.study_done(certainty, min_overlap=2, max_overlap=5, posterior=0.9)
    assert adaptive.study_done(certainty, min_overlap=1, max_overlap=2, posterior=0.9) is False  # task 2: 1 label
    assert adaptive.study_done(certainty, min_overlap=1, max_overlap=1, posterior=0.9)  # all at the maximum


def _entry(tmp_path, **settings):
    """A projects.yaml of one entry: Circa Part I's config and criterion, with `settings` added."""
    config = ROOT / "labeling_configs" / "circa_part1.xml"
    part = registry.load(ROOT / "projects.yaml").get("circa_part1")
    lines = ["projects:", "  routed:", "    title: Routed", f"    config: {config}", "    importer: circa",
             f"    instructions: {json.dumps('<p>Read.</p>')}", "    annotators_per_task: 3",
             "    criteria:", "      interpretation:", "        scale: nominal",
             f"        control: {part.criteria['interpretation'].control}",
             f"        labels: {json.dumps(part.criteria['interpretation'].labels)}"]
    for key, value in settings.items():
        lines.append(f"    {key}:")
        lines += [f"      {k}: {v}" for k, v in value.items()]
    path = tmp_path / "projects.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("settings, message", [
    ({"assignment": {"strategy": "uncertainty", "criterion": "quality"}},
     "assignment.criterion: 'quality' is not a criterion of the entry; valid names: interpretation"),
    ({"assignment": {"strategy": "uncertainty", "min_overlap": 4}},
     "assignment.min_overlap: 4 is more than annotators_per_task (3)"),
    ({"stop_when": {"width": 0.5}}, "stop_when.width: 'interpretation' is categorical"),
    ({"stop_when": {"money": 10}}, "money needs pay_per_label"),
    ({"assignment": {"strategy": "sideways"}}, "assignment.strategy"),
    ({"assignment": {"strategy": "active", "budget": 10}}, "strategy active needs judge"),
    ({"assignment": {"strategy": "uncertainty", "judge": "j"}}, "judge and budget are for strategy active"),
    ({"assignment": {"strategy": "active", "judge": "j", "budget": 10}},
     "assignment.criterion: 'interpretation' is not numeric; an active design estimates a numeric criterion's mean"),
    ({"assignment": {"strategy": "active", "judge": "j", "budget": 1}}, "assignment.budget"),
    ({"assignment": {"strategy": "active", "judge": "j", "budget": 10}, "stop_when": {"labels": 5}},
     "stop_when: an active design stops at its budget (assignment.budget); leave stop_when out"),
    ({"assignment": {"strategy": "active", "judge": "j", "budget": 10, "mix": 0}}, "assignment.mix"),
    # PAC labels (issue 52): alone, on a categorical criterion, with a judge, epsilon and a calibration sample
    ({"stop_when": {"pac": {"judge": "j", "epsilon": 0.1, "calibration": 30}, "posterior": 0.9}},
     "pac stops when the tasks the PAC threshold gives to humans are answered; give it alone"),
    ({"assignment": {"strategy": "uncertainty"}, "stop_when": {"pac": {"judge": "j", "epsilon": 0.1,
                                                                       "calibration": 30}}},
     "stop_when.pac: PAC labels serve the calibration sample"),
    ({"stop_when": {"pac": {"judge": "j", "calibration": 30}}}, "stop_when.pac.epsilon"),
    ({"stop_when": {"pac": {"judge": "j", "epsilon": 0.1, "calibration": 5}}}, "stop_when.pac.calibration"),
    ({"stop_when": {"pac": {"judge": "j", "epsilon": 1.5, "calibration": 30}}}, "stop_when.pac.epsilon"),
])
def test_projects_yaml_refuses_what_cannot_route(tmp_path, settings, message):
    path = _entry(tmp_path, **settings)
    with pytest.raises(RegistryError) as error:
        registry.load(path)
    assert message in str(error.value)
    assert str(error.value).startswith(f"{path}:")


def test_the_answer_routing_reads_is_the_checked_result_s(tmp_path):
    reg = registry.load(_entry(tmp_path, assignment={"strategy": "uncertainty"}, stop_when={"posterior": 0.9,
                                                                                            "labels": 40}))
    route = routing.routing_of(reg.get("routed"))
    assert (route.strategy, route.min_overlap, route.posterior, route.budget) == ("uncertainty", 2, 0.9, 40)
    label = route.labels[2]
    result = [{"from_name": route.control, "to_name": "x", "type": "choices", "value": {"choices": [label]}}]
    assert routing.value_of(result, route) == json.dumps(label)
    assert routing.value_of([{**result[0], "from_name": "other"}], route) is None
    state = routing.state_of(route, [5, 7], [(7, "p1", json.dumps(label)), (5, "p1", None), (9, "p2", '"No"')])
    assert state.answers == 3 and list(state.certainty.counts) == [0, 1]


def test_adaptive_collection_needs_fewer_of_circa_s_published_labels():
    """On Circa's published judgements (200 questions, 5 labels each), `uncertainty` reaches the accuracy that
    uniform overlap 3 reaches (against the labels of all 5) with fewer labels than uniform collection needs, in
    each of two runs. (The full comparison, with intervals and what it does to agreement: benchmarks/adaptive.py.)"""
    frame = _circa_judgements()
    frame = frame[frame.task < 200]
    tasks, workers, labels, _, _ = _codes(frame)
    published = replay.Labels(tasks, workers, labels, categorical=True)
    target = replay.uniform_target(published, 3, np.random.default_rng(1), runs=20)
    for seed in range(2):
        runs = {s: replay.replay(published, s, np.random.default_rng(seed), min_overlap=2, batch=10, target=target)
                for s in ("uniform", "uncertainty")}
        needed = {s: replay.labels_to(run, published, target) for s, run in runs.items()}
        assert needed["uncertainty"] is not None and needed["uniform"] is not None, needed
        assert needed["uncertainty"] < needed["uniform"], needed


def test_agreement_of_an_adaptive_project_is_over_each_task_s_first_answers(tmp_path):
    """`analyze`/`report` of a project collected adaptively: agreement over each task's first `min_overlap` answers
    (in the order Label Studio stored them), and a note saying how many later answers were left out; a fixed
    overlap keeps every answer."""
    from evalstudio.exporters.analyses.analysis import agreement_table
    from evalstudio.stats.agreement import krippendorff_alpha

    rng = np.random.default_rng(3)
    rows, annotation = [], 0
    for task in range(40):
        extra = 2 if task % 4 == 0 else 0  # the uncertain tasks got more answers
        for k in range(2 + extra):
            annotation += 1
            label = "Yes" if (k < 2 and rng.random() < 0.8) or (k >= 2 and rng.random() < 0.4) else "No"
            rows.append({"task_id": task, "annotation_id": annotation, "annotator": f"p{k}", "agent": None,
                         "criterion": "interpretation", "value": label, "cancelled": False})
    frame = pd.DataFrame(rows).sample(frac=1.0, random_state=1)  # (any row order)
    adaptive_entry = registry.load(_entry(tmp_path, assignment={"strategy": "uncertainty"})).get("routed")
    (tmp_path / "fixed").mkdir()
    fixed_entry = registry.load(_entry(tmp_path / "fixed")).get("routed")
    table = agreement_table(frame, adaptive_entry, n_boot=20).set_index("criterion").loc["interpretation"]
    first = frame[frame.groupby("task_id")["annotation_id"].rank() <= 2]
    assert table["ratings"] == len(first) == 80
    assert table["alpha"] == pytest.approx(krippendorff_alpha(first.task_id.to_numpy(), first.value.to_numpy(),
                                                              "nominal"))
    assert "over each task's first 2 answers (20 later answer(s)" in table["note"]
    everything = agreement_table(frame, fixed_entry, n_boot=20).set_index("criterion").loc["interpretation"]
    assert everything["ratings"] == 100 and "adaptive" not in everything["note"]


def test_a_budget_stops_the_study_and_holds_count_against_it(tmp_path):
    """With money: 3 at pay_per_label: 0.5 the budget is 6 answers: no new task is served while answers and tasks
    held by others would exceed it, and the part has reached its target at the sixth answer."""
    reg = registry.load(_entry(tmp_path, assignment={"strategy": "uncertainty", "min_overlap": 1},
                               stop_when={"money": 3, "pay_per_label": 0.5}))
    route = routing.routing_of(reg.get("routed"))
    assert route.budget == 6 and route.target is None
    label = json.dumps(route.labels[0])
    five = routing.state_of(route, [1, 2, 3, 4], [(t % 4 + 1, f"p{t}", label) for t in range(5)])
    assert routing.reached(route, five, 3) is None
    order, contexts = [1, 2, 3, 4], {t: str(t) for t in (1, 2, 3, 4)}
    assert routing.choose_adaptive(route, five, order, contexts, {}, {1: ledger_load(2, 0)}, set(), 3, None) == 2
    assert routing.choose_adaptive(route, five, order, contexts, {}, {1: ledger_load(2, 1)}, set(), 3, None) is None
    six = routing.state_of(route, [1, 2, 3, 4], [(t % 4 + 1, f"p{t}", label) for t in range(6)])
    assert routing.reached(route, six, 3) == "the budget of 6 answers"
    stop = json.loads(routing.record(route, "the budget of 6 answers", six, 12.5))
    assert stop == {"target": "the budget of 6 answers", "answers": 6, "minutes": 12.5, "money": 3.0}


def ledger_load(answered: int, holding: int):
    from evalstudio.crowd.ledger import Load

    return Load(answered, holding)


def test_a_ledger_of_the_last_schema_is_migrated_and_keeps_its_answers(tmp_path):
    """A study running when evalstudio is upgraded: its schema-1 ledger gains the answers' routing values and the
    record of stops on first use; the answers it had are kept (without a value: they were not routed)."""
    import os
    import sqlite3

    from evalstudio.crowd import ledger, ledger_schema

    folder = tmp_path / "participants"
    folder.mkdir()
    os.chmod(folder, 0o700)
    db = sqlite3.connect(folder / ledger.FILE)
    for statement in ledger_schema.MIGRATIONS[1]:
        db.execute(statement)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema', '1')")
    db.execute("INSERT INTO refs (ref, participant, part, task_id, number, served, annotation_id, answered) "
               "VALUES ('r1', 'p1', 'part', 5, 1, 1.0, 9, 2.0)")
    db.commit()
    db.close()
    book = ledger.open_ledger(folder)
    assert book.part_values("part") == [(5, "p1", None)]
    assert book.stopped() == {}
    at, record = book.stop("part", '{"target": "t"}')
    assert book.stop("part", '{"target": "another"}') == (at, record)  # the first stop stays
    assert sqlite3.connect(folder / ledger.FILE).execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() \
        == (str(max(ledger_schema.MIGRATIONS)),)


def test_a_pac_part_reads_the_judge_s_label_and_the_answers(tmp_path):
    reg = registry.load(_entry(tmp_path, stop_when={"pac": {"judge": "j", "epsilon": 0.1, "calibration": 30}}))
    project = reg.get("routed")
    pac = routing.pac_of(project)
    assert routing.routing_of(project) is None and (pac.judge, pac.epsilon, pac.alpha, pac.calibration) == (
        "j", 0.1, 0.1, 30)
    label = pac.labels[1]
    result = [{"from_name": pac.control, "to_name": "x", "type": "choices", "value": {"choices": [label]}}]
    assert routing.value_of(result, pac) == json.dumps(label)  # what the ledger keeps of each answer
    predictions = [{"model_version": "judge:other", "result": result, "score": 0.2},
                   {"model_version": "judge:j", "result": result, "score": 0.8}]
    assert routing.judge_label(predictions, pac) == (1.0, 0.8)
    assert routing.judge_label([{**predictions[1], "score": 1.5}], pac) == (1.0, None)  # not a confidence
    rows = routing.draw_calibration(pac, list(range(100)), {3: predictions}, rng=np.random.default_rng(0))
    assert sum(r[4] for r in rows) == 30 and {r[3] for r in rows} == {0.3} and rows[3][1:3] == (1.0, 0.8)
