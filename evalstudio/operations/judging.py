"""Judging a study with LLMs (`evalstudio judge`): the judges given or of projects.yaml checked and reached, the
tasks read from input files or Label Studio, the run with a progress bar, its files written, predictions stored.
Uses evalstudio.judge, evalstudio.base.chat, evalstudio.tasks.scanning and evalstudio.labelstudio."""

from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from evalstudio.base.errors import BadInput, EvalstudioError
from evalstudio.protocols.registry import load as load_registry

from .consoles import console, err

DEFAULT_CACHE = Path(".evalstudio") / "judge-cache.sqlite3"


def run_judges(protocol, files, model, base_url, name, key_env, samples, temperature, max_tokens, one_order,
               concurrency, per_minute, retries, timeout, price_in, price_out, limit, output: Path, cache: Path,
               to_label_studio, projects) -> tuple[int, int, bool]:
    """(task judgements done, to do, stopped by Ctrl-C): LLM judges run over a protocol's tasks (from input files or
    Label Studio) with the annotators' own instrument, answers cached in `cache`, the run's files written to `output`
    and, if asked, each judge's combined answer stored as a Label Studio prediction."""
    import asyncio

    from evalstudio.base.credentials import private_dir
    from evalstudio.judge import outputs
    from evalstudio.base.chat import Cache, ChatClient, Judge
    from evalstudio.judge.instrument import Instrument
    from evalstudio.judge.run import Run, in_order, judge_tasks
    if samples > 1 and temperature == 0:
        raise BadInput("--samples above 1 needs --temperature above 0 (at 0 every sample is the same answer)")
    registry = load_registry(projects)
    if model:
        judges = _judges_given(model, base_url or [], name, key_env, temperature, max_tokens)
        prices = {j.name: (price_in, price_out) for j in judges}
    elif registry.judges:
        judges = [Judge(j.shown_name, j.model, j.base_url, j.key_env, j.temperature, j.max_tokens)
                  for j in registry.judges]
        prices = {j.shown_name: (j.price_in if price_in is None else price_in,
                                 j.price_out if price_out is None else price_out) for j in registry.judges}
    else:
        raise BadInput("no judge: give --model and --base-url, or a `judges:` list in projects.yaml "
                       "(docs/judges.md)")
    for url in dict.fromkeys(j.base_url for j in judges):
        _reachable(url, timeout)
    parts = registry.parts(protocol)
    if to_label_studio and files:
        raise BadInput("--to-label-studio stores predictions of the Label Studio projects' tasks: leave out the "
                       "input files")
    work = [(part, _tasks(part, files, limit)) for part in parts]
    private_dir(output)
    store = Cache(cache)
    total = sum(len(tasks) for _, tasks in work) * len(judges)
    runs: list[tuple] = []
    stopped = False

    async def everything(progress, bar):
        client = ChatClient(store, concurrency, per_minute, retries, timeout)
        try:
            for part, tasks in work:
                run, instrument = Run(), Instrument(part)
                runs.append((part, instrument, tasks, run))
                await judge_tasks(client, instrument, judges, tasks, samples, not one_order,
                                  lambda n: progress.advance(bar, n), run)
        finally:
            await client.close()

    with Progress(TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=err,
                  transient=True) as progress:
        bar = progress.add_task("judging", total=total)
        try:
            asyncio.run(everything(progress, bar))  # (a cache that cannot be written: an EvalstudioError, said)
        except KeyboardInterrupt:
            stopped = True
    try:
        for number, (part, instrument, tasks, run) in enumerate(runs):
            in_order(run, judges, tasks)
            table = outputs.summary(instrument, run, judges, prices)
            outputs.write(output, instrument, run, tasks, run.prompts, table, append=number > 0)
            _show(table)
            if to_label_studio:
                stored, kept = _store(part, instrument, run, tasks)
                console.print(f"{part.name}: {stored} prediction(s) stored or replaced in Label Studio"
                              + (f"; {kept} earlier prediction(s) kept although this run answered otherwise: their "
                                 "tasks have answers, which may have started from them (prefill: the post-edit "
                                 "counts compare with the prediction shown); to store this run's, use another "
                                 "judge name" if kept else ""), highlight=False)
    finally:
        store.close()
    done = sum(len(run.combined) for _, _, _, run in runs)
    return done, total, stopped


def _judges_given(model, base_url, name, key_env, temperature, max_tokens):
    from evalstudio.base.chat import Judge
    from evalstudio.labelstudio.connection import check_url

    if len(base_url) not in (1, len(model)):
        raise BadInput(f"--base-url: give one for every --model, or one per --model ({len(model)})")
    if name and len(name) != len(model):
        raise BadInput(f"--name: one per --model ({len(model)})")
    names = name or model
    if len(set(names)) != len(names):
        raise BadInput("--name: every judge needs a name of its own (two --model are the same: give --name)")
    try:
        urls = [check_url(u, "--base-url") for u in (base_url * len(model) if len(base_url) == 1 else base_url)]
    except EvalstudioError as e:  # a wrong option: a usage error
        raise BadInput(str(e)) from None
    return [Judge(n, m, u, key_env, temperature, max_tokens) for n, m, u in zip(names, model, urls)]


