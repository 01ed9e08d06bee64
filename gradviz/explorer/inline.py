"""The explorer inside a notebook cell: the page in a sandboxed iframe as wide as the output area."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render.diagram import mime_subset
from ..render.views import HEIGHT, inline_html
from .page import explorer_html

if TYPE_CHECKING:
    from ..render.diagram import Diagram

__all__ = ["HEIGHT", "Explorer", "inline_html"]


class Explorer:
    """What a notebook displays for a trace: the explorer (text/html), with the static picture of `diagram`
    beside it (image/svg+xml) for front ends that do not run a page's scripts."""

    def __init__(self, diagram: Diagram) -> None:
        self.diagram = diagram

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/html": inline_html(explorer_html(self.diagram.trace, self.diagram.findings, picture=self.diagram.picture))}
        static = self.diagram._repr_mimebundle_()
        for key, value in static.items():
            bundle.setdefault(key, value)
        return mime_subset(bundle, include, exclude)

    def __repr__(self) -> str:
        count = len(self.diagram.findings)
        return f"<gradviz explorer: {count} finding{'' if count == 1 else 's'}>"
