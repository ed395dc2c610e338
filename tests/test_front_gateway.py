"""A study's front matter in the gateway (issue 70): consent, practice, background and exit survey served in order,
each recorded in the ledger with the server's time, and no route giving a task (or a completion code) to a
participant who has not taken the steps before it, whatever they call. In process (Starlette's test client, no
Label Studio: a route that passes the front matter and needs Label Studio answers 503, which the tests read as
"let through"); the whole flow in a browser against a real Label Studio is tests/test_front_browser.py."""

from __future__ import annotations

import json
import time

import numpy
import pytest
from starlette.testclient import TestClient

from evalstudio.crowd.ledger import Account
from evalstudio.gateway import GatewayConfig, build_app
from evalstudio.gateway.checks import controls_of
from evalstudio.gateway.front import ENDED, NOT_YET, front_of
from evalstudio.gateway.setup import Part, panels_open, without_comments
from evalstudio.protocols import registry
from evalstudio.protocols.front_matter import practice_items

from .test_gateway import ROUTES, concrete

EXAMPLE = "squality_pairwise"
CODE = "DONE7C0DE"  # the completion code: never shown before the exit survey
UNREACHABLE = "http://127.0.0.1:23001"  # no Label Studio (the port range of this test's author; nothing listens)
HEADERS = {"X-Evalstudio": "1"}
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def part_of(project) -> Part:
    """The gateway's Part of a project, as load_parts makes it (without Label Studio: project id 1, overlap 3)."""
    config = without_comments(project.config_for("gateway"))
    return Part(project.name, project.entry_title, 1, config, without_comments(project.instructions_for("gateway")),
                frozenset(project.data_fields()), controls_of(project), None,
                project.crowd.after if project.crowd else None, False, project.entry, project.list_number, None,
                project.order, None, 3, None, panels_open(config))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """One in-process gateway of the worked example (squality_pairwise's front matter), its ledger in SQLite."""
    project = registry.load().get(EXAMPLE)
    folder = tmp_path_factory.mktemp("front") / "participants"
    config = GatewayConfig(study="Front matter", parts=[part_of(project)], label_studio_url=UNREACHABLE, api_key="k",
                           participants_folder=folder, public_url="http://127.0.0.1:23000", completion_code=CODE,
                           front=front_of([project]), front_end={"feature_flags": {}, "sentry_environment": "",
                                                                  "feature_flags_default_value": False})
    app = build_app(config)
    return app.state.gateway, app, project


def participant(gateway, name: str) -> TestClient:
    """A signed-in participant's browser (a session of the ledger's, as a personal link opens one)."""
    gw, app, _ = gateway
    gw.ledger.reserve(Account(name, f"{name.lower()}@participants.invalid", "pw", access="c0de"))
    web = TestClient(app, follow_redirects=False)
    web.cookies.set("evalstudio_gateway", gw.ledger.open_session(name, 24))
    return web


def answer(project, item: dict, right: bool) -> list[dict]:
    """A practice answer: the item's expected choice, or another."""
    labels = project.criteria["preference"].labels
    want = item["expected"]["preference"]
    choice = want if right else next(label for label in labels if label != want)
    return [{"from_name": "preference", "to_name": "question", "type": "choices", "value": {"choices": [choice]}}]


def at(gateway, name: str, stage: str) -> None:
    """Bring participant `name` to `stage` through the gateway's own routes (as their browser would)."""
    gw, _, project = gateway
    web = participant(gateway, name)
    if stage == "consent":
        return
    ticks = [True] * len(gw.config.front.statements)
    assert web.post("/api/front/consent", json={"accept": stage != "declined", "statements": ticks},
                    headers=HEADERS).status_code == 200
    if stage in ("declined", "practice"):
        return
    for number, item in enumerate(practice_items(project), 1):
        right = stage != "screened_out"
        assert web.post(f"/api/practice/{number}", json={"result": answer(project, item, right)},
                        headers=HEADERS).status_code == 200
    if stage in ("screened_out", "background"):
        return
    assert web.post("/api/front/background", json={"answers": {"age": "41", "english": "No",
                                                               "reading": "Every week"}},
                    headers=HEADERS).status_code == 200


