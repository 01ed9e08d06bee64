"""The boxes the explorer opens and closes: rolled training steps, then the modules of the trace's one module tree
(analysis/hierarchy.py, the same tree as the graph view's depth: `model` > `model.transformer` > `model.transformer.h.0`
> ...), then runs of one line's ops."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..analysis.hierarchy import Hierarchy

__all__ = ["Groups", "module_of_parameter"]


def module_of_parameter(parameter: str | None, fallback: str | None) -> str | None:
    """The module that owns a parameter: `model.fc1.weight` -> `model.fc1`; a bare name -> `fallback`."""
    if parameter and "." in parameter:
        return parameter.rsplit(".", 1)[0]
    return fallback


@dataclass
class _Group:
    key: tuple[str | None, str]
    label: str
    kind: str  # "step", "module", "line"
    parent: int  # -1: top level
    depth: int
    path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Groups:
    """Groups in the order they were made; a node belongs to its deepest group (an index, or -1 for none)."""

    def __init__(self, tree: Hierarchy) -> None:
        self.tree = tree
        self._groups: list[_Group] = []
        self._index: dict[tuple[str | None, str], int] = {}

    def add_step(self, roll: str, label: str, detail: str, numbers: list[int]) -> int:
        return self._add((roll, ""), label, "step", -1, 0, extra={"detail": detail, "numbers": numbers})

    def describe_step(self, roll: str, **extra: Any) -> None:
        """More about a step box: its instances (one per rolled step) and which of them the nodes are drawn from."""
        self._groups[self._index[(roll, "")]].extra.update(extra)

    def _add(self, key: tuple[str | None, str], label: str, kind: str, parent: int, depth: int, *, path: str = "",
             extra: dict[str, Any] | None = None) -> int:
        if key not in self._index:
            self._index[key] = len(self._groups)
            self._groups.append(_Group(key, label, kind, parent, depth, path, extra or {}))
        return self._index[key]

    def place(self, roll: str | None, module: str | None) -> int:
        """The group of a node drawn in step group `roll` (or none) inside `module` (or none)."""
        parent = self._index.get((roll, "")) if roll is not None else None
        current = -1 if parent is None else parent
        depth = 0 if parent is None else 1
        if module:
            for level in range(self.tree.depth(module) + 1):
                path = self.tree.ancestor(module, level)
                name = self.tree[path].name if path in self.tree else path.rsplit(".", 1)[-1]
                current = self._add((roll, path), name, "module", current, depth, path=path)
                depth += 1
        return current

    def add_loops(self, nodes: list[dict[str, Any]], runs: list[list[list[int]]]) -> None:
        """A box per rolled loop (`loop ×8`), holding a box per iteration that holds that iteration's nodes in
        their modules. `runs` lists each loop's iterations, each a list of node indexes (picture/simplify.py's
        find_repeats over the same tokens as the graph view). A loop box sits in the deepest box all its nodes
        share; a loop of single ops has no iteration boxes."""
        for r, iterations in enumerate(runs):
            members = [i for body in iterations for i in body]
            chains = [self._chain(nodes[i]["g"]) for i in members]
            common: list[int] = []
            for level in zip(*chains):
                if len(set(level)) != 1:
                    break
                common.append(level[0])
            parent = common[-1] if common else -1
            roll = self._groups[parent].key[0] if parent >= 0 else None
            depth = self._groups[parent].depth + 1 if parent >= 0 else 0
            lines = sorted({nodes[i]["line"] for i in members if nodes[i].get("line") is not None})
            where = "" if not lines else f" (line {lines[0]})" if len(lines) == 1 else f" (lines {lines[0]}-{lines[-1]})"
            label = f"\N{CLOCKWISE OPEN CIRCLE ARROW} loop \N{MULTIPLICATION SIGN}{len(iterations)}{where}"
            loop = self._add((roll, f"loop{r}"), label, "loop", parent, depth,
                             extra={"count": len(iterations), "period": len(iterations[0])})
            for k, body in enumerate(iterations):
                holder = loop
                if len(body) > 1:
                    holder = self._add((roll, f"loop{r}/{k}"), f"iteration {k + 1}", "iteration", loop, depth + 1)
                for i in body:
                    current = holder
                    for g in self._chain(nodes[i]["g"])[len(common):]:  # its modules below the loop's box
                        old = self._groups[g]
                        current = self._add((roll, f"loop{r}/{k}:{old.path}"), old.label, old.kind, current,
                                            self._groups[current].depth + 1, path=old.path)
                    nodes[i]["g"] = current

    def _chain(self, g: int) -> list[int]:
        out = []
        while g >= 0:
            out.append(g)
            g = self._groups[g].parent
        return out[::-1]

    def split_lines(self, nodes: list[dict[str, Any]], *, minimum: int) -> None:
        """Give the ops of one source line a box of their own where one box holds `minimum` or more of them
        (a loop of 20,000 iterations at one line opens as one box, not 20,000 nodes)."""
        counts = Counter((n["g"], n.get("file"), n.get("line")) for n in nodes if n.get("line") is not None)
        for (group, file, line), count in counts.items():
            if count < minimum:
                continue
            parent_depth = self._groups[group].depth if group >= 0 else -1
            roll = self._groups[group].key[0] if group >= 0 else None
            path = self._groups[group].path if group >= 0 else ""
            key = (roll, f"{path}@{file}:{line}")
            index = self._add(key, f"line {line} \N{MULTIPLICATION SIGN}{count:,}", "line", group,
                              parent_depth + 1, path=path, extra={"line": line, "file": file})
            for n in nodes:
                if n["g"] == group and n.get("file") == file and n.get("line") == line:
                    n["g"] = index

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for g in self._groups:
            row: dict[str, Any] = {"label": g.label, "kind": g.kind, "parent": g.parent, "depth": g.depth}
            if g.path:
                row["path"] = g.path
            row.update(g.extra)
            out.append(row)
        return out
