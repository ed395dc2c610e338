"""Fixtures: a real Label Studio server on a loopback port, shared by the session, once on SQLite (temp dir)
and once on PostgreSQL (a throwaway cluster): every test that uses it runs on both databases.

EVALSTUDIO_TEST_DATABASES=sqlite (or postgresql) runs one half only."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from evalstudio import importers
from evalstudio.base.errors import ServerError
from evalstudio.labelstudio.client import Client
from evalstudio.labelstudio.server import LocalServer, wait_healthy
from evalstudio.protocols import registry

from .postgres import TempPostgres

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"
PROTOCOLS = ["sotopia", "cmv", "circa", "dialogue", "health"]  # protocols (studies), as on the command line
PROJECTS = ["sotopia", "cmv_tom", "cmv_threads", "circa_part1", "circa_part2", "dialogue", "health"]  # their Label Studio projects
# Hypothesis fuzzing: HYPOTHESIS_PROFILE=ci (the default, 150 cases per target, inside the CI budget) or `long`
# (10,000 cases per target; see docs/security.md for how long it runs).
FUZZ_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(FUZZ_PROFILE)
# targets that import into the real Label Studio run fewer cases in CI (each case is a few requests)
LIVE_FUZZ_EXAMPLES = 10 if FUZZ_PROFILE == "ci" else settings().max_examples
# targets that run the whole command line (registry load, app) per case: fewer in CI, as the same readers are fuzzed
# in-process at the full count
CLI_FUZZ_EXAMPLES = 25 if FUZZ_PROFILE == "ci" else settings().max_examples
# the records of what each import made (tamper evidence, `integrity`) go to a temporary folder, not the checkout's
# .evalstudio/ (each test server has its own address, so its own records); subprocesses inherit it
# (removed when the session ends; pytest-xdist's workers inherit the controller's)
if "EVALSTUDIO_RECORDS" not in os.environ:
    os.environ["EVALSTUDIO_RECORDS"] = tempfile.mkdtemp(prefix="evalstudio-test-records-")
    atexit.register(shutil.rmtree, os.environ["EVALSTUDIO_RECORDS"], True)
# workers per database under `make test` (pytest -n: SHARDS times the number of databases): each shard is a fixed set
# of test modules with its own Label Studio, so one shard's waits (a sync writer settling, a gateway restarting)
# overlap another's work
SHARDS = max(1, int(os.environ.get("EVALSTUDIO_TEST_SHARDS", "2")))
DATABASES = [d.strip() for d in os.environ.get("EVALSTUDIO_TEST_DATABASES", "sqlite,postgresql").split(",") if d.strip()]


def with_absolute_files(raw: dict) -> dict:
    """A parsed projects.yaml whose entries name their files (a config, the front matter's practice items and
    consent text) by absolute path, for a copy written to another folder; changed in place and returned."""
    for entry in raw["projects"].values():
        entry["config"] = str(ROOT / entry["config"])
        for step, key in (("practice", "items"), ("consent", "file")):  # the front matter's files (issue 70)
            if isinstance((entry.get("crowd") or {}).get(step), dict) and entry["crowd"][step].get(key):
                entry["crowd"][step][key] = str(ROOT / entry["crowd"][step][key])
    return raw


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def example_files(protocol: str) -> list[Path]:
    """The sample files of a protocol, or of the study a project belongs to (circa_part1 -> examples/circa,
    cmv_threads -> examples/cmv)."""
    folder = re.sub(r"_(part\d+|tom|threads)$", "", re.sub(r"_list\d+$", "", protocol))
    return sorted(p for p in (EXAMPLES / folder).iterdir() if p.suffix in {".jsonl", ".csv", ".tsv", ".xml"})


@pytest.fixture(scope="session")
def reg() -> registry.Registry:
    return registry.load(ROOT / "projects.yaml")


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the session (started on first use)."""
    server = TempPostgres(free_port()).start()
    yield server
    server.stop()


def start_label_studio(request, tmp_path_factory, database: str, **options) -> LocalServer:
    """A Label Studio on a free port, on SQLite or on a fresh database of the session's PostgreSQL."""
    if database not in ("sqlite", "postgresql"):
        raise ValueError(f"unknown test database {database!r}; use sqlite or postgresql")
    url = None
    if database == "postgresql":
        url = request.getfixturevalue("postgres").create_database(f"ls_{secrets.token_hex(4)}")
    server = LocalServer(tmp_path_factory.mktemp(f"label-studio-{database}"), port=free_port(), database_url=url, **options)
    return server.start(timeout=300)


@pytest.fixture
def database_independent(request):
    """For tests of what Label Studio's database cannot change (the rendered annotator view, the learner's fit):
    one run, on the session's first database, instead of one per database (keeps CI within its time budget)."""
    database = getattr(getattr(request.node, "callspec", None), "params", {}).get("label_studio")
    if database is not None and database != DATABASES[0]:
        pytest.skip(f"independent of the database: runs once, on {DATABASES[0]}")


def only_on_the_first_database(label_studio) -> None:
    """For module fixtures of database-independent tests: set nothing up on the other database (the tests skip)."""
    database = "postgresql" if label_studio.database_env else "sqlite"
    if database != DATABASES[0]:
        pytest.skip(f"independent of the database: runs once, on {DATABASES[0]}")


