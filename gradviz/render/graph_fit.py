"""Fitting the graph view to a page: the default module depth, measured on dot's layout (or estimated without dot),
and the size line said about a depth that was asked for."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import graphviz

from .annotate import Annotations
from .graph_prepare import Prepared, box_total, finish
from .simplify import Core

if TYPE_CHECKING:
    from ..model import Trace


#: Boxes the default view aims for: above it, modules are drawn as boxes at the deepest depth that fits.
BOX_BUDGET = 80
#: Ranks (boxes on the longest path) the default view aims for: about 2,500 px tall at 96 dpi.
RANK_BUDGET = 32
#: Boxes side by side on one level the default view aims for: about 2,500 px wide at 96 dpi.
WIDE_BUDGET = 7
#: Pixels (at 96 dpi) the default view fits on either side, measured on dot's layout (RANK_BUDGET and WIDE_BUDGET
#: stand in for it only when dot is missing).
PAGE_PX = 2500


def fit_boxes(trace: Trace, notes: Annotations, prepared: Prepared, *, budget: int) -> tuple[int | None, str | None, str]:
    """With a budget of the user's own (`max_nodes`), only the box count decides: the deepest module depth within
    that many boxes (None: every op fits), with the legend's note and the message saying so."""
    tree = prepared.tree
    whole = box_total(prepared.core, prepared)
    if whole <= budget:
        return None, None, ""
    boxes = whole
    for d in range(tree.max_depth, -1, -1):
        boxes = box_total(finish(trace, notes, prepared, d, budget=10**9), prepared)
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


def fit_page(
    trace: Trace, notes: Annotations, prepared: Prepared, *, budget: int,
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
        estimate = estimate_size(core, prepared)
        return estimate[0] <= BOX_BUDGET and estimate[1] <= RANK_BUDGET and estimate[2] <= WIDE_BUDGET

    def said(core: Core, size: tuple[int, int, int] | None) -> str:
        if size is not None:
            return f"{size[0]} boxes, {size[1]:,} \N{MULTIPLICATION SIGN} {size[2]:,} px at 96 dpi"
        return _size(estimate_size(core, prepared)) + " (estimated: Graphviz's dot was not found to lay it out)"

    # every op, when that is few enough boxes to lay out
    whole = finish(trace, notes, prepared, "all", budget=budget)
    # every op, counted before the max_nodes cut that the default depth never needs
    whole_said = f"about {box_total(prepared.core, prepared):,} boxes"
    if box_total(whole, prepared) <= BOX_BUDGET:
        digraph = draw(whole)
        size = size_of(digraph)
        if fits(whole, size):
            return whole, digraph, svg
        whole_said = said(whole, size)
    for d in range(top, -1, -1):
        note = f"modules drawn at depth {d} of 0-{top} to fit a page (--depth)"
        core = finish(trace, notes, prepared, d, budget=budget, note=note)
        if box_total(core, prepared) > BOX_BUDGET:  # more boxes than a page holds: not laid out
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
    core = finish(trace, notes, prepared, 0, budget=budget, note=f"larger than a page even at depth 0 ({shallowest})")
    digraph = draw(core)
    svg = None
    advice = "--step K draws one step, --max-nodes N summarises beyond N boxes"
    if box_total(core, prepared) > BOX_BUDGET:
        core.messages.append(
            f"graph view: about {box_total(core, prepared)} boxes even at depth 0 ({shallowest}), more than the "
            f"{BOX_BUDGET} a page holds (not laid out to measure it: that would double the drawing time); {advice}"
        )
    else:
        size = size_of(digraph)
        verdict = f"larger than a page ({PAGE_PX:,} px either way)" if size is not None else "it may not fit a page"
        core.messages.append(f"graph view: {said(core, size)} even at depth 0 ({shallowest}), {verdict}; {advice}")
    return core, digraph, svg


def say_size(core: Core, digraph: graphviz.Digraph, asked: str) -> str | None:
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


def estimate_size(core: Core, prepared: Prepared) -> tuple[int, int, int]:
    """Without a layout: boxes, boxes deep (+ 1: the loss and saved tensors below their node), boxes side by side."""
    weight = prepared.weight
    return (box_total(core, prepared), core.ranks() + 1,
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
