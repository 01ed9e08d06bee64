"""The HTML report: one self-contained page with the findings, the three views, the source and a step-through."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import graphviz

from ..model import Event, EventKind, Trace
from .escape import html_text, quote_id
from ..analysis.names import Namer
from .diagram import scalable_svg
from .memory import memory_digraph, relevant_tensors
from .steps import split_steps
from .timeline import timeline_digraph, timeline_rows

if TYPE_CHECKING:
    from ..analysis.findings import Finding

__all__ = ["report_html"]

_MAX_STEPS = 200  # step-through rows (repeated loop bodies are folded first)
_STATE_TENSORS = 40  # tensors whose versions the step-through follows
_WRITES = (EventKind.INPLACE_WRITE, EventKind.OPTIMIZER_STEP)


def report_html(trace: Trace, findings: Sequence[Finding] = (), *, title: str | None = None) -> str:
    """The whole report as one HTML string: no external CSS, scripts, fonts or images."""
    findings = sorted(findings, key=lambda f: f.sort_key())
    script_name = Path(trace.script).name if trace.script else "traced code"
    title = title or f"gradviz report: {script_name}"
    files = _source_files(trace)
    rows = timeline_rows(trace, findings, max_rows=_MAX_STEPS)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(title)}</title>",
        f"<style>{_asset('report.css')}</style>",
        "</head><body>",
        f"<header><h1>{html_text(title)}</h1>{_summary(trace, findings)}</header>",
        "<main>",
        _findings_section(trace, findings, files),
        _steps_section(trace, findings, rows, files),
        _views_section(trace, findings),
        _source_section(trace, findings, files),
        "</main>",
        f"<script>{_asset('report.js')}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)


# ---------------------------------------------------------------------- pieces
def _asset(name: str) -> str:
    """report.css / report.js, shipped beside this module and inlined so the page needs nothing else."""
    return resources.files("gradviz.render").joinpath(name).read_text(encoding="utf-8")


def _source_files(trace: Trace) -> list[str]:
    """Files whose source the report shows, the script first; their index names the line anchors."""
    files = list(trace.sources)
    if trace.script in files:
        files.remove(trace.script)
        files.insert(0, trace.script)
    return files


def _line_id(files: list[str], file: str | None, line: int | None) -> str | None:
    if file is None or line is None or file not in files:
        return None
    return f"src-{files.index(file)}-{line}"


def _summary(trace: Trace, findings: Sequence[Finding]) -> str:
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.severity.value] = counts.get(f.severity.value, 0) + 1
    found = ", ".join(f"{n} {sev}{'s' if n != 1 else ''}" for sev, n in counts.items()) or "no findings"
    facts = (f"{len(trace.tensors)} tensors, {len(trace.storages)} storages, {len(trace.version_counters)} version "
             f"counters, {len(trace.nodes)} autograd nodes, {len(trace.events)} events")
    lines = [f'<p class="summary"><strong>{html_text(found)}</strong> · {html_text(facts)}'
             + (f" · torch {html_text(trace.torch_version)}" if trace.torch_version else "") + "</p>"]
    if trace.window is not None and trace.window.closed:
        lines.append(f'<p class="window">{html_text(trace.window.describe())}: findings and views cover these</p>')
    unrecorded = trace.internal_error_summary()
    if unrecorded:
        lines.append(f'<p class="internal">{html_text(unrecorded)}</p>')
    if trace.exception is not None:
        exc = trace.exception
        first = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
        where = f" at {trace.where(exc.location.file, exc.location.line)}" if exc.location else ""
        if exc.type in ("SystemExit", "os._exit"):  # an exit, not an error
            how = "sys.exit()" if exc.type == "SystemExit" else "os._exit()"
            lines.append(f'<p class="exception">The program ended by <code>{how}</code>{html_text(where)} with exit '
                         f"status {exc.exit_code}.</p>")
        else:
            lines.append(f'<p class="exception">The program raised <code>{html_text(exc.type)}</code>{html_text(where)}: '
                         f"{html_text(first)}</p>")
    return "".join(lines)


def _findings_section(trace: Trace, findings: Sequence[Finding], files: list[str]) -> str:
    if not findings:
        return '<section id="findings"><h2>Findings</h2><p class="none">No findings.</p></section>'
    items = []
    for f in findings:
        anchor = _line_id(files, f.file, f.line)
        where = html_text(trace.where(f.file, f.line))
        link = f'<a href="#{anchor}">{where}</a>' if anchor else where
        code = f' <code class="code">{html_text(f.code.strip())}</code>' if f.code.strip() else ""
        extra = f" · parameter <code>{html_text(f.parameter)}</code>" if f.parameter else ""
        times = f" · {f.count}×" if getattr(f, "count", 1) > 1 else ""
        items.append(
            f'<li class="finding sev-{f.severity.value}" data-kind="{f.kind.value}">'
            f'<div class="head"><span class="badge">{f.severity.value}</span> '
            f'<span class="kind">{html_text(f.kind.value.replace("_", " "))}</span> · {link}{code}'
            f"{extra}{times}</div>"
            f'<p class="message">{html_text(f.message)}</p>'
            + (f'<p class="fix"><strong>Fix:</strong> {html_text(f.fix)}</p>' if f.fix else "")
            + "</li>"
        )
    return f'<section id="findings"><h2>Findings</h2><ol class="findings">{"".join(items)}</ol></section>'


def _views_section(trace: Trace, findings: Sequence[Finding]) -> str:
    figures = []
    for view, caption in (
        ("graph", "Autograd graph"),
        ("memory", "Memory: storages, tensors and version counters"),
        ("timeline", "Timeline: events in program order"),
    ):
        figures.append(f'<figure class="view" id="view-{view}"><figcaption>{html_text(caption)}</figcaption>'
                       f"{_view_svg(trace, findings, view)}</figure>")
    if trace.nodes:
        from .graph_memory import graph_memory_image, headline

        svg = graph_memory_image(trace, list(findings), "svg").decode("utf-8")
        # the page links to nothing: no RDF metadata namespaces, no url(#clip) references (the chart's limits
        # already hold every point, so clipping changes nothing)
        svg = re.sub(r"<metadata>.*?</metadata>|<clipPath.*?</clipPath>|\s*clip-path=\"url\(#[^)]*\)\"", "", svg, flags=re.S)
        figures.append(
            f'<figure class="view" id="view-graph-memory"><figcaption>Graph memory: {html_text(headline(trace))}'
            f'</figcaption><div class="svg-wrap">{_inline_svg(svg)}</div></figure>'
        )
    return f'<section id="views"><h2>Views</h2>{"".join(figures)}</section>'


def _view_svg(trace: Trace, findings: Sequence[Finding], view: str) -> str:
    source = ""
    try:
        if view == "graph":
            from . import render  # lazily: the graph view may be heavy, and imports this module's package

            diagram = render(trace, "graph", findings=list(findings))
            source = diagram.source
            svg = diagram.svg()
        else:
            digraph = memory_digraph(trace, findings) if view == "memory" else timeline_digraph(trace, findings)
            source = digraph.source
            svg = digraph.pipe(format="svg").decode("utf-8")
    except (graphviz.ExecutableNotFound, RuntimeError) as exc:
        if not _is_missing_dot(exc):
            raise
        return (f'<p class="nodot">{html_text(str(exc) or "Graphviz dot was not found.")}</p>'
                f"<details><summary>DOT source</summary><pre>{html_text(source)}</pre></details>")
    return f'<div class="svg-wrap">{_inline_svg(svg)}</div>'


def _is_missing_dot(exc: BaseException) -> bool:
    return isinstance(exc, graphviz.ExecutableNotFound) or type(exc).__name__ == "GraphvizNotFound"


_PROLOG = re.compile(r"<\?xml.*?\?>|<!DOCTYPE.*?>|<!--.*?-->", re.S)
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')


def _inline_svg(svg: str) -> str:
    """Graphviz's SVG made fit for inlining: no XML prolog, DOCTYPE, comments or namespace URLs."""
    svg = _PROLOG.sub("", scalable_svg(svg))
    head, sep, rest = svg.partition(">")
    return _XMLNS.sub("", head) + sep + rest


