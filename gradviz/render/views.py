"""The views `render` can draw, and the one it cannot draw itself: the HTML page, made by the explorer (a layer
above) and lent to render by whoever wires the two (gradviz/__init__.py), so render never imports the explorer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .escape import html_text

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace
    from ..picture.picture import Picture

__all__ = ["PAGES", "VIEWS", "inline_html", "page_html"]

#: The views `render` can draw.
VIEWS: dict[str, str] = {
    "graph": "the autograd graph with cut edges, dead parameters and poisoned saved tensors marked",
    "memory": "storages, the tensors in them and their version counters",
    "timeline": "the events in program order with versions before and after each write",
    "report": "a self-contained HTML page with the findings, all views and the source",
    "graph-memory": "a chart of the bytes live autograd graphs hold, step by step, with the peak and who holds it",
}

#: (trace, findings, picture model or None) -> one self-contained HTML page.
PageMaker = Callable[["Trace", "Sequence[Finding]", "Picture | None"], str]


@dataclass(slots=True)
class Pages:
    """Who makes the `report` view's page: set once, when gradviz is imported, to the explorer's."""

    make: PageMaker | None = None


PAGES = Pages()

#: Height of the frame in a notebook: the page lays itself out in whatever it gets; this is tall enough for the
#: graph, the scrubber and the memory tables without scrolling the notebook inside the cell.
HEIGHT = 760


def page_html(trace: Trace, findings: Sequence[Finding] = (), picture: Picture | None = None) -> str:
    """The report view's page for `trace`: no external CSS, scripts, fonts or images."""
    if PAGES.make is None:
        raise RuntimeError("no page maker registered for the 'report' view: `import gradviz` registers the explorer")
    return PAGES.make(trace, findings, picture)


def inline_html(page: str, *, height: int = HEIGHT) -> str:
    """`page` in an iframe: its scripts run in a sandbox of their own (no access to the notebook), its CSS cannot
    restyle the notebook, and it is as wide as the output area."""
    return (f'<iframe class="gradviz-explorer" sandbox="allow-scripts" style="width:100%;max-width:100%;'
            f'height:{int(height)}px;border:1px solid #ddd;box-sizing:border-box" srcdoc="{html_text(page)}"></iframe>')
