"""The package's imports go one way: tracer -> trace model -> analysis -> picture -> render -> explorer -> front
ends.

Every module of gradviz/ is parsed (imports inside functions and under TYPE_CHECKING count too: a lazy import
is still a dependency), and the graph of its imports must have no cycle and no import from a lower layer into a
higher one. A layer is named by its folder; the trace file's folder (tracefile/) and the top-level modules listed
in TRACE_MODEL are the trace model; the front ends are the command line (cli/), the integrations (integrations/) and
the package's facade (`gradviz/__init__.py`, `__main__.py`): they may import anything, and nothing below them may
import them. No other module sits at the top level."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gradviz"

#: Top-level modules that are plain data (with tracefile/, its persistence): every layer may import them.
TRACE_MODEL = {"model", "collector", "paths", "text", "torch_support", "version"}

#: The front ends' folders: the command line, and the notebook, pytest, gallery, Sphinx and torchviz integrations
FRONT_FOLDERS = {"cli", "integrations"}
FACADE = {"__init__", "__main__"}

#: Which layers each layer may import (its own included).
ALLOWED = {
    "model": {"model"},
    "tracer": {"model", "tracer"},
    "analysis": {"model", "analysis"},
    "picture": {"model", "analysis", "picture"},
    "render": {"model", "analysis", "picture", "render"},
    "explorer": {"model", "analysis", "picture", "render", "explorer"},
    "front": {"model", "tracer", "analysis", "picture", "render", "explorer", "front"},
}


def module_names() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ("tracer", "analysis", "picture", "render", "explorer"):
        return parts[1]
    if (len(parts) == 2 and parts[1] in TRACE_MODEL) or (len(parts) >= 2 and parts[1] == "tracefile"):
        return "model"
    return "front"


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The gradviz modules `module` imports -> the first line that does; `from .pkg import name` counts as
    importing `pkg.name` when that is a module, else `pkg`; importing a module inside a subpackage from outside it
    also runs (imports) that subpackage's __init__."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target not in modules:
            target = target.rsplit(".", 1)[0]
        parts = target.split(".")
        for depth in range(2, len(parts)):  # the subpackages above it, not the root facade
            parent = ".".join(parts[:depth])
            if not module.startswith(parent + ".") and module != parent:
                found.setdefault(parent, line)
        if target != module:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "gradviz" or alias.name.startswith("gradviz."):
                    add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != "gradviz" and not base.startswith("gradviz."):
                continue
            for alias in node.names:
                name = f"{base}.{alias.name}"
                add(name if name in modules else base, node.lineno)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_function_level_imports() -> None:
    graph = import_graph()
    # the CLI imports its pipeline inside a function, the pipeline the tracer's runner for its types only: each is
    # an edge all the same
    assert "gradviz.cli.pipeline" in graph["gradviz.cli.command"]
    assert "gradviz.tracer.runner" in graph["gradviz.cli.pipeline"]
    assert "gradviz.tracer" in graph["gradviz.cli.pipeline"]  # and with it the subpackage's __init__
    assert layer("gradviz.model") == "model" and layer("gradviz.render.graph") == "render"
    assert layer("gradviz.picture.steps") == "picture" and layer("gradviz.picture") == "picture"
    assert layer("gradviz.integrations.notebook") == "front" and layer("gradviz") == "front"


def test_every_top_level_module_is_the_facade_or_the_trace_model() -> None:
    top = sorted(path.stem for path in PACKAGE.glob("*.py"))
    folders = sorted(path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file())
    assert [name for name in top if name not in FACADE | TRACE_MODEL] == [], "a front end goes in cli/ or integrations/"
    assert set(folders) == {"tracer", "tracefile", "analysis", "picture", "render", "explorer"} | FRONT_FOLDERS
    assert layer("gradviz.cli.pipeline") == layer("gradviz.integrations.notebook") == layer("gradviz") == "front"


def test_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (function-level imports included): " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("lower", ["model", "tracer", "analysis", "picture", "render", "explorer"])
def test_no_upward_import(lower: str) -> None:
    modules = module_names()
    bad = []
    for module, targets in import_graph().items():
        if layer(module) != lower:
            continue
        for target, line in targets.items():
            if layer(target) not in ALLOWED[lower]:
                bad.append(f"{modules[module].relative_to(PACKAGE.parent)}:{line} imports {target} ({layer(target)})")
    assert not bad, f"the {lower} layer imports upwards:\n" + "\n".join(bad)


def test_the_page_document_reads_the_picture_not_the_renderers() -> None:
    """explorer/document.py shows what the picture holds: it imports no module of render/ (DOT building)."""
    graph = import_graph()
    drawn = sorted(t for t in graph["gradviz.explorer.document"] if layer(t) == "render")
    assert not drawn, f"explorer/document.py imports renderers: {drawn}"
    assert "gradviz.picture.picture" in graph["gradviz.explorer.document"]