def _source_section(trace: Trace, findings: Sequence[Finding], files: list[str]) -> str:
    if not files:
        return '<section id="source"><h2>Source</h2><p class="none">No source was recorded.</p></section>'
    marks: dict[tuple[str, int], tuple[str, list[str]]] = {}
    rank = {"error": 0, "warning": 1, "info": 2}
    for f in findings:
        if f.file is None or f.line is None:
            continue
        sev, notes = marks.get((f.file, f.line), (f.severity.value, []))
        if rank[f.severity.value] < rank[sev]:
            sev = f.severity.value
        notes.append(f"{f.severity.value}: {f.message}")
        marks[(f.file, f.line)] = (sev, notes)
    event_lines = {(e.location.file, e.location.line) for e in trace.events if e.location}
    node_lines = {(n.created.file, n.created.line) for n in trace.nodes.values() if n.created}
    implicated = set(marks) | event_lines | node_lines
    blocks = []
    for index, file in enumerate(files):
        lines = trace.sources[file].splitlines()
        hot = sorted(n for f, n in implicated if f == file)
        library = _is_library(file)
        if not hot and file != trace.script:
            continue  # a file nothing points at: not worth the reader's scrolling
        # a library file: only a few lines around what is implicated, folded away
        keep = {n for h in hot for n in range(h - _CONTEXT, h + _CONTEXT + 1)} if library else None
        out = []
        for number, text in enumerate(lines, start=1):
            if keep is not None and number not in keep:
                if number - 1 in keep:
                    out.append('<span class="ln gap"><span class="no">\N{VERTICAL ELLIPSIS}</span> </span>')
                continue
            classes = ["ln"]
            note = ""
            if (file, number) in marks:
                sev, notes = marks[(file, number)]
                classes.append(f"mark-{sev}")
                note = f' title="{html_text(" | ".join(notes))}"'
            elif (file, number) in event_lines:
                classes.append("mark-event")
            out.append(f'<span class="{" ".join(classes)}" id="src-{index}-{number}" data-line="{number}"{note}>'
                       f'<span class="no">{number}</span>{html_text(text) or " "}</span>')
        # each line is a block-level span, so no newline between them (it would double the spacing)
        shown = f"{trace.file_labels[file]} ({file})" if file in trace.file_labels else file
        code = f'<pre class="source"><code>{"".join(out)}</code></pre>'
        if library:
            summary = f"{shown}: library code, {len(hot)} implicated line{'s' if len(hot) != 1 else ''}"
            blocks.append(f'<details class="library"><summary>{html_text(summary)}</summary>{code}</details>')
        else:
            blocks.append(f'<h3 class="file">{html_text(shown)}</h3>{code}')
    return f'<section id="source"><h2>Source</h2>{"".join(blocks)}</section>'


