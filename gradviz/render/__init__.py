"""Renderers: a trace and its findings in, a `Diagram` (DOT via the graphviz package) out; never imports torch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .diagram import SAVE_FORMATS, Diagram, GraphvizNotFound

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace

__all__ = ["VIEWS", "Diagram", "GraphvizNotFound", "draw", "render"]

#: The views `render` can draw.
VIEWS: dict[str, str] = {
    "graph": "the autograd graph with cut edges, dead parameters and poisoned saved tensors marked",
    "memory": "storages, the tensors in them and their version counters",
    "timeline": "the events in program order with versions before and after each write",
    "report": "a self-contained HTML page with the findings, all views and the source",
    "graph-memory": "a chart of the bytes live autograd graphs hold, step by step, with the peak and who holds it",
}


def render(
    trace: Trace,
    view: str = "graph",
    *,
    findings: list[Finding] | None = None,
    format: str | None = None,
    path: str | Path | None = None,
    max_nodes: int | None = None,
    collapse_modules: bool = False,
    depth: int | str | None = None,
    show_saved: bool = True,
    step: int | None = None,
    show_all: bool = False,
) -> Diagram:
    """Draw one view of `trace`; with `path`, also save it there (the suffix, or `format`, picks the format).

    Graph view: `depth` 0 draws one box per outermost model, 1 its children, ..., "all" every op; the default is the
    deepest depth that fits about 80 boxes (`diagram.messages` says which). `collapse_modules=True` is depth 1."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose one of {', '.join(repr(v) for v in VIEWS)}")
    if findings is None:
        findings = _diagnose(trace)
    if view == "graph":
        from .graph import graph_view

        drawn = graph_view(
            trace, findings, max_nodes=max_nodes, collapse_modules=collapse_modules, depth=depth,
            show_saved=show_saved, step=step,
        )
        diagram = Diagram(view=view, trace=trace, findings=findings, digraph=drawn.digraph, svg=drawn.svg)
        diagram.messages = drawn.messages
    elif view == "memory":
        from .memory import memory_digraph

        diagram = Diagram(view=view, trace=trace, findings=findings, digraph=memory_digraph(trace, findings, show_all=show_all))
    elif view == "timeline":
        from .timeline import timeline_digraph

        diagram = Diagram(view=view, trace=trace, findings=findings, digraph=timeline_digraph(trace, findings))
    elif view == "graph-memory":
        from .graph_memory import graph_memory_image

        diagram = Diagram(
            view=view, trace=trace, findings=findings, digraph=None,
            image=lambda fmt: graph_memory_image(trace, findings, fmt),
        )
    else:
        from .report import report_html

        diagram = Diagram(view=view, trace=trace, findings=findings, digraph=None, html=report_html(trace, findings))

    if format is not None:
        suffix = "." + format.lower().lstrip(".")
        if suffix not in SAVE_FORMATS:
            choices = ", ".join(s[1:] for s in SAVE_FORMATS)
            raise ValueError(f"unknown format {format!r}; choose one of {choices}")
        if path is not None:
            path = Path(path)
            if not path.suffix:
                path = path.with_suffix(suffix)
            elif path.suffix.lower() != suffix:
                raise ValueError(f"format {format!r} does not match the suffix of {str(path)!r}")
        elif diagram.digraph is not None and suffix in (".svg", ".png", ".pdf"):
            diagram.digraph.format = suffix[1:]
    if path is not None:
        diagram.save(path)
    return diagram


def draw(tensor: Any, **options: Any) -> Diagram:
    """The annotated autograd graph of an existing tensor, without tracing (like torchviz's make_dot).

    Accepts a tensor or a tuple of tensors and the keyword options of `render`, plus `params`
    (a dict of name -> parameter, as in torchviz) to name leaves.
    """
    from ..tracer.walk import walk_graph

    params = options.pop("params", None)
    trace = walk_graph(tensor, params=params)
    if options.get("findings") is None:
        options["findings"] = _walk_findings(trace)
    return render(trace, "graph", **options)


def _walk_findings(trace: Trace) -> list[Finding]:
    """What a walked graph shows without events: saved tensors whose version moved since they were saved."""
    from ..analysis.findings import Finding, FindingKind

    found = []
    for node in trace.nodes.values():
        for saved in node.saved:
            tensor = trace.tensors.get(saved.tensor) if saved.tensor else None
            if tensor is None or saved.saved_version is None or tensor.version in (None, saved.saved_version):
                continue
            found.append(
                Finding(
                    kind=FindingKind.POISONED_SAVED_TENSOR,
                    file=None,
                    line=None,
                    message=(
                        f"{node.name} saved {saved.name!r} at version {saved.saved_version}; it is now at version "
                        f"{tensor.version}, so backward will raise"
                    ),
                    fix="write to a copy (x.clone()) instead of the saved tensor, or do the in-place write after backward",
                    tensors=[tensor.id],
                    nodes=[node.id],
                )
            )
    return found


def _diagnose(trace: Trace) -> list[Finding]:
    try:
        from ..analysis import diagnose
    except ImportError:  # the analysis passes are optional for drawing
        return []
    return list(diagnose(trace))
