"""What a participant waits for, through the participant gateway. Two modes:

Stress (the default): N concurrent annotators work through the labeling stream without pause (open the next task,
submit an answer), once directly against Label Studio and once through `evalstudio gateway`, in one run.

    python benchmarks/gateway.py [--annotators 50] [--rounds 10] [--database postgresql]

Paced (--paced): a crowd study as it runs. P participants arrive over the first minutes (uniformly, as a crowd
platform sends them), each signs in with their personal link and does T tasks, spending 20-60 s on each (uniform),
through G gateway worker processes in front of Label Studio on PostgreSQL served by W gunicorn workers (`evalstudio
server --workers W`). p50 and p99 of "next task" and "submit" as the participant sees them, the gateway's own time
per request, errors, and at the end, for every task: annotations <= overlap and = distinct participants, and
annotations stored = submissions acknowledged. With --faults the gateway (all its workers, SIGKILL) and Label
Studio (SIGKILL) are each killed and started again twice during the run; participants ask again as the labeling
page does, and must all finish.

    python benchmarks/gateway.py --paced [--annotators 300] [--rounds 10] [--gateway-workers 2]
                                 [--label-studio-workers 4] [--arrival 120] [--faults]

Launch (--launch): the paced crowd, but P participants (default 500) arrive within --arrival seconds (default 60)
through the study link and sign up there (no `participants add`); sign-up, next and submit p50/p99 as the
participant sees them, the sync lag (how old the oldest answer Label Studio does not hold yet is, sampled every
second) and the time from the last answer until Label Studio holds everything. --stop-label-studio S stops Label
Studio (SIGSTOP) for S seconds in the middle of the run, then lets it go on (SIGCONT).

    python benchmarks/gateway.py --launch [--annotators 500] [--arrival 60] [--stop-label-studio 300] [--faults]
                                          [--busy 1] [--cpus gateway=0 label-studio=1 postgresql=0 participants=0]

Every mode prints the machine's speed (`benchmarks/analysis.py --quick` timed before the run) and the load
generator's share of the CPU beside its table; paced runs and launches also the load average and where the CPU went
during the run (benchmarks/cpu_use.py: the gateway's workers and its sync writer thread, Label Studio's workers,
PostgreSQL, the simulated participants, anything else on the machine), so that rows from two machines can be
compared. --busy N spins N processes beside the run (N busy cores). --cpus ROLE=CPUS ... emulates hosts on the
machine's CPUs (benchmarks/placement.py): `gateway=0 label-studio=0 postgresql=0 participants=0` is one 1-core box,
`label-studio=1` with the others on 0 puts Label Studio's workers on a 1-core host of their own; the run prints the
placement and how busy each CPU was.

One Label Studio (SQLite in a temp dir, or a throwaway PostgreSQL cluster: Debian's `postgresql` binaries, as in
the tests) and one gateway process are started for the run. Each side has its own project
of the same synthetic dialogue tasks (3 annotators per task) and the same participant accounts. Direct: each
annotator calls Label Studio's `/api/projects/ID/next` and `/api/tasks/ID/annotations` with their own token (what
Label Studio's labeling stream calls). Gateway: the same annotators, signed in with their personal links, call the
gateway's `/api/next/dialogue` and `/api/submit/REF`. Latency per request, p50 and p99 per side and operation;
added p99 = gateway p99 - direct p99 (target: under 10 ms). The load generator (asyncio + httpx, one process)
shares the machine's cores with both servers. Nothing but 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cpu_use  # noqa: E402  (beside this file)
import placement  # noqa: E402  (beside this file)
from crowd_pace import dialogue_study  # noqa: E402  (beside this file)

from evalstudio import importers  # noqa: E402
from evalstudio.crowd import participants
from evalstudio.labelstudio.client import Client  # noqa: E402
from evalstudio.labelstudio.server import LocalServer, wait_healthy  # noqa: E402
from evalstudio.tasks.importing import import_files  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.postgres import TempPostgres  # noqa: E402


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def direct(url: str, tokens: list[str], project_id: int, rounds: int, result: list) -> dict[str, list]:
    times = {"next": [], "submit": []}

    async def annotator(token: str):
        async with httpx.AsyncClient(base_url=url, timeout=120, headers={"Authorization": f"Token {token}"}) as web:
            for _ in range(rounds):
                t0 = time.perf_counter()
                task = (await web.get(f"/api/projects/{project_id}/next")).raise_for_status().json()
                t1 = time.perf_counter()
                (await web.post(f"/api/tasks/{task['id']}/annotations", params={"project": project_id},
                                json={"result": result, "lead_time": 1.0})).raise_for_status()
                t2 = time.perf_counter()
                times["next"].append(t1 - t0)
                times["submit"].append(t2 - t1)
    await asyncio.gather(*(annotator(t) for t in tokens))
    return times


async def gateway(url: str, links: list[str], rounds: int, result: list) -> dict[str, list]:
    times = {"next": [], "submit": [], "added next": [], "added submit": [], "waits": []}

    def added(answer: httpx.Response) -> float:  # the gateway's own time: total minus its calls to Label Studio
        parts = dict(item.strip().split(";dur=") for item in answer.headers["server-timing"].split(","))
        return (float(parts["total"]) - float(parts["upstream"])) / 1000

    async def annotator(link: str):
        async with httpx.AsyncClient(base_url=url, timeout=120, headers={"X-Evalstudio": "1"}) as web:
            if (await web.get(link)).status_code != 303:
                sys.exit(f"sign-in failed for {link.split('/')[2]}")
            for _ in range(rounds):
                t0 = time.perf_counter()
                answer = await web.get("/api/next/dialogue")
                while answer.status_code == 503 and answer.json().get("wait"):  # held by others just now: the
                    times["waits"].append(1)  # page asks again; so does this annotator, at once
                    answer = await web.get("/api/next/dialogue")
                task = answer.raise_for_status().json()
                if "finished" in task:
                    break
                t1 = time.perf_counter()
                submitted = (await web.post(f"/api/submit/{task['ref']}", json={"result": result})).raise_for_status()
                t2 = time.perf_counter()
                times["added next"].append(added(answer))
                times["added submit"].append(added(submitted))
                times["next"].append(t1 - t0)
                times["submit"].append(t2 - t1)
    await asyncio.gather(*(annotator(link) for link in links))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotators", type=int, default=None, help="participants (stress: 50, paced: 300)")
    parser.add_argument("--rounds", type=int, default=10, help="tasks per participant")
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default=None,
                        help="Label Studio's database (stress: sqlite, paced: postgresql)")
    parser.add_argument("--paced", action="store_true", help="a crowd study at human pace (see above)")
    parser.add_argument("--launch", action="store_true", help="a launch: sign-ups through the study link (see above)")
    parser.add_argument("--stop-label-studio", type=float, default=0.0,
                        help="stop Label Studio (SIGSTOP) this many seconds in the middle of a paced run or launch")
    parser.add_argument("--gateway-workers", type=int, default=2)
    parser.add_argument("--label-studio-workers", type=int, default=4)
    parser.add_argument("--arrival", type=float, default=None,
                        help="seconds over which participants arrive (paced: 120, launch: 60)")
    parser.add_argument("--pace", type=float, nargs=2, default=(20.0, 60.0), help="seconds on a task: from, to")
    parser.add_argument("--faults", action="store_true", help="kill and restart the gateway and Label Studio twice")
    parser.add_argument("--busy", type=int, default=0,
                        help="paced or launch: this many processes spinning beside the run (each one busy core)")
    parser.add_argument("--label-studio-nice", type=int, default=0,
                        help="paced or launch: run Label Studio and its PostgreSQL at this nice value (the gateway at 0)")
    parser.add_argument("--drain", type=float, default=1800.0,
                        help="paced or launch: seconds to wait at most for Label Studio to hold every answer at the end")
    parser.add_argument("--cpus", nargs="+", default=[], metavar="ROLE=CPUS",
                        help="paced or launch: hosts emulated on CPUs (benchmarks/placement.py), e.g. gateway=0 "
                             "label-studio=1 postgresql=0 participants=0; a role not named runs on every CPU")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    try:
        args.placement = placement.parse(args.cpus, os.cpu_count() or 1)
    except ValueError as e:
        parser.error(str(e))
    if args.paced or args.launch:
        from crowd_pace import paced

        args.annotators = args.annotators or (500 if args.launch else 300)
        args.arrival = args.arrival if args.arrival is not None else (60.0 if args.launch else 120.0)
        args.database = args.database or "postgresql"
        return paced(args)
    args.annotators = args.annotators or 50
    args.database = args.database or "sqlite"
    tasks = args.annotators * args.rounds // 3 + 50
    speed = cpu_use.speed()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        postgres = TempPostgres(free_port()).start() if args.database == "postgresql" else None
        database_url = postgres.create_database("gateway_benchmark") if postgres else None
        server = LocalServer(tmp / "ls", port=free_port(), database_url=database_url).start(timeout=300)
        gateway_process = None
        try:
            client = Client(server.settings())
            projects_file, project, items = dialogue_study(
                tmp, {"title": "gateway benchmark", "annotators_per_task": 3}, None, tasks)
            direct_project = import_files(project.model_copy(update={"title": "gateway benchmark direct"}),
                                          importers.get("dialogue"), [items], client).project_id
            import_files(project, importers.get("dialogue"), [items], client)
            folder = tmp / "participants"
            ids = [f"BENCH{i}" for i in range(args.annotators)]
            participants.add(client, ids, folder)
            accounts = participants.load_accounts(folder)
            tokens = [client.log_in(accounts[i].email, accounts[i].password) for i in ids]
            port = free_port()
            env = {"PATH": "/usr/bin:/bin", "LABEL_STUDIO_URL": server.url,
                   "LABEL_STUDIO_API_KEY": server.credentials().api_key, "EVALSTUDIO_PROJECTS": str(projects_file)}
            gateway_process = subprocess.Popen(
                [sys.executable, "-m", "evalstudio.cli", "gateway", "dialogue", "--port", str(port),
                 "--participants", str(folder), "--sign-ins-per-minute", "1000"], env=env, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            gateway_url = f"http://127.0.0.1:{port}"
            wait_healthy(gateway_url, 120, gateway_process, "the gateway")
            result = [{"from_name": c.name, "to_name": c.to_name[0], "type": "rating", "value": {"rating": 3}}
                      for c in project.interface.controls]
            use = cpu_use.CpuUse({"the servers (Label Studio, the gateway)": lambda: {server.process.pid,
                                                                                      gateway_process.pid},
                                  "the load generator (simulated annotators)": lambda: {os.getpid()}}, {},
                                 alone=("the load generator (simulated annotators)",))
            with use:
                measured = {
                    "Label Studio": asyncio.run(direct(server.url, tokens, direct_project, args.rounds, result)),
                    "gateway": asyncio.run(gateway(gateway_url, [f"/s/{i}/{accounts[i].access}" for i in ids],
                                                   args.rounds, result)),
                }
        finally:
            if gateway_process is not None:
                gateway_process.terminate()
                gateway_process.wait(timeout=30)
            server.stop()
            if postgres is not None:
                postgres.stop()
    print(f"{args.annotators} concurrent annotators x {args.rounds} tasks each, Label Studio on {args.database}; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    generator = dict(use.table()).get("the load generator (simulated annotators)", 0.0)
    print(f"  machine speed: benchmarks/analysis.py --quick took {speed[0]:.1f} s ({speed[1]:.1f} CPU s) before the "
          f"run; the load generator (one process, on the same cores as the servers) used {generator:.1f} CPU s, "
          f"{100 * generator / (use.seconds * (os.cpu_count() or 1)):.1f}% of the machine")
    print(f"{'path':<14}{'operation':<10}{'requests':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for side, times in measured.items():
        for op, values in times.items():
            if op.startswith("added") or op == "waits":
                continue
            print(f"{side:<14}{op:<10}{len(values):>9}{1000 * p(values, 50):>9.1f}{1000 * p(values, 99):>9.1f}")
    # Label Studio's own latency under this load varies by seconds between runs, so the difference of the two
    # sides' p99 says little; the gateway reports its own time per request (Server-Timing: total - upstream)
    print(f"'next' answered 'held by others, ask again' {len(measured['gateway']['waits'])} time(s)")
    for op in ("next", "submit"):
        print(f"gateway's own time per request ({op}): p50 {1000 * p(measured['gateway']['added ' + op], 50):.2f} ms, "
              f"p99 {1000 * p(measured['gateway']['added ' + op], 99):.2f} ms")


if __name__ == "__main__":
    main()
