"""`evalstudio demo` as a newcomer runs it: everything starts, Ctrl-C stops it cleanly, a second run adds nothing."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from evalstudio import registry
from evalstudio.server import answers

from .conftest import PROJECTS, ROOT, free_port

pytestmark = pytest.mark.server


def test_demo_starts_with_empty_answers_stops_on_ctrl_c_and_reuses_its_data(tmp_path):
    ls_port, ml_port = free_port(), free_port()
    command = [sys.executable, "-m", "evalstudio.cli", "demo", "--data-dir", str(tmp_path / "data"),
               "--port", str(ls_port), "--ml-port", str(ml_port)]
    env = {**os.environ, "COLUMNS": "200"}
    demo = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read():
        for line in demo.stdout:
            lines.append(line)
            if "Press Ctrl-C to stop" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    assert ready.wait(600), "".join(lines)
    output = "".join(lines)
    names = [p.name for protocol in PROJECTS for p in registry.load(ROOT / "projects.yaml").parts(protocol)]
    for protocol in names:  # no shipped protocol opts in to prefill: answers start empty (Circa Part II: two lists)
        created = re.search(rf"^{protocol}\s+(\d+) created,\s+(\d+) already present, answers start empty", output, re.M)
        assert created and int(created.group(1)) > 0, output
    assert "login: admin@evalstudio.local" in output and "password in" in output
    assert answers(f"http://127.0.0.1:{ls_port}") and answers(f"http://127.0.0.1:{ml_port}")

    demo.send_signal(signal.SIGINT)  # what Ctrl-C does
    try:
        assert demo.wait(timeout=120) == 0, "".join(lines)
    except subprocess.TimeoutExpired:
        demo.kill()
        pytest.fail("demo did not stop within 120 s of Ctrl-C:\n" + "".join(lines) + _log_tail(tmp_path / "data"))
    assert not answers(f"http://127.0.0.1:{ls_port}") and not answers(f"http://127.0.0.1:{ml_port}")

    again = subprocess.run(command + ["--no-wait"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    for protocol in names:
        first = re.search(rf"^{protocol}\s+(\d+) created", output, re.M).group(1)
        assert re.search(rf"^{protocol}\s+0 created,\s+{first} already present", again.stdout, re.M), again.stdout
    assert not answers(f"http://127.0.0.1:{ls_port}")


def _log_tail(data_dir) -> str:
    return "".join(f"\n--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                   for p in sorted(data_dir.glob("*.log")))
