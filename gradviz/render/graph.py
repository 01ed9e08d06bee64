"""The graph view: the autograd graph read from outputs to leaves (as torchviz draws it), annotated with findings."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Hashable

import graphviz

from .. import collector
from ..analysis.hierarchy import Hierarchy
from ..analysis.names import statement
from .annotate import Annotations
from .escape import FONT, html_label_text, quote_id, shorten
from .palette import PALETTE
from .simplify import Core, CoreNode, Roll
from .picture import Picture
from .steps import StepRoll, after_window, only_step

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import NodeRecord, SavedTensorRecord, TensorRecord, Trace

__all__ = ["BOX_BUDGET", "DEFAULT_MAX_NODES", "LEGEND", "PAGE_PX", "GraphView", "graph_view", "layout"]

#: Drawn nodes (autograd nodes plus the tensors hanging off them) above which the graph is summarised.
DEFAULT_MAX_NODES = 300
#: Boxes the default view aims for: above it, modules are drawn as boxes at the deepest depth that fits.
BOX_BUDGET = 80
#: Ranks (boxes on the longest path) the default view aims for: about 2,500 px tall at 96 dpi.
RANK_BUDGET = 32
#: Boxes side by side on one level the default view aims for: about 2,500 px wide at 96 dpi.
WIDE_BUDGET = 7
#: Pixels (at 96 dpi) the default view fits on either side, measured on dot's layout (RANK_BUDGET and WIDE_BUDGET
#: stand in for it only when dot is missing).
PAGE_PX = 2500
#: Characters of a module box's list of op kinds kept on one line (about an op box's width); longer, a kind a line.
GROUP_LINE = 32
BIG = 150  # above this many autograd nodes: compact labels, saved tensors only where a finding points, fast layout
SPLIT_SHARED_ABOVE = 60  # above this many autograd nodes, a parameter used many times gets a node per use

#: Every style the view can use: legend key -> (fill colour, description). The legend lists only those used.
LEGEND: dict[str, tuple[str, str]] = {key: (swatch.colour, swatch.legend) for key, swatch in PALETTE.items() if key != "silent"}

# torch.utils.checkpoint(..., use_reentrant=True): the block runs under no_grad, its graph is built again in backward
_CHECKPOINT = "CheckpointFunctionBackward"
_RECOMPUTED = "recomputed in backward (checkpoint, use_reentrant=True): its ops are not drawn"

_NODE_ATTR = {
    "style": "filled",
    "shape": "box",
    "fontsize": "10",
    "height": "0.2",
    "fontname": FONT,
}
_FAST_LAYOUT = {"nslimit": "1", "nslimit1": "1", "mclimit": "0.01", "remincross": "false", "searchsize": "10"}


@dataclass
class _Drawn:
    """Bookkeeping while emitting DOT: which legend entries were used."""

    used: set[str] = field(default_factory=set)


@dataclass
class GraphView:
    """The graph view's DOT and the lines to tell the person who asked for it (which module depth was chosen)."""

    digraph: graphviz.Digraph
    messages: list[str] = field(default_factory=list)
    svg: str | None = None  # the SVG dot drew while measuring the default view (saved as is: no second layout)


def graph_view(
    trace: Trace,
    findings: list[Finding],
    *,
    max_nodes: int | None = None,
    collapse_modules: bool | int = False,
    depth: int | str | None = None,
    show_saved: bool = True,
    step: int | None = None,
    picture: Picture | None = None,
) -> GraphView:
    """The annotated autograd graph of every tensor in `trace`, and what to tell the user about how it was drawn.

    Steps (backward calls) that built the same graph are drawn once, marked with their count; `step=K` draws
    only the graph backward K used. `depth`: 0 draws one box per outermost model, 1 its children, ..., "all" every
    op; None (default) the deepest depth whose picture has at most BOX_BUDGET boxes and, laid out by `dot`, fits
    PAGE_PX pixels either way (with `max_nodes`: the deepest within that many boxes). `collapse_modules=True` is
    depth 1 (an int: that depth).
    """
    if depth is not None and depth != "all" and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise ValueError(f"depth must be a whole number of at least 0 or 'all', got {depth!r}")
    budget = DEFAULT_MAX_NODES if max_nodes is None else max(int(max_nodes), 1)
    if collapse_modules is not False or isinstance(depth, int):
        # the overview: module calls as boxes, saved tensors only where a finding points at one
        show_saved = False
    chosen = depth
    if collapse_modules is not False and depth is None:
        chosen = 1 if collapse_modules is True else max(int(collapse_modules), 0)
    with collector.paused():  # only allocation happens here; collections triggered by 10k+ new objects would dominate
        picture = Picture(trace, findings) if picture is None else picture
        notes = picture.annotations
        prepared = _prepare(trace, notes, show_saved=show_saved, step=step, picture=picture)

        def draw(core: Core) -> graphviz.Digraph:
            return _emit(trace, notes, core, prepared.copies, budget=budget, show_saved=show_saved)

        svg = None
        if chosen is None and len(prepared.tree) and max_nodes is None:
            core, digraph, svg = _fit_page(trace, notes, prepared, budget=budget, draw=draw)
        else:
            note = None
            asked = chosen
            if chosen is None and len(prepared.tree):
                chosen, note, message = _fit_boxes(trace, notes, prepared, budget=budget)
            core = _finish(trace, notes, prepared, chosen, budget=budget, note=note)
            if note is not None:
                core.messages.append(message)
            digraph = draw(core)
            boxes, deep, wide = _estimate(core, prepared)
            if asked is not None and max_nodes is None and (boxes > BOX_BUDGET or deep > RANK_BUDGET or wide > WIDE_BUDGET):
                # a depth asked for is drawn as asked; one that may not fit a page is laid out once to say when it is
                # larger, as the default view says its size (the SVG of that layout is the one saved)
                svg = _say_size(core, digraph, f"--depth {asked}")
        if core.hidden and not core.messages:
            core.messages.append(
                f"graph view: {core.hidden} node{'s' if core.hidden != 1 else ''} summarised to fit max_nodes={budget}"
                + ("" if len(prepared.tree) else " (no nn.Module to group them by)") + "; --max-nodes N draws more"
            )
        return GraphView(digraph, list(core.messages), svg)


