"""Serving a study to participants (`evalstudio gateway`): the study's title and sign-up key, its gateway set up
against Label Studio and served by uvicorn. Uses evalstudio.gateway, evalstudio.crowd (participants, ledger),
evalstudio.labelstudio and evalstudio.protocols."""

from __future__ import annotations

import json
from pathlib import Path

from evalstudio.base.errors import BadInput, EvalstudioError
from evalstudio.protocols.registry import load as load_registry

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


def check_front_matter_served(registry, protocol, parts) -> None:
    """Refuse to serve a part of a study alone when the study's front matter (consent, practice, background) is
    declared on another part: its participants would reach tasks without consenting."""
    from evalstudio.crowd.front_record import declaring

    if declaring(parts) is not None:
        return
    whole = {p.study or p.list_of for p in parts} - {None}
    for study in sorted(whole):
        owner = declaring(registry.parts(study))
        if owner is not None:
            raise BadInput(f"{protocol} is a part of the study {study}, whose front matter (consent, practice, "
                           f"background questions) is declared on {owner.name}: serve the whole study "
                           f"(`evalstudio gateway {study}`) so that every participant consents before any task")


def gateway_config(protocol, port, host, public_url, folder, join, new_join_link, sign_ins_per_minute, trusted_proxy,
                   shared_pool, accept_changed_tasks, projects):
    """(config, the study's ledger folder, the study link's key, crowd, trusted proxies, public address): a study's
    gateway set up against Label Studio (its ledger named and bound to this Label Studio, its parts loaded, the
    front end found)."""
    from evalstudio.base.credentials import private_dir
    from evalstudio.crowd import participants
    from evalstudio.labelstudio.client import Client
    from evalstudio.labelstudio.connection import check_address, check_url, settings_from_env

    from ..gateway import GatewayConfig, load_parts
    from ..gateway.front import front_of
    from ..gateway.setup import find_frontend, front_end
    from evalstudio.crowd.ledger import open_ledger

    registry = load_registry(projects)
    parts = registry.parts(protocol)
    check_front_matter_served(registry, protocol, parts)
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
                           completion_code=crowd.completion_code if crowd else None,
                           platform=crowd.platform if crowd else None, chunks=chunks, module=module,
                           rate_per_minute=sign_ins_per_minute or (crowd.sign_ins_per_minute if crowd else 300),
                           joins_per_minute=crowd.sign_ups_per_minute if crowd else 1000,
                           max_participants=crowd.max_participants if crowd else None,
                           front_end=settings_shown, sync_name=protocol,
                           accept_changed_tasks=accept_changed_tasks, front=front_of(parts))
    proxies = [check_address(a, "--trusted-proxy") for a in trusted_proxy or []]
    return config, target, key, crowd, proxies, shown_public


def serve(config, host: str, port: int, proxies: list[str], workers: int) -> None:
    """The gateway served by uvicorn (one process, or `workers` sharing the port) until Ctrl-C."""
    import uvicorn

    from ..gateway import build_app

    # no access log: personal links carry the participant's sign-in code in their path. X-Forwarded-For is read only
    # from the proxies named (uvicorn's proxy headers), never from anyone else
    options = dict(host=host, port=port, log_level="warning", access_log=False, proxy_headers=bool(proxies),
                   forwarded_allow_ips=",".join(proxies) if proxies else "")
    try:
        if workers == 1:
            uvicorn.run(build_app(config), **options)
        else:
            from ..gateway.workers import serve as serve_workers

            serve_workers(config, workers, options)
    except KeyboardInterrupt:
        pass
