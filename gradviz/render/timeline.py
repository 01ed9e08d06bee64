"""The timeline view: the program's events in order, one row each, with versions before -> after every write."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import graphviz

from ..analysis.findings import version_text
from ..analysis.initialisation import setup_events
from ..analysis.names import Namer, statement
from ..model import Event, EventKind, Trace
from .escape import FONT, html_label_text, shorten
from .memory_boxes import change_text
from .palette import PALETTE, SEVERITIES

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from .picture import Picture

__all__ = ["SEVERITY_FILL", "SEVERITY_COLOURS", "timeline_digraph", "timeline_rows", "timeline_table"]

#: Row background and accent colour per finding severity (shared with the HTML report).
SEVERITY_FILL = {name: swatch.tint or swatch.colour for name, swatch in SEVERITIES.items()}
SEVERITY_COLOURS = {name: swatch.colour for name, swatch in SEVERITIES.items()}
_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
_FONT = FONT
_MONO = "Courier"
_MAX_PERIOD = 64  # longest repeated block of rows (a loop body) that folding looks for


def timeline_rows(
    trace: Trace, findings: Sequence[Finding] = (), *, max_rows: int | None = 300, namer: Namer | None = None
) -> list[dict[str, Any]]:
    """One dict per event in program order, repeated blocks (loop bodies) folded into one row with `count`.

    Keys: index, seq, seqs, kind, file, line, where, code, alias, tensor, versions (list of
    {tensor, label, before, after, noticed}), versions_lines (one text per tensor), versions_text (those joined),
    outcome ('ok'/'error'/None), error (first line),
    findings (kinds of the findings this row caused), affected_by (kinds of the findings whose effect this row is:
    the backward that raised or used corrupted values), severity ('error'/'warning'/'info'/None, from the findings
    caused), count, and for folded rows versions_last.
    Rows beyond `max_rows` are dropped, keeping those with findings, and replaced by rows of kind "omitted".
    """
    causes, affected = _findings_by_event(trace, findings)
    namer = Namer(trace) if namer is None else namer
    initial = setup_events(trace) - set(causes)
    file_names: dict[str, str] = {}  # a file's display name, worked out once (not once per event)
    rows = [_row(trace, e, causes.get(e.seq, []), affected.get(e.seq, []), namer, file_names) for e in trace.events]
    rows = _error_once(_fold(_fold_call_sites(_initialisation_row(trace, rows, initial))))
    if max_rows is not None and len(rows) > max_rows:
        rows = _bound(rows, max_rows)
    for i, row in enumerate(rows):
        row["index"] = i
        row["versions_text"] = ", ".join(row["versions_lines"])
    return rows


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


# ---------------------------------------------------------------------- building rows
def _findings_by_event(
    trace: Trace, findings: Sequence[Finding]
) -> tuple[dict[int, list[Finding]], dict[int, list[Finding]]]:
    """Event seq -> findings it caused, and event seq -> findings whose effect it is (the backward that raised or
    used corrupted values). A finding's events name one occurrence; the other iterations of a loop doing the same
    thing at the same line are causes too."""
    by_seq = {e.seq: e for e in trace.events}
    causes: dict[int, list[Finding]] = {}
    affected: dict[int, list[Finding]] = {}
    for f in findings:
        cause_seqs = [s for s in f.events if s != f.affected_backward and s in by_seq]
        if not cause_seqs and f.line is not None:
            cause_seqs = [e.seq for e in trace.events
                          if e.location and e.location.line == f.line and (f.file is None or e.location.file == f.file)
                          and e.kind not in (EventKind.EXCEPTION, EventKind.BACKWARD)]
        keys = {_place(by_seq[s]) for s in cause_seqs}
        for e in trace.events:
            if e.seq in cause_seqs or (f.count > 1 and _place(e) in keys):
                causes.setdefault(e.seq, []).append(f)
        if f.affected_backward in by_seq:
            affected.setdefault(f.affected_backward, []).append(f)
    return causes, affected


def _place(event: Event) -> tuple[str | None, int | None, str]:
    loc = event.location
    return (loc.file if loc else None, loc.line if loc else None, event.kind.value)


def _row(
    trace: Trace, event: Event, findings: list[Finding], affected: list[Finding], namer: Namer,
    file_names: dict[str, str],
) -> dict[str, Any]:
    loc = event.location
    is_write = event.kind in (EventKind.INPLACE_WRITE, EventKind.OPTIMIZER_STEP)
    # (aliasing events move nothing: only their changes are shown)
    changes = event.written() if is_write else [v for v in event.versions if v.before != v.after]
    labels = [namer.tensor(v.tensor) for v in changes]
    # a write the op's own kernel makes without moving the counter (batch norm's running statistics), not an alias's
    kernel = _op_name(event.op) if event.data.get("unversioned") else None
    versions = [
        {"tensor": v.tensor, "label": label, "before": v.before, "after": v.after, "noticed": v.before != v.after,
         "kernel": kernel}
        for v, label in zip(changes, labels)
    ]
    outcome, error = _outcome(event)
    severities = sorted({f.severity.value for f in findings}, key=_SEVERITY_RANK.__getitem__)
    return {
        "index": 0,
        "seq": event.seq,
        "seqs": [event.seq],
        "kind": event.kind.value,
        "file": loc.file if loc else None,
        "line": loc.line if loc else None,
        "where": _where(trace, loc.file, loc.line, file_names) if loc else "",
        "code": loc.code.strip() if loc else "",
        "alias": _alias(trace, event, namer),
        "tensor": namer.tensor(event.tensor) if event.tensor in trace.tensors else None,
        "versions": versions,
        "versions_lines": [change_text(v, label=label, write=is_write) for v, label in zip(changes, labels)],
        "outcome": outcome,
        "error": error,
        "findings": sorted({f.kind.value for f in findings}),
        "affected_by": sorted({f.kind.value for f in affected}),
        "severity": severities[0] if severities else None,
        "count": 1,
    }


def _op_name(op: str | None) -> str:
    """`batch_norm` for `nn.functional.batch_norm`: the op whose kernel wrote."""
    return (op or "the op").rsplit(".", 1)[-1]


def _where(trace: Trace, file: str | None, line: int | None, file_names: dict[str, str]) -> str:
    """`trace.where(file, line)`, with the file's display name kept in `file_names`."""
    if file is None or line is None:
        return trace.where(file, line)
    name = file_names.get(file)
    if name is None:
        name = file_names[file] = trace.file_name(file)
    return f"{name}:{line}"


