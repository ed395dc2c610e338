"""What a gateway serves, read when it starts: the study's projects as Label Studio has them (`Part`) and where
Label Studio's front-end build keeps its labeling editor (`find_frontend`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from evalstudio.base.errors import ServerError
from evalstudio.crowd.routing import Active, Pac, Routing, active_of, pac_of, routing_of
from evalstudio.protocols.registry import Project

from .checks import Control, controls_of
from .front import Front

# where Label Studio's front end is: the labeling editor's chunks and module, found in main.js (see pages.py)
_LOADER = re.compile(r"Promise\.all\(\[((?:n\.e\(\d+\),?)+)\]\)\.then\(n\.bind\(n,(\d+)\)\)")


@dataclass(frozen=True)
class Part:
    """One Label Studio project of the study, as participants meet it."""
    name: str
    title: str
    project_id: int
    config: str
    instructions: str
    fields: frozenset[str]
    controls: dict[str, Control]
    quota: int | None  # annotations per participant (None: as many as Label Studio's sampling gives)
    after: str | None  # the part a participant finishes first
    prefill: bool
    entry: str = ""  # the projects.yaml entry (a list's project: the entry it is a list of); participants see this
    list_number: int | None = None  # counterbalanced lists: which list this project is
    batch: tuple[int, int] | None = None  # crowd batch_size and max_batches (MTurk HITs): shown in the progress
    order: str = "random"  # random: each participant's own order; sequential: the import's order, for everyone
    routing: Routing | None = None  # adaptive collection (assignment:, stop_when:); None: a fixed overlap
    overlap: int = 1  # answers per task (Label Studio's maximum_annotations when the gateway started)
    active: Active | None = None  # an active design (assignment: {strategy: active}): only drawn tasks are served
    first_config: str = ""  # the config for the participant's first task of the part: its guide open (panels_open)
    pac: Pac | None = None  # PAC labels (stop_when: {pac}): the calibration sample, then the threshold's tasks
    attention: bool = False  # the entry has attention_checks: each copy is served only beside its original
    unassisted_share: float | None = None  # with prefill: the share of each participant's tasks shown without it


@dataclass
class GatewayConfig:
    """What a gateway serves: study, parts, Label Studio, participants' folder, links, limits, editor files."""
    study: str
    parts: list[Part]
    label_studio_url: str
    api_key: str = field(repr=False)
    participants_folder: Path
    public_url: str
    join_key: str | None = field(default=None, repr=False)  # None: no self sign-up, personal links only
    completion_code: str | None = None
    platform: str | None = None  # crowd.platform (prolific, mturk): where the end page sends a participant
    chunks: list[int] = field(default_factory=list)
    module: int = 0
    rate_per_minute: int = 300  # sign-in and join requests per client address and minute (crowd.sign_ins_per_minute)
    joins_per_minute: int = 1000  # study-link sign-ups per minute, all addresses together (crowd.sign_ups_per_minute)
    max_participants: int | None = None  # crowd.max_participants: the study link refuses sign-ups beyond it
    # Label Studio's front-end settings (feature flags, edition): the labeling editor renders and behaves as in Label
    # Studio's own app only with the same ones (read when the gateway starts, see front_end)
    front_end: dict = field(default_factory=dict)
    sync_name: str = "study"  # whose sync lease the gateway's writer takes (one writer per study)
    accept_changed_tasks: bool = False  # tasks changed in Label Studio since the ledger recorded them: shown as now
    front: Front | None = None  # the study's front matter (consent, practice, background, exit survey)


def load_parts(client, projects: list[Project]) -> list[Part]:
    """The study's projects as they are on Label Studio (ids by title), checked for what the gateway serves."""
    parts = []
    for project in projects:
        project_id = client.require_project(project)
        crowd = project.crowd
        quota = crowd.per_participant if crowd and isinstance(crowd.per_participant, int) else None
        config = without_comments(project.config_for("gateway"))
        parts.append(Part(project.name, project.entry_title, project_id, config,
                          without_comments(project.instructions_for("gateway")),
                          frozenset(project.data_fields()), controls_of(project), quota,
                          crowd.after if crowd else None, project.prefill, project.entry, project.list_number,
                          (crowd.batch_size, crowd.max_batches) if crowd and crowd.batch_size and crowd.max_batches
                          else None, project.order, routing_of(project), client.overlap(project_id),
                          active_of(project), panels_open(config), pac_of(project),
                          attention=project.attention_checks is not None,
                          unassisted_share=project.unassisted_share))
    return parts


