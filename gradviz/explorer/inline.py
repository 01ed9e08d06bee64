"""The explorer inside a notebook cell: the page in a sandboxed iframe as wide as the output area."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render.escape import html_text

if TYPE_CHECKING:
    from ..render.diagram import Diagram

__all__ = ["Explorer", "inline_html"]

#: Height of the frame in a notebook: the page lays itself out in whatever it gets; this is tall enough for the
#: graph, the scrubber and the memory tables without scrolling the notebook inside the cell.
HEIGHT = 760


def inline_html(page: str, *, height: int = HEIGHT) -> str:
    """`page` in an iframe: its scripts run in a sandbox of their own (no access to the notebook), its CSS cannot
    restyle the notebook, and it is as wide as the output area."""
    return (f'<iframe class="gradviz-explorer" sandbox="allow-scripts" style="width:100%;max-width:100%;'
            f'height:{int(height)}px;border:1px solid #ddd;box-sizing:border-box" srcdoc="{html_text(page)}"></iframe>')


class Explorer:
    """What a notebook displays for a trace: the explorer (text/html), with the static picture of `diagram`
    beside it (image/svg+xml) for front ends that do not run a page's scripts."""

    def __init__(self, diagram: Diagram) -> None:
        self.diagram = diagram

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from ..render.report import report_html

        bundle: dict[str, Any] = {"text/html": inline_html(report_html(self.diagram.trace, self.diagram.findings))}
        static = self.diagram._repr_mimebundle_()
        for key, value in static.items():
            bundle.setdefault(key, value)
        from ..render.diagram import mime_subset

        return mime_subset(bundle, include, exclude)

    def __repr__(self) -> str:
        count = len(self.diagram.findings)
        return f"<gradviz explorer: {count} finding{'' if count == 1 else 's'}>"