def only_on_the_last_database(label_studio) -> None:
    """For long database-independent tests: one run, on the last database. The first database's worker already
    runs every other database-independent test (the browser views, say); these even the two halves' times out."""
    database = "postgresql" if label_studio.database_env else "sqlite"
    if database != DATABASES[-1]:
        pytest.skip(f"independent of the database: runs once, on {DATABASES[-1]}")


@pytest.fixture(scope="session", params=DATABASES)
def label_studio(request, tmp_path_factory):
    server = start_label_studio(request, tmp_path_factory, request.param)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def client(label_studio) -> Client:
    return Client(label_studio.settings())


@pytest.fixture
def importer_for(reg):
    return lambda protocol: importers.get(reg.parts(protocol)[0].importer)


@pytest.fixture(scope="session")
def ml_backend(label_studio, tmp_path_factory):
    directory = tmp_path_factory.mktemp("ml-backend")
    port = free_port()
    log = open(directory / "backend.log", "w")
    env = {**os.environ, "EVALSTUDIO_PROJECTS": str(ROOT / "projects.yaml"),
           "LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key}
    env.pop("EVALSTUDIO_ML_BASIC_AUTH", None)  # the backend writes its own secret file, as for a user
    process = subprocess.Popen([sys.executable, "-m", "evalstudio.cli", "ml-backend", "--port", str(port),
                                "--model-dir", str(directory / "models")], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, 60, process, "the ML backend")
    except ServerError as e:
        raise RuntimeError(f"{e}\n{(directory / 'backend.log').read_text()}") from None
    auth = (directory / "ml-backend.auth").read_text().strip()
    yield url, directory / "backend.log", auth
    process.terminate()
    process.wait(timeout=20)


@contextlib.contextmanager
def gateway_process(label_studio, protocol: str, folder: Path, projects_file: Path = ROOT / "projects.yaml"):
    """`evalstudio gateway PROTOCOL` as a real process in front of the test server; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.credentials().api_key,
           "EVALSTUDIO_PROJECTS": str(projects_file)}
    log_path = folder.parent / f"{folder.name}-gateway.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "evalstudio.cli", "gateway", protocol, "--port", str(port),
                                    "--participants", str(folder)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    try:
        try:
            wait_healthy(url, 120, process, "the gateway")
        except ServerError as e:
            raise RuntimeError(f"{e}\n{log_path.read_text()}") from None
        yield url
    finally:
        if process.poll() is None:  # stopped as an operator would: once Label Studio holds what the ledger acknowledged
            from evalstudio.crowd import ledger

            ledger.open_ledger(folder).wait_synced(120)
        process.terminate()
        process.wait(timeout=30)


# seconds a module's slowest tests take on one database beyond their count (measured in `make test`'s durations,
# docs/tests.md); every other test is counted as SECONDS_PER_TEST. Only the shards' balance depends on these.
# (2026-11-29: test_sync lowered for the writer-killed test's 20 s settle (0.57 of main's time, measured side by
# side) and the changed-task test's 3 s re-read, test_signup for the storm's 50 sign-ups (0.91); test_crowd,
# test_lists and test_export_e2e for their tests now run on one database (an average of the two);
# test_judge_live's report test takes about a minute, on the first database)
SLOW_MODULES = {"test_fault_campaign": 170, "test_signup": 200, "test_sync": 115, "test_crowd": 60, "test_gateway": 60,
                "test_ledger_faults": 70, "test_resume": 50, "test_export_e2e": 30, "test_study": 70, "test_lists": 20,
                "test_partition": 40, "test_browser": 40, "test_crowd_browser": 40, "test_judge_live": 30}
SECONDS_PER_TEST = 3


def _shards(items) -> dict[str, int]:
    """Each test module's shard: the modules, heaviest first, each to the shard with the least estimated time so far
    (longest-processing-time-first scheduling), so the workers of one database finish at about the same time."""
    counts: dict[str, int] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None:
            counts[module.__name__] = counts.get(module.__name__, 0) + 1
    weight = {name: SECONDS_PER_TEST * n + SLOW_MODULES.get(name.rsplit(".", 1)[-1], 0) for name, n in counts.items()}
    load = [0.0] * SHARDS
    shard_of = {}
    for name in sorted(weight, key=lambda m: (-weight[m], m)):
        shard = load.index(min(load))
        shard_of[name] = shard
        load[shard] += weight[name]
    return shard_of


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """With pytest-xdist (`-n 2 --dist loadgroup`, as the Makefile runs the suite), every test of one database runs
    in the same worker, so each worker starts only its own database's Label Studio (and PostgreSQL) and the two
    databases' halves run side by side; tests without a server go to whichever worker is free. First among the
    hooks: xdist's worker reads the groups in its own pytest_collection_modifyitems, which otherwise ran before this
    one and saw none (each worker then started both databases' servers)."""
    shard_of = _shards(items)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        database = params.get("label_studio") or params.get("database")
        if database in ("sqlite", "postgresql"):
            module = getattr(item, "module", None)
            shard = shard_of.get(module.__name__, 0) if module is not None else 0
            item.add_marker(pytest.mark.xdist_group(f"{database}-{shard}"))
