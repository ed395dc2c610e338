"""The OpenAI-compatible test server process (tests/openai_server.py) and the `evalstudio judge` command line
against it, shared by the judge's tests (test_judge*.py, test_error_filter.py, test_esa_ai.py,
test_prefill_browser.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import ROOT, example_files, free_port
from .test_cli import run


class OpenAIServer:
    def __init__(self, folder: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = folder / "requests.jsonl"
        self.process = subprocess.Popen([sys.executable, "-m", "tests.openai_server", str(self.port), str(self.log)],
                                        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError("the OpenAI-compatible test server did not start")
            time.sleep(0.1)
        raise RuntimeError("the OpenAI-compatible test server did not answer")

    def stats(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=30).json()

    def bodies(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def stop(self) -> None:
        self.process.kill()  # (answers it holds back, e.g. a timeout's, are not waited for)
        self.process.wait(timeout=30)


@pytest.fixture
def llm(tmp_path):
    server = OpenAIServer(tmp_path)
    yield server
    server.stop()


def judge_cli(llm, tmp_path, protocol: str, *options: str, model: str = "judge", files=None):
    files = [str(f) for f in (files or example_files(protocol))]
    return run("judge", protocol, *files, "--model", model, "--base-url", llm.url, "-o", str(tmp_path / "out"),
               "--cache", str(tmp_path / "cache" / "judge.sqlite3"), *options,
               env={"OPENAI_API_KEY": "sk-test-secret-never-shown"}, cwd=tmp_path)


def summary_of(tmp_path) -> list[dict]:
    import csv

    with open(tmp_path / "out" / "summary.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def dialogue_items(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"i{i}", "context": f"A: how was day {i}?",
                                        "responses": [{"system": "s", "text": f"fine, day {i} was fine"}]}) + "\n"
                            for i in range(n)), encoding="utf-8")
    return path
