"""`evalstudio publish` and `evalstudio reproduce` from files (split from test_publish.py, issue 66): a study run
on MTurk published from its batch file (pay per hour, the docs' datasheet, `compare` on two publish folders), free
text scrubbed, hostile or escaping manifests and configs refused by `reproduce`, options that would end up wrong in
the package refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from .test_cli import run

pytestmark = pytest.mark.server  # (as in test_publish.py, which these tests were part of)


@pytest.mark.parametrize("text, removed", [
    ("I am A3PUBGOODWORKER1, pay me", "a participant's id or code"),
    ("mail me: someone@example.org", "an e-mail address"),
    ("a1b2c3 is my code", None),  # under 4 characters of a secret are never matched; nothing shaped like one here
])
def test_free_text_with_an_id_or_an_address_is_scrubbed_and_flagged(text, removed):
    from evalstudio.exporters.publication.release import scrub

    table = pd.DataFrame({"annotator": ["A0"], "rationale": [text], "value": [3]})
    out, review = scrub(table, ["rationale"], ["A3PUBGOODWORKER1", "abc"])
    assert len(review) == 1 and review.iloc[0]["removed"] == (removed or "")
    if removed:
        assert "[removed: " in out.iloc[0]["rationale"] and "A3PUB" not in out.iloc[0]["rationale"]
        assert "@" not in out.iloc[0]["rationale"]
    else:
        assert out.iloc[0]["rationale"] == text
    assert np.isfinite(out.iloc[0]["value"])
    assert re.search("A3PUB", review.to_csv()) is None


MTURK = Path(__file__).parent / "data" / "circa_mturk_final_results.csv"


EXAMPLES_ANALYZE = Path(__file__).parent.parent / "examples" / "analyze"


@pytest.mark.parametrize("rejected", [0, 1])
def test_a_study_run_on_mturk_is_published_from_its_batch_file(tmp_path, rejected):
    """The shipped Circa MTurk batch (12 workers rating a T5 model's explanations): the datasheet answers what the
    file holds (evaluators, items, agreement, time limit, time and pay, rejections) and leaves the interface's
    questions open; no WorkerId or AssignmentId is anywhere in the folder."""
    raw = pd.read_csv(MTURK, dtype=str, keep_default_na=False)
    if rejected:
        raw.loc[0, "AssignmentStatus"] = "Rejected"
    source = tmp_path / "batch.csv"
    raw.to_csv(source, index=False)
    out = tmp_path / "pub"
    done = run("publish", "--ratings", str(source), "--spec", str(EXAMPLES_ANALYZE / "circa_mturk.yaml"), "-o",
               str(out), "--key-file", str(tmp_path / "key"), "--bootstrap", "200")
    assert done.returncode == 0, done.stderr
    heds = {a["number"]: a for a in json.loads((out / "datasheet.json").read_text())["heds"]}
    kept = raw[raw["AssignmentStatus"] != "Rejected"]
    assert heds["3.2.1"]["answer"] == str(kept["WorkerId"].nunique())
    assert heds["3.1.1"]["answer"] == f"{kept['HITId'].nunique()} (one system)"
    hours = pd.to_numeric(kept["WorkTimeInSeconds"]).sum() / 3600
    assert f"for {hours:.2f} hours of work as MTurk measured it" in heds["3.3.2"]["answer"]
    assert "no pay in the file" in heds["3.3.2"]["answer"]  # the batch's reward is $0.00: never a made-up rate
    assert f"({rejected} here)" in heds["3.3.3"]["answer"] and "3600 s" in heds["3.3.5"]["answer"]
    assert heds["3.3.4"]["status"] == "open" and heds["4.3.7 [explanation_quality]"]["status"] == "open"
    import krippendorff

    values = kept.assign(v=kept["Answer.explanation-quality.label"].str[0].astype(float))
    wide = values.assign(coder=values.groupby("HITId").cumcount()).pivot(index="coder", columns="HITId", values="v")
    alpha = krippendorff.alpha(reliability_data=wide.to_numpy(), level_of_measurement="ordinal")
    assert f"Krippendorff's alpha (ordinal) {alpha:.3f}" in heds["4.3.11 [explanation_quality]"]["answer"]
    assert not (out / "instrument").exists()
    secrets = set(raw["WorkerId"]) | set(raw["AssignmentId"])
    texts = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    texts.append(pd.read_parquet(out / "data_release" / "data" / "ratings.parquet").to_csv().encode())
    assert [s for s in secrets if any(s.encode() in t for t in texts)] == []
    assert len(pd.read_parquet(out / "data_release" / "data" / "ratings.parquet")) == len(kept)


def test_a_nested_json_file_is_published_with_every_criterions_agreement(tmp_path):
    """`publish --ratings` takes any file `analyze` reads: USR's published nested JSON (three of its criteria) was
    refused ("unknown file type '.json'", its table read for MTurk columns a nested file does not have). Every
    criterion's HEDS 4.3.11 gives the alpha and counts `analyze` gives on the release (issue 65.8, met by s65)."""
    from .conftest import ROOT

    spec = tmp_path / "usr.yaml"
    spec.write_text((ROOT / "tests" / "data" / "usr" / "overall.yaml").read_text() +
                    "  Natural: {scale: interval, min: 1, max: 3}\n  Engaging: {scale: interval, min: 1, max: 3}\n")
    from typer.testing import CliRunner

    from evalstudio.cli import app

    out = tmp_path / "pub"
    # in this process (the two commands' start-up was most of the test's time on a busy machine)
    done = CliRunner().invoke(app, ["publish", "--ratings", str(ROOT / "tests" / "data" / "usr" / "pc_usr_data.json"),
                                    "--spec", str(spec), "-o", str(out), "--key-file", str(tmp_path / "key"),
                                    "--bootstrap", "20"])
    assert done.exit_code == 0, done.output
    analysed = CliRunner().invoke(app, ["analyze", str(out / "data_release" / "data" / "ratings.csv"), "--spec",
                                        str(out / "data_release" / "spec.yaml"), "-o", str(tmp_path / "analysis"),
                                        "--bootstrap", "20"])
    assert analysed.exit_code == 0, analysed.output
    heds = {a["number"]: a["answer"] for a in json.loads((out / "datasheet.json").read_text())["heds"]}
    rows = pd.read_csv(tmp_path / "analysis" / "agreement.csv")
    assert sorted(rows["criterion"]) == ["Engaging", "Natural", "Overall"]
    for row in rows.itertuples():
        said = heds[f"4.3.11 [{row.criterion}]"]
        assert f"Krippendorff's alpha ({row.scale}) {row.alpha:.3f}" in said, said
        assert f"{row.ratings} ratings by {row.annotators} annotators" in said, said


@pytest.mark.parametrize("reward, seconds, rate", [
    ("$0.50", None, True),  # the batch's own work times (median 21 s): an effective rate
    ("$0.50", "1", False),  # one second an assignment: no person reads and rates a Circa item that fast
    ("$0.50", "", False),  # no work time in the file: unknown
    ("$0.00", "1", False),  # no pay: nothing to rate, and no warning either
])
def test_a_pay_per_hour_is_given_only_over_times_a_person_takes(tmp_path, reward, seconds, rate):
    """Issue 65, item 9: 4.50 over 0.2 s of recorded time read "an effective 22131.15 USD per hour". Under 3 s a
    task (exporters/publication/datasheet.py PLAUSIBLE_SECONDS) or without times, no rate: the reason, and a warning."""
    raw = pd.read_csv(MTURK, dtype=str, keep_default_na=False)
    raw["Reward"] = reward
    if seconds is not None:
        raw["WorkTimeInSeconds"] = seconds
    raw.to_csv(tmp_path / "batch.csv", index=False)
    out = tmp_path / "pub"
    done = run("publish", "--ratings", str(tmp_path / "batch.csv"), "--spec", str(EXAMPLES_ANALYZE / "circa_mturk.yaml"),
               "-o", str(out), "--key-file", str(tmp_path / "key"), "--bootstrap", "20")
    assert done.returncode == 0, done.stderr
    answer = {a["number"]: a for a in json.loads((out / "datasheet.json").read_text())["heds"]}["3.3.2"]["answer"]
    work = pd.to_numeric(raw["WorkTimeInSeconds"], errors="coerce")
    total = float(reward[1:]) * len(raw)
    if rate:
        assert f"an effective ${total / (work.sum() / 3600):.2f} per hour" in answer, answer
        assert work.median() >= 3 and "warning" not in done.stderr
    else:
        assert "effective" not in answer
        warned = "warning: no pay per hour in the datasheet (3.3.2)" in " ".join(done.stderr.split())
        assert warned == (total > 0), done.stderr
        if total > 0:
            assert ("is under 3 s" if seconds else "the time on tasks is not known") in answer, answer


def test_compare_reads_two_publish_folders_as_it_reads_their_files(tmp_path):
    """`compare ORIGINAL REPRODUCTION` on two publish folders: their data and the original's spec.yaml give what
    compare gives on the two ratings files (here the Circa batch against its first 200 assignments)."""
    raw = pd.read_csv(MTURK, dtype=str, keep_default_na=False)
    spec = str(EXAMPLES_ANALYZE / "circa_mturk.yaml")
    files = {"original": MTURK, "reproduction": tmp_path / "reproduction.csv"}
    raw.iloc[:200].to_csv(files["reproduction"], index=False)
    for name, source in files.items():
        done = run("publish", "--ratings", str(source), "--spec", spec, "-o", str(tmp_path / name), "--key-file",
                   str(tmp_path / f"{name}.key"), "--bootstrap", "50")
        assert done.returncode == 0, done.stderr
    by_folder = run("compare", str(tmp_path / "original"), str(tmp_path / "reproduction"), "-o", str(tmp_path / "a"))
    by_file = run("compare", str(files["original"]), str(files["reproduction"]), "--spec", spec, "-o",
                  str(tmp_path / "b"))
    assert by_folder.returncode == 0 and by_file.returncode == 0, by_folder.stderr + by_file.stderr
    for table in ("compare_systems.csv", "compare_correlations.csv"):
        a, b = pd.read_csv(tmp_path / "a" / table), pd.read_csv(tmp_path / "b" / table)
        pd.testing.assert_frame_equal(a, b)
    assert "cv_star" in pd.read_csv(tmp_path / "a" / "compare_systems.csv")
    published = pd.read_csv(tmp_path / "original" / "data_release" / "data" / "ratings.csv")
    assert set(published["label"]) == set(raw["Answer.explanation-quality.label"])  # the labels as given
    # and their positions as numbers (issue 65, item 11): "1 - very poor" is 1, "5 - very good" 5
    assert (published["value"] == published["label"].str[0].astype(float)).all()
    parquet = pd.read_parquet(tmp_path / "original" / "data_release" / "data" / "ratings.parquet")
    assert parquet["value"].dtype == float and parquet.groupby("criterion")["value"].mean().iloc[0] == pytest.approx(
        raw["Answer.explanation-quality.label"].str[0].astype(float).mean())


def test_the_docs_show_the_datasheet_publish_writes_for_the_circa_mturk_batch(tmp_path):
    """docs/publish.md's example is what the command writes today (regenerated and compared)."""
    out = tmp_path / "pub"
    done = run("publish", "--ratings", str(MTURK), "--spec", str(EXAMPLES_ANALYZE / "circa_mturk.yaml"), "-o",
               str(out), "--key-file", str(tmp_path / "key"))
    assert done.returncode == 0, done.stderr
    sheet = (out / "datasheet.md").read_text()
    page = (Path(__file__).parent.parent / "docs" / "publish.md").read_text()
    shown = page.split("<!-- publish: the Circa MTurk datasheet")[1].split("-->", 1)[1].split("<!-- end -->")[0]
    assert shown.strip() == sheet[sheet.index("| # |"):].strip()


def _package(tmp_path) -> Path:
    """A package's bare frame: instrument/ with one file and the manifest naming it."""
    folder = tmp_path / "package"
    (folder / "instrument").mkdir(parents=True, exist_ok=True)
    (folder / "instrument" / "tasks.jsonl").write_text("")
    return folder


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(manifest=st.one_of(st.text(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12)))
def test_a_hostile_manifest_is_refused_with_a_message(tmp_path, manifest):
    from evalstudio.base.errors import BadInput
    from evalstudio.exporters.publication.instrument import check_package

    folder = _package(tmp_path)
    (folder / "MANIFEST.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    try:
        check_package(folder)
    except BadInput:
        pass


@pytest.mark.parametrize("name, message", [("../../../etc/passwd", "outside the package"),
                                           ("/etc/passwd", "outside the package"),
                                           ("instrument/../../outside.txt", "outside the package"),
                                           ("instrument/a\x00b", "not a file name")])
def test_a_manifest_naming_files_outside_the_package_is_refused(tmp_path, name, message):
    from evalstudio.base.errors import BadInput
    from evalstudio.exporters.publication.instrument import check_package

    folder = _package(tmp_path)
    (tmp_path / "outside.txt").write_text("x")
    (folder / "MANIFEST.json").write_text(json.dumps({"protocol": "circa", "files": {name: "0" * 64}}))
    with pytest.raises(BadInput, match=message):
        check_package(folder)


def test_reproduce_refuses_a_config_outside_the_package(tmp_path):
    """A package's projects.yaml may only name configs inside it: the manifest vouches for nothing else."""
    import yaml

    from evalstudio.base.errors import BadInput
    from evalstudio.operations.publishing import reproduce_package
    from evalstudio.exporters.publication.instrument import write_manifest

    root = Path(__file__).parent.parent
    folder = _package(tmp_path)
    entry = yaml.safe_load((root / "projects.yaml").read_text())["projects"]["dialogue"]
    entry["config"] = str(root / entry["config"])  # another folder of this machine
    (folder / "instrument" / "projects.yaml").write_text(yaml.safe_dump({"projects": {"dialogue": entry}}))
    write_manifest(folder, {}, "dialogue")
    with pytest.raises(BadInput, match="projects.dialogue.config: .* is outside the package"):
        reproduce_package(folder, client=None)


@pytest.mark.parametrize("option, value, message", [
    ("--license", "cc-by 4.0\n---", "--license: 'cc-by 4.0\\n---' is not a licence id"),
    ("--currency", "EURO", "--currency: 'EURO' is not a currency code"),
    ("--key-file", "OUT/key", "is inside the output folder"),
])
def test_publish_refuses_what_would_end_up_wrong_in_the_package(tmp_path, option, value, message):
    out = tmp_path / "pub"
    done = run("publish", "--ratings", str(MTURK), "--spec", str(EXAMPLES_ANALYZE / "circa_mturk.yaml"), "-o",
               str(out), *(() if option == "--key-file" else ("--key-file", str(tmp_path / "key"))), option,
               value.replace("OUT", str(out)))
    assert done.returncode == 2 and message in " ".join(done.stderr.split()), done.stderr
    assert not out.exists() or not any(out.iterdir())  # nothing written
