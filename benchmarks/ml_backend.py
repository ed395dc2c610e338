"""Latency and throughput of the ML backend's `stored` predictor under concurrent clients on loopback.

    python benchmarks/ml_backend.py [--clients 20] [--seconds 10] [--server gunicorn|dev] [--client wrk|python]

Starts `evalstudio ml-backend` on a free loopback port, sends each client's bounded number of /predict
requests (one Sotopia task each, ~20 KB, as Label Studio sends them while annotators open tasks), prints the
table and stops the backend. Each client first sends one warm-up request (opening its keep-alive connection),
which is not counted. The load comes from `wrk` (Debian package wrk: a C load generator, so the clients
do not eat the server's CPU; bounded by --seconds) or, without it, from Python threads (bounded by
--requests per client; their own CPU use inflates the latencies). Nothing but 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=50, help="requests per client (python client)")
    parser.add_argument("--seconds", type=int, default=10, help="duration (wrk client)")
    parser.add_argument("--client", choices=["wrk", "python"], default="wrk" if shutil.which("wrk") else "python")
    parser.add_argument("--server", choices=["dev", "gunicorn"], default="gunicorn",
                        help="`evalstudio ml-backend` as shipped (gunicorn, 2 workers x 8 threads) or with --dev (Flask's server)")
    args = parser.parse_args()

    from evalstudio import importers
    from evalstudio.labelstudio.server import wait_healthy
    from evalstudio.protocols import registry
    from evalstudio.tasks.scanning import iter_tasks, split_task

    project = registry.load(ROOT / "projects.yaml").get("sotopia")
    tasks = [d for _, d in iter_tasks(project, importers.get("sotopia"), [ROOT / "examples/sotopia/episodes.jsonl"])]
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "EVALSTUDIO_PROJECTS": str(ROOT / "projects.yaml")}
        env["EVALSTUDIO_MODEL_DIR"] = tmp
        env["EVALSTUDIO_ML_BASIC_AUTH"] = "bench:" + secrets.token_urlsafe(16)  # requests carry it, as Label Studio's do
        auth = "Basic " + base64.b64encode(env["EVALSTUDIO_ML_BASIC_AUTH"].encode()).decode()
        command = [sys.executable, "-m", "evalstudio.cli", "ml-backend", "--port", str(port), "--model-dir", tmp]
        if args.server == "dev":
            command.append("--dev")
        backend = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, 60, backend, "the ML backend")
            bodies = [json.dumps({"tasks": [{"id": i, **split_task(project, t)}], "label_config": project.label_config, "project": "1.0"})
                      for i, t in enumerate(tasks)]
            if args.client == "wrk":
                row = run_wrk(url, bodies[0], args.clients, args.seconds, tmp, auth)
            else:
                row = run_python(url, bodies, args.clients, args.requests, auth)
        finally:
            backend.terminate()
            backend.wait(timeout=20)

    print(f"{'predictor':<9} {'server':<9} {'client':<7} {'clients':>7} {'requests':>8} {'errors':>6} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'max ms':>7} {'req/s':>7}")
    print(f"{'stored':<9} {args.server:<9} {args.client:<7} {args.clients:>7} {row['requests']:>8} {row['errors']:>6} "
          f"{row['p50']:>7.1f} {row['p99']:>7.1f} {row['max']:>7.1f} {row['rps']:>7.0f}")


def run_wrk(url: str, body: str, clients: int, seconds: int, tmp: str, auth: str) -> dict:
    body_file, script = Path(tmp) / "body.json", Path(tmp) / "post.lua"
    body_file.write_text(body, encoding="utf-8")
    script.write_text(f'local f = io.open("{body_file}", "rb"); wrk.body = f:read("*a"); f:close()\n'
                      'wrk.method = "POST"; wrk.headers["Content-Type"] = "application/json"\n'
                      f'wrk.headers["Authorization"] = "{auth}"\n')
    with httpx.Client() as http:  # warm-up
        http.post(f"{url}/predict", content=body, headers={"Content-Type": "application/json", "Authorization": auth})
    out = subprocess.run(["wrk", "-t2", f"-c{clients}", f"-d{seconds}s", "-s", str(script), "--latency", f"{url}/predict"],
                         capture_output=True, text=True, timeout=seconds + 60).stdout

    def ms(label):
        value, unit = re.search(rf"{label}\s+([\d.]+)(us|ms|s)", out).groups()
        return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]

    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"requests": int(re.search(r"(\d+) requests in", out).group(1)), "errors": int(non_2xx.group(1)) if non_2xx else 0,
            "p50": ms("50%"), "p99": ms("99%"), "max": _max_ms(out),
            "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}


def _max_ms(out: str) -> float:
    value, unit = re.search(r"Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", out).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def run_python(url: str, bodies: list[str], clients: int, requests: int, auth: str) -> dict:
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    headers = {"Content-Type": "application/json", "Authorization": auth}

    def client(k: int):
        with httpx.Client(timeout=30) as http:
            http.post(f"{url}/predict", content=bodies[k % len(bodies)], headers=headers)  # warm-up
            for i in range(requests):
                start = time.perf_counter()
                response = http.post(f"{url}/predict", content=bodies[(k + i) % len(bodies)], headers=headers)
                elapsed = time.perf_counter() - start
                ok = response.status_code == 200 and response.json()["results"][0]
                with lock:
                    latencies.append(elapsed)
                    errors[0] += 0 if ok else 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    wall = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall
    ms = np.array(latencies) * 1000
    return {"requests": len(ms), "errors": errors[0], "p50": float(np.percentile(ms, 50)),
            "p99": float(np.percentile(ms, 99)), "max": float(ms.max()), "rps": len(ms) / wall}


if __name__ == "__main__":
    main()
