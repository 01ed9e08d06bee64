"""The timeline view: the program's events in order, one row each, with versions before -> after every write."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import graphviz

from ..analysis.names import statement
from ..model import Trace
from ..picture.palette import PALETTE, SEVERITIES, Mark
from ..picture.timeline_rows import TimelineRow, timeline_rows
from .escape import FONT, html_label_text, shorten

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..picture.picture import Picture

__all__ = ["SEVERITY_FILL", "SEVERITY_COLOURS", "timeline_digraph", "timeline_table"]

#: Row background and accent colour per finding severity (shared with the HTML report).
SEVERITY_FILL = {name: swatch.tint or swatch.colour for name, swatch in SEVERITIES.items()}
SEVERITY_COLOURS = {name: swatch.colour for name, swatch in SEVERITIES.items()}
_FONT = FONT
_MONO = "Courier"


def timeline_digraph(
    trace: Trace, findings: Sequence[Finding] = (), *, max_rows: int | None = 300, picture: Picture | None = None
) -> graphviz.Digraph:
    """The timeline as one table, a row per event (top to bottom): columns line up in every row, rows that caused
    findings framed and filled in their severity's colour, cut texts whole in their cell's tooltip."""
    rows = timeline_rows(trace, findings, max_rows=max_rows, namer=picture.namer if picture is not None else None)
    dot = graphviz.Digraph("timeline")
    dot.attr("graph", fontname=_FONT)
    dot.attr("node", shape="plaintext", fontname=_FONT, fontsize="10", margin="0")
    dot.node("timeline", timeline_table(rows))
    return dot


# ---------------------------------------------------------------------- drawing the table
@dataclass(frozen=True)
class _Column:
    """A column of the table: its title, characters per line (texts wrap there, so the table keeps a readable
    width), lines at most (the rest is cut, whole in the cell's tooltip), and whether it shows code."""

    title: str
    chars: int
    lines: int
    mono: bool = False


_COLUMNS = (
    _Column("#", 8, 1),
    _Column("line", 28, 2),
    _Column("source", 44, 3, mono=True),
    _Column("event", 14, 1),
    _Column("alias", 34, 3, mono=True),
    _Column("versions before \N{RIGHTWARDS ARROW} after", 44, 6, mono=True),
    _Column("outcome", 52, 6),
)
_RULE = "#e2e2e2"  # the line under each row
_UNNOTICED = PALETTE[Mark.SILENT].colour  # a write that changed bytes and left the version: the memory view's colour


def timeline_table(rows: Sequence[TimelineRow]) -> str:
    """The HTML-like label of the timeline: a header row, then one `<TR>` per row of `timeline_rows`.

    Every cell has the same border width (drawn on the sides that frame its row), so the text of a column starts at
    the same x in every row; long texts wrap at their column's width with `BALIGN="LEFT"`."""
    several_files = len({r.file for r in rows if r.file}) > 1
    header = "".join(f'<TD ALIGN="LEFT" BGCOLOR="#e8e8e8" BORDER="1" SIDES="B" COLOR="#bbbbbb">'
                     f"<B>{html_label_text(c.title)}</B></TD>" for c in _COLUMNS)
    body = [f"<TR>{header}</TR>"]
    for row in rows:
        body.append(_omitted_row(row) if row.kind == "omitted" else _table_row(row, several_files))
    if not rows:
        body.append(f'<TR><TD COLSPAN="{len(_COLUMNS)}" ALIGN="LEFT" BORDER="1" SIDES="B" COLOR="{_RULE}">'
                    f'<FONT COLOR="#555555">{html_label_text(_EMPTY)}</FONT></TD></TR>')
    return (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="5" BGCOLOR="#ffffff">'
            f'{"".join(body)}</TABLE>>')


_EMPTY = "no events: the program made no aliases, in-place writes or backward calls"


def _table_row(row: TimelineRow, several_files: bool) -> str:
    severity = row.severity
    fill = SEVERITY_FILL[severity] if severity else ("#f7f7f7" if row.index % 2 else "#ffffff")
    frame = SEVERITY_COLOURS[severity] if severity else _RULE
    where = row.where if several_files else (str(row.line) if row.line is not None else "")
    error = (row.error or row.outcome or "")
    outcome = [error.split(" Hint:")[0]] if error else []  # PyTorch's hint is in the cell's tooltip
    if row.findings:
        outcome.append("! " + ", ".join(k.replace("_", " ") for k in row.findings))
    if row.affected_by:
        outcome.append("\N{LEFTWARDS ARROW} because of: " + ", ".join(k.replace("_", " ") for k in row.affected_by))
    count = f" \N{MULTIPLICATION SIGN} {row.count}" if row.count > 1 else ""
    source = (f"{row.where}: " if row.where else "") + (row.code or "")
    texts = [
        (str(row.index + 1) + count, None, None),
        (where, None, None),
        (statement(row.code), None, source),
        (row.kind, None, None),
        (row.alias, None, None),
        (_version_lines(row.versions_lines, _COLUMNS[5]),
         _UNNOTICED if any(not v.noticed for v in row.versions) else None, row.versions_text),
        ("\n".join(outcome), SEVERITY_COLOURS["error"] if row.outcome == "error" or severity == "error" else None,
         row.error),
    ]
    cells = []
    last = len(_COLUMNS) - 1
    for number, ((text, colour, whole), column) in enumerate(zip(texts, _COLUMNS)):
        shown, cut = _wrap(text, column.chars, column.lines)
        sides = "B" if not severity else "TB" + ("L" if number == 0 else "") + ("R" if number == last else "")
        attrs = f'ALIGN="LEFT" BALIGN="LEFT" VALIGN="TOP" BGCOLOR="{fill}" BORDER="1" SIDES="{sides}" COLOR="{frame}"'
        tip = whole if (whole and (cut or whole != text)) else (text if cut else None)
        if tip:
            attrs += f' HREF="" TOOLTIP="{html_label_text(" ".join(tip.split()))}"'  # no link: a tooltip
        font = (f' FACE="{_MONO}" POINT-SIZE="9"' if column.mono else "") + (f' COLOR="{colour}"' if colour else "")
        inner = html_label_text(shown) or " "
        cells.append(f"<TD {attrs}>{f'<FONT{font}>{inner}</FONT>' if font else inner}</TD>")
    return f"<TR>{''.join(cells)}</TR>"


def _omitted_row(row: TimelineRow) -> str:
    return (f'<TR><TD COLSPAN="{len(_COLUMNS)}" ALIGN="LEFT" BGCOLOR="#ffffff" BORDER="1" SIDES="B" '
            f'COLOR="{_RULE}"><FONT COLOR="#555555"><I>{html_label_text(row.code)}</I>'
            "</FONT></TD></TR>")


def _version_lines(changes: list[str], column: _Column) -> str:
    """One line per tensor (wrapped when long); past the column's lines, "… N more tensors"."""
    lines: list[str] = []
    for number, change in enumerate(changes):
        wrapped = textwrap.wrap(change, column.chars, break_long_words=True, break_on_hyphens=False) or [""]
        if len(lines) + len(wrapped) > column.lines - (number < len(changes) - 1):
            left = len(changes) - number
            lines.append(f"\N{HORIZONTAL ELLIPSIS} {left} more tensor{'s' if left != 1 else ''}")
            break
        lines.extend(wrapped)
    return "\n".join(lines)


def _wrap(text: str, chars: int, max_lines: int) -> tuple[str, bool]:
    """Text wrapped to `chars` per line (each of its own lines apart), at most `max_lines` lines, the last one
    shortened with an ellipsis; and whether anything was cut."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines.extend(textwrap.wrap(paragraph, chars, break_long_words=True, break_on_hyphens=False) or [""])
    if len(lines) <= max_lines:
        return "\n".join(lines), False
    return "\n".join(lines[: max_lines - 1] + [shorten(" ".join(lines[max_lines - 1:]), chars)]), True
