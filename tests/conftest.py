"""Fixtures: a real Label Studio server (SQLite in a temp dir, loopback port) shared by the session."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from evalstudio import importers, registry
from evalstudio.client import Client
from evalstudio.errors import ServerError
from evalstudio.server import LocalServer, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"
PROTOCOLS = ["sotopia", "cmv", "circa", "dialogue", "health"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def example_files(protocol: str) -> list[Path]:
    return sorted(p for p in (EXAMPLES / protocol).iterdir() if p.suffix in {".jsonl", ".csv", ".tsv", ".xml"})


@pytest.fixture(scope="session")
def reg() -> registry.Registry:
    return registry.load(ROOT / "projects.yaml")


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory):
    server = LocalServer(tmp_path_factory.mktemp("label-studio"), port=free_port())
    server.start(timeout=300)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def client(label_studio) -> Client:
    return Client(label_studio.settings())


@pytest.fixture
def importer_for(reg):
    return lambda protocol: importers.get(reg.get(protocol).importer)


@pytest.fixture(scope="session")
def ml_backend(label_studio, tmp_path_factory):
    directory = tmp_path_factory.mktemp("ml-backend")
    port = free_port()
    log = open(directory / "backend.log", "w")
    env = {**os.environ, "EVALSTUDIO_PROJECTS": str(ROOT / "projects.yaml"),
           "LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key}
    process = subprocess.Popen([sys.executable, "-m", "evalstudio.cli", "ml-backend", "--port", str(port),
                                "--model-dir", str(directory / "models")], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, 60, process, "the ML backend")
    except ServerError as e:
        raise RuntimeError(f"{e}\n{(directory / 'backend.log').read_text()}") from None
    yield url, directory / "backend.log"
    process.terminate()
    process.wait(timeout=20)
