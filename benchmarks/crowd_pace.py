"""The paced crowd of `benchmarks/gateway.py --paced` and `--launch` (see its docstring): participants at human
pace through several gateway workers, Label Studio on PostgreSQL with several workers, optionally with both killed
and started again, or Label Studio stopped (SIGSTOP) for a while, during the run. With --launch the participants sign
up through the study link as they arrive (no `participants add`), and the run measures how far Label Studio is
behind the ledger (the sync lag) and how long it takes to hold everything after the last answer. Only 127.0.0.1 is
contacted."""

from __future__ import annotations

import asyncio
import json
import math
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalstudio import importers  # noqa: E402
from evalstudio.crowd import ledger, participants
from evalstudio.gateway import serving  # noqa: E402
from evalstudio.labelstudio.client import Client  # noqa: E402
from evalstudio.labelstudio.server import LocalServer, wait_healthy  # noqa: E402
from evalstudio.protocols import registry
from evalstudio.tasks.importing import import_files  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.postgres import TempPostgres  # noqa: E402

import cpu_use  # noqa: E402  (beside this file)
import placement  # noqa: E402  (beside this file)

OVERLAP = 3
GIVE_UP = 900  # seconds a participant keeps asking again before the run counts them as lost


def q(values: list[float], percent: int) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1] if len(values) > 1 else values[0]


class Gateway:
    """`evalstudio gateway dialogue` as a process; `prefix` runs it elsewhere (`ip netns exec NAME`), on `host`."""

    def __init__(self, env: dict, folder: Path, workers: int, prefix: list[str] = (), host: str = "127.0.0.1"):
        self.port, self.host, self.prefix = free_port(), host, list(prefix)
        self.url = f"http://{host}:{self.port}"
        self.env, self.folder, self.workers = env, folder, workers
        self.process = None

    def start(self) -> None:
        log = open(self.folder.parent / "gateway.log", "ab")
        self.process = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "evalstudio.cli", "gateway", "dialogue", "--host", self.host, "--port",
             str(self.port), "--participants", str(self.folder), "--sign-ins-per-minute", "100000", "--workers",
             str(self.workers)],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        wait_healthy(self.url, 300, self.process, "the gateway")

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=60)


