"""Published rating files read as they are, no preprocessing (tests/data/SOURCE.md says where each comes from):
USR PersonaChat (annotator ids per context), FED (turn-level and dialog-level records in one file), and a JSON array
as a protocol's `input:`."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from evalstudio.protocols import registry
from evalstudio.protocols.mapping import MappingImporter
from evalstudio.tasks.scanning import scan

from .test_analyze_input import invoke, write

DATA = Path(__file__).resolve().parent / "data"
TEMPLATES = Path(__file__).resolve().parents[1] / "evalstudio" / "templates"
USR_CRITERIA = {"Understandable": (0, 1), "Natural": (1, 3), "Maintains Context": (1, 3), "Engaging": (1, 3),
                "Uses Knowledge": (0, 1), "Overall": (1, 5)}


def usr_spec(annotators: str | None) -> str:
    nested = {"expand": "responses", "item": "record.context", "system": "model"}
    if annotators:
        nested["annotators"] = annotators
    return yaml.safe_dump({"layout": "nested", "nested": nested, "criteria": {
        name: {"scale": "interval", "min": lo, "max": hi} for name, (lo, hi) in USR_CRITERIA.items()}})


def test_usr_persona_chat_gives_the_published_leave_one_out_agreement(tmp_path):
    """USR (Mehri & Eskenazi, ACL 2020) reports the inter-annotator agreement of PersonaChat's Overall Quality as
    .716 (Spearman, each annotator against the mean of the others). The published file keeps the three annotator
    ids per context (four people in all, in changing order); `annotators: record.annotators` reads them, and the
    leave-one-annotator-out Spearman average is the published figure."""
    spec = write(tmp_path, "usr.yaml", usr_spec("record.annotators"))
    result = invoke(DATA / "usr" / "pc_usr_data.json", "--spec", spec, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    loo = pd.read_csv(tmp_path / "out" / "leave_one_out.csv")
    overall = loo[(loo["criterion"] == "Overall") & (loo["annotator"] == "average")].iloc[0]
    assert round(overall["spearman"], 3) == 0.716
    assert set(loo[loo["criterion"] == "Overall"]["annotator"]) == {"shikib", "maxine", "mckenna", "yulan", "average"}
    assert "LOO rho" in result.output and f"{overall['spearman']:.3f}" in result.output  # the terminal says which
    # by position (the k-th rating of each list as one annotator) the ids are lost, and so is the figure
    spec = write(tmp_path, "by_position.yaml", usr_spec(None))
    assert invoke(DATA / "usr" / "pc_usr_data.json", "--spec", spec, "-o", tmp_path / "pos").exit_code == 0
    by_position = pd.read_csv(tmp_path / "pos" / "leave_one_out.csv")
    assert round(by_position.query("criterion == 'Overall' and annotator == 'average'")["spearman"].iloc[0], 3) != 0.716


def test_fed_turn_and_dialog_records_are_analysed_in_one_run(tmp_path):
    """FED (Mehri & Eskenazi, SIGDIAL 2020) keeps turn-level records (with a response) and dialog-level records
    (without) in one file, each kind with its own qualities, both with an Overall. `where:` reads each criterion
    from its kind; its N/A codes with the annotator's reason are missing values; every criterion is analysed with
    the scale the spec declares."""
    records = json.loads((DATA / "fed" / "fed_slice.json").read_text(encoding="utf-8"))
    turns = [r for r in records if "response" in r]
    dialogs = [r for r in records if "response" not in r]
    turn = {"Interesting": 2, "Engaging": 2, "Specific": 2, "Relevant": 2, "Correct": 2,
            "Semantically appropriate": 2, "Understandable": 1, "Fluent": 2}
    dialog = {"Coherent": 2, "Error recovery": 2, "Consistent": 1, "Diverse": 2, "Depth": 2, "Likeable": 2,
              "Understanding": 2, "Flexible": 2, "Informative": 2, "Inquisitive": 2}
    criteria = {**{k: {"min": 0, "max": v, "where": "response"} for k, v in turn.items()},
                "Overall (turn)": {"min": 0, "max": 4, "column": "Overall", "where": "response"},
                **{k: {"min": 0, "max": v, "where": "!response"} for k, v in dialog.items()},
                "Overall (dialog)": {"min": 0, "max": 4, "column": "Overall", "where": "!response"}}
    spec = write(tmp_path, "fed.yaml", yaml.safe_dump({
        "layout": "nested", "missing": ["re:N/A( \\(.*\\))?"],
        "nested": {"system": "system", "ratings": "annotations"}, "criteria": criteria}))
    result = invoke(DATA / "fed" / "fed_slice.json", "--spec", spec, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    agreement = pd.read_csv(tmp_path / "out" / "agreement.csv").set_index("criterion")
    assert set(agreement.index) == set(criteria)
    assert (agreement["scale"] == "interval").all()
    assert agreement.loc["Overall (turn)", "items"] == len(turns)
    assert agreement.loc["Overall (dialog)", "items"] == len(dialogs)
    for name, kind in [*((k, turns) for k in turn), *((k, dialogs) for k in dialog)]:
        given = sum(1 for r in kind for v in r["annotations"][name] if isinstance(v, int))
        assert agreement.loc[name, "ratings"] == given, name  # the N/A codes left out, nothing else
    # without where: every dialog record lacks the turn criteria, and the file is refused with every such line
    plain = write(tmp_path, "plain.yaml", yaml.safe_dump({
        "layout": "nested", "missing": ["re:N/A( \\(.*\\))?"], "nested": {"system": "system", "ratings": "annotations"},
        "criteria": {k: {"min": 0, "max": v} for k, v in turn.items()}}))
    refused = invoke(DATA / "fed" / "fed_slice.json", "--spec", plain, "-o", tmp_path / "plain")
    assert refused.exit_code == 2 and "no ratings of 'Interesting'" in refused.output
    assert "where: FIELD" in " ".join(refused.output.split())  # and names the key that reads one kind
    # Overall alone, without where:, would read both kinds as one criterion, no word said (issue 53): refused,
    # naming the field that tells the kinds apart
    pooled = write(tmp_path, "pooled.yaml", yaml.safe_dump({
        "layout": "nested", "missing": ["re:N/A( \\(.*\\))?"], "nested": {"system": "system", "ratings": "annotations"},
        "criteria": {"Overall": {"min": 0, "max": 4}}}))
    refused = invoke(DATA / "fed" / "fed_slice.json", "--spec", pooled, "-o", tmp_path / "pooled")
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "'Overall' is rated in two kinds of record" in said, refused.output
    assert "where: response or where: '!response'" in said


def _usr_protocol(tmp_path: Path):
    """The likert template as a protocol for USR's file: context and response shown, the model hidden."""
    entry = yaml.safe_load((TEMPLATES / "likert" / "entry.yaml").read_text().replace("NAME", "usr"))["usr"]
    entry["config"] = str(TEMPLATES / "likert" / "config.xml")
    entry["input"] = {"formats": ["json", "jsonl"], "expand": "responses", "item_id": "context",
                      "system": "each.model", "data": {"context": "context", "response": "each.response"}}
    for criterion in entry["criteria"].values():
        criterion.pop("model_output", None)
    (tmp_path / "projects.yaml").write_text(yaml.safe_dump({"projects": {"usr": entry}}))
    return registry.load(tmp_path / "projects.yaml").get("usr")


