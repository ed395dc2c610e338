"""`evalstudio judge` runs against the real OpenAI-compatible server process (tests/openai_server.py), as issue 65
met them: a malformed answer is asked again by the next run, only a refusal of the response format turns JSON mode
off, each part of a study counts its own requests and its lists are told apart in metrics.csv, a run killed with
SIGKILL resumes asking only what was not committed, the reachability check keeps --timeout and says what it saw,
and the summary printed to a pipe is never cut."""

from __future__ import annotations

import csv
import json
import socket
import sqlite3
import subprocess
import threading
import time

import httpx
import pytest

from evalstudio.base.chat import digest

from .conftest import ROOT, example_files, free_port
from .test_cli import EVALSTUDIO, run
from .judge_server import dialogue_items, judge_cli, llm, summary_of  # noqa: F401 (llm: the server fixture)


def answers_of(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]


def test_a_malformed_answer_is_asked_again_by_the_next_run(llm, tmp_path):
    """An endpoint that answered prose for every task, then mended: the next run asks every task again (once each)
    and has every answer; nothing malformed stayed in the cache."""
    first = judge_cli(llm, tmp_path, "dialogue", "--limit", "4", model="unmended")
    assert first.returncode == 0, first.stderr
    assert [row["missing"] for row in summary_of(tmp_path)] == ["4"]
    asked = llm.stats()["requests"]
    assert asked == 4 * 3  # (each asked again twice within the run)
    httpx.post(llm.url.rsplit("/v1", 1)[0] + "/mend", timeout=30)
    again = judge_cli(llm, tmp_path, "dialogue", "--limit", "4", model="unmended")
    assert again.returncode == 0, again.stderr
    row = summary_of(tmp_path)[0]
    assert (row["answers"], row["missing"], row["requests"], row["from_cache"]) == ("4", "0", "4", "0")
    assert llm.stats()["requests"] == asked + 4


def test_a_valid_later_attempt_is_found_by_the_next_run(llm, tmp_path, protocol="mqm", tasks=8):
    """The endpoint answers prose the first time a prompt is asked and valid JSON the second: the malformed first
    attempts are forgotten and the valid second ones kept, so a second run with the same cache sends nothing and
    has every answer from the cache (it once asked the first attempt of every task again)."""
    first = judge_cli(llm, tmp_path, protocol, "--limit", str(tasks), model="malformed")
    assert first.returncode == 0, first.stderr
    assert llm.stats()["requests"] == 2 * tasks
    assert summary_of(tmp_path)[0]["missing"] == "0"
    again = judge_cli(llm, tmp_path, protocol, "--limit", str(tasks), model="malformed")
    assert again.returncode == 0, again.stderr
    row = summary_of(tmp_path)[0]
    assert (row["answers"], row["missing"], row["requests"], row["from_cache"]) == (str(tasks), "0", "0", str(tasks))
    assert llm.stats()["requests"] == 2 * tasks


def test_only_a_refusal_of_the_response_format_turns_json_mode_off(llm, tmp_path):
    """The first task's prompt is too long for the model (HTTP 400 "maximum context length"): that task is missing
    with the server's reason, asked once (a refusal, not a missing JSON mode), and every other task is still asked
    in JSON mode (concurrency 1: the others are asked after the refusal)."""
    items = dialogue_items(tmp_path / "items.jsonl", 6)
    lines = items.read_text().splitlines()
    first = json.loads(lines[0])
    first["context"] = "A: TOO-LONG " + first["context"]
    items.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    done = judge_cli(llm, tmp_path, "dialogue", "--concurrency", "1", model="judge+toolong", files=[items])
    assert done.returncode == 0, done.stderr
    bodies = llm.bodies()
    long = [b for b in bodies if "TOO-LONG" in b["messages"][-1]["content"]]
    assert len(long) == 1 and len(bodies) == 6
    assert all(b.get("response_format") == {"type": "json_object"} for b in bodies)
    missing = [a for a in answers_of(tmp_path) if a["answer"] is None]
    assert len(missing) == 1 and "HTTP 400" in missing[0]["error"] and "maximum context length" in missing[0]["error"]


# the whole module in one worker under `make test` (xdist's loadgroup): its module fixture (`judge circa`, 6 s)
# is computed once, not once in each worker that draws one of its tests
pytestmark = pytest.mark.xdist_group("test_judge_runs")


