"""`evalstudio judge` against a real OpenAI-compatible server process on loopback (tests/openai_server.py, the real
wire format with 429 + Retry-After, 500, timeouts, malformed answers): the prompt is the annotators' instrument and
nothing hidden, pairwise is asked in both orders, a second run asks nothing, Ctrl-C then a re-run completes without
a duplicate, the cost adds up, and every failure is a missing answer with its reason. (The server process and the
command line: tests/judge_server.py; the judge with a live Label Studio: tests/test_judge_live.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstudio.gateway.checks import Refused
from evalstudio.judge.instrument import Instrument
from evalstudio.protocols.mapping import importer_for
from evalstudio.tasks.scanning import scan

from .conftest import ROOT, example_files
from .judge_server import dialogue_items, judge_cli, llm, summary_of  # noqa: F401 (llm: fixture)
from .test_cli import EVALSTUDIO, run

SEEDS = ROOT / "tests" / "data" / "seeds"  # the protocol documents (a copy of ../shared/seeds: tests/data/SOURCE.md)
HIDDEN = "HIDDEN-SENTINEL-7f3a"

# one row per protocol: words of the annotators' instrument as the protocol's document gives them (a definition or
# an anchor), which the judge's prompt must hold verbatim
INSTRUMENT = [
    ("sotopia", "sotopia", "Believability"),
    ("cmv_tom", "cmv", "does it provide a clear, substantive reason why the OP might change their view?"),
    ("cmv_threads", "cmv", "Q1 — Persuasiveness (Human Judgment)"),
    ("circa_part1", "circa", "For this task we will ask you to help us interpret the indirect answers given by Y."),
    ("circa_part2_list1", "circa", "Explanations in following cases should be rated low"),
    ("dialogue", "dialogue", "this had nothing to do with the conversation whatsoever"),
    ("health", "health", "Responses are fixed, ignoring user preferences or requirements."),
    ("squality", "squality", None),
    ("squality_pairwise", "squality_pairwise", "Which response answers the question better?"),
    # (the span protocols' words are their sources' (labeling_configs/mqm.xml, esa.xml), not the seed documents')
    ("mqm", None, "label it with an error category and a severity"),
    ("esa", None, "Select the part of translation where you have identified a translation error"),
]


def first_task(project) -> dict:
    checked = scan(project, importer_for(project), example_files(project.entry), spool=True)
    try:
        with open(checked.spool, encoding="utf-8") as spooled:
            return json.loads(spooled.readline().split("\t", 3)[3])
    finally:
        checked.discard()


def static_texts(project) -> list[str]:
    """Every static text of the config as the gateway's participants get it (headings, definitions, anchors)."""
    import xml.etree.ElementTree as ET

    from evalstudio.judge.instrument import _text

    root = ET.fromstring(project.config_for("gateway"))
    return [_text(e.attrib["value"]) for e in root.iter() if e.tag in ("Header", "Text", "HyperText")
            and "value" in e.attrib and "$" not in e.attrib["value"] and _text(e.attrib["value"])]


def front_texts(project) -> list[str]:
    """The words of a study's front matter (consent statements, practice explanations, questions): none in a prompt."""
    from evalstudio.protocols.front_matter import practice_items

    crowd = project.crowd
    if crowd is None or crowd.consent is None:
        return []
    return [*crowd.consent.statements, *(i["explanation"] for i in practice_items(project)),
            *(q.text for q in crowd.background + crowd.exit_survey)]