def _alias(trace: Trace, event: Event, namer: Namer) -> str:
    kind = event.kind

    def name(tid: str | None) -> str:
        return namer.tensor(tid) if tid in trace.tensors else "?"

    if kind in (EventKind.DATA_GET, EventKind.DETACH):
        if event.result in trace.tensors:
            text = namer.alias(event.result)
            if " = " in text or "." in text:
                return text
        source = event.data.get("expression") or name(event.tensor)
        return f"{source}.data" if kind is EventKind.DATA_GET else f"{source}.detach()"
    if kind is EventKind.DATA_SET:
        value = name(event.result) if event.result in trace.tensors else "\N{HORIZONTAL ELLIPSIS}"
        return f"{name(event.tensor)}.data = {value}"
    if kind is EventKind.DETACH_:
        return f"{name(event.tensor)}.detach_()"
    if kind is EventKind.INPLACE_WRITE and event.tensor in trace.tensors:
        return "via " + namer.alias(event.tensor)
    if kind is EventKind.BACKWARD:
        roots = [name(r) for r in event.data.get("roots") or [] if r in trace.tensors]
        return f"{', '.join(roots) or '?'}.backward()"
    if kind is EventKind.OPTIMIZER_STEP:
        changed = event.data.get("changed") or []
        return f"{event.data.get('optimizer', 'optimizer')}.step(): {len(changed)} changed"
    if kind is EventKind.REQUIRES_GRAD_ and event.tensor in trace.tensors:
        return f"{name(event.tensor)}.requires_grad_()"
    return ""


def _outcome(event: Event) -> tuple[str | None, str | None]:
    if event.kind is EventKind.BACKWARD:
        outcome = event.data.get("outcome")
        error = event.data.get("error")
        message = None
        if isinstance(error, dict):
            first = str(error.get("message", "")).strip().splitlines()
            message = f"{error.get('type', 'Error')}: {first[0] if first else ''}"
        return (str(outcome) if outcome else None), message
    if event.kind is EventKind.EXCEPTION:
        first = str(event.data.get("message", "")).strip().splitlines()
        return "error", f"{event.data.get('type', 'Error')}: {first[0] if first else ''}"
    if event.kind is EventKind.OPTIMIZER_STEP and event.data.get("outcome") == "error":
        return "error", "raised inside step()"
    return None, None


