"""Making a protocol of one's own from a template (`evalstudio new`): a projects.yaml entry, its labeling config and
an example input written as data, checked to load and validate, and nothing left written on any problem. Uses the
registry, the importers' mapping and the task scanner; writes files only through base.files."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from evalstudio.base.errors import BadInput

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
TEMPLATE_NAMES = ("likert", "slider", "pairwise", "best-worst")


def create(name: str, template: str, folder: Path) -> list[Path]:
    """Writes the template's files as NAME into `folder` (nothing is overwritten; on any problem nothing is left
    written) and checks that the result loads and that the example validates; the paths written."""
    from evalstudio.base.files import write_output
    from evalstudio.protocols import registry
    from evalstudio.protocols.mapping import importer_for
    from evalstudio.tasks.scanning import scan

    if template not in TEMPLATE_NAMES:
        raise BadInput(f"unknown template '{template}'; valid names: {', '.join(TEMPLATE_NAMES)}")
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", name):
        raise BadInput(f"'{name}': a protocol name is lower-case letters, digits and _ (e.g. my_study)")
    if not folder.is_dir():
        raise BadInput(f"{folder}: no such folder")
    source = TEMPLATES / template
    example = next(p for p in sorted(source.iterdir()) if p.stem == "example")
    projects = folder / "projects.yaml"
    targets = {"config": folder / "labeling_configs" / f"{name}.xml",
               "example": folder / "examples" / name / f"example{example.suffix}"}
    if projects.is_symlink():  # refused before anything is written (the write through it would be refused later)
        raise BadInput(f"{projects}: is a symbolic link; evalstudio does not write through one (use the file itself)")
    before = projects.read_text(encoding="utf-8") if projects.exists() else None
    if before is not None:
        try:
            names = (yaml.safe_load(before) or {}).get("projects") or {}
        except Exception as e:  # noqa: BLE001 - yaml's errors: a broken projects.yaml is not extended
            raise BadInput(f"{projects}: cannot add to it, it is not valid YAML ({type(e).__name__})") from None
        if name in names:
            raise BadInput(f"{projects}: has an entry '{name}' already; choose another name")
    for path in targets.values():
        if path.exists():
            raise BadInput(f"{path}: exists already; choose another name or move it")
    entry = (source / "entry.yaml").read_text(encoding="utf-8").replace("NAME", name)
    text = (before.rstrip("\n") + "\n\n" + entry) if before is not None else (
        "# evalstudio protocols (see `evalstudio new --help`); labeling configs are found relative to this file.\n"
        "projects:\n" + entry)
    if before is not None and not re.search(r"(?m)^projects:\s*$", before):
        raise BadInput(f"{projects}: has no top-level 'projects:' mapping to add the entry to")
    made: list[Path] = []
    try:
        for path, content in ((targets["config"], (source / "config.xml").read_text(encoding="utf-8")),
                              (targets["example"], example.read_text(encoding="utf-8"))):
            for parent in reversed(path.parents):
                if not parent.exists() and parent.is_relative_to(folder):
                    parent.mkdir()
                    made.append(parent)
            write_output(path, content)
            made.append(path)
        write_output(projects, text)
        reg = registry.load(projects)
        project = reg.get(name)
        result = scan(project, importer_for(project), [targets["example"]])
        if result.problems or not result.tasks:
            raise BadInput(f"the {template} template's example does not validate: "
                           + "; ".join(map(str, result.problems[:3])))
    except BaseException:
        try:
            if before is None:
                projects.unlink(missing_ok=True)
            else:
                write_output(projects, before)
        finally:  # what this command made goes, whatever happened to projects.yaml
            for path in reversed(made):
                path.rmdir() if path.is_dir() else path.unlink(missing_ok=True)
        raise
    return [projects, targets["config"], targets["example"]]

