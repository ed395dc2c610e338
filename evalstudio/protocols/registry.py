"""projects.yaml: a typed registry of protocols, checked against each labeling config."""

from __future__ import annotations

import copy
import functools
import os
import re
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import yaml
from label_studio_sdk.label_interface import LabelInterface
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evalstudio.base.errors import RegistryError, UnknownName
from evalstudio.base.files import read_text_file
from evalstudio.values.spans import MAX_SPANS

from . import part_order
from .adaptive import Assignment, StopWhen, adaptive_problems
from .attention import AttentionChecks
from .config_checks import check_against_config, compare_problems
from .crowd_rules import Bonus, Crowd  # noqa: F401 (Bonus: the registry's, as before)
from .front_matter import front_matter_problems
from .judges import Prefill, UnassistedShare, prefill_problems, read_judges
from .mapping import InputMap, check_against_config as input_problems
from .yaml_lines import Where, describe

PACKAGED_PROJECTS = Path(__file__).resolve().parents[1] / "projects.yaml"  # evalstudio/projects.yaml


class Criterion(BaseModel):
    """One quality criterion of a protocol: its scale, range or labels, and the controls that answer it."""
    model_config = ConfigDict(extra="forbid")
    scale: Literal["nominal", "ordinal", "interval"]
    min: float | None = None
    max: float | None = None
    labels: list[str] | None = None
    control: str | None = None
    rationale: str | None = None
    model_output: str | None = None
    model_rationale: str | None = None
    # Answers that mean "no rating" (e.g. "N/A (cannot judge)"): left out of agreement, never a category.
    missing: list[str] = []

    @model_validator(mode="after")
    def _range_or_labels(self) -> "Criterion":
        numeric = self.min is not None or self.max is not None
        if numeric and self.labels:
            raise ValueError("give either min/max or labels, not both")
        if numeric and (self.min is None or self.max is None or self.min >= self.max):
            raise ValueError("min and max are both required and min must be < max")
        if not numeric and not self.labels:
            raise ValueError("a criterion needs min/max (numeric) or labels (categorical)")
        if self.scale == "interval" and not numeric:
            raise ValueError("an interval criterion needs a numeric min/max")
        if self.missing and (not self.labels or not set(self.missing) <= set(self.labels)):
            raise ValueError("missing: lists answers of the criterion's labels that mean 'no rating'")
        return self

    @property
    def is_numeric(self) -> bool:
        """Whether the criterion is a number (it has no labels)."""
        return self.labels is None


class Slot(NamedTuple):
    """One rated control of a criterion, with its {agent} templates filled in."""

    criterion: str
    agent: str | None
    control: str
    rationale: str | None
    model_output: str | None
    model_rationale: str | None


