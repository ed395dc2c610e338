"""`evalstudio gateway`: the participant gateway of a crowd study (set up and served by
evalstudio.operations.serving; the gateway itself: evalstudio.gateway)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from evalstudio.base.errors import EvalstudioError
from evalstudio.operations.serving import gateway_config, serve

from .base import ProjectsOption, fail_with, app, console


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
    try:
        config, target, key, crowd, proxies, shown_public = gateway_config(
            protocol, port, host, public_url, folder, join, new_join_link, sign_ins_per_minute, trusted_proxy,
            shared_pool, accept_changed_tasks, projects)
    except (EvalstudioError, ValueError) as e:
        raise fail_with(e)
    from evalstudio.crowd.ledger import open_ledger

    console.print(f"Gateway for '{protocol}' on http://{host}:{port} (participants open {shown_public}); its "
                  f"participants folder: {target}" + (" (a pool shared by every study served from it)"
                                                      if shared_pool else "")
                  + f"; their steps and answers: the ledger at {open_ledger(target).where}.",
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
    serve(config, host, port, proxies, workers)