@pytest.mark.parametrize("name, seed, words", INSTRUMENT, ids=[row[0] for row in INSTRUMENT])
def test_the_prompt_is_the_instrument_and_nothing_hidden(reg, name, seed, words):
    project = reg.get(name)
    task = first_task(project)
    instrument = Instrument(project)
    # every hidden value a task may carry: its meta (system, gold, model ratings, ...) and any data field the
    # labeling config does not display
    task["meta"] = {key: f"{HIDDEN}-{key}" for key in [*(task.get("meta") or {}), "system", "gold_label",
                                                       "model_ratings", "candidates"]}
    task["data"] = {**task["data"], **{f"{k}_hidden": f"{HIDDEN}-{k}" for k in ("system", "gold", "model_version")}}
    for order in instrument.orders():
        prompt = instrument.prompt(task["data"], order)
        text = "\n".join(m["content"] for m in prompt.messages)
        assert HIDDEN not in text
        for front in front_texts(project):  # the study's front matter is the participants' alone (issue 70)
            assert front not in text, front
        for static in static_texts(project):
            for line in static.splitlines():
                assert line.strip(" |") in text, line
        for control in instrument.controls:
            assert f'"{control}"' in text  # every question, by name, in the page and in the form
        if words:
            assert words in text
            if seed not in (None, "squality_pairwise"):  # (squality's wording is evalstudio's: see its config)
                document = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(SEEDS.iterdir()))
                assert " ".join(words.split()) in " ".join(document.split()), "not the seed document's words"
    if instrument.positions > 1:
        shown = [instrument.shown(task["data"], order) for order in instrument.orders()]
        assert shown[0]["response_a"] == shown[1]["response_b"] and shown[0]["response_b"] == shown[1]["response_a"]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=300), st.recursive(st.none() | st.booleans() | st.integers() | st.floats()
                                                     | st.text(max_size=20),
                                                     lambda inner: st.lists(inner, max_size=4)
                                                     | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                                                     max_leaves=12).map(json.dumps)))
def test_a_hostile_answer_is_refused_with_a_reason_or_checked(reg, content):
    instrument = _dialogue_instrument(reg)
    try:
        answer = instrument.check(content)
    except Refused as e:
        assert str(e)
        return
    assert set(answer) == {"appropriateness", "information_content", "human_likeness"}
    assert all(isinstance(v, (int, float)) and 1 <= v <= 5 and float(v).is_integer() for v in answer.values())


_CACHED: dict = {}


def _dialogue_instrument(reg):
    if "dialogue" not in _CACHED:
        _CACHED["dialogue"] = Instrument(reg.get("dialogue"))
    return _CACHED["dialogue"]



