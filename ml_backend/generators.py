"""Generators: the model outputs a protocol asks humans to *judge*, written by an LLM where an input lacks them.

  tom          CMV (document 001): the Theory-of-Mind values (beliefs, desires, intentions, emotions, knowledge,
               perspective taking; values and content) of the post and of the persuasive comment
  explanation  Circa Part II (document 002): why X would interpret Y's indirect answer as the shown interpretation

What a generator writes becomes part of the item annotators judge: `evalstudio generate` puts it into the input
records, the import shows it read-only in the task data and records the model in the task's meta
(`tom_generated_by`, `explanation_generated_by`). It never fills an answer control.

The LLM is the one the judge uses (EVALSTUDIO_LLM_BASE_URL, EVALSTUDIO_LLM_MODEL, EVALSTUDIO_LLM_API_KEY).
Every answer is checked against the form asked for before it is returned.
"""

from __future__ import annotations

import json

from ..importers.cmv import CATEGORIES as TOM_CATEGORIES
from .predictors import LLMPredictor, NoPrediction

KINDS = ("tom", "explanation")
MAX_ITEMS = 32  # per /generate request
MAX_TEXT = 100_000  # characters per input field
MAX_VALUES, MAX_VALUE_CHARS, MAX_CONTENT_CHARS = 20, 300, 2_000

# What each category is about: the "What to Check" column of document 001, turned from a question into a definition.
TOM_GUIDE = {
    "beliefs": "what the author seems to believe or assert",
    "desires": "what the author wants or prioritizes",
    "intentions": "what the author is trying to do or achieve",
    "emotions": "the emotional tone or appeals in the text",
    "knowledge": "what the author claims to know or how they use evidence",
    "perspective_taking": "how the author considers other viewpoints",
}
TOM_FORM = {c: {"values": ["string"], "content": "string"} for c in TOM_CATEGORIES}
EXPLANATION_FORM = {"explanation": "string"}

# Inputs each kind needs (all strings).
INPUTS = {"tom": ("post_title", "post", "comment"), "explanation": ("context", "question", "answer", "interpretation")}


class GenerationError(ValueError):
    """A /generate request that cannot be served (bad kind or inputs); answered with HTTP 400."""


def check_items(kind: str, items: object) -> list[dict]:
    """The request's items, each a dict with the kind's string inputs; GenerationError otherwise."""
    if kind not in KINDS:
        raise GenerationError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    if not isinstance(items, list) or not items:
        raise GenerationError("'items' must be a non-empty list")
    if len(items) > MAX_ITEMS:
        raise GenerationError(f"at most {MAX_ITEMS} items per request, got {len(items)}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise GenerationError(f"items[{i}] must be an object")
        for name in INPUTS[kind]:
            value = item.get(name)
            if not isinstance(value, str):
                raise GenerationError(f"items[{i}].{name} must be a string")
            if len(value) > MAX_TEXT:
                raise GenerationError(f"items[{i}].{name} is longer than {MAX_TEXT} characters")
    return items


class Generator:
    """Completes input records with an LLM's outputs for `/generate`, counting its usage."""
    def __init__(self, llm: LLMPredictor | None = None):
        self.llm = llm or LLMPredictor()
        self.usage = {"requests": 0, "cached": 0, "tokens_in": 0, "tokens_out": 0}  # of this generator's answers

    @property
    def model_version(self) -> str:
        """The LLM's model version, recorded with what it wrote."""
        return self.llm.model_version

    def generate(self, kind: str, item: dict) -> dict:
        """The output for one item (checked); NoPrediction with the reason if the model gave none."""
        if kind == "tom":
            return {"tom": {"post": self._tom(f"Title: {item['post_title']}\n\n{item['post']}", "post"),
                            "comment": self._tom(item["comment"], "comment")}}
        return {"explanation": self._explanation(item)}

    def _tom(self, text: str, side: str) -> dict:
        guide = "\n".join(f"- {c}: {TOM_GUIDE[c]}" for c in TOM_CATEGORIES)
        what = "the original post (OP)" if side == "post" else "a comment that replies to the original post"
        system = (
            f"You analyse the Theory of Mind (ToM) of the author of {what} on r/ChangeMyView. For each of six "
            f"categories, list the author's values as short phrases and write one or two sentences of content that "
            f"say where the text shows them. Ground everything in the text; do not add what the text does not say.\n"
            f"{guide}\nIf a category has no clear content in the text, give an empty list and the content \"none\".\n"
            "Answer with one JSON object only, of this form (every category required):\n" + json.dumps(TOM_FORM)
        )
        answer, raw = self.llm.ask([{"role": "system", "content": system}, {"role": "user", "content": text}],
                                   self.usage)
        out = {}
        for category in TOM_CATEGORIES:
            entry = answer.get(category)
            if not isinstance(entry, dict):
                raise NoPrediction(f"the {side} ToM answer lacks the category {category}: {raw[:200]!r}")
            values, content = entry.get("values"), entry.get("content")
            if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
                raise NoPrediction(f"the {side} ToM {category} values are not a list of phrases: {raw[:200]!r}")
            if len(values) > MAX_VALUES or any(len(v) > MAX_VALUE_CHARS for v in values):
                raise NoPrediction(f"the {side} ToM {category} values are too many or too long")
            if not isinstance(content, str) or len(content) > MAX_CONTENT_CHARS:
                raise NoPrediction(f"the {side} ToM {category} content is not a short text: {raw[:200]!r}")
            out[category] = {"values": [v.strip() for v in values], "content": content.strip()}
        return out

    def _explanation(self, item: dict) -> str:
        system = (
            "Two friends or colleagues, X and Y, are talking. X asks a yes/no question and Y answers indirectly. "
            "You are given the context, X's question, Y's answer and an interpretation of Y's answer. Write one "
            "sentence that explains why Y's answer means this interpretation, using what the answer says.\n"
            "Answer with one JSON object only, of this form:\n" + json.dumps(EXPLANATION_FORM)
        )
        user = (f"Context: {item['context']}\nX: {item['question']}\nY: {item['answer']}\n"
                f"Interpretation: {item['interpretation']}")
        answer, raw = self.llm.ask([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                   self.usage)
        explanation = answer.get("explanation")
        if not isinstance(explanation, str) or not explanation.strip():
            raise NoPrediction(f"the answer has no explanation: {raw[:200]!r}")
        if len(explanation) > MAX_CONTENT_CHARS:
            raise NoPrediction(f"the explanation is longer than {MAX_CONTENT_CHARS} characters")
        return explanation.strip()
