"""Export of span annotations against a real Label Studio: evalstudio's export (the tidy table and the spans table,
streamed through Label Studio's export endpoint, as `evalstudio export mqm` runs it) next to Label Studio's own JSON
export download of the same project. Target (issue 67): 10,000 spans within 1.1x Label Studio's JSON export.

    python benchmarks/span_export.py [--tasks 2000] [--spans-per-task 5] [--repeats 3] [--port PORT] [--workers N]
    python benchmarks/span_export.py --offline --repeats 5     # the conversion alone, no server: CPU seconds

One Label Studio (SQLite in a temporary folder) is started for the run; an mqm project (the shipped protocol) gets
--tasks translations of examples/mqm (each its own item id), each with one annotation of --spans-per-task error
spans (a severity and a category each) made with Label Studio's import. Then, --repeats times in alternating order,
each side exports the whole project to a file; ratio = median evalstudio time / median Label Studio time. Nothing
but 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def span_tasks(tasks: int, per_task: int, admin: int) -> list[dict]:
    """The tasks to import: translations of examples/mqm, each with one annotation by `admin` of `per_task` error
    spans (a severity and a category each)."""
    records = [json.loads(line) for line in (ROOT / "examples" / "mqm" / "ted_ende.jsonl").read_text().splitlines()]
    out = []
    for number in range(tasks):
        record = records[number % len(records)]
        text = record["target"]
        words = [(text.index(w), text.index(w) + len(w)) for w in dict.fromkeys(text.split())][:per_task]
        result = []
        for k, (start, end) in enumerate(words):
            where = {"start": start, "end": end, "text": text[start:end]}
            result += [{"id": f"r{k}", "from_name": "errors", "to_name": "target", "type": "labels",
                        "value": {**where, "labels": ["Minor" if k % 3 else "Major"]}},
                       {"id": f"r{k}", "from_name": "category", "to_name": "target", "type": "choices",
                        "value": {**where, "choices": ["Fluency/Grammar"]}}]
        out.append({"data": {"item_id": f"{record['id']}#{number}", "system": record["system"],
                             "context": record["context"], "source_text": record["source"], "target": text},
                    "annotations": [{"completed_by": admin, "result": result}]})
    return out


def annotated_project(client, tasks: int, per_task: int):
    """(project, id, spans) of a new mqm project whose every task holds one annotation of `per_task` spans."""
    from evalstudio.protocols import registry

    project = registry.load(ROOT / "projects.yaml").get("mqm")
    project = project.model_copy(update={"title": f"bench spans {secrets.token_hex(3)}"})
    project_id, _ = client.ensure_project(project)
    admin = next(iter(client.users()))
    batch = span_tasks(tasks, per_task, admin)
    for start in range(0, len(batch), 500):
        client.sdk.projects.import_tasks(id=project_id, request=batch[start:start + 500])
    return project, project_id, sum(len(t["annotations"][0]["result"]) // 2 for t in batch)


def offline(tasks: int, per_task: int, repeats: int) -> None:
    """The conversion alone, no server: the same tasks shaped as Label Studio's export (ids, one annotation each),
    through `write_annotations` to both CSV files; CPU seconds (the median of `repeats`), and the files' SHA-256 so
    that two versions of the code can be compared byte for byte."""
    import hashlib

    from evalstudio.exporters.tables.tidy import write_annotations
    from evalstudio.protocols import registry

    project = registry.load(ROOT / "projects.yaml").get("mqm")
    exported = [{"id": number + 1, "meta": {}, "predictions": [], **task,
                 "annotations": [{**task["annotations"][0], "id": number + 1, "was_cancelled": False,
                                  "created_at": "2026-11-28T10:00:00.000000Z", "lead_time": 12.5,
                                  "parent_prediction": None}]}
                for number, task in enumerate(span_tasks(tasks, per_task, 1))]
    pages = [exported[start:start + 500] for start in range(0, len(exported), 500)]
    times = []
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        for _ in range(repeats):
            begin = time.process_time()
            write_annotations(iter(pages), project, {1: "admin@example.com"}, folder / "annotations.csv",
                              spans=folder / "annotations.spans.csv")
            times.append(time.process_time() - begin)
        digests = {f.name: hashlib.sha256(f.read_bytes()).hexdigest()[:16] for f in sorted(folder.iterdir())}
    print(f"offline conversion of {tasks:,} tasks ({tasks * per_task:,} spans), both CSV files: "
          f"{statistics.median(times):.3f} s of CPU (median of {repeats}); {digests}")


def ours(client, project, project_id: int, folder: Path) -> tuple[float, int]:
    """evalstudio's export: (seconds, spans written)."""
    from evalstudio.exporters.tables.tidy import write_annotations

    begin = time.perf_counter()
    users = client.users()
    _, _, spans = write_annotations(client.full_task_pages(project_id, export_endpoint=True), project, users,
                                    folder / "annotations.csv", spans=folder / "annotations.spans.csv")
    return time.perf_counter() - begin, spans


def theirs(client, project_id: int, folder: Path) -> tuple[float, int]:
    """Label Studio's own JSON export download: (seconds, bytes)."""
    begin = time.perf_counter()
    client.download_export(project_id, folder / "export.json")
    return time.perf_counter() - begin, (folder / "export.json").stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--spans-per-task", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--port", type=int, default=None, help="Label Studio's port (default: a free one)")
    parser.add_argument("--workers", type=int, default=1,
                        help="serve Label Studio by this many gunicorn workers (default: `label-studio start`, one process)")
    parser.add_argument("--offline", action="store_true", help="time the conversion alone (no server), CPU seconds")
    args = parser.parse_args()
    if args.offline:
        return offline(args.tasks, args.spans_per_task, args.repeats)
    from evalstudio.labelstudio.client import Client
    from evalstudio.labelstudio.server import LocalServer
    from tests.conftest import free_port

    import label_studio

    print(f"{date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}, Python {platform.python_version()}, Label Studio {label_studio.__version__}, "
          + (f"{args.workers} gunicorn workers" if args.workers > 1 else "label-studio start (one process)"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with LocalServer(tmp / "ls", port=args.port or free_port(), workers=args.workers) as server:
            client = Client(server.settings(), timeout=600)
            project, project_id, spans = annotated_project(client, args.tasks, args.spans_per_task)
            runs = {"evalstudio": [], "label-studio": []}
            for repeat in range(args.repeats):
                for side in (("evalstudio", "label-studio") if repeat % 2 == 0 else ("label-studio", "evalstudio")):
                    folder = tmp / f"{side}-{repeat}"
                    folder.mkdir()
                    seconds, count = ours(client, project, project_id, folder) if side == "evalstudio" else \
                        theirs(client, project_id, folder)
                    if side == "evalstudio" and count != spans:
                        raise RuntimeError(f"evalstudio wrote {count} spans of {spans}")
                    runs[side].append(seconds)
    mine, theirs_ = statistics.median(runs["evalstudio"]), statistics.median(runs["label-studio"])
    print("| tasks | spans | evalstudio export, tidy + spans CSV (s) | Label Studio JSON export download (s) | ratio "
          "| ratio per run | target |")
    print("|---|---|---|---|---|---|---|")
    per_run = ", ".join(f"{a / b:.2f}" for a, b in zip(runs["evalstudio"], runs["label-studio"]))
    print(f"| {args.tasks:,} | {spans:,} | {mine:.2f} | {theirs_:.2f} | {mine / theirs_:.2f} | {per_run} | "
          f"within 1.1x: {'met' if mine / theirs_ <= 1.1 else 'MISSED'} |")


if __name__ == "__main__":
    main()
