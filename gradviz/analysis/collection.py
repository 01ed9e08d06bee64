"""`diagnose()`'s result: a list of findings that shows itself as a table in a notebook and as text in IPython."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..model import LENT
from .findings import Finding

if TYPE_CHECKING:
    from .lifetime import Lifetimes
    from .names import Namer


class Findings(list[Finding]):
    """A plain list of :class:`Finding` (compare, slice, JSON it as one), plus displays: `_repr_html_` draws a table
    (severity, where, kind, what happened, the fix) in Jupyter; IPython's text display prints each finding as
    `gradviz check` does. `file_labels` names files as displays do (`In[6]` for a notebook cell). The displays are
    the notebook front end's (gradviz/notebook.py lends them through `model.LENT`)."""

    def __init__(self, items: Iterable[Finding] = (), *, file_labels: dict[str, str] | None = None) -> None:
        super().__init__(items)
        self.file_labels: dict[str, str] = dict(file_labels or {})
        self.lifetimes: Lifetimes | None = None  # what diagnose() computed of the graphs' lifetimes, for the views
        self.namer: Namer | None = None  # the names diagnose() gave tensors, for the views and SARIF

    def _repr_html_(self) -> str | None:
        return LENT.findings_html(self, self.file_labels) if LENT.findings_html is not None else None

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        text = LENT.findings_text(self, self.file_labels) if LENT.findings_text is not None else list.__repr__(self)
        printer.text(text)
