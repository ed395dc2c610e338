"""The `judges:` list of projects.yaml: the LLM judges `evalstudio judge` runs when no --model is given.

    judges:
      - name: qwen7b                      # what reports call it (default: the model's name)
        model: Qwen2.5-7B-Instruct        # as the endpoint names it
        base_url: http://127.0.0.1:8000/v1  # any OpenAI-compatible endpoint
        key_env: OPENAI_API_KEY           # the environment variable holding its key (never the key itself)
        temperature: 0
        max_tokens: 1024
        price_in: 0.15                    # per million prompt tokens (optional: the cost)
        price_out: 0.6

A key written into the file is refused: keys come from the environment only."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from evalstudio.base.errors import RegistryError

from .yaml_lines import describe

def _prefill(value: bool | str) -> bool | str:
    if isinstance(value, str) and not re.fullmatch(r"judge:[A-Za-z0-9][A-Za-z0-9_.:-]*", value):
        raise ValueError(f"prefill: {value!r} is neither true/false nor judge:NAME (the model version "
                         "`evalstudio judge --to-label-studio` gives its predictions, e.g. judge:gpt-4o)")
    return value


# a project's `prefill`: true (the ML backend's predictions fill the answers) or judge:NAME (the LLM judge NAME's
# predictions only, e.g. its error spans for annotators to correct: ESA-AI); no other prediction is shown
Prefill = Annotated[bool | str, AfterValidator(_prefill)]
# a prefilled project's `unassisted_share`: the share of each participant's tasks the gateway shows without the
# prediction (the automation-bias check of ESA-AI; drawn per participant, evalstudio/crowd/assistance.py)
UnassistedShare = Annotated[float | None, AfterValidator(lambda v: _share(v))]


def _share(value: float | None) -> float | None:
    if value is not None and not 0 < value < 1:
        raise ValueError(f"{value:g} is not a share strictly between 0 and 1: give e.g. 0.25 (a quarter of each "
                         "participant's tasks shown without the prediction)")
    return value


def unassisted_note(project) -> str | None:
    """What `validate` and `import` say of an entry with `unassisted_share:`: only the gateway draws it."""
    if project.unassisted_share is None:
        return None
    return (f"{project.name}: unassisted_share {project.unassisted_share:g}: the gateway (evalstudio gateway) shows "
            "each participant that share of their tasks without the prediction, drawn per participant. Label "
            "Studio's own editor cannot: it shows a task's prediction to every annotator of the task, so answers "
            "made there are all assisted (the analysis counts them so); serve the study through the gateway.")


def prefill_problems(project) -> list[str]:
    """`unassisted_share:` against the entry: only beside `prefill:` (there is nothing to leave out otherwise)."""
    if project.unassisted_share is not None and not project.prefill:
        return ["unassisted_share: a share of tasks shown without the prediction needs prefill: (true or judge:NAME) "
                "on the entry; add prefill:, or leave unassisted_share out"]
    return []

SHAPES = {  # field -> (what it must look like, the message that names the fix)
    "key_env": (r"[A-Za-z_][A-Za-z0-9_]{0,99}", "the name of an environment variable (e.g. OPENAI_API_KEY), never "
                                                "the key itself: keys come from the environment only"),
    "base_url": (r"https?://[^\s/@]+(/\S*)?", "an http:// or https:// URL with a host and no credentials in it, e.g. "
                                              "http://127.0.0.1:8000/v1"),
}


class JudgeEntry(BaseModel):
    """One LLM judge of projects.yaml's `judges:` list: its model, endpoint, key variable and prices."""
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$")
    model: str = Field(min_length=1, max_length=200)
    base_url: str
    key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=1024, ge=16, le=200_000)
    price_in: float | None = Field(default=None, ge=0.0)
    price_out: float | None = Field(default=None, ge=0.0)

    @field_validator("key_env", "base_url")
    @classmethod
    def _shape(cls, value: str, info) -> str:
        pattern, fix = SHAPES[info.field_name]
        if not re.fullmatch(pattern, value):
            raise ValueError(fix)
        return value

    @property
    def shown_name(self) -> str:
        """The judge's name as shown: its `name`, else its model."""
        return self.name or self.model


def read_judges(raw: dict, path, text: str) -> list[JudgeEntry]:
    """The judges of a parsed projects.yaml (none when it has no `judges:`); errors name `file:line: judges...`."""
    listed = raw.get("judges")
    if listed is None:
        return []
    if not isinstance(listed, list):
        raise RegistryError(f"{path}: judges: a list of judges (- model: ..., base_url: ...)")
    judges = []
    for number, entry in enumerate(listed):
        try:
            judges.append(JudgeEntry.model_validate(entry))
        except ValidationError as e:
            raise RegistryError(describe(e, path, text, ("judges", number))) from None
    names = [j.shown_name for j in judges]
    if len(set(names)) != len(names):
        raise RegistryError(f"{path}: judges: two judges are called the same; give each a name:")
    return judges
