"""The Human Evaluation Datasheet of a study, answered from the study itself (`evalstudio publish`).

HEDS: Shimorina & Belz, "The Human Evaluation Datasheet: A Template for Recording Details of Human Evaluation
Experiments in NLP", HumEval 2022 (the form: github.com/Shimorina/human-evaluation-datasheet). Every question is
listed with its number; an answer says where it came from (the projects.yaml entry, the labeling config, Label
Studio's tasks and annotations, the gateway's ledger, the approvals); a question only the researcher can answer
(ethics approval, consent, demographics, what the systems are) is listed as open, never guessed. The same facts
answer section D of the ACL Responsible NLP checklist (human annotators).

`facts` is a plain dict the command builds from the study (evalstudio.cli.publish); this module only words it.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

from evalstudio.base.numbers import percent

from . import front_answers

OPEN = "open"
ANSWERED = "answered"
PARTLY = "partly answered"  # facts given, a part only the researcher knows left open


@dataclass
class Answer:
    """One datasheet question with its status (answered, partly answered, open), answer and source."""
    number: str
    question: str
    status: str  # answered | partly answered | open
    answer: str
    source: str  # where the answer comes from, or what the researcher must add


def _open(number: str, question: str, what: str) -> Answer:
    return Answer(number, question, OPEN, "", what)


# --- what the labeling config shows for one control -----------------------------------------------------------

def control_facts(config: str, control: str) -> dict:
    """The control's tag and attributes, its choices, and its question (HEDS 4.3.7, see `question_above`), read
    from the labeling config as annotators get it."""
    root = ET.fromstring(config)
    parents = {child: parent for parent in root.iter() for child in parent}
    found = next((e for e in root.iter() if e.get("name") == control and e.get("toName")), None)
    if found is None:
        return {"tag": None, "prompt": "", "attributes": {}, "choices": []}
    choices = [c.get("value") for c in found.iter("Choice")]
    return {"tag": found.tag, "prompt": question_above(found, parents, choices), "attributes": dict(found.attrib),
            "choices": choices}


# a scale anchor: a text that opens with a level of the scale ("5. That helped ...", "10: Detailed ...", "1 is the
# worst ...") or with a choice's label ("Yes (Y): The values ..."); the level's wording, not the question
_LEVEL = re.compile(r"\s*[-+]?\d+(?:\.\d+)?\s*(?:[.:)=\u2013\u2014-]|is\b)")


def _anchor(text: str, choices: list[str]) -> bool:
    return bool(_LEVEL.match(text)) or any(
        re.match(re.escape(c) + r"\s*[(:\u2013\u2014-]", text) for c in choices if c)


def question_above(control: ET.Element, parents: dict, choices: list[str]) -> str:
    """The question shown above a control, as the config lays it out: in the control's block (its parent View),
    walking back from the control over the elements beside it, the nearest Header and the Texts between it and the
    control, joined by a new line. A nested View before the control is another block (the scale's anchors, a
    field of the task) and is not read; a Text that is a scale anchor (it opens with a level of the scale or a
    choice's label) is left out; a field of the task ("$name") is not a question. A block with no such text: its
    parent block, and so on up. "" when none."""
    node = control
    while node in parents:
        siblings = list(parents[node])
        shown: list[str] = []
        for element in reversed(siblings[:siblings.index(node)]):
            value = (element.get("value") or "").strip()
            if not value or value.startswith("$") or element.tag not in ("Header", "Text"):
                continue
            if element.tag == "Header":
                shown.append(value)
                break
            if not _anchor(value, choices):
                shown.append(value)
        if shown:
            return "\n".join(reversed(shown))
        node = parents[node]
    return ""


def scale_size(spec, control: dict) -> tuple[str, str]:
    """(HEDS 4.3.3 size, 4.3.4 values) of a criterion's instrument, from its control."""
    tag, attributes = control["tag"], control["attributes"]
    if spec.labels:
        return str(len(spec.labels)), ", ".join(spec.labels)
    low, high = spec.min, spec.max
    if tag == "Rating":
        top = int(attributes.get("maxRating", high or 5))
        return str(top), f"1-{top}"
    given = str(attributes.get("step", 1) or 1).strip().lower()
    if given == "any":  # any decimal (health's 1-10 with decimals): HEDS's 'continuous'
        return "continuous", f"{low:g}-{high:g}, any decimal"
    try:
        step = float(given)
    except ValueError:
        return "continuous", f"{low:g}-{high:g} (step {given!r})"
    size = round((high - low) / step) + 1
    shown = f"{low:g}-{high:g}" + (f" in steps of {step:g}" if step != 1 else "")
    return str(size), shown


def presentation(control: dict) -> str:
    """HEDS 4.3.5: how the rating instrument is presented ("" when the interface is unknown)."""
    tag, attributes = control["tag"], control["attributes"]
    if tag is None:
        return ""
    if tag == "Choices":
        return "Check-boxes" if attributes.get("choice") == "multiple" else "Multiple-choice options"
    if tag == "Number" and attributes.get("slider") == "true":
        return "Slider"
    if tag == "Rating":
        return "Other: a row of stars (Label Studio's Rating control)"
    if tag == "Number":
        return "Other: a number field (Label Studio's Number control)"
    return f"Other: Label Studio's {tag} control"


# --- time and pay ---------------------------------------------------------------------------------------------

# The shortest median time per task for which a pay per hour is given. Reading an item and choosing a rating takes
# a person several seconds (Circa's MTurk batch: a median of 21 s an assignment); below 3 s the times are a
# script's, or were not measured, and a rate over them (4.50 over 0.2 s: 22,131 an hour) would be a plausible
# wrong number.
PLAUSIBLE_SECONDS = 3.0


def time_problem(hours: float, median_seconds: float | None) -> str | None:
    """Why the time on tasks gives no pay per hour (unknown, or too short for a person), or None when it does."""
    if median_seconds is None or not hours > 0:
        return "the time on tasks is not known"
    if median_seconds < PLAUSIBLE_SECONDS:
        return (f"the median time per task, {median_seconds:.1f} s, is under {PLAUSIBLE_SECONDS:g} s, shorter than "
                "a person takes to read and answer a task (scripted answers, or times not measured)")
    return None


# --- the answers --------------------------------------------------------------------------------------------

def heds_answers(facts: dict) -> list[Answer]:
    """Every HEDS question, answered from `facts` where the study holds the answer."""
    f = facts
    live = f.get("live", True)  # a study evalstudio ran (its instrument known), or a ratings file
    out = [
        _open("1.1", "Link to paper reporting the evaluation experiment", "the paper's link (or 'for preregistration')"),
        Answer("1.2", "Link to website providing resources used in the evaluation experiment", PARTLY,
               ("This package: instrument/ (labeling configs, projects.yaml entry, tasks, order, gold items, with "
                "their SHA-256 in MANIFEST.json) and data_release/ (the ratings)." if live else
                "This package: data_release/ (the ratings). The interface is not in a ratings file."),
               "publish folder; add its address"),
        _open("1.3", "Name, affiliation and email address of person completing this sheet", "the researchers"),
        _open("2.1", "What type of input do the evaluated system(s) take?", "the systems' input type"),
        _open("2.2", "What type of output do the evaluated system(s) generate?", "the systems' output type"),
        _open("2.3", "How would you describe the task that the evaluated system(s) perform?", "the systems' task"),
        _open("2.4", "Input Language(s), or 'N/A'", "the languages"),
        _open("2.5", "Output Language(s), or 'N/A'", "the languages"),
        Answer("3.1.1", "How many system outputs (or other evaluation items) are evaluated per system?", ANSWERED,
               _per_system(f), "Label Studio's tasks with at least one counted answer" if live else "the ratings file"),
        Answer("3.1.2", "How are system outputs (or other evaluation items) selected for inclusion?",
               ANSWERED if f.get("active") else OPEN, f.get("active") or "",
               "the gateway's ledger (its design)" if f.get("active") else "how the researchers chose the items"),
        _open("3.1.3", "What is the statistical power of the sample size?",
              "a power calculation (`evalstudio plan` gives one from a pilot)"),
        Answer("3.2.1", "How many evaluators are there in this experiment?", ANSWERED, str(f["annotators"]),
               "annotators with at least one counted answer" + ("" if live else " in the ratings file")),
        Answer("3.2.2", "What kind of evaluators are in this experiment?", PARTLY if f.get("paid") else OPEN,
               "paid (a crowd platform's participants)" if f.get("paid") else "",
               ("projects.yaml crowd.platform; " if live else "") + "expert or not, known to the authors or not: "
               "the researchers"),
        Answer("3.2.3", "How are evaluators recruited?", PARTLY, _recruitment(f),
               ("projects.yaml crowd" if live else "the batch results file") + "; add the platform's screening "
               "(country, approval rate, language)"),
        Answer("3.2.4", "What training and/or practice are evaluators given before starting on the evaluation?",
               PARTLY if live else OPEN, _training(f) if live else "",
               "instrument/; add any training beyond the instructions" if live else "the instructions given"),
        Answer("3.2.5", "What other characteristics do the evaluators have?", PARTLY,
               front_answers.demographics(f["front"]), "the background questions (the gateway's ledger, as counts); "
               "qualifications: the researchers") if f.get("front") and f["front"]["background"] else
        _open("3.2.5", "What other characteristics do the evaluators have?",
              "demographics or qualifications, with the numbers per subgroup"),
        _open("3.3.1", "Has the experimental design been preregistered? If yes, on which registry?", "Yes/No"),
        Answer("3.3.2", "How are responses collected?", ANSWERED, _collection(f), "the study's setup"),
        Answer("3.3.3", "What quality assurance methods are used?", ANSWERED if f.get("gold_items") else PARTLY,
               _quality(f), "projects.yaml crowd rules, the gold items, `evalstudio approvals`" if live else
               "the batch results file's AssignmentStatus; add any other checks"),
        Answer("3.3.4", "What do evaluators see when carrying out evaluations?", ANSWERED,
               "The labeling config(s) in instrument/labeling_configs/ (as annotators of the gateway get them), the "
               "instructions in instrument/instructions/, and each task's shown fields in instrument/tasks.jsonl "
               "(their SHA-256 in MANIFEST.json). " + "; ".join(f"{p['title']}: {p['controls']}" for p in f["parts"])
               + (f". Evaluators mark spans of the shown text: {f['spans']['controls']} ({f['spans']['count']} spans, "
                  "data_release/data/spans.parquet)" if f.get("spans") else ""),
               "the labeling configs") if live else
        _open("3.3.4", "What do evaluators see when carrying out evaluations?", "the interface (a screenshot)"),
        Answer("3.3.5", "How free are evaluators regarding when and how quickly to carry out evaluations?", ANSWERED,
               "Neither of the above: no time limit per assessment, and progress is kept: a participant can stop "
               "and sign in again later with their personal link." + _quota(f), "the gateway's behaviour") if live else
        (Answer("3.3.5", "How free are evaluators regarding when and how quickly to carry out evaluations?", PARTLY,
                f"Each assignment (HIT) within {f['time_limit']} (MTurk's AssignmentDurationInSeconds).",
                "the batch results file; whether the whole evaluation had to be done in one sitting: the researchers")
         if f.get("time_limit") else
         _open("3.3.5", "How free are evaluators regarding when and how quickly to carry out evaluations?",
               "time limits, sessions")),
        Answer("3.3.6", "Are evaluators told they can ask questions about the evaluation and/or provide feedback?",
               PARTLY if f.get("comment_box") else OPEN,
               f"A comment box on every task ({f['comment_box']})." if f.get("comment_box") else "",
               "the labeling config's free-text controls; whether they may ask questions: the researchers"),
        *((Answer("3.3.7", "What are the experimental conditions in which evaluators carry out the evaluations?",
                  ANSWERED, "Evaluation carried out by evaluators at a place of their own choosing (online).",
                  "the study's setup" if live else "the crowd platform"),
           Answer("3.3.8", "Unless at a place of the evaluators' own choosing, describe the conditions", ANSWERED,
                  "N/A (at a place of their own choosing).", "the study's setup" if live else "the crowd platform"))
          if live or f.get("platform") else
          (_open("3.3.7", "What are the experimental conditions in which evaluators carry out the evaluations?",
                 "online, in a lab, ..."),
           _open("3.3.8", "Unless at a place of the evaluators' own choosing, describe the conditions",
                 "the conditions"))),
    ]
    for criterion in f["criteria"]:
        out += _criterion_answers(criterion)
    out += [
        _open("5.1", "Has the evaluation experiment been approved by a research ethics committee?", "the committee"),
        Answer("5.2", "Do the outputs evaluated, or the responses collected, contain personal data (GDPR Art. 4)?",
               PARTLY, "The released data holds no platform id, e-mail address, sign-in code or session id; "
                       "annotators are keyed pseudonyms; " + f"{f['free_text']} free-text answer(s) are listed in "
                       "review_free_text.csv for review before release.",
               "the publish step; whether the items themselves hold personal data: the researchers"),
        _open("5.3", "Do they contain special category information (GDPR Art. 9)?", "the researchers"),
        _open("5.4", "Have any impact assessments been carried out?", "the researchers"),
    ]
    return out


def _criterion_answers(c: dict) -> list[Answer]:
    name = c["name"]
    size, values = c["size"], c["values"]
    agreement = c.get("agreement")
    return [
        _open(f"4.1.1 [{name}]", "What type of quality is assessed by the quality criterion?",
              "Correctness, Goodness or Feature (Belz et al. 2020)"),
        _open(f"4.1.2 [{name}]", "Which aspect of system outputs is assessed?", "form, content, or both"),
        _open(f"4.1.3 [{name}]", "Is each output assessed in its own right, or with reference to a frame of reference?",
              "own right, relative to the input, or to an external frame"),
        Answer(f"4.2.1 [{name}]", "Does an individual assessment involve an objective or a subjective judgment?",
               ANSWERED, "Subjective (a rating by a person).", "the labeling config" if c["control"] else "the spec"),
        Answer(f"4.2.2 [{name}]", "Are outputs assessed in absolute or relative terms?", ANSWERED,
               "Relative (outputs of several systems side by side)." if c.get("relative") else
               "Absolute (one output per assessment).",
               "the tasks" if c["control"] else "the ratings file (one output per rating)"),
        _open(f"4.2.3 [{name}]", "Is the evaluation intrinsic or extrinsic?", "intrinsic or extrinsic"),
        Answer(f"4.3.1 [{name}]", "What do you call the quality criterion in explanations/interfaces to evaluators?",
               PARTLY, f"{name} (" + (f"projects.yaml; control `{c['control']}`)" if c["control"] else "the spec)"),
               "the name the instructions use"),
        Answer(f"4.3.2 [{name}]", "What definition do you give for the quality criterion?",
               PARTLY if c["control"] else OPEN,
               "Quoted in instrument/instructions/ and the labeling config." if c["control"] else "",
               "copy the definition verbatim"),
        Answer(f"4.3.3 [{name}]", "Size of scale or other rating instrument", ANSWERED, size,
               "the labeling config" if c["control"] else "the spec's scale"),
        Answer(f"4.3.4 [{name}]", "List or range of possible values of the scale", ANSWERED, values,
               "projects.yaml and the labeling config" if c["control"] else "the spec's scale"),
        Answer(f"4.3.5 [{name}]", "How is the scale or other rating instrument presented to evaluators?",
               ANSWERED if c["presented"] else OPEN, c["presented"],
               "the labeling config" if c["presented"] else "multiple-choice options, slider, ..."),
        Answer(f"4.3.6 [{name}]", "If there is no rating instrument, describe the task", ANSWERED, "N/A",
               "the labeling config" if c["control"] else "the spec's scale"),
        Answer(f"4.3.7 [{name}]", "What is the verbatim question, prompt or instruction given to evaluators?",
               ANSWERED if c["prompt"] else OPEN, c["prompt"],
               "the labeling config: the heading and question shown above the control (scale anchors left out)" if c["prompt"] else "the question"),
        _open(f"4.3.8 [{name}]", "Form of response elicitation", "e.g. direct quality estimation"),
        _open(f"4.3.9 [{name}]", "How are raw responses aggregated to obtain reported scores?",
              "as reported in the paper (`evalstudio analyze` computes per-system means with intervals)"),
        _open(f"4.3.10 [{name}]", "Method(s) used for determining effect size and significance", "as in the paper"),
        Answer(f"4.3.11 [{name}]", "Has inter-annotator agreement been measured? Method and scores?",
               ANSWERED if agreement else OPEN, agreement or "",
               "evalstudio's agreement table on the counted answers" if agreement else "too few ratings"),
    ]


def _per_system(f: dict) -> str:
    counts = f["items_per_system"]
    if len(counts) == 1:
        return f"{next(iter(counts.values()))} (one system)"
    if len(set(counts.values())) == 1:
        return f"{next(iter(counts.values()))} per system ({len(counts)} systems)"
    return "; ".join(f"{system}: {n}" for system, n in counts.items())


def _recruitment(f: dict) -> str:
    text = {"prolific": "Prolific", "mturk": "Amazon Mechanical Turk"}.get(f.get("platform") or "", "")
    link = ", through evalstudio's gateway study link" if f.get("live", True) else ""
    parts = [f"Recruited on {text}{link}." if text else
             "Annotators with accounts made by the researchers (no crowd platform)." if f.get("live", True) else
             "Not in the ratings file."]
    if f.get("max_participants"):
        parts.append(f"At most {f['max_participants']} participants.")
    if f.get("excluded"):
        parts.append(f"Exclusion: {f['excluded']}.")
    return " ".join(parts)


def _training(f: dict) -> str:
    return ("The instructions shown with the study (quoted in instrument/instructions/, SHA-256 in MANIFEST.json); "
            "through the gateway the first task of each part opens with every instruction panel unfolded."
            + (front_answers.practice_text(f["front"]) if f.get("front") else "")
            + (f" Parts in a fixed order: {f['order_of_parts']}." if f.get("order_of_parts") else ""))


def _collection(f: dict) -> str:
    if not f.get("live", True):
        where = {"mturk": "on Amazon Mechanical Turk (its batch results file)"}.get(f.get("platform") or "",
                                                                                    "(a ratings file)")
        return f"Online, {where}. " + (f"Pay: {f['pay']}." if f.get("pay") else "")
    where = (f"evalstudio's participant gateway in front of Label Studio {f['label_studio']} (Community)"
             if f.get("gateway") else f"Label Studio {f['label_studio']} (Community)")
    return f"Online, with {where}; evalstudio {f['evalstudio']}. " + (
        f"Pay: {f['pay']}." if f.get("pay") else "")


def _quality(f: dict) -> str:
    parts = []
    if f.get("gold_items"):
        parts.append(f"{f['gold_items']} gold item(s) with known answers (automatic quality checking)")
    if f.get("min_gold_accuracy") is not None:
        parts.append(f"participants below {percent(f['min_gold_accuracy'])} correct on gold items are rejected "
                     f"({f['rejected']} rejected)")
    if not f.get("live", True):
        return "; ".join(parts + [f"assignments rejected on the platform are left out ({f['rejected']} here)"]) + "."
    parts.append(f"speed and straight-lining flags per participant ({f['flagged']} flagged)")
    parts.append("one counted answer per task and participant, decided by the server")
    return "; ".join(parts) + "."


def _quota(f: dict) -> str:
    return f" Each participant does at most {f['quota']} task(s)." if f.get("quota") else ""


# --- ACL Responsible NLP checklist, section D ------------------------------------------------------------------

def checklist_d(facts: dict) -> list[Answer]:
    """Section D (human annotators) of the ACL Responsible NLP Research checklist, from the same facts."""
    f = facts
    d1 = "Did you report the full text of instructions given to participants, including e.g., screenshots, " \
         "disclaimers of any risks to participants or annotators, etc.?"
    return [
        Answer("D1", d1, PARTLY, "Yes: instrument/ holds the instructions and labeling configs word for word.",
               "disclaimers of risks: the researchers") if f.get("live", True) else
        _open("D1", d1, "the instructions and a screenshot (not in a ratings file)"),
        Answer("D2", "Did you report information about how you recruited (e.g., crowdsourcing platform, students) "
                     "and paid participants, and discuss if such payment is adequate given the participants' "
                     "demographic (e.g., country of residence)?", PARTLY,
               _recruitment(f) + (f" Pay: {f['pay']}." if f.get("pay") else " Pay: give --pay."),
               "whether the pay is adequate for the participants' country: the researchers"),
        Answer("D3", "Did you discuss whether and how consent was obtained from people whose data you're "
                     "using/curating?", ANSWERED, front_answers.consent_text(f["front"]),
               "projects.yaml crowd.consent and the gateway's ledger") if f.get("front") else
        _open("D3", "Did you discuss whether and how consent was obtained from people whose data you're "
                    "using/curating?", "the consent wording and how it was given"),
        _open("D4", "Was the data collection protocol approved (or determined exempt) by an ethics review board?",
              "the board's decision"),
        Answer("D5", "Did you report the basic demographic and geographic characteristics of the annotator "
                     "population that is the source of the data?", PARTLY, front_answers.demographics(f["front"]),
               "the background questions (counts); what they did not ask: the researchers")
        if f.get("front") and f["front"]["background"] else
        _open("D5", "Did you report the basic demographic and geographic characteristics of the annotator "
                    "population that is the source of the data?", "the annotators' demographics"),
    ]


def write_datasheet(folder: Path, title: str, heds: list[Answer], checklist: list[Answer]) -> None:
    """datasheet.md (to read and complete), datasheet.json (the same, for tools)."""
    def table(answers):
        rows = ["| # | question | status | answer | source |", "|---|---|---|---|---|"]
        for a in answers:
            cells = [a.number, a.question, a.status, a.answer or "(to answer)", a.source]
            rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        return "\n".join(rows)

    n_open = sum(a.status == OPEN for a in heds)
    text = (f"# Human Evaluation Datasheet: {title}\n\n"
            "The Human Evaluation Datasheet (Shimorina & Belz, HumEval 2022), answered by `evalstudio publish` from "
            f"the study itself. {len(heds) - n_open} of {len(heds)} questions are answered or partly answered, each "
            f"saying where from; {n_open} are open: only the researchers can answer them.\n\n"
            + table(heds) + "\n\n## ACL Responsible NLP checklist, section D (human annotators)\n\n"
            + table(checklist) + "\n")
    (folder / "datasheet.md").write_text(text, encoding="utf-8")
    (folder / "datasheet.json").write_text(json.dumps(
        {"heds": [asdict(a) for a in heds], "acl_checklist_d": [asdict(a) for a in checklist]}, indent=2,
        ensure_ascii=False) + "\n", encoding="utf-8")
