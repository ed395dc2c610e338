"""Where in projects.yaml a problem is: `file:line: projects.NAME.KEY`, the line found by composing the YAML again
only when there is something to report."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from .config_checks import ConfigProblem


class Where:
    """`file:line: projects.NAME`, formatted only when a message uses it."""

    def __init__(self, path: Path, text: str, name):
        self.path, self.text, self.name = path, text, name

    def __str__(self) -> str:
        return f"{self.path}:{yaml_line(self.text, ('projects', self.name)) or 1}: projects.{self.name}"

    def at(self, key: str) -> str:
        """`file:line: projects.NAME.KEY` with the line of KEY itself (a criterion's, say), where the YAML has it."""
        parts = ("projects", self.name, *(k for k in key.split(".") if k))
        return f"{self.path}:{yaml_line(self.text, parts) or 1}: projects.{self.name}.{key}"

    def each(self, problems: list[str]) -> str:
        """Problems that start with their key ("criteria.q1.min: ...") as one line each, at the key's own line."""
        out = []
        for problem in problems:
            if isinstance(problem, ConfigProblem):  # the config's own file and line, then the entry using it
                out.append(f"{problem} (the config of {self})")
                continue
            if getattr(problem, "key", ""):  # a problem inside a file the entry names (front_matter.FileProblem)
                out.append(f"{problem} (named at {self.at(problem.key)})")
                continue
            key, sep, message = problem.partition(": ")
            if sep and re.fullmatch(r"[\w.\-+ {}]+", key) and " " not in key.strip():  # (+: max_spans a+b)
                out.append(f"{self.at(key)}: {message}")
            else:
                out.append(f"{self}: {problem}")
        return "\n".join(out)


def describe(error: ValidationError, path: Path, text: str, prefix: tuple) -> str:
    """A validation error as lines of file:line: field: message, each at its place in the YAML."""
    lines = []
    for err in error.errors():
        loc = prefix + tuple(err["loc"])
        line = yaml_line(text, loc)
        where = f"{path}:{line}" if line else str(path)
        lines.append(f"{where}: {'.'.join(map(str, loc))}: {err['msg']}")
    return "\n".join(lines)


def yaml_line(text: str, loc: tuple) -> int | None:
    """1-based line of the deepest YAML node on the path `loc` (None if not found)."""
    node = yaml.compose(text)
    line = None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if k.value == str(key)), None)
            if pair is None:
                # the key is missing: point at the mapping that should hold it
                return node.start_mark.line + 1
            line, node = pair[0].start_mark.line + 1, pair[1]  # the key's line (a mapping's value starts below it)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line
