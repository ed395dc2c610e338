"""Published nested JSON files read through a spec alone (a context with its responses, a list of ratings per
criterion): the same tidy frame as a flattening script's, problems at the line of their record. The other layouts
and bad input: tests/test_analyze_input.py."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evalstudio.readers.ratings import read_ratings
from evalstudio.readers.spec import read_spec

from .test_analyze_input import _tidy, invoke, write

# USR's rating files (Mehri & Eskenazi 2020, tc_usr_data.json) have this shape: one object per context with its
# responses, each response with a list of ratings per criterion (three annotators, no ids)
USR_LIKE = [
    {"context": "A: hi\nB: hello", "fact": "f1", "responses": [
        {"model": "Original Ground Truth", "response": "nice", "Natural": [3, 2, 3], "Overall": [5, 4, 4]},
        {"model": "Argmax Decoding", "response": "ok", "Natural": [2, 2, 1], "Overall": [2, 3, 1]}]},
    {"context": "A: who won?\nB: we did", "fact": "f2", "responses": [
        {"model": "Original Ground Truth", "response": "yay", "Natural": [3, 3, 3], "Overall": [5, 5, 4]},
        {"model": "Argmax Decoding", "response": "no", "Natural": [1, 2, 1], "Overall": [1, 1, 2]}]},
]
NESTED_SPEC = ("layout: nested\nnested: {expand: responses, item: record.fact, system: model}\n"
               "criteria:\n  Natural: {scale: interval, min: 1, max: 3}\n  Overall: {scale: interval, min: 1, max: 5}\n")


@pytest.mark.parametrize("name", ["usr.json", "usr.jsonl"])
def test_a_nested_json_file_reads_as_its_flattened_table(tmp_path, name):
    """Issue 28.6: a nested file (a context with its responses, a list of ratings per criterion, no annotator ids)
    is read through the spec alone: the same tidy frame as the long table a flattening script would write, with
    annotator = position in the list; a JSON array and JSON Lines alike."""
    text = (json.dumps(USR_LIKE, indent=1) if name.endswith(".json") else
            "".join(json.dumps(r) + "\n" for r in USR_LIKE))
    spec = read_spec(write(tmp_path, "spec.yaml", NESTED_SPEC))
    tidy, _ = read_ratings(write(tmp_path, name, text), spec)
    flat = pd.DataFrame([{"item": record["fact"], "system": response["model"], "annotator": str(k + 1),
                          "criterion": criterion, "value": float(v)}
                         for record in USR_LIKE for response in record["responses"]
                         for criterion in ("Natural", "Overall") for k, v in enumerate(response[criterion])])
    assert _tidy(tidy).equals(_tidy(flat))
    result = invoke(tmp_path / name, "--spec", tmp_path / "spec.yaml", "-o", tmp_path / "out", "--bootstrap", "10")
    assert result.exit_code == 0, result.output
    assert pd.read_csv(tmp_path / "out" / "agreement.csv")["ratings"].tolist() == [12, 12]


def test_problems_in_a_nested_file_are_reported_at_the_line_of_their_record(tmp_path):
    bad = json.loads(json.dumps(USR_LIKE))
    bad[1]["responses"][0]["Natural"] = [3, "three", 3]
    del bad[1]["responses"][1]["Overall"]
    bad.append({"fact": "f3", "responses": "not a list"})
    path = write(tmp_path, "usr.json", json.dumps(bad, indent=1))
    starts = [number for number, line in enumerate(path.read_text().splitlines(), 1) if line == " {"]
    result = invoke(path, "--spec", write(tmp_path, "spec.yaml", NESTED_SPEC), "-o", tmp_path / "out")
    assert result.exit_code == 2 and not (tmp_path / "out").exists()
    assert f"{path}:{starts[1]}: value: 'three' is not a number" in result.stderr
    assert f"{path}:{starts[1]}: Overall: no ratings of 'Overall' (item 'f2')" in result.stderr
    assert f"{path}:{starts[2]}: responses: not a list" in result.stderr
    assert "3 problem(s) found, nothing was analysed" in result.stderr
    wrong = invoke(path, "--spec", write(tmp_path, "bad.yaml", NESTED_SPEC.replace("layout: nested\n", "")),
                   "-o", tmp_path / "out")
    assert wrong.exit_code == 2 and "layout nested and a nested: section go together" in wrong.stderr
