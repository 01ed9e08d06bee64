"""The memory view: storages, the tensors living in them, their version counters, and what each write did."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import graphviz

from ..analysis.findings import version_text
from ..analysis.initialisation import initialisation_writes, setup_events
from ..analysis.names import Namer, statement
from ..model import Event, EventKind, OpRecord, Trace, VersionChange
from .escape import FONT, html_label_text, plain_label, quote_id, shorten
from .palette import PALETTE
from .per_step import Repeat, fold_repeats, per_step_repeats, steps_text
from .steps import Step, split_steps

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from .picture import Picture

__all__ = [
    "FINDING_COLOURS",
    "alias_text",
    "change_text",
    "code_text",
    "memory_digraph",
    "producers",
    "relevant_tensors",
]

#: Outline colour of a tensor or storage a finding is about: the graph view's colours for the same findings.
_FINDING_MARKS = {  # finding kind -> its mark in the palette
    "poisoned_saved_tensor": "poisoned",  # red: backward raises
    "detach_inplace_saved": "detached_saved",
    "silently_corrupted_saved_tensor": "corrupted",  # magenta: backward succeeds with wrong gradients
    "update_without_gradient": "updated",
    "dead_parameter": "dead",
    "cut_edge": "cut",
}
FINDING_COLOURS: dict[str, str] = {
    kind: PALETTE[mark].line or PALETTE[mark].colour for kind, mark in _FINDING_MARKS.items()
}
#: Light fill behind a tensor drawn in one of the colours above.
_FINDING_FILLS = {PALETTE[mark].line or PALETTE[mark].colour: PALETTE[mark].tint or PALETTE[mark].colour
                  for mark in _FINDING_MARKS.values()}
SAVED_COLOUR = "#f5a623"  # orange, as the graph view draws saved tensors
WRITE_COLOUR = "#555555"
SAVED_TEXT = PALETTE["saved"].line or PALETTE["saved"].colour  # "saved by ..." lines
SILENT = PALETTE["silent"].colour  # a write the version counter did not notice
_FONT = FONT
_MONO = "Courier"

# Events whose `versions` list tensors whose bytes were written.
_WRITES = (EventKind.INPLACE_WRITE, EventKind.OPTIMIZER_STEP)


def memory_digraph(
    trace: Trace,
    findings: Sequence[Finding] = (),
    *,
    show_all: bool = False,
    max_tensors: int | None = 60,
    max_writes: int = 40,
    rankdir: str = "LR",
    picture: Picture | None = None,
) -> graphviz.Digraph:
    """Storages as boxes, tensors pointing at the byte range they use and at their version counter, writes.

    By default only tensors that share a storage with another tensor, or that events, findings or saved tensors
    mention, are drawn; `show_all=True` draws every tensor. `max_tensors` bounds the drawing (findings first),
    and a note says how many were left out.
    """
    ranked = _ranked(trace, findings, show_all=show_all)
    grouped, keep = (set(), set()) if show_all else _grouped_activations(trace, findings)
    summarised: list[str] = []
    # an alias made at one line in every step (and what it aliases): one drawn for all, titled ×N (steps ...)
    aliases = any(t.origin in ("data", "detach") for t in trace.tensors.values())
    steps = None
    if not show_all and (keep or aliases):  # once, for repeats and the table
        steps = picture.steps if picture is not None else split_steps(trace)
    repeats = per_step_repeats(trace, findings, steps) if steps and aliases else []
    folded, marks = fold_repeats(trace, findings, repeats)
    tabled_aliases: list[str] = []
    tabled_buffers: list[str] = []
    if keep:  # a training script: the model, the findings and the aliases; the step's activations as one table
        summarised = _summarised_parameters(trace, findings)
        in_table = set(summarised)
        # a parameter updated through `.data` with no finding involved: its aliases (and views) are the table's row
        table_storages = {trace.tensors[tid].storage for tid in in_table} - {None}
        named = {tid for f in findings for tid in f.tensors}
        tabled_aliases = [t.id for t in trace.tensors.values()
                          if t.storage in table_storages and t.id not in in_table and t.id not in named
                          and t.origin in ("data", "detach")]
        buffers = _buffers(trace, findings)
        buffer_storages = {trace.tensors[tid].storage for tid in buffers} - {None}
        tabled_buffers = [t.id for t in trace.tensors.values() if t.storage in buffer_storages and t.id not in named]
        ranked = [tid for tid in ranked if tid in keep and tid not in in_table
                  and (trace.tensors[tid].storage not in table_storages or tid in named)
                  and (trace.tensors[tid].storage not in buffer_storages or tid in named)]
        repeats = [r for r in repeats if not set(r.members) <= set(tabled_aliases)]
    unfolded = [tid for tid in ranked if tid not in folded]
    folded_count, ranked = len(ranked) - len(unfolded), unfolded
    tensor_ids = _bounded(trace, ranked, max_tensors)
    over_limit = len(ranked) - len(tensor_ids)
    uninvolved = (len(trace.tensors) - len(ranked) - len(summarised) - folded_count - len(tabled_aliases)
                  - len(set(tabled_buffers) - set(tabled_aliases)))
    shown = set(tensor_ids)
    hot_tensor, hot_event = _finding_colours(findings)
    saved_by = _saved_by(trace, shown)
    namer = picture.namer if picture is not None else Namer(trace)

    dot = graphviz.Digraph("memory")
    dot.attr("graph", rankdir=rankdir, fontname=_FONT, fontsize="10", nodesep="0.2", ranksep="0.6")
    dot.attr("node", fontname=_FONT, fontsize="10", shape="plaintext")
    dot.attr("edge", fontname=_FONT, fontsize="9", color="#444444")

    storages: list[str] = []
    counters: list[str] = []
    for tid in tensor_ids:
        t = trace.tensors[tid]
        if t.storage is not None and t.storage not in storages:
            storages.append(t.storage)
        if t.version_counter is not None and t.version_counter not in counters:
            counters.append(t.version_counter)
    hot_storage: dict[str, str] = {}
    for tid in tensor_ids:
        storage = trace.tensors[tid].storage
        if tid in hot_tensor and storage is not None:
            hot_storage.setdefault(storage, hot_tensor[tid])

    histories = _counter_histories(trace, set(counters))
    users: dict[str, list[str]] = {}
    wanted = set(storages)
    for t in trace.tensors.values():
        if t.storage in wanted:
            users.setdefault(t.storage, []).append(t.id)

    # Columns, left to right: tensors | version counters | storages | writes. Keeping each kind on its own
    # rank makes "same storage, different counter" readable at a glance.
    with dot.subgraph(name="tensors") as column:
        column.attr(rank="same")
        for tid in tensor_ids:
            label = _tensor_label(trace, tid, hot_tensor.get(tid), saved_by.get(tid, []), namer, marks.get(tid))
            column.node(_tensor_node(tid), label)
    with dot.subgraph(name="counters") as column:
        column.attr(rank="same")
        for cid in counters:
            column.node(_counter_node(cid), _counter_label(trace, cid, histories.get(cid, ([], [], [])), namer))
    with dot.subgraph(name="storages") as column:
        column.attr(rank="same")
        for sid in storages:
            column.node(_storage_node(sid), _storage_label(trace, sid, hot_storage.get(sid), users.get(sid, []), namer))

    for tid in tensor_ids:
        t = trace.tensors[tid]
        colour = hot_tensor.get(tid, "#444444")
        if t.version_counter is not None:
            dot.edge(_tensor_node(tid), _counter_node(t.version_counter), style="dashed", color=colour,
                     arrowhead="odot", tooltip="uses this version counter")
        if t.storage is not None:
            # minlen=2 keeps storages one column further right than the counters
            dot.edge(_tensor_node(tid), _storage_node(t.storage), label=plain_label(_range_text(t.byte_range)),
                     color=colour, minlen="2", penwidth="1.6" if tid in hot_tensor else "1")

    writes = [e for e in trace.events if e.kind in _WRITES and any(v.tensor in shown for v in e.written())]
    if keep:  # initialising the model is setup, not the story: the counters still list those writes
        initial = initialisation_writes(trace)
        writes = [e for e in writes if e.seq not in initial or e.seq in hot_event]
    if keep:  # every optimizer step reads alike: the last one, and any a finding points at (counters show the rest)
        steps_seen = [e for e in writes if e.kind is EventKind.OPTIMIZER_STEP]
        last = {e.seq for e in steps_seen[-1:]}
        writes = [e for e in writes if e.kind is not EventKind.OPTIMIZER_STEP or e.seq in last or e.seq in hot_event]
    writes, times = _fold_writes(writes, hot_event, shown)
    drawn_writes = _bound_writes(writes, hot_event, max_writes)
    for event in drawn_writes:
        colour = hot_event.get(event.seq, WRITE_COLOUR)
        name = _write_node(event.seq)
        dot.node(name, _write_label(trace, event, colour, shown, namer, times=times.get(event.seq, 1)))
        for sid in _written_storages(trace, event):
            if sid in storages:
                dot.edge(_storage_node(sid), name, dir="back", color=colour, arrowtail="normal",
                         label="written" if event.kind is EventKind.INPLACE_WRITE else "updated",
                         penwidth="1.6" if event.seq in hot_event else "1")

    notes = []
    if over_limit:
        notes.append(f"\N{HORIZONTAL ELLIPSIS} {over_limit} other tensor{'s' if over_limit != 1 else ''} not shown "
                     f"(limit of {max_tensors}: max_tensors)")
    pipeline = data_pipeline(trace) - shown if not show_all else set()
    activations = _activation_table(trace, steps) if grouped else None
    if activations is None:
        notes.extend(saved_by_module(trace, steps=steps))
    if pipeline:
        size = sum(span[1] - span[0] for t in pipeline if (span := trace.tensors[t].byte_range) is not None)
        notes.append(f"data pipeline: {len(pipeline)} tensor{'s' if len(pipeline) != 1 else ''} without gradients "
                     f"(inputs, targets, transforms; {_bytes(size)}) not shown (--show-all draws them)")
    uninvolved -= len(pipeline)
    if activations is not None and uninvolved > 0:
        # a training script: the rest is every step's activations (the last step's in the table), views, results
        notes.append(f"\N{HORIZONTAL ELLIPSIS} {uninvolved} other tensor{'s' if uninvolved != 1 else ''} (every "
                     "step's activations, views, results) not drawn one by one (--show-all draws them)")
        uninvolved = 0
    if uninvolved > 0:
        notes.append(f"\N{HORIZONTAL ELLIPSIS} {uninvolved} other tensor{'s' if uninvolved != 1 else ''} not shown "
                     "(no alias, event, finding or saved use; --show-all draws them)")
    if len(writes) > len(drawn_writes):
        notes.append(f"\N{HORIZONTAL ELLIPSIS} {len(writes) - len(drawn_writes)} other writes not shown")
    if not tensor_ids and _nothing_to_draw(trace):
        notes.insert(0, "no tensor shares memory, is written, or is saved for backward")
    if tabled_aliases:
        notes.extend(_tabled_alias_notes(trace, tabled_aliases))
    if tabled_buffers:
        notes.append(_buffer_note(trace, tabled_buffers))
    notes.extend(_repeat_notes(repeats, namer))
    if summarised:
        dot.node("parameters", _parameter_table(trace, summarised, namer, findings), shape="plaintext")
    if activations is not None:
        dot.node("activations", activations, shape="plaintext")
    with dot.subgraph(name="cluster_legend") as legend:
        legend.attr(label="legend", style="rounded", color="gray60", fontsize="10")
        legend.node("legend", _legend(set(hot_tensor.values()), any(saved_by.values()), bool(drawn_writes)))
        if notes:
            text = html_label_text(chr(10).join(notes))  # one cell, its lines left-aligned
            legend.node("summary", f'<<TABLE BORDER="0" CELLPADDING="0"><TR><TD ALIGN="LEFT" BALIGN="LEFT">{text}'
                        "</TD></TR></TABLE>>", shape="note", fontcolor="#555555", color="#bbbbbb")
    return dot


# ---------------------------------------------------------------------- notes and folded writes
def _nothing_to_draw(trace: Trace) -> bool:
    """True when no two tensors share a storage, nothing was written and autograd saved nothing: the only case in
    which the view may say so."""
    storages: set[str] = set()
    for t in trace.tensors.values():
        if t.storage is not None:
            if t.storage in storages:
                return False
            storages.add(t.storage)
    if any(e.kind in _WRITES and e.written() for e in trace.events):
        return False
    return not any(s.tensor for n in trace.nodes.values() for s in n.saved)


def _repeat_notes(repeats: Sequence[Repeat], namer: Namer) -> list[str]:
    """One note line per (line, kind) of alias made again in every step, however many tensors it aliased."""
    by_place: dict[tuple[int | None, str], list[Repeat]] = {}
    for repeat in repeats:
        by_place.setdefault((repeat.line, repeat.kind), []).append(repeat)
    notes = []
    for (line, kind), group in by_place.items():
        first = group[0]
        if len(group) == 1:
            made = namer.alias(first.drawn[-1])
            drawn = "drawn once, titled " + first.title() if len(first.drawn) == 1 else \
                f"the {len(first.drawn)} a finding names are drawn"
            notes.append(f"{made} at line {line}: made {first.count} times ({first.span()}), {drawn}")
            continue
        total = sum(r.count for r in group)
        call = ".data" if kind == "data" else ".detach()"
        inside = sorted({s for r in group for s in r.steps if s <= (r.last_step or s)})
        notes.append(f"`{call}` at line {line}: {len(group)} tensors aliased, {total} aliases in all (steps "
                     f"{steps_text(inside)}), each drawn once, titled \N{MULTIPLICATION SIGN}N")
    return notes


def _buffers(trace: Trace, findings: Sequence[Finding]) -> set[str]:
    """Module buffers (a BatchNorm's running_mean/var, num_batches_tracked): tensors without gradients filled while
    the model was built (at a line that initialised parameters, before any graph) that no finding names. The forward
    updates them in place every step; they are summed up in one note, not drawn one by one."""
    named = {tid for f in findings for tid in f.tensors}
    setup = setup_events(trace)
    out = set()
    for e in trace.events:
        if e.seq in setup and e.kind is EventKind.INPLACE_WRITE:
            for v in e.versions:
                t = trace.tensors.get(v.tensor)
                if t is not None and t.parameter is None and t.origin != "parameter" and not t.requires_grad:
                    out.add(t.id)
    return out - named


def _buffer_note(trace: Trace, members: Sequence[str]) -> str:
    """One line for the buffers and their aliases: how many, their bytes, how often the program wrote them."""
    own = [tid for tid in members if trace.tensors[tid].origin not in ("data", "detach", "view")]
    wanted = set(members)
    writes = sum(1 for e in trace.events if e.kind is EventKind.INPLACE_WRITE and any(v.tensor in wanted for v in e.versions))
    size = sum(_nbytes(trace, tid) for tid in own)
    aliases = len(members) - len(own)
    return (f"buffers: {len(own)} tensor{'s' if len(own) != 1 else ''} without gradients filled as the modules were "
            f"built (running statistics, counters; {_bytes(size)}), written {writes} times in all"
            f"{f', {aliases} aliases or views of them' if aliases else ''}: not drawn one by one (--show-all draws them)")


def _tabled_alias_notes(trace: Trace, aliases: Sequence[str]) -> list[str]:
    """The `.data` / `.detach()` aliases of parameters summed up in the parameter table: one line per (line, kind)."""
    by_place: dict[tuple[int | None, str], list[str]] = {}
    for tid in aliases:
        t = trace.tensors[tid]
        by_place.setdefault((t.created.line if t.created else None, t.origin), []).append(tid)
    notes = []
    for (line, origin), members in by_place.items():
        call = ".data" if origin == "data" else ".detach()"
        sources = {trace.tensors[tid].source for tid in members}
        where = f" at line {line}" if line is not None else ""
        through = any(e.kind is EventKind.INPLACE_WRITE and e.tensor in members for e in trace.events)
        notes.append(f"`{call}`{where}: {len(members)} alias{'es' if len(members) != 1 else ''} of {len(sources)} "
                     f"parameter{'s' if len(sources) != 1 else ''}"
                     f"{', written through' if through else ', not used again'}, no finding involved: "
                     "in the parameter table, not drawn one by one")
    return notes


def _fold_writes(
    writes: Sequence[Event], hot_event: dict[int, str], shown: set[str]
) -> tuple[list[Event], dict[int, int]]:
    """Writes at one line to the same drawn tensors (a loop's `param.data.add_(...)` every step) as one: the last,
    with how many times. A write a finding points at stays its own box."""
    groups: dict[tuple[object, ...], list[Event]] = {}
    order: list[tuple[object, ...]] = []
    for e in writes:
        targets = tuple(sorted(v.tensor for v in e.written() if v.tensor in shown))
        loc = (e.location.file, e.location.line) if e.location else (None, None)
        key: tuple[object, ...] = ("finding", e.seq) if e.seq in hot_event else (e.kind, *loc, e.op, targets)
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(e)
    folded = [groups[key][-1] for key in order]
    return sorted(folded, key=lambda e: e.seq), {groups[key][-1].seq: len(groups[key]) for key in order}


# ---------------------------------------------------------------------- which tensors to draw
def relevant_tensors(
    trace: Trace, findings: Sequence[Finding] = (), *, show_all: bool = False, max_tensors: int | None = 60
) -> tuple[list[str], int]:
    """The tensor ids the memory view draws, in creation order, and how many tensors it leaves out.

    Involved tensors come first (findings, events behind findings, aliases sharing a storage, other events, saved
    tensors); `max_tensors` keeps the most involved ones.
    """
    ids = _bounded(trace, _ranked(trace, findings, show_all=show_all), max_tensors)
    return ids, len(trace.tensors) - len(ids)


def _ranked(trace: Trace, findings: Sequence[Finding], *, show_all: bool) -> list[str]:
    # findings first, then the model (parameters, the activations autograd saved, newest step first), then
    # aliases and writes; the data pipeline (inputs and their transforms) only with show_all
    tiers: list[list[str]] = [[], [], [], [], [], [], []]
    for f in findings:
        tiers[0].extend(f.tensors)
    finding_events = {seq for f in findings for seq in f.events}
    by_storage: dict[str, list[str]] = {}
    for t in trace.tensors.values():
        if t.storage is not None:
            by_storage.setdefault(t.storage, []).append(t.id)
    pipeline = data_pipeline(trace, by_storage)
    for e in trace.events:
        involved = [tid for tid in (e.tensor, e.result) if tid] + [v.tensor for v in e.versions]
        tiers[1 if e.seq in finding_events else 5].extend(involved)
    tiers[2].extend(t.id for t in trace.tensors.values() if t.parameter is not None or t.origin == "parameter")
    for node in sorted(trace.nodes.values(), key=lambda n: -n.seq):
        tiers[3].extend(s.tensor for s in node.saved if s.tensor)
    for t in trace.tensors.values():
        if t.storage is not None and len(by_storage[t.storage]) > 1:
            tiers[4].append(t.id)
    if show_all:
        tiers.append(list(trace.tensors))
    chosen: dict[str, None] = {}
    for number, tier in enumerate(tiers):
        for tid in tier:
            if tid in trace.tensors and (show_all or number < 2 or tid not in pipeline):
                chosen.setdefault(tid, None)
    return list(chosen)


def data_pipeline(trace: Trace, by_storage: dict[str, list[str]] | None = None) -> set[str]:
    """Tensors of the data pipeline: no gradient anywhere near them (not one of them, nor anything sharing their
    memory, requires grad), not saved for backward, not a parameter."""
    if by_storage is None:
        by_storage = {}
        for t in trace.tensors.values():
            if t.storage is not None:
                by_storage.setdefault(t.storage, []).append(t.id)
    if not any(t.parameter is not None for t in trace.tensors.values()):
        return set()  # not a model's training: every tensor may be the story (the document's examples)
    saved = {s.tensor for n in trace.nodes.values() for s in n.saved if s.tensor}
    grad_storages = {t.storage for t in trace.tensors.values() if t.requires_grad and t.storage is not None}
    return {
        t.id for t in trace.tensors.values()
        if not t.requires_grad and t.parameter is None and t.id not in saved and t.storage not in grad_storages
        and t.origin not in ("data", "detach")
    }


def _bounded(trace: Trace, ranked: list[str], max_tensors: int | None) -> list[str]:
    ids = ranked if max_tensors is None else ranked[:max_tensors]
    return sorted(ids, key=lambda tid: (trace.tensors[tid].seq, _id_number(tid)))


def _id_number(identifier: str) -> int:
    digits = "".join(ch for ch in identifier if ch.isdigit())
    return int(digits) if digits else 0


def _finding_colours(findings: Iterable[Finding]) -> tuple[dict[str, str], dict[int, str]]:
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


def _saved_by(trace: Trace, shown: set[str]) -> dict[str, list[str]]:
    """Tensor id -> lines like "saved by TanhBackward0 (result) at v0"."""
    out: dict[str, list[str]] = {}
    for node in trace.nodes.values():
        for saved in node.saved:
            if saved.tensor in shown:
                version = version_text(saved.saved_version)
                out.setdefault(saved.tensor, []).append(f"saved by {node.name} ({saved.name}) at {version}")
    return out


def _bound_writes(writes: list[Event], hot_event: dict[int, str], limit: int) -> list[Event]:
    if len(writes) <= limit:
        return writes
    keep = {e.seq for e in writes if e.seq in hot_event}
    for e in writes:
        if len(keep) >= limit:
            break
        keep.add(e.seq)
    return [e for e in writes if e.seq in keep]


_FINDING_WORDS = {
    FINDING_COLOURS["poisoned_saved_tensor"]: "finding: saved tensor written in place (backward raises)",
    FINDING_COLOURS["silently_corrupted_saved_tensor"]:
        "finding: saved tensor's bytes changed, version did not move (gradients silently wrong)",
    FINDING_COLOURS["update_without_gradient"]: "finding: parameter updated without a gradient",
    FINDING_COLOURS["dead_parameter"]: "finding: parameter that never gets a gradient",
    FINDING_COLOURS["cut_edge"]: "finding: gradient path cut here",
}


def _legend(colours: set[str], saved: bool, writes: bool) -> str:
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


def _written_storages(trace: Trace, event: Event) -> list[str]:
    storage = event.data.get("storage")
    if isinstance(storage, str):
        return [storage]
    out: list[str] = []
    for v in event.written():
        sid = trace.tensors[v.tensor].storage
        if sid is not None and sid not in out:
            out.append(sid)
    return out


# ---------------------------------------------------------------------- text shared with the other views
def alias_text(trace: Trace, tensor_id: str | None, namer: Namer | None = None) -> str:
    """How an alias was made, in the user's words: "c = out.data", "d = out.detach()"; else its name."""
    if tensor_id is None or tensor_id not in trace.tensors:
        return ""
    return (namer or Namer(trace)).alias(tensor_id)


def producers(trace: Trace) -> dict[str, OpRecord]:
    """Tensor id -> the call that produced it (the first one listing it as an output but not as an input)."""
    return Namer(trace).producers


def change_text(trace: Trace, change: VersionChange, *, write: bool = True, label: str | None = None) -> str:
    """ "c: v0 → v1", or "out: v0 → v0 (not noticed)" when a write changed the bytes but not the version.

    `write`: the change is one the event wrote bytes for (`Event.written`), not a tensor it merely looked at."""
    if label is None:
        label = Namer(trace).tensor(change.tensor)
    before = version_text(change.before)
    after = version_text(change.after)
    text = f"{label}: {before} \N{RIGHTWARDS ARROW} {after}"
    if write and change.before == change.after and change.before is not None:
        text += " (not noticed)"
    return text


def code_text(line: str) -> str:
    """A source line without its indentation and trailing comment (tokenised, so `#` inside strings stays)."""
    return statement(line)


# ---------------------------------------------------------------------- labels
def _tensor_node(tid: str) -> str:
    return quote_id(f"tensor_{tid}")


def _storage_node(sid: str) -> str:
    return quote_id(f"storage_{sid}")


def _counter_node(cid: str) -> str:
    return quote_id(f"counter_{cid}")


def _write_node(seq: int) -> str:
    return f"write_{seq}"


def _range_text(byte_range: tuple[int, int] | list[int] | None) -> str:
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


def _tensor_label(
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


def _storage_label(trace: Trace, sid: str, colour: str | None, users: list[str], namer: Namer) -> str:
    """`users`: the tensors living in this storage, in creation order."""
    s = trace.storages[sid]
    rows = [
        _cell(shorten(namer.storage(sid), 48), bold=True),
        _cell(f"{s.nbytes} bytes \N{MIDDLE DOT} {s.dtype} \N{MIDDLE DOT} {s.device}"),
    ]
    if len(users) > 1:
        rows.append(_cell(shorten(f"shared by {namer.tensors(users)}", 60), colour="#555555", size=9))
    return _table(rows, colour or "#333333", fill="#f2f2f2", width=3 if colour else 2)


def _counter_label(
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


def _counter_histories(
    trace: Trace, counters: set[str]
) -> dict[str, _History]:
    """Counter id -> ((new version, line) for every event that moved it, lines of writes to its tensors' bytes
    that left it where it was: writes through an alias with its own counter), in one pass over the events."""
    counter_of = {t.id: t.version_counter for t in trace.tensors.values() if t.version_counter in counters}
    out: dict[str, _History] = {}
    for e in trace.events:
        if e.kind not in _WRITES:
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


def _write_label(
    trace: Trace, event: Event, colour: str, shown: set[str], namer: Namer, *, times: int = 1
) -> str:
    where = f"line {event.location.line}: " if event.location else ""
    code = code_text(event.location.code) if event.location and event.location.code else (event.op or "")
    if event.kind is EventKind.OPTIMIZER_STEP:
        code = f"{event.data.get('optimizer', 'optimizer')}.step()" + (f"  ({code})" if code else "")
    rows = [_cell(shorten(where + code, 50), bold=True, colour=colour if colour != WRITE_COLOUR else None)]
    if times > 1:
        rows.append(_cell(f"\N{MULTIPLICATION SIGN}{times} (the last drawn; every write here alike)", size=9))
    changes = [v for v in event.written() if v.tensor in shown]
    for v in changes[:6]:
        hidden = v.before == v.after
        text = change_text(trace, v, label=namer.tensor(v.tensor))
        rows.append(_cell(text, mono=True, size=9, colour=SILENT if hidden else None))
    if len(changes) > 6:
        rows.append(_cell(f"\N{HORIZONTAL ELLIPSIS} {len(changes) - 6} more tensors", size=9))
    return _table(rows, colour, fill="#ffffff", width=2 if colour != WRITE_COLOUR else 1)


def _bytes(n: int) -> str:
    """1,536 bytes as `1.5 KiB`: sizes a person reads at a glance."""
    if n < 1024:
        return f"{n:,} bytes"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _grouped_activations(trace: Trace, findings: Sequence[Finding]) -> tuple[set[str], set[str]]:
    """In a training script, the activations autograd saved that no finding, alias or write of a parameter
    involves: drawn as one table by module and line (`_activation_table`), not one box (and counter, and storage)
    each. Empty for programs that train no model (the document's examples): there every tensor may be the story."""
    if not any(t.parameter is not None for t in trace.tensors.values()):
        return set(), set()
    involved = {tid for f in findings for tid in f.tensors}
    finding_events = {seq for f in findings for seq in f.events}
    for e in trace.events:
        if e.seq in finding_events:
            involved.update(tid for tid in (e.tensor, e.result) if tid)
            involved.update(v.tensor for v in e.versions)
    # an alias made by `.data` / `.detach()` is the story of this view: it and what it aliases stay drawn
    for t in trace.tensors.values():
        if t.origin in ("data", "detach"):
            involved.add(t.id)
            if t.source:
                involved.add(t.source)
    involved_storages = {trace.tensors[tid].storage for tid in involved if tid in trace.tensors}
    saved = {s.tensor for n in trace.nodes.values() for s in n.saved if s.tensor}
    grouped = {
        tid for tid in saved
        if tid in trace.tensors and tid not in involved and trace.tensors[tid].parameter is None
        and trace.tensors[tid].origin != "parameter" and trace.tensors[tid].storage not in involved_storages
    }
    keep = involved | {t.id for t in trace.tensors.values()
                       if t.parameter is not None or t.origin == "parameter" or (t.storage in involved_storages)}
    return grouped, keep


@dataclass
class _SavedGroup:
    """What one module's line saved for backward in the last step: tensors by their place in memory, the ops."""

    module: str
    line: int | None
    code: str = ""
    sizes: dict[str, int] = field(default_factory=dict)  # "storage:offset" -> bytes: memory two share counted once
    ops: dict[str, None] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(self.sizes.values())


def _saved_groups(trace: Trace, steps: list[Step] | None = None) -> tuple[str, str, int, list[_SavedGroup]] | None:
    """What autograd holds for the last training step, grouped by module and line, largest first: the step in
    short ("step 10") and in full ("step 10 of 10 (backward at line 34)"), the total bytes, the groups. Parameters
    are left out: they are drawn as themselves. `steps`: `split_steps(trace)`, when the caller has them."""
    steps = split_steps(trace) if steps is None else steps
    node_ids = steps[-1].nodes if steps else list(trace.nodes)
    groups: dict[tuple[str, int | None], _SavedGroup] = {}
    for nid in node_ids:
        node = trace.nodes[nid]
        for saved in node.saved:
            tensor = trace.tensors.get(saved.tensor) if saved.tensor else None
            if tensor is None or tensor.parameter is not None or tensor.byte_range is None:
                continue
            module, line = node.module or "(no module)", node.created.line if node.created else None
            group = groups.get((module, line))
            if group is None:
                code = node.created.code.strip() if node.created is not None and node.created.code else ""
                group = groups[(module, line)] = _SavedGroup(module, line, code)
            group.sizes[f"{tensor.storage}:{tensor.byte_range[0]}"] = tensor.byte_range[1] - tensor.byte_range[0]
            group.ops[node.name] = None
    if not groups:
        return None
    ranked = sorted(groups.values(), key=lambda g: -g.size)
    total = sum({where: size for g in ranked for where, size in g.sizes.items()}.values())
    if not steps:
        return "the graph", "the graph", total, ranked
    short = f"step {steps[-1].number}"
    return short, f"{short} of {len(steps)} (backward at line {steps[-1].line})", total, ranked


def _activation_table(trace: Trace, steps: list[Step] | None, limit: int = 12) -> str | None:
    """One table: what autograd keeps for backward in the last training step, by module and line, largest first,
    with the ops that saved it, how many tensors and their bytes."""
    found = _saved_groups(trace, steps)
    if found is None:
        return None
    _, which, total, ranked = found
    head = (f'<TR><TD COLSPAN="4" ALIGN="LEFT"><B>{html_label_text(f"saved for backward in {which}: {_bytes(total)}")}'
            f'</B></TD></TR>')
    columns = "".join(f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9" COLOR="#555555">{name}</FONT></TD>'
                      for name in ("module and line", "saved by", "tensors", "bytes"))
    rows = [head, f"<TR>{columns}</TR>"]
    for group in ranked[:limit]:
        where = group.module if group.line is None else f"{group.module}  line {group.line}: {group.code}"
        rows.append(
            "<TR>"
            f'<TD ALIGN="LEFT" BALIGN="LEFT">{html_label_text(shorten(where, 60))}</TD>'
            f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9">{html_label_text(shorten(", ".join(group.ops), 48))}</FONT></TD>'
            f'<TD ALIGN="RIGHT">{len(group.sizes)}</TD>'
            f'<TD ALIGN="RIGHT">{html_label_text(_bytes(group.size))}</TD>'
            "</TR>"
        )
    if len(ranked) > limit:
        rows.append(f'<TR><TD COLSPAN="4" ALIGN="LEFT">{html_label_text(f"… {len(ranked) - limit} more places")}</TD></TR>')
    return (f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" COLOR="{SAVED_COLOUR}" '
            f'BGCOLOR="#fff6e5">{"".join(rows)}</TABLE>>')


def saved_by_module(trace: Trace, limit: int = 8, *, steps: list[Step] | None = None) -> list[str]:
    """What autograd holds for the last training step, grouped by module and line, largest first, as note lines:
    "conv1  line 19: 3 tensors, 4.6 KiB". Only for scripts that train a model."""
    if not any(t.parameter is not None for t in trace.tensors.values()):
        return []
    found = _saved_groups(trace, steps)
    if found is None:
        return []
    which, _, total, ranked = found
    lines = [f"saved for backward in {which}: {_bytes(total)}"]
    for group in ranked[:limit]:
        where = f"  line {group.line}" if group.line is not None else ""
        count = len(group.sizes)
        lines.append(f"  {group.module}{where}: {count} tensor{'s' if count != 1 else ''}, {_bytes(group.size)}")
    if len(ranked) > limit:
        lines.append(f"  \N{HORIZONTAL ELLIPSIS} {len(ranked) - limit} more places")
    return lines


# ---------------------------------------------------------------------- a real model's parameters, by module
def _summarised_parameters(trace: Trace, findings: Sequence[Finding]) -> list[str]:
    """The parameters the parameter table sums up: all but those a finding names, that share their memory with
    another tensor (a `.data` / `.detach()` alias, a tied weight), or that the program wrote other than by
    initialising them or stepping an optimizer. Those are drawn one by one."""
    named = {tid for f in findings for tid in f.tensors}
    finding_events = {seq for f in findings for seq in f.events}
    updates, quiet = _updates_through_aliases(trace, findings)
    sharing: dict[str, int] = {}  # storage -> parameters and program-made aliases in it (not a linear's `.t()`)
    for t in trace.tensors.values():
        if t.id in quiet:
            continue
        if t.storage is not None and (t.parameter is not None or t.origin in ("parameter", "data", "detach")):
            sharing[t.storage] = sharing.get(t.storage, 0) + 1
    initial = initialisation_writes(trace)
    own_writes = {
        v.tensor for e in trace.events
        if (e.kind is EventKind.INPLACE_WRITE and e.seq not in initial and e.seq not in updates)
        or e.seq in finding_events
        for v in e.written()
    }
    return [
        t.id for t in trace.tensors.values()
        if (t.parameter is not None or t.origin == "parameter") and t.id not in named and t.id not in own_writes
        and (t.storage is None or sharing.get(t.storage, 0) <= 1)
    ]


def _updates_through_aliases(trace: Trace, findings: Sequence[Finding]) -> tuple[set[int], set[str]]:
    """Writes to parameters through their own `.data` / `.detach()` aliases that no finding involves (manual SGD:
    `p.data.add_(p.grad, alpha=-lr)`), and those aliases: a row of the parameter table, not drawn one by one.

    An alias counts only if every event that touches it is its making or such a write; one the program reads
    afterwards, keeps, or that a finding names stays drawn."""
    named = {tid for f in findings for tid in f.tensors}
    finding_events = {seq for f in findings for seq in f.events}

    def of_parameter(tid: str) -> bool:
        t = trace.tensors.get(tid)
        return t is not None and (t.parameter is not None or t.origin == "parameter")

    def alias_of_parameter(tid: str) -> bool:
        t = trace.tensors.get(tid)
        return t is not None and t.origin in ("data", "detach") and t.source is not None and of_parameter(t.source)

    updates: set[int] = set()
    candidates: set[str] = set()
    touched_otherwise: set[str] = set()
    for e in trace.events:
        involved = {tid for tid in (e.tensor, e.result) if tid} | {v.tensor for v in e.versions}
        if e.kind is EventKind.INPLACE_WRITE and e.seq not in finding_events and involved and not involved & named:
            aliases = {tid for tid in involved if alias_of_parameter(tid)}
            if aliases and all(tid in aliases or of_parameter(tid) for tid in involved):
                updates.add(e.seq)
                candidates |= aliases
                continue
        if e.kind in (EventKind.DATA_GET, EventKind.DETACH) and e.seq not in finding_events:
            continue  # making an alias
        touched_otherwise |= involved
    # an alias the program never named nor used again (`state_dict()` detaching each parameter) is quiet too
    used = {tid for op in trace.ops for tid in op.inputs}  # `w.detach().clone()`: the clone read it
    unnamed = {t.id for t in trace.tensors.values() if alias_of_parameter(t.id) and not t.names and t.id not in used}
    quiet = {tid for tid in (candidates | unnamed) - touched_otherwise - named}
    # a write through an alias that is not quiet (read later, named) is the program's own again
    updates = {e.seq for e in trace.events if e.seq in updates
               and all(not alias_of_parameter(tid) or tid in quiet
                       for tid in [e.tensor or "", *(v.tensor for v in e.versions)])}
    return updates, quiet


def _tied_modules(trace: Trace, tids: set[str]) -> dict[str, list[str]]:
    """Parameter id -> the other modules whose ops take that very tensor as their own weight (weight tying:
    `wte.weight = lm_head.weight`): modules with no parameter of their own in the trace that use it directly."""
    owners = {t.parameter.rpartition(".")[0] for t in trace.tensors.values() if t.parameter}
    accumulate = {n.id: n.variable for n in trace.nodes.values() if n.name == "AccumulateGrad" and n.variable in tids}
    users: dict[str, dict[str, None]] = {}
    for node in trace.nodes.values():
        for nid in node.next:
            tid = accumulate.get(nid or "")
            if tid is not None and node.module is not None:
                users.setdefault(tid, {})[node.module] = None
    out: dict[str, list[str]] = {}
    for tid, modules in users.items():
        own = (trace.tensors[tid].parameter or "").rpartition(".")[0]
        if own not in modules:  # only where its own module's ops use it too: the names agree
            continue
        others = [m for m in modules if m not in owners
                  and not (m.startswith(own + ".") or own.startswith(m + "."))]
        if others:
            out[tid] = others
    return out


def _module_of(parameter: str) -> tuple[str, str]:
    module, _, leaf = parameter.rpartition(".")
    return module or "(top level)", leaf


def _parameter_table(
    trace: Trace, tids: list[str], namer: Namer, findings: Sequence[Finding] = (), limit: int = 40
) -> str:
    """One row per module: its parameters, their bytes, and what wrote them (initialisation, optimizer steps)."""
    initial = initialisation_writes(trace)
    updates, _ = _updates_through_aliases(trace, findings)
    writers: dict[str, dict[str, int]] = {}  # tensor -> writer -> times
    through: dict[str, str] = {}  # writer -> what it did, said after its count
    wanted = set(tids)
    for e in trace.events:
        if e.kind not in _WRITES:
            continue
        for v in e.written():
            if v.tensor not in wanted:
                continue
            if e.seq in initial:
                key = f"initialised (line {e.location.line})" if e.location else "initialised"
            elif e.kind is EventKind.OPTIMIZER_STEP:
                key = f"{e.data.get('optimizer', 'optimizer')}.step()"
            elif e.seq in updates:
                code = code_text(e.location.code) if e.location and e.location.code else str(e.op)
                key = f"line {e.location.line}: {code}" if e.location else code
                alias = trace.tensors.get(e.tensor or "")
                call = ".detach()" if alias is not None and alias.origin == "detach" else ".data"
                through[key] = (f" \N{EM DASH} bytes changed, version not (through {call})" if v.before == v.after
                                else f" (through {call})")
            else:
                key = f"line {e.location.line}: {e.op}" if e.location else str(e.op)
            times = writers.setdefault(v.tensor, {})
            times[key] = times.get(key, 0) + 1
    tied = _tied_modules(trace, wanted)
    modules: dict[str, list[str]] = {}
    for tid in tids:
        t = trace.tensors[tid]
        module, _ = _module_of(t.parameter or namer.tensor(tid))
        modules.setdefault(module, []).append(tid)
    total = sum(_nbytes(trace, tid) for tid in tids)
    head = (f"parameters by module: {len(tids)} in {len(modules)} module{'s' if len(modules) != 1 else ''}, "
            f"{_bytes(total)} (no finding, alias or write of the program's own: drawn here, not one by one)")
    columns = "".join(f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9" COLOR="#555555">{name}</FONT></TD>'
                      for name in ("module", "parameters", "bytes", "written by"))
    rows = [f'<TR><TD COLSPAN="4" ALIGN="LEFT"><B>{html_label_text(head)}</B></TD></TR>', f"<TR>{columns}</TR>"]
    for module, members in list(modules.items())[:limit]:
        leaves = [_module_of(trace.tensors[tid].parameter or namer.tensor(tid))[1] for tid in members]
        written: dict[str, list[str]] = {}
        for tid, leaf in zip(members, leaves):
            for key, count in writers.get(tid, {}).items():
                once = count == 1 or key.startswith("initialised")  # an init call writing twice is one setup
                text = (key if once else f"{key} \N{MULTIPLICATION SIGN}{count}") + through.get(key, "")
                written.setdefault(text, []).append(leaf)
        parts = [key if len(who) == len(members) else f"{key}: {', '.join(who)}" for key, who in written.items()]
        never = [leaf for tid, leaf in zip(members, leaves) if tid not in writers]
        if never:
            parts.append(f"never written: {', '.join(never)}")
        if len(parts) > 4:
            parts[3:] = [f"\N{HORIZONTAL ELLIPSIS} {len(parts) - 3} more writers"]
        for tid, leaf in zip(members, leaves):
            if tied.get(tid):
                parts.insert(0, f"{leaf}: one tensor, one storage, also {', '.join(tied[tid])}'s (tied weight)")
        rows.append(
            "<TR>"
            f'<TD ALIGN="LEFT">{html_label_text(shorten(module, 48))}</TD>'
            f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9">{html_label_text(shorten(", ".join(leaves), 36))}</FONT></TD>'
            f'<TD ALIGN="RIGHT">{html_label_text(_bytes(sum(_nbytes(trace, tid) for tid in members)))}</TD>'
            f'<TD ALIGN="LEFT" BALIGN="LEFT"><FONT POINT-SIZE="9">'
            f'{html_label_text(chr(10).join(shorten(part, 96) for part in parts))}</FONT></TD>'
            "</TR>"
        )
    if len(modules) > limit:
        rows.append(f'<TR><TD COLSPAN="4" ALIGN="LEFT">{html_label_text(f"… {len(modules) - limit} more modules")}'
                    "</TD></TR>")
    return (f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" COLOR="#6b8fb5" '
            f'BGCOLOR="#eef4fb">{"".join(rows)}</TABLE>>')


def _nbytes(trace: Trace, tid: str) -> int:
    byte_range = trace.tensors[tid].byte_range
    return byte_range[1] - byte_range[0] if byte_range else 0
