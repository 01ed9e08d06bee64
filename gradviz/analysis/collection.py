"""`diagnose()`'s result: a list of findings that shows itself as a table in a notebook and as text in IPython."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .findings import Finding


class Findings(list[Finding]):
    """A plain list of :class:`Finding` (compare, slice, JSON it as one), plus displays: `_repr_html_` draws a table
    (severity, where, kind, what happened, the fix) in Jupyter; IPython's text display prints each finding as
    `gradviz check` does. `file_labels` names files as displays do (`In[6]` for a notebook cell)."""

    def __init__(self, items: Iterable[Finding] = (), *, file_labels: dict[str, str] | None = None) -> None:
        super().__init__(items)
        self.file_labels: dict[str, str] = dict(file_labels or {})

    def _repr_html_(self) -> str:
        from ..notebook import findings_table  # the display belongs to the notebook front end

        return findings_table(self, file_labels=self.file_labels)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        from ..notebook import findings_plain_text

        printer.text(findings_plain_text(self, file_labels=self.file_labels))