def test_a_protocol_reads_a_json_array_and_keeps_what_an_element_holds(tmp_path):
    """USR's file is a JSON array: a protocol's `input:` reads it as it is (one task per response, 300); the fields
    of each response the mapping does not read (its published ratings) stay with its task, under `element`. The
    same array in a file named .jsonl is one problem that says what it is, not one per line."""
    project = _usr_protocol(tmp_path)
    importer = MappingImporter(project)
    checked = scan(project, importer, [DATA / "usr" / "pc_usr_data.json"], spool=True)
    try:
        assert checked.problems == [] and checked.tasks == 300
        from evalstudio.tasks.importing import _in_send_order

        task = json.loads(next(_in_send_order(checked.spool, checked.items)).split("\t", 3)[3])
    finally:
        checked.discard()
    published = json.loads((DATA / "usr" / "pc_usr_data.json").read_text())
    response = next(r for record in published for r in record["responses"] if r["response"] == task["data"]["response"])
    assert task["meta"]["element"] == {k: v for k, v in response.items() if k not in ("response", "model")}
    renamed = tmp_path / "usr.jsonl"
    renamed.write_bytes((DATA / "usr" / "pc_usr_data.json").read_bytes())
    [problem] = scan(project, importer, [renamed]).problems
    assert (problem.line, problem.message) == (1, "a JSON array, not JSON Lines (one record a line): name the file "
                                                  ".json to read it as an array")


def test_the_missing_code_suggested_is_one_that_matches(tmp_path):
    """FED's annotators wrote "N/A (reason)" where they gave no rating. Without a missing code the file is refused,
    and the message suggests a declaration that matches such values; declared as suggested, the file is read."""
    import re

    criteria = {"Correct": {"min": 0, "max": 2, "where": "response"}}
    spec = {"layout": "nested", "nested": {"system": "system", "ratings": "annotations"}, "criteria": criteria}
    refused = invoke(DATA / "fed" / "fed_slice.json", "--spec", write(tmp_path, "a.yaml", yaml.safe_dump(spec)),
                     "-o", tmp_path / "a")
    assert refused.exit_code == 2
    suggested = re.search(r"missing: \['(re:[^']+)'\]", " ".join(refused.output.split()))
    assert suggested, refused.output
    spec["missing"] = [suggested.group(1)]
    accepted = invoke(DATA / "fed" / "fed_slice.json", "--spec", write(tmp_path, "b.yaml", yaml.safe_dump(spec)),
                      "-o", tmp_path / "b")
    assert accepted.exit_code == 0, accepted.output


def _source_rows() -> list[tuple[list[str], list[str]]]:
    """(files, sha256 values) per row of tests/data/SOURCE.md that names the checksum of each of its files."""
    rows = []
    for line in (DATA / "SOURCE.md").read_text(encoding="utf-8").splitlines():
        cells = line.split(" | ")
        if len(cells) < 2:
            continue
        files = [f for f in re.findall(r"`([^`]+\.(?:csv|json|tsv))`", cells[0])]
        digests = re.findall(r"\b[0-9a-f]{64}\b", cells[1])
        if files and len(files) == len(digests):
            rows.append((files, digests))
    return rows


SOURCE_ROWS = _source_rows()


@pytest.mark.parametrize("files, digests", SOURCE_ROWS, ids=[files[0] for files, _ in SOURCE_ROWS])
def test_a_byte_exact_copy_is_the_file_its_source_names(files, digests):
    """Where SOURCE.md gives a file's SHA-256 (a byte-exact copy of a published file), the shipped file has it."""
    for name, digest in zip(files, digests):
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
