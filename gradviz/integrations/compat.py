"""`make_dot` with torchviz's signature and picture, that does not crash on poisoned or freed saved tensors or deep graphs.

Switch with one import: ``from gradviz import make_dot`` instead of ``from torchviz import make_dot``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import graphviz

from ..render import Diagram, render

if TYPE_CHECKING:
    from ..tracer.walk import Walk

__all__ = ["draw", "make_dot", "resize_graph"]

#: Above this many backward nodes, ask dot for a cheaper layout (network simplex and crossing-minimisation limits).
FAST_LAYOUT_ABOVE = 100
FAST_LAYOUT = {"nslimit": "1", "nslimit1": "1", "mclimit": "0.01"}

_NODE_ATTR = dict(style="filled", shape="box", align="left", fontsize="10", ranksep="0.1", height="0.2", fontname="monospace")


def make_dot(
    var: Any,
    params: dict[str, Any] | None = None,
    show_attrs: bool = False,
    show_saved: bool = False,
    max_attr_chars: int = 50,
) -> graphviz.Digraph:
    """The autograd graph of `var` (a tensor or tuple of tensors) as torchviz draws it.

    Grey: backward nodes; light blue: leaves that receive .grad; orange: saved tensors; green: outputs (dark
    green: the base of an output view). Where torchviz raises, this marks the state instead: a saved tensor
    changed in place since it was saved reads "poisoned: v1, expected v0" (red); one freed by an earlier
    backward reads "freed by backward" (white, dashed). The walk is iterative, so deep graphs do not hit
    Python's recursion limit.
    """
    from ..tracer.walk import walk

    if params is not None:
        import torch

        bad = [k for k, v in params.items() if not isinstance(v, torch.Tensor)]
        if bad:
            raise TypeError(f"params must map names to tensors; not a tensor: {bad[0]!r}")
    result = walk(var, params=params, show_attrs=show_attrs)
    trace = result.trace
    dot = graphviz.Digraph(node_attr=dict(_NODE_ATTR), graph_attr=dict(size="12,12"))
    for kind, ident in result.order:
        if kind == "tensor":
            continue
        node = trace.nodes[ident]
        if show_saved and ident not in result.custom_saved:
            _draw_saved(dot, result, ident)
        if node.variable is not None:
            dot.node(node.variable, _var_label(result, node.variable), fillcolor="lightblue")
            dot.edge(node.variable, ident)
        dot.node(ident, _fn_label(result, ident, max_attr_chars) if show_attrs else node.name)
        for nxt in node.next:
            if nxt is not None:
                dot.edge(nxt, ident)
        _draw_custom_saved(dot, result, ident)
    _draw_roots(dot, result)
    resize_graph(dot)
    if len(trace.nodes) > FAST_LAYOUT_ABOVE:
        # same nodes and edges; only dot's effort changes (torchviz's 50-step RNN: no layout in 120 s -> seconds)
        dot.graph_attr.update(FAST_LAYOUT)
    return dot


def _var_label(result: Walk, tid: str, name: str | None = None) -> str:
    """torchviz's tensor label: its name (a parameter's, or the saved tensor's) over its shape."""
    tensor = result.trace.tensors[tid]
    if not name:
        name = result.params.get(tid, "")
    return "%s\n %s" % (name, "(" + ", ".join("%d" % v for v in tensor.shape) + ")")


def _fn_label(result: Walk, nid: str, max_attr_chars: int) -> str:
    """torchviz's show_attrs label: the node's name over a table of its saved attributes, cut at `max_attr_chars`."""
    name = result.trace.nodes[nid].name
    attrs = result.attrs.get(nid)
    if not attrs:
        return name
    limit = max(max_attr_chars, 3)
    col1 = max(len(k) for k in attrs)
    col2 = min(max(len(v) for v in attrs.values()), limit)
    sep = "-" * max(col1 + col2 + 2, len(name))
    fmt = "%-" + str(col1) + "s: %" + str(col2) + "s"
    lines = "\n".join(fmt % (k, v[: col2 - 3] + "..." if len(v) > col2 else v) for k, v in attrs.items())
    return name + "\n" + sep + "\n" + lines


