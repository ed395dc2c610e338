"""The package's imports have no circle: every import statement (at module level or inside a function) of
evalstudio, importers, exporters and ml_backend, read from the source (no import is run; importers/, exporters/ and ml_backend/ as the evalstudio.* packages they
are installed as), forms a graph with no
strongly connected component of two or more modules. A circle is how a low layer ends up reaching into a high one
(the registry importing the mapping, which imported the results, which imported the registry)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evalstudio", "importers", "exporters", "ml_backend")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "__pycache__" in path.parts or path.is_symlink():
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            # importers/, exporters/ and ml_backend/ are installed as evalstudio.importers, ... (pyproject.toml)
            found[name if package == "evalstudio" else f"evalstudio.{name}"] = path
    return found


def import_graph() -> dict[str, set[str]]:
    found = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in found.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in found]
                targets = subs if len(subs) == len(node.names) else subs + [base]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t in found and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checker_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_in_the_package():
    graph = import_graph()
    assert len(graph) > 30  # (the graph was read: the package's modules and their imports)
    assert circles(graph) == []