# ---------------------------------------------------------------------- simplification
def _is_leaf_node(node: NodeRecord) -> bool:
    return node.variable is not None or node.name == "AccumulateGrad"


@dataclass
class _Prepared:
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


def _prepare(trace: Trace, notes: Annotations, *, show_saved: bool, step: int | None, picture: Picture) -> _Prepared:
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
        core.notes.append(f"backward {step} of {len(steps)} (line {steps[step - 1].line})")

    # 0. training steps, episodes, closure calls: steps that built the same graph are drawn once
    if step is None and len(steps) > 1:
        _roll_steps(trace, notes, core, steps, picture.rolls)

    # 1. loops: one body per loop, marked with its count
    order = [
        n.id for n in sorted(nodes.values(), key=lambda n: (n.seq, _num(n.id)))
        if not _is_leaf_node(n) and n.id in core.nodes
    ]
    # "the same op": same kind, module and line, and the same parameters (a loop reuses its weights; a stack of
    # identical layers, each with its own weights, is not a loop and stays drawn layer by layer)
    tokens = {
        n.id: (n.name, n.module, n.created.line if n.created else None, len(n.next), _parameters_used(trace, n))
        for n in nodes.values()
    }
    core.roll_loops(order, tokens, notes.protected)
    big = core.big = len(core.nodes) > BIG

    # 2. a parameter used by many steps: a node per use instead of edges across the picture
    copies: dict[str, str] = {}
    if len(core.nodes) > SPLIT_SHARED_ABOVE:
        leafish = {nid for nid in core.nodes if _is_leaf_node(nodes[nid]) and nid not in notes.protected}
        copies = core.split_shared(leafish)

    def weight(cid: str) -> int:
        record = nodes[copies.get(cid, cid)]
        return (1 + (record.variable is not None) + len(_shown_saved(record, notes, show_saved, big))
                + bool(_folded_saved(record, notes, show_saved, big)))

    attach = {cid for cid in core.nodes if _is_leaf_node(nodes[copies.get(cid, cid)])}
    zone = {nid: i for i, step_roll in enumerate(core.steps) for nid in step_roll.nodes}
    # the loss stays its own box, painted as the output, even inside a module (nn.BCEWithLogitsLoss)
    ran_backward = any(e.kind.value == "backward" for e in trace.events)  # else every sink counts as an output
    unfolded = notes.protected | (_outputs(trace, core, core.parents(), copies) if ran_backward else set())
    return _Prepared(core, copies, picture.hierarchy, weight, attach, zone, unfolded)


