"""How fast `evalstudio judge` asks: N tasks (default 10,000 synthetic dialogue items) against the local
OpenAI-compatible server (tests/openai_server.py, a real process on loopback) answering every request after a fixed
200 ms, at concurrency 8, 32 and 128, and once without latency at the highest concurrency (what this machine's client and
server can do together: "the server's limit"). Per concurrency: wall time, requests a second against the ideal (concurrency
/ latency; target at least 90 % of it up to the server's limit), evalstudio's own CPU time per task (the judging
process's user + system time, building prompts, checking answers, caching), and the cached re-run of the same
tasks (target: under 2 s for 10,000, asking nothing).

    python benchmarks/judge.py [--tasks 10000] [--concurrency 8 32 128] [--latency-model slow]

The judging runs in this process (evalstudio.judge, as the command does, without the progress bar); the server
in its own. Nothing but 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LATENCY = 0.2  # the server's "slow" behaviour


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128])
    args = parser.parse_args()

    from evalstudio.base.chat import Cache, ChatClient, Judge
    from evalstudio.judge.instrument import Instrument
    from evalstudio.judge.run import judge_tasks
    from evalstudio.protocols import registry

    project = registry.load(ROOT / "projects.yaml").get("dialogue")
    instrument = Instrument(project)
    port = 18000 + (hash(time.time()) % 1000)
    server = subprocess.Popen([sys.executable, "-m", "tests.openai_server", str(port)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        rows = []
        with tempfile.TemporaryDirectory() as folder:
            runs = [(c, "slow") for c in args.concurrency] + [(max(args.concurrency), "judge")]
            for concurrency, model in runs:
                # each concurrency its own tasks (a fresh cache would do too): nothing is answered from the cache
                tasks = [{"id": i, "data": {"context": f"A: how was day {i} at c{concurrency} {model}?",
                                            "response": f"fine, day {i} was fine", "item_id": f"i{i}"}}
                         for i in range(args.tasks)]
                cache = Cache(Path(folder) / f"cache-{concurrency}.sqlite3")
                judge = Judge("bench", model, f"http://127.0.0.1:{port}/v1")

                async def once():
                    client = ChatClient(cache, concurrency=concurrency, retries=2, timeout=60)
                    try:
                        return await judge_tasks(client, instrument, [judge], tasks), client
                    finally:
                        await client.close()

                start_cpu, start = cpu(), time.perf_counter()
                run, client = asyncio.run(once())
                wall, used = time.perf_counter() - start, cpu() - start_cpu
                answered = sum(c.missing == 0 for c in run.combined)
                start_cpu, start = cpu(), time.perf_counter()
                rerun, client2 = asyncio.run(once())
                rewall = time.perf_counter() - start
                rows.append({"concurrency": concurrency, "latency_ms": 200 if model == "slow" else 0,
                             "tasks": args.tasks, "answered": answered,
                             "seconds": wall, "per_second": args.tasks / wall,
                             "ideal": concurrency / LATENCY if model == "slow" else float("nan"),
                             "of_ideal": args.tasks / wall / (concurrency / LATENCY) if model == "slow" else float("nan"),
                             "cpu_ms_per_task": 1000 * used / args.tasks, "rerun_seconds": rewall,
                             "rerun_asked": client2.usage["bench"].requests})
                cache.close()
    finally:
        server.kill()
    print(f"{args.tasks} dialogue tasks, server latency {LATENCY * 1000:.0f} ms; {platform.machine()}, "
          f"{len(__import__('os').sched_getaffinity(0))} cores, Python {platform.python_version()}, {date.today()}")
    header = ["concurrency", "latency_ms", "answered", "seconds", "per_second", "ideal", "of_ideal", "cpu_ms_per_task",
              "rerun_seconds", "rerun_asked"]
    print(" ".join(f"{h:>15}" for h in header))
    for row in rows:
        print(" ".join(f"{row[h]:>15.2f}" if isinstance(row[h], float) else f"{row[h]:>15}" for h in header))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