_CONTEXT = 3  # lines shown either side of an implicated line of library code


def _is_library(file: str) -> bool:
    """Installed packages' code (torch, torchvision): the reader's own files are everything else."""
    parts = Path(file).parts
    return "site-packages" in parts or "dist-packages" in parts


# ---------------------------------------------------------------------- step-through
@dataclass
class _State:
    """What the program's memory looked like between two events (only the tensors the report follows)."""

    seq: int  # events with a smaller seq have happened
    versions: dict[str, int | None] = field(default_factory=dict)
    unnoticed: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # tensor -> (seq, "line 24 via c")
    freed_nodes: set[str] = field(default_factory=set)


def _simulate(trace: Trace, followed: list[str], positions: list[int]) -> dict[int, _State]:
    """The state before event number `p` (an index into trace.events) for every p in positions."""
    namer = Namer(trace)
    followed_set = set(followed)
    counter_of = {tid: trace.tensors[tid].version_counter for tid in followed}
    members: dict[str, list[str]] = {}
    for tid, cid in counter_of.items():
        if cid is not None:
            members.setdefault(cid, []).append(tid)
    # A tensor's record holds its version when first seen, which can be after the call that made it wrote it
    # (nn.Linear's init): the first event naming it knows the version before.
    versions: dict[str, int | None] = {tid: trace.tensors[tid].version for tid in followed}
    first_before: set[str] = set()
    for event in trace.events:
        for change in event.versions:
            if change.tensor in followed_set and change.tensor not in first_before:
                first_before.add(change.tensor)
                if change.before is not None:
                    versions[change.tensor] = change.before
    unnoticed: dict[str, list[tuple[int, str]]] = {}
    freed: set[str] = set()
    wanted = sorted(set(positions))
    states: dict[int, _State] = {}
    events = trace.events
    w = 0
    for index in range(len(events) + 1):
        while w < len(wanted) and wanted[w] == index:
            seq = events[index].seq if index < len(events) else (events[-1].seq + 1 if events else 0)
            states[index] = _State(seq, dict(versions), {k: list(v) for k, v in unnoticed.items()}, set(freed))
            w += 1
        if index == len(events):
            break
        event = events[index]
        via = namer.tensor(event.tensor) if event.tensor in trace.tensors else (event.op or "?")
        line = f"line {event.location.line}" if event.location else "?"
        for change in event.versions:
            tid = change.tensor
            if tid not in followed_set:
                continue
            if change.after is not None:
                for other in members.get(counter_of[tid] or "", [tid]):
                    versions[other] = change.after
            if event.kind in _WRITES and change.before == change.after:
                unnoticed.setdefault(tid, []).append((event.seq, f"{line} via {via}"))
        frees = event.data.get("outcome") == "ok" and not event.data.get("retain_graph")
        if event.kind is EventKind.BACKWARD and frees:
            freed.update(n for n in event.data.get("reached_nodes") or [] if isinstance(n, str))
    return states


