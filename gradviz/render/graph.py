"""The graph view: the autograd graph read from outputs to leaves (as torchviz draws it), annotated with findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import graphviz

from .. import collector
from ..picture.picture import Picture
from ..picture.simplify import Core
from .graph_dot import emit
from .graph_fit import BOX_BUDGET, RANK_BUDGET, WIDE_BUDGET, estimate_size, fit_boxes, fit_page, say_size
from .graph_prepare import finish, prepare

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace

__all__ = ["DEFAULT_MAX_NODES", "GraphView", "graph_view"]

#: Drawn nodes (autograd nodes plus the tensors hanging off them) above which the graph is summarised.
DEFAULT_MAX_NODES = 300


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
        prepared = prepare(trace, notes, show_saved=show_saved, step=step, picture=picture)

        def draw(core: Core) -> graphviz.Digraph:
            return emit(trace, notes, core, prepared.copies, budget=budget, show_saved=show_saved)

        svg = None
        if chosen is None and len(prepared.tree) and max_nodes is None:
            core, digraph, svg = fit_page(trace, notes, prepared, budget=budget, draw=draw)
        else:
            note = None
            asked = chosen
            if chosen is None and len(prepared.tree):
                chosen, note, message = fit_boxes(trace, notes, prepared, budget=budget)
            core = finish(trace, notes, prepared, chosen, budget=budget, note=note)
            if note is not None:
                core.messages.append(message)
            digraph = draw(core)
            boxes, deep, wide = estimate_size(core, prepared)
            if asked is not None and max_nodes is None and (boxes > BOX_BUDGET or deep > RANK_BUDGET or wide > WIDE_BUDGET):
                # a depth asked for is drawn as asked; one that may not fit a page is laid out once to say when it is
                # larger, as the default view says its size (the SVG of that layout is the one saved)
                svg = say_size(core, digraph, f"--depth {asked}")
        if core.hidden and not core.messages:
            core.messages.append(
                f"graph view: {core.hidden} node{'s' if core.hidden != 1 else ''} summarised to fit max_nodes={budget}"
                + ("" if len(prepared.tree) else " (no nn.Module to group them by)") + "; --max-nodes N draws more"
            )
        return GraphView(digraph, list(core.messages), svg)
