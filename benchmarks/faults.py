"""The ledger under faults, as a campaign (issue 64): a crowd study runs for --minutes while a seeded scheduler
breaks what it stands on, then the run checks what must hold and prints it.

Two gateway processes serve one participants folder whose ledger is in PostgreSQL (the cluster Label Studio keeps its
data in, as `evalstudio server --database-url` sets it up). The second runs on a second host: a network namespace
with its own links to this machine (tests/partition.py; run as root), its connections to the ledger and to Label
Studio over a link this script takes down to cut it off (packets dropped: nothing is refused, nothing arrives),
while its participants still reach it. Where namespaces cannot be made (not root), the second gateway runs beside
the first and its link is a TCP relay that stops forwarding (the output says which). Participants arrive all along (through the study link, and a
few made by `participants add`), each through one of the two gateways, and answer tasks at a few seconds each,
changing some answers later. Meanwhile the scheduler (--seed) freezes Label Studio (SIGSTOP, then SIGCONT) for 30-180
s, kills a gateway or the process holding the sync lease with SIGKILL and starts it again, imports new tasks,
closes participants' accounts (`participants close`), and cuts the second gateway's link for 30-120 s. (On runs
shorter than 20 minutes the pauses are scaled down, to at least 15 s.) The study starts with 5 tasks per minute of
the run (at least 30), overlap 2, and each import adds 2 per minute (at least 15).

At the end, once Label Studio holds everything (the gateways' sync writers drain the ledger), it checks:
- every acknowledged answer is in Label Studio exactly once, with the participant's latest value and the ledger's
  lead_time;
- no participant was told "done" while the study held a task for them (a task imported before they asked, that
  they had not been served, and that has fewer than its overlap of answers from others at the end);
- no task has more than its overlap of answers (in Label Studio, and in the ledger);
- no account is missing (every participant of the ledger has a Label Studio account);
- `status` and `export`, once drained, equal the ledger (the same annotations; no warning of anything lacking).

    python benchmarks/faults.py [--minutes 20] [--seed 1] [--ports 18100-18199]

Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from crowd_pace import Gateway, dialogue_study  # noqa: E402  (beside this file)

from evalstudio import importers  # noqa: E402
from evalstudio.crowd import ledger, participants  # noqa: E402
from evalstudio.labelstudio.client import Client  # noqa: E402
from evalstudio.labelstudio.server import LocalServer  # noqa: E402
from evalstudio.tasks.importing import import_files  # noqa: E402
from tests import partition  # noqa: E402
from tests.postgres import TempPostgres  # noqa: E402

OVERLAP = 2
GIVE_UP = 600  # a participant who has had no answer for this long leaves (counted)


class Ports:
    """Ports from the operator's range, in turn."""

    def __init__(self, spec: str):
        self.auto = spec == "auto"
        low, high = (0, -1) if self.auto else map(int, spec.split("-"))
        self._next, self._high = low, high

    def take(self) -> int:
        import socket

        if self.auto:  # (the test suite: any free loopback port)
            from tests.conftest import free_port

            return free_port()

        while self._next <= self._high:
            port = self._next
            self._next += 1
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                    return port
                except OSError:
                    continue
        raise SystemExit("--ports: no free port left in the range")


