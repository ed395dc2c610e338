"""Import and export throughput against a real Label Studio: evalstudio next to Label Studio's own API.

    python benchmarks/import.py [--tasks 10000,100000] [--batch-size 500] [--database-url postgresql://...]

For each size it writes a file of real dialogue samples (each record its own id), pre-builds the exact task
JSON evalstudio would send, and then, in fresh projects on one Label Studio started for the run (SQLite in a
temp dir unless --database-url is given):

  raw         the pre-built task JSON posted with the SDK's `projects.import_tasks`, same batch size
  raw2        (--concurrent) the same, two batches in flight at a time: whether Label Studio takes concurrent
              batches faster (issue 29 asks it of PostgreSQL before evalstudio would adopt it)
  evalstudio2 (--concurrent) `import_files(in_flight=2)` into the same project in random order (`--in-flight 2`)
  evalstudio  `import_files` from the native file: validate everything, convert, look up the project and
              the ids it holds, send batches
  predictions `import_files` into a project with `prefill: true` (stored predictor): every task goes in with
              its model ratings as its Label Studio prediction, in the same requests
  backend     (--prefill-sizes only) the way before: `import_files` without predictions, then the ML backend
              (`evalstudio ml-backend`, started for the run) asked for them (`evalstudio prefill`), timed together

Each side imports into its own empty project, created before the clock starts.

Both run in their own process, one after the other, in alternating order per repeat, and report wall time
and peak memory (max RSS). overhead = evalstudio time / raw time - 1 (target: below 10%).

The export half imports tasks that already carry two annotations each, then compares evalstudio's paged,
streamed CSV export (`evalstudio export`) with Label Studio's own JSON export download of the same project
(`--repeats` runs of each, alternating; export ratio = median evalstudio time / median Label Studio time, and the
ratio of each pair of runs). Peak memory (the highest of the runs) at two sizes shows whether memory stays flat.
The last column is Label Studio's fixed cost per export request (a request for one task, median of 20), which
evalstudio pays once per chunk of 500 tasks. Nothing but 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def peak_mb() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the
    parent across fork+exec, so a child of a big parent would report the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(kind: str, url: str, key: str, path: str, batch_size: int) -> dict:
    """One measured run in this process (so its peak memory is its own)."""
    from evalstudio import importers
    from evalstudio.exporters.tables.tidy import write_annotations
    from evalstudio.labelstudio.client import Client
    from evalstudio.labelstudio.connection import Settings
    from evalstudio.protocols import registry
    from evalstudio.tasks.importing import import_files

    client = Client(Settings(url, key), timeout=600)
    project = registry.load(ROOT / "projects.yaml").get("dialogue")
    project = project.model_copy(update={"title": f"bench {kind} {secrets.token_hex(3)}",
                                         "prefill": kind == "predictions"})
    if kind == "evalstudio2":  # two batches in flight: only for a project in random order
        project = project.model_copy(update={"order": "random"})
    if kind in ("raw", "raw2", "evalstudio", "evalstudio2", "predictions", "backend"):  # each into an empty project
        project_id, _ = client.ensure_project(project)
    start = time.perf_counter()
    if kind == "raw":
        tasks = json.loads(Path(path).read_text(encoding="utf-8"))
        for i in range(0, len(tasks), batch_size):
            client.sdk.projects.import_tasks(id=project_id, request=tasks[i:i + batch_size])
        count = len(tasks)
    elif kind == "raw2":
        from concurrent.futures import ThreadPoolExecutor

        tasks = json.loads(Path(path).read_text(encoding="utf-8"))
        batches = [tasks[i:i + batch_size] for i in range(0, len(tasks), batch_size)]
        with ThreadPoolExecutor(2) as pool:  # two batches in flight (the SDK's httpx client is thread-safe)
            list(pool.map(lambda batch: client.sdk.projects.import_tasks(id=project_id, request=batch), batches))
        count = len(tasks)
    elif kind in ("evalstudio", "evalstudio2", "predictions"):
        report = import_files(project, importers.get("dialogue"), [Path(path)], client, batch_size=batch_size,
                              in_flight=2 if kind == "evalstudio2" else 1)
        count = report.created
        if kind == "predictions" and report.predicted != count:
            raise RuntimeError(f"{report.predicted} of {count} tasks went in with a prediction")
    elif kind == "backend":
        import os

        report = import_files(project, importers.get("dialogue"), [Path(path)], client, batch_size=batch_size)
        client.connect_ml_backend(project_id, os.environ["BENCH_ML_URL"], os.environ["BENCH_ML_AUTH"])
        predicted, count = client.prefill(project_id)
        if predicted != count or count != report.created:
            raise RuntimeError(f"the backend predicted {predicted} of {count} tasks")
    elif kind == "export":
        project_id = int(path)
        users = client.users()
        count, _, _ = write_annotations(client.full_task_pages(project_id, export_endpoint=True), project, users,
                                      Path(tempfile.mktemp(suffix=".csv")))
    elif kind == "export-probe":  # Label Studio's fixed cost of one export request: 20 requests for one task each
        project_id = int(path)
        first, *_ = client._id_span(project_id)
        times = []
        for _ in range(20):
            begin = time.perf_counter()
            client._export_tasks(project_id, client._export_bodies(project_id, [first], "export"))
            times.append(time.perf_counter() - begin)
        return {"seconds": statistics.median(times), "count": 1, "peak_mb": peak_mb()}
    elif kind == "ls-export":
        project_id = int(path)
        out = Path(tempfile.mktemp(suffix=".json"))
        client.download_export(project_id, out)
        count = out.stat().st_size
    else:
        raise ValueError(f"unknown worker {kind!r}")
    return {"seconds": time.perf_counter() - start, "count": count, "peak_mb": peak_mb()}


def measure(kind: str, server, path, batch_size: int, env: dict | None = None) -> dict:
    import os

    command = [sys.executable, __file__, "--worker", kind, server.url, server.credentials().api_key, str(path), str(batch_size)]
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if out.returncode:
        raise RuntimeError(f"{kind} run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def annotated_project(server, data_file: Path, batch_size: int) -> tuple[int, int]:
    """A project whose tasks each carry two annotations (made with Label Studio's import). (id, annotations)"""
    import numpy as np

    from evalstudio import importers
    from evalstudio.labelstudio.client import Client
    from evalstudio.protocols import registry
    from evalstudio.tasks.scanning import iter_tasks, split_task
    from evalstudio.values.results import region

    client = Client(server.settings(), timeout=600)
    project = registry.load(ROOT / "projects.yaml").get("dialogue")
    project = project.model_copy(update={"title": f"bench export {secrets.token_hex(3)}"})
    project_id, _ = client.ensure_project(project)
    admin = next(iter(client.users()))
    rng, li, batch, annotations = np.random.default_rng(0), project.interface, [], 0
    for _, data in iter_tasks(project, importers.get("dialogue"), [data_file]):
        anns = [{"completed_by": admin, "result": [region(li, c, int(rng.integers(1, 6))) for c in project.criteria]}
                for _ in range(2)]
        batch.append({**split_task(project, data), "annotations": anns})
        annotations += 2
        if len(batch) == batch_size:
            client.sdk.projects.import_tasks(id=project_id, request=batch)
            batch = []
    if batch:
        client.sdk.projects.import_tasks(id=project_id, request=batch)
    return project_id, annotations


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    import os

    import label_studio

    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"Label Studio {label_studio.__version__}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="10000,100000", help="comma-separated sizes")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=1, help="runs per side and size (median reported)")
    parser.add_argument("--export-tasks", default="5000,50000",
                        help="comma-separated task counts for the export half (two annotations each); empty to skip")
    parser.add_argument("--prefill-sizes", default="10000",
                        help="sizes (of --tasks) at which import + prefill through the ML backend is measured too")
    parser.add_argument("--database-url", help="run Label Studio on this PostgreSQL database instead of SQLite")
    parser.add_argument("--throwaway-postgres", action="store_true",
                        help="run Label Studio on a PostgreSQL cluster started for the run (Debian's postgresql, as the "
                             "test suite starts it)")
    parser.add_argument("--concurrent", action="store_true",
                        help="also measure the raw import with two batches in flight (raw2)")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, url, key, path, batch_size = args.worker
        print(json.dumps(worker(kind, url, key, path, int(batch_size))))
        return
    postgres = None
    if args.throwaway_postgres:
        from tests.postgres import TempPostgres

        postgres = TempPostgres(_free_port()).start()
        args.database_url = postgres.create_database("bench")
    try:
        _run(args)
    finally:
        if postgres is not None:
            postgres.stop()


def _run(args) -> None:
    from evalstudio import importers
    from evalstudio.labelstudio.server import LocalServer
    from evalstudio.protocols import registry
    from evalstudio.tasks.scanning import iter_tasks, split_task
    from tests.largefile import write_dialogue_file

    sizes = [int(s) for s in args.tasks.split(",") if s]
    prefill_sizes = {int(s) for s in args.prefill_sizes.split(",") if s}
    export_sizes = [int(s) for s in args.export_tasks.split(",") if s]
    project = registry.load(ROOT / "projects.yaml").get("dialogue")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        database = "PostgreSQL" if args.database_url else "SQLite"
        print(f"starting Label Studio ({database}) ...", file=sys.stderr)
        with LocalServer(tmp / "ls", port=_free_port(), database_url=args.database_url) as server:
            from evalstudio.cli.servers import _start_ml_backend, _stop

            backend = _start_ml_backend(server, _free_port(), None) if args.prefill_sizes else None
            backend_env = {"BENCH_ML_URL": backend.url, "BENCH_ML_AUTH": backend.auth} if backend else {}
            rows = []
            for size in sizes:
                native = tmp / f"tasks-{size}.jsonl"
                write_dialogue_file(native, size)
                prebuilt = tmp / f"tasks-{size}.json"
                with open(prebuilt, "w", encoding="utf-8") as f:  # streamed: this process stays small
                    for k, (_, data) in enumerate(iter_tasks(project, importers.get("dialogue"), [native])):
                        f.write(("[" if k == 0 else ",\n") + json.dumps(split_task(project, data)))
                    f.write("]")
                kinds = (["raw", "evalstudio", "predictions"] + (["raw2", "evalstudio2"] if args.concurrent else [])
                         + (["backend"] if size in prefill_sizes else []))
                runs = {kind: [] for kind in kinds}
                for repeat in range(args.repeats):
                    order = kinds if repeat % 2 == 0 else kinds[::-1]  # the sides alternate
                    for kind in order:
                        print(f"{size} tasks: {kind} import (run {repeat + 1}) ...", file=sys.stderr)
                        result = measure(kind, server, prebuilt if kind.startswith("raw") else native, args.batch_size,
                                         backend_env)
                        if result["count"] != size:
                            raise RuntimeError(f"{kind} imported {result['count']} of {size} tasks")
                        runs[kind].append(result)
                rows.append((size, runs))
            export_rows = []
            for size in export_sizes:
                native = tmp / f"export-{size}.jsonl"
                write_dialogue_file(native, size)
                print(f"{size} tasks x 2 annotations: preparing ...", file=sys.stderr)
                project_id, annotations = annotated_project(server, native, args.batch_size)
                runs = {"export": [], "ls-export": []}
                for repeat in range(args.repeats):  # the sides alternate, as for the import
                    for kind in (["export", "ls-export"] if repeat % 2 == 0 else ["ls-export", "export"]):
                        print(f"{size} tasks x 2 annotations: {kind} (run {repeat + 1}) ...", file=sys.stderr)
                        result = measure(kind, server, project_id, args.batch_size)
                        if kind == "export" and result["count"] != annotations * len(project.criteria):
                            raise RuntimeError(f"export wrote {result['count']} rows, expected "
                                               f"{annotations * len(project.criteria)}")
                        runs[kind].append(result)
                probe = measure("export-probe", server, project_id, args.batch_size)
                export_rows.append((size, annotations, runs["export"], runs["ls-export"], probe))
            if backend:
                _stop(backend, None)

    med = lambda runs, key: statistics.median(r[key] for r in runs)
    print(f"\nImport into Label Studio ({database}), batches of {args.batch_size}, median of {args.repeats} run(s)")
    print(f"machine: {machine()}\n")
    print("| tasks | (a) Label Studio raw import | (b) evalstudio import | (c) evalstudio import with predictions "
          "| (d) import + prefill through the ML backend | peak memory (a) / (b) / (c) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size, runs in rows:
        raw = med(runs["raw"], "seconds")
        cell = lambda kind: (f"{med(runs[kind], 'seconds'):.1f} s ({100 * (med(runs[kind], 'seconds') / raw - 1):+.1f}%)"
                             if runs.get(kind) else "not measured")
        ratio = (f", {med(runs['backend'], 'seconds') / med(runs['predictions'], 'seconds'):.1f}x (c)"
                 if runs.get("backend") else "")
        print(f"| {size:,} | {raw:.1f} s ({size / raw:,.0f} tasks/s) | {cell('evalstudio')} | {cell('predictions')} "
              f"| {cell('backend')}{ratio} | {med(runs['raw'], 'peak_mb'):.0f} / {med(runs['evalstudio'], 'peak_mb'):.0f}"
              f" / {med(runs['predictions'], 'peak_mb'):.0f} MB |")
    print("\n(percentages: over (a), the raw import of the same tasks without predictions)")
    if any(runs.get("raw2") for _, runs in rows):
        print("\n| tasks | (a) raw import, one batch at a time | (e) raw import, two batches in flight "
              "| (b) evalstudio import | (f) evalstudio import, two batches in flight (--in-flight 2) |")
        print("|---:|---:|---:|---:|---:|")
        for size, runs in rows:
            raw, two = med(runs["raw"], "seconds"), med(runs["raw2"], "seconds")
            ours, ours2 = med(runs["evalstudio"], "seconds"), med(runs["evalstudio2"], "seconds")
            print(f"| {size:,} | {raw:.1f} s | {two:.1f} s ({100 * (two / raw - 1):+.1f}%) | {ours:.1f} s "
                  f"({100 * (ours / raw - 1):+.1f}%) | {ours2:.1f} s ({100 * (ours2 / raw - 1):+.1f}%) |")
    if export_rows:
        print(f"\nExport of annotated tasks (two annotations each, {len(project.criteria)} criteria), median of "
              f"{args.repeats} run(s)\n")
        print("| tasks | annotations | evalstudio streamed CSV export | peak memory | Label Studio JSON export download "
              "| export ratio | ratio per run | one export request for one task (median of 20) |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size, annotations, ours, theirs, probe in export_rows:
            time_ours, time_theirs = med(ours, "seconds"), med(theirs, "seconds")
            per_run = ", ".join(f"{a['seconds'] / b['seconds']:.2f}" for a, b in zip(ours, theirs))
            print(f"| {size:,} | {annotations:,} | {time_ours:.1f} s ({ours[0]['count'] / time_ours:,.0f} rows/s) "
                  f"| {max(r['peak_mb'] for r in ours):.0f} MB | {time_theirs:.1f} s | {time_ours / time_theirs:.2f} "
                  f"| {per_run} | {1000 * probe['seconds']:.0f} ms |")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    main()