class Crowd:
    """The simulated participants and what they saw."""

    def __init__(self, args, url: str, links: dict[str, str], result: list):
        self.args, self.url, self.links, self.result = args, url, links, result
        self.rng = random.Random(args.seed)
        ops = ("sign-up", "next", "submit")
        self.latency = {op: [] for op in ops}  # one request that was answered, as the participant timed it
        self.seen = {op: [] for op in ops}  # from the first try to the answer, waits for retries included
        self.own = {op: [] for op in ops}  # the gateway's own time (Server-Timing: total - upstream)
        self.upstream = {op: [] for op in ops}  # Label Studio's time within the gateway's answer
        self.join_key: str | None = None  # --launch: participants sign up through the study link
        self.errors = Counter()
        self.acknowledged: set[tuple[str, str]] = set()
        self.finished: set[str] = set()
        self.surplus = 0

    async def ask(self, web: httpx.AsyncClient, op: str, method: str, path: str, **kwargs) -> httpx.Response:
        """A request asked again, as the labeling page does, while the study server is unreachable or busy."""
        first = time.perf_counter()
        while True:
            started = time.perf_counter()
            try:
                answer = await web.request(method, path, **kwargs)
            except httpx.HTTPError as e:
                self.errors[f"{op}: {type(e).__name__}"] += 1
                answer = None
            if answer is not None and answer.status_code < 500:
                self.latency[op].append(time.perf_counter() - started)
                self.seen[op].append(time.perf_counter() - first)
                timing = answer.headers.get("server-timing")
                if timing:
                    parts = dict(item.strip().split(";dur=") for item in timing.split(","))
                    self.own[op].append((float(parts["total"]) - float(parts["upstream"])) / 1000)
                    self.upstream[op].append(float(parts["upstream"]) / 1000)
                return answer
            if answer is not None:
                if answer.status_code == 503 and op == "next" and answer.json().get("wait"):
                    self.errors["next: held by others (asked again)"] += 1
                else:
                    self.errors[f"{op}: HTTP {answer.status_code}"] += 1
            if time.perf_counter() - first > GIVE_UP:
                raise RuntimeError(f"{op} unanswered for {GIVE_UP} s")
            await asyncio.sleep(2.0)

    async def participant(self, pid: str, arrives: float, paces: list[float]) -> None:
        await asyncio.sleep(arrives)
        async with httpx.AsyncClient(base_url=self.url, timeout=120, headers={"X-Evalstudio": "1"}) as web:
            signed = None
            if self.join_key is not None:  # a launch: signed up (and signed in) through the study link on arrival
                joined = await self.ask(web, "sign-up", "POST", "/api/join",
                                        json={"key": self.join_key, "participant": pid})
                if joined.status_code != 200:
                    self.errors[f"sign-up: HTTP {joined.status_code}"] += 1
                    return
            while self.join_key is None and (signed is None or signed.status_code != 303):  # (again while it restarts)
                try:
                    signed = await web.get(self.links[pid])
                except httpx.HTTPError:
                    signed = None
                if signed is None or signed.status_code != 303:
                    self.errors["sign-in"] += 1
                    await asyncio.sleep(2.0)
            pace = iter(paces)
            while True:
                task = (await self.ask(web, "next", "GET", "/api/next/dialogue")).json()
                if "finished" in task:
                    self.finished.add(pid)
                    return
                if "ref" not in task:
                    self.errors[f"next: {task.get('error', task)}"] += 1
                    await asyncio.sleep(2.0)
                    continue
                await asyncio.sleep(next(pace, 20.0))
                answer = await self.ask(web, "submit", "POST", f"/api/submit/{task['ref']}", json={"result": self.result})
                body = answer.json()
                if body.get("ok"):
                    self.acknowledged.add((pid, task["ref"]))
                elif body.get("next"):
                    self.surplus += 1
                else:
                    self.errors[f"submit: {body.get('error')}"] += 1

    async def run(self, faults) -> None:
        ids = sorted(self.links)
        low, high = self.args.pace
        work = [self.participant(pid, self.rng.uniform(0, self.args.arrival),
                                 [self.rng.uniform(low, high) for _ in range(self.args.rounds + 5)]) for pid in ids]
        if faults is not None:
            work.append(faults())
        await asyncio.gather(*work)


def dialogue_study(folder: Path, settings: dict, per_participant: int | None, tasks: int):
    """A projects.yaml whose dialogue entry has `settings`, and `tasks` synthetic one-response items:
    (projects file, the dialogue project, the items file)."""
    raw = yaml.safe_load((ROOT / "projects.yaml").read_text())
    raw["projects"]["dialogue"].update(settings)
    raw["projects"]["dialogue"]["crowd"]["per_participant"] = per_participant
    raw["projects"] = {"dialogue": raw["projects"]["dialogue"]}  # (the others' files stay where they are)
    raw["projects"]["dialogue"]["config"] = str(ROOT / raw["projects"]["dialogue"]["config"])
    projects_file = folder / "projects.yaml"
    projects_file.write_text(yaml.safe_dump(raw, allow_unicode=True))
    items = folder / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"b{i}", "context": f"A: question number {i}?",
                                         "responses": [{"system": "s", "text": f"answer {i}"}]}) + "\n"
                             for i in range(tasks)))
    return projects_file, registry.load(projects_file).get("dialogue"), items


def postmaster(postgres: TempPostgres | None) -> set[int]:
    """The PostgreSQL server's pid (its backends are its children)."""
    try:
        return {int((postgres.root / "data" / "postmaster.pid").read_text().split()[0])} if postgres else set()
    except (OSError, ValueError, IndexError):
        return set()


