"""The explorer: an interactive page of a trace (findings, graph with modules that open and close, search, an
event scrubber, memory tables), one self-contained HTML file fed one JSON document. See README.md here."""

from __future__ import annotations

from .document import explorer_document
from .page import explorer_html, read_document

__all__ = ["explorer_document", "explorer_html", "read_document"]
