"""The graph view's picture before DOT: steps and loops rolled, shared parameters split, modules boxed at a depth,
and what is still too big summarised to a budget."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable

from ..analysis.hierarchy import Hierarchy
from ..analysis.steps import is_leaf
from ..picture.annotate import Annotations
from ..picture.picture import Picture
from ..picture.simplify import Core, CoreNode
from ..picture.steps import Step, StepRoll, after_window, only_step
from ..text import in_thread

if TYPE_CHECKING:
    from ..model import NodeRecord, SavedTensorRecord, Trace


BIG = 150  # above this many autograd nodes: compact labels, saved tensors only where a finding points, fast layout
SPLIT_SHARED_ABOVE = 60  # above this many autograd nodes, a parameter used many times gets a node per use


@dataclass
class Prepared:
    """The graph with steps and loops rolled and shared parameters split: what every module depth starts from."""

    core: Core
    copies: dict[str, str]  # per-use copy of a parameter's node -> the node
    tree: Hierarchy
    weight: Callable[[str], int]  # boxes an autograd node is drawn as (itself, its parameter, its saved tensors)
    attach: set[str]  # leaf nodes, which join the module box of their user
    zone: dict[str, int]  # autograd node -> the step box it is drawn in
    unfolded: set[str]  # nodes drawn as themselves at any depth (findings, the loss)

    def origin(self, cid: str) -> str:
        return self.copies.get(cid, cid)


def prepare(trace: Trace, notes: Annotations, *, show_saved: bool, step: int | None, picture: Picture) -> Prepared:
    core = Core()
    nodes = trace.nodes
    steps = picture.steps
    keep = only_step(trace, steps, step) if step is not None else None
    beyond = after_window(trace, steps)  # the forward of step N + 1, recorded before the window closed
    if beyond:
        keep = (keep if keep is not None else set(nodes)) - beyond
    for node in nodes.values():
        if keep is None or node.id in keep:
            core.add_node(CoreNode(node.id, node.name, module=node.module))
    for node in nodes.values():
        if keep is not None and node.id not in keep:
            continue
        for nxt in node.next:
            if nxt is not None and (keep is None or nxt in keep):
                core.add_edge(nxt, node.id)
    if step is not None:
        shown = next(s for s in steps if s.number == step)
        # a step traced again after the window has its number in the run; another thread's, its place in that thread
        own = [s for s in steps if s.thread == shown.thread]
        index = own.index(shown) + 1
        prefix = "" if index == step else f"step {step}: "
        where = f" {in_thread(shown.thread)}" if shown.thread is not None else ""
        core.notes.append(f"{prefix}backward {index} of {len(own)}{where} (line {shown.line})")

    # 0. training steps, episodes, closure calls: steps that built the same graph are drawn once
    if step is None and len(steps) > 1:
        _roll_steps(trace, notes, core, steps, picture.rolls)

    # 1. loops: one body per loop, marked with its count
    order = [
        n.id for n in sorted(nodes.values(), key=lambda n: (n.seq, _num(n.id)))
        if not is_leaf(n) and n.id in core.nodes
    ]
    core.roll_loops(order, picture.op_tokens, notes.protected)  # "the same op": the picture's token
    big = core.big = len(core.nodes) > BIG

    # 2. a parameter used by many steps: a node per use instead of edges across the picture
    copies: dict[str, str] = {}
    if len(core.nodes) > SPLIT_SHARED_ABOVE:
        leafish = {nid for nid in core.nodes if is_leaf(nodes[nid]) and nid not in notes.protected}
        step_of = {nid: i for i, step_roll in enumerate(core.steps) for nid in step_roll.nodes}
        copies = core.split_shared(leafish, step_of)

    def weight(cid: str) -> int:
        record = nodes[copies.get(cid, cid)]
        return (1 + (record.variable is not None) + len(shown_saved(record, notes, show_saved, big))
                + bool(folded_saved(record, notes, show_saved, big)))

    attach = {cid for cid in core.nodes if is_leaf(nodes[copies.get(cid, cid)])}
    zone = {nid: i for i, step_roll in enumerate(core.steps) for nid in step_roll.nodes}
    # the loss stays its own box, painted as the output, even inside a module (nn.BCEWithLogitsLoss)
    ran_backward = any(e.kind.value == "backward" for e in trace.events)  # else every sink counts as an output
    unfolded = notes.protected | (output_nodes(trace, core, core.parents(), copies) if ran_backward else set())
    return Prepared(core, copies, picture.hierarchy, weight, attach, zone, unfolded)


def finish(
    trace: Trace, notes: Annotations, prepared: Prepared, depth: int | str | None, *, budget: int,
    note: str | None = None,
) -> Core:
    """A copy of the prepared graph with modules drawn as boxes at `depth` (None, "all": every op) and, still above
    `budget` drawn nodes, the parts furthest from the outputs and findings summarised. `note`: a line for the legend."""
    core = _copy_core(prepared.core)
    if note is not None:
        core.notes.append(note)
    tree, origin = prepared.tree, prepared.origin
    # 3. module calls as single nodes
    if depth is not None and depth != "all" and len(tree):
        core.collapse_modules(_box_keys(core, tree, int(depth)), prepared.unfolded, prepared.attach, prepared.zone)

    # 4. still too big: keep the outputs, every finding's neighbourhood and what is nearest the outputs
    nodes = trace.nodes
    users = core.parents()
    roots = [cid for cid in core.nodes if not users.get(cid)]
    losses = output_nodes(trace, core, users, prepared.copies)  # what backward started from, even when something used it later
    keep_first = [cid for cid in core.nodes if origin(cid) in notes.protected] + [c for c in core.nodes if c in losses] + roots
    weights = {c: (prepared.weight(c) if core.nodes[c].kind == "node" else 1) for c in core.nodes}
    leaves = {c for c, n in core.nodes.items() if n.kind == "node" and is_leaf(nodes[origin(c)])}
    # a hidden stretch stays inside its training step: one summary per step, drawn in the step's box
    zone = prepared.zone
    where: dict[str, Hashable] = {}
    if zone:
        where = {c: next((zone[m] for m in ([origin(c)] if n.kind == "node" else n.members) if m in zone), None)
                 for c, n in core.nodes.items()}
        for c in leaves:  # a parameter goes with the step of its first user
            where[c] = next((where[u] for u in users.get(c, []) if where.get(u) is not None), None)
    core.cut_to(budget, keep_first, weights, leaves - set(keep_first), zone=where)
    return core


def box_total(core: Core, prepared: Prepared) -> int:
    """Boxes `core` is drawn as, its autograd nodes' parameters and saved tensors included (outputs and cut-off
    values not: a lower bound of the boxes in its picture)."""
    return sum(1 if n.kind != "node" else prepared.weight(cid) for cid, n in core.nodes.items())


def _box_keys(core: Core, tree: Hierarchy, depth: int) -> dict[str, str | None]:
    """The module box each drawn autograd node belongs in at `depth`: its module's ancestor at that depth. The ops a
    module with submodules runs itself (the residual add of a block, the relu between a model's layers) stay drawn
    as themselves when that module is shallower than `depth`: they sit between the boxes of its children."""
    keys: dict[str, str | None] = {}
    for cid, cnode in core.nodes.items():
        module = cnode.module
        if cnode.kind != "node" or not module:
            continue
        keys[cid] = None if tree.depth(module) < depth and tree.children(module) else tree.ancestor(module, depth)
    return keys


def _roll_steps(
    trace: Trace, notes: Annotations, core: Core, steps: list[Step], rolled: tuple[list[StepRoll], dict[str, str]]
) -> None:
    """Draw steps of one shape once; findings of every step move onto the representative, saying which step."""
    rolls, mapping = rolled
    step_of: dict[str, tuple[int, int]] = {}
    for g, (roll, members) in enumerate(zip(rolls, _members(rolls, steps))):
        for number, ids in members:
            for nid in ids:
                step_of[nid] = (g, number)
    carried = [
        (src, dst) for src, dst in core.edges
        if src in step_of and dst in step_of and step_of[src][0] == step_of[dst][0] and step_of[src][1] != step_of[dst][1]
    ]
    core.remap(mapping, carried=carried)
    core.steps = rolls
    core.step_home = mapping
    marks = {nid: numbers for roll in rolls if roll.count > 1 for nid, numbers in roll.marks.items()}
    for (nid, name), note in list(notes.saved.items()):
        target = mapping.get(nid)
        if target is None:
            continue
        del notes.saved[(nid, name)]
        if (target, name) not in notes.saved:
            notes.saved[(target, name)] = note
    notes.protected.update(mapping[n] for n in list(notes.protected) if n in mapping)
    core.step_marks = marks


def _members(rolls: list[StepRoll], steps: list[Step]) -> list[list[tuple[int, list[str]]]]:
    by_number = {s.number: s for s in steps}
    return [[(n, by_number[n].nodes) for n in roll.numbers] for roll in rolls]


def _copy_core(core: Core) -> Core:
    """A copy to simplify further (collapse, cut) while `core` stays as it is: nodes, edges and notes copied; the rolled
    loops and steps are shared (nothing after them changes them)."""
    clone = Core()
    clone.nodes = {k: CoreNode(v.id, v.name, v.kind, v.origin, v.module, list(v.members), v.roll) for k, v in core.nodes.items()}
    clone.edges = dict(core.edges)
    clone.rolls = core.rolls
    clone.notes = list(core.notes)
    clone.messages = list(core.messages)
    clone.hidden = core.hidden
    clone.big = core.big
    clone.steps = core.steps
    clone.step_home = core.step_home
    clone.step_marks = core.step_marks
    return clone


def _num(node_id: str) -> int:
    tail = node_id[1:]
    if tail.isdigit():  # the recorder's ids: n0, n1, ...
        return int(tail)
    digits = "".join(ch for ch in node_id if ch.isdigit())
    return int(digits) if digits else 0


FOLD_SAVED_ABOVE = 4  # an op saving more tensors than this (an LSTM layer saves 12) draws them as one box


def shown_saved(node: NodeRecord, notes: Annotations, show_saved: bool, big: bool) -> list[SavedTensorRecord]:
    flagged = [s for s in node.saved if s.tensor is not None and (node.id, s.name) in notes.saved]
    if not show_saved or big:
        return flagged
    plain = [s for s in node.saved if s.tensor is not None and (node.id, s.name) not in notes.saved]
    if len(plain) > FOLD_SAVED_ABOVE:
        return flagged
    return [s for s in node.saved if s in flagged or s in plain]


def folded_saved(node: NodeRecord, notes: Annotations, show_saved: bool, big: bool) -> int:
    """How many saved tensors of `node` are drawn as one box `12 tensors saved for backward` (0: none folded)."""
    if not show_saved or big:
        return 0
    plain = [s for s in node.saved if s.tensor is not None and (node.id, s.name) not in notes.saved]
    return len(plain) if len(plain) > FOLD_SAVED_ABOVE else 0


def output_nodes(trace: Trace, core: Core, users: dict[str, list[str]], copies: dict[str, str]) -> set[str]:
    """Nodes whose output tensor is drawn green: backward roots, or every sink when no backward ran."""
    sinks = {cid for cid, n in core.nodes.items() if n.kind == "node" and not users.get(cid)}
    roots: set[str] = set()
    backward = False
    for event in trace.events:
        if event.kind.value == "backward":
            backward = True
            for tid in event.data.get("roots") or ([event.tensor] if event.tensor else []):
                record = trace.tensors.get(tid)
                if record is not None and record.grad_fn is not None:
                    roots.add(record.grad_fn)
    if not backward:
        return sinks
    return {cid for cid in sinks if copies.get(cid, cid) in roots} | {
        cid for cid, n in core.nodes.items() if n.kind == "node" and copies.get(cid, cid) in roots
    }
