"""The graph view: the autograd graph read from outputs to leaves, annotated with the findings."""

from __future__ import annotations

from typing import TYPE_CHECKING

import graphviz

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace


def graph_digraph(
    trace: Trace,
    findings: list[Finding],
    *,
    max_nodes: int | None = None,
    collapse_modules: bool = False,
    show_saved: bool = True,
) -> graphviz.Digraph:
    """Placeholder until the full graph view lands: one grey box per autograd node."""
    dot = graphviz.Digraph("graph")
    for node in trace.nodes.values():
        dot.node(node.id, node.name)
        for nxt in node.next:
            if nxt is not None:
                dot.edge(nxt, node.id)
    return dot