class Campaign:
    """The participants, the scheduler and what they saw."""

    def __init__(self, args, urls: list[str], join_key: str, links: dict[str, str], result_of, book):
        self.args, self.urls, self.join_key, self.links, self.result_of, self.book = (
            args, urls, join_key, links, result_of, book)
        self.rng = random.Random(args.seed)
        self.latest: dict[tuple[str, str], int] = {}  # (participant, ref) -> the rating last acknowledged
        self.finished: list[tuple[str, float]] = []  # (participant, when they asked) told "no more tasks"
        self.closed: set[str] = set()
        self.errors: Counter = Counter()
        self.events: list[str] = []
        self.imports: list[tuple[float, set[int]]] = []  # (when the import had ended, the task ids it added)
        self.left = 0
        self.stop_arrivals = False

    async def ask(self, web, method: str, path: str, side: str, **kwargs):
        first = time.monotonic()
        while True:
            try:
                answer = await web.request(method, path, **kwargs)
                if answer.status_code < 500:
                    return answer
                body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
                self.errors[f"{side} {path.split('/')[2] if path.startswith('/api/') else 'sign-in link'}: HTTP "
                            f"{answer.status_code}{' (wait)' if body.get('wait') else ''}"] += 1
            except httpx.HTTPError as e:
                self.errors[f"{side}: {type(e).__name__}"] += 1
            if time.monotonic() - first > GIVE_UP:
                return None
            await asyncio.sleep(2.0)

    async def participant(self, pid: str, rng: random.Random) -> None:
        side = rng.randrange(2)
        name = f"gateway {side + 1}"
        async with httpx.AsyncClient(base_url=self.urls[side], timeout=60, headers={"X-Evalstudio": "1"}) as web:
            if pid in self.links:
                signed = await self.ask(web, "GET", self.links[pid], name)
                if signed is None or signed.status_code != 303:
                    self.errors[f"{name}: sign-in refused"] += 1
                    return
            else:
                joined = await self.ask(web, "POST", "/api/join", name, json={"key": self.join_key, "participant": pid})
                if joined is None or joined.status_code != 200:
                    self.errors[f"{name}: sign-up refused (HTTP {joined.status_code if joined else '-'}: "
                                f"{joined.text[:60] if joined else 'no answer'})"] += 1
                    return
            wanted = rng.randint(3, 12)
            done: list[str] = []
            while len(done) < wanted:
                asked = time.time()
                answer = await self.ask(web, "GET", "/api/next/dialogue", name)
                if answer is None:
                    self.left += 1
                    return
                if answer.status_code in (401, 403):  # closed (participants close), or signed out
                    self.errors[f"{name} next: HTTP {answer.status_code}"] += 1
                    return
                task = answer.json()
                if "finished" in task:
                    if "no more tasks" in task["finished"] or "every task" in task["finished"]:
                        self.finished.append((pid, asked))
                    return
                if "ref" not in task:
                    self.errors[f"{name} next: {str(task.get('error', task))[:60]}"] += 1
                    await asyncio.sleep(2.0)
                    continue
                await asyncio.sleep(rng.uniform(*self.args.pace))
                rating = rng.randint(1, 5)
                saved = await self.ask(web, "POST", f"/api/submit/{task['ref']}", name,
                                       json={"result": self.result_of(rating)})
                if saved is None:
                    self.left += 1
                    return
                if saved.json().get("ok"):
                    self.latest[(pid, task["ref"])] = rating
                    done.append(task["ref"])
                if done and rng.random() < 0.15:  # a change of an earlier answer
                    ref = rng.choice(done)
                    rating = rng.randint(1, 5)
                    changed = await self.ask(web, "POST", f"/api/submit/{ref}", name,
                                             json={"result": self.result_of(rating)})
                    if changed is not None and changed.json().get("ok"):
                        self.latest[(pid, ref)] = rating

    async def arrivals(self, ids: list[str]) -> None:
        work = []
        for pid in ids:
            if self.stop_arrivals:
                break
            work.append(asyncio.create_task(self.participant(pid, random.Random(f"{self.args.seed}:{pid}"))))
            await asyncio.sleep(self.rng.expovariate(1 / self.args.gap))
        await asyncio.gather(*work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="how long participants arrive and faults happen")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ports", default="18100-18199", help="the ports this run may use, LOW-HIGH (auto: any)")
    parser.add_argument("--pace", type=float, nargs=2, default=(2.0, 10.0), help="seconds on a task: from, to")
    parser.add_argument("--gap", type=float, default=6.0, help="mean seconds between two participants' arrivals")
    args = parser.parse_args()
    ok = run(args)
    sys.exit(0 if ok else 1)


