"""Hypothesis targets for what issue 28 found by hand: analysis specs and nested rating files (exit 0 or 2, never a
traceback), every text that reaches the terminal (no markup read, no escape sequence passed through), and the
platform files (a participant id is written as it is or left out and named, never changed)."""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
from pathlib import Path

import pandas as pd
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from evalstudio.base.errors import InvalidInput, Problem
from evalstudio.cli.base import fail_with, printable
from evalstudio.operations.consoles import _Console
from evalstudio.exporters.payments.approvals import PLATFORM_ID, not_platform_ids, write_approvals
from evalstudio.values.results import NUMBER  # a number is not a formula: '+0', '-1.5'

from .conftest import CLI_FUZZ_EXAMPLES
from .test_analyze_input import invoke
from .test_analyze_nested import USR_LIKE

# what a terminal must never receive from user-supplied text: C0 controls but newline, DEL, C1 controls
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
hostile_text = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(["[/x]", "[bold]", "[link=http://x]", "\x1b[2J", "\x1b]0;title\x07", "\x9b31m", "\r",
                              "\t", "\x00", "=1+2", "@x.com", "é", "\u202e", "$x$", "[", "]", "\\"]),
             max_size=6).map("".join))


def _rendered(*objects) -> str:
    out = io.StringIO()
    console = _Console(file=out, width=100, force_terminal=False)
    for obj in objects:
        console.print(obj)
    return out.getvalue()


@given(hostile_text)
def test_text_printed_on_the_terminal_is_text(text):
    """Every console string is shown as text: markup brackets are not read (no crash, nothing dropped) and control
    characters are written out (no escape sequence reaches the terminal)."""
    shown = _rendered(text, f"file {text}: line 3")
    assert not CONTROL.search(shown.replace("\n", ""))
    bare = lambda t: "".join(t.split())  # rich wraps lines and turns tabs into spaces
    assert bare(printable(text)) in bare(shown)


@given(hostile_text, hostile_text)
def test_an_error_naming_hostile_text_is_printed_as_text(name, cell):
    """The error path (`fail_with`) with a file name and a cell value of any text: one clean message, exit code 2."""
    from evalstudio.cli.base import err

    out = io.StringIO()
    previous = err._file  # None: the console follows sys.stderr
    err.file = out
    try:
        code = fail_with(InvalidInput([Problem(name, 3, "value", f"'{cell}' is not a number")], "nothing was analysed"))
    finally:
        err._file = previous
    assert code.exit_code == 2
    assert not CONTROL.search(out.getvalue().replace("\n", ""))
    assert out.getvalue().startswith("error: 1 problem(s) found")


# ---- analysis specs and nested files through `evalstudio analyze` ------------------------------------------------
scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 9), st.floats(allow_nan=True), st.text(max_size=6))
criterion_specs = st.dictionaries(
    st.sampled_from(["scale", "min", "max", "labels", "step", "missing", "column", "min_votes", "other"]),
    st.one_of(scalar, st.sampled_from(["nominal", "ordinal", "interval"]), st.lists(scalar, max_size=4)), max_size=5)
specs = st.fixed_dictionaries({}, optional={
    "layout": st.sampled_from(["long", "wide_criteria", "wide_annotators", "nested", "other", 3]),
    "columns": st.dictionaries(st.sampled_from(["item", "annotator", "system", "criterion", "value", "x"]),
                               st.sampled_from(["item", "annotator", "rating", "q", ""]), max_size=3),
    "criteria": st.dictionaries(st.sampled_from(["quality", "q", "Natural", ""]), criterion_specs, max_size=2),
    "missing": st.lists(st.one_of(st.text(max_size=4), st.sampled_from(["re:N/A.*", "re:(", "re:"])), max_size=3),
    "nested": st.dictionaries(st.sampled_from(["expand", "item", "system", "ratings", "annotators", "x"]),
                              st.one_of(st.sampled_from(["responses", "record.fact", "#", "model", "", "a.0.b"]),
                                        scalar), max_size=4),
    "lower_is_better": st.lists(st.text(max_size=3), max_size=2),
})
RATINGS = "item,annotator,criterion,value\n1,a,quality,4\n1,b,quality,5\n2,a,quality,2\n2,b,quality,N/A\n"