BLOCKED = ["consent", "declined", "practice", "screened_out", "background"]


@pytest.mark.parametrize("stage", BLOCKED)
def test_no_route_gives_a_task_or_a_completion_code_before_the_front_matter_is_done(gateway, stage):
    """Every route of the gateway and of Label Studio's URL configuration, with every method, from a participant at a
    step before the tasks (who holds a task reference, as one guessed or served before would): task routes refuse
    with the front matter's message, the labeling page sends them to the start page, nothing answers with task data
    or the completion code."""
    gw, _, project = gateway
    name = f"WALK{stage.upper().replace('_', '')}"
    at(gateway, name, stage)
    web = participant(gateway, name)
    ref = gw.ledger.serve(name, project.name, 1).ref
    own = [f"/api/{action}/{arg}" for action in ("next", "task", "submit", "update")
           for arg in (project.entry, ref, "x")] + ["/label/" + project.entry, "/", "/practice", "/api/front/exit",
                                                     "/api/practice/next", "/api/practice/1", "/health"]
    label_studio = [concrete(p) for p in json.loads(ROUTES.read_text())]
    for path in own + label_studio:
        for method in METHODS if path in own else ("GET", "POST"):  # (Label Studio's: the gateway has no other)
            reply = web.request(method, path, headers=HEADERS, json={"result": [], "answers": {}})
            assert CODE not in reply.text, (method, path)
            assert reply.status_code != 503, (method, path, "let through to Label Studio")
            if path.startswith("/api/") and path.split("/")[2] in ("next", "task", "submit", "update") \
                    and method in ("GET", "POST"):
                assert reply.status_code == 403 and reply.json()["error"] == NOT_YET, (method, path, reply.text)
            if path == "/label/" + project.entry and method == "GET":
                assert reply.status_code == 303 and reply.headers["location"] == "/"
            if reply.headers.get("content-type", "").startswith("application/json"):
                assert "ref" not in reply.json() or (stage == "practice" and path == "/api/practice/next")
    assert not [r for r in gw.ledger.answers() if r.answered is not None]  # nothing counted


def test_once_through_the_front_matter_the_task_routes_let_the_participant_through(gateway):
    gw, _, project = gateway
    at(gateway, "WORKER", "working")
    web = participant(gateway, "WORKER")
    assert web.get(f"/api/next/{project.entry}", headers=HEADERS).status_code == 503  # on to Label Studio (absent)
    assert web.get("/label/" + project.entry).status_code == 200
    # the exit survey is the end's: not before the parts are finished
    assert web.post("/api/front/exit", json={"answers": {"difficulty": "Easy"}}, headers=HEADERS).status_code == 409


