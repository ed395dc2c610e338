"""The participant gateway (`evalstudio gateway`) as a hostile participant meets it: a real Label Studio, the real
gateway process, participants with their gateway session and their Label Studio token."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstudio import importers
from evalstudio.crowd import ledger, participants
from evalstudio.exporters.tables.tidy import result_values
from evalstudio.gateway.checks import Refused, check_result, controls_of
from evalstudio.protocols import registry
from evalstudio.tasks.importing import import_files

from .conftest import PROJECTS, example_files, gateway_process, only_on_the_first_database

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("database_independent")]
HERE = Path(__file__).resolve().parent
ROUTES = HERE / "data" / "label_studio_routes.json"  # every Label Studio route, classified (see the sweep test)
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
# what exists only in Label Studio's own pages: never in what a participant of the gateway reads
LABEL_STUDIO_STEPS = ["Label All Tasks", "Annotate page", "back arrow", "Prolific e-mail address", "email.prolific.com",
                      "sign up and log in", "Sign up or log in"]


@pytest.fixture(scope="module")
def study(label_studio, client, reg, tmp_path_factory):
    """The dialogue study behind a gateway process, with four participants."""
    only_on_the_first_database(label_studio)
    from .test_cli import _projects_file

    folder = tmp_path_factory.mktemp("gateway-participants")

    def own_title(raw):  # a project of its own: other tests on the shared server annotate the usual one
        raw["projects"]["dialogue"]["title"] = "gateway study"
    projects_file = _projects_file(folder.parent, own_title)
    project_id = import_files(registry.load(projects_file).get("dialogue"), importers.get("dialogue"),
                              example_files("dialogue"), client).project_id
    participants.add(client, ["GW1", "GW2", "GW3", "GW4"], folder)
    with gateway_process(label_studio, "dialogue", folder, projects_file) as url:
        participants.write_sheet(folder, participants.load_accounts(folder).values(), label_studio.url, url)
        accounts = participants.load_accounts(folder)
        key = ledger.open_ledger(folder).setting("join_key")
        yield {"url": url, "folder": folder, "accounts": accounts, "project_id": project_id, "join_key": key}


def signed_in(study, pid: str) -> httpx.Client:
    """A participant's HTTP client, signed in at the gateway through their personal link."""
    web = httpx.Client(base_url=study["url"], timeout=60)
    account = study["accounts"][pid]
    answer = web.get(f"/s/{pid}/{account.access}")
    assert answer.status_code == 303 and "evalstudio_gateway" in web.cookies, answer.text
    web.headers["X-Evalstudio"] = "1"
    return web


def _user(completed_by):
    return completed_by.get("id") if isinstance(completed_by, dict) else completed_by


def playwright_with_chromium():
    """Playwright's sync API, once Debian's chromium is known to be there (in CI its absence fails the test)."""
    from .test_browser import CHROMIUM

    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    return sync_playwright


def annotations_of(client, page, project_ids: list[int], user_id: int) -> list[tuple[dict, dict]]:
    """(task, annotation) of the participant `user_id` in these projects, waited for (up to a minute) after a
    submission in the browser `page`."""
    for _ in range(120):
        mine = [(t, a) for project_id in project_ids for page_ in client.full_task_pages(project_id)
                for t in page_ for a in t["annotations"] if _user(a["completed_by"]) == user_id]
        if mine:
            return mine
        page.wait_for_timeout(500)
    return []


@contextlib.contextmanager
def one_participant(label_studio, client, tmp_path, protocol: str, title: str, pid: str):
    """A project of its own (`title`) with the protocol's example files, one participant `pid` and a gateway in
    front of it: yields (project, project id, the participant's account, the gateway's URL)."""
    from .test_cli import _projects_file

    projects_file = _projects_file(tmp_path, lambda raw: raw["projects"][protocol].update(title=title))
    project = registry.load(projects_file).entry(protocol)
    project_id = import_files(project, importers.get(project.importer), example_files(protocol), client).project_id
    folder = tmp_path / "participants"
    participants.add(client, [pid], folder)
    with gateway_process(label_studio, protocol, folder, projects_file) as url:
        yield project, project_id, participants.load_accounts(folder)[pid], url