def _finish(
    trace: Trace, notes: Annotations, prepared: _Prepared, depth: int | str | None, *, budget: int,
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
    losses = _outputs(trace, core, users, prepared.copies)  # what backward started from, even when something used it later
    keep_first = [cid for cid in core.nodes if origin(cid) in notes.protected] + [c for c in core.nodes if c in losses] + roots
    weights = {c: (prepared.weight(c) if core.nodes[c].kind == "node" else 1) for c in core.nodes}
    leaves = {c for c, n in core.nodes.items() if n.kind == "node" and _is_leaf_node(nodes[origin(c)])}
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


def _box_total(core: Core, prepared: _Prepared) -> int:
    """Boxes `core` is drawn as, its autograd nodes' parameters and saved tensors included (outputs and cut-off
    values not: a lower bound of the boxes in its picture)."""
    return sum(1 if n.kind != "node" else prepared.weight(cid) for cid, n in core.nodes.items())


def _fit_boxes(trace: Trace, notes: Annotations, prepared: _Prepared, *, budget: int) -> tuple[int | None, str | None, str]:
    """With a budget of the user's own (`max_nodes`), only the box count decides: the deepest module depth within
    that many boxes (None: every op fits), with the legend's note and the message saying so."""
    tree = prepared.tree
    whole = _box_total(prepared.core, prepared)
    if whole <= budget:
        return None, None, ""
    boxes = whole
    for d in range(tree.max_depth, -1, -1):
        boxes = _box_total(_finish(trace, notes, prepared, d, budget=10**9), prepared)
        if boxes <= budget:
            return d, f"modules drawn at depth {d} of 0-{tree.max_depth} to fit {budget} boxes (--depth)", (
                f"graph view: {whole} boxes, so modules are drawn at depth {d} (0-{tree.max_depth}) to fit {budget} "
                "boxes; --depth N draws another depth, --depth all every op"
            )
    shallowest = "one box per model" if tree.max_depth > 0 else "the only depth"
    return 0, f"{boxes} boxes even at depth 0 ({shallowest})", (
        f"graph view: {boxes} boxes even at depth 0 ({shallowest}), more than {budget} boxes; "
        "what does not fit is summarised"
    )


def _fit_page(
    trace: Trace, notes: Annotations, prepared: _Prepared, *, budget: int,
    draw: Callable[[Core], graphviz.Digraph],
) -> tuple[Core, graphviz.Digraph, str | None]:
    """The default depth: the deepest whose picture has at most BOX_BUDGET boxes and, laid out by `dot`, fits
    PAGE_PX pixels either way (a page at 96 dpi). Only pictures within the box budget are laid out to measure them
    (one layout more than the drawing itself, more only when a picture is too big); without `dot` the size is
    estimated from the box counts, and the message says so. Returns the SVG of the last layout made of the picture
    drawn, if any."""
    tree = prepared.tree
    top = tree.max_depth
    shallowest = "one box per model" if top > 0 else "the only depth"
    dot_found = True
    svg: str | None = None

    def size_of(digraph: graphviz.Digraph) -> tuple[int, int, int] | None:
        """(boxes, width px, height px) of the picture as dot lays it out; None without dot."""
        nonlocal dot_found, svg
        laid_out = layout(digraph) if dot_found else None
        if laid_out is None:
            dot_found = False
            svg = None
            return None
        (width, height), svg = laid_out
        return _drawn_boxes(digraph), width, height

    def fits(core: Core, size: tuple[int, int, int] | None) -> bool:
        if size is not None:
            return size[0] <= BOX_BUDGET and max(size[1], size[2]) <= PAGE_PX
        estimate = _estimate(core, prepared)
        return estimate[0] <= BOX_BUDGET and estimate[1] <= RANK_BUDGET and estimate[2] <= WIDE_BUDGET

    def said(core: Core, size: tuple[int, int, int] | None) -> str:
        if size is not None:
            return f"{size[0]} boxes, {size[1]:,} \N{MULTIPLICATION SIGN} {size[2]:,} px at 96 dpi"
        return _size(_estimate(core, prepared)) + " (estimated: Graphviz's dot was not found to lay it out)"

    # every op, when that is few enough boxes to lay out
    whole = _finish(trace, notes, prepared, "all", budget=budget)
    # every op, counted before the max_nodes cut that the default depth never needs
    whole_said = f"about {_box_total(prepared.core, prepared):,} boxes"
    if _box_total(whole, prepared) <= BOX_BUDGET:
        digraph = draw(whole)
        size = size_of(digraph)
        if fits(whole, size):
            return whole, digraph, svg
        whole_said = said(whole, size)
    for d in range(top, -1, -1):
        note = f"modules drawn at depth {d} of 0-{top} to fit a page (--depth)"
        core = _finish(trace, notes, prepared, d, budget=budget, note=note)
        if _box_total(core, prepared) > BOX_BUDGET:  # more boxes than a page holds: not laid out
            continue
        digraph = draw(core)
        size = size_of(digraph)
        if fits(core, size):
            core.messages.append(
                f"graph view: every op would be {whole_said}, so modules are drawn at depth {d} (0-{top}) to fit a "
                f"page: {said(core, size)}; --depth N draws another depth, --depth all every op"
            )
            return core, digraph, svg
    # even one box per model is too big: drawn at depth 0, saying why
    core = _finish(trace, notes, prepared, 0, budget=budget, note=f"larger than a page even at depth 0 ({shallowest})")
    digraph = draw(core)
    svg = None
    advice = "--step K draws one step, --max-nodes N summarises beyond N boxes"
    if _box_total(core, prepared) > BOX_BUDGET:
        core.messages.append(
            f"graph view: about {_box_total(core, prepared)} boxes even at depth 0 ({shallowest}), more than the "
            f"{BOX_BUDGET} a page holds (not laid out to measure it: that would double the drawing time); {advice}"
        )
    else:
        size = size_of(digraph)
        verdict = f"larger than a page ({PAGE_PX:,} px either way)" if size is not None else "it may not fit a page"
        core.messages.append(f"graph view: {said(core, size)} even at depth 0 ({shallowest}), {verdict}; {advice}")
    return core, digraph, svg


def _say_size(core: Core, digraph: graphviz.Digraph, asked: str) -> str | None:
    """Lay out a picture drawn at the depth the user asked for; larger than a page, a message in `core` says its
    measured size and what draws less. Returns the SVG of the layout (None without dot)."""
    laid_out = layout(digraph)
    if laid_out is None:
        return None
    (width, height), svg = laid_out
    if max(width, height) > PAGE_PX:
        hidden = f" ({core.hidden:,} nodes summarised to fit max_nodes)" if core.hidden else ""
        core.messages.insert(0, (
            f"graph view: {asked}: {_drawn_boxes(digraph):,} boxes{hidden}, {width:,} \N{MULTIPLICATION SIGN} "
            f"{height:,} px at 96 dpi, larger than a page ({PAGE_PX:,} px either way); without --depth the view "
            "picks the deepest depth that fits, --max-nodes N summarises beyond N boxes"
        ))
    return svg


def _estimate(core: Core, prepared: _Prepared) -> tuple[int, int, int]:
    """Without a layout: boxes, boxes deep (+ 1: the loss and saved tensors below their node), boxes side by side."""
    weight = prepared.weight
    return (_box_total(core, prepared), core.ranks() + 1,
            core.widest(lambda x: 1 if core.nodes[x].kind != "node" else weight(x)))


_NODE_STATEMENT = re.compile(r'^\s*("(?:[^"\\]|\\.)*"|\w+) \[label=', re.M)


def _drawn_boxes(digraph: graphviz.Digraph) -> int:
    """The boxes a person sees in the picture: its node statements (the legend is the graph's label, not a node)."""
    return len(_NODE_STATEMENT.findall(digraph.source))


_VIEW_BOX = re.compile(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"')


def layout(digraph: graphviz.Digraph) -> tuple[tuple[int, int], str] | None:
    """The SVG `dot` draws of `digraph`, and the width and height in pixels of its PNG (96 dpi: the SVG's size in
    points, dot's margin included, times 96/72); None when dot cannot be run."""
    try:
        svg = digraph.pipe(format="svg", encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError, OSError):
        return None
    box = _VIEW_BOX.search(svg)
    if box is None:
        return None
    return (round(float(box.group(1)) * 96 / 72), round(float(box.group(2)) * 96 / 72)), svg


def _size(size: tuple[int, int, int]) -> str:
    return f"{size[0]} boxes, {size[1]} deep, up to {size[2]} side by side"


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
    trace: Trace, notes: Annotations, core: Core, steps: list, rolled: tuple[list[StepRoll], dict[str, str]]
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


def _members(rolls: list[StepRoll], steps: list) -> list[list[tuple[int, list[str]]]]:
    by_number = {s.number: s for s in steps}
    return [[(n, by_number[n].nodes) for n in roll.numbers] for roll in rolls]


def _numbers(numbers: list[int]) -> str:
    """`2-48` or `3, 7, 9`: step numbers as a person would write them."""
    if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}-{numbers[-1]}"
    shown = ", ".join(str(n) for n in numbers[:6])
    return shown + (", \N{HORIZONTAL ELLIPSIS}" if len(numbers) > 6 else "")


def _parameters_used(trace: Trace, node: NodeRecord) -> tuple[str, ...]:
    """Parameters this node feeds directly (through their AccumulateGrad)."""
    used = []
    for nxt in node.next:
        record = trace.nodes.get(nxt) if nxt is not None else None
        if record is not None and record.variable is not None:
            tensor = trace.tensors.get(record.variable)
            if tensor is not None and (tensor.parameter is not None or tensor.origin == "parameter"):
                used.append(tensor.id)
    return tuple(used)


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


def _shown_saved(node: NodeRecord, notes: Annotations, show_saved: bool, big: bool) -> list[SavedTensorRecord]:
    flagged = [s for s in node.saved if s.tensor is not None and (node.id, s.name) in notes.saved]
    if not show_saved or big:
        return flagged
    plain = [s for s in node.saved if s.tensor is not None and (node.id, s.name) not in notes.saved]
    if len(plain) > FOLD_SAVED_ABOVE:
        return flagged
    return [s for s in node.saved if s in flagged or s in plain]


def _folded_saved(node: NodeRecord, notes: Annotations, show_saved: bool, big: bool) -> int:
    """How many saved tensors of `node` are drawn as one box `12 tensors saved for backward` (0: none folded)."""
    if not show_saved or big:
        return 0
    plain = [s for s in node.saved if s.tensor is not None and (node.id, s.name) not in notes.saved]
    return len(plain) if len(plain) > FOLD_SAVED_ABOVE else 0


# ---------------------------------------------------------------------- DOT
def _emit(
    trace: Trace, notes: Annotations, core: Core, copies: dict[str, str], *, budget: int, show_saved: bool
) -> graphviz.Digraph:
    nodes = trace.nodes
    big = core.big
    drawn = _Drawn()
    graph_attr = {"rankdir": "TB", "ranksep": "0.25", "nodesep": "0.2"}
    if len(core.nodes) > 100:
        graph_attr.update(_FAST_LAYOUT)
    dot = graphviz.Digraph("gradviz", graph_attr=graph_attr, node_attr=dict(_NODE_ATTR), edge_attr={"fontsize": "9"})
    script = Path(trace.script).name if trace.script else None
    header = _header(trace, script)
    if header:  # the step and loop boxes' titles take the header's font
        dot.attr(fontsize="11", fontname=FONT)

    users = core.parents()
    outputs = _outputs(trace, core, users, copies)
    roll_members: dict[str, list[str]] = defaultdict(list)
    for cid, cnode in core.nodes.items():
        if cnode.roll is not None:
            roll_members[cnode.roll].append(cid)
    in_cluster = {cid for members in roll_members.values() for cid in members}

    def emit_node(target: graphviz.Digraph, cid: str) -> None:
        cnode = core.nodes[cid]
        if cnode.kind == "group":
            drawn.used.add("group")
            target.node(cid, f"<{_group_label(cnode, nodes)}>", fillcolor=LEGEND["group"][0], style="filled,rounded")
            return
        if cnode.kind == "summary":
            drawn.used.add("summary")
            text = html_label_text(f"\N{HORIZONTAL ELLIPSIS} {cnode.name} node{'s' if cnode.name != '1' else ''} not shown")
            target.node(cid, f"<{text}>", shape="note", fillcolor="white", style="filled,dashed")
            return
        record = nodes[copies.get(cid, cid)]
        _emit_autograd_node(
            target, cid, record, trace, notes, drawn, big=big, show_saved=show_saved, marks=core.step_marks.get(cid)
        )
        if cid in outputs and record.output is not None and record.output in trace.tensors:
            out_id = f"{cid}_out"
            tensor = trace.tensors[record.output]
            drawn.used.add("output")
            target.node(out_id, f"<{_tensor_label(tensor)}>", fillcolor=LEGEND["output"][0])
            target.edge(cid, out_id)

    # training steps drawn once: each a cluster, with the loops rolled inside it nested in it
    rep_step = {nid: i for i, roll in enumerate(core.steps) for nid in roll.nodes}
    step_of: dict[str, int] = {}
    for cid, cnode in core.nodes.items():
        for key in [cid] if cnode.kind == "node" else cnode.members:  # a group: where its autograd nodes are
            if copies.get(key, key) in rep_step:
                step_of[cid] = rep_step[copies.get(key, key)]
                break
    roll_step: dict[str, int | None] = {}
    for roll_id, members in roll_members.items():
        where_steps = {step_of.get(m) for m in members}
        roll_step[roll_id] = where_steps.pop() if len(where_steps) == 1 else None
    if roll_step and None in roll_step.values():  # a loop across steps: draw it outside them
        step_of = {c: s for c, s in step_of.items() if not (c in in_cluster and roll_step.get(core.nodes[c].roll or "") is None)}

    def emit_roll(target: graphviz.Digraph, roll: Roll) -> None:
        members = roll_members.get(roll.id)
        if not members:
            return
        drawn.used.add("roll")
        lines = sorted({created.line for m in members
                        if copies.get(m, m) in nodes and (created := nodes[copies.get(m, m)].created) is not None})
        where = f"  line {lines[0]}" if len(lines) == 1 else (f"  lines {lines[0]}-{lines[-1]}" if lines else "")
        with target.subgraph(name=f"cluster_{roll.id}") as sub:
            label = html_label_text(f"\N{CLOCKWISE OPEN CIRCLE ARROW} loop body \N{MULTIPLICATION SIGN}{_loop_count(core, roll, copies)} iterations{where}")
            sub.attr(label=f"<{label}>", style="dashed,filled", fillcolor=LEGEND["roll"][0], color="blue", fontcolor="blue")
            for cid in members:
                emit_node(sub, cid)

    for cid in core.nodes:
        if cid not in in_cluster and cid not in step_of:
            emit_node(dot, cid)
    # a cut edge comes into a step box from above, through its title: that box has its title at the bottom
    entered = _entered_by_cuts(notes, core, copies, step_of) if notes.cuts and core.steps else set()
    for i, step_roll in enumerate(core.steps):
        inside = [c for c, s in step_of.items() if s == i]
        if not inside:
            continue
        drawn.used.add("step")
        with dot.subgraph(name=f"cluster_{step_roll.id}") as sub:
            sub.attr(label=f"<{html_label_text(_step_label(step_roll))}>", style="dashed,filled",
                     fillcolor=LEGEND["step"][0], color="darkgreen", fontcolor="darkgreen",
                     **({"labelloc": "b"} if i in entered else {}))
            for cid in inside:
                if cid not in in_cluster:
                    emit_node(sub, cid)
            for roll in core.rolls:
                if roll_step.get(roll.id) == i:
                    emit_roll(sub, roll)
    for roll in core.rolls:
        if roll.id in roll_step and roll_step[roll.id] is None or (roll.id in roll_step and not core.steps):
            emit_roll(dot, roll)

    for nid, note in notes.holders.items():  # lifetime findings: a box beside the node they are about
        if nid not in core.nodes:
            continue
        drawn.used.add(note.style)
        box = f"{nid}_{note.style}"
        text = "<br/>".join(html_label_text(t) for t in ([f"{note.name}"] if note.name else []) + note.lines)
        dot.node(box, f"<{text}>", fillcolor=LEGEND[note.style][0], shape="box",
                 style="filled,dashed" if note.style == "freed" else "filled,bold")
        dot.edge(box, nid, style="dashed" if note.style == "freed" else "bold", color="darkorange3")

    for (src, dst), kind in core.edges.items():
        if kind == "carried":
            drawn.used.add("carried")
            dot.edge(src, dst, style="dashed", color="blue", constraint="false")
        else:
            dot.edge(src, dst)

    _emit_cuts(dot, trace, notes, core, copies, drawn, step_of)
    summary = []
    if core.hidden:
        summary.append(f"{core.hidden} node{'s' if core.hidden != 1 else ''} not shown (max_nodes={budget})")
    summary.extend(core.notes)
    if big and show_saved and any(n.saved for n in nodes.values()):
        summary.append("saved tensors shown only where a finding points (large graph)")
    _emit_title(dot, header, drawn, summary)
    return dot


def _loop_count(core: Core, roll: Roll, copies: dict[str, str]) -> str:
    """`7`, or `5-7` for a loop whose count differs between the steps drawn as one (RL episodes of 5-7 moves)."""
    spread = {nid: span for step_roll in core.steps for nid, span in step_roll.spread.items()}
    for member in roll.nodes:
        span = spread.get(copies.get(member, member))
        if span is not None and span[1]:
            fewest, most = (roll.count * span[0]) // span[1], roll.count * span[1] // span[1]
            return f"{fewest}-{most}" if fewest != most else str(most)
    return str(roll.count)


def _step_label(roll: StepRoll) -> str:
    at = f": backward at line {roll.line}" if roll.line else ""
    numbers, each = roll.numbers, ""
    if roll.optimizer_steps is not None:  # gradient accumulation: optimizer steps, as the step window counts them
        numbers = sorted(set(roll.optimizer_steps))
        calls = Counter(roll.optimizer_steps)
        per = set(calls.values())
        if len(per) == 1:
            k = per.pop()
            each = f", {k} backward call{'s' if k != 1 else ''}{' each' if len(numbers) > 1 else ''}"
        else:
            each = f", {min(calls.values())}-{max(calls.values())} backward calls each"
    if len(numbers) == 1:
        title = f"step {numbers[0]}{each}"
    else:
        title = f"\N{CLOCKWISE OPEN CIRCLE ARROW} step \N{MULTIPLICATION SIGN}{len(numbers)} (steps {_numbers(numbers)}){each}"
    if roll.difference:
        title += f": {roll.difference},"
        at = at.replace(": ", " ", 1)
    return "\n".join([title + at, *roll.notes])


def _outputs(trace: Trace, core: Core, users: dict[str, list[str]], copies: dict[str, str]) -> set[str]:
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


def _header(trace: Trace, script: str | None) -> str:
    parts = []
    if script:
        parts.append(html_label_text(script))
    if not trace.tensors:
        parts.append(html_label_text("the program created no tensors: there is no autograd graph to draw"))
    if trace.window is not None and trace.window.closed:  # the step window: the graph is the window's
        parts.append(html_label_text(trace.window.describe()))
    if trace.exception is not None:
        where = f" at line {trace.exception.location.line}" if trace.exception.location else ""
        first = trace.exception.message.splitlines()[0] if trace.exception.message else ""
        if trace.exception.type in ("SystemExit", "os._exit"):  # an exit, not an error: red only when it failed
            how = "sys.exit" if trace.exception.type == "SystemExit" else "os._exit"
            colour = "red" if trace.exception.exit_code else "gray30"
            text = f"ended by {how}(){where}: exit status {trace.exception.exit_code}"
        else:
            colour, text = "red", f"raised {trace.exception.type}{where}: {shorten(first, 90)}"
        parts.append(f'<FONT COLOR="{colour}">' + html_label_text(text) + "</FONT>")
    return "<BR ALIGN=\"LEFT\"/>".join(parts)


def _where(record: NodeRecord, trace: Trace) -> str:
    if record.created is None:
        return ""
    same = trace.script is not None and Path(trace.script).name == Path(record.created.file).name
    return f"line {record.created.line}" if same else trace.where(record.created.file, record.created.line)


def _emit_autograd_node(
    target: graphviz.Digraph,
    cid: str,
    record: NodeRecord,
    trace: Trace,
    notes: Annotations,
    drawn: _Drawn,
    *,
    big: bool,
    show_saved: bool,
    marks: list[int] | None = None,
) -> None:
    drawn.used.add("backward")
    rows = [f"<B>{html_label_text(record.name)}</B>"]
    detail = "" if _is_leaf_node(record) else _where(record, trace)
    if record.module and not _is_leaf_node(record):
        detail = f"{record.module}  {detail}".strip()
    if record.created is not None and record.created.code and not big and not _is_leaf_node(record):
        code = shorten(statement(record.created.code), 40)  # the statement, not its inline comment
        detail = f"{detail}: {code}" if detail else code
    if detail:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="gray30">{html_label_text(detail)}</FONT>')
    if record.name == _CHECKPOINT:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="blue">{html_label_text(_RECOMPUTED)}</FONT>')
    if marks:
        which = "step" if len(marks) == 1 else "steps"
        rows.append(f'<FONT POINT-SIZE="8" COLOR="red">{html_label_text(f"finding in {which} {_numbers(marks)}")}</FONT>')
    attrs: dict[str, str] = {}
    leaf_note = notes.leaves.get(record.variable) if record.variable else None
    if leaf_note is not None and leaf_note.style == "dead":
        attrs.update(fillcolor=LEGEND["dead"][0], fontcolor="gray45", style="filled,dashed", color="gray55")
    target.node(cid, f"<{'<BR/>'.join(rows)}>", **attrs)

    if record.variable is not None and record.variable in trace.tensors:
        tensor = trace.tensors[record.variable]
        vid = f"{cid}_var"
        style = leaf_note.style if leaf_note else "leaf"
        drawn.used.add(style)
        text = _tensor_label(tensor, name=leaf_note.name if leaf_note else None)
        if leaf_note:
            text += "".join(f"<BR/><I>{html_label_text(line)}</I>" for line in leaf_note.lines)
        extra = {"fontcolor": "gray45", "style": "filled,dashed", "color": "gray55"} if style == "dead" else {}
        target.node(vid, f"<{text}>", fillcolor=LEGEND[style][0], **extra)
        target.edge(vid, cid)

    for saved in _shown_saved(record, notes, show_saved, big):
        assert saved.tensor is not None
        tensor = trace.tensors[saved.tensor]
        sid = f"{cid}_s_{quote_id(saved.name)}"
        note = notes.saved.get((record.id, saved.name))
        style = note.style if note else "saved"
        drawn.used.add(style)
        text = f"{html_label_text(saved.name)}: {_tensor_label(tensor)}"
        if note:
            text += "".join(f"<BR/><B>{html_label_text(line)}</B>" for line in note.lines)
        extra = {"fontcolor": "white"} if style in ("poisoned", "detached_saved") else {}
        target.node(sid, f"<{text}>", fillcolor=LEGEND[style][0], **extra)
        target.edge(cid, sid, dir="none")
    folded = _folded_saved(record, notes, show_saved, big)
    if folded:
        drawn.used.add("saved")
        text = f"{folded} tensors saved for backward"
        target.node(f"{cid}_saved", f"<{html_label_text(text)}>", fillcolor=LEGEND["saved"][0])
        target.edge(cid, f"{cid}_saved", dir="none")


def _tensor_label(tensor: TensorRecord, *, name: str | None = None) -> str:
    shape = "(" + ", ".join(str(s) for s in tensor.shape) + ")"
    label = name or tensor.parameter or (tensor.names[0] if tensor.names else None)
    if label is None:  # unnamed: torchviz shows only the shape
        return html_label_text(shape)
    return html_label_text(f"{label}\n{shape}")


def _group_label(cnode: CoreNode, nodes: dict[str, NodeRecord]) -> str:
    names = Counter(nodes[m].name for m in cnode.members if m in nodes and not _is_leaf_node(nodes[m]))
    params = sum(1 for m in cnode.members if m in nodes and _is_leaf_node(nodes[m]))
    ops = sum(names.values())
    kinds = [f"{n} \N{MULTIPLICATION SIGN}{c}" if c > 1 else n for n, c in names.most_common(3)]
    if len(names) > 3:
        kinds.append("\N{HORIZONTAL ELLIPSIS}")
    top = ", ".join(kinds)
    lines = [f"<B>{html_label_text(cnode.module or cnode.name)}</B>"]
    detail = f"{ops} op{'s' if ops != 1 else ''}" + (f", {params} param{'s' if params != 1 else ''}" if params else "")
    lines.append(f'<FONT POINT-SIZE="8">{html_label_text(detail)}</FONT>')
    if len(top) > GROUP_LINE:  # a kind a line: side by side at a shallow depth, long lines make the picture wide
        top = ",\n".join(kinds)
    if top:
        lines.append(f'<FONT POINT-SIZE="8" COLOR="gray30">{html_label_text(top)}</FONT>')
    if _CHECKPOINT in names:
        lines.append(f'<FONT POINT-SIZE="8" COLOR="blue">{html_label_text(_RECOMPUTED)}</FONT>')
    return "<BR/>".join(lines)


def _homes(core: Core, copies: dict[str, str]) -> dict[str, str]:
    """Where each autograd node ended up: itself, its loop representative, its group, a summary."""
    home: dict[str, str] = {}
    for cid, cnode in core.nodes.items():
        home[copies.get(cid, cid)] = cid
        for member in cnode.members:
            home.setdefault(member, cid)
    for other, rep in core.step_home.items():  # a node of a repeated step: drawn as its representative
        if rep in home:
            home.setdefault(other, home[rep])
    return home


def _entered_by_cuts(notes: Annotations, core: Core, copies: dict[str, str], box_of: dict[str, int]) -> set[int]:
    """The step boxes a cut edge from outside enters (a GAN's `fake.detach()` into the discriminator's step)."""
    home = _homes(core, copies)
    entered = set()
    for cut in notes.cuts:
        src = home.get(cut.source) if cut.source else None
        dst = home.get(cut.target) if cut.target else None
        if src is not None and dst is not None and dst in box_of and box_of.get(src) != box_of[dst]:
            entered.add(box_of[dst])
    return entered


def _emit_cuts(
    dot: graphviz.Digraph, trace: Trace, notes: Annotations, core: Core, copies: dict[str, str], drawn: _Drawn,
    box_of: dict[str, int] | None = None,
) -> None:
    home = _homes(core, copies)
    seen: set[tuple[str, str, str]] = set()
    for i, cut in enumerate(notes.cuts):
        src = home.get(cut.source) if cut.source else None
        if src is None:
            continue
        if cut.target is not None and cut.target in home:
            dst = home[cut.target]
        else:
            dst = f"cut{i}"
            alias = trace.tensors.get(cut.alias) if cut.alias else None
            text = _tensor_label(alias) if alias else html_label_text("detached value")
            drawn.used.add("unused_alias")
            dot.node(dst, f"<{text}>", fillcolor="white", style="filled,dashed", color="red")
        key = (src, dst, cut.label)
        if key in seen:
            continue
        seen.add(key)
        drawn.used.add("cut")
        text = f"<{html_label_text(cut.label)}>"
        # an edge into another step's box enters it under the box's title, where a label at the middle of a short
        # edge would sit on the title: a longer edge puts its label a level above the box, outside it
        extra = {"minlen": "2"} if (box_of or {}).get(src) != (box_of or {}).get(dst) else {}
        dot.edge(src, dst, label=text, style="dashed", color="red", fontcolor="red", penwidth="1.5", **extra)


def _emit_title(dot: graphviz.Digraph, header: str, drawn: _Drawn, summary: list[str]) -> None:
    """The graph's label at its top left: the header, and under it the legend of the marks used. A legend drawn as a
    node would sit beside the top rank, as wide again as itself beside a short picture (depth 0); under the header
    it widens only a picture narrower than itself."""
    rows = []
    for key, (colour, text) in LEGEND.items():
        if key not in drawn.used:
            continue
        if key in ("cut", "carried"):
            swatch = f'<TD><FONT COLOR="{colour}">- - -</FONT></TD>'
        else:
            swatch = f'<TD BGCOLOR="{colour}" WIDTH="24"> </TD>'
        rows.append(f'<TR>{swatch}<TD ALIGN="LEFT">{html_label_text(text)}</TD></TR>')
    for line in summary:
        rows.append(f'<TR><TD COLSPAN="2" ALIGN="LEFT"><I>{html_label_text(line)}</I></TD></TR>')
    if not rows:
        if header:
            dot.attr(label=f"<{header}>", labelloc="t", labeljust="l")
        return
    legend = '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">' + "".join(rows) + "</TABLE>"
    cells = [f'<TR><TD ALIGN="LEFT" BALIGN="LEFT">{header}</TD></TR>'] if header else []
    cells.append(f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="9">{legend}</FONT></TD></TR>')
    table = '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="4" CELLPADDING="0">' + "".join(cells) + "</TABLE>"
    dot.attr(label=f"<{table}>", labelloc="t", labeljust="l", fontsize="11", fontname=FONT)
