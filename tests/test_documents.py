"""The protocol documents read line by line against what each channel shows (no server): every line of document 001
that addresses annotators is in the cmv_tom view of both channels, with its headings and its tables as tables (one
grid row per table row), changed only where the channel forces it; the text a gateway participant reads has none of
Label Studio's steps and the reverse."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalstudio.channels import config_for

SEEDS = Path(__file__).resolve().parent / "data" / "seeds"  # a copy of ../shared/seeds' document (tests/data/SOURCE.md)
CMV = "001_077fe21a06f91650.txt"

# lines of document 001 that a channel cannot show as written, and what it shows instead (the document's words kept,
# what the channel adds in brackets or in place of a step that does not exist there)
CHANGED = {
    "label-studio": {
        "Go to the Annotate page. You will be taken to the first unfinished sample.":
            "Go to the Annotate page (Label All Tasks). You will be taken to the first unfinished sample.",
        "Click Save & Next to save your answers and move forward, or Save & Previous to go back while saving.":
            "Click Save & Next (Label Studio's Submit, or Update for a sample you answered) to save your answers and "
            "move forward, or Save & Previous (the back arrow above the sample) to go back while saving.",
    },
    "gateway": {
        "Sign up or log in using your email and password.":
            "Open your personal study link (or the study link you followed from your crowd platform): it signs you in.",
        "Go to the Annotate page. You will be taken to the first unfinished sample.":
            "Start the annotation from the study overview. You will be taken to the first unfinished sample.",
        "Click Save & Next to save your answers and move forward, or Save & Previous to go back while saving.":
            "Click Save & Next (the Submit button) to save your answers and move forward, or Save & Previous "
            "(“← Previous” at the top) to go back while saving.",
        "When you log out and later log back in, the site will send you to the first unfinished sample.":
            "When you leave and later open your study link again, the site will send you to the first unfinished "
            "sample.",
    },
}


def flat(text: str) -> str:
    return " ".join(text.split())


def shown_lines(config: str) -> tuple[list[str], list[list[str]]]:
    """The texts of the config's Text and Header elements (in order), and its grid rows (View className es-tr) as
    lists of cells."""
    root = ET.fromstring(config)
    texts = [flat(html.unescape(e.get("value", ""))) for e in root.iter() if e.tag in ("Text", "Header")]
    rows = [[flat(c.get("value", "")) for c in view if c.tag == "Text"]
            for view in root.iter("View") if "es-tr" in (view.get("className") or "").split()]
    return texts, rows


def document_lines(name: str) -> tuple[list[str], list[list[str]]]:
    """Document lines (bullets without their dash) and table rows (cells), the separator rows left out."""
    lines, rows = [], []
    for raw in (SEEDS / name).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line == "-":
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if "".join(cells).strip("-"):
                rows.append(cells)
            continue
        lines.append(flat(re.sub(r"^- ", "", line)))
    return lines, rows


@pytest.mark.parametrize("channel", ["label-studio", "gateway"])
def test_every_line_of_the_cmv_document_is_on_screen_in_each_channel(reg, channel):
    config = config_for(reg.get("cmv_tom").label_config, channel)
    texts, rows = shown_lines(config)
    shown = [re.sub(r"^• ", "", t) for t in texts]
    lines, table_rows = document_lines(CMV)
    missing = []
    for line in lines:
        wanted = CHANGED[channel].get(line, line)
        if wanted not in shown:
            missing.append(wanted)
    assert missing == []
    assert [r for r in table_rows if r not in rows] == []  # every table row is a row, cell by cell
    other = "gateway" if channel == "label-studio" else "label-studio"
    assert [v for k, v in CHANGED[other].items() if v != CHANGED[channel].get(k, k) and v in shown] == []


def test_the_circa_coupons_are_one_promise(reg):
    """Document 002's last line, in both parts' instructions; Part I states Part II's bonus (the one `approvals`
    pays)."""
    part1, part2 = reg.get("circa_part1"), reg.entry("circa_part2")
    sentence = "To incentivize annotators, we provided Amazon coupons ({}) for those that annotated the most examples."
    amounts = ", ".join(f"{a:g}" for a in part2.crowd.bonus.amounts) + f" {part2.crowd.bonus.currency}"
    for part in (part1, part2):
        for channel in ("label-studio", "gateway"):
            assert sentence.format(amounts) in flat(re.sub(r"<[^>]+>", "", part.instructions_for(channel)))