def annotations(client, task_id: int) -> list[dict]:
    return [a if isinstance(a, dict) else a.dict() for a in client.sdk.tasks.get(id=task_id).annotations or []]


def concrete(pattern: str) -> str:
    """A request path for one of Django's URL patterns (parameters filled with 1)."""
    path = re.sub(r"\(\?P<\w+>[^)]*\)", "1", pattern)
    path = re.sub(r"<(?:\w+:)?\w+>", "1", path)
    path = path.replace("^", "").replace("$", "").replace("\\.", ".").replace("/?", "/").replace("\\", "")
    return "/" + re.sub(r"[()?*+\[\]|]", "", path)


def label_studio_routes(tmp_path) -> list[str]:
    env = {**os.environ, "LABEL_STUDIO_BASE_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, str(HERE / "label_studio_routes.py")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_every_label_studio_route_is_refused_or_classified(study, client, tmp_path):
    """Every route of Label Studio's URL configuration, with every method, as a participant with their gateway
    session and their own Label Studio token: only Label Studio's front-end files come from Label Studio; every
    other request is answered by the gateway itself. A route nobody classified fails the test."""
    classified = json.loads(ROUTES.read_text())
    routes = label_studio_routes(tmp_path)
    unclassified = sorted(set(routes) - set(classified))
    assert not unclassified, f"new Label Studio routes: classify them in {ROUTES.name}: {unclassified}"
    account = study["accounts"]["GW1"]
    token = client.log_in(account.email, account.password)
    web = signed_in(study, "GW1")
    web.headers["Authorization"] = f"Token {token}"
    reached = []
    for pattern in routes:
        for method in METHODS:
            answer = web.request(method, concrete(pattern), json={"is_published": True})
            if answer.headers.get("x-evalstudio-upstream"):
                reached.append((classified[pattern], method, pattern))
            else:
                assert answer.status_code in (200, 303, 400, 401, 404, 405), (method, pattern, answer.status_code)
                assert not any(leak in answer.text for leak in ('"meta"', "label_config", "model_ratings", "@")), \
                    (method, pattern)
    assert reached and all(kind == "assets" and method == "GET" for kind, method, _ in reached), reached
    assert {p for _, _, p in reached} <= {p for p, kind in classified.items() if kind == "assets"}


def test_a_participant_reads_only_what_the_view_shows(study, client, reg):
    """The next task carries the displayed data fields and nothing of the task's meta (model ratings, system names,
    model version), of its predictions or of other people's annotations."""
    web = signed_in(study, "GW2")
    task = web.get("/api/next/dialogue").json()
    assert set(task) == {"ref", "number", "data", "previous", "progress", "update", "guide"}
    assert task["guide"] == "open"  # the first task of the part: its guide open (issue 53), nothing else said
    assert set(task["data"]) <= reg.entry("dialogue").data_fields()
    # every task showing the same data (the example repeats some responses across systems)
    originals = [t for page in client.full_task_pages(study["project_id"]) for t in page
                 if all(t["data"].get(k) == v for k, v in task["data"].items())]
    assert originals
    text = json.dumps(task)
    for original in originals:
        for hidden in (original["meta"]["system"], original["meta"].get("model_version")):
            assert hidden and hidden not in text.replace(task["ref"], ""), hidden
    assert "id" not in task and task["number"] == 1  # a per-session counter (first task of this session), no task id
    assert "model_ratings" not in text and "evalstudio_id" not in text


def test_a_participant_changes_nothing_but_their_own_answers(study, client, reg):
    """Results are checked against the controls before Label Studio sees them; a participant's task references are
    theirs alone; an annotation is created once and only its author's gateway session can update it."""
    project = reg.entry("dialogue")
    one, two = signed_in(study, "GW3"), signed_in(study, "GW4")
    task = one.get("/api/next/dialogue").json()
    ref = task["ref"]
    good = [{"from_name": c.name, "to_name": c.to_names[0], "type": "rating", "value": {"rating": 4}}
            for c in controls_of(project).values()]
    hostile = [
        [{**good[0], "value": {"rating": 9}}],  # out of range
        [{**good[0], "from_name": "note"}],  # not a control
        [{**good[0], "type": "choices", "value": {"choices": ["x"]}}],
        good + [good[0]],  # answered twice
        "not a list",
    ]
    for result in hostile:
        answer = one.post(f"/api/submit/{ref}", json={"result": result})
        assert answer.status_code == 400, (result, answer.text)
    assert two.post(f"/api/submit/{ref}", json={"result": good}).status_code == 404  # someone else's task
    assert one.post(f"/api/submit/{ref}", json={"result": good}, headers={"X-Evalstudio": ""}).status_code == 400
    # the example has identical responses in several tasks: every task showing the same data is a candidate
    candidates = [t["id"] for page in client.full_task_pages(study["project_id"]) for t in page
                  if all(t["data"].get(k) == v for k, v in task["data"].items())]
    gw3 = study["accounts"]["GW3"].user_id

    def mine():
        return [a for t in candidates for a in annotations(client, t) if _user(a["completed_by"]) == gw3]
    assert candidates and mine() == []
    assert one.post(f"/api/submit/{ref}", json={"result": good}).json() == {"ok": True}
    assert one.post(f"/api/submit/{ref}", json={"result": good}).json() == {"ok": True}  # an update of the same one
    assert ledger.open_ledger(study["folder"]).wait_synced(120).behind == 0  # Label Studio receives it behind
    saved = mine()
    assert len(saved) == 1 and result_values(saved[0]["result"]) == {c: 4 for c in controls_of(project)}
    changed = [{**good[0], "value": {"rating": 2}}] + good[1:]
    assert two.post(f"/api/update/{ref}", json={"result": changed}).status_code == 404
    assert one.post(f"/api/update/{ref}", json={"result": changed}).json() == {"ok": True}
    back = one.get(f"/api/task/{ref}").json()
    assert back["update"] and result_values(back["result"])[good[0]["from_name"]] == 2


def test_labeling_in_a_browser_through_the_gateway(study, client, reg):
    """A participant opens their personal link, labels a task in Label Studio's own labeling view served by the
    gateway, and the annotation is theirs in Label Studio; "Previous" reopens it with the saved answer to change."""
    from .test_browser import CHROMIUM, CHROMIUM_ARGS, SHOTS, designed_values, empty_controls, fill, flat

    sync_playwright = playwright_with_chromium()

    project = reg.entry("dialogue")
    account = participants.load_accounts(study["folder"])["GW1"]
    upstream_paths = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: upstream_paths.append(r.url))
        page.goto(f"{study['url']}/s/GW1/{account.access}")
        page.goto(f"{study['url']}/label/dialogue")
        page.wait_for_selector('#editor[data-task="1"]', timeout=180_000)
        page.locator("button", has_text="Submit").first.wait_for(timeout=180_000)
        page.wait_for_timeout(800)
        assert empty_controls(page, project) == []
        values = designed_values(project)
        fill(page, project, values)
        page.locator("button", has_text="Submit").first.click()
        # the participant's annotation, wherever the stream put them
        [(task, annotation)] = annotations_of(client, page, [study["project_id"]], account.user_id)
        task_id, response = task["id"], task["data"]["response"]
        assert result_values(annotation["result"]) == values
        page.wait_for_selector('#editor[data-task="2"]', timeout=180_000)  # the next task is open
        page.locator("#previous").click()  # back to the answered task, its saved answer shown, to change
        page.wait_for_selector('#editor[data-task="1"]', timeout=180_000)
        # Label Studio's own button for changing a submitted answer
        page.locator("button", has_text="Update").first.wait_for(timeout=180_000)
        page.wait_for_timeout(1000)
        assert flat(response) in flat(page.inner_text("body"))
        assert sorted(empty_controls(page, project)) == sorted(values)  # every saved answer is filled in
        changed = {**values, "appropriateness": 5 if values["appropriateness"] != 5 else 4}
        fill(page, project, {"appropriateness": changed["appropriateness"]})
        page.locator("button", has_text="Update").first.click()
        for _ in range(60):
            [saved] = [a for a in annotations(client, task_id) if _user(a["completed_by"]) == account.user_id]
            if result_values(saved["result"]) == changed:
                break
            page.wait_for_timeout(500)
        assert result_values(saved["result"]) == changed  # updated, still one annotation
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "gateway-dialogue.png"))
        browser.close()
    assert errors == []
    assert all(u.startswith(study["url"]) for u in upstream_paths), "the page talks only to the gateway"


