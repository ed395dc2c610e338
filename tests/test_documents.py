"""The protocol documents read line by line against what each channel shows (no server): every line of the five
documents that addresses annotators is in the view of both channels (the labeling
config's texts, headings and panel titles, and the project's instructions), with CMV's headings and tables as
tables (one grid row per table row), changed only where the channel forces it; the text a gateway participant
reads has none of Label Studio's steps and the reverse."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evalstudio.protocols.channels import config_for

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


def view_text(project, channel: str) -> str:
    """All a channel shows of a project, as one line of text: the config's Text and Header values and Panel titles,
    then the instructions without their markup."""
    root = ET.fromstring(config_for(project.label_config, channel))
    texts = [flat(html.unescape(e.get("value", ""))) for e in root.iter() if e.tag in ("Text", "Header", "Panel")]
    instructions = re.sub(r"</?(b|i|strong|em|span)\b[^>]*>", "", project.instructions_for(channel))
    instructions = re.sub(r"<[^>]+>", " ", instructions)
    return " ".join(texts) + " " + flat(html.unescape(instructions))


def on_screen(line: str, body: str) -> bool:
    """A document line is on screen as it is, or as the view sets it: its list number dropped ("1. Two Trust
    Scores" is a heading), a "Name: definition" line as the name's heading and the definition's text, a heading's
    final colon as a panel title."""
    if line in body:
        return True
    line = re.sub(r"^\d+\.\s+", "", line)
    if line in body or line.rstrip(":") in body:
        return True
    name, sep, rest = line.partition(": ")
    return bool(sep) and name in body and rest in body


# lines of the documents that are not the instrument's text, or that a channel replaces, with the reason
NOT_SHOWN = {
    "000_0fda47d5a008ca57.txt": [
        (r"\{%|\{\{", "the oTree page's template tags"),
        (r"^Please enter your Prolific ID", "the Prolific ID comes from the account e-mail in Label Studio and from "
                                           "the study link through the gateway (each channel says so)"),
    ],
    "004_440c62cc181d036c.txt": [],
    "003_4133de5b34a03841.txt": [
        (r"^roject-template", "the document's first line is cut (a fragment of an HTML comment)"),
        (r"^(Navigation|Question \d+)$", "the MTurk page's menu of its 11 questions: the gateway's progress names the HIT "
                                          "and the question (HIT 1 of 5, question 1 of 11)"),
    ],
    "002_2ea3decdaa65189c.txt": [
        (r"^(Mechanical Turk Survey|We conducted our survey|Part I: control questions|This is the first part of the "
         r"survey|This is for the purpose of quality control|Rating the explanations|We then ask the annotators|"
         r"Annotators are shown the original|In the case where our model|but we do not disclose|This setup also "
         r"allows|and plausibility|of our model\.|Excluded examples|The conversations used as questions)",
         "the document's description of the survey for its readers, not a text of the HITs"),
        (r"^Instructions [Oo]n MTurk$", "a heading of the document over the HITs' instructions (which are shown)"),
        (r"^(Instructions for the sign-up process|\d\. (Go to the worker sandbox|Finish registration|Now you should be "
         r"on the HITs page|Find the first survey|Then complete the second)|There are multiple questions in this "
         r"survey)", "MTurk's sign-up steps: neither channel has them (the gateway and Label Studio sign in otherwise)"),
        (r"^To incentivize annotators, we provided Amazon coupons \(25, 15, 10 eur\)",
         "shown with crowd.bonus's amounts and its currency code: (25, 15, 10 EUR); test_the_circa_coupons_are_one_promise"),
    ],
}


# lines one channel leaves out, with the reason (the other channel shows them)
NOT_IN_CHANNEL = {
    ("004_440c62cc181d036c.txt", "gateway"): [
        (r"^Discuss any unclear points with the document author",
         "the document asks annotators to talk to its author, whom a participant of the gateway cannot reach: the "
         "line is in Label Studio's view only (channel=\"label-studio\" in labeling_configs/health.xml)"),
    ],
}


def not_shown(document: str, channel: str, line: str) -> bool:
    return any(re.search(p, line) for p, _ in NOT_SHOWN[document] + NOT_IN_CHANNEL.get((document, channel), []))


def document_text_lines(document: str) -> list[str]:
    """The document's lines; an HTML document (003, an MTurk HIT template) as the text between its tags."""
    text = (SEEDS / document).read_text(encoding="utf-8")
    if document.startswith("003"):
        text = re.sub(r"<(script|style)\b.*?</\1>", "", re.sub(r"<!--.*?-->", "", text, flags=re.S), flags=re.S | re.I)
        text = re.sub(r"<[^>]+>", "\n", re.sub(r"</?(b|i|strong|em|span|a)\b[^>]*>", "", text))
        text = html.unescape(text)
    return text.splitlines()


@pytest.mark.parametrize("channel", ["label-studio", "gateway"])
@pytest.mark.parametrize("protocols, document", [(["sotopia"], "000_0fda47d5a008ca57.txt"),
                                                 (["circa_part1", "circa_part2"], "002_2ea3decdaa65189c.txt"),
                                                 (["dialogue"], "003_4133de5b34a03841.txt"),
                                                 (["health"], "004_440c62cc181d036c.txt")])
def test_every_line_of_the_document_is_in_the_view(reg, protocols, document, channel):
    body = " ".join(view_text(reg.entry(protocol), channel) for protocol in protocols)
    missing = []
    for raw in document_text_lines(document):
        line = flat(re.sub(r"\*\*|`", "", re.sub(r"^\s*[-#>*]+\s*", "", raw)))
        if len(line) < 4 or not_shown(document, channel, line):
            continue
        if not on_screen(line, body):
            missing.append(line)
    assert missing == []


# ---- the same documents against the rendered screen (the browser tests call this) -------------------------------
DOCUMENTS = {"sotopia": "000_0fda47d5a008ca57.txt", "cmv_tom": CMV, "circa_part1": "002_2ea3decdaa65189c.txt",
             "circa_part2": "002_2ea3decdaa65189c.txt", "dialogue": "003_4133de5b34a03841.txt",
             "health": "004_440c62cc181d036c.txt"}
# cmv_threads is not document 001's instrument (its non-delta threads have no ToM values and no delta reply): its
# wording is checked by test_browser's checklist, and here against nothing


def missing_on_screen(reg, protocol: str, channel: str, body: str, rows: list[list[str]]) -> list[str]:
    """The lines of the protocol's document that addresses annotators which the rendered screen (`body`: the page's
    text with every panel open and, in Label Studio, its instructions window; `rows`: the cells of each rendered table
    row) does not show, as the text that was looked for. Where one document spans a study's parts (Circa), the lines
    this part's view holds (the rest are the other part's: test_every_line_of_the_document_is_in_the_view)."""
    document = DOCUMENTS.get(protocol)
    if document is None:
        return []
    body = flat(body)
    if document == CMV:
        lines, table_rows = document_lines(CMV)
        wanted = [CHANGED[channel].get(line, line) for line in lines]
        missing = [line for line in wanted if line not in body]
        return missing + [" | ".join(r) for r in table_rows if r not in rows]
    view = view_text(reg.entry(protocol), channel)
    missing = []
    for raw in document_text_lines(document):
        line = flat(re.sub(r"\*\*|`", "", re.sub(r"^\s*[-#>*]+\s*", "", raw)))
        if len(line) < 4 or not_shown(document, channel, line):
            continue
        if protocol.startswith("circa") and not on_screen(line, view):
            continue  # the other part's line
        if not on_screen(line, body):
            missing.append(line)
    return missing


def test_health_asks_gateway_participants_nothing_they_cannot_do(reg):
    """Issue 53: "Discuss any unclear points with the document author for consensus." was shown to participants of
    the gateway, who cannot reach the author; in Label Studio (the researcher's own annotators) it stays. The
    document's "Please:" list is a list on the page, one item per line."""
    gateway, label_studio = (flat(view_text(reg.entry("health"), c)) for c in ("gateway", "label-studio"))
    line = "Discuss any unclear points with the document author for consensus."
    assert line not in gateway and line in label_studio
    assert "Please:" in gateway and "- Carefully read and understand each scoring aspect." in gateway
