"""A crowd study's front matter in projects.yaml, under `crowd:` (no Python): consent, a practice round with feedback,
background questions and an exit survey. The gateway serves them in that order around the study's parts
(evalstudio/gateway/front.py) and the ledger records each step with the server's time. The wording is the
researcher's and is shown verbatim.

    crowd:
      consent:
        text: |                      # or file: consent.html (relative to projects.yaml)
          <p>...</p>
        statements: ["I have read the information above.", "I agree to take part."]
        declined_code: NOCONSENT     # Prolific: the study's "no consent" code (MTurk: the HIT is returned)
      practice:
        items: practice.jsonl        # one JSON object a line: {"data": {...}, "expected": {control: answer},
                                     #                           "explanation": "..."}
        min_correct: 2               # fewer correct: screened out (optional)
        screened_out_code: SCREENED  # Prolific: the study's screened-out code
      background:
        - {name: age, text: "How old are you?", type: number, min: 18, max: 120, prefer_not_to_say: true}
        - {name: english, text: "Is English your first language?", type: choice, choices: ["Yes", "No"]}
      exit_survey:
        - {name: comments, text: "Anything you want to tell us?", type: text, required: false}

A study of several projects (Circa, CMV) declares it once, on one of its parts; it is served around all of them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalstudio.base.files import read_text_file

NAME = r"^[a-z][a-z0-9_]{0,40}$"
CODE = r"^[A-Za-z0-9_-]{1,40}$"
MAX_ITEMS = 200  # practice items in one file
RESERVED = ("participant", "annotator")  # the background file's id columns: no question may overwrite them
PREFER_NOT = "Prefer not to say"  # the answer "prefer_not_to_say: true" adds to a question


class FileProblem(str):
    """A problem inside a file the entry names: `file:line: message`, reported with the entry's key that names it."""

    key: str = ""


def file_problem(key: str, message: str) -> FileProblem:
    """A FileProblem named at `key` of the entry (crowd.practice.items, crowd.consent.file)."""
    problem = FileProblem(message)
    problem.key = key
    return problem


class Consent(BaseModel):
    """What a participant reads and the statements they accept before any task."""
    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(default=None, min_length=1, max_length=50_000)
    file: str | None = None
    statements: list[str] = Field(min_length=1, max_length=20)
    declined_code: str | None = Field(default=None, pattern=CODE)  # Prolific's no-consent completion code

    @model_validator(mode="after")
    def _one_text(self):
        if (self.text is None) == (self.file is None):
            raise ValueError("give the consent wording as text: or as file: (one of them)")
        if any(not s.strip() or len(s) > 2000 for s in self.statements):
            raise ValueError("each statement is a sentence the participant accepts (1 to 2000 characters)")
        return self


class Practice(BaseModel):
    """Practice items answered in the study's own labeling view, each with its expected answer and explanation;
    they count in no analysis."""
    model_config = ConfigDict(extra="forbid")
    items: str
    min_correct: int | None = Field(default=None, ge=1)
    screened_out_code: str | None = Field(default=None, pattern=CODE)  # Prolific's screened-out completion code
    part: str | None = None  # whose labeling view (default: the part that declares it)


class Question(BaseModel):
    """One background or exit-survey question, its wording the researcher's."""
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME)
    text: str = Field(min_length=1, max_length=2000)
    type: Literal["choice", "number", "text"]
    choices: list[str] = []
    min: float | None = None
    max: float | None = None
    max_length: int = Field(default=500, ge=1, le=5000)
    required: bool = True
    prefer_not_to_say: bool = False

    @model_validator(mode="after")
    def _shape(self):
        if self.name in RESERVED:
            raise ValueError(f"name: '{self.name}' names a column of the background file (the participant's id); "
                             "give the question another name")
        if self.type == "choice":
            if len(self.choices) < 2 or len(set(self.choices)) != len(self.choices) or \
                    any(not c.strip() or len(c) > 200 for c in self.choices):
                raise ValueError("a choice question lists two or more different choices (each 1 to 200 characters)")
            if self.prefer_not_to_say and PREFER_NOT in self.choices:
                raise ValueError(f"'{PREFER_NOT}' is added by prefer_not_to_say: true; leave it out of choices")
        elif self.choices:
            raise ValueError(f"choices: only a choice question has choices (this one is {self.type})")
        if self.type != "number" and (self.min is not None or self.max is not None):
            raise ValueError("min and max: only a number question has a range")
        if self.min is not None and self.max is not None and not self.min < self.max:
            raise ValueError("min must be below max")
        return self

    @property
    def options(self) -> list[str]:
        """The choices as shown (with the "prefer not to say" answer where asked)."""
        return self.choices + ([PREFER_NOT] if self.prefer_not_to_say and self.type == "choice" else [])


def check_answer(question: Question, value) -> object:
    """A participant's answer to a question as stored: a choice, a number in range, text within max_length, the
    "prefer not to say" answer where asked, or None (skipped, where not required). ValueError otherwise."""
    if value is None or value == "":
        if question.required:
            raise ValueError(f"please answer “{question.text}”")
        return None
    if question.prefer_not_to_say and value == PREFER_NOT:
        return PREFER_NOT
    if question.type == "choice":
        if not isinstance(value, str) or value not in question.choices:
            raise ValueError(f"“{question.text}”: choose one of the answers given")
        return value
    if question.type == "number":
        text = str(value).strip().replace(",", ".") if isinstance(value, (str, int, float)) else ""
        if isinstance(value, bool) or not re.fullmatch(r"-?\d{1,12}(\.\d{1,6})?", text):
            raise ValueError(f"“{question.text}”: give a number")
        number = float(text)
        if (question.min is not None and number < question.min) or (question.max is not None and number > question.max):
            raise ValueError(f"“{question.text}”: give a number from {question.min:g} to {question.max:g}"
                             if question.min is not None and question.max is not None else
                             f"“{question.text}”: that number is outside the range asked")
        return int(number) if number.is_integer() else number
    if not isinstance(value, str):
        raise ValueError(f"“{question.text}”: give text")
    from evalstudio.values.sources import storable_problems

    if problems := storable_problems(value):  # a lone surrogate failed the ledger's write (a 500), a NUL its exports
        raise ValueError(f"“{question.text}”: the answer {problems[0][1]}")
    if len(value) > question.max_length:
        raise ValueError(f"“{question.text}”: at most {question.max_length} characters")
    return value