def test_sign_in_only_by_personal_link_or_study_link_and_rate_limited(study):
    """(Last of the live tests: it uses up this address's sign-in attempts for a minute.)"""
    url, key = study["url"], study["join_key"]
    with httpx.Client(base_url=url, timeout=60, headers={"X-Evalstudio": "1"}) as web:
        assert web.get("/s/GW1/" + "A" * 24).status_code == 404  # a wrong code
        assert web.post("/api/sign-in", json={"participant": "GW1", "code": "B" * 24}).status_code == 403
        assert web.get("/join/" + "x" * 24).status_code == 404  # not the study link
        assert web.post("/api/join", json={"key": "x" * 24, "participant": "NEW1"}).status_code == 404
        assert web.get("/api/next/dialogue").status_code == 401  # not signed in
        assert web.get("/user/signup/").status_code == 404  # Label Studio's own sign-up is out of reach
    with httpx.Client(base_url=url, timeout=60, headers={"X-Evalstudio": "1"}) as web:
        page = web.get(f"/join/{key}?PROLIFIC_PID=NEWJOIN1")
        assert page.status_code == 200 and "NEWJOIN1" in page.text
        joined = web.post("/api/join", json={"key": key, "participant": "NEWJOIN1"})
        assert joined.status_code == 200, joined.text
        account = participants.load_accounts(study["folder"])["NEWJOIN1"]
        assert joined.json()["link"].endswith(f"/s/NEWJOIN1/{account.access}")
        assert account.password not in joined.text
        assert web.get("/api/next/dialogue").json().get("data")
    with httpx.Client(base_url=url, timeout=60, headers={"X-Evalstudio": "1"}) as other:
        again = other.post("/api/join", json={"key": key, "participant": "newjoin1"})
        assert again.status_code == 409  # an id signs up once; then only its personal link signs in
        codes = [other.post("/api/sign-in", json={"participant": "GW2", "code": "C" * 24}).status_code
                 for _ in range(30)]
        assert codes[0] == 403 and codes[-1] == 429


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
                    max_leaves=30))