def test_each_step_is_recorded_once_with_the_server_time_and_the_researchers_wording_shown(gateway):
    gw, _, project = gateway
    front = gw.config.front
    web = participant(gateway, "STEPPER")
    page = web.get("/").text
    assert front.consent in page and all(s in page for s in front.statements)  # verbatim
    refused = web.post("/api/front/consent", json={"accept": True, "statements": [True, False]}, headers=HEADERS)
    assert refused.status_code == 400 and "tick every statement" in refused.json()["error"]
    before = time.time()
    assert web.post("/api/front/consent", json={"accept": True, "statements": [True, True]},
                    headers=HEADERS).json()["outcome"] == "given"
    assert web.post("/api/front/consent", json={"accept": False}, headers=HEADERS).status_code == 409  # it stays
    assert web.get("/").headers["location"] == "/practice"
    items = practice_items(project)
    first = web.get("/api/practice/next", headers=HEADERS).json()
    assert first["data"] == {k: v for k, v in items[0]["data"].items() if k in project.data_fields()}
    told = web.post("/api/practice/1", json={"result": answer(project, items[0], False)}, headers=HEADERS).json()
    assert told == {"practice": True, "correct": False, "expected": items[0]["expected"],
                    "explanation": items[0]["explanation"], "last": False}
    # answered once: a second try at the same item is not taken (the first answer stays wrong)
    assert web.post("/api/practice/1", json={"result": answer(project, items[0], True)},
                    headers=HEADERS).status_code == 404
    assert web.get("/api/practice/next", headers=HEADERS).json()["number"] == 2
    # out of the gateway's order: item 3 before item 2 is not taken
    ahead = web.post("/api/practice/3", json={"result": answer(project, items[2], True)}, headers=HEADERS)
    assert ahead.status_code == 409 and "item 2 first" in ahead.json()["error"]
    assert "practice:3" not in gw.ledger.steps_of("STEPPER")
    for number in (2, 3):
        web.post(f"/api/practice/{number}", json={"result": answer(project, items[number - 1], True)},
                 headers=HEADERS)
    assert "A few questions about you" in web.get("/").text  # 2 of 3 correct: min_correct 2 passed
    wrong = web.post("/api/front/background", json={"answers": {"age": "12", "english": "No", "reading": "Every week"}},
                     headers=HEADERS)
    assert wrong.status_code == 400 and "from 18 to 120" in wrong.json()["error"]
    assert web.post("/api/front/background", json={"answers": {"age": "Prefer not to say", "english": "Yes",
                                                               "reading": "Rarely or never"}},
                    headers=HEADERS).status_code == 200
    steps = gw.ledger.steps_of("STEPPER")
    assert sorted(steps) == ["background", "consent", "practice:1", "practice:2", "practice:3"]
    assert all(before <= s.at <= time.time() for s in steps.values())
    assert [steps[f"practice:{n}"].outcome for n in (1, 2, 3)] == ["wrong", "correct", "correct"]
    assert json.loads(steps["background"].answer) == {"age": "Prefer not to say", "english": "Yes",
                                                       "reading": "Rarely or never"}
    assert not [r for r in gw.ledger.answers() if r.participant == "stepper"]  # practice is never an answer


@pytest.mark.parametrize("platform, code, told", [
    ("prolific", "NOCONSENT1", "app.prolific.com/submissions/complete?cc=NOCONSENT1"),
    ("prolific", None, "Please return your submission on Prolific"),
    ("mturk", None, "Please return the HIT on Mechanical Turk"),
    (None, None, "You may close this page"),
])
def test_a_participant_who_declines_gets_the_platforms_return_route_never_a_completion_code(gateway, platform, code,
                                                                                             told):
    from dataclasses import replace

    gw, _, _ = gateway
    saved = gw.config.front
    gw.config.front = replace(saved, platform=platform, declined_code=code)
    try:
        name = f"NO{platform or 'lab'}{code or ''}".upper()
        web = participant(gateway, name)
        web.post("/api/front/consent", json={"accept": False}, headers=HEADERS)
        page = web.get("/").text
        assert "You did not give your consent" in page and told in page and CODE not in page
        assert gw.ledger.steps_of(name)["consent"].outcome == "declined"
        # the practice routes say the study has ended for them (they never had a practice round to be "over")
        assert web.get("/api/practice/next", headers=HEADERS).json()["error"] == ENDED
    finally:
        gw.config.front = saved


FRONT = {"consent": {"text": "<p>An example consent text.</p>", "statements": ["I agree."]},
         "background": [{"name": "age", "text": "Age?", "type": "number", "min": 18, "max": 99}],
         "exit_survey": [{"name": "said", "text": "Anything else?", "type": "text", "required": False}]}