def run(args) -> bool:
    """The campaign; prints what happened and the invariants; True when every invariant holds."""
    ports = Ports(args.ports)
    rng = random.Random(args.seed)
    length = args.minutes * 60
    first_tasks, more_tasks = max(30, round(5 * args.minutes)), max(15, round(2 * args.minutes))
    scale = min(1.0, args.minutes / 20)
    with tempfile.TemporaryDirectory(prefix="evalstudio-faults-") as tmp:
        tmp = Path(tmp)
        postgres = TempPostgres(ports.take()).start()
        server = gateways = links = host = None
        try:
            ledger_url = postgres.create_database("ledger")
            os.environ[ledger.URL_ENV] = ledger_url
            server = LocalServer(tmp / "ls", port=ports.take(), database_url=postgres.create_database("ls"),
                                 workers=2).start(timeout=900)
            client = Client(server.settings())
            projects_file, project, items = dialogue_study(tmp, {"title": "fault campaign", "annotators_per_task":
                                                                 OVERLAP, "order": "random"}, None, first_tasks)
            project_id = import_files(project, importers.get("dialogue"), [items], client).project_id
            folder = tmp / ".evalstudio" / "participants"
            added = [f"ADD{i}" for i in range(8)]
            participants.add(client, added, folder)
            accounts = participants.load_accounts(folder)
            env = {"PATH": "/usr/bin:/bin", "LABEL_STUDIO_URL": server.url, "EVALSTUDIO_PROJECTS": str(projects_file),
                   "LABEL_STUDIO_API_KEY": server.credentials().api_key, ledger.URL_ENV: ledger_url}
            why = partition.available()
            if why is None:  # a second host: a network namespace, cut off by taking its link down
                host = partition.Host()
                far = {**env, "LABEL_STUDIO_URL": f"http://{host.back_machine}:{host.forward(server.port)}",
                       ledger.URL_ENV: ledger_url.replace("@127.0.0.1:", f"@{host.back_machine}:")}
                host.forward(postgres.port)
                second = Gateway(far, folder, 1, host.command(), host.front_host)
                links = (host,)
                print(f"second host: network namespace {host.name} (veth links; a cut takes its link to the ledger "
                      "and Label Studio down)", flush=True)
            else:  # the fallback: a relay that stops forwarding
                pg_link = partition.Forwarder(("127.0.0.1", ports.take()), ("127.0.0.1", postgres.port))
                ls_link = partition.Forwarder(("127.0.0.1", ports.take()), ("127.0.0.1", server.port))
                links = (pg_link, ls_link)
                far = {**env, "LABEL_STUDIO_URL": f"http://127.0.0.1:{ls_link.port}",
                       ledger.URL_ENV: ledger_url.replace(f":{postgres.port}/", f":{pg_link.port}/")}
                second = Gateway(far, folder, 1)
                print(f"second host: none ({why}); the second gateway runs on this machine behind a TCP relay that "
                      "stops forwarding (held, not dropped)", flush=True)
            gateways = [Gateway(env, folder, 1), second]
            for g in gateways:
                g.port = ports.take()
                g.url = f"http://{g.host}:{g.port}"
                g.start()
            book = ledger.open_ledger(folder)

            def result_of(rating: int) -> list[dict]:
                return [{"from_name": c.name, "to_name": c.to_name[0], "type": "rating", "value": {"rating": rating}}
                        for c in project.interface.controls]

            campaign = Campaign(args, [g.url for g in gateways], book.setting("join_key"),
                                {pid: f"/s/{pid}/{accounts[pid].access}" for pid in added}, result_of, book)
            campaign.imports.append((time.time(), {int(t) for t in client.task_ids(project_id).values()}))
            ids = [f"P{i}" for i in range(int(length / args.gap * 1.5) + 10)]
            for i, pid in enumerate(added):  # a few of `participants add` among those of the study link
                ids.insert(3 + 5 * i, pid)
            started = time.time()
            imported = [first_tasks]

            def note(text: str) -> None:
                campaign.events.append(f"{time.time() - started:6.0f} s  {text}")
                print(campaign.events[-1], flush=True)

            async def restart(g: Gateway) -> None:
                await asyncio.get_running_loop().run_in_executor(None, g.start)

            async def freeze() -> None:
                seconds = max(15.0, rng.uniform(30, 180) * scale)
                os.killpg(server.process.pid, signal.SIGSTOP)
                note(f"Label Studio frozen (SIGSTOP) for {seconds:.0f} s")
                try:
                    await asyncio.sleep(seconds)
                finally:
                    os.killpg(server.process.pid, signal.SIGCONT)

            async def kill_gateway() -> None:
                which = rng.randrange(2)
                gateways[which].kill()
                note(f"gateway {which + 1} killed (SIGKILL)")
                await restart(gateways[which])
                note(f"gateway {which + 1} serving again")

            async def kill_holder() -> None:
                holder = (book.setting("sync-lease:dialogue") or "").rpartition("@")[0]
                pid = int(holder.rpartition(":")[2]) if holder.rpartition(":")[2].isdigit() else None
                which = next((i for i, g in enumerate(gateways) if g.process and g.process.pid == pid), None)
                if which is None:
                    note(f"sync lease held by {holder or 'nobody'}: not one of the gateways; a gateway killed instead")
                    return await kill_gateway()
                gateways[which].kill()
                note(f"gateway {which + 1}, holding the sync lease, killed (SIGKILL)")
                await restart(gateways[which])
                note(f"gateway {which + 1} serving again; lease now {book.setting('sync-lease:dialogue')}")

            async def import_more() -> None:
                first = imported[0]
                path = tmp / f"more-{first}.jsonl"
                path.write_text("".join(json.dumps({"id": f"b{i}", "context": f"A: question number {i}?",
                                                    "responses": [{"system": "s", "text": f"answer {i}"}]}) + "\n"
                                        for i in range(first, first + more_tasks)))
                before = set(client.task_ids(project_id).values())
                await asyncio.get_running_loop().run_in_executor(
                    None, lambda: import_files(project, importers.get("dialogue"), [path], client))
                imported[0] += more_tasks
                new = set(client.task_ids(project_id).values()) - before
                campaign.imports.append((time.time(), {int(t) for t in new}))
                note(f"{len(new)} tasks imported")

            async def close_one() -> None:
                started_ones = [p for p in added if p not in campaign.closed and book.answered_count(p, "dialogue")]
                if not started_ones:
                    note("no participant of `participants add` to close yet")
                    return
                pid = rng.choice(started_ones)
                await asyncio.get_running_loop().run_in_executor(None, lambda: participants.close(client, [pid], folder))
                campaign.closed.add(pid)
                note(f"participant {pid} closed (participants close)")

            async def cut() -> None:
                seconds = max(15.0, rng.uniform(30, 120) * scale)
                for link in links:
                    link.cut(True)
                note(f"gateway 2's host cut off from the ledger and Label Studio for {seconds:.0f} s")
                await asyncio.sleep(seconds)
                for link in links:
                    link.cut(False)

            kinds = [freeze, kill_gateway, kill_holder, import_more, close_one, cut]

            async def scheduler() -> None:
                order = kinds[:]  # every kind at least once, then drawn
                rng.shuffle(order)
                count = max(len(kinds), int(args.minutes * 1.2))
                order += [rng.choice(kinds) for _ in range(count - len(order))]
                spacing = length / (len(order) + 1)
                for fault in order:
                    await asyncio.sleep(rng.uniform(0.5, 1.0) * spacing)
                    await fault()
                campaign.stop_arrivals = True

            async def everything() -> None:
                stopper = asyncio.create_task(scheduler())
                crowd = asyncio.create_task(campaign.arrivals(ids))
                await stopper
                await crowd

            asyncio.run(everything())
            duration = time.time() - started
            note("participants done; draining")
            drained = book.wait_synced(1800)
            note(f"Label Studio holds the ledger (behind: {drained.behind})")
            checks = invariants(campaign, book, client, project_id, tmp, env, folder)
        finally:
            for g in gateways or []:
                g.stop()
            if host is not None:
                host.remove()
            if server is not None:
                server.stop()
            postgres.stop()
    print(f"fault campaign, seed {args.seed}, {args.minutes:g} min of arrivals and faults ({duration:.0f} s with the "
          f"last participants); {len(campaign.latest)} answers acknowledged; {platform.processor() or platform.machine()}"
          f", {os.cpu_count()} cores, Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')} UTC")
    print(f"participants' errors and repeats: {dict(campaign.errors) or 'none'}; left after {GIVE_UP} s unanswered: "
          f"{campaign.left}")
    print(f"{'invariant':<72}{'checked':>9}{'broken':>8}")
    for name, checked, broken in checks:
        print(f"{name:<72}{checked:>9}{len(broken):>8}")
        for example in broken[:5]:
            print(f"    {example}")
    return all(not broken for _, _, broken in checks)