def catalogue_cost(server, client, project, folder: Path, reads: int = 5) -> list[tuple[float, float]]:
    """Label Studio's CPU seconds and the wall seconds of one read of the part's tasks by a gateway's catalogue
    (evalstudio/gateway/serving.py, run here): a read of every task (a worker's first, and one every
    CATALOGUE_FULL_SECONDS) and a refresh (the tasks added or saved since), each measured `reads` times once the run
    is over."""
    from evalstudio.gateway.app import Gateway
    from evalstudio.gateway.setup import GatewayConfig, load_parts

    [part] = load_parts(client, [project])
    config = GatewayConfig(study="catalogue cost", parts=[part], label_studio_url=server.url,
                           api_key=server.credentials().api_key, participants_folder=folder,
                           public_url="http://127.0.0.1:9")

    async def measure() -> list[tuple[float, float]]:
        gateway, costs = Gateway(config), []
        await gateway._catalogue(part)
        for full in (True, False):
            use = cpu_use.CpuUse({"Label Studio": lambda: {server.process.pid}}, {})
            with use:
                t0 = time.perf_counter()
                for _ in range(reads):
                    if full:
                        gateway._catalogues.pop(part.name)
                    await gateway._catalogue(part, since=time.monotonic())
                wall = (time.perf_counter() - t0) / reads
            costs.append((dict(use.table()).get("Label Studio", 0.0) / reads, wall))
        await gateway.upstream.aclose()
        return costs
    return asyncio.run(measure())


