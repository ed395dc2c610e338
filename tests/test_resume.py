"""Kill Label Studio in the middle of a large import: the failed run reports what it wrote, and after a
restart the same command finishes with exactly the expected tasks (none lost, none twice)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from evalstudio.client import Client
from evalstudio.server import LocalServer

from .conftest import DATABASES, ROOT, start_label_studio
from .largefile import write_dialogue_file

pytestmark = pytest.mark.server
TASKS, BATCH, KILL_AFTER = 6_000, 200, 2_000  # 30 batches, killed after about 10 (CI budget)


def run_import(server: LocalServer, path) -> subprocess.Popen:
    env = {**os.environ, "LABEL_STUDIO_URL": server.url, "LABEL_STUDIO_API_KEY": server.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(ROOT / "projects.yaml")}
    return subprocess.Popen([sys.executable, "-m", "evalstudio.cli", "import", "dialogue", str(path), "--batch-size", str(BATCH)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("database", DATABASES)
def test_import_resumes_after_the_server_is_killed(request, tmp_path_factory, tmp_path, reg, database):
    expected = write_dialogue_file(tmp_path / "tasks.jsonl", TASKS)
    server = start_label_studio(request, tmp_path_factory, database)
    try:
        client = Client(server.settings())
        importing = run_import(server, tmp_path / "tasks.jsonl")
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
        assert written >= KILL_AFTER - BATCH and written + not_written == TASKS

        server.start(timeout=300)  # same data directory / database
        landed = client.task_count(project_id)
        assert written <= landed < TASKS  # a batch in flight at the kill may have landed without an answer
        rerun = run_import(server, tmp_path / "tasks.jsonl")
        out, err = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, out + err
        assert f"{TASKS - landed} task(s) created, {landed} already present" in out
        ids = [t.data["evalstudio_id"] for t in client.tasks(project_id)]
        assert len(ids) == TASKS and set(ids) == set(expected)
    finally:
        server.stop()