# one row per study and its part ordering: (study, the part that declares the front matter, its parts in order)
ORDERINGS = [
    ("squality_pairwise", None, ["squality_pairwise"]),  # the worked example: one part, with practice
    ("cmv", "cmv_tom", ["cmv_threads", "cmv_tom"]),  # the blind part first; declared on the part done second
    ("circa", "circa_part1", ["circa_part1", "circa_part2"]),  # Part II's gate, and its counterbalanced lists
    # every other shipped protocol, one part each (a crowd: section added where the entry has none)
    ("sotopia", "sotopia", ["sotopia"]),
    ("dialogue", "dialogue", ["dialogue"]),
    ("health", "health", ["health"]),
    ("squality", "squality", ["squality"]),
    ("mqm", "mqm", ["mqm"]),
    ("esa", "esa", ["esa"]),
]


@pytest.mark.parametrize("study, declaring, order", ORDERINGS, ids=[o[0] for o in ORDERINGS])
def test_the_front_matter_comes_before_every_part_and_the_exit_survey_after_the_last(tmp_path, study, declaring,
                                                                                     order):
    from .test_cli import _projects_file

    def declare(raw):
        if declaring:
            entry = raw["projects"][declaring]
            if not entry.get("crowd"):
                entry["crowd"] = {}
            entry["crowd"].update(FRONT)
    projects = registry.load(_projects_file(tmp_path, declare)).parts(study)
    config = GatewayConfig(study=study, parts=[part_of(p) for p in projects], label_studio_url=UNREACHABLE,
                           api_key="k", participants_folder=tmp_path / "participants",
                           public_url="http://127.0.0.1:23000", completion_code=CODE, front=front_of(projects),
                           front_end={})
    app = build_app(config)
    gw = app.state.gateway
    web = participant((gw, app, projects[0]), "ORDERED")
    entries = list(dict.fromkeys(p.entry for p in projects))
    assert entries == order
    for entry in entries:  # before consent: no part's tasks
        assert web.get(f"/api/next/{entry}", headers=HEADERS).json()["error"] == NOT_YET
    ticks = [True] * len(config.front.statements)
    web.post("/api/front/consent", json={"accept": True, "statements": ticks}, headers=HEADERS)
    for number, item in enumerate(config.front.practice, 1):
        web.post(f"/api/practice/{number}", json={"result": answer(projects[0], item, True)}, headers=HEADERS)
    for entry in entries:  # before the background questions: none either
        assert web.get(f"/api/next/{entry}", headers=HEADERS).json()["error"] == NOT_YET
    background = {q.name: 30 if q.type == "number" else q.options[0] for q in config.front.background}
    assert web.post("/api/front/background", json={"answers": background}, headers=HEADERS).status_code == 200
    assert web.post("/api/front/background", json={"answers": background}, headers=HEADERS).status_code == 409
    start = web.get("/").text
    if study == "circa":
        assert "Starts once you have finished" in start  # Part II's gate stands after the front matter
    for number, entry in enumerate(entries, 1):
        assert web.get(f"/api/next/{entry}", headers=HEADERS).json().get("error") != NOT_YET  # let through
        assert "Before you go" not in web.get("/").text and CODE not in web.get("/").text
        for project in projects:
            if project.entry == entry:
                if project.list_number is not None:
                    gw.ledger.assign_list(entry, "ORDERED", [1, 2], 1)
                gw.ledger.finish("ORDERED", project.name)
    end = web.get("/").text
    assert ("Before you go" in end) == bool(config.front.exit_survey) and CODE not in end
    if config.front.exit_survey:
        answers = {q.name: q.options[0] if q.type == "choice" else "fine" for q in config.front.exit_survey}
        assert web.post("/api/front/exit", json={"answers": answers}, headers=HEADERS).status_code == 200
    assert CODE in web.get("/").text
    assert sorted(gw.ledger.steps_of("ORDERED")) == sorted(
        ["consent", "background", "exit"] + [f"practice:{n}" for n in range(1, len(config.front.practice) + 1)])


