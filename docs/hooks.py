"""MkDocs hooks: parts of the reference pages are read from the repository when the site is built, so they cannot
drift from it. `<!-- projects.yaml: header -->` becomes the comment block at the top of projects.yaml (what every
key means), `<!-- projects.yaml: keys -->` the table of every key from the model that checks an entry
(evalstudio/protocols/reference.py) and `<!-- projects.yaml: entry NAME -->` the shipped entry NAME as it is in the
file."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!-- projects\.yaml: (header|keys|entry ([a-z_0-9]+)) -->")


def _header(lines: list[str]) -> str:
    out = []
    for line in lines:
        if not line.startswith("#"):
            break
        out.append(line[2:] if line.startswith("# ") else line[1:])
    return "```text\n" + "\n".join(out).strip("\n") + "\n```"


def _entry(lines: list[str], name: str) -> str:
    start = next((i for i, line in enumerate(lines) if line == f"  {name}:"), None)
    if start is None:
        raise ValueError(f"projects.yaml has no entry {name!r} (docs/reference/projects-yaml.md asks for it)")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^  \S", lines[i]) or re.match(r"^\S", lines[i])),
               len(lines))
    return "```yaml\n" + "\n".join(line[2:] for line in lines[start:end]).rstrip() + "\n```"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "<!-- projects.yaml:" not in markdown:
        return markdown
    lines = (ROOT / "projects.yaml").read_text(encoding="utf-8").splitlines()
    from evalstudio.protocols.reference import markdown_table

    return MARK.sub(lambda m: _header(lines) if m.group(1) == "header" else markdown_table() if m.group(1) == "keys"
                    else _entry(lines, m.group(2)), markdown)
