"""The module tree of a trace: every nn.Module path the program ran or owned parameters under, as one hierarchy.

Built from `NodeRecord.module` (the module running when an autograd node was made) and the parameters' qualified
names (`model.transformer.h.0.attn.c_attn.weight` lives in `model.transformer.h.0.attn.c_attn`). Paths are dotted
and every prefix of a path is a module too, so containers that are never called (`ModuleDict`, `ModuleList`:
`model.transformer`, `model.transformer.h`) still group their children by path.

Depth counts from the outermost modules, the program's variables: `model` and `netD` are at depth 0, `model.fc1`
at depth 1, `model.transformer.h.0` at depth 3. The graph view's `--depth N` draws one box per module at depth N,
the explorer opens and closes the same tree.

API (stable: other views build on it)::

    tree = module_hierarchy(trace)          # or Hierarchy.from_paths(paths, ops={path: n})
    tree.roots                              # ("model", "criterion"): depth-0 modules, in first-seen order
    tree["model.fc1"]                       # Module(path, parent, children, depth, ops, total_ops, parameters, called)
    "model.fc1" in tree; len(tree); list(tree)   # paths in depth-first, first-seen order
    tree.parent(path); tree.children(path); tree.depth(path)
    tree.ancestor(path, depth)              # the prefix of `path` at `depth` (the path itself when shallower)
    tree.ops(path, recursive=True)          # autograd nodes made in the module (and below it)
    tree.at_depth(depth)                    # the paths at exactly `depth`
    tree.max_depth                          # deepest depth; -1 for a trace without modules
    tree.outside                            # autograd nodes made outside any module (the loss in the script)

`ancestor`, `depth`, `parent` work on any dotted path, also one not in the tree. No torch import: it runs on a
trace loaded from JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping

from .steps import is_leaf

if TYPE_CHECKING:
    from ..model import Trace

__all__ = ["Hierarchy", "Module", "module_hierarchy"]


@dataclass(frozen=True, slots=True)
class Module:
    """One module of the tree."""

    path: str  # dotted: `model.transformer.h.0.attn`
    parent: str | None  # None for an outermost module
    children: tuple[str, ...]  # first-seen order
    depth: int  # 0 for an outermost module
    ops: int  # autograd nodes made while this module itself (not a child) was the innermost one running
    total_ops: int  # in this module and every module below it
    parameters: tuple[str, ...]  # qualified names of the parameters it owns directly
    called: bool  # the tracer saw it run (False: a container such as ModuleDict, known only by its path)

    @property
    def name(self) -> str:
        """The last part of the path: `attn`, `0`."""
        return self.path.rsplit(".", 1)[-1]


def _depth(path: str) -> int:
    return path.count(".")


class Hierarchy:
    """The module tree (see the module docstring for the API)."""

    def __init__(self, modules: dict[str, Module], outside: int = 0) -> None:
        self.modules = modules
        self.outside = outside
        self.roots: tuple[str, ...] = tuple(p for p, m in modules.items() if m.parent is None)
        self.max_depth = max((m.depth for m in modules.values()), default=-1)

    @classmethod
    def from_paths(
        cls,
        paths: Iterable[str],
        *,
        ops: Mapping[str, int] | None = None,
        parameters: Iterable[str] = (),
        outside: int = 0,
    ) -> Hierarchy:
        """The tree of the modules at `paths` (called modules, in first-seen order) and of the parameters'
        qualified names (`model.fc1.weight`: module `model.fc1`); `ops` counts autograd nodes per module path."""
        ops = ops or {}
        called = list(dict.fromkeys(p for p in paths if p))
        owned: dict[str, list[str]] = {}
        for name in parameters:
            if "." in name:
                owned.setdefault(name.rsplit(".", 1)[0], []).append(name)
        children: dict[str, list[str]] = {}
        order: dict[str, None] = {}
        for path in [*called, *owned]:
            parts = path.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix not in order:
                    order[prefix] = None
                    if i > 1:
                        children.setdefault(".".join(parts[: i - 1]), []).append(prefix)
        totals: dict[str, int] = {}
        for path in sorted(order, key=_depth, reverse=True):  # deepest first: children before parents
            totals[path] = ops.get(path, 0) + sum(totals[c] for c in children.get(path, []))
        called_set = set(called)
        built: dict[str, Module] = {}

        def visit(root: str) -> None:
            stack = [root]
            while stack:  # iterative depth-first walk, children in first-seen order
                path = stack.pop()
                parent = path.rsplit(".", 1)[0] if "." in path else None
                kids = tuple(children.get(path, []))
                built[path] = Module(path, parent, kids, _depth(path), ops.get(path, 0), totals[path],
                                     tuple(owned.get(path, [])), path in called_set)
                stack.extend(reversed(kids))

        for path in order:
            if "." not in path:
                visit(path)
        return cls(built, outside)

    # ------------------------------------------------------------------ queries
    def __getitem__(self, path: str) -> Module:
        return self.modules[path]

    def __contains__(self, path: object) -> bool:
        return path in self.modules

    def __iter__(self) -> Iterator[str]:
        return iter(self.modules)

    def __len__(self) -> int:
        return len(self.modules)

    def __repr__(self) -> str:
        return f"<Hierarchy {len(self.modules)} modules, {len(self.roots)} roots, max depth {self.max_depth}>"

    def parent(self, path: str) -> str | None:
        return path.rsplit(".", 1)[0] if "." in path else None

    def children(self, path: str) -> tuple[str, ...]:
        module = self.modules.get(path)
        return module.children if module is not None else ()

    @staticmethod
    def depth(path: str) -> int:
        return _depth(path)

    @staticmethod
    def ancestor(path: str, depth: int) -> str:
        """The module at `depth` that contains `path` (`model.h.0.attn` at depth 1 is `model.h`); the path itself
        when it is not deeper than `depth`."""
        if depth < 0:
            raise ValueError(f"depth must be 0 or more, got {depth}")
        parts = path.split(".")
        return ".".join(parts[: depth + 1]) if len(parts) > depth + 1 else path

    def ops(self, path: str, *, recursive: bool = True) -> int:
        module = self.modules.get(path)
        if module is None:
            return 0
        return module.total_ops if recursive else module.ops

    def at_depth(self, depth: int) -> list[str]:
        return [p for p, m in self.modules.items() if m.depth == depth]


def module_hierarchy(trace: Trace) -> Hierarchy:
    """The module tree of `trace`: modules that made autograd nodes (AccumulateGrad not counted as an op) and the
    modules that own the trace's parameters."""
    ops: dict[str, int] = {}
    paths: list[str] = []
    outside = 0
    for node in sorted(trace.nodes.values(), key=lambda n: n.seq):
        if is_leaf(node):
            continue
        if node.module:
            paths.append(node.module)
            ops[node.module] = ops.get(node.module, 0) + 1
        else:
            outside += 1
    parameters = [t.parameter for t in sorted(trace.tensors.values(), key=lambda t: t.seq) if t.parameter]
    return Hierarchy.from_paths(paths, ops=ops, parameters=parameters, outside=outside)