def test_status_export_and_datasheet_read_the_front_matter_as_counts_never_rows(tmp_path):
    """Five participants at every step: `status`'s table says where each is, the background table holds one row per
    participant who answered (apart from the ratings), and the datasheet's D3, D5, 3.2.4 and 3.2.5 give the consent
    wording, the counts and the practice pass rate without any participant's id or free text."""
    from evalstudio.crowd.front_record import background_frame, front_facts, where_each
    from evalstudio.crowd.ledger import Ledger
    from evalstudio.exporters.publication import datasheet

    project = registry.load().get(EXAMPLE)
    book = Ledger(tmp_path)
    given = json.dumps({"accepted": True})
    plan = {  # participant -> (consent, practice outcomes, background, exit)
        "PDECLINE": ("declined", [], None, None),
        "PPRACTICE": ("given", ["correct"], None, None),
        "PSCREENED": ("given", ["wrong", "wrong", "correct"], None, None),
        "PWORKING": ("given", ["correct", "wrong", "correct"], {"age": 30, "english": "Yes", "reading": "Every week"},
                     None),
        "PSURVEYED": ("given", ["correct"] * 3, {"age": "Prefer not to say", "english": "No", "reading": "Every week"},
                      {"difficulty": "Easy", "comments": "my name is Jo"}),
    }
    for n in range(3):  # (five background answers: enough for counts to be published)
        plan[f"PEXTRA{n}"] = ("given", ["correct"] * 3, {"age": 40 + 2 * n, "english": "Yes", "reading": "Every week"},
                              None)
    for who, (consent, practice, background, exit_) in plan.items():
        book.reserve(Account(who, f"{who.lower()}@participants.invalid", "pw"))
        book.take_step(who, "consent", given, consent)
        for number, outcome in enumerate(practice, 1):
            book.take_step(who, f"practice:{number}", "[]", outcome)
        if background:
            book.take_step(who, "background", json.dumps(background))
        if exit_:
            book.take_step(who, "exit", json.dumps(exit_))
    steps = dict(zip(*where_each(book, project)[["participant", "step"]].to_dict("list").values()))
    assert steps == {"PDECLINE": "declined", "PPRACTICE": "practice", "PSCREENED": "screened_out",
                     "PWORKING": "working", "PSURVEYED": "surveyed", **{f"PEXTRA{n}": "working" for n in range(3)}}
    frame = background_frame(book, project)
    assert list(frame["participant"])[:2] == ["PWORKING", "PSURVEYED"] and "rating" not in frame.columns
    assert list(frame["annotator"])[:2] == ["pworking@participants.invalid", "psurveyed@participants.invalid"]
    assert frame.loc[1, "exit.comments"] == "my name is Jo"
    facts = {"annotators": 2, "live": True, "items_per_system": {}, "label_studio": "x", "evalstudio": "y",
             "flagged": 0, "rejected": 0, "gold_items": 0, "criteria": [], "parts": [], "free_text": 0,
             "front": front_facts(book, project)}
    assert facts["front"]["practice"] == {"items": 3, "min_correct": 2, "finished": 6, "passed": 5,
                                          "pass_rate": 5 / 6}
    answers = {a.number: a for a in datasheet.heds_answers(facts) + datasheet.checklist_d(facts)}
    d3, d5 = answers["D3"], answers["D5"]
    assert d3.status == datasheet.ANSWERED and "This consent text is an example." in d3.answer
    assert "7 participant(s) consented, 1 declined" in d3.answer
    assert "“Is English your first language?” (5 answered, 0 preferred not to say; Yes: 4, No: 1)" in d5.answer
    # (four ages, the fifth preferred not to say: no median of fewer than five numbers; test_no_median_of_...)
    assert ("“What is your age (in years)?” (5 answered, 1 preferred not to say; 4 gave a number, fewer than 5: no "
            "median") in d5.answer
    assert "5 of 6 participants who finished it passed (83.33%)" in answers["3.2.4"].answer
    assert answers["3.2.5"].answer == d5.answer
    text = json.dumps([a.answer for a in answers.values()])
    assert not any(who in text for who in plan) and "my name is Jo" not in text
    # fewer than five answers: not broken down
    facts["front"]["background"][0]["answered"] = 4
    assert "(4 answered; fewer than 5: not broken down" in datasheet.checklist_d(facts)[4].answer


