"""A study's front matter (issue 70): its declaration under crowd: in projects.yaml, checked with file:line errors
that name the fix, and its parsers against hostile input. (The gateway's steps: tests/test_front_gateway.py.)"""

from __future__ import annotations

import json
import re

import pytest

from evalstudio.base.errors import RegistryError
from evalstudio.protocols import registry
from evalstudio.protocols.front_matter import PREFER_NOT, Question, check_answers, practice_items, read_practice

from .conftest import FUZZ_PROFILE  # noqa: F401 (the Hypothesis profile is registered there)
from .test_cli import _projects_file

EXAMPLE = "squality_pairwise"  # the shipped protocol whose entry is the worked example


def _crowd(raw, **changes):
    raw["projects"][EXAMPLE]["crowd"].update(changes)


def _practice_file(tmp_path, lines: list[str]) -> str:
    path = tmp_path / "practice.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _item(old: str, new: str):
    """A change of the worked example whose practice file is one item, GOOD_ITEM with `old` replaced by `new`."""
    return lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["practice"].update(
        items=_practice_file(tmp, [GOOD_ITEM.replace(old, new)]))


GOOD_ITEM = json.dumps({"data": {"story": "s", "question": "q", "response_a": "a", "response_b": "b"},
                        "expected": {"preference": "Response A is better"}, "explanation": "A says it."})

# (case, a change of the worked example, what the message says: the key or file and line, and the fix)
BAD = [
    ("consent text and file", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["consent"].update(file="c.html"),
     r"projects\.yaml:\d+: projects\.squality_pairwise\.crowd\.consent: .*give the consent wording as text: or as file:"),
    ("consent without statements", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["consent"].update(statements=[]),
     r"projects\.yaml:\d+: projects\.squality_pairwise\.crowd\.consent\.statements: "),
    ("consent file missing", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["consent"].update(
        text=None, file=str(tmp / "nowhere.html")),
     r"projects\.yaml:\d+: projects\.squality_pairwise\.crowd\.consent\.file: cannot read .*nowhere\.html"),
    ("practice without consent", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"].pop("consent"),
     r"projects\.yaml:\d+: projects\.squality_pairwise\.crowd\.consent: practice, background and exit_survey need "
     r"consent first"),
    ("a practice line not JSON", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["practice"].update(
        items=_practice_file(tmp, [GOOD_ITEM, "{not json"])),
     r"practice\.jsonl:2: not a JSON object; each line is one item: .*\(named at .*projects\.yaml:\d+: "
     r"projects\.squality_pairwise\.crowd\.practice\.items\)"),
    ("a practice answer off the scale", _item("Response A is better", "A"),
     r"practice\.jsonl:1: expected\.preference: .*'A'.* not among preference's choices"),
    ("a practice control unknown", _item('"preference"', '"winner"'),
     r"practice\.jsonl:1: expected: 'winner' is not a control of the labeling config; valid names: preference"),
    ("a practice item without a field", _item('"story": "s", ', ""),
     r"practice\.jsonl:1: data lacks story \(the fields the labeling config shows\)"),
    ("a practice item without explanation", _item('"A says it."', '""'),
     r"practice\.jsonl:1: give data .* expected .* and explanation"),
    ("min_correct above the items", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["practice"].update(
        min_correct=9), r"projects\.yaml:\d+: projects\.squality_pairwise\.crowd\.practice\.min_correct: 9 is more "
     r"than the 3 practice items; lower it or add items"),
    ("a choice question with one choice", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["background"][1].update(
        choices=["Yes"]), r"projects\.yaml:\d+: projects\.squality_pairwise\.crowd\.background\.1: .*two or more "
     r"different choices"),
    ("prefer not to say twice", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["background"][1].update(
        choices=["Yes", "No", PREFER_NOT]), r"crowd\.background\.1: .*is added by prefer_not_to_say: true; leave it "
     r"out of choices"),
    ("two questions of one name", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["exit_survey"][1].update(
        name="difficulty"), r"projects\.yaml:\d+: projects\.squality_pairwise\.crowd\.exit_survey: two questions share "
     r"a name; give each its own"),
    ("a question named as the id column", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["background"][1].update(
        name="annotator"), r"projects\.yaml:\d+: projects\.squality_pairwise\.crowd\.background\.1: .*'annotator' "
     r"names a column of the background file .* give the question another name"),
    ("a range on a text question", lambda raw, tmp: raw["projects"][EXAMPLE]["crowd"]["exit_survey"][1].update(min=1),
     r"crowd\.exit_survey\.1: .*only a number question has a range"),
    ("front matter twice in one study", lambda raw, tmp: (
        raw["projects"]["circa_part1"]["crowd"].update(consent={"text": "x", "statements": ["I agree."]}),
        raw["projects"]["circa_part2"]["crowd"].update(consent={"text": "y", "statements": ["I agree."]})),
     r"projects\.yaml:\d+: projects\.circa_part2\.crowd\.consent: the study 'circa' has its front matter on "
     r"'circa_part1' already; declare it once"),
]