def _reachable(url: str, timeout: float) -> None:
    """Refused at once when nothing answers at the endpoint (a wrong port, a server not started, a server that
    accepts connections but does not answer within `timeout`), instead of after every request's retries; any HTTP
    answer will do (not every server lists its models)."""
    import httpx

    try:
        httpx.get(url.rstrip("/") + "/models", timeout=timeout)
    except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.RemoteProtocolError) as e:
        said = ("did not answer within " + f"{timeout:g} s (--timeout)" if isinstance(e, httpx.TimeoutException)
                else f"closed the connection without an answer ({type(e).__name__})")
        raise BadInput(f"--base-url {url}: connected, but the server {said}; is it still starting, or is this port "
                       "another kind of server?") from None
    except httpx.TransportError as e:
        raise BadInput(f"--base-url {url}: cannot reach it ({type(e).__name__}); is the server running, on that "
                       "address and port?") from None


def _tasks(part, files: list[Path] | None, limit: int | None) -> list[dict]:
    """The part's tasks: from input files (converted as `import` converts them), or from Label Studio."""
    if files:
        import json

        from evalstudio.protocols.attention import CHECK_FIELD
        from evalstudio.protocols.mapping import importer_for
        from evalstudio.tasks.scanning import scan

        checked = scan(part, importer_for(part), files, spool=True)
        try:
            if checked.problems:
                raise BadInput(f"{checked.problems[0]} (and {len(checked.problems) - 1} more problem(s); "
                               "`evalstudio validate` lists them)" if len(checked.problems) > 1
                               else str(checked.problems[0]))
            tasks = []
            with open(checked.spool, encoding="utf-8") as spooled:
                for number, line in enumerate(spooled, 1):
                    task = json.loads(line.split("\t", 3)[3])
                    if CHECK_FIELD in (task.get("meta") or {}):  # an attention check the import would add: the
                        continue  # judge of input files judges the translations given (protocols/attention.py)
                    tasks.append({**task, "id": number})  # (ids as the order of the files)
                    if limit and len(tasks) >= limit:
                        break
            return tasks
        finally:
            checked.discard()
    from evalstudio.labelstudio.client import Client
    from evalstudio.labelstudio.connection import settings_from_env

    client = Client(settings_from_env())
    project_id = client.require_project(part)
    tasks = []
    for page in client.full_task_pages(project_id, "read the tasks"):
        tasks += [{"id": t["id"], "data": t.get("data") or {}, "meta": t.get("meta") or {},
                   "predictions": t.get("predictions") or [], "project_id": project_id,
                   "answered": any(not a.get("was_cancelled") for a in t.get("annotations") or [])} for t in page]
        if limit and len(tasks) >= limit:
            return tasks[:limit]
    if not tasks:
        raise BadInput(f"{part.name}: the Label Studio project has no tasks (import them first, or give input files)")
    return tasks


def _store(part, instrument, run, tasks) -> tuple[int, int]:
    """Each judge's combined answers as predictions (model version judge:NAME, the mean confidence as the score);
    an earlier prediction of the same judge is replaced when it differs, unless the task has an answer: a prefilled
    answer started from the earlier one (its post-edits, kept or removed spans, are counted against it), so it is
    kept. (stored or replaced, kept because answered)."""
    from evalstudio.judge.run import prediction_result
    from evalstudio.labelstudio.client import Client
    from evalstudio.labelstudio.connection import settings_from_env

    client = Client(settings_from_env())
    by_id = {t["id"]: t for t in tasks}
    stored = kept = 0
    for combined in run.combined:
        if not combined.values:
            continue
        result = prediction_result(instrument, combined.values)
        version = f"judge:{combined.judge}"
        known = [c for c in combined.confidence.values() if c is not None]
        earlier = [p for p in by_id[combined.task_id]["predictions"] if p.get("model_version") == version]
        if earlier and earlier[0].get("result") == result:
            continue
        if earlier and by_id[combined.task_id].get("answered"):
            kept += 1
            continue
        client.put_prediction(combined.task_id, result, version, sum(known) / len(known) if known else None,
                              earlier[0]["id"] if earlier else None)
        stored += 1
    return stored, kept


def _show(table) -> None:
    """The summary per judge: on a terminal fitted to its width, wrapped where it must (never cut: the reasons for
    missing answers are read here); elsewhere (a pipe, a file, a log) at its full width."""
    from rich.measure import Measurement
    from rich.table import Table

    shown = Table(title="LLM judges")
    for column in ("judge", "project", "tasks", "answers", "missing", "cached", "requests", "tokens in/out", "cost",
                   "order consistency", "first shown"):
        shown.add_column(column, overflow="fold")
    for row in table.to_dict("records"):
        shown.add_row(str(row["judge"]), str(row["project"]), str(row["tasks"]), str(row["answers"]),
                      f"{row['missing']}" + (f" ({row['why_missing']})" if row["why_missing"] else ""),
                      str(row["from_cache"]), str(row["requests"]), f"{row['tokens_in']}/{row['tokens_out']}",
                      str(row["cost"]) or "-", str(row["order_consistency"]) or "-",
                      str(row["first_shown_share"]) or "-")
    if console.is_terminal:
        console.print(shown)
    else:
        full = Measurement.get(console, console.options.update_width(100_000), shown).maximum
        type(console)(width=max(full, console.width), file=console.file).print(shown)