@settings(max_examples=CLI_FUZZ_EXAMPLES, deadline=None)
@given(spec=st.one_of(specs, st.text(max_size=30)), nested=st.booleans())
def test_fuzzed_specs_through_analyze_exit_0_or_2(spec, nested):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-spec-"))
    (folder / "spec.yaml").write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec), encoding="utf-8")
    ratings = folder / ("usr.json" if nested else "ratings.csv")
    ratings.write_text(json.dumps(USR_LIKE) if nested else RATINGS, encoding="utf-8")
    result = invoke(ratings, "--spec", folder / "spec.yaml", "-o", folder / "out", "--bootstrap", "5")
    assert result.exit_code in (0, 2), result.output
    event(f"exit {result.exit_code}")
    if result.exit_code == 2:
        assert "error:" in result.stderr and not CONTROL.search(result.stderr.replace("\n", ""))


json_values = st.recursive(scalar, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(st.sampled_from(["responses", "fact", "model", "Natural",
                                                                     "Overall", "x"]), children, max_size=4)),
    max_leaves=25)
NESTED_SPEC = {"layout": "nested", "nested": {"expand": "responses", "item": "record.fact", "system": "model"},
               "criteria": {"Natural": {"scale": "interval", "min": 1, "max": 3}}}


@settings(max_examples=CLI_FUZZ_EXAMPLES, deadline=None)
@given(records=st.one_of(st.lists(json_values, max_size=5), json_values, st.binary(max_size=100)),
       lines=st.booleans())
def test_fuzzed_nested_files_through_analyze_exit_0_or_2(records, lines):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-nested-"))
    path = folder / ("r.jsonl" if lines else "r.json")
    if isinstance(records, bytes):
        path.write_bytes(records)
    elif lines and isinstance(records, list):
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    (folder / "spec.yaml").write_text(yaml.safe_dump(NESTED_SPEC), encoding="utf-8")
    result = invoke(path, "--spec", folder / "spec.yaml", "-o", folder / "out", "--bootstrap", "5")
    assert result.exit_code in (0, 2), result.output
    event(f"exit {result.exit_code}")
    if result.exit_code == 2:
        assert f"{path}" in result.stderr


# ---- platform files --------------------------------------------------------------------------------------------
participant_ids = st.one_of(st.from_regex(PLATFORM_ID, fullmatch=True), hostile_text.filter(bool))
decisions = st.lists(st.tuples(participant_ids, st.sampled_from(["approve", "reject"]),
                               st.one_of(st.just(0.0), st.floats(0.01, 100, allow_nan=False)), hostile_text),
                     max_size=8, unique_by=lambda d: d[0])


@given(decisions, st.sampled_from(["prolific", "mturk"]))
def test_platform_files_hold_ids_as_they_are_or_not_at_all(rows, platform):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-approvals-"))
    frame = pd.DataFrame(rows, columns=["participant", "decision", "bonus", "reason"]).astype(
        {"participant": str, "decision": str, "bonus": float, "reason": str})
    write_approvals(frame, platform, folder)
    eligible = frame.loc[[bool(PLATFORM_ID.fullmatch(p)) for p in frame["participant"]]]
    assert set(not_platform_ids(frame)) == set(frame["participant"]) - set(eligible["participant"])
    paid = eligible[eligible["bonus"] > 0]
    if platform == "prolific":
        approved = (folder / "prolific_approve.txt").read_text(encoding="utf-8").splitlines()
        assert approved == list(eligible.loc[eligible["decision"] == "approve", "participant"])
        bonus = list(csv.reader(io.StringIO((folder / "prolific_bonus.csv").read_text(encoding="utf-8"))))
        assert [row[0] for row in bonus] == list(paid["participant"])
        assert [float(row[1]) for row in bonus] == [round(b, 2) for b in paid["bonus"]]
    else:
        upload = pd.read_csv(folder / "mturk_upload.csv", dtype=str, keep_default_na=False)
        assert list(upload["WorkerId"]) == list(eligible["participant"])  # unaltered: no quote put in front
        bonus = pd.read_csv(folder / "mturk_bonus.csv", dtype=str, keep_default_na=False)
        assert list(bonus["WorkerId"]) == list(paid["participant"])
    with open(folder / "approvals.csv", newline="", encoding="utf-8") as f:
        everyone = list(csv.reader(f))
    formula = lambda cell: cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not NUMBER.fullmatch(cell)
    # control characters written out (ESC as \x1b), then what a spreadsheet would run quoted: whole rows
    visible = [re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}", p)
               for p in frame["participant"]]
    assert [row[0] for row in everyone[1:]] == ["'" + v if formula(v) else v for v in visible]
    assert not any(formula(cell) for row in everyone for cell in row)  # the file for people opens safely anywhere