@pytest.mark.parametrize("case, mutate, message", BAD, ids=[c[0] for c in BAD])
def test_a_wrong_front_matter_is_reported_at_its_line_with_the_fix(tmp_path, case, mutate, message):
    path = _projects_file(tmp_path, lambda raw: mutate(raw, tmp_path))
    with pytest.raises(RegistryError) as e:
        registry.load(path)
    assert re.search(message, str(e.value)), str(e.value)


def test_the_worked_example_loads_with_its_wording_verbatim():
    project = registry.load().get(EXAMPLE)
    crowd = project.crowd
    assert "This consent text is an example. The researcher running this study replaces it with their own." in \
        crowd.consent.text
    assert [len(practice_items(project)), crowd.practice.min_correct] == [3, 2]
    assert [q.name for q in crowd.background] == ["age", "english", "reading"]
    assert crowd.background[1].options == ["Yes", "No", PREFER_NOT]


ANSWERS = [  # (question, answer given, stored or the problem)
    (dict(type="number", min=18, max=120), "34", 34),
    (dict(type="number", min=18, max=120), "34,5", 34.5),
    (dict(type="number", min=18, max=120), "17", "from 18 to 120"),
    (dict(type="number", min=18, max=120), "1e3", "give a number"),
    (dict(type="number", min=18, max=120), True, "give a number"),
    (dict(type="number", min=18, max=120, prefer_not_to_say=True), PREFER_NOT, PREFER_NOT),
    (dict(type="number", min=18, max=120), PREFER_NOT, "give a number"),
    (dict(type="choice", choices=["Yes", "No"]), "Yes", "Yes"),
    (dict(type="choice", choices=["Yes", "No"]), "Maybe", "choose one of the answers given"),
    (dict(type="choice", choices=["Yes", "No"]), ["Yes"], "choose one of the answers given"),
    (dict(type="choice", choices=["Yes", "No"]), None, "please answer"),
    (dict(type="text", required=False), None, None),
    (dict(type="text", max_length=5), "123456", "at most 5 characters"),
    (dict(type="text", max_length=5), {"a": 1}, "give text"),
    (dict(type="text"), "a\ud800b", "unpaired surrogate"),  # (PostgreSQL's and SQLite's drivers refused it: a 500)
    (dict(type="text"), "a\x00b", "NUL character"),
]


@pytest.mark.parametrize("spec, given, expected", ANSWERS)
def test_an_answer_is_stored_as_given_or_refused_with_why(spec, given, expected):
    question = Question(name="q", text="The question?", **spec)
    if isinstance(expected, str) and expected != PREFER_NOT and expected not in ("Yes",):
        with pytest.raises(ValueError, match=re.escape(expected)):
            check_answers([question], {"q": given})
    else:
        assert check_answers([question], {"q": given}) == {"q": expected}


def test_hostile_practice_files_and_answers_are_refused_never_crashed_on(tmp_path):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                               lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                           max_size=4), max_leaves=12)
    questions = [Question(name="age", text="Age?", type="number", min=18, max=99, prefer_not_to_say=True),
                 Question(name="yes", text="Yes?", type="choice", choices=["Yes", "No"]),
                 Question(name="free", text="Free?", type="text", required=False, max_length=30)]

    @settings(deadline=None)  # cases: the HYPOTHESIS_PROFILE (conftest.py)
    @given(lines=st.lists(st.text(max_size=80) | json_values.map(json.dumps), max_size=5), body=json_values)
    def check(lines, body):
        path = tmp_path / "fuzz.jsonl"
        path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass") if all(
            not re.search(r"[\ud800-\udfff]", line) for line in lines) else path.write_text("", encoding="utf-8")
        items, problems = read_practice(path)
        assert all(isinstance(i["data"], dict) and i["expected"] and i["explanation"].strip() for i in items)
        assert all(p.startswith(str(path)) for p in problems)
        try:
            answers = check_answers(questions, body)
        except ValueError:
            return
        assert set(answers) == {"age", "yes", "free"}
        assert answers["age"] == PREFER_NOT or 18 <= answers["age"] <= 99
        assert answers["yes"] in ("Yes", "No")
        assert answers["free"] is None or len(answers["free"]) <= 30
    check()
