"""A projects.yaml entry against its labeling config: every criterion names a control of the config, of the
right kind, range and labels; every control of the config is described; `compare:` says what each answer means."""

from __future__ import annotations

import re

from evalstudio.values.controls import control_range
from evalstudio.values.spans import SPAN_TAGS, TABULATED, is_per_region, span_object_field

from .mapping import POSITIONS

NUMERIC_TAGS = {"Number", "Rating"}
LABEL_TAGS = {"Choices"}


def check_against_config(project) -> list[str]:
    """Every criterion must match a control of the XML (type, range, labels)."""
    li = project.interface
    problems = []
    known = set()
    for slot in project.slots():
        key = f"criteria.{slot.criterion}"
        known.add(slot.control)
        try:
            control = li.get_control(slot.control)
        except Exception:
            problems.append(f"{key}.control: '{slot.control}' is not a control in {project.config_path.name}")
        else:
            problems += _check_control(key, project.criteria[slot.criterion], control)
        if slot.rationale:
            known.add(slot.rationale)
            if slot.rationale not in li._controls or li.get_control(slot.rationale).tag != "TextArea":
                problems.append(f"{key}.rationale: '{slot.rationale}' is not a TextArea in {project.config_path.name}")
    for name in project.metadata_controls:
        known.add(name)
        if name not in li._controls:
            problems.append(f"metadata_controls: '{name}' is not a control in {project.config_path.name}")
    if "source" in project.data_fields():
        problems.append(f"{project.config_path.name}: $source is Label Studio's own variable: its editor fills it with "
                        "the whole task, hidden fields (systems, model outputs, gold answers) included; name the field "
                        "otherwise (e.g. $document)")
    problems += tabulation_problems(project)
    for control in li.controls:
        if control.name not in known:
            problems.append(f"{project.config_path.name}: control '{control.name}' is not described in projects.yaml: "
                            f"add a criterion whose control it is (criteria: {{NAME: {{control: {control.name}, "
                            "scale: ...}}), or list it in metadata_controls: when its answers are notes about the "
                            "task, not a rating (error spans, a free-text note, a bad-instance flag)")
    return problems


def tabulation_problems(project) -> list[str]:
    """Every answer a control stores goes into a table (the tidy frame or the spans table): a control evalstudio
    cannot tabulate is refused here, never dropped from an export later."""
    li, problems = project.interface, []
    criteria_controls = {slot.control for slot in project.slots()}
    for control in li.controls:
        where = f"{project.config_path.name}:{_line(project.label_config, control.name)}: control '{control.name}'"
        if control.tag not in TABULATED:
            problems.append(f"{where}: evalstudio cannot put the answers of a {control.tag} in a table, so every "
                            f"export would leave them out; use one of {', '.join(TABULATED)} (Labels: spans of a Text)")
        elif control.tag in SPAN_TAGS and span_object_field(li, control) is None:
            problems.append(f"{where}: a Labels control marks spans of one Text that shows a task field "
                            "(toName=\"NAME\" with <Text name=\"NAME\" value=\"$field\"/>)")
        elif control.tag in SPAN_TAGS and control.name in criteria_controls:
            problems.append(f"{where}: spans are not a rating: list '{control.name}' in metadata_controls:")
        elif is_per_region(control) and control.name in criteria_controls:
            problems.append(f"{where}: a perRegion control is answered once per span (the spans table has it), "
                            f"not once per task: list '{control.name}' in metadata_controls:")
    return problems


def _line(config: str, name: str) -> int:
    """The line of the config where the control `name` is declared (1 when it cannot be found)."""
    match = re.search(rf'\bname\s*=\s*["\']{re.escape(name)}["\']', config)
    return config.count("\n", 0, match.start()) + 1 if match else 1


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


def _check_control(key: str, spec, control) -> list[str]:
    tag = control.tag
    if spec.is_numeric:
        if tag not in NUMERIC_TAGS:
            return [f"{key}: numeric criterion but control '{control.name}' is a {tag}"]
        lo, hi = control_range(control)
        if (lo, hi) != (spec.min, spec.max):
            return [f"{key}: range {spec.min:g}..{spec.max:g} but control '{control.name}' allows {lo:g}..{hi:g}"]
        return []
    if tag not in LABEL_TAGS:
        return [f"{key}: categorical criterion but control '{control.name}' is a {tag}: a criterion's control is "
                f"one of {', '.join(sorted(LABEL_TAGS))} (labels) or {', '.join(sorted(NUMERIC_TAGS))} (numbers); "
                "list other controls (Labels spans, TextArea) in metadata_controls:"]
    choices = list(control.labels)
    if choices != spec.labels:
        return [f"{key}.labels: {spec.labels} but control '{control.name}' offers {choices}"]
    return []