@pytest.fixture(scope="module")
def circa_run(tmp_path_factory):
    """`judge circa` over both example files: Part I and the two counterbalanced lists of Part II (run once)."""
    from .judge_server import OpenAIServer

    folder = tmp_path_factory.mktemp("circa")
    server = OpenAIServer(folder)
    try:
        done = judge_cli(server, folder, "circa", files=example_files("circa"))
        assert done.returncode == 0, done.stderr
        yield folder, server.bodies()
    finally:
        server.stop()


def test_each_part_of_a_study_counts_its_own_requests_and_tokens(circa_run):
    """summary.csv has a row per part; each counts the requests and tokens of its own prompts (as the server saw
    them: a token per 4 characters), so the rows add up to what was sent."""
    folder, bodies = circa_run
    rows = summary_of(folder)
    assert [row["project"] for row in rows] == ["circa_part1", "circa_part2_list1", "circa_part2_list2"]
    sent: dict[str, list[int]] = {}
    for body in bodies:
        sent.setdefault(digest(body["messages"]), []).append(sum(len(m["content"]) for m in body["messages"]) // 4)
    assert sum(int(row["requests"]) for row in rows) == len(bodies)
    for row in rows:
        # the prompts this part asked the server (a filler's prompt in list 2 is list 1's, answered from the cache)
        own = [a for a in answers_of(folder) if a["project"] == row["project"] and not a["cached"]]
        assert int(row["requests"]) == len(own)
        assert int(row["tokens_in"]) == sum(sent[a["prompt"]][0] for a in own)


def test_the_lists_of_a_part_are_told_apart_in_metrics(circa_run):
    """Part II's two lists judge two versions of an item the model got wrong (its interpretation, the gold label)
    and the same version of the others: each row of metrics.csv names its project and the version it judged, and
    no two rows are the same item, system, criterion, project and version."""
    folder, _ = circa_run
    with open(folder / "out" / "metrics.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keys = [(r["item"], r["system"], r["metric"], r["criterion"], r["project"], r["version"]) for r in rows]
    assert len(set(keys)) == len(keys)
    assert {r["project"] for r in rows} == {"circa_part2_list1", "circa_part2_list2"}
    with open(ROOT / "examples" / "circa" / "model_explanations.csv", encoding="utf-8") as f:
        wrong = {f"circa-{r['id']}": r["correct_pred"] == "False" for r in csv.DictReader(f)}
    for item in {r["item"] for r in rows}:
        versions = sorted(json.loads(r["version"]) for r in rows if r["item"] == item)
        expected = [["gold"], ["prediction"]] if wrong[item] else [["prediction", "gold"]] * 2
        assert versions == expected, item


def test_analyze_on_both_lists_scores_says_to_keep_one_project(circa_run):
    """The command the judge prints after judging circa from files (`analyze --metrics out/metrics.csv`) met a
    second score per item and system (one per list of Part II) and said only "a second score of this metric":
    each refusal now names the row's project and the fix, keeping one project's rows (met by s65)."""
    from evalstudio.base.errors import InvalidInput
    from evalstudio.readers.ratings import read_metrics
    from evalstudio.readers.spec import read_spec

    folder, _ = circa_run
    spec = read_spec(ROOT / "examples" / "analyze" / "circa_mturk.yaml")
    with pytest.raises(InvalidInput) as caught:
        read_metrics(folder / "out" / "metrics.csv", spec, list(spec.criteria))
    said = [str(p) for p in caught.value.problems]
    assert said and all("second score" in p and "project 'circa_part2_list2'" in p and "keep one project's rows" in p
                        for p in said), said[:2]


def test_a_run_killed_resumes_asking_only_what_was_not_committed(llm, tmp_path):
    """kill -9 while answers are being cached (the server answers 10 requests, then holds the rest): the answers
    committed by then (at most the uncommitted batch is lost) are not asked again; the same command asks exactly the
    rest, and no answer or score is written twice."""
    files = [str(dialogue_items(tmp_path / "items.jsonl", 60))]
    cache = tmp_path / "cache" / "judge.sqlite3"
    command = [*EVALSTUDIO, "judge", "dialogue", *files, "--model", "judge+stall", "--base-url", llm.url, "-o",
               str(tmp_path / "out"), "--cache", str(cache), "--concurrency", "2"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while llm.stats()["requests"] < 12:  # a state: ten answered, two held
        assert process.poll() is None
        time.sleep(0.05)  # (polling the state)
    process.kill()
    process.wait(timeout=60)
    with sqlite3.connect(cache) as db:
        committed = db.execute("SELECT count(*) FROM answers").fetchone()[0]
    assert committed <= 10
    httpx.post(llm.url.rsplit("/v1", 1)[0] + "/release", timeout=30)
    before = llm.stats()["requests"]
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert llm.stats()["requests"] - before == 60 - committed
    row = summary_of(tmp_path)[0]
    assert (row["tasks"], row["answers"], row["missing"], row["from_cache"]) == ("60", "60", "0", str(committed))
    answers = answers_of(tmp_path)
    assert len(answers) == 60 and len({a["task_id"] for a in answers}) == 60
    with open(tmp_path / "out" / "metrics.csv", encoding="utf-8") as f:
        scores = [(r["item"], r["criterion"]) for r in csv.DictReader(f)]
    assert len(scores) == 60 * 3 == len(set(scores))
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT count(*), count(DISTINCT key) FROM answers").fetchone() == (60, 60)


class SilentServer:
    """A loopback port that accepts connections and never answers (a server that hangs), or, with `listen`
    False, a port nothing listens on."""

    def __init__(self, listen: bool):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0 if listen else free_port()))
        self.port = self.socket.getsockname()[1]
        self.held: list = []
        if listen:
            self.socket.listen(16)
            threading.Thread(target=self._accept, daemon=True).start()
        else:
            self.socket.close()

    def _accept(self):
        while True:
            try:
                self.held.append(self.socket.accept()[0])
            except OSError:
                return

    def close(self):
        self.socket.close()
        for held in self.held:
            held.close()


REACHABILITY = [
    # listening, what the refusal says
    (True, "connected, but the server did not answer within 1 s (--timeout)"),
    (False, "cannot reach it"),
]


@pytest.mark.parametrize("listening, said", REACHABILITY, ids=["hangs", "nothing-there"])
def test_the_reachability_check_keeps_the_timeout_and_says_what_it_saw(tmp_path, listening, said):
    server = SilentServer(listening)
    try:
        done = run("judge", "dialogue", *[str(f) for f in example_files("dialogue")], "--model", "judge",
                   "--base-url", f"http://127.0.0.1:{server.port}/v1", "--timeout", "1", "-o", str(tmp_path / "out"),
                   cwd=tmp_path)
    finally:
        server.close()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert said in " ".join(done.stderr.split())


def test_the_summary_printed_to_a_pipe_is_never_cut(llm, tmp_path):
    """Printed to a pipe of 80 columns: the judge's name, the project and the reason for the missing answers are
    whole, each on one line."""
    name = "a-judge-with-a-rather-long-name"
    done = run("judge", "dialogue", *[str(f) for f in example_files("dialogue")], "--model", "broken", "--name", name,
               "--base-url", llm.url, "--limit", "2", "-o", str(tmp_path / "out"), "--cache",
               str(tmp_path / "cache.sqlite3"), env={"COLUMNS": "80"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if name in line)
    assert "dialogue" in line and "2 (malformed answer (2))" in line
    assert "…" not in done.stdout
    # the next step's command is whole on its line, to be copied (it was wrapped at 80 columns inside the command)
    assert f"`evalstudio analyze --protocol dialogue --metrics {tmp_path / 'out'}/metrics.csv`" in done.stdout


def test_a_cache_that_cannot_be_written_says_so(tmp_path):
    """The writer thread's failed commit (here: its table dropped by another process) is raised by the next put
    and flush, naming the file, and never lost in silence; what was committed before stays."""
    from evalstudio.base.chat import Answer, Cache, CacheError

    path = tmp_path / "cache.sqlite3"
    cache = Cache(path)
    cache.put("kept", Answer("{}", 1, 1))
    cache.flush()
    with sqlite3.connect(path) as other:
        rows = other.execute("SELECT key FROM answers").fetchall()
        other.execute("ALTER TABLE answers RENAME TO moved")
    assert rows == [("kept",)]
    cache.put("lost", Answer("{}", 1, 1))
    for step in (cache.flush, lambda: cache.put("next", Answer("{}", 1, 1))):
        with pytest.raises(CacheError, match=str(path)):
            step()
    cache.close()  # (said already: not raised again)
