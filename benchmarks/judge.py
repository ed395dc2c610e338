"""How fast `evalstudio judge` asks: N tasks (default 10,000 synthetic dialogue items) against the local
OpenAI-compatible server (tests/openai_server.py, a real process on loopback) answering every request after a fixed
200 ms, at concurrency 8, 32 and 128, and once without latency at the highest concurrency (what this machine's client and
server can do together: "the server's limit"). Per concurrency: wall time, requests a second against the ideal (concurrency
/ latency; target at least 90 % of it up to the server's limit), evalstudio's own CPU time per task (the judging
process's user + system time, building prompts, checking answers, caching), and the cached re-run of the same
tasks (target: under 2 s for 10,000, asking nothing).

With --busy N, N processes spinning on the CPU run beside it for the whole run (a shared machine). Every row also
gives what a plain httpx client (one AsyncClient, the same number of requests of the same size at the same
concurrency, nothing else done with the answers) reaches against the same server in the same run: the share of it
evalstudio reaches is the measure on a busy machine (target at least 85 %).

    python benchmarks/judge.py [--tasks 10000] [--concurrency 8 32 128] [--busy 2] [--port 18300]

The judging runs in this process (evalstudio.judge, as the command does, without the progress bar); the server
in its own. Nothing but 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spin() -> None:
    """A busy loop (another program's CPU use on a shared machine)."""
    while True:
        pass


async def plain(url: str, model: str, bodies: list[list[dict]], concurrency: int) -> float:
    """Seconds a plain httpx client takes to post `bodies` (messages) at `concurrency`, reading each answer's JSON."""
    slots = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as web:
        async def one(messages):
            async with slots:
                response = await web.post(url + "/chat/completions", json={
                    "model": model, "messages": messages, "temperature": 0.0, "max_tokens": 1024,
                    "response_format": {"type": "json_object"}})
                response.json()["choices"][0]["message"]["content"]

        start = time.perf_counter()
        await asyncio.gather(*(one(m) for m in bodies))
        return time.perf_counter() - start


def cache_puts(Cache, path: Path, n: int = 500) -> tuple[float, float]:
    """(ms the caller waits per answer put into the cache, ms per answer until all n are committed)."""
    from evalstudio.base.chat import Answer

    cache = Cache(path)
    start = time.perf_counter()
    for i in range(n):
        cache.put(f"key {i}", Answer("{\"appropriateness\": 3}" * 8, 900, 20))
    waited = time.perf_counter() - start
    getattr(cache, "flush", lambda: None)()  # (a cache that commits each put has nothing left to flush)
    committed = time.perf_counter() - start
    cache.close()
    return 1000 * waited / n, 1000 * committed / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--busy", type=int, default=0, help="busy loops running beside (a shared machine)")
    parser.add_argument("--port", type=int, default=None, help="the local server's port (default: a free one)")
    parser.add_argument("--no-limit", action="store_true", help="leave out the run without latency")
    args = parser.parse_args()
    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for loop in busy:
        loop.start()
    try:
        bench(args)
    finally:
        for loop in busy:
            loop.kill()


def bench(args) -> None:

    from evalstudio.base.chat import Cache, ChatClient, Judge
    from evalstudio.judge.instrument import Instrument
    from evalstudio.judge.run import judge_tasks
    from evalstudio.protocols import registry

    load = os.getloadavg()[0]
    project = registry.load(ROOT / "projects.yaml").get("dialogue")
    instrument = Instrument(project)
    port = args.port or free_port()
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
            puts = cache_puts(Cache, Path(folder) / "puts.sqlite3")
            runs = [(c, "slow") for c in args.concurrency] + ([] if args.no_limit else [(max(args.concurrency), "judge")])
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
                # a plain client: the same number of requests, of the same prompts' size, nothing cached or checked
                bodies = [list(instrument.prompt({**t["data"], "context": t["data"]["context"] + " (plain)"}).messages)
                          for t in tasks]
                plain_seconds = asyncio.run(plain(judge.base_url, model, bodies, concurrency))
                rows.append({"concurrency": concurrency, "latency_ms": 200 if model == "slow" else 0,
                             "tasks": args.tasks, "answered": answered,
                             "seconds": wall, "per_second": args.tasks / wall,
                             "ideal": concurrency / LATENCY if model == "slow" else float("nan"),
                             "of_ideal": args.tasks / wall / (concurrency / LATENCY) if model == "slow" else float("nan"),
                             "plain_per_second": args.tasks / plain_seconds,
                             "of_plain": plain_seconds / wall,
                             "cpu_ms_per_task": 1000 * used / args.tasks, "rerun_seconds": rewall,
                             "rerun_asked": client2.usage["bench"].requests})
                cache.close()
    finally:
        server.kill()
    print(f"{args.tasks} dialogue tasks, server latency {LATENCY * 1000:.0f} ms; {platform.machine()}, "
          f"{len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}, {date.today()}; "
          f"{args.busy} busy loop(s) beside; load average before {load:.1f}")
    header = ["concurrency", "latency_ms", "answered", "seconds", "per_second", "ideal", "of_ideal",
              "plain_per_second", "of_plain", "cpu_ms_per_task", "rerun_seconds", "rerun_asked"]
    print(" ".join(f"{h:>15}" for h in header))
    for row in rows:
        print(" ".join(f"{row[h]:>15.2f}" if isinstance(row[h], float) else f"{row[h]:>15}" for h in header))
    print(f"cache: {puts[0]:.3f} ms waited per answer put, {puts[1]:.3f} ms per answer until committed "
          "(500 answers)")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