def paced(args) -> None:
    tasks = math.ceil(args.annotators * args.rounds / OVERLAP) + 50
    events: list[str] = []
    load_before = cpu_use.load()
    speed = cpu_use.speed()
    spinners = cpu_use.busy(args.busy)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        postgres = TempPostgres(free_port()).start() if args.database == "postgresql" else None
        database_url = postgres.create_database("crowd_benchmark") if postgres else None
        server = LocalServer(tmp / "ls", port=free_port(), database_url=database_url,
                             workers=args.label_studio_workers).start(timeout=600)
        if args.label_studio_nice:  # Label Studio's workers and its database behind the gateway, at a lower priority
            os.setpriority(os.PRIO_PGRP, server.process.pid, args.label_studio_nice)
            for pid in postmaster(postgres):
                os.setpriority(os.PRIO_PGRP, os.getpgid(pid), args.label_studio_nice)
        gateway = None
        try:
            client = Client(server.settings())
            projects_file, project, items = dialogue_study(tmp, {"title": "paced crowd", "annotators_per_task": OVERLAP,
                                                                 "order": "random"}, args.rounds, tasks)
            project_id = import_files(project, importers.get("dialogue"), [items], client).project_id
            folder = tmp / "participants"
            ids = [f"CROWD{i}" for i in range(args.annotators)]
            if not args.launch:
                started = time.time()
                participants.add(client, ids, folder)
                events.append(f"{len(ids)} accounts made in {time.time() - started:.0f} s")
            accounts = participants.load_accounts(folder)
            env = {"PATH": "/usr/bin:/bin", "LABEL_STUDIO_URL": server.url,
                   "LABEL_STUDIO_API_KEY": server.credentials().api_key, "EVALSTUDIO_PROJECTS": str(projects_file)}
            gateway = Gateway(env, folder, args.gateway_workers)
            gateway.start()

            def place() -> None:  # --cpus: each part on its emulated host's CPUs (what it starts later inherits them)
                placement.pin(gateway.process.pid, args.placement.get("gateway"))
                placement.pin(server.process.pid, args.placement.get("label-studio"))
                for pid in postmaster(postgres):
                    placement.pin(pid, args.placement.get("postgresql"))
                placement.pin(os.getpid(), args.placement.get("participants"), children=False)
            place()
            result = [{"from_name": c.name, "to_name": c.to_name[0], "type": "rating", "value": {"rating": 3}}
                      for c in project.interface.controls]
            crowd = Crowd(args, gateway.url, {i: f"/s/{i}/{accounts[i].access}" if i in accounts else "" for i in ids},
                          result)
            book = ledger.open_ledger(folder)
            crowd.join_key = book.setting("join_key") if args.launch else None
            lags: list[float] = []  # the sync lag, sampled every second: how old the oldest unwritten answer is
            t0 = time.time()

            async def sample_lag():
                while True:
                    lags.append(book.lag().oldest or 0.0)
                    if len(lags) % 10 == 0:  # (again: a worker or server started again after a fault)
                        place()
                    await asyncio.sleep(1.0)

            async def stop_label_studio():
                at = 0.4 * (args.arrival + args.rounds * sum(args.pace) / 2)
                await asyncio.sleep(max(0.0, t0 + at - time.time()))
                os.killpg(server.process.pid, signal.SIGSTOP)
                await asyncio.sleep(args.stop_label_studio)
                os.killpg(server.process.pid, signal.SIGCONT)
                events.append(f"Label Studio stopped (SIGSTOP) at {at:.0f} s for {args.stop_label_studio:g} s")

            async def faults():
                loop = asyncio.get_running_loop()
                # spread over the run's expected length: arrivals, then the tasks at their mean pace
                expected = args.arrival + args.rounds * sum(args.pace) / 2
                for share, what in ((0.15, "gateway"), (0.35, "label studio"), (0.55, "gateway"),
                                    (0.75, "label studio")):
                    at = share * expected
                    await asyncio.sleep(max(0.0, t0 + at - time.time()))
                    down = time.time()
                    if what == "gateway":
                        gateway.kill()
                        await loop.run_in_executor(None, gateway.start)
                    else:
                        os.killpg(server.process.pid, signal.SIGKILL)
                        server.process.wait()
                        await loop.run_in_executor(None, lambda: server.start(timeout=600))
                    events.append(f"{what} killed at {down - t0:.0f} s, serving again {time.time() - down:.0f} s "
                                  "later")

            async def everything():
                sampler = asyncio.create_task(sample_lag())
                stopper = asyncio.create_task(stop_label_studio()) if args.stop_label_studio else None
                await crowd.run(faults if args.faults else None)
                if stopper is not None:
                    await stopper
                sampler.cancel()

            use = cpu_use.CpuUse({
                "gateway workers (participants' requests)": lambda: {gateway.process.pid},
                "Label Studio (gunicorn workers)": lambda: {server.process.pid},
                "PostgreSQL (Label Studio's database)": lambda: postmaster(postgres),
                f"--busy {args.busy} (spinning)": lambda: {s.pid for s in spinners},
                "benchmark (simulated participants)": lambda: {os.getpid()}},
                {"gateway workers (participants' requests)": ("evalstudio-sync", "gateway sync writer (thread)")},
                alone=("benchmark (simulated participants)",))
            per_cpu = placement.cpu_busy()
            with use:
                asyncio.run(everything())
                per_cpu = [after - before for after, before in zip(placement.cpu_busy(), per_cpu)]
                duration = time.time() - t0
                load_during = cpu_use.load()
                last_answer = time.time()
                drained = book.wait_synced(args.drain)  # the gateway's sync writer puts the last answers into Label Studio
            for spinner in spinners:
                spinner.kill()
            catalogue = catalogue_cost(server, client, project, tmp / "catalogue cost")
            events.append(f"Label Studio held every acknowledged answer {time.time() - last_answer:.1f} s after the "
                          f"last one (still behind: {drained.behind}); sync lag sampled every second: p50 "
                          f"{q(lags, 50):.1f} s, p99 {q(lags, 99):.1f} s, max {max(lags, default=0):.1f} s")
            stored = [(t["id"], a["completed_by"]) for page in client.full_task_pages(project_id) for t in page
                      for a in t["annotations"]]
            answered = [r for r in book.answers() if r.annotation_id is not None]
            made = sum(1 for e in client.users().values() if e.startswith("crowd"))
        finally:
            for spinner in spinners:
                spinner.kill()
            if gateway is not None:
                gateway.stop()
            server.stop()
            if postgres is not None:
                postgres.stop()
    per_task = Counter(task for task, _ in stored)
    distinct = {task: len({user if isinstance(user, int) else user.get("id") for t, user in stored if t == task})
                for task in per_task}
    print(f"{args.annotators} participants x {args.rounds} tasks, {args.pace[0]:g}-{args.pace[1]:g} s a task, arriving "
          f"over {args.arrival:g} s; {args.gateway_workers} gateway workers; Label Studio on {args.database} with "
          f"{args.label_studio_workers} workers{f' at nice {args.label_studio_nice}' if args.label_studio_nice else ''}"
          f"{'; with faults' if args.faults else ''}; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}; {duration:.0f} s{f'; {args.busy} busy core(s) beside it' if args.busy else ''}")
    print(f"  machine speed: benchmarks/analysis.py --quick took {speed[0]:.1f} s ({speed[1]:.1f} CPU s) before the "
          f"run; load average {load_before} before, {load_during} at the end of the participants' work")
    print(f"  placement: {placement.describe(args.placement)}; each CPU busy during the participants' work "
          f"(every process on it, other work too): {', '.join(f'CPU {n} {100 * b / duration:.0f}%' for n, b in enumerate(per_cpu))}")
    for event in events:
        print(f"  {event}")
    print(f"{'operation':<10}{'answered':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'seen p99 ms':>13}"
          f"{'LS p50 ms':>11}{'LS p99 ms':>11}{'own p50 ms':>12}{'own p99 ms':>12}")
    for op in ("sign-up", "next", "submit"):
        values = crowd.latency[op]
        if not values:
            continue
        print(f"{op:<10}{len(values):>9}{1000 * q(values, 50):>9.0f}{1000 * q(values, 99):>9.0f}"
              f"{1000 * max(values):>9.0f}{1000 * q(crowd.seen[op], 99):>13.0f}{1000 * q(crowd.upstream[op], 50):>11.0f}"
              f"{1000 * q(crowd.upstream[op], 99):>11.0f}{1000 * q(crowd.own[op], 50):>12.2f}"
              f"{1000 * q(crowd.own[op], 99):>12.2f}")
    generator = dict(use.table()).get("benchmark (simulated participants)", 0.0)
    print(f"the load generator (the simulated participants, remote on a real launch): {generator:.1f} CPU s, "
          f"{100 * generator / (use.seconds * (os.cpu_count() or 1)):.1f}% of the machine; machine speed "
          f"(analysis.py --quick) {speed[0]:.1f} s")
    print(f"errors and repeats: {dict(crowd.errors) or 'none'}; refused as surplus: {crowd.surplus}")
    print(f"participants finished: {len(crowd.finished)} of {args.annotators}")
    print(f"annotations stored {len(stored)}, submissions acknowledged {len(crowd.acknowledged)}, answers in the "
          f"ledger {len(answered)}; participants' Label Studio accounts {made}")
    print(f"tasks over the overlap of {OVERLAP}: {sum(n > OVERLAP for n in per_task.values())}; tasks with a "
          f"participant twice: {sum(per_task[t] != distinct[t] for t in per_task)}")
    use.print()
    print(f"  a gateway worker's read of the part's tasks, every task (its first, then every "
          f"{serving.CATALOGUE_FULL_SECONDS:g} s): {catalogue[0][0]:.2f} CPU s of Label Studio, {catalogue[0][1]:.2f} s; "
          f"a refresh (every {serving.CATALOGUE_SECONDS:g} s): {catalogue[1][0]:.2f} CPU s, {catalogue[1][1]:.2f} s")
