"""The `evalstudio` command as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import EXAMPLES, ROOT, only_on_the_first_database, only_on_the_last_database, with_absolute_files

EVALSTUDIO = [sys.executable, "-m", "evalstudio.cli"]


def run(*args, env=None, cwd=ROOT):
    return subprocess.run(EVALSTUDIO + list(args), capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, timeout=300)


def test_help_explains_every_command():
    out = run("--help").stdout
    for command in ("setup", "import", "validate", "server", "demo", "projects"):
        assert command in out
    # each summary flows as one text: no line break kept from the docstring's source lines
    assert "label aggregation (majority, Dawid-Skene, MACE), metric correlations" in out


def test_validate_reports_file_line_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"scenario_id": "s", "scenario": "x", "system": "v1", "exchanges": []}\n', encoding="utf-8")
    result = run("validate", "health", str(bad))
    assert result.returncode == 2
    assert f"{bad}:1: exchanges: is empty" in result.stderr
    # a dry run imports nothing, ever: it says what to do, not that nothing was imported
    assert "fix them before importing" in result.stderr and "imported" not in result.stderr.replace("importing", "")


def test_validate_of_a_study_counts_each_project_on_its_own_line():
    result = run("validate", "cmv", *map(str, sorted((EXAMPLES / "cmv").iterdir())))
    assert result.returncode == 0, result.stderr
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert "Valid task(s) for 'cmv' in 2 file(s):" in lines
    assert "cmv_tom: 4" in lines and "cmv_threads: 8" in lines  # every thread is in cmv_threads


def test_unknown_protocol_lists_valid_names():
    result = run("validate", "sotopya", str(EXAMPLES / "sotopia" / "episodes.jsonl"))
    assert result.returncode == 2 and "valid names: circa, circa_part1, circa_part2, circa_part2_list1, circa_part2_list2, cmv, cmv_threads, cmv_tom, dialogue, esa, health, mqm, sotopia" in result.stderr


def test_missing_connection_settings_are_named(tmp_path):
    env = {"LABEL_STUDIO_URL": "", "LABEL_STUDIO_API_KEY": ""}
    result = run("setup", env=env, cwd=tmp_path)
    assert result.returncode == 1 and "LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY not set" in result.stderr


@pytest.mark.server
def test_import_and_setup_through_the_cli(label_studio, tmp_path):
    """`import` twice and `setup` as a user runs them: what they print, and no key in it. Once, on the last
    database: the commands' output is the subject; an import's idempotence on each database is
    tests/test_label_studio.py's."""
    only_on_the_last_database(label_studio)
    key = label_studio.credentials().api_key
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": key}
    files = [str(EXAMPLES / "health" / "assistant_versions.jsonl")]
    first = run("import", "health", *files, env=env)
    second = run("import", "health", *files, env=env)
    assert first.returncode == second.returncode == 0, first.stderr
    assert "already present" in second.stdout and " 0 task(s) created, 4 already present" in second.stdout
    setup = run("setup", env=env)
    assert setup.returncode == 0 and "health" in setup.stdout
    for result in (first, second, setup):
        assert key not in result.stdout + result.stderr


def test_prefill_and_connect_refuse_a_protocol_that_did_not_opt_in():
    """No anchoring: the shipped protocols create no predictions (they would fill the annotators' answers)."""
    for command in (["prefill", "sotopia"], ["connect", "circa"]):
        result = run(*command, env={"LABEL_STUDIO_URL": "http://127.0.0.1:9", "LABEL_STUDIO_API_KEY": "unused"})
        assert result.returncode == 1 and "prefill is off in projects.yaml" in result.stderr, result.stderr


def _projects_file(tmp_path, mutate):
    """A copy of projects.yaml (configs by absolute path) changed by `mutate(raw)`; returns its path."""
    import yaml

    raw = yaml.safe_load((ROOT / "projects.yaml").read_text())
    with_absolute_files(raw)
    text = mutate(raw)
    path = tmp_path / "projects.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text if isinstance(text, str) else yaml.safe_dump(raw), encoding="utf-8")
    return path


def _set(raw, name, **changes):
    raw["projects"][name].update(changes)


