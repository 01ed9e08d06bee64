"""The memory view's boxes: the colours of its marks, the HTML labels of tensors, version counters, storages and
writes (with the version text a write shows, which the timeline reads too), and the legend of what a drawing uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..analysis.findings import version_text
from ..analysis.names import Namer, statement
from ..model import Event, EventKind, Trace
from ..picture.memory_select import WRITES
from ..picture.palette import MARK_OF_KIND, PALETTE, Mark
from ..picture.timeline_rows import change_text
from .escape import html_label_text, quote_id, shorten

if TYPE_CHECKING:
    from ..analysis.findings import Finding

__all__ = [
    "FINDING_COLOURS",
    "SAVED_COLOUR",
    "SAVED_TEXT",
    "SILENT",
    "WRITE_COLOUR",
    "counter_histories",
    "counter_label",
    "counter_node",
    "finding_colours",
    "legend_table",
    "range_text",
    "saved_lines",
    "storage_label",
    "storage_node",
    "tensor_label",
    "tensor_node",
    "write_label",
    "write_node",
]

#: Outline colour of a tensor or storage a finding is about (finding kind's value -> colour): the colour of the mark
#: the graph view gives the same findings (palette.MARK_OF_KIND).
FINDING_COLOURS: dict[str, str] = {
    kind.value: PALETTE[mark].line or PALETTE[mark].colour for kind, mark in MARK_OF_KIND.items()
}
#: Light fill behind a tensor drawn in one of the colours above.
_FINDING_FILLS = {PALETTE[mark].line or PALETTE[mark].colour: PALETTE[mark].tint or PALETTE[mark].colour
                  for mark in MARK_OF_KIND.values()}
SAVED_COLOUR = "#f5a623"  # orange, as the graph view draws saved tensors
WRITE_COLOUR = "#555555"
SAVED_TEXT = PALETTE[Mark.SAVED].line or PALETTE[Mark.SAVED].colour  # "saved by ..." lines
SILENT = PALETTE[Mark.SILENT].colour  # a write the version counter did not notice
_MONO = "Courier"


def finding_colours(findings: Iterable[Finding]) -> tuple[dict[str, str], dict[int, str]]:
    """Tensor id -> colour and event seq -> colour, the most severe finding winning."""
    tensors: dict[str, str] = {}
    events: dict[int, str] = {}
    for f in sorted(findings, key=lambda f: f.severity.rank):
        colour = FINDING_COLOURS.get(f.kind.value, "red")
        for tid in f.tensors:
            tensors.setdefault(tid, colour)
        for seq in f.events:
            events.setdefault(seq, colour)
    return tensors, events


def saved_lines(trace: Trace, shown: set[str]) -> dict[str, list[str]]:
    """Tensor id -> lines like "saved by TanhBackward0 (result) at v0"."""
    out: dict[str, list[str]] = {}
    for node in trace.nodes.values():
        for saved in node.saved:
            if saved.tensor in shown:
                version = version_text(saved.saved_version)
                out.setdefault(saved.tensor, []).append(f"saved by {node.name} ({saved.name}) at {version}")
    return out


def tensor_node(tid: str) -> str:
    return quote_id(f"tensor_{tid}")


def storage_node(sid: str) -> str:
    return quote_id(f"storage_{sid}")


def counter_node(cid: str) -> str:
    return quote_id(f"counter_{cid}")


def write_node(seq: int) -> str:
    return f"write_{seq}"


def range_text(byte_range: tuple[int, int] | list[int] | None) -> str:
    if byte_range is None:
        return "bytes ?"
    start, stop = byte_range
    return f"bytes [{start}, {stop})"


def _table(rows: list[str], colour: str, *, fill: str = "white", width: int = 1) -> str:
    body = "".join(f"<TR>{row}</TR>" for row in rows)
    return (f'<<TABLE BORDER="{width}" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" COLOR="{colour}" '
            f'BGCOLOR="{fill}">{body}</TABLE>>')


def _cell(text: str, *, bold: bool = False, colour: str | None = None, mono: bool = False, size: int = 10) -> str:
    inner = html_label_text(text)
    if bold:
        inner = f"<B>{inner}</B>"
    face = f' FACE="{_MONO}"' if mono else ""
    font_colour = f' COLOR="{colour}"' if colour else ""
    return f'<TD ALIGN="LEFT"><FONT POINT-SIZE="{size}"{face}{font_colour}>{inner}</FONT></TD>'


def tensor_label(
    trace: Trace, tid: str, colour: str | None, saved: list[str], namer: Namer, repeat: str | None = None
) -> str:
    """`repeat`: "×3 (steps 1, 3, 5)" when this tensor is drawn for the same tensor of several steps."""
    t = trace.tensors[tid]
    title = namer.tensor(tid)
    rows = [_cell(shorten(title, 40), bold=True) if repeat is None else
            f'<TD ALIGN="LEFT"><FONT POINT-SIZE="10"><B>{html_label_text(shorten(title, 40))}</B>  '
            f'<FONT COLOR="#1f6fbf">{html_label_text(repeat)}</FONT></FONT></TD>']
    made = namer.alias(tid) if t.origin in ("data", "detach", "view") else namer.expression(tid)
    if made != title:
        rows.append(_cell(shorten(made if " = " in made else f"{title} = {made}", 40), mono=True))
    shape = "[" + ", ".join(str(n) for n in t.shape) + "]"
    details = f"{shape} {t.dtype}"
    if t.grad_fn and t.grad_fn in trace.nodes:
        details += f" \N{MIDDLE DOT} {trace.nodes[t.grad_fn].name}"
    elif t.requires_grad:
        details += " \N{MIDDLE DOT} leaf, requires grad"
    if t.created is not None and t.parameter is None:  # tells apart the `x` of each line and step
        details += f" \N{MIDDLE DOT} line {t.created.line}"
    rows.append(_cell(shorten(details, 60), colour="#555555", size=9))
    rows.extend(_cell(line, colour=SAVED_TEXT, size=9) for line in saved[:3])
    if len(saved) > 3:
        rows.append(_cell(f"saved by {len(saved) - 3} more nodes", colour=SAVED_TEXT, size=9))
    if t.is_inference:
        rows.append(_cell("inference tensor: no version counter", colour="#555555", size=9))
    fill = "#fff6e5" if saved and colour is None else "#eef4fb"
    if colour:
        fill = _FINDING_FILLS.get(colour, "#ffffff")
    return _table(rows, colour or "#6b8fb5", fill=fill, width=3 if colour else 1)


def storage_label(trace: Trace, sid: str, colour: str | None, users: list[str], namer: Namer) -> str:
    """`users`: the tensors living in this storage, in creation order."""
    s = trace.storages[sid]
    rows = [
        _cell(shorten(namer.storage(sid), 48), bold=True),
        _cell(f"{s.nbytes} bytes \N{MIDDLE DOT} {s.dtype} \N{MIDDLE DOT} {s.device}"),
    ]
    if len(users) > 1:
        rows.append(_cell(shorten(f"shared by {namer.tensors(users)}", 60), colour="#555555", size=9))
    return _table(rows, colour or "#333333", fill="#f2f2f2", width=3 if colour else 2)


def counter_label(
    trace: Trace, cid: str, history_and_unnoticed: _History,
    namer: Namer,
) -> str:
    counter = trace.version_counters[cid]
    members = [tid for tid in counter.tensors if tid in trace.tensors]
    history, unnoticed, first = history_and_unnoticed
    start = first[0] if first else min((trace.tensors[tid].version or 0 for tid in members), default=0)
    rows = [_cell(shorten(namer.counter(cid), 48), bold=True)]
    if counter.created_by == "data":
        rows.append(_cell("fresh counter (made by .data)", colour=SILENT, size=9))
    steps = [f"v{start}"] + [f"v{after} (line {line})" for after, line in history]
    if len(steps) > 5:
        steps = steps[:2] + [f"\N{HORIZONTAL ELLIPSIS} {len(steps) - 4} more"] + steps[-2:]
    rows.append(_cell(" \N{RIGHTWARDS ARROW} ".join(steps) if history else f"v{start}, never moved", size=9))
    if unnoticed:
        lines = ", ".join(str(line) for line in unnoticed[:4])
        if len(unnoticed) > 4:
            lines += ", \N{HORIZONTAL ELLIPSIS}"
        rows.append(_cell(f"not moved by the write{'s' if len(unnoticed) > 1 else ''} at line {lines}",
                          colour=SILENT, size=9))
    return _table(rows, "#7a5aa8", fill="#f4f0fa")


#: (new version, line) for every event that moved a counter, lines of writes that left it, the version it started at
_History = tuple[list[tuple[int, int | None]], list[int | None], list[int]]


def counter_histories(
    trace: Trace, counters: set[str]
) -> dict[str, _History]:
    """Counter id -> ((new version, line) for every event that moved it, lines of writes to its tensors' bytes
    that left it where it was: writes through an alias with its own counter), in one pass over the events."""
    counter_of = {t.id: t.version_counter for t in trace.tensors.values() if t.version_counter in counters}
    out: dict[str, _History] = {}
    for e in trace.events:
        if e.kind not in WRITES:
            continue
        line = e.location.line if e.location else None
        moved: dict[str, int] = {}
        before: dict[str, int] = {}
        touched: set[str] = set()
        for v in e.versions:
            cid = counter_of.get(v.tensor)
            if cid is None:
                continue
            touched.add(cid)
            if v.after is not None and v.after != v.before:
                moved.setdefault(cid, v.after)
                if v.before is not None:
                    before.setdefault(cid, v.before)
        for cid in touched:
            history, unnoticed, start = out.setdefault(cid, ([], [], []))
            if cid in moved:
                if not history and cid in before:
                    start.append(before[cid])  # the version before its first move: a parameter's is 0, not 1
                history.append((moved[cid], line))
            elif e.kind is EventKind.INPLACE_WRITE:
                unnoticed.append(line)
    return out


def write_label(
    trace: Trace, event: Event, colour: str, shown: set[str], namer: Namer, *, times: int = 1
) -> str:
    where = f"line {event.location.line}: " if event.location else ""
    code = statement(event.location.code) if event.location and event.location.code else (event.op or "")
    if event.kind is EventKind.OPTIMIZER_STEP:
        code = f"{event.data.get('optimizer', 'optimizer')}.step()" + (f"  ({code})" if code else "")
    rows = [_cell(shorten(where + code, 50), bold=True, colour=colour if colour != WRITE_COLOUR else None)]
    if times > 1:
        rows.append(_cell(f"\N{MULTIPLICATION SIGN}{times} (the last drawn; every write here alike)", size=9))
    changes = [v for v in event.written() if v.tensor in shown]
    for v in changes[:6]:
        hidden = v.before == v.after
        text = change_text(v, label=namer.tensor(v.tensor))
        rows.append(_cell(text, mono=True, size=9, colour=SILENT if hidden else None))
    if len(changes) > 6:
        rows.append(_cell(f"\N{HORIZONTAL ELLIPSIS} {len(changes) - 6} more tensors", size=9))
    return _table(rows, colour, fill="#ffffff", width=2 if colour != WRITE_COLOUR else 1)



_FINDING_WORDS = {
    FINDING_COLOURS["poisoned_saved_tensor"]: "finding: saved tensor written in place (backward raises)",
    FINDING_COLOURS["silently_corrupted_saved_tensor"]:
        "finding: saved tensor's bytes changed, version did not move (gradients silently wrong)",
    FINDING_COLOURS["update_without_gradient"]: "finding: parameter updated without a gradient",
    FINDING_COLOURS["dead_parameter"]: "finding: parameter that never gets a gradient",
    FINDING_COLOURS["cut_edge"]: "finding: gradient path cut here",
    FINDING_COLOURS["graph_kept_alive"]: "finding: value keeping the graphs of many steps alive",
    FINDING_COLOURS["backward_through_freed_graph"]: "finding: built on a graph an earlier backward freed",
}


def legend_table(colours: set[str], saved: bool, writes: bool) -> str:
    """Only the marks this drawing uses."""
    rows = [
        _legend_row("\N{BOX DRAWINGS LIGHT HORIZONTAL}" * 3 + "\N{BLACK RIGHT-POINTING TRIANGLE}", "#444444",
                    "the tensor lives in this storage, at these bytes"),
        _legend_row("- - \N{WHITE CIRCLE}", "#444444", "the tensor uses this version counter (shared = same versions)"),
    ]
    if saved:
        rows.append(_legend_row("saved by \N{HORIZONTAL ELLIPSIS}", SAVED_TEXT, "kept by an autograd node for backward, "
                                "at the version shown"))
    if writes:
        rows.append(_legend_row("v0 \N{RIGHTWARDS ARROW} v0", SILENT,
                                "in-place write: versions before \N{RIGHTWARDS ARROW} after; "
                                "(not noticed) = bytes changed, version did not"))
    for colour, words in _FINDING_WORDS.items():
        if colour in colours:
            rows.append(_legend_row("\N{FULL BLOCK}" * 3, colour, words))
    return f'<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="2">{"".join(rows)}</TABLE>>'


def _legend_row(mark: str, colour: str, words: str) -> str:
    return (f'<TR><TD ALIGN="LEFT"><FONT COLOR="{colour}" FACE="{_MONO}">{html_label_text(mark)}</FONT></TD>'
            f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9">{html_label_text(words)}</FONT></TD></TR>')