def _signature(row: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two rows "the same" for folding: everything but the version numbers themselves."""
    deltas = tuple((v["label"], None if v["before"] is None or v["after"] is None else v["after"] - v["before"])
                   for v in row["versions"])
    return (row["kind"], row["file"], row["line"], row["code"], row["alias"], deltas, row["outcome"],
            row["error"], tuple(row["findings"]), tuple(row["affected_by"]))


def _fold(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold a block of rows repeated back to back (a loop body of up to _MAX_PERIOD rows) into one copy × N."""
    numbering: dict[tuple[Any, ...], int] = {}
    signatures = [numbering.setdefault(_signature(r), len(numbering)) for r in rows]  # ints compare fast
    out: list[dict[str, Any]] = []
    i, n = 0, len(rows)
    while i < n:
        best_period, best_repeats = 1, 1
        for period in range(1, min(_MAX_PERIOD, (n - i) // 2) + 1):
            if signatures[i + period] != signatures[i]:
                continue  # a repeat of the block would start with this row again
            block = signatures[i:i + period]
            repeats = 1
            while signatures[i + repeats * period:i + (repeats + 1) * period] == block:
                repeats += 1
            if repeats > 1 and repeats * period > best_repeats * best_period:
                best_period, best_repeats = period, repeats
        if best_repeats == 1:
            out.append(rows[i])
            i += 1
            continue
        for k in range(best_period):
            copies = [rows[i + r * best_period + k] for r in range(best_repeats)]
            merged = dict(copies[0])
            merged["count"] = best_repeats
            merged["seqs"] = [s for c in copies for s in c["seqs"]]
            merged["versions_last"] = copies[-1]["versions"]
            if copies[-1]["versions"] != copies[0]["versions"]:
                merged["versions_lines"] = _span_text(copies[0]["versions"], copies[-1]["versions"])
            out.append(merged)
        i += best_period * best_repeats
    return out


def _each_time(v: dict[str, Any]) -> str:
    text = f"{v['label']}: v{v['before']} \N{RIGHTWARDS ARROW} v{v['after']}"
    return text + (" (not noticed) each time" if v["before"] == v["after"] else " each time")


def _span_text(first: list[dict[str, Any]], last: list[dict[str, Any]]) -> list[str]:
    parts = []
    for a, b in zip(first, last):
        if (a["before"], a["after"]) == (b["before"], b["after"]):
            parts.append(_each_time(a))
            continue
        parts.append(f"{a['label']}: {version_text(a['before'])} \N{RIGHTWARDS ARROW} {version_text(a['after'])} "
                     f"\N{HORIZONTAL ELLIPSIS} {version_text(b['before'])} \N{RIGHTWARDS ARROW} {version_text(b['after'])}")
    return parts


def _bound(rows: list[dict[str, Any]], max_rows: int) -> list[dict[str, Any]]:
    """Keep rows with findings (and one row around each), then the earliest rows, up to max_rows."""
    keep: set[int] = set()
    for i, row in enumerate(rows):
        if row["severity"] is not None:
            keep.update(j for j in (i - 1, i, i + 1) if 0 <= j < len(rows))
    keep = set(sorted(keep)[: max_rows])
    budget = max_rows - len(keep)
    for i in range(len(rows)):
        if budget <= 0:
            break
        if i not in keep:
            keep.add(i)
            budget -= 1
    out: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        if i in keep:
            if skipped:
                out.append(_omitted(skipped))
                skipped = []
            out.append(row)
        else:
            skipped.append(row)
    if skipped:
        out.append(_omitted(skipped))
    return out


def _omitted(rows: list[dict[str, Any]]) -> dict[str, Any]:
    events = sum(r["count"] for r in rows)
    return {
        "index": 0, "seq": rows[0]["seq"], "seqs": [s for r in rows for s in r["seqs"]], "kind": "omitted",
        "file": None, "line": None, "where": "", "code": f"\N{HORIZONTAL ELLIPSIS} {events} more events not shown",
        "alias": "", "tensor": None, "versions": [], "versions_lines": [], "outcome": None, "error": None,
        "findings": [], "affected_by": [], "severity": None, "count": events,
    }


def _initialisation_row(trace: Trace, rows: list[dict[str, Any]], initial: set[int]) -> list[dict[str, Any]]:
    """The events that set the model up (`nn.Linear(...)` filling its weights, a BatchNorm's buffers,
    `model.to(device)` setting each parameter's `.data`) as one row, where the first was."""
    setup = [r for r in rows if r["seq"] in initial]
    if len(setup) < 2:
        return rows
    lines = sorted({r["line"] for r in setup if r["line"] is not None and r["kind"] == "inplace_write"})
    span = f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}-{lines[-1]}" if lines else ""

    def is_parameter(tid: str) -> bool:
        t = trace.tensors.get(tid)
        return t is not None and (t.parameter is not None or t.origin == "parameter")

    written = [r for r in setup if r["kind"] == "inplace_write"]
    tensors = {v["tensor"] for r in written for v in r["versions"]}
    parameters = {tid for tid in tensors if is_parameter(tid)}
    moved = [r for r in setup if r["kind"] == "data_set"]
    said = []
    if parameters:
        of_parameters = [r for r in written if any(is_parameter(v["tensor"]) for v in r["versions"])]
        said.append(f"{_count(len(parameters), 'parameter')} initialised in place ({_count(len(of_parameters), 'write')}"
                    f"{' at ' + span if span else ''})")
    if tensors - parameters:
        said.append(f"{_count(len(tensors - parameters), 'buffer')} (running statistics, counters) filled as the "
                    "modules were built")
    if moved:
        where = f" at line {moved[0]['line']}" if moved[0]["line"] is not None else ""
        said.append(f"{_count(len(moved), 'parameter')} moved: .data set{where} (Module.to / _apply)")
    folded = dict(setup[0], seqs=[s for r in setup for s in r["seqs"]], count=1, alias="model set up", versions=[],
                  versions_lines=said)
    out, placed = [], False
    for row in rows:
        if row["seq"] not in initial:
            out.append(row)
        elif not placed:
            out.append(folded)
            placed = True
    return out


_SITE_KINDS = {"data_get", "data_set", "detach", "inplace_write"}


def _fold_call_sites(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Back-to-back rows of one call site over many tensors (`for p in model.parameters(): p.data.add_(...)`,
    `clip_grad_norm_` scaling each gradient, `model.to(device)` setting each `.data`) as one row saying how many
    tensors and how their versions moved. Rows with findings, errors or effects of findings stay their own."""
    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []

    def site(row: dict[str, Any]) -> tuple[Any, ...] | None:
        if row["kind"] not in _SITE_KINDS or row["findings"] or row["affected_by"] or row["error"] or \
                row["severity"] or row["line"] is None:
            return None
        return (row["file"], row["line"], row["code"])

    def flush() -> None:
        tensors = {t for r in run for t in ([r["tensor"]] if r["tensor"] else []) + [v["label"] for v in r["versions"]]}
        if len(run) < 3 or len(tensors) < 3:
            out.extend(run)
        else:
            out.append(_site_row(run))
        run.clear()

    for row in rows:
        key = site(row)
        if run and (key is None or key != site(run[0])):
            flush()
        if key is None:
            out.append(row)
        else:
            run.append(row)
    if run:
        flush()
    return out


def _site_row(run: list[dict[str, Any]]) -> dict[str, Any]:
    """One row for a call site's events over many tensors: per kind, how many, and the versions in words."""
    kinds = list(dict.fromkeys(r["kind"] for r in run))
    lines: list[str] = []
    for kind in kinds:
        of_kind = [r for r in run if r["kind"] == kind]
        if kind == "inplace_write":
            changes = [v for r in of_kind for v in r["versions"]]
            noticed = [v for v in changes if v["noticed"]]
            hidden = [v for v in changes if not v["noticed"] and not v.get("kernel")]
            by_kernel = [v for v in changes if not v["noticed"] and v.get("kernel")]
            if noticed:
                lines.append(f"{_count(len({v['label'] for v in noticed}), 'tensor')} written, "
                             f"{_moves(noticed)}")
            if hidden:
                lines.append(f"{_count(len({v['label'] for v in hidden}), 'tensor')}: bytes changed, version "
                             "unchanged (written through an alias with its own counter: .data)")
            for op in dict.fromkeys(v["kernel"] for v in by_kernel):
                written = [v for v in by_kernel if v["kernel"] == op]
                lines.append(f"{_count(len({v['label'] for v in written}), 'tensor')}: written in place by {op}'s "
                             "kernel, which does not move the version counter")
        elif kind == "data_set":
            lines.append(f"{_count(len(of_kind), 'tensor')}: .data set (now in new memory)")
        else:
            call = ".data" if kind == "data_get" else ".detach()"
            lines.append(f"{_count(len(of_kind), 'alias', 'aliases')} made ({call})")
    first = [r for r in run if r["kind"] == kinds[0]]
    names = list(dict.fromkeys(r["tensor"] for r in first if r["tensor"]))
    alias = f"{_count(len(first), 'tensor')}: {', '.join(names)}" if names else _count(len(run), "event")
    return dict(run[0], kind=kinds[-1], seqs=[s for r in run for s in r["seqs"]], versions=[],
                versions_lines=lines, alias=alias, tensor=None)


def _count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _moves(changes: list[dict[str, Any]]) -> str:
    """ "v0 → v1 each" when every tensor moved alike, else by how much ("+1 version each")."""
    pairs = {(v["before"], v["after"]) for v in changes}
    if len(pairs) == 1:
        before, after = next(iter(pairs))
        return f"{version_text(before)} \N{RIGHTWARDS ARROW} {version_text(after)} each"
    steps = {None if v["before"] is None or v["after"] is None else v["after"] - v["before"] for v in changes}
    if len(steps) == 1 and None not in steps:
        step = next(iter(steps))
        return f"+{step} version{'s' if step != 1 else ''} each"
    return "versions moved"


def _error_once(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The exception that ended the program, when a backward row above already shows it: said once."""
    shown = {r["error"] for r in rows if r["kind"] != "exception" and r["error"]}
    for row in rows:
        if row["kind"] == "exception" and row["error"] in shown:
            row["error"] = "the error of the backward above ended the program"
    return rows


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
_UNNOTICED = PALETTE["silent"].colour  # a write that changed bytes and left the version: the memory view's colour


def timeline_table(rows: Sequence[dict[str, Any]]) -> str:
    """The HTML-like label of the timeline: a header row, then one `<TR>` per row of `timeline_rows`.

    Every cell has the same border width (drawn on the sides that frame its row), so the text of a column starts at
    the same x in every row; long texts wrap at their column's width with `BALIGN="LEFT"`."""
    several_files = len({r["file"] for r in rows if r.get("file")}) > 1
    header = "".join(f'<TD ALIGN="LEFT" BGCOLOR="#e8e8e8" BORDER="1" SIDES="B" COLOR="#bbbbbb">'
                     f"<B>{html_label_text(c.title)}</B></TD>" for c in _COLUMNS)
    body = [f"<TR>{header}</TR>"]
    for row in rows:
        body.append(_omitted_row(row) if row["kind"] == "omitted" else _table_row(row, several_files))
    if not rows:
        body.append(f'<TR><TD COLSPAN="{len(_COLUMNS)}" ALIGN="LEFT" BORDER="1" SIDES="B" COLOR="{_RULE}">'
                    f'<FONT COLOR="#555555">{html_label_text(_EMPTY)}</FONT></TD></TR>')
    return (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="5" BGCOLOR="#ffffff">'
            f'{"".join(body)}</TABLE>>')


_EMPTY = "no events: the program made no aliases, in-place writes or backward calls"


def _table_row(row: dict[str, Any], several_files: bool) -> str:
    severity = row["severity"]
    fill = SEVERITY_FILL[severity] if severity else ("#f7f7f7" if row["index"] % 2 else "#ffffff")
    frame = SEVERITY_COLOURS[severity] if severity else _RULE
    where = row["where"] if several_files else (str(row["line"]) if row["line"] is not None else "")
    error = (row["error"] or row["outcome"] or "")
    outcome = [error.split(" Hint:")[0]] if error else []  # PyTorch's hint is in the cell's tooltip
    if row["findings"]:
        outcome.append("! " + ", ".join(k.replace("_", " ") for k in row["findings"]))
    if row["affected_by"]:
        outcome.append("\N{LEFTWARDS ARROW} because of: " + ", ".join(k.replace("_", " ") for k in row["affected_by"]))
    count = f" \N{MULTIPLICATION SIGN} {row['count']}" if row["count"] > 1 else ""
    source = (f"{row['where']}: " if row["where"] else "") + (row["code"] or "")
    texts = [
        (str(row["index"] + 1) + count, None, None),
        (where, None, None),
        (statement(row["code"]), None, source),
        (row["kind"], None, None),
        (row["alias"], None, None),
        (_version_lines(row["versions_lines"], _COLUMNS[5]),
         _UNNOTICED if any(not v["noticed"] for v in row["versions"]) else None, row["versions_text"]),
        ("\n".join(outcome), SEVERITY_COLOURS["error"] if row["outcome"] == "error" or severity == "error" else None,
         row["error"]),
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


def _omitted_row(row: dict[str, Any]) -> str:
    return (f'<TR><TD COLSPAN="{len(_COLUMNS)}" ALIGN="LEFT" BGCOLOR="#ffffff" BORDER="1" SIDES="B" '
            f'COLOR="{_RULE}"><FONT COLOR="#555555"><I>{html_label_text(row["code"])}</I>'
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
