"""`evalstudio gateway`: the participant gateway of a crowd study (see evalstudio.gateway)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import BadInput, EvalstudioError

from .base import ProjectsOption, fail_with, load_registry, app, console

JOIN_FILE = "gateway.json"  # where earlier versions kept the study link's key (taken over into the ledger)


def study_title(parts, name: str) -> str:
    """What participants read as the name of a study of several protocols: the words all its titles begin with
    ("Circa Part I: ..." and "Circa Part II: ..." give "Circa", "ChangeMyView: persuasion ..." and "ChangeMyView:
    persuasiveness ..." give "ChangeMyView"), else the study's name."""
    common = []
    for words in zip(*(p.entry_title.split() for p in parts)):
        if len(set(words)) > 1:
            break
        common.append(words[0])
    while common and common[-1].rstrip(":").lower() in ("part", "-", "–", "—", ""):
        common.pop()
    return " ".join(common).rstrip(":") or name


def join_key(folder: Path, renew: bool = False) -> str:
    """The key in the study's sign-up link, made once per study (kept in the ledger, so that every gateway process
    of the study offers the same link)."""
    import secrets

    from evalstudio.crowd.ledger import open_ledger

    book = open_ledger(folder)

    def make() -> str:
        old = folder / JOIN_FILE
        if old.is_file():
            try:
                key = json.loads(old.read_text(encoding="utf-8"))["join_key"]
                if isinstance(key, str) and len(key) >= 16:
                    return key
            except (OSError, ValueError, KeyError, TypeError):
                pass
            raise EvalstudioError(f"{old}: not a gateway file written by evalstudio; move it away to make a new one")
        return secrets.token_urlsafe(18).replace("-", "x").replace("_", "y")

    if renew:
        book.set_setting("join_key", secrets.token_urlsafe(18).replace("-", "x").replace("_", "y"))
    return book.setting("join_key", make)


@app.command()
def gateway(
    protocol: Annotated[str, typer.Argument(help="The study (protocol) whose projects participants label.")],
    port: Annotated[int, typer.Option(help="Port of the gateway.")] = 8081,
    host: Annotated[str, typer.Option(help="Address to listen on; keep 127.0.0.1 and put your reverse proxy "
                                           "(TLS) in front for participants elsewhere.")] = "127.0.0.1",
    public_url: Annotated[Optional[str], typer.Option(
        help="The address participants open (your reverse proxy's https:// address); default http://HOST:PORT.")] = None,
    folder: Annotated[Optional[Path], typer.Option(
        "--participants", help="The participants folder of `participants add` (default: .evalstudio/participants).")] = None,
    join: Annotated[bool, typer.Option(
        "--join/--no-join", help="Offer the study link for self sign-up (Prolific, MTurk); --no-join: only the "
                                 "personal links of `participants add`.")] = True,
    new_join_link: Annotated[bool, typer.Option(help="Make a new study link (the old one stops working).")] = False,
    sign_ins_per_minute: Annotated[Optional[int], typer.Option(
        help="Sign-in and sign-up requests allowed per client address and minute (behind a reverse proxy named by "
             "--trusted-proxy, the address it forwards); default: crowd.sign_ins_per_minute in projects.yaml "
             "(300). One participant id from one address is held at 10 a minute whatever this says.",
        min=1)] = None,
    trusted_proxy: Annotated[Optional[list[str]], typer.Option(
        help="The address of your reverse proxy (repeat for several): only from it is X-Forwarded-For read as the "
             "participant's address. Without it the header is ignored and the connection's address counts.")] = None,
    shared_pool: Annotated[bool, typer.Option(
        "--shared-pool", help="Make the participants folder one pool for every study served from it: they share "
                              "participants (one signs in to the other), the study link's key and "
                              "crowd.max_participants. Without it each study has its own ledger in the folder (the "
                              "first study's in the folder itself, every other one's in FOLDER/STUDY).")] = False,
    accept_changed_tasks: Annotated[bool, typer.Option(
        "--accept-changed-tasks", help="Show participants the tasks `status` lists as changed in Label Studio since "
                                       "the study started (by default every participant is shown what the first "
                                       "gateway read).")] = False,
    workers: Annotated[int, typer.Option(
        help="Gateway processes serving this port together (they share the study's ledger, so they behave as "
             "one); more than one needs the ledger in PostgreSQL or SQLite on a local disk.", min=1, max=16)] = 1,
    projects: ProjectsOption = None,
):
    """Put a crowd study in front of participants without giving them Label Studio.

    Participants sign in at the gateway (their personal link from `participants add --gateway-url`, or the study
    link for self sign-up) and label the study's projects in Label Studio's own labeling view. They never get a
    Label Studio account password, session or token: the gateway makes the labeling calls for them and passes on
    only the data fields the labeling config shows. Every other Label Studio page and API is out of their reach
    (gold answers, model ratings, system names, other people's annotations, exports, settings, webhooks). Keep
    Label Studio itself on 127.0.0.1; see docs/crowd-study.md."""
    import uvicorn

    from evalstudio.base.credentials import private_dir
    from evalstudio.crowd import participants
    from evalstudio.labelstudio.client import Client
    from evalstudio.labelstudio.connection import check_address, check_url, settings_from_env

    from ..gateway import GatewayConfig, build_app, load_parts
    from ..gateway.setup import find_frontend, front_end
    from evalstudio.crowd.ledger import open_ledger

    try:
        registry = load_registry(projects)
        parts = registry.parts(protocol)
        settings = settings_from_env()
        client = Client(settings)
        if not 1 <= port <= 65535:
            raise BadInput(f"--port {port}: not a port number")
        shown_public = (public_url or f"http://{host}:{port}").rstrip("/")
        check_url(shown_public, "--public-url")
        root = folder or participants.DEFAULT_FOLDER
        target = participants.study_folder(root, protocol, shared=shared_pool, claim=True)
        private_dir(target)
        open_ledger(target).setting("study", make=lambda: protocol)  # (a study's own ledger: its name)
        open_ledger(target).set_setting("label_studio", client.url)
        loaded = load_parts(client, parts)
        chunks, module = find_frontend(client.url)
        settings_shown = front_end(client, open_ledger(target))
        key = join_key(target, renew=new_join_link) if join else None
        crowd = next((p.crowd for p in parts if p.crowd), None)
        one_entry = len({p.entry for p in parts}) == 1  # one protocol (with its lists, if it has them)
        config = GatewayConfig(study=registry.study(protocol).title if one_entry else study_title(parts, protocol),
                               parts=loaded, label_studio_url=client.url, api_key=settings.api_key,
                               participants_folder=target, public_url=shown_public, join_key=key,
                               completion_code=crowd.completion_code if crowd else None, chunks=chunks, module=module,
                               rate_per_minute=sign_ins_per_minute or (crowd.sign_ins_per_minute if crowd else 300),
                               joins_per_minute=crowd.sign_ups_per_minute if crowd else 1000,
                               max_participants=crowd.max_participants if crowd else None,
                               front_end=settings_shown, sync_name=protocol,
                               accept_changed_tasks=accept_changed_tasks)
        proxies = [check_address(a, "--trusted-proxy") for a in trusted_proxy or []]
    except (EvalstudioError, ValueError) as e:
        raise fail_with(e)
    console.print(f"Gateway for '{protocol}' on http://{host}:{port} (participants open {shown_public}); its "
                  f"participants and answers: {target}" + (" (a pool shared by every study served from it)"
                                                           if shared_pool else "") + ".",
                  highlight=False, markup=False, soft_wrap=True)
    if key:
        platform = crowd.platform if crowd else None
        field = {"prolific": "?PROLIFIC_PID={{%PROLIFIC_PID%}}", "mturk": "?workerId=WORKER_ID"}.get(platform or "", "")
        console.print(f"Study link (self sign-up): {shown_public}/join/{key}{field}", highlight=False, markup=False,
                      soft_wrap=True)
    console.print("Personal links: `evalstudio participants add IDS --gateway-url "
                  f"{shown_public}` writes them to sign_in.csv. Ctrl-C stops.", highlight=False, markup=False)
    if config.max_participants:
        console.print(f"The study link takes {config.max_participants} participants in all.", highlight=False)
    for part in config.parts:
        if part.routing is not None:
            route = part.routing
            stops = [t for t in (route.target, f"{route.budget} answers" if route.budget else None) if t]
            console.print(f"{part.name}: adaptive collection ({route.strategy}, at least {route.min_overlap} "
                          f"answer(s) per task); stops at {' or '.join(stops) or 'no target'}; `status` says how far.",
                          highlight=False, markup=False, soft_wrap=True)
    # no access log: personal links carry the participant's sign-in code in their path. X-Forwarded-For is read only
    # from the proxies named (uvicorn's proxy headers), never from anyone else
    options = dict(host=host, port=port, log_level="warning", access_log=False, proxy_headers=bool(proxies),
                   forwarded_allow_ips=",".join(proxies) if proxies else "")
    try:
        if workers == 1:
            uvicorn.run(build_app(config), **options)
        else:
            from ..gateway.workers import serve

            serve(config, workers, options)
    except KeyboardInterrupt:
        pass
