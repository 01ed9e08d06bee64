"""Renderers: a trace and its findings in, a `Diagram` (DOT via the graphviz package) out; never imports torch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .diagram import SAVE_FORMATS, Diagram, GraphvizNotFound
from .views import VIEWS, page_html

if TYPE_CHECKING:
    from ..analysis.collection import Diagnosis
    from ..analysis.findings import Finding
    from ..model import Trace
    from ..picture.picture import Picture

__all__ = ["VIEWS", "Diagram", "GraphvizNotFound", "Picture", "render"]


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
    picture: Picture | None = None,
) -> Diagram:
    """Draw one view of `trace`; with `path`, also save it there (the suffix, or `format`, picks the format).

    Graph view: `depth` 0 draws one box per outermost model, 1 its children, ..., "all" every op; the default is the
    deepest depth that fits about 80 boxes (`diagram.messages` says which). `collapse_modules=True` is depth 1.

    `picture`: the picture model of `trace` and `findings` (picture/picture.py), to share what one view derived
    with the next (several outputs of one run); by default one is made here."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; choose one of {', '.join(repr(v) for v in VIEWS)}")
    diagnosis = None
    if findings is None and picture is not None and picture.trace is trace:
        findings = picture.findings
    elif findings is None:
        diagnosis = _diagnose(trace)
        findings = diagnosis.findings if diagnosis is not None else []
    if picture is None or not picture.of(trace, findings):
        from ..picture.picture import Picture  # with it the analysis (networkx): `import gradviz` stays light

        picture = Picture(trace, findings, life=diagnosis.lifetimes if diagnosis else None,
                          namer=diagnosis.namer if diagnosis else None)
    diagram = _draw(trace, view, findings, picture, max_nodes=max_nodes, collapse_modules=collapse_modules, depth=depth,
                    show_saved=show_saved, step=step, show_all=show_all)
    path = _check_format(diagram, format, path)
    if path is not None:
        diagram.save(path)
    return diagram


def _draw(
    trace: Trace, view: str, findings: list[Finding], picture: Picture, *, max_nodes: int | None,
    collapse_modules: bool, depth: int | str | None, show_saved: bool, step: int | None, show_all: bool,
) -> Diagram:
    """The diagram of one view, drawn from the picture."""
    if view == "graph":
        from .graph import graph_view

        drawn = graph_view(
            trace, findings, max_nodes=max_nodes, collapse_modules=collapse_modules, depth=depth,
            show_saved=show_saved, step=step, picture=picture,
        )
        diagram = Diagram(view=view, trace=trace, findings=findings, digraph=drawn.digraph, svg=drawn.svg)
        diagram.messages = drawn.messages
    elif view == "memory":
        from .memory import memory_digraph

        diagram = Diagram(view=view, trace=trace, findings=findings, digraph=memory_digraph(trace, findings, show_all=show_all, picture=picture))
    elif view == "timeline":
        from .timeline import timeline_digraph

        diagram = Diagram(view=view, trace=trace, findings=findings, digraph=timeline_digraph(trace, findings, picture=picture))
    elif view == "graph-memory":
        from .graph_memory import graph_memory_image

        diagram = Diagram(
            view=view, trace=trace, findings=findings, digraph=None,
            image=lambda fmt: graph_memory_image(trace, findings, fmt, picture),
        )
    else:
        diagram = Diagram(view=view, trace=trace, findings=findings, digraph=None, html=page_html(trace, findings, picture))
    diagram.picture = picture
    return diagram


def _check_format(diagram: Diagram, format: str | None, path: str | Path | None) -> str | Path | None:
    """The path to save to, given the suffix of `format` when it has none; the format checked against the suffix."""
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
    return path


def _diagnose(trace: Trace) -> Diagnosis | None:
    try:
        from ..analysis import diagnosis
    except ImportError:  # the analysis passes are optional for drawing
        return None
    return diagnosis(trace)  # the findings with the lifetimes and names it computed, for the picture model



def __getattr__(name: str) -> Any:
    if name == "Picture":  # imported on first use, as render() does
        from ..picture.picture import Picture

        return Picture
    raise AttributeError(f"module 'gradviz.render' has no attribute {name!r}")
