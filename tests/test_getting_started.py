"""docs/getting-started.md as a newcomer follows it, on a fresh copy of the repository: every command block of the
page is run as it is written (`make install`, `make demo`, then status, export, report and analyze in a second
"terminal"); the one step done in a browser (annotating a task as the printed admin) is done through the API.
The demo starts with empty answers, Ctrl-C stops it cleanly and a second run imports nothing twice. The page's
expected `analyze` output must be what the command prints, so the page cannot rot."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.connection import Settings, read_dotenv
from evalstudio.labelstudio.server import answers
from evalstudio.protocols import registry
from evalstudio.values.results import region

from .conftest import PROJECTS, ROOT, free_port
from .test_export_e2e import designed_value

pytestmark = pytest.mark.server
PAGE = ROOT / "docs" / "getting-started.md"
# what evalstudio reads from the environment: the page's commands find the demo's server through ./.evalstudio
CONNECTION_ENV = ("LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY", "EVALSTUDIO_PROJECTS", "EVALSTUDIO_DATABASE_URL")


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """The page's fenced blocks in order: (language, lines)."""
    return [(lang, body.strip("\n").splitlines()) for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]


def fresh_copy(target: Path) -> Path:
    """The repository's files (committed or not, nothing ignored: no .venv, no .evalstudio) in a new folder, with
    their modification times; its .venv is the environment these tests run in, which `make install` finds up to
    date (make compares .venv/.installed with pyproject.toml)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, copy = ROOT / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)
    (target / ".venv").symlink_to(Path(sys.prefix))
    return target


def test_the_getting_started_page_works_on_a_fresh_copy(tmp_path):
    page = PAGE.read_text(encoding="utf-8")
    fenced = blocks(page)
    commands = [lines for lang, lines in fenced if lang == "bash"]
    assert [c[0].split()[:2] for c in commands[:2]] == [["make", "install"], ["make", "demo"]], commands
    copy = fresh_copy(tmp_path / "evalstudio")
    ls_port, ml_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in CONNECTION_ENV} | {"COLUMNS": "200"}
    demo_env = env | {"DEMO_ARGS": f"--port {ls_port} --ml-port {ml_port}"}

    # 1. install: the environment is there already, so make only checks it (a fresh machine installs here)
    up_to_date = subprocess.run(["make", "-q", "install"], cwd=copy, env=env)
    assert up_to_date.returncode == 0, "run `make install` in the repository first: its .venv is older than pyproject.toml"
    assert subprocess.run(commands[0][0], shell=True, cwd=copy, env=env, timeout=600).returncode == 0

    # 2. the demo, running until Ctrl-C (in its own process group, as a terminal runs it)
    demo = subprocess.Popen(commands[1][0], shell=True, cwd=copy, env=demo_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    ready = threading.Event()

    def read():
        for line in demo.stdout:
            lines.append(line)
            if "Press Ctrl-C to stop" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(600), "".join(lines)
        output = "".join(lines)
        reg = registry.load(copy / "projects.yaml")
        names = [p.name for protocol in PROJECTS for p in reg.parts(protocol)]
        for name in names:  # no shipped protocol opts in to prefill: answers start empty (Circa Part II: two lists)
            created = re.search(rf"^{name}\s+(\d+) created,\s+(\d+) already present, answers start empty", output, re.M)
            assert created and int(created.group(1)) > 0, output
        assert "login: admin@evalstudio.local" in output and "password in" in output
        assert answers(f"http://127.0.0.1:{ls_port}") and answers(f"http://127.0.0.1:{ml_port}")

        # 3. what the page asks for in the browser: the admin answers the first dialogue task
        written = read_dotenv(copy / ".evalstudio" / "evalstudio.env")
        client = Client(Settings(written["LABEL_STUDIO_URL"], written["LABEL_STUDIO_API_KEY"]))
        project = reg.entry("dialogue")
        project_id = client.require_project(project)
        task = min(client.tasks(project_id), key=lambda t: t.id)
        li, rng, result = project.interface, np.random.default_rng(0), []
        for criterion, spec in project.criteria.items():
            for _, control in project.controls(criterion):
                result.append(region(li, control, designed_value(li.get_control(control), spec, rng)))
        client.sdk.annotations.create(id=task.id, result=result, lead_time=30.0)

        # 4. and 5.: the second terminal, in the same folder (the commands find the server through ./.evalstudio)
        done = {}
        for block in commands[2:]:
            for command in block:
                run = subprocess.run(command, shell=True, cwd=copy, env=env, capture_output=True, text=True, timeout=600)
                assert run.returncode == 0 and "Traceback" not in run.stderr, (command, run.stdout, run.stderr)
                done[command.split()[1]] = run
        assert set(done) == {"status", "export", "report", "analyze"}, list(done)
        exported = pd.read_csv(copy / "dialogue.csv")
        assert sorted(exported["criterion"]) == sorted(project.criteria) and (exported["task_id"] == task.id).all()
        assert (copy / "dialogue-report" / "index.html").is_file()
        assert (copy / "circa-analysis" / "index.html").is_file()
        expected = [lang_lines for lang, lang_lines in fenced if lang == "text"][-1]
        printed = re.sub(r"\s+", " ", done["analyze"].stdout)
        for line in expected:  # the page's analyze output, column for column
            assert re.sub(r"\s+", " ", line).strip() in printed, (line, done["analyze"].stdout)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGINT)  # what Ctrl-C does in the demo's terminal
    try:
        demo.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)
        pytest.fail("demo did not stop within 120 s of Ctrl-C:\n" + "".join(lines) + _log_tail(copy / ".evalstudio"))
    assert "Traceback" not in "".join(lines), "".join(lines)
    assert not answers(f"http://127.0.0.1:{ls_port}") and not answers(f"http://127.0.0.1:{ml_port}")

    # running `make demo` again reuses the data: nothing is imported twice
    again = subprocess.run(commands[1][0], shell=True, cwd=copy, capture_output=True, text=True, timeout=600,
                           env=demo_env | {"DEMO_ARGS": demo_env["DEMO_ARGS"] + " --no-wait"})
    assert again.returncode == 0, again.stdout + again.stderr
    for name in names:
        first = re.search(rf"^{name}\s+(\d+) created", output, re.M).group(1)
        assert re.search(rf"^{name}\s+0 created,\s+{first} already present", again.stdout, re.M), again.stdout
    assert not answers(f"http://127.0.0.1:{ls_port}")


def _log_tail(data_dir: Path) -> str:
    return "".join(f"\n--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                   for p in sorted(data_dir.glob("*.log")))
