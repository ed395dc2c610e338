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


# The layers, lowest first. A module imports only modules of its own layer or a lower one (without a circle, above);
# the folders read as the flow: an input file (values, importers, protocols) becomes tasks (tasks) in Label Studio
# (labelstudio); their answers become the tidy frame and the report (exporters), whose numbers the statistics package
# computes (stats); ratings files from anywhere come in through readers; the crowd study and its gateway sit beside.
LAYERS = [
    ("base", ["evalstudio.base", "evalstudio.stats"]),
    ("values", ["evalstudio.values"]),
    ("importers", ["evalstudio.importers"]),
    ("protocols", ["evalstudio.protocols"]),
    ("label studio and readers", ["evalstudio.labelstudio", "evalstudio.readers"]),
    ("crowd", ["evalstudio.crowd"]),
    ("exporters", ["evalstudio.exporters"]),
    ("ml backend", ["evalstudio.ml_backend"]),
    ("tasks", ["evalstudio.tasks"]),
    ("gateway", ["evalstudio.gateway"]),
    ("judge", ["evalstudio.judge"]),  # the LLM judge reads the instrument as the gateway serves it (its checks)
    ("operations", ["evalstudio.operations"]),  # what an operator does to a study, below the commands that parse
    ("cli", ["evalstudio.cli"]),
]
MAX_LINES = 500


def layer_of(module: str) -> int | None:
    for rank, (_, packages) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in packages):
            return rank
    return None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
                  for a, targets in graph.items() for b in targets
                  if layer_of(a) is not None and layer_of(b) is not None and layer_of(b) > layer_of(a))


def test_the_layer_checker_finds_an_upward_import():
    assert upward_imports({"evalstudio.base.errors": {"evalstudio.cli.base"}, "evalstudio.cli.base":
                           {"evalstudio.base.errors"}}) == [
        "evalstudio.base.errors (base) imports evalstudio.cli.base (cli)"]


def test_every_module_is_in_a_layer_and_imports_only_its_own_or_lower_layers():
    graph, found = import_graph(), modules()
    assert [m for m in found if m != "evalstudio" and layer_of(m) is None] == []
    assert upward_imports(graph) == []


def test_no_module_is_longer_than_the_limit():
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split by responsibility: {long}"


def test_the_statistics_import_nothing_else_of_evalstudio_and_nothing_of_label_studio():
    stats = {name: path for name, path in modules().items() if name.startswith("evalstudio.stats")}
    graph = import_graph()
    assert {n: sorted(t for t in graph.get(n, ()) if not t.startswith("evalstudio.stats")) for n in stats} == \
        {n: [] for n in stats}
    for name, path in stats.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.startswith(("label_studio", "httpx"))], name


def test_no_module_imports_another_modules_private_names():
    """Issue 53: 26 imports of another module's private names (`_fail`, `_read_study`, `_table`, ...). What one
    module uses of another is public; a private name stays where it is defined (third-party ones excepted)."""
    found = modules()
    offending = []
    for name, path in found.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
                continue
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else node.module
            if not (base or "").startswith("evalstudio"):
                continue  # a third-party package's private name (label_studio_ml's _manager) is its business
            offending += [f"{name}: from {base} import {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert offending == []


def undocumented(source: str) -> list[str]:
    """The public functions and classes of a module's source (and the public methods of its public classes) that
    have no docstring."""
    missing = []
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or node.name.startswith("_"):
            continue
        if ast.get_docstring(node) is None:
            missing.append(node.name)
        if isinstance(node, ast.ClassDef):
            missing += [f"{node.name}.{m.name}" for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and not m.name.startswith("_") and ast.get_docstring(m) is None]
    return missing


def test_the_docstring_checker_finds_what_lacks_one():
    source = ('def f():\n    """F."""\n\ndef g():\n    pass\n\ndef _h():\n    pass\n\nclass C:\n    def m(self):\n'
              '        pass\n\n    def _n(self):\n        pass\n\nclass _D:\n    def m(self):\n        pass\n')
    assert undocumented(source) == ["g", "C", "C.m"]


def test_every_public_function_and_class_has_a_docstring():
    """Issue 66: a reader of a room learns what each public name does from its first line (about 100 lacked one)."""
    missing = [f"{name}: {what}" for name, path in modules().items()
               for what in undocumented(path.read_text(encoding="utf-8"))]
    assert missing == [], "give each a one-line docstring"