def _draw_saved(dot: graphviz.Digraph, result: Walk, ident: str) -> None:
    """show_saved: node `ident`'s saved tensors (orange), marked where torchviz would raise (poisoned, freed)."""
    trace = result.trace
    for saved in trace.nodes[ident].saved:
        status = result.status.get((ident, saved.name), "ok")
        if saved.tensor is None:
            if status == "poisoned":  # before torch 2.11 a poisoned saved tensor cannot be read, only named
                sid = f"{ident}_{saved.name}_poisoned"
                dot.edge(ident, sid, dir="none")
                dot.node(sid, f"{saved.name}\n poisoned: expected v{saved.saved_version}", fillcolor="red", fontcolor="white")
            elif status == "freed":
                sid = f"{ident}_{saved.name}_freed"
                dot.edge(ident, sid, dir="none")
                dot.node(sid, f"{saved.name}\n freed by backward", fillcolor="white", style="filled,dashed")
            continue
        label = _var_label(result, saved.tensor, saved.name)
        if status == "poisoned":
            now = trace.tensors[saved.tensor].version
            label += f"\n poisoned: v{now}, expected v{saved.saved_version}"
            dot.edge(ident, saved.tensor, dir="none")
            dot.node(saved.tensor, label, fillcolor="red", fontcolor="white")
        else:
            dot.edge(ident, saved.tensor, dir="none")
            dot.node(saved.tensor, label, fillcolor="orange")


def _draw_custom_saved(dot: graphviz.Digraph, result: Walk, ident: str) -> None:
    """A custom Function's ctx.saved_tensors, or the one mark saying they are poisoned or freed."""
    for i, tid in enumerate(result.custom_saved.get(ident, [])):
        if tid is None:
            states = {v for (n, _), v in result.status.items() if n == ident} - {"ok"}
            state = "poisoned" if "poisoned" in states else "freed by backward"
            sid = f"{ident}_ctx_{i}"
            dot.edge(sid, ident, dir="none")
            dot.node(sid, f"saved_tensors\n {state}", fillcolor="white", style="filled,dashed")
            continue
        dot.edge(tid, ident, dir="none")
        dot.node(tid, _var_label(result, tid), fillcolor="orange")


def _draw_roots(dot: graphviz.Digraph, result: Walk) -> None:
    """The tensors asked for (green) and the view bases behind them (dark green, dotted edge)."""
    drawn_roots: set[str] = set()
    for root in result.roots:
        pending = [(root, "darkolivegreen1")]
        while pending:
            tid, colour = pending.pop()
            if tid in drawn_roots:
                continue
            drawn_roots.add(tid)
            dot.node(tid, _var_label(result, tid), fillcolor=colour)
            tensor = result.trace.tensors[tid]
            if tensor.grad_fn is not None:
                dot.edge(tensor.grad_fn, tid)
            base = result.bases.get(tid)
            if base is not None:
                if base not in drawn_roots and not _seen_elsewhere(result, base):
                    pending.append((base, "darkolivegreen3"))
                dot.edge(base, tid, style="dotted")


def _seen_elsewhere(result: Any, tid: str) -> bool:
    """torchviz skips a view base it already drew as a leaf or saved tensor."""
    trace = result.trace
    if any(n.variable == tid for n in trace.nodes.values()):
        return True
    return any(s.tensor == tid for n in trace.nodes.values() for s in n.saved)


def resize_graph(dot: graphviz.Digraph, size_per_element: float = 0.15, min_size: int = 12) -> None:
    """torchviz's sizing rule: the picture grows with the number of DOT statements."""
    size = max(min_size, len(dot.body) * size_per_element)
    dot.graph_attr.update(size=f"{size},{size}")


def draw(tensor: Any, **options: Any) -> Diagram:
    """The annotated autograd graph of an existing tensor, without tracing (gradviz's view of what make_dot shows).

    Accepts a tensor or a tuple of tensors and the keyword options of `render`, plus `params`
    (a dict of name -> parameter, as in torchviz) to name leaves.
    """
    from ..analysis.walked import walked_graph_findings
    from ..tracer.walk import walk_graph

    params = options.pop("params", None)
    trace = walk_graph(tensor, params=params)
    if options.get("findings") is None:
        options["findings"] = walked_graph_findings(trace)
    return render(trace, "graph", **options)
