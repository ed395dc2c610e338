"""The `evalstudio` command as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import EXAMPLES, ROOT

EVALSTUDIO = [sys.executable, "-m", "evalstudio.cli"]


def run(*args, env=None, cwd=ROOT):
    return subprocess.run(EVALSTUDIO + list(args), capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, timeout=300)


def test_help_explains_every_command():
    out = run("--help").stdout
    for command in ("setup", "import", "validate", "server", "demo", "projects"):
        assert command in out


def test_validate_reports_file_line_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"scenario_id": "s", "scenario": "x", "system": "v1", "exchanges": []}\n', encoding="utf-8")
    result = run("validate", "health", str(bad))
    assert result.returncode == 2
    assert f"{bad}:1: exchanges: is empty" in result.stderr


def test_unknown_protocol_lists_valid_names():
    result = run("validate", "sotopya", str(EXAMPLES / "sotopia" / "episodes.jsonl"))
    assert result.returncode == 1 and "valid names: circa, circa_part1, circa_part2, cmv, dialogue, health, sotopia" in result.stderr


def test_missing_connection_settings_are_named(tmp_path):
    env = {"LABEL_STUDIO_URL": "", "LABEL_STUDIO_API_KEY": ""}
    result = run("setup", env=env, cwd=tmp_path)
    assert result.returncode == 1 and "LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY not set" in result.stderr


@pytest.mark.server
def test_import_and_setup_through_the_cli(label_studio, tmp_path):
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
