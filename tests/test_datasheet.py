"""The datasheet's answers read from the labeling config (exporters/publication/datasheet.py), for every shipped protocol: HEDS
4.3.7, the verbatim question, is the heading and question shown above the control, never a level's anchor or a
choice's label (issue 65, item 7: dialogue's gave the level-5 anchor)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from evalstudio.exporters.publication.datasheet import control_facts
from evalstudio.protocols import registry

from .conftest import ROOT

REGISTRY = registry.load(ROOT / "projects.yaml")
CONTROLS = [(p.name, name, slot.control) for p in REGISTRY for name in p.criteria for slot in p.slots(name)]


def _anchors(config: str) -> set[str]:
    """The texts a config names as a scale's anchors or a choice's meaning: a Text named *anchor* or inside a View
    whose class says so (es-anchor, es-check), and every choice's label (read independently of the datasheet)."""
    root = ET.fromstring(config)
    out = {c.get("value") for c in root.iter("Choice")}
    for view in root.iter("View"):
        if any(k in (view.get("className") or "") for k in ("anchor", "check")):
            out |= {t.get("value") for t in view.iter("Text")}
    out |= {t.get("value") for t in root.iter("Text") if "anchor" in (t.get("name") or "")}
    return {v.strip() for v in out if v}


@pytest.mark.parametrize("part, criterion, control", CONTROLS, ids=[f"{p}-{c}" for p, _, c in CONTROLS])
def test_the_question_is_what_is_shown_above_the_control_never_an_anchor(part, criterion, control):
    config = REGISTRY.get(part).config_for("gateway")
    prompt = control_facts(config, control)["prompt"]
    assert prompt, (part, control)
    shown = {e.get("value").strip() for e in ET.fromstring(config).iter() if e.tag in ("Header", "Text")
             and e.get("value")}
    lines = prompt.split("\n")
    assert set(lines) <= shown  # verbatim texts of the config
    assert not set(lines) & _anchors(config), (part, control, prompt)


@pytest.mark.parametrize("part, control, question", [
    # the Header of the control's block (the anchors sit in a nested View before the stars)
    ("dialogue", "appropriateness",
     "Appropriateness: The degree to which the output is appropriate in the given context/situation."),
    ("dialogue", "human_likeness",
     "Human-likeness: The degree to which an output could have been produced by a human."),
    # the Header above the stars; the Text between them is the scale's anchors ("1 is the worst, ...")
    ("circa_part2_list1", "explanation_rating", "Rate the quality of the explanation on a scale of 1 - 5"),
    # the heading and the question under it; the Yes/No meanings (a nested View) left out
    ("cmv_threads", "q1_persuasive", "Q1 — Persuasiveness (Human Judgment)\nIn your view, is the comment persuasive — "
     "i.e., does it provide a clear, substantive reason why the OP might change their view?"),
    ("circa_part1", "interpretation_choice", "X thinks that Y means:"),
    ("sotopia", "agent2_goal", "Goal (0 to 10)"),  # the Header of the block around the slider's row
])
def test_the_question_is_the_configs_own_text(part, control, question):
    assert control_facts(REGISTRY.get(part).config_for("gateway"), control)["prompt"] == question
