"""`evalstudio server &` followed at once by a command that needs Label Studio (issue 53: "LABEL_STUDIO_URL and
LABEL_STUDIO_API_KEY not set", the settings file written two minutes later): while `server` starts Label Studio
its marker names a live process, and the command waits for the settings instead of failing; a server that stops
before answering is an error naming its log; a stale marker (its process gone) changes nothing. The server is a
stand-in process here (the marker's contract), the real `evalstudio server` writes and removes the marker
(evalstudio/labelstudio/server.py) in every test that starts one."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading

import pytest

from evalstudio.base.errors import ServerError
from evalstudio.labelstudio import connection


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / ".evalstudio"
    data.mkdir()
    return data


def _stand_in():
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)


def _call_in_thread(monkeypatch):
    said = io.StringIO()
    monkeypatch.setattr(sys, "stderr", said)
    outcome: dict = {}

    def call():
        try:
            outcome["settings"] = connection.settings_from_env()
        except ServerError as e:
            outcome["error"] = str(e)

    thread = threading.Thread(target=call)
    thread.start()
    return thread, said, outcome


def _wait_for(condition, thread):
    while not condition() and thread.is_alive():  # a state: the message printed
        thread.join(0.05)


def test_a_command_waits_for_the_server_that_is_starting(folder, monkeypatch):
    server = _stand_in()
    try:
        (folder / "starting").write_text(json.dumps({"pid": server.pid, "url": "http://127.0.0.1:8080"}))
        thread, said, outcome = _call_in_thread(monkeypatch)
        _wait_for(lambda: "waiting for the Label Studio" in said.getvalue(), thread)
        assert thread.is_alive() and f"(process {server.pid}) is starting on http://127.0.0.1:8080" in said.getvalue()
        (folder / "evalstudio.env").write_text("LABEL_STUDIO_URL=http://127.0.0.1:8080\n"
                                               "LABEL_STUDIO_API_KEY=" + "a" * 40 + "\n")
        thread.join()
        assert outcome["settings"].url == "http://127.0.0.1:8080", outcome
    finally:
        server.kill()
        server.wait()


def test_a_server_that_stops_before_answering_is_an_error_naming_its_log(folder, monkeypatch):
    server = _stand_in()
    (folder / "starting").write_text(json.dumps({"pid": server.pid, "url": "http://127.0.0.1:8080"}))
    thread, said, outcome = _call_in_thread(monkeypatch)
    _wait_for(lambda: "waiting for the Label Studio" in said.getvalue(), thread)
    server.kill()
    server.wait()
    thread.join()
    assert "stopped before Label Studio answered" in outcome["error"]
    assert "its log is .evalstudio/label-studio.log" in outcome["error"]


def test_a_stale_marker_changes_nothing(folder, monkeypatch):
    gone = _stand_in()
    gone.kill()
    gone.wait()
    (folder / "starting").write_text(json.dumps({"pid": gone.pid, "url": "http://127.0.0.1:8080"}))
    with pytest.raises(ServerError, match="LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY not set"):
        connection.settings_from_env()


@pytest.mark.server
def test_a_started_server_leaves_its_settings_and_no_marker(label_studio):
    """The real server: once Label Studio answers, the settings are written and the marker is gone."""
    assert (label_studio.data_dir / "evalstudio.env").is_file()
    assert not (label_studio.data_dir / "starting").exists()