FRONT_END_ACCOUNT = "front-end-account"  # the ledger setting: the gateway's own account that reads them


def front_end(client, book) -> dict:
    """Label Studio's front-end settings, as its pages give them to a signed-in account. Read with an account of
    the gateway's own (made once per study through the invite link, its password in the ledger): participants have
    no Label Studio password. Its e-mail is of a reserved domain that names no participant."""
    import json
    import secrets

    from evalstudio.base.errors import EvalstudioError
    from evalstudio.crowd.participants import new_password

    made = book.setting(FRONT_END_ACCOUNT, make=lambda: json.dumps(
        {"email": f"evalstudio-gateway-{secrets.token_hex(4)}@gateway.invalid", "password": new_password()}))
    account = json.loads(made)
    try:
        return client.front_end_settings(account["email"], account["password"])
    except EvalstudioError:
        pass  # not made yet (or its sign-up's answer was lost: then the e-mail is taken and signing in works below)
    try:
        client.sign_up(account["email"], account["password"], client.invite_token())
    except EvalstudioError:
        pass
    return client.front_end_settings(account["email"], account["password"])


def without_comments(markup: str) -> str:
    """A labeling config or instructions without their comments: what a participant's browser receives is what the
    view shows (a config's comments are notes for the researcher, and some name the design, e.g. where a shown
    interpretation comes from). Comments are found by the XML parser, never by pattern: text that only looks like
    one (inside an attribute or CDATA) stays. Instructions that are not well-formed XML lose only complete
    <!-- ... --> runs."""
    import xml.etree.ElementTree as ET

    if "<!--" not in markup:
        return markup
    try:
        ET.fromstring(markup)
    except ET.ParseError:
        return re.sub(r"<!--.*?-->", "", markup, flags=re.S)
    return ET.canonicalize(markup, with_comments=False, strip_text=False)


def panels_open(config: str) -> str:
    """The labeling config with every Collapse's panels as open sections (a View holding the panel's title as a
    Header, then its content): the same controls and the same text, nothing to click. Label Studio's Collapse has
    no attribute that opens a panel, so the gateway shows a part's first task with this config (issue 53: Sotopia's
    guide and its seven definitions, which the document gives on one open page before any task, sat in nine closed
    panels) and the later ones with the config as written, the guide folded for reference."""
    import xml.etree.ElementTree as ET

    if "<Collapse" not in config:
        return config
    root = ET.fromstring(config)
    for collapse in root.iter("Collapse"):
        collapse.tag = "View"
        collapse.attrib.clear()
        for panel in list(collapse):
            if panel.tag != "Panel":
                continue
            title = panel.attrib.get("value", "")
            panel.tag = "View"
            panel.attrib.clear()
            panel.set("className", "es-guide")
            first = panel[0] if len(panel) else None
            repeated = first is not None and first.tag == "Header" and first.get("value", "").strip() == title.strip()
            if title and not repeated:  # (a panel that opens with its own title as a Header keeps just that one)
                panel.insert(0, ET.Element("Header", {"value": title, "size": "5"}))
    return ET.tostring(root, encoding="unicode")


def find_frontend(url: str) -> tuple[list[int], int]:
    """The chunks and module of Label Studio's labeling editor in this server's front-end build."""
    try:
        main = httpx.get(f"{url}/react-app/main.js", timeout=60)
        main.raise_for_status()
        for match in _LOADER.finditer(main.text):
            chunks = [int(c) for c in re.findall(r"\d+", match.group(1))]
            last = httpx.get(f"{url}/react-app/{chunks[-1]}.js", timeout=60)
            if last.status_code == 200 and "window.LabelStudio=" in last.text:
                return chunks, int(match.group(2))
    except httpx.HTTPError as e:
        raise ServerError(f"cannot read Label Studio's front end at {url}/react-app/ ({type(e).__name__})") from None
    raise ServerError("this Label Studio's front end has no labeling editor the gateway can load "
                      "(evalstudio supports the Label Studio version it installs)")