def _saved_status(trace: Trace, node_id: str, tid: str, saved_version: int | None, state: _State) -> tuple[str, str]:
    """(css class, words) for one saved tensor in one state."""
    node = trace.nodes[node_id]
    if node.seq >= state.seq:
        return "future", "not saved yet"
    if node_id in state.freed_nodes:
        return "freed", "freed by backward"
    now = state.versions.get(tid)
    if saved_version is not None and now is not None and now != saved_version:
        return "poisoned", f"poisoned: saved at v{saved_version}, now v{now} (backward raises)"
    later = [what for seq, what in state.unnoticed.get(tid, []) if seq > node.seq]
    if later:
        return "silent", f"bytes changed ({later[-1]}), version still v{saved_version}: wrong gradients"
    return "intact", f"intact at v{saved_version}"


def _steps_section(trace: Trace, findings: Sequence[Finding], rows: list[dict[str, Any]], files: list[str]) -> str:
    if not rows:
        return ('<section id="steps" data-step="0" data-steps="0"><h2>Step through the events</h2>'
                '<p class="none">The program made no aliases, in-place writes or backward calls.</p></section>')
    position = {e.seq: i for i, e in enumerate(trace.events)}
    events_by_seq = {e.seq: e for e in trace.events}
    spans = []
    for row in rows:
        indices = [position[s] for s in row["seqs"] if s in position] or [0]
        # a folded loop row shows its first occurrence (the versions in the row are that one's); an omitted
        # stretch shows the state across all of it
        spans.append((min(indices), max(indices) + 1) if row["kind"] == "omitted" else (indices[0], indices[0] + 1))
    touched_by_row = [_touched(trace, row, events_by_seq) for row in rows]
    namer = Namer(trace)
    followed, _ = relevant_tensors(trace, findings, max_tensors=_STATE_TENSORS)
    followed += [tid for tid in dict.fromkeys(t for touched in touched_by_row for t in touched) if tid not in followed]
    states = _simulate(trace, followed, [p for span in spans for p in span])
    followed_set = set(followed)
    saved = [(n.id, s.name, s.tensor, s.saved_version) for n in trace.nodes.values() for s in n.saved
             if s.tensor in followed_set]
    by_storage: dict[str | None, list[str]] = {}
    for tid in followed:
        by_storage.setdefault(trace.tensors[tid].storage, []).append(tid)

    panels = []
    for number, (row, (start, stop), touched) in enumerate(zip(rows, spans, touched_by_row), start=1):
        before, after = states[start], states[stop]
        panels.append(_step_panel(trace, row, number, len(rows), before, after, followed, by_storage, saved, files,
                                  touched, namer))
    controls = ('<div class="controls"><button type="button" id="step-prev" aria-label="previous event">'
                "\N{LEFTWARDS ARROW} prev</button>"
                f'<span id="step-counter">1 / {len(rows)}</span>'
                '<button type="button" id="step-next" aria-label="next event">next \N{RIGHTWARDS ARROW}</button>'
                '<span class="hint">or use the \N{LEFTWARDS ARROW} \N{RIGHTWARDS ARROW} keys</span></div>')
    start = _first_step_row(trace, rows)
    controls = controls.replace(f">1 / {len(rows)}<", f">{start} / {len(rows)}<")
    if start != 1:  # without scripts the page shows the start panel too
        panels = [p.replace(" hidden>", ">", 1) if i == start - 1 else
                  (p if i != 0 else _hide(p)) for i, p in enumerate(panels)]
    return (f'<section id="steps" data-step="{start}" data-start="{start}" data-steps="{len(rows)}">'
            f"<h2>Step through the events</h2>{controls}{''.join(panels)}</section>")


