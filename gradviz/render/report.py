"""The `report` view: the explorer page (gradviz/explorer), one self-contained HTML file of the trace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace

__all__ = ["report_html"]


def report_html(trace: Trace, findings: Sequence[Finding] = (), *, title: str | None = None) -> str:
    """The explorer for `trace` as one HTML string: no external CSS, scripts, fonts or images."""
    from ..explorer import explorer_html  # lazily: the page's assets are read only when a page is made

    return explorer_html(trace, findings, title=title)