def test_result_check_refuses_anything_else_cleanly(reg, value):
    """Whatever a participant sends as a result is either a clean result list or refused with a message."""
    controls = controls_of(reg.entry("sotopia"))
    for candidate in (value, [value], [{"from_name": "believability_agent1", "to_name": "dialogue",
                                        "type": "number", "value": value}]):
        try:
            clean = check_result(candidate, controls)
        except Refused:
            continue
        assert isinstance(clean, list) and all("origin" not in r for r in clean)


@pytest.mark.parametrize("locale", ["en-US", "de-DE"])
def test_a_decimal_comma_is_the_decimal_it_means(label_studio, client, tmp_path, locale):
    """Health's ratings take decimals. Label Studio's number field drops a typed comma (in any browser language), so
    "1,0" would be stored as 10 and "5,5" as 55: through the gateway, "1,0" is stored as 1.0 and "5,5" as 5.5, and
    "0,9" becomes 0.9 (below the scale's 1, which Label Studio's check then refuses), never 9; in an English and in a
    German browser."""
    from .test_browser import CHROMIUM, CHROMIUM_ARGS, designed_values, fill

    only_on_the_first_database(label_studio)
    sync_playwright = playwright_with_chromium()

    with one_participant(label_studio, client, tmp_path, "health", f"decimal comma {locale}",
                         "COMMA" + locale.replace("-", "")) as (project, project_id, account, url), \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(locale=locale, viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{url}/s/{account.participant_id}/{account.access}")
        page.goto(f"{url}/label/health")
        page.wait_for_selector("#editor[data-task]", timeout=180_000)
        values = designed_values(project)
        fill(page, project, values)
        typed = {"explainability": ("1,0", "1"), "controllability": ("5,5", "5.5"), "machine_intelligence": ("0,9", "0.9")}
        for name, (text, shown) in typed.items():
            box = page.locator(f'input[name="{name}"]')
            box.fill("")
            box.click()
            page.keyboard.type(text)
            page.keyboard.press("Tab")
            assert box.input_value() == shown, (name, box.input_value())
            # the note is under this field and says what it holds, in words that read right
            note, field = page.locator("#comma-note"), box.bounding_box()
            assert note.is_visible() and note.inner_text() == (
                f"A decimal comma is read as a decimal point: this field holds {shown}."), note.inner_text()
            assert 0 <= note.bounding_box()["y"] - (field["y"] + field["height"]) <= 20
            assert abs(note.bounding_box()["x"] - field["x"]) <= 2
        box = page.locator('input[name="machine_intelligence"]')  # 0.9 is off the scale: the designed value instead
        box.fill("")
        box.click()
        page.keyboard.type(str(values["machine_intelligence"]).replace(".", ","))
        page.locator("button", has_text="Submit").first.click()
        mine = [a for _, a in annotations_of(client, page, [project_id], account.user_id)]
        browser.close()
    [annotation] = mine
    stored = result_values(annotation["result"])
    assert stored == {**values, "explainability": 1.0, "controllability": 5.5,
                      "machine_intelligence": values["machine_intelligence"]}


def test_an_unrated_slider_looks_unrated_and_its_midpoint_is_one_click(label_studio, client, tmp_path):
    """Sotopia's sliders: before any rating no handle is drawn and "not rated yet" shows beside the scale's ends
    (a browser would draw the handle at mid-range, where it looks rated); each slider is wide, with a tick per whole
    number; one click on the middle rates the midpoint (the browser gives no event for it: the gateway's page does);
    the stored annotation holds it."""
    from .test_browser import CHROMIUM, CHROMIUM_ARGS, designed_values, fill

    only_on_the_first_database(label_studio)
    sync_playwright = playwright_with_chromium()

    with one_participant(label_studio, client, tmp_path, "sotopia", "slider study", "SLIDER1") as (
            project, project_id, account, url), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{url}/s/SLIDER1/{account.access}")
        page.goto(f"{url}/label/sotopia")
        page.wait_for_selector("#editor[data-task]", timeout=180_000)
        page.locator("button", has_text="Submit").first.wait_for(timeout=180_000)
        sliders = [c.name for c in project.interface.controls if c.attr.get("slider") == "true"]
        looks = page.evaluate("""(names) => names.map((name) => {
            const input = document.querySelector(`input[name="${name}"]`), box = input.parentElement;
            return {unrated: getComputedStyle(box.querySelector('output'), '::before').content,
                    low: getComputedStyle(box, '::before').content, high: getComputedStyle(box, '::after').content,
                    width: input.getBoundingClientRect().width, min: input.min, max: input.max};
        })""", sliders)
        for name, look in zip(sliders, looks):
            assert look["unrated"] == '"not rated yet"', (name, look)
            assert (look["low"], look["high"]) == (f'"{look["min"]}"', f'"{look["max"]}"'), (name, look)
            assert look["width"] / (float(look["max"]) - float(look["min"])) >= 30, (name, look)  # 30 px a step
        values = designed_values(project)
        fill(page, project, {k: v for k, v in values.items() if k != "agent1_goal"})
        goal = page.locator('input[name="agent1_goal"]')
        goal.evaluate("(el) => el.scrollIntoView({block: 'center'})")  # clear of the sticky bar of buttons
        page.wait_for_timeout(300)
        box = goal.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # the midpoint, 5, in one click
        page.wait_for_function("() => document.querySelector('input[name=\"agent1_goal\"]').getAttribute('value')"
                               " !== ''", timeout=5000)
        assert goal.get_attribute("value") == "5"
        assert page.locator('input[name="agent1_goal"] + output').inner_text().strip() == "5"
        assert page.evaluate("""() => getComputedStyle(document.querySelector('input[name="agent1_goal"] + output'),
                                '::before').content""") in ("none", "normal")
        page.locator("button", has_text="Submit").first.click()
        mine = [a for _, a in annotations_of(client, page, [project_id], account.user_id)]
        browser.close()
    [annotation] = mine
    assert result_values(annotation["result"]) == {**values, "agent1_goal": 5}


def test_a_task_others_hold_is_not_the_end_of_a_participants_work(label_studio, client, reg, tmp_path):
    """No task is free for a participant while the tasks they still have to do are held by others: two participants
    work on the only task (overlap 2; held in the ledger from serving to answering, as Label Studio's own lock holds
    a task; a crowd test once sent a participant away with a task left that way). The gateway tells the participant
    to wait (503, which the page asks again) instead of sending them away, and says they are finished only when no
    task is left for them."""
    from .test_cli import _projects_file

    def one_task_for_two(raw):
        raw["projects"]["dialogue"].update({"title": "held tasks", "annotators_per_task": 2})
    projects_file = _projects_file(tmp_path, one_task_for_two)
    project = registry.load(projects_file).get("dialogue")
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "h0", "context": "A: how was the concert?",
                                 "responses": [{"system": "s", "text": "loud, and very good"}]}) + "\n")
    import_files(project, importers.get("dialogue"), [items], client)
    folder = tmp_path / "participants"
    participants.add(client, ["HELD1", "HELD2", "HELD3"], folder)
    accounts = participants.load_accounts(folder)
    good = [{"from_name": c.name, "to_name": c.to_names[0], "type": "rating", "value": {"rating": 3}}
            for c in controls_of(project).values()]
    with gateway_process(label_studio, "dialogue", folder, projects_file) as url:
        study = {"url": url, "accounts": accounts}
        one, two, three = (signed_in(study, pid) for pid in ("HELD1", "HELD2", "HELD3"))
        first, second = one.get("/api/next/dialogue").json(), two.get("/api/next/dialogue").json()
        assert "ref" in first and "ref" in second, (first, second)
        from .test_browser import CHROMIUM, CHROMIUM_ARGS

        with playwright_with_chromium()() as p:  # the labeling page says so and keeps asking
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{url}/s/HELD3/{accounts['HELD3'].access}")
            page.goto(f"{url}/label/dialogue")
            page.locator("#status", has_text="being worked on by other participants").wait_for(timeout=60_000)
            assert "checks again every 30 seconds" in page.inner_text("#status")
            assert page.locator("#editor").get_attribute("data-task") is None  # no task, and no end message
            browser.close()
        for _ in range(2):  # held by two locks, then by one annotation and one lock
            held = three.get("/api/next/dialogue")
            assert held.status_code == 503 and held.json()["wait"] is True
            assert "being worked on by other participants" in held.json()["error"]
            assert one.post(f"/api/submit/{first['ref']}", json={"result": good}).status_code in (200, 409)
        assert two.post(f"/api/submit/{second['ref']}", json={"result": good}).json() == {"ok": True}
        done = three.get("/api/next/dialogue")
        assert done.status_code == 200 and "no more tasks" in done.json()["finished"]


@pytest.mark.parametrize("protocol", PROJECTS)
def test_an_answer_counts_only_when_every_required_control_is_answered(reg, protocol):
    """Per protocol: the designed answer to every control passes the gateway's check; leaving out any one control
    the config marks required is refused with its name; the origin a browser sends never passes."""
    from evalstudio.values.results import region

    from .test_browser import designed_values

    project = reg.entry(protocol)
    controls = controls_of(project)
    full = [{**region(project.interface, name, value), "origin": "prediction"}
            for name, value in designed_values(project).items()]
    assert all("origin" not in r for r in check_result(full, controls, complete=True))
    required = [c.name for c in controls.values() if c.required]
    assert required  # every protocol asks for something
    for name in required:
        with pytest.raises(Refused, match=name):
            check_result([r for r in full if r["from_name"] != name], controls, complete=True)
    with pytest.raises(Refused, match="not answered"):
        check_result([], controls, complete=True)