# (ages given, of five or more answers with "prefer not to say"): a median only of five numbers or more
AGES = [([41, None, None, None, None], False), ([30, 40, 42, 44, None], False), ([30, 40, 42, 44, 47, None], True)]


@pytest.mark.parametrize("ages, broken_down", AGES)
def test_no_median_of_fewer_than_five_numbers_whatever_preferred_not_to_say(tmp_path, ages, broken_down):
    """Five answers of which four preferred not to say: the 'median' and 'middle half' were the one participant's
    age. The datasheet gives a number question's median only over five numbers or more."""
    from evalstudio.crowd.front_record import front_facts
    from evalstudio.crowd.ledger import Ledger
    from evalstudio.exporters.publication import front_answers
    from evalstudio.protocols.front_matter import PREFER_NOT

    project = registry.load().get(EXAMPLE)
    book = Ledger(tmp_path)
    for n, age in enumerate(ages):
        book.take_step(f"P{n}", "background", json.dumps({"age": PREFER_NOT if age is None else age,
                                                          "english": "Yes", "reading": "Every week"}))
    said = front_answers.demographics(front_facts(book, project))
    numbers = [a for a in ages if a is not None]
    low, middle, high = (f"{v:g}" for v in numpy.percentile(numbers, [25, 50, 75]))  # numpy: the independent oracle
    assert (f"median {middle}, middle half {low} to {high}" in said) == broken_down, said
    assert ("no median, so that no participant's answer shows" in said) != broken_down, said


# (a practice item's reference as sent: only the gateway's own "1".."3" names an item)
ODD_REFS = ["²", "١", "01", "0", "4", "9" * 5000, "-1"]


@pytest.mark.parametrize("ref", ODD_REFS, ids=range(len(ODD_REFS)))
def test_an_odd_practice_reference_is_not_found_never_a_server_error(gateway, ref):
    """str.isdigit() took "²" (int() then failed: a 500) and "١" (Arabic-Indic one: recorded as item 1)."""
    gw, _, project = gateway
    name = f"ODDREF{ODD_REFS.index(ref)}"
    at(gateway, name, "practice")
    web = participant(gateway, name)
    reply = web.post(f"/api/practice/{ref}", json={"result": answer(project, practice_items(project)[0], True)},
                     headers=HEADERS)
    assert reply.status_code == 404 and reply.json() == {"error": "not found"}
    assert sorted(gw.ledger.steps_of(name)) == ["consent"]


@pytest.mark.parametrize("text, stored", [("fine 👍", True), ("a\ud800b", False), ("a\x00b", False)])
def test_a_text_answer_the_ledger_cannot_store_is_refused_not_a_server_error(text, stored):
    """A TextArea answer (a task's or a practice item's) with a lone surrogate passed the checks and failed the
    ledger's write (UnicodeEncodeError: a 500 on SQLite and PostgreSQL alike)."""
    from evalstudio.gateway.checks import Refused, check_result

    controls = controls_of(registry.load().get("cmv_threads"))
    region = {"from_name": "note", "to_name": "comment", "type": "textarea", "value": {"text": [text]}}
    if stored:
        assert check_result([region], controls)[0]["value"] == {"text": [text]}
    else:
        with pytest.raises(Refused, match="note: not a text"):
            check_result([region], controls)


# (served protocol, the part that declares the front matter, refused?): a part served alone, while its study's front
# matter is declared on another part, would let its participants reach tasks without consenting
SERVED_ALONE = [
    ("circa_part2", "circa_part1", True),
    ("circa_part2_list1", "circa_part1", True),
    ("cmv_threads", "cmv_tom", True),
    ("circa", "circa_part1", False),
    ("circa_part1", "circa_part1", False),
    ("circa_part2", None, False),
]