def _hide(panel: str) -> str:
    head, sep, rest = panel.partition(">")
    return f"{head} hidden{sep}{rest}"


def _first_step_row(trace: Trace, rows: list[dict[str, Any]]) -> int:
    """The row (1-based) of the first event of the first training step: what a person wants to see first, rather
    than the in-place writes of parameter initialisation."""
    steps = split_steps(trace)
    if not steps:
        return 1
    begins = min(trace.nodes[n].seq for n in steps[0].nodes)
    for number, row in enumerate(rows, start=1):
        if any(seq >= begins for seq in row["seqs"]):
            return number
    return 1


def _touched(trace: Trace, row: dict[str, Any], events_by_seq: dict[int, Event]) -> list[str]:
    """Tensors the (first) event of a row names: written, aliased, or aliases."""
    touched = [v["tensor"] for v in row["versions"]]
    event = events_by_seq.get(row["seq"])
    if event is not None and row["kind"] != "omitted":
        touched += [tid for tid in (event.tensor, event.result) if tid]
    return [tid for tid in dict.fromkeys(touched) if tid in trace.tensors]


def _step_panel(
    trace: Trace,
    row: dict[str, Any],
    number: int,
    total: int,
    before: _State,
    after: _State,
    followed: list[str],
    by_storage: dict[str | None, list[str]],
    saved: list[tuple[str, str, str, int | None]],
    files: list[str],
    touched: list[str],
    namer: Namer,
) -> str:
    shown: list[str] = []
    for tid in touched:
        if tid in trace.tensors:
            for other in by_storage.get(trace.tensors[tid].storage, [tid]):
                if other not in shown:
                    shown.append(other)
    if len(followed) <= 12:
        shown += [tid for tid in followed if tid not in shown]
    shown = [tid for tid in shown if tid in trace.tensors and trace.tensors[tid].seq <= after.seq][:_STATE_TENSORS]
    written = {v["tensor"] for v in row["versions"]} if row["kind"] in ("inplace_write", "optimizer_step") else set()

    state_rows = []
    for tid in shown:
        t = trace.tensors[tid]
        v0, v1 = before.versions.get(tid), after.versions.get(tid)
        exists = t.seq < before.seq
        classes = []
        note = ""
        if v0 != v1 and exists:
            classes.append("changed")
        if tid in written:
            classes.append("written")
            note = "bytes written, version moved" if v0 != v1 else "bytes written, version NOT moved"
        elif not exists:
            note = "appears here"
        state_rows.append(
            f'<tr class="{" ".join(classes)}"><td>{html_text(namer.tensor(tid))}</td>'
            f'<td>{html_text(namer.storage(t.storage) if t.storage else "-")}</td>'
            f"<td>{html_text(namer.counter(t.version_counter) if t.version_counter else '-')}</td><td>{_v(v0) if exists else '-'}</td><td>{_v(v1)}</td>"
            f"<td>{html_text(note)}</td></tr>"
        )
    saved_rows = []
    shown_set = set(shown)
    for node_id, name, tid, version in saved:
        status0 = _saved_status(trace, node_id, tid, version, before)
        status1 = _saved_status(trace, node_id, tid, version, after)
        unchanged = status0 == status1
        if status1[0] == "future" or (unchanged and (status1[0] == "freed" or tid not in shown_set)):
            continue
        changed = " changed" if status0 != status1 else ""
        saved_rows.append(
            f'<tr class="saved-{status1[0]}{changed}"><td>{html_text(trace.nodes[node_id].name)}</td>'
            f"<td>{html_text(name)}</td><td>{html_text(namer.tensor(tid))}</td>"
            f"<td>{html_text(status0[1])}</td><td>{html_text(status1[1])}</td></tr>"
        )
        if len(saved_rows) >= 20:
            break

    # names of the SVG nodes to outline for this step (titles in the views' SVG are their node names)
    hits = {f"row_{row['index']}", f"write_{row['seq']}"}
    for tid in touched:
        hits.update({quote_id(f"tensor_{tid}"), quote_id(tid)})
        storage = trace.tensors[tid].storage if tid in trace.tensors else None
        if storage and tid in written:
            hits.add(quote_id(f"storage_{storage}"))
    # in the graph view: the node that saved a touched tensor and its saved-tensor box (`n0_s_result`)
    for node_id, name, tid, _ in saved:
        if tid in touched:
            hits.update({quote_id(node_id), quote_id(f"{node_id}_s_{name}")})
    line_id = _line_id(files, row["file"], row["line"])
    severity = f' sev-{row["severity"]}' if row["severity"] else ""
    count = f" \N{MULTIPLICATION SIGN} {row['count']}" if row["count"] > 1 else ""
    outcome = row["error"] or row["outcome"] or ""
    findings = ", ".join(k.replace("_", " ") for k in row["findings"])
    affected = ", ".join(k.replace("_", " ") for k in row.get("affected_by", []))
    where = html_text(trace.where(row["file"], row["line"]) if row["file"] else "")
    after_note = f" (the first of {row['count']} times)" if row["count"] > 1 and row["kind"] != "omitted" else ""
    state_table = (
        '<table class="state"><thead><tr><th>tensor</th><th>storage</th><th>version counter</th>'
        f"<th>version before</th><th>version after{html_text(after_note)}</th><th></th></tr></thead>"
        f"<tbody>{''.join(state_rows)}</tbody></table>"
        if state_rows else '<p class="none">No followed tensor is involved in this event.</p>'
    )
    saved_table = (
        '<table class="saved"><thead><tr><th>autograd node</th><th>saved</th><th>tensor</th><th>before</th>'
        f"<th>after</th></tr></thead><tbody>{''.join(saved_rows)}</tbody></table>" if saved_rows else ""
    )
    return (
        f'<div class="step{severity}" id="step-{number}" data-index="{number}"'
        f' data-hits="{html_text(" ".join(sorted(hits)))}"'
        f' data-src="{line_id or ""}"{"" if number == 1 else " hidden"}>'
        f'<div class="event"><span class="stepno">Step {number} of {total}{html_text(count)}</span> '
        f'<span class="where">{where}</span> <code class="code">{html_text(row["code"])}</code> '
        f'<span class="ekind">{html_text(row["kind"])}</span>'
        + (f' <code class="alias">{html_text(row["alias"])}</code>' if row["alias"] else "")
        + (f'<div class="versions">{html_text(row["versions_text"])}</div>' if row["versions_text"] else "")
        + (f'<div class="outcome">{html_text(outcome)}</div>' if outcome else "")
        + (f'<div class="causes">finding: {html_text(findings)}</div>' if findings else "")
        + (f'<div class="affected">\N{LEFTWARDS ARROW} because of the earlier {html_text(affected)}</div>'
           if affected else "")
        + f"</div><h4>Tensors before \N{RIGHTWARDS ARROW} after this step</h4>{state_table}"
        + (f"<h4>Saved tensors before \N{RIGHTWARDS ARROW} after</h4>{saved_table}" if saved_table else "")
        + "</div>"
    )


def _v(version: int | None) -> str:
    return "-" if version is None else f"v{version}"