class Lists(BaseModel):
    """Counterbalanced lists (a between-participants design): the project becomes `count` Label Studio projects, one
    per list; every list holds one version of every item (versions: the tasks of one item_id that differ in the
    task field `version`), an item's versions are rotated over the lists (Latin square, rotation from the item id),
    and each participant works in one list only (the gateway assigns them, evenly). Items with a single version
    (fillers) go to every list, or with `fillers: spread` to one list each, evenly."""

    model_config = ConfigDict(extra="forbid")
    count: int = Field(ge=2, le=20)
    version: str = Field(default="system", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    fillers: Literal["every_list", "spread"] = "every_list"


class Compare(BaseModel):
    """What the answers of a pairwise or best-worst protocol mean. Pairwise: the Choices criterion and which of its
    labels says the output shown first (left) is better, the second (right), a tie, both bad. Best-worst: the two
    criteria whose labels, in order, name the positions shown (first label: the first candidate, ...)."""

    model_config = ConfigDict(extra="forbid")
    criterion: str | None = None
    outcomes: dict[Literal["left", "right", "tie", "both_bad"], str] = {}
    best: str | None = None
    worst: str | None = None

    @model_validator(mode="after")
    def _check(self):
        pairwise, best_worst = self.criterion is not None, self.best is not None or self.worst is not None
        if pairwise == best_worst:
            raise ValueError("give criterion and outcomes (pairwise), or best and worst (best-worst scaling)")
        if pairwise and not {"left", "right"} <= set(self.outcomes):
            raise ValueError("outcomes names the labels of left (first shown) and right (second shown) at least")
        if best_worst and (self.best is None or self.worst is None or self.best == self.worst or self.outcomes):
            raise ValueError("best-worst: give two different criteria, best and worst (and no outcomes)")
        return self

    @property
    def kind(self) -> str:
        """'pairwise' when a criterion is compared, else 'best_worst'."""
        return "pairwise" if self.criterion else "best_worst"


class Project(BaseModel):
    """One protocol entry of projects.yaml: its Label Studio project, config, criteria, crowd rules and parts."""
    model_config = ConfigDict(extra="forbid")
    name: str = ""
    title: str = Field(min_length=3, max_length=50)  # Label Studio limits
    config: str
    # A Python importer module (importers/NAME.py), or `input:` that maps the input's fields (protocols as data).
    importer: str | None = None
    input: InputMap | None = None
    # Pairwise and best-worst protocols: what their answers mean (needs input.candidates).
    compare: Compare | None = None
    instructions: str
    annotators_per_task: int = Field(ge=1)

    @field_validator("instructions")
    @classmethod
    def _channels(cls, value: str) -> str:
        from .channels import channel_problems

        if problems := channel_problems(value):
            raise ValueError("; ".join(problems))
        return value

    agents: list[str] = []
    metadata_controls: list[str] = []
    max_spans: dict[str, Annotated[int, Field(ge=1, le=MAX_SPANS)]] = {}  # Labels control: most spans an answer marks
    attention_checks: AttentionChecks | None = None  # ESA's spoiled copies of tasks (protocols/attention.py)
    # Other entries of the study that may hold this one's items (cmv_tom: delta threads, also in cmv_threads); without
    # it an item belongs to one project of a study. The gateway serves a participant an item twice only in parts
    # ordered by crowd.after (blind first); `status` flags one who answered it in two unordered projects.
    shares_items: list[str] = []
    predictor: Literal["stored", "learner", "llm"] = "stored"
    # Model-assisted labelling: the ML backend's predictions fill the annotator's answer controls. Off by default:
    # in a human evaluation the answers start empty (no anchoring); with it off evalstudio creates no predictions.
    prefill: Prefill = False  # or judge:NAME, that LLM judge's predictions only (protocols/judges.py: Prefill)
    unassisted_share: UnassistedShare = None  # with prefill: a share of each participant's tasks shown without it
    study: str | None = None  # several Label Studio projects that make one study (Circa: Part I, then Part II)
    # Task order (evalstudio/tasks/order.py): "random" (the default) gives each annotator an order of their own (through
    # the gateway with no two tasks of one context back to back; in Label Studio its uniform sampling), "sequential"
    # everyone the import's order (no two tasks of one context back to back, no system in a fixed place).
    order: Literal["sequential", "random"] = "random"
    participant_id: Literal["prolific"] | None = None  # ids from the account e-mail (<PID>@email.prolific.com)
    # Study design checked at import: every item has exactly `versions` systems, the same for all items (and `items`).
    design: dict[str, int] = {}
    # What the ML backend can write where an input lacks it (`evalstudio generate`): model outputs that annotators
    # judge, shown read-only in the item (tom: CMV's ToM values; explanation: Circa Part II's explanations).
    generate: Literal["tom", "explanation"] | None = None
    # Circa: leave out of the analysis annotators whose Part I control accuracy is below this.
    min_control_accuracy: float | None = Field(default=None, ge=0, le=1)
    # Counterbalanced lists: the entry becomes one project per list, NAME_list1 ... (see Lists)
    lists: Lists | None = None
    list_of: str | None = None  # set by the registry on a list's project: the entry it comes from
    list_number: int | None = None  # 1 ... lists.count
    # The crowd study's structure from the protocol document: platform, quota, batches, bonus, completion code.
    crowd: Crowd | None = None
    # Adaptive collection through the gateway (evalstudio/protocols/adaptive.py): routing and a stopping rule.
    assignment: Assignment | None = None
    stop_when: StopWhen | None = None
    criteria: dict[str, Criterion] = Field(min_length=1)
    base_dir: Path = Path(".")

    @property
    def config_path(self) -> Path:
        """The labeling config's file, relative paths taken from the projects.yaml's folder."""
        return (self.base_dir / self.config).resolve()

    @functools.cached_property
    def label_config(self) -> str:
        """The labeling config's XML as Label Studio stores it; RegistryError naming the entry if unreadable."""
        try:
            return read_text_file(self.config_path).strip()  # as Label Studio stores it
        except OSError as e:
            relative = "" if Path(self.config).is_absolute() else (
                f" (config: paths are relative to the folder of the projects.yaml that names them, {self.base_dir}: "
                "copy the labeling_configs/ folder beside a copied projects.yaml, give absolute paths, or keep only "
                "the entries you use; every entry is checked when the file is read)")
            raise RegistryError(f"projects.{self.name}.config: cannot read {self.config_path}: {e.strerror}"
                                f"{relative}") from e
        except UnicodeDecodeError:
            raise RegistryError(f"projects.{self.name}.config: {self.config_path} is not UTF-8 text") from None

    def config_for(self, channel: str) -> str:
        """The labeling config as annotators of `channel` get it ("label-studio" or "gateway": a Text or Header
        marked channel="..." for the other channel left out; evalstudio/protocols/channels.py)."""
        from .channels import config_for
        return config_for(self.label_config, channel)

    @functools.cached_property
    def interface(self) -> LabelInterface:
        """The config as a LabelInterface, checked by Label Studio's schema and the channels' rules."""
        from .channels import config_channel_problems

        config = self.label_config  # (its own error when the file cannot be read)
        if problems := config_channel_problems(config):
            raise RegistryError(f"{self.config_path}: {'; '.join(problems)}")
        from .config_checks import shown_path, to_name_problems
        if problems := to_name_problems(config, shown_path(self.config_path)):
            raise RegistryError("; ".join(problems))
        try:
            li = LabelInterface(config)
            if self.label_config not in _VALID_CONFIGS:  # schema validation is the slow part of loading a registry
                li.validate()
                if len(_VALID_CONFIGS) < 256:
                    _VALID_CONFIGS.add(self.label_config)
        except Exception as e:  # the SDK raises several exception types for bad XML
            from .config_checks import schema_error_line

            line = schema_error_line(config, str(e))
            raise RegistryError(f"{shown_path(self.config_path)}{f':{line}' if line else ''}: invalid labeling "
                                f"config: {e}") from e
        return li

    def slots(self, criterion: str | None = None) -> list[Slot]:
        """The rated controls of one criterion (default: all), one per agent for per-agent criteria."""
        out = []
        for name, spec in self.criteria.items():
            if criterion is not None and name != criterion:
                continue
            control = spec.control or name
            agents = self.agents if "{agent}" in control else [None]
            for agent in agents:
                fill = lambda template: template.format(agent=agent) if template and agent else template
                out.append(Slot(name, agent, fill(control), fill(spec.rationale), fill(spec.model_output),
                                fill(spec.model_rationale)))
        return out

    def controls(self, criterion: str) -> list[tuple[str | None, str]]:
        """(agent, control name) pairs of a criterion; agent is None for protocols without agents."""
        return [(slot.agent, slot.control) for slot in self.slots(criterion)]

    @property
    def study_name(self) -> str:
        """The study this project is part of: `study`, else its entry's name."""
        return self.study or self.entry

    def instructions_for(self, channel: str) -> str:
        """The instructions as annotators of `channel` see them ("label-studio" or "gateway": elements marked for the
        other channel left out, evalstudio/protocols/channels.py); `{bonus}` becomes the crowd bonus's amounts and currency
        (Circa: "25, 15, 10 EUR"), so the promise shown and the bonus `approvals` pays come from one place."""
        from .channels import for_channel

        text = for_channel(self.instructions, channel)
        if "{bonus}" not in text:
            return text
        bonus = self.crowd.bonus if self.crowd else None
        amounts = ", ".join(f"{a:g}" for a in bonus.amounts) if bonus and bonus.amounts else "to be announced"
        return text.replace("{bonus}", f"{amounts} {bonus.currency}" if bonus and bonus.amounts else amounts)

    @property
    def entry_title(self) -> str:
        """The entry's title: a list's project is titled "TITLE (list N)" in Label Studio, participants see TITLE."""
        return self.title.rsplit(" (list ", 1)[0] if self.list_of else self.title

    @property
    def entry(self) -> str:
        """The projects.yaml entry this project comes from (a list's project: its entry; otherwise its own name)."""
        return self.list_of or self.name

    def data_fields(self) -> set[str]:
        """Task data keys the labeling config reads: object tags' $variables and any $x in a value (e.g. Headers)."""
        return set(self._data_fields)

    @functools.cached_property
    def _data_fields(self) -> frozenset[str]:  # read once: every imported task is split by it
        objects = {o.value_name for o in self.interface.objects if o.value_is_variable}
        return frozenset(objects | set(re.findall(r'value="[^"]*?\$(\w+)', self.label_config)))


class Registry:
    """All protocols of one projects.yaml, looked up by name."""

    def __init__(self, projects: dict[str, Project], path: Path, judges: list | None = None):
        self.projects = projects
        self.path = path
        self.judges = judges or []  # the LLM judges of `judges:` (evalstudio/protocols/judges.py)

    def names(self) -> list[str]:
        """Protocol names: a study of several projects (circa) by its study name, then each of its parts (an entry
        with counterbalanced lists by its name, then each list's project)."""
        studies = [p.study for p in self.projects.values() if p.study]
        entries = [p.entry for p in self.projects.values()]
        return list(dict.fromkeys(studies + entries + list(self.projects)))

    def get(self, name: str) -> Project:
        """The project of this name; UnknownName listing the names there are."""
        try:
            return self.projects[name]
        except KeyError:
            raise UnknownName("protocol", name, self.names()) from None

    def entry(self, name: str) -> Project:
        """The project of a projects.yaml entry; for an entry with counterbalanced lists, its list 1's project (the
        lists share config, criteria and every setting but title)."""
        if name in self.projects:
            return self.projects[name]
        found = [p for p in self.projects.values() if p.list_of == name]
        if not found:
            raise UnknownName("protocol", name, self.names())
        return found[0]

    def parts(self, name: str) -> list[Project]:
        """The projects of a protocol: the project itself, or every part of a study (Circa: Part I and Part II)."""
        if name in self.projects:
            return [self.projects[name]]
        found = [p for p in self.projects.values() if p.study == name or p.list_of == name]
        if not found:
            raise UnknownName("protocol", name, self.names())
        return part_order.in_order(found)  # each part after the one it comes after (crowd.after)

    def study(self, name: str) -> Project:
        """One Project standing for a whole study in the analysis: the parts' criteria and metadata together."""
        parts = self.parts(name)
        if len(parts) == 1:
            return parts[0]
        criteria = {k: v for p in parts for k, v in p.criteria.items()}
        metadata = list(dict.fromkeys(m for p in parts for m in p.metadata_controls))
        # the part with the most criteria stands for the study (cmv: cmv_tom), on a tie the last (circa: Part II)
        base = max(reversed(parts), key=lambda p: len(p.criteria))
        return base.model_copy(update={"name": name, "title": base.entry_title, "criteria": criteria,
                                       "metadata_controls": metadata})

    def __iter__(self):
        return iter(self.projects.values())


def default_path() -> Path:
    """EVALSTUDIO_PROJECTS, else ./projects.yaml, else the packaged copy."""
    if env := os.environ.get("EVALSTUDIO_PROJECTS"):
        return Path(env)
    local = Path("projects.yaml")
    return local if local.is_file() else PACKAGED_PROJECTS


@functools.lru_cache(maxsize=8)
def _parse_yaml(text: str):
    return yaml.safe_load(text)  # the pure-Python loader: libyaml's (CSafeLoader) crashes on deeply nested input


_VALID_CONFIGS: set[str] = set()  # labeling configs (their text) that passed the SDK's schema validation


def load(path: Path | str | None = None) -> Registry:
    """The registry from `path` (default: $EVALSTUDIO_PROJECTS, ./projects.yaml, the packaged copy); problems as file:line."""
    path = Path(path) if path else default_path()
    try:
        text = read_text_file(path)
    except OSError as e:
        raise RegistryError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise RegistryError(f"{path}: not UTF-8 text (saved as UTF-16?); save it as UTF-8") from None
    try:
        raw = copy.deepcopy(_parse_yaml(text))  # parsed once per text in a process (the backend loads it per request)
    except yaml.YAMLError as e:
        raise RegistryError(f"{path}: not valid YAML: {e}") from None
    except RecursionError:
        raise RegistryError(f"{path}: nested too deeply") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("projects"), dict):
        raise RegistryError(f"{path}: expected a top-level mapping 'projects:'")
    base = path.resolve().parent
    projects = {}
    from evalstudio.importers import IMPORTERS

    for name, entry in raw["projects"].items():
        # the entry's line, for messages; the YAML is composed again only when there is something to report
        where = Where(path, text, name)
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", name):
            raise RegistryError(f"{where}: a protocol name is lower-case letters, digits and _ (e.g. my_protocol)")
        if entry is not None and not isinstance(entry, dict):
            raise RegistryError(f"{where}: expected a mapping of settings (title:, config:, ...), got a "
                                f"{type(entry).__name__}")
        try:
            project = Project.model_validate({**(entry or {}), "name": name, "base_dir": base})
        except ValidationError as e:
            raise RegistryError(describe(e, path, text, ("projects", name))) from None
        if entry and ({"list_of", "list_number"} & set(entry)):
            raise RegistryError(f"{where}: list_of and list_number are set by the registry for each list of an "
                                "entry with `lists:`; leave them out")
        if (project.importer is None) == (project.input is None):
            raise RegistryError(f"{where}: give importer: (a Python importer module: "
                                f"{', '.join(sorted(IMPORTERS))}) or input: (a mapping of the input's fields)"
                                + ("" if project.importer is None else ", not both"))
        if project.importer is not None and project.importer not in IMPORTERS:
            raise RegistryError(f"{where}.importer: unknown importer '{project.importer}'; valid names: "
                                f"{', '.join(sorted(IMPORTERS))}")
        for criterion, spec in project.criteria.items():
            for key in ("control", "rationale", "model_output", "model_rationale"):
                template = getattr(spec, key)
                if template and not _valid_template(template):
                    raise RegistryError(f"{where.at(f'criteria.{criterion}.{key}')}: '{template}' may only use the "
                                        "placeholder {agent}")
                if template and "{agent}" in template and not project.agents:
                    raise RegistryError(f"{where.at(f'criteria.{criterion}.{key}')}: uses {{agent}} but the project "
                                        "lists no agents")
        try:
            problems = check_against_config(project)
        except RegistryError as e:  # the config cannot be read: at the line of its config: key
            prefix = f"projects.{project.name}.config: "
            if str(e).startswith(prefix):
                raise RegistryError(f"{where.at('config')}: {str(e)[len(prefix):]}") from None
            raise
        if project.input is not None:
            problems += input_problems(project)
        problems += compare_problems(project)
        problems += adaptive_problems(project) + front_matter_problems(project) + prefill_problems(project)
        if problems:  # each at its own line (a criterion's, not the entry's first)
            raise RegistryError(where.each(problems))
        for listed in _lists_of(project, where):
            if listed is not project and (listed.name in raw["projects"] or listed.name in projects):
                raise RegistryError(f"{where}.lists: the name of its list project '{listed.name}' is taken")
            projects[listed.name] = listed
    entries = {p.entry: p for p in projects.values()}
    for name, project in projects.items():
        first = project.crowd.after if project.crowd else None
        if first and (first not in entries or not project.study or entries[first].study != project.study):
            raise RegistryError(f"{Where(path, text, project.entry)}.crowd.after: '{first}' is not another project "
                                f"of the study '{project.study or name}'")
        for other in project.shares_items:
            if other not in entries or other == project.entry or not project.study or \
                    entries[other].study != project.study:
                raise RegistryError(f"{Where(path, text, project.entry)}.shares_items: '{other}' is not another "
                                    f"project of the study '{project.study or name}'")
        if first and entries[first].lists:
            raise RegistryError(f"{Where(path, text, project.entry)}.crowd.after: '{first}' has counterbalanced "
                                "lists; a part done first cannot have lists")
    declared: dict[str, str] = {}  # a study's front matter: declared once, on one of its parts
    for project in entries.values():
        if project.crowd and project.crowd.consent:
            if (first := declared.setdefault(project.study_name, project.entry)) != project.entry:
                raise RegistryError(f"{Where(path, text, project.entry).at('crowd.consent')}: the study "
                                    f"'{project.study_name}' has its front matter on '{first}' already; declare it once")
    if looped := part_order.circle(list(entries.values())):
        raise RegistryError(f"{Where(path, text, looped[0])}.crowd.after: {' -> '.join(looped + looped[:1])} come "
                            "after each other in a circle; one of them must come first (remove its crowd.after)")
    return Registry(projects, path, read_judges(raw, path, text))


def _lists_of(project: Project, where) -> list[Project]:
    """The project itself, or one project per counterbalanced list (NAME_list1 ..., titled "TITLE (list 1)")."""
    if project.lists is None:
        return [project]
    out = []
    for number in range(1, project.lists.count + 1):
        title = f"{project.title} (list {number})"
        if len(title) > 50:
            raise RegistryError(f"{where}.title: with lists the title becomes '{title}', longer than Label Studio's "
                                "50 characters; shorten it")
        out.append(project.model_copy(update={"name": f"{project.name}_list{number}", "title": title,
                                              "list_of": project.name, "list_number": number}))
    return out


def _valid_template(template: str) -> bool:
    """Only {agent} may appear in braces (str.format would fail, or read attributes, on anything else)."""
    return not {"{", "}"} & set(template.replace("{agent}", ""))