BAD_PROJECTS = [
    ("utf16", lambda raw: (ROOT / "projects.yaml").read_text().encode("utf-16"), "not UTF-8 text (saved as UTF-16?)"),
    ("list entry", lambda raw: raw["projects"].__setitem__("dialogue", ["a", "b"]), "projects.dialogue: expected a mapping"),
    ("bad template", lambda raw: raw["projects"]["sotopia"]["criteria"]["goal"].__setitem__("control", "{agent.__class__}_goal"),
     "may only use the placeholder {agent}"),
    ("no such importer", lambda raw: _set(raw, "health", importer="nosuch"), "unknown importer 'nosuch'; valid names: circa"),
    ("crowd after", lambda raw: raw["projects"]["circa_part2"]["crowd"].__setitem__("after", "dialogue"),
     "circa_part2.crowd.after: 'dialogue' is not another project of the study 'circa'"),
    ("parts in a circle", lambda raw: raw["projects"]["cmv_threads"]["crowd"].__setitem__("after", "cmv_tom"),
     "crowd.after: cmv_threads -> cmv_tom -> cmv_threads come after each other in a circle; one of them must come "
     "first (remove its crowd.after)"),
    ("a part after itself", lambda raw: raw["projects"]["cmv_tom"]["crowd"].__setitem__("after", "cmv_tom"),
     "crowd.after: cmv_tom -> cmv_tom come after each other in a circle"),
    ("bonus without batches", lambda raw: raw["projects"]["dialogue"]["crowd"].pop("batch_size"),
     "the all_batches bonus needs batch_size and max_batches"),
]


@pytest.mark.parametrize("case, mutate, message", BAD_PROJECTS, ids=[c[0] for c in BAD_PROJECTS])
def test_a_broken_projects_yaml_is_reported_not_crashed_on(tmp_path, case, mutate, message):
    path = _projects_file(tmp_path, mutate)
    result = run("projects", "--projects", str(path))
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def _deep(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    return path


def _malformed(tmp_path, name="bad.json"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[{"id": 1, "data": {}, "annotations": [{"result": [5]}]}]')
    return path


BAD_CALLS = [
    (lambda tmp: ["export", "dialogue", "--from-export", str(_deep(tmp)), "-o", str(tmp / "o.csv")], "nested too deeply"),
    (lambda tmp: ["export", "dialogue", "--from-export", str(_malformed(tmp)), "-o", str(tmp / "o.csv")],
     "annotations[0].result has an entry that is not a Label Studio result"),
    (lambda tmp: ["export", "dialogue", "--from-export", str(_malformed(tmp)), "-o", str(tmp)], "is a folder"),
    (lambda tmp: ["export", "dialogue", "--from-export", str(_malformed(tmp)), "-o", str(tmp / "no" / "o.csv")],
     "does not exist"),
    (lambda tmp: ["export", "dialogue", "--format", "xlsx", "-o", str(tmp / "o.xlsx")], "--format must be one of csv"),
    (lambda tmp: ["report", "dialogue", "--from-export", str(_malformed(tmp)), "-o", str(_malformed(tmp))], "is a file"),
    # brackets in a path are printed as they are (rich would read "[/x]" as markup and crash)
    (lambda tmp: ["export", "dialogue", "--from-export", str(_malformed(tmp, "[/x][bold].json")), "-o",
                  str(tmp / "o.csv")], "/[/x][bold].json"),
]


@pytest.mark.parametrize("make_args, message", BAD_CALLS)
def test_bad_cli_arguments_get_a_message_not_a_traceback(tmp_path, make_args, message):
    result = run(*make_args(tmp_path))
    assert result.returncode == 2 and message in result.stderr, result.stderr  # 2: the input given is wrong
    assert "Traceback" not in result.stderr



@pytest.mark.server
def test_exporting_a_project_of_another_protocol_is_an_error(reg, importer_for, client, label_studio, tmp_path):
    """`export` and `report` of a project that runs another protocol: exit 2 and a message, nothing written. Once,
    on the first database: the check reads the project's config, whichever database holds it."""
    only_on_the_first_database(label_studio)
    from evalstudio.tasks.importing import import_files

    report = import_files(reg.entry("sotopia"), importer_for("sotopia"), [EXAMPLES / "sotopia" / "episodes.jsonl"], client)
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key}
    for command in (["export", "dialogue", "-o", str(tmp_path / "x.csv")], ["report", "dialogue", "-o", str(tmp_path / "r")]):
        result = run(*command, "--project-id", str(report.project_id), env=env)
        assert result.returncode == 2, result.stdout
        assert f"Label Studio project {report.project_id} does not run the dialogue protocol" in result.stderr
    assert not (tmp_path / "x.csv").exists()


def test_import_refuses_batches_in_flight_for_a_project_shown_in_order(tmp_path):
    """`--in-flight 2` on a sequential project: exit code 2 and why, before any file is read or Label Studio asked
    (the server named here does not exist)."""
    from .largefile import write_dialogue_file

    write_dialogue_file(tmp_path / "tasks.jsonl", 5)

    def sequential(raw):
        raw["projects"]["dialogue"]["order"] = "sequential"
    env = {"LABEL_STUDIO_URL": "http://127.0.0.1:9", "LABEL_STUDIO_API_KEY": "x" * 40,
           "EVALSTUDIO_PROJECTS": str(_projects_file(tmp_path, sequential))}
    out = run("import", "dialogue", str(tmp_path / "tasks.jsonl"), "--in-flight", "2", env=env)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "order: sequential" in out.stderr and "--in-flight 1" in out.stderr and "reach" not in out.stderr