def check_answers(questions: list[Question], body) -> dict:
    """Every question's answer from a participant's request body (question name -> value); ValueError names the
    first problem. Keys that name no question are ignored."""
    if not isinstance(body, dict):
        raise ValueError("the answers are not a JSON object")
    return {q.name: check_answer(q, body.get(q.name)) for q in questions}


def consent_text(consent: Consent, base: Path) -> str:
    """The consent wording as the participant reads it (the file's text where it names one)."""
    return consent.text if consent.text is not None else read_text_file((base / consent.file).resolve())


def read_practice(path: Path) -> tuple[list[dict], list[str]]:
    """The practice items of a file, one JSON object a line ({"data", "expected", "explanation"}), and its
    problems as `file:line: message`."""
    items, problems = [], []
    try:
        text = read_text_file(path)
    except (OSError, UnicodeDecodeError) as e:
        return [], [f"{path}: cannot read the practice items ({getattr(e, 'strerror', None) or 'not UTF-8 text'})"]
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except ValueError:
            problems.append(f"{where}: not a JSON object; each line is one item: "
                            '{"data": {...}, "expected": {"CONTROL": ANSWER}, "explanation": "..."}')
            continue
        if not isinstance(item, dict) or set(item) - {"data", "expected", "explanation"}:
            problems.append(f"{where}: an item has data, expected and explanation only")
            continue
        if not isinstance(item.get("data"), dict) or not isinstance(item.get("expected"), dict) or \
                not item["expected"] or not isinstance(item.get("explanation"), str) or not item["explanation"].strip():
            problems.append(f"{where}: give data (the task's fields), expected (at least one control's answer) and "
                            "explanation (the text shown after the answer)")
            continue
        items.append({**item, "line": number})
    if not items and not problems:
        problems.append(f"{path}: no practice items; give one JSON object a line")
    if len(items) > MAX_ITEMS:
        problems.append(f"{path}: {len(items)} practice items; at most {MAX_ITEMS}")
    return items, problems


def front_matter_problems(project) -> list[str]:
    """The entry's front matter against its files and labeling config: problems as `crowd.KEY: message` (at the
    key's line) or FileProblems (`file:line: message` inside a practice or consent file)."""
    crowd = project.crowd
    if crowd is None:
        return []
    problems: list[str] = []
    if crowd.consent is not None and crowd.consent.file is not None:
        try:
            consent_text(crowd.consent, project.base_dir)
        except (OSError, UnicodeDecodeError) as e:
            problems.append(f"crowd.consent.file: cannot read {(project.base_dir / crowd.consent.file).resolve()} "
                            f"({getattr(e, 'strerror', None) or 'not UTF-8 text'}); paths are relative to "
                            "projects.yaml's folder")
    if crowd.consent is None and (crowd.practice or crowd.background or crowd.exit_survey):
        problems.append("crowd.consent: practice, background and exit_survey need consent first (give consent: "
                        "with the text and the statements participants accept)")
    for key in ("background", "exit_survey"):
        names = [q.name for q in getattr(crowd, key)]
        if len(set(names)) != len(names):
            problems.append(f"crowd.{key}: two questions share a name; give each its own")
    practice = crowd.practice
    if practice is None:
        return problems
    if practice.part is not None and practice.part != project.entry:
        problems.append(f"crowd.practice.part: '{practice.part}' is not this entry; the practice items are answered "
                        "in the view of the part that declares them (leave part: out)")
    items, file_problems = read_practice((project.base_dir / practice.items).resolve())
    problems += [file_problem("crowd.practice.items", p) for p in file_problems]
    fields = project.data_fields()
    controls = {c.name: c for c in project.interface.controls}
    from evalstudio.values.results import check_value

    for item in items:
        where = f"{(project.base_dir / practice.items).resolve()}:{item['line']}"
        if missing := sorted(fields - set(item["data"])):
            problems.append(file_problem("crowd.practice.items", f"{where}: data lacks {', '.join(missing)} (the "
                                         "fields the labeling config shows)"))
        for name, value in item["expected"].items():
            if name not in controls:
                problems.append(file_problem("crowd.practice.items", f"{where}: expected: '{name}' is not a control "
                                             f"of the labeling config; valid names: {', '.join(controls)}"))
                continue
            try:
                check_value(controls[name], value)
            except ValueError as e:
                problems.append(file_problem("crowd.practice.items", f"{where}: expected.{name}: {e}"))
    if practice.min_correct is not None and items and practice.min_correct > len(items):
        problems.append(f"crowd.practice.min_correct: {practice.min_correct} is more than the {len(items)} practice "
                        "items; lower it or add items")
    return problems


def practice_items(project) -> list[dict]:
    """The entry's practice items, read and checked (the registry has checked them when it loaded)."""
    if project.crowd is None or project.crowd.practice is None:
        return []
    return read_practice((project.base_dir / project.crowd.practice.items).resolve())[0]
