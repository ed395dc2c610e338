"""A projects.yaml entry against its labeling config: every criterion names a control of the config, of the
right kind, range and labels; every control of the config is described; `compare:` says what each answer means."""

from __future__ import annotations

import re
from pathlib import Path
from xml.parsers import expat

from evalstudio.base.files import read_text_file
from evalstudio.values.controls import control_range
from evalstudio.values.spans import SPAN_TAGS, TABULATED, is_per_region, limited_controls, span_object_field

from .attention import attention_problems
from .mapping import POSITIONS

NUMERIC_TAGS = {"Number", "Rating"}
LABEL_TAGS = {"Choices"}


class ConfigProblem(str):
    """A problem of the labeling config itself, already `config.xml:line: control 'NAME': message` (reported as
    it is, with the projects.yaml entry that uses the config after it)."""


def shown_path(path: Path) -> Path:
    """A file's path as a message gives it: relative to the working folder where it is below it."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def config_lines(text: str) -> tuple[dict[str, int], int | None]:
    """({control or object name: its tag's 1-based line}, the first line using $source or None) of a labeling
    config's XML (ElementTree keeps no lines; expat's parser gives each start tag's). An XML the parser refuses gives
    no lines (Label Studio's own check reports it)."""
    lines: dict[str, int] = {}
    parser = expat.ParserCreate()

    def start(tag, attributes):
        if "name" in attributes:
            lines.setdefault(attributes["name"], parser.CurrentLineNumber)
    parser.StartElementHandler = start
    try:
        parser.Parse(text, True)
    except expat.ExpatError:
        pass
    source = next((n for n, line in enumerate(text.splitlines(), 1) if "$source" in line), None)
    return lines, source


def schema_error_line(text: str, message: str) -> int | None:
    """The 1-based line of the tag that Label Studio's refusal of a config names (the first tag holding one of the
    message's attr="value" pairs, e.g. toName="respons"), else of the XML's syntax error; None where neither is
    found."""
    wanted = re.findall(r'(\w+)="([^"]*)"', message)
    found: list[int] = []
    parser = expat.ParserCreate()

    def start(tag, attributes):
        if not found and any(attributes.get(key) == value for key, value in wanted):
            found.append(parser.CurrentLineNumber)
    parser.StartElementHandler = start
    try:
        parser.Parse(text, True)
    except expat.ExpatError as e:
        return found[0] if found else e.lineno
    return found[0] if found else None


# Label Studio's control tags (label_studio_sdk.label_interface.control_tags, less ChatMessage and ReactCode, which
# label themselves): each names the object tag it labels in toName
CONTROL_TAGS = frozenset({
    "choices", "labels", "brush", "brushlabels", "bitmask", "bitmasklabels", "magicwand", "ellipse", "ellipselabels",
    "keypoint", "keypointlabels", "vector", "vectorlabels", "ocrlabels", "polygon", "polygonlabels", "rectangle",
    "rectanglelabels", "videorectangle", "videovector", "videovectorlabels", "number", "datetime", "hypertextlabels",
    "pairwise", "paragraphlabels", "ranker", "rating", "relations", "taxonomy", "textarea", "timeserieslabels",
    "timelinelabels"})


def to_name_problems(text: str, config: Path) -> list[str]:
    """`config.xml:line: NAME: <Tag> needs toName=...` for every control tag without toName, checked before Label
    Studio's schema, whose refusal names neither the line nor the control (and at times another property)."""
    tags: list[tuple[str, dict, int]] = []
    parser = expat.ParserCreate()
    parser.StartElementHandler = lambda tag, attributes: tags.append((tag, attributes, parser.CurrentLineNumber))
    try:
        parser.Parse(text, True)
    except expat.ExpatError:
        return []  # Label Studio's own check reports it, at its line
    named = [a["name"] for tag, a, _ in tags if a.get("name") and tag.lower() not in CONTROL_TAGS and "value" in a]
    objects = [a["name"] for tag, a, _ in tags if a.get("name") in named and a["value"].startswith("$")] or named
    shown = ", ".join(objects[:12]) + (", ..." if len(objects) > 12 else "")
    return [f"{config}:{line}: {a.get('name') or tag}: <{tag}> needs toName=\"...\" naming the object tag it labels "
            + (f"(one of: {shown})" if objects else "(the config has none: add one, e.g. <Text name=\"target\" "
               "value=\"$target\"/>)")
            for tag, a, line in tags if tag.lower() in CONTROL_TAGS and not a.get("toName", "").strip()]


def check_against_config(project) -> list[str]:
    """Every criterion must match a control of the XML (type, range, labels)."""
    li = project.interface
    config = shown_path(project.config_path)
    try:
        lines, source_line = config_lines(read_text_file(project.config_path))
    except (OSError, UnicodeDecodeError):  # read once already (project.interface): only a race gets here
        lines, source_line = {}, None

    def at(name: str) -> str:
        return f"{config}:{lines[name]}" if name in lines else str(config)

    problems = []
    known = set()
    for slot in project.slots():
        key = f"criteria.{slot.criterion}"
        known.add(slot.control)
        try:
            control = li.get_control(slot.control)
        except Exception:
            problems.append(f"{key}.control: '{slot.control}' is not a control in {config}")
        else:
            problems += _check_control(key, project.criteria[slot.criterion], control, at(control.name))
        if slot.rationale:
            known.add(slot.rationale)
            if slot.rationale not in li._controls or li.get_control(slot.rationale).tag != "TextArea":
                problems.append(f"{key}.rationale: '{slot.rationale}' is not a TextArea in {config}")
    for name in project.metadata_controls:
        known.add(name)
        if name not in li._controls:
            problems.append(f"metadata_controls: '{name}' is not a control in {config}")
    if "source" in project.data_fields():
        problems.append(ConfigProblem(
            f"{config}:{source_line or 1}: $source: Label Studio's own variable: its editor fills it with the whole "
            "task, hidden fields (systems, model outputs, gold answers) included; name the field otherwise (e.g. "
            "$document)"))
    problems += tabulation_problems(project, at)
    problems += span_limit_problems(project, config)
    problems += attention_problems(project)
    for control in li.controls:
        if control.name not in known:
            problems.append(ConfigProblem(
                f"{at(control.name)}: control '{control.name}': not described in projects.yaml: add a criterion "
                f"whose control it is (criteria: {{NAME: {{control: {control.name}, scale: ...}}}}), or list it in "
                "metadata_controls: when its answers are notes about the task, not a rating (error spans, a "
                "free-text note, a bad-instance flag)"))
    return problems


def tabulation_problems(project, at) -> list[str]:
    """Every answer a control stores goes into a table (the tidy frame or the spans table): a control evalstudio
    cannot tabulate is refused here, never dropped from an export later. `at(name)`: the control's `config.xml:line`."""
    li, problems = project.interface, []
    criteria_controls = {slot.control for slot in project.slots()}
    for control in li.controls:
        where = f"{at(control.name)}: control '{control.name}'"
        if control.tag not in TABULATED:
            problem = (f"evalstudio cannot put the answers of a {control.tag} in a table, so every export would leave "
                       f"them out; use one of {', '.join(TABULATED)} (Labels: spans of a Text)")
        elif control.tag in SPAN_TAGS and span_object_field(li, control) is None:
            problem = ("a Labels control marks spans of one Text that shows a task field "
                       "(toName=\"NAME\" with <Text name=\"NAME\" value=\"$field\"/>)")
        elif control.tag in SPAN_TAGS and control.name in criteria_controls:
            problem = f"spans are not a rating: list '{control.name}' in metadata_controls:"
        elif is_per_region(control) and control.name in criteria_controls:
            problem = (f"a perRegion control is answered once per span (the spans table has it), not once per task: "
                       f"list '{control.name}' in metadata_controls:")
        else:
            continue
        problems.append(ConfigProblem(f"{where}: {problem}"))
    return problems


def span_limit_problems(project, config) -> list[str]:
    """`max_spans:` names span controls (Labels) of the config, one or several joined by '+': the most spans one answer
    may mark with them together (MQM: five errors per segment, in the translation and the source), which the gateway
    enforces and `status` and the exports flag."""
    spans = [c.name for c in project.interface.controls if c.tag in SPAN_TAGS]
    return [f"max_spans.{key}: '{name}' is not a span control (Labels) of {config}; "
            + (f"its span controls: {', '.join(spans)}" if spans else "it marks no spans: remove max_spans")
            for key in project.max_spans for name in limited_controls(key) if name not in spans]


def compare_problems(project) -> list[str]:
    """`compare:` against the criteria and the candidates: every label has a meaning, positions match."""
    compare, candidates = project.compare, project.input.candidates if project.input else None
    if compare is None:
        return ["input.candidates shows outputs side by side: say what the answers mean with compare: (criterion "
                "and outcomes for pairs, best and worst for tuples)"] if candidates else []
    if candidates is None:
        return ["compare: needs input.candidates (the outputs shown side by side, in random order)"]
    problems = []
    names = [compare.criterion] if compare.kind == "pairwise" else [compare.best, compare.worst]
    for name in names:
        if name not in project.criteria or project.criteria[name].labels is None:
            problems.append(f"compare: '{name}' is not a categorical criterion (Choices) of the entry")
    if problems:
        return problems
    if compare.kind == "pairwise":
        if candidates.per_task != 2:
            problems.append(f"compare.criterion: a pairwise protocol shows 2 candidates, not {candidates.per_task}")
        spec = project.criteria[compare.criterion]
        for outcome, label in compare.outcomes.items():
            if label not in spec.labels:
                problems.append(f"compare.outcomes.{outcome}: '{label}' is not a label of {compare.criterion} "
                                f"({', '.join(spec.labels)})")
        unmeant = [label for label in spec.labels if label not in compare.outcomes.values() and label not in spec.missing]
        if unmeant:
            problems.append(f"compare.outcomes: what does '{unmeant[0]}' mean? Map it to left, right, tie or "
                            f"both_bad, or list it in criteria.{compare.criterion}.missing")
        return problems
    if candidates.per_task < 3:
        problems.append("compare.best: best-worst tuples show 3 or more candidates (input.candidates.per_task)")
    for name in names:
        count = len(project.criteria[name].labels)
        if count != candidates.per_task:
            problems.append(f"compare: {name} offers {count} labels, one per position shown; per_task is "
                            f"{candidates.per_task} ({', '.join(POSITIONS[:candidates.per_task])})")
    return problems


def _check_control(key: str, spec, control, where: str) -> list[str]:
    """A criterion against its control (`where`: the control's config.xml:line, named in each message)."""
    tag = control.tag
    named = f"control '{control.name}' ({where})"
    if spec.is_numeric:
        if tag not in NUMERIC_TAGS:
            return [f"{key}: numeric criterion but {named} is a {tag}"]
        lo, hi = control_range(control)
        if (lo, hi) != (spec.min, spec.max):
            return [f"{key}: range {spec.min:g}..{spec.max:g} but {named} allows {lo:g}..{hi:g}"]
        return []
    if tag not in LABEL_TAGS:
        return [f"{key}: categorical criterion but {named} is a {tag}: a criterion's control is "
                f"one of {', '.join(sorted(LABEL_TAGS))} (labels) or {', '.join(sorted(NUMERIC_TAGS))} (numbers); "
                "list other controls (Labels spans, TextArea) in metadata_controls:"]
    choices = list(control.labels)
    if choices != spec.labels:
        return [f"{key}.labels: {spec.labels} but {named} offers {choices}"]
    return []
