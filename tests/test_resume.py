"""Kill Label Studio in the middle of a large import: the failed run reports what it wrote, and after a
restart the same command finishes with exactly the expected tasks (none lost, none twice)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.server import LocalServer

from .conftest import DATABASES, ROOT, start_label_studio
from .largefile import write_dialogue_file

pytestmark = pytest.mark.server
TASKS, BATCH, KILL_AFTER = 2_000, 200, 700  # 10 batches, killed after about 3 (CI budget)


def run_import(server: LocalServer, path, projects=ROOT / "projects.yaml", in_flight: int = 1) -> subprocess.Popen:
    env = {**os.environ, "LABEL_STUDIO_URL": server.url, "LABEL_STUDIO_API_KEY": server.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects)}
    return subprocess.Popen([sys.executable, "-m", "evalstudio.cli", "import", "dialogue", str(path), "--batch-size", str(BATCH),
                             "--in-flight", str(in_flight)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def random_order_projects(folder) -> Path:
    """projects.yaml with the dialogue entry in random order (batches may then be sent two at a time)."""
    text = (ROOT / "projects.yaml").read_text(encoding="utf-8")
    entry = "    importer: dialogue\n"
    if text.count(entry) != 1:
        raise ValueError("projects.yaml: the dialogue entry's importer line was not found once")
    (folder / "labeling_configs").symlink_to(ROOT / "labeling_configs")
    (folder / "projects.yaml").write_text(text.replace(entry, entry + "    order: random\n"), encoding="utf-8")
    return folder / "projects.yaml"


# One kill per database (each run costs about 90 s): SQLite with one batch in flight, PostgreSQL with two (where they
# are faster; the file's 14 MB are validated by two workers). A database not in the matrix drops out.
CASES = [(d, n) for d, n in (("sqlite", 1), ("postgresql", 2)) if d in DATABASES]


@pytest.mark.parametrize("database, in_flight", CASES, ids=[f"{d}-{n}-in-flight" for d, n in CASES])
def test_import_resumes_after_the_server_is_killed(request, tmp_path_factory, tmp_path, reg, database, in_flight):
    expected = write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    projects = random_order_projects(tmp_path) if in_flight > 1 else ROOT / "projects.yaml"
    server = start_label_studio(request, tmp_path_factory, database)
    try:
        client = Client(server.settings())
        importing = run_import(server, tmp_path / "tasks.jsonl", projects, in_flight)
        project_id, count = None, 0
        while count < KILL_AFTER:  # wait until the import is well under way
            if importing.poll() is not None:
                pytest.fail(f"import ended before the kill:\n{importing.stdout.read()}{importing.stderr.read()}")
            project_id = project_id or client.find_project(reg.entry("dialogue").title)
            count = client.task_count(project_id) if project_id else 0
            time.sleep(0.1)
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait()
        out, err = importing.communicate(timeout=120)
        assert importing.returncode == 1, out + err
        stopped = re.search(r"import stopped: (\d+) task\(s\) written, 0 already present, (\d+) not written", err)
        assert stopped, err
        written, not_written = map(int, stopped.groups())
        assert written >= KILL_AFTER - in_flight * BATCH and written + not_written == TASKS

        server.start(timeout=300)  # same data directory / database
        landed = client.task_count(project_id)
        assert written <= landed < TASKS  # a batch in flight at the kill may have landed without an answer
        rerun = run_import(server, tmp_path / "tasks.jsonl", projects, in_flight)
        out, err = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, out + err
        assert f"{TASKS - landed} task(s) created, {landed} already present" in out
        ids = [t.data["evalstudio_id"] for t in client.tasks(project_id)]
        assert len(ids) == TASKS and set(ids) == set(expected)
    finally:
        server.stop()
