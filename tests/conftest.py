"""Fixtures: a real Label Studio server (SQLite in a temp dir, loopback port) shared by the session."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from evalstudio import importers, registry
from evalstudio.client import Client
from evalstudio.server import LocalServer

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