def test_a_second_run_asks_nothing_and_the_cost_adds_up(llm, tmp_path):
    first = judge_cli(llm, tmp_path, "dialogue", "--limit", "12", "--price-in", "3", "--price-out", "15")
    assert first.returncode == 0, first.stderr
    asked = llm.stats()["requests"]
    assert asked == 12
    row = summary_of(tmp_path)[0]
    assert (row["tasks"], row["answers"], row["missing"], row["requests"]) == ("12", "12", "0", "12")
    # the server counts a token per 4 characters of the messages it was sent and of its answers
    bodies = llm.bodies()
    tokens_in = sum(sum(len(m["content"]) for m in b["messages"]) // 4 for b in bodies)
    assert int(row["tokens_in"]) == tokens_in
    assert float(row["cost"]) == pytest.approx(tokens_in * 3 / 1e6 + int(row["tokens_out"]) * 15 / 1e6)
    assert all(b["messages"][0]["role"] == "system" and b["response_format"] == {"type": "json_object"}
               for b in bodies)
    # the key never appears on the command line (argv) or in what was written
    out = tmp_path / "out"
    assert all("sk-test-secret" not in p.read_text() for p in out.iterdir())
    again = judge_cli(llm, tmp_path, "dialogue", "--limit", "12", "--price-in", "3", "--price-out", "15")
    assert again.returncode == 0, again.stderr
    assert llm.stats()["requests"] == asked  # asked nothing again
    row = summary_of(tmp_path)[0]
    assert (row["from_cache"], row["requests"], row["cost"]) == ("12", "0", "0.0")
    metrics = (out / "metrics.csv").read_text().splitlines()
    assert metrics[0] == "item,system,metric,criterion,value,confidence,project,version" and len(metrics) == 1 + 12 * 3


def test_pairwise_is_asked_in_both_orders_and_position_bias_is_measured(llm, tmp_path):
    done = judge_cli(llm, tmp_path, "squality_pairwise", "--limit", "10", model="first")
    assert done.returncode == 0, done.stderr
    bodies = llm.bodies()
    assert len(bodies) == 20
    pages = [b["messages"][1]["content"] for b in bodies]
    for page in pages:
        a, b = page.split("# Response A\n", 1)[1].split("\n# Response B\n", 1)
        b = b.split("\n# Which response", 1)[0]
        assert any(page != other and f"# Response A\n{b}\n# Response B\n{a}\n" in other for other in pages)
    row = summary_of(tmp_path)[0]
    # a judge that always picks the first shown: every verdict for the first shown, no two orders agree
    assert (row["first_shown_share"], row["order_consistency"]) == ("1.0", "0.0")
    comparisons = (tmp_path / "out" / "metrics.csv").read_text().splitlines()
    assert comparisons[0] == "item,annotator,left,right,outcome,confidence"
    assert {line.split(",")[4] for line in comparisons[1:]} == {"tie"}



def test_ctrl_c_then_a_rerun_completes_without_a_duplicate(llm, tmp_path):
    """The server answers 10 requests and holds the next ones (a state, not a time: the judge cannot finish before
    Ctrl-C); Ctrl-C writes the 10 tasks judged; once the server lets go, the same command asks only the other 50."""
    files = [str(dialogue_items(tmp_path / "items.jsonl", 60))]
    command = [*EVALSTUDIO, "judge", "dialogue", *files, "--model", "judge+stall", "--base-url", llm.url, "-o",
               str(tmp_path / "out"), "--cache", str(tmp_path / "cache" / "judge.sqlite3"), "--limit", "60",
               "--concurrency", "2"]
    # Ctrl-C as in a terminal: the default SIGINT handling, whatever the test runner's process set
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "COLUMNS": "200"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while llm.stats()["requests"] < 12:  # a state: ten answered, two held
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "the same command again asks only the rest" in " ".join(err.split())
    httpx.post(llm.url.rsplit("/v1", 1)[0] + "/release", timeout=30)
    partial = summary_of(tmp_path)[0]
    assert int(partial["tasks"]) == 10
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "COLUMNS": "200"})
    assert again.returncode == 0, again.stderr
    row = summary_of(tmp_path)[0]
    assert (row["tasks"], row["answers"], row["missing"]) == ("60", "60", "0")
    assert row["from_cache"] == "10"
    per_prompt = llm.stats()["per_prompt"]
    assert len(per_prompt) == 60
    assert sum(n > 1 for n in per_prompt.values()) == 2  # the two held at Ctrl-C, asked again
    answers = [json.loads(line) for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 60 and len({a["task_id"] for a in answers}) == 60


FAILURES = [
    # model, options, answered, the reason of a missing answer
    ("judge+429", [], 4, None),
    ("judge+500", [], 4, None),
    ("judge+malformed", [], 4, None),
    ("judge+fenced", [], 4, None),
    ("judge+nojson", [], 4, None),
    ("judge+timeout", ["--timeout", "2"], 4, None),
    ("fail", ["--retries", "1"], 0, "HTTP 500 after 2 attempts"),
    ("broken", [], 0, "malformed answer: not JSON"),
    ("off-scale", [], 0, "malformed answer: appropriateness: 6 is outside 1..5"),
]


@pytest.mark.parametrize("model, options, answered, reason", FAILURES, ids=[row[0] for row in FAILURES])
def test_every_failure_is_retried_or_a_missing_answer_with_its_reason(llm, tmp_path, model, options, answered,
                                                                       reason):
    done = judge_cli(llm, tmp_path, "dialogue", "--limit", "4", *options, model=model)
    assert done.returncode == 0, done.stderr
    row = summary_of(tmp_path)[0]
    assert (int(row["answers"]), int(row["missing"])) == (answered, 4 - answered), row
    answers = [json.loads(line) for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]
    if reason:
        assert all(reason in a["error"] for a in answers), answers[0]["error"]
    else:
        assert all(a["error"] is None and a["answer"] for a in answers)


def test_options_that_cannot_work_are_refused_naming_the_fix(tmp_path):
    cases = [(["--samples", "3"], "--temperature above 0"),
             (["--base-url", "http://127.0.0.1:9/v1", "--base-url", "http://127.0.0.1:9/v1", "--model", "b"],
              "one per --model"),
             (["--name", "x"], "cannot reach"),  # nothing listens there: said at once, not after retries
             (["--model", "judge"], "--name"),
             (["--base-url", "javascript:alert(1)"], "--base-url")]
    for extra, said in cases:
        options = ["--model", "judge", "--base-url", "http://127.0.0.1:9/v1", *extra]
        if extra[0] == "--base-url" and extra[1].startswith("javascript"):
            options = ["--model", "judge", *extra]
        done = run("judge", "dialogue", *[str(f) for f in example_files("dialogue")], *options, "-o",
                   str(tmp_path / "out"), cwd=tmp_path)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, (extra, done.stderr)


def test_the_judges_of_projects_yaml_run_without_options_and_a_key_in_the_file_is_refused(llm, tmp_path):
    """`judges:` in projects.yaml: the judges `evalstudio judge` runs when no --model is given, each with its own
    prices. A key written where the name of its variable belongs is refused at its line, naming the fix."""
    import yaml

    from .test_cli import _projects_file

    def with_judges(judges):
        def mutate(raw):
            raw["judges"] = judges
        return mutate

    good = _projects_file(tmp_path, with_judges([
        {"name": "cheap", "model": "judge", "base_url": llm.url, "price_in": 1, "price_out": 2},
        {"name": "free", "model": "judge+fenced", "base_url": llm.url}]))
    done = run("judge", "dialogue", *[str(f) for f in example_files("dialogue")], "--limit", "3", "-o",
               str(tmp_path / "out"), "--cache", str(tmp_path / "cache.sqlite3"),
               env={"EVALSTUDIO_PROJECTS": str(good)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {row["judge"]: row for row in summary_of(tmp_path)}
    assert set(rows) == {"cheap", "free"} and rows["free"]["cost"] == ""
    assert float(rows["cheap"]["cost"]) == pytest.approx(int(rows["cheap"]["tokens_in"]) / 1e6
                                                         + 2 * int(rows["cheap"]["tokens_out"]) / 1e6)
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = _projects_file(bad_dir, with_judges([{"model": "judge", "base_url": llm.url, "key_env": "sk-live-123"}]))
    refused = run("judge", "dialogue", *[str(f) for f in example_files("dialogue")], "-o", str(tmp_path / "out2"),
                  env={"EVALSTUDIO_PROJECTS": str(bad)}, cwd=tmp_path)
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "sk-live-123" in text)
    said = " ".join(refused.stderr.split())
    assert refused.returncode != 0 and f"{bad}:{line}: judges.0.key_env" in said and "never the key itself" in said
    assert "sk-live-123" not in said, "the key was echoed"
    assert yaml.safe_load(bad.read_text())["judges"][0]["key_env"] == "sk-live-123"  # (the file as written)


@pytest.mark.parametrize("template", ["pairwise", "best-worst"])
def test_comparisons_are_shown_reversed_and_answers_mapped_back_to_the_candidates(tmp_path, template):
    """A protocol of comparisons (`evalstudio new` templates): the second order shows the candidates reversed, and
    an answer that names a position is read as the candidate shown there (position A of the reversed best-worst
    tuple is the stored D; pairwise 'left' of the swapped pair is the stored right)."""
    from .test_protocol_as_data import made, tasks_of

    _, project, example = made(tmp_path, template)
    task = tasks_of(project, example)[0]
    instrument = Instrument(project)
    stored, reversed_ = instrument.orders()
    assert reversed_ == stored[::-1]
    shown = instrument.shown(task["data"], reversed_)
    field = instrument.candidate_fields[0]
    last = "abcdefghij"[instrument.positions - 1]
    assert shown[f"{field}_a"] == task["data"][f"{field}_{last}"]
    assert shown[f"{field}_{last}"] == task["data"][f"{field}_a"]
    compare = project.compare
    if template == "pairwise":
        control = project.slots(compare.criterion)[0].control
        left, right = compare.outcomes["left"], compare.outcomes["right"]
        assert instrument.unpermute({control: left}, reversed_) == {control: right}
        assert instrument.unpermute({control: left}, stored) == {control: left}
        if "tie" in compare.outcomes:
            tie = compare.outcomes["tie"]
            assert instrument.unpermute({control: tie}, reversed_) == {control: tie}
    else:
        best = project.slots(compare.best)[0].control
        worst = project.slots(compare.worst)[0].control
        assert instrument.unpermute({best: "A", worst: "B"}, reversed_) == {best: "D", worst: "C"}
        assert instrument.unpermute({best: "A", worst: "B"}, stored) == {best: "A", worst: "B"}


def test_samples_give_each_task_a_confidence_from_their_spread(llm, tmp_path):
    """--samples 3 --temperature 0.7: three answers per task (seeds 0, 1, 2, where the server takes a seed); the
    combined score is their mean and the confidence 1 - 2 x their standard deviation / the scale's range."""
    import csv
    import statistics

    done = judge_cli(llm, tmp_path, "dialogue", "--limit", "5", "--samples", "3", "--temperature", "0.7")
    assert done.returncode == 0, done.stderr
    bodies = llm.bodies()
    assert len(bodies) == 15 and sorted(b["seed"] for b in bodies) == [0] * 5 + [1] * 5 + [2] * 5
    assert all(b["temperature"] == 0.7 for b in bodies)
    answers = [json.loads(line) for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]
    given: dict = {}
    for a in answers:
        for control, value in a["answer"].items():
            given.setdefault((a["task_id"], control), []).append(value)
    with open(tmp_path / "out" / "metrics.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 * 3
    tasks = sorted({a["task_id"] for a in answers})  # (the rows: each task's criteria, in the order of the tasks)
    for number, row in enumerate(rows):
        values = given[(tasks[number // 3], row["criterion"])]
        assert float(row["value"]) == pytest.approx(statistics.fmean(values))
        assert float(row["confidence"]) == pytest.approx(max(0.0, 1 - 2 * statistics.pstdev(values) / 4), abs=1e-6)


@pytest.mark.parametrize("orders, came_back", [
    ([(0, 1), (1, 0)], [("t2", (1, 0)), ("t1", (0, 1)), ("t2", (0, 1)), ("t1", (1, 0))]),  # pairwise, both orders
    ([(0,)], [("t3", (0,)), ("t1", (0,)), ("t2", (0,))]),  # one order, tasks finished out of order
])
def test_the_prompts_are_written_in_the_order_of_the_tasks_whatever_order_they_came_back_in(orders, came_back):
    """prompts.jsonl of the same command is the same file: its prompts in the order of the tasks and orders, as
    answers.jsonl (a pairwise run once wrote them in the order the concurrent requests were started)."""
    from evalstudio.base.chat import Judge
    from evalstudio.judge.run import Asked, Run, in_order

    tasks = [{"id": t} for t in ("t1", "t2", "t3") if any(t == c for c, _ in came_back)]
    run = Run()
    for task, order in came_back:
        run.prompts[f"{task}{order}"] = ({"role": "user", "content": f"{task} {order}"},)
        run.asked.append(Asked("j", task, 0, order, f"{task}{order}", {}))
    in_order(run, [Judge(name="j", model="m", base_url="http://127.0.0.1:1/v1")], tasks)
    assert list(run.prompts) == [f"{t['id']}{o}" for t in tasks for o in orders]
    assert list(run.prompts) == [a.digest for a in run.asked]