comparison_rows = st.lists(st.fixed_dictionaries(
    {"item": st.one_of(st.integers(0, 3), st.sampled_from(["", "=x", "\u00b2"])),
     "model_a": st.sampled_from(["m1", "m2", "m3", "", "[/x]"]), "model_b": st.sampled_from(["m1", "m2", "m3", "=cmd"]),
     "winner": st.sampled_from(["model_a", "model_b", "tie", "tie (bothbad)", "A", "", "x"])},
    optional={"judge": st.sampled_from(["j1", "j2", ""])}), max_size=12)


@settings(max_examples=CLI_FUZZ_EXAMPLES, deadline=None)
@given(rows=comparison_rows, suffix=st.sampled_from([".csv", ".jsonl"]), judge=st.one_of(st.none(), comparison_rows))
def test_fuzzed_comparisons_through_analyze_exit_0_or_2(rows, suffix, judge):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-pairs-"))
    paths = []
    for name, content in (("battles", rows), ("judge", judge)):
        if content is not None:
            paths.append(folder / f"{name}{suffix}")
            frame = pd.DataFrame(content, columns=["item", "model_a", "model_b", "winner", "judge"])
            frame.to_csv(paths[-1], index=False) if suffix == ".csv" else frame.to_json(paths[-1], orient="records",
                                                                                         lines=True)
    path = paths[0]
    extra = ["--metrics", paths[1]] if len(paths) > 1 else []
    result = invoke(path, *extra, "-o", folder / "out", "--bootstrap", "5")
    assert result.exit_code in (0, 2), result.output
    event(f"exit {result.exit_code}")
    if result.exit_code == 2:
        assert any(str(p) in result.stderr for p in paths)


best_worst_rows = st.lists(st.fixed_dictionaries(
    {"item1": st.sampled_from(["a", "b", "", "=x"]), "item2": st.sampled_from(["b", "c", "a"]),
     "item3": st.sampled_from(["c", "d", "[/x]"]), "item4": st.sampled_from(["d", "a", "e"]),
     "best": st.sampled_from(["a", "b", "c", "d", "e", ""]), "worst": st.sampled_from(["a", "d", "c", "z"])},
    optional={"annotator": st.sampled_from(["p1", "p2", ""])}), max_size=12)


@settings(max_examples=CLI_FUZZ_EXAMPLES, deadline=None)
@given(rows=best_worst_rows, suffix=st.sampled_from([".csv", ".jsonl"]))
def test_fuzzed_best_worst_files_through_analyze_exit_0_or_2(rows, suffix):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-bws-"))
    path = folder / f"bws{suffix}"
    frame = pd.DataFrame(rows, columns=["item1", "item2", "item3", "item4", "best", "worst", "annotator"])
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_json(path, orient="records", lines=True)
    result = invoke(path, "-o", folder / "out", "--bootstrap", "5")
    assert result.exit_code in (0, 2), result.output
    event(f"exit {result.exit_code}")
    if result.exit_code == 2:
        assert str(path) in result.stderr
