"""`diagnose()`'s result: a list of findings that shows itself as a table in a notebook and as text in IPython; and
`diagnosis()`'s: those findings with what the analysis computed on the way that the views reuse."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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
    the notebook front end's (gradviz/integrations/notebook.py lends them through `model.LENT`)."""

    def __init__(self, items: Iterable[Finding] = (), *, file_labels: dict[str, str] | None = None) -> None:
        super().__init__(items)
        self.file_labels: dict[str, str] = dict(file_labels or {})

    def _repr_html_(self) -> str | None:
        return LENT.findings_html(self, self.file_labels) if LENT.findings_html is not None else None

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        text = LENT.findings_text(self, self.file_labels) if LENT.findings_text is not None else list.__repr__(self)
        printer.text(text)


@dataclass(frozen=True)
class Diagnosis:
    """The findings of one trace, with the graphs' lifetimes the analysis computed and the names its messages gave
    tensors: the picture (picture/picture.py) and SARIF reuse both instead of deriving them again."""

    findings: Findings
    lifetimes: Lifetimes
    namer: Namer