def invariants(campaign: Campaign, book, client, project_id: int, tmp: Path, env: dict, folder: Path):
    """[(invariant, how many were checked, what broke it)]."""
    tasks = [t for page in client.full_task_pages(project_id) for t in page]
    by_pair: dict[tuple[int, int], list[dict]] = {}
    for task in tasks:
        for a in task["annotations"]:
            user = a["completed_by"]["id"] if isinstance(a["completed_by"], dict) else a["completed_by"]
            by_pair.setdefault((task["id"], user), []).append(a)
    refs = {r.ref: r for r in book.answers()}
    accounts = {a.participant_id.lower(): a for a in book.accounts().values()}
    checks = []

    broken = []
    for (pid, ref), rating in campaign.latest.items():
        r = refs.get(ref)
        user = accounts[pid.lower()].user_id if pid.lower() in accounts else None
        held = by_pair.get((r.task_id, user), []) if r else []
        values = {x["value"].get("rating") for a in held for x in a["result"]}
        if r is None or len(held) != 1 or held[0]["id"] != r.annotation_id or values != {rating} or \
                abs((held[0]["lead_time"] or -1) - (r.seconds or 0)) > 0.001:
            broken.append(f"{pid} task {r.task_id if r else '?'}: {len(held)} annotation(s), values {values}, "
                          f"acknowledged {rating}")
    checks.append(("every acknowledged answer in Label Studio once, latest value, lead_time", len(campaign.latest),
                   broken))

    broken = []
    answered_by: dict[int, set[str]] = {}
    served_to: dict[str, set[int]] = {}
    for r in refs.values():
        served_to.setdefault(r.participant, set()).add(r.task_id)
        if r.answered is not None:
            answered_by.setdefault(r.task_id, set()).add(r.participant)
    for pid, asked in campaign.finished:
        held = set().union(*(ids for at, ids in campaign.imports if at < asked))
        mine = served_to.get(pid.lower(), set())
        left = {t for t in held - mine if len(answered_by.get(t, set()) - {pid.lower()}) < OVERLAP}
        if left:
            broken.append(f"{pid} told done at {asked:.0f} with {len(left)} task(s) open to them, e.g. {sorted(left)[:3]}")
    checks.append(("no participant told done while the study held a task for them", len(campaign.finished), broken))

    per_task = Counter(t["id"] for t in tasks for a in t["annotations"] if not a.get("was_cancelled"))
    broken = [f"task {t}: {n} annotations in Label Studio" for t, n in per_task.items() if n > OVERLAP]
    broken += [f"task {t}: {len(p)} answers in the ledger" for t, p in answered_by.items() if len(p) > OVERLAP]
    checks.append((f"no task over its overlap ({OVERLAP}), in Label Studio and the ledger", len(tasks), broken))

    users = client.users()
    broken = [f"{a.participant_id}: user {a.user_id}" for a in accounts.values()
              if a.user_id is None or a.user_id not in users]
    checks.append(("no account missing in Label Studio", len(accounts), broken))

    def cli(*command, cwd=ROOT):
        return subprocess.run([sys.executable, "-m", "evalstudio.cli", *command], capture_output=True, text=True,
                              cwd=cwd, env={**os.environ, **env, "PATH": os.environ["PATH"], "COLUMNS": "200"},
                              timeout=1800)

    ledger_ids = {r.annotation_id for r in refs.values() if r.answered is not None}
    out = tmp / "status"
    status = cli("status", "dialogue", "--participants", str(folder), "-o", str(out), "--wait", "600")
    exported = cli("export", "dialogue", "-o", str(tmp / "export.csv"), "--wait", "600", cwd=folder.parent)
    broken = [f"{name} said: {line.strip()[:160]}" for name, done in (("status", status), ("export", exported))
              for line in done.stderr.splitlines() if "lacks" in line or "annotations on task" in line
              or "not answered" in line]
    broken += [f"{name} exited {done.returncode}: {done.stderr[-300:]}" for name, done in
               (("status", status), ("export", exported)) if done.returncode]
    if exported.returncode == 0:
        with open(tmp / "export.csv", encoding="utf-8") as f:
            rows = {int(row["annotation_id"]) for row in csv.DictReader(f)}
        if rows != ledger_ids:
            broken.append(f"export holds {len(rows)} annotations, the ledger {len(ledger_ids)} "
                          f"({len(rows - ledger_ids)} not the ledger's, {len(ledger_ids - rows)} missing)")
    if status.returncode == 0 and (out / "participants.csv").exists():
        with open(out / "participants.csv", encoding="utf-8") as f:
            done_by = {row["annotator"]: int(row["tasks_done"]) for row in csv.DictReader(f)}
        expected = Counter(accounts[r.participant].email for r in refs.values()
                           if r.answered is not None and r.participant in accounts)
        differ = sorted(k for k in set(done_by) | set(expected) if done_by.get(k, 0) != expected.get(k, 0))
        if differ:
            broken.append(f"status counts {sum(done_by.values())} tasks done, the ledger {sum(expected.values())}; "
                          "per participant (status/ledger): " + ", ".join(
                              f"{k} {done_by.get(k, 0)}/{expected.get(k, 0)}" for k in differ[:5]))
    checks.append(("status and export equal the ledger once drained", len(ledger_ids), broken))
    return checks


if __name__ == "__main__":
    main()