@pytest.mark.parametrize("served, declaring, refused", SERVED_ALONE)
def test_a_part_is_not_served_alone_without_its_studys_front_matter(tmp_path, served, declaring, refused):
    from evalstudio.base.errors import BadInput
    from evalstudio.operations.serving import check_front_matter_served

    from .test_cli import _projects_file

    def declare(raw):
        if declaring:
            raw["projects"][declaring]["crowd"].update(FRONT)
    reg = registry.load(_projects_file(tmp_path, declare))
    if refused:
        with pytest.raises(BadInput, match=f"evalstudio gateway {reg.get(declaring).study}"):
            check_front_matter_served(reg, served, reg.parts(served))
    else:
        check_front_matter_served(reg, served, reg.parts(served))


# the end of a finished study, per platform and completion code: (platform, code, what the page says, what it must not)
FINISHED = [
    ("prolific", "C0DE1", ["Your completion code: <b>C0DE1</b>", "submissions/complete?cc=C0DE1"], ["Mechanical Turk"]),
    ("mturk", "C0DE2", ["Your completion code: <b>C0DE2</b>", "enter it in the HIT", "submit the HIT"], ["Prolific"]),
    ("mturk", None, ["go back to the HIT on Mechanical Turk and submit it"], ["completion code"]),
    (None, "C0DE3", ["Your completion code: <b>C0DE3</b>"], ["Prolific", "Mechanical Turk"]),
    (None, None, ["You have finished every part of this study."], ["completion code", "Prolific", "Mechanical Turk"]),
]


@pytest.mark.parametrize("platform, code, said, unsaid", FINISHED)
def test_the_end_page_sends_a_finished_participant_back_to_the_platform(platform, code, said, unsaid):
    """A finished participant is told where to go: Prolific's return link with the code, or on MTurk to submit the
    HIT (its payment follows the submission: the page said nothing of it where the study had no code)."""
    from evalstudio.gateway import pages

    page = pages.start("n", "Study", "P1", [{"name": "a", "title": "A", "state": "finished"}], code, platform)
    assert "You have finished every part of this study." in page
    assert all(s in page for s in said), [s for s in said if s not in page]
    assert not any(s in page for s in unsaid), [s for s in unsaid if s in page]


def test_export_finds_the_front_matter_in_the_participants_folder_given_and_says_when_it_has_none(tmp_path):
    """`export --participants FOLDER` writes the background and exit-survey answers of a study whose participants'
    folder is not the default one (export had no such option: the answers were left out without a word); without a
    ledger there, export says why they are missing, and a study without a front matter has nothing to say."""
    from typer.testing import CliRunner

    from evalstudio.cli import app
    from evalstudio.crowd.ledger import Ledger
    from evalstudio.operations import status

    parts = registry.load().parts(EXAMPLE)
    folder = tmp_path / "pp"
    book = Ledger(folder)
    book.reserve(Account("W1", "w1@participants.invalid", "pw"))
    book.take_step("W1", "consent", json.dumps({"accepted": True}), "given")
    book.take_step("W1", "background", json.dumps({"age": "Prefer not to say", "english": "No",
                                                   "reading": "Rarely or never"}))
    book.take_step("W1", "exit", json.dumps({"difficulty": "Easy", "comments": "Grüße, 日本語"}))
    written = status.write_background(EXAMPLE, parts, tmp_path / "a.csv", "csv", folder)
    assert written == (tmp_path / "a.background.csv", 1)
    assert "Grüße, 日本語" in written[0].read_text(encoding="utf-8")
    assert status.front_matter_unread(EXAMPLE, parts, folder) is None
    said = status.front_matter_unread(EXAMPLE, parts, tmp_path / "empty")
    assert "not in this export" in said and "--participants" in said
    assert status.front_matter_unread("dialogue", registry.load().parts("dialogue"), tmp_path / "empty") is None
    assert "--participants" in CliRunner().invoke(app, ["export", "--help"], env={"COLUMNS": "200"}).output
