"""The memory view: storages, the tensors living in them, their version counters, and what each write did.

This module lays the drawing out (columns of tensors, counters and storages, the writes, the notes and legend);
memory_select.py chooses what is drawn, memory_boxes.py draws each box, memory_summary.py sums up the rest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import graphviz

from ..analysis.initialisation import initialisation_writes
from ..model import EventKind, Trace
from ..picture.memory_select import (
    WRITES,
    MemorySelection,
    bound_writes,
    data_pipeline,
    fold_writes,
    memory_selection,
    nothing_to_draw,
    written_storages,
)
from ..picture.picture import Picture
from .escape import FONT, html_label_text, plain_label
from .memory_boxes import (
    WRITE_COLOUR,
    counter_histories,
    counter_label,
    counter_node,
    finding_colours,
    legend_table,
    range_text,
    saved_lines,
    storage_label,
    storage_node,
    tensor_label,
    tensor_node,
    write_label,
    write_node,
)
from .memory_summary import (
    activation_table,
    buffer_note,
    bytes_text,
    parameter_table,
    repeat_notes,
    saved_by_module,
    tabled_alias_notes,
)

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..analysis.names import Namer
    from ..model import Event

__all__ = ["memory_digraph"]


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
    and a note says how many were left out. `picture`: the picture model of `trace` and `findings` (its names and
    steps); by default one is made here.
    """
    picture = Picture(trace, findings) if picture is None else picture
    chosen = memory_selection(trace, findings, picture.steps, show_all=show_all, max_tensors=max_tensors)
    hot_tensor, hot_event = finding_colours(findings)
    saved_by = saved_lines(trace, chosen.shown)

    dot = graphviz.Digraph("memory")
    dot.attr("graph", rankdir=rankdir, fontname=FONT, fontsize="10", nodesep="0.2", ranksep="0.6")
    dot.attr("node", fontname=FONT, fontsize="10", shape="plaintext")
    dot.attr("edge", fontname=FONT, fontsize="9", color="#444444")
    storages = _draw_columns(dot, trace, chosen, hot_tensor, saved_by, picture.namer)
    _draw_links(dot, trace, chosen.tensors, hot_tensor)
    writes, drawn_writes = _draw_writes(dot, trace, chosen, hot_event, storages, max_writes, picture.namer)

    notes, activations = _notes(trace, chosen, picture, show_all=show_all, max_tensors=max_tensors)
    if len(writes) > len(drawn_writes):
        notes.append(f"\N{HORIZONTAL ELLIPSIS} {len(writes) - len(drawn_writes)} other writes not shown")
    if not chosen.tensors and nothing_to_draw(trace):
        notes.insert(0, "no tensor shares memory, is written, or is saved for backward")
    if chosen.tabled_aliases:
        notes.extend(tabled_alias_notes(trace, chosen.tabled_aliases))
    if chosen.tabled_buffers:
        notes.append(buffer_note(trace, chosen.tabled_buffers))
    notes.extend(repeat_notes(chosen.repeats, picture.namer))
    if chosen.summarised:
        dot.node("parameters", parameter_table(trace, chosen.summarised, picture.namer, findings), shape="plaintext")
    if activations is not None:
        dot.node("activations", activations, shape="plaintext")
    with dot.subgraph(name="cluster_legend") as legend:
        legend.attr(label="legend", style="rounded", color="gray60", fontsize="10")
        legend.node("legend", legend_table(set(hot_tensor.values()), any(saved_by.values()), bool(drawn_writes)))
        if notes:
            text = html_label_text(chr(10).join(notes))  # one cell, its lines left-aligned
            legend.node("summary", f'<<TABLE BORDER="0" CELLPADDING="0"><TR><TD ALIGN="LEFT" BALIGN="LEFT">{text}'
                        "</TD></TR></TABLE>>", shape="note", fontcolor="#555555", color="#bbbbbb")
    return dot


def _draw_columns(
    dot: graphviz.Digraph, trace: Trace, chosen: MemorySelection, hot_tensor: dict[str, str],
    saved_by: dict[str, list[str]], namer: Namer,
) -> list[str]:
    """Columns, left to right: tensors | version counters | storages (the writes come after). Keeping each kind on
    its own rank makes "same storage, different counter" readable at a glance. Returns the storages drawn."""
    tensor_ids = chosen.tensors
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
    histories = counter_histories(trace, set(counters))
    users: dict[str, list[str]] = {}
    wanted = set(storages)
    for t in trace.tensors.values():
        if t.storage in wanted:
            users.setdefault(t.storage, []).append(t.id)
    with dot.subgraph(name="tensors") as column:
        column.attr(rank="same")
        for tid in tensor_ids:
            label = tensor_label(trace, tid, hot_tensor.get(tid), saved_by.get(tid, []), namer, chosen.marks.get(tid))
            column.node(tensor_node(tid), label)
    with dot.subgraph(name="counters") as column:
        column.attr(rank="same")
        for cid in counters:
            column.node(counter_node(cid), counter_label(trace, cid, histories.get(cid, ([], [], [])), namer))
    with dot.subgraph(name="storages") as column:
        column.attr(rank="same")
        for sid in storages:
            column.node(storage_node(sid), storage_label(trace, sid, hot_storage.get(sid), users.get(sid, []), namer))
    return storages


def _draw_links(dot: graphviz.Digraph, trace: Trace, tensor_ids: list[str], hot_tensor: dict[str, str]) -> None:
    """Each tensor to its version counter (dashed) and to the byte range it uses in its storage."""
    for tid in tensor_ids:
        t = trace.tensors[tid]
        colour = hot_tensor.get(tid, "#444444")
        if t.version_counter is not None:
            dot.edge(tensor_node(tid), counter_node(t.version_counter), style="dashed", color=colour,
                     arrowhead="odot", tooltip="uses this version counter")
        if t.storage is not None:
            # minlen=2 keeps storages one column further right than the counters
            dot.edge(tensor_node(tid), storage_node(t.storage), label=plain_label(range_text(t.byte_range)),
                     color=colour, minlen="2", penwidth="1.6" if tid in hot_tensor else "1")


def _draw_writes(
    dot: graphviz.Digraph, trace: Trace, chosen: MemorySelection, hot_event: dict[int, str], storages: list[str],
    max_writes: int, namer: Namer,
) -> tuple[list[Event], list[Event]]:
    """The writes to the drawn tensors, each from the storages it wrote; returns the writes and those drawn."""
    shown = chosen.shown
    writes = [e for e in trace.events if e.kind in WRITES and any(v.tensor in shown for v in e.written())]
    if chosen.keep:  # initialising the model is setup, not the story: the counters still list those writes
        initial = initialisation_writes(trace)
        writes = [e for e in writes if e.seq not in initial or e.seq in hot_event]
    if chosen.keep:  # every optimizer step reads alike: the last one, and any a finding points at (counters: the rest)
        steps_seen = [e for e in writes if e.kind is EventKind.OPTIMIZER_STEP]
        last = {e.seq for e in steps_seen[-1:]}
        writes = [e for e in writes if e.kind is not EventKind.OPTIMIZER_STEP or e.seq in last or e.seq in hot_event]
    writes, times = fold_writes(writes, hot_event, shown)
    drawn_writes = bound_writes(writes, hot_event, max_writes)
    for event in drawn_writes:
        colour = hot_event.get(event.seq, WRITE_COLOUR)
        name = write_node(event.seq)
        dot.node(name, write_label(trace, event, colour, shown, namer, times=times.get(event.seq, 1)))
        for sid in written_storages(trace, event):
            if sid in storages:
                dot.edge(storage_node(sid), name, dir="back", color=colour, arrowtail="normal",
                         label="written" if event.kind is EventKind.INPLACE_WRITE else "updated",
                         penwidth="1.6" if event.seq in hot_event else "1")
    return writes, drawn_writes


def _notes(
    trace: Trace, chosen: MemorySelection, picture: Picture, *, show_all: bool, max_tensors: int | None
) -> tuple[list[str], str | None]:
    """The notes on what is not drawn one by one, and the activations' table (a training script's)."""
    notes = []
    over_limit, uninvolved, shown = chosen.over_limit, chosen.uninvolved, chosen.shown
    if over_limit:
        notes.append(f"\N{HORIZONTAL ELLIPSIS} {over_limit} other tensor{'s' if over_limit != 1 else ''} not shown "
                     f"(limit of {max_tensors}: max_tensors)")
    pipeline = data_pipeline(trace) - shown if not show_all else set()
    activations = activation_table(trace, picture.steps) if chosen.grouped else None
    if activations is None:
        notes.extend(saved_by_module(trace, steps=picture.steps))
    if pipeline:
        size = sum(span[1] - span[0] for t in pipeline if (span := trace.tensors[t].byte_range) is not None)
        notes.append(f"data pipeline: {len(pipeline)} tensor{'s' if len(pipeline) != 1 else ''} without gradients "
                     f"(inputs, targets, transforms; {bytes_text(size)}) not shown (--show-all draws them)")
    uninvolved -= len(pipeline)
    if activations is not None and uninvolved > 0:
        # a training script: the rest is every step's activations (the last step's in the table), views, results
        notes.append(f"\N{HORIZONTAL ELLIPSIS} {uninvolved} other tensor{'s' if uninvolved != 1 else ''} (every "
                     "step's activations, views, results) not drawn one by one (--show-all draws them)")
        uninvolved = 0
    if uninvolved > 0:
        notes.append(f"\N{HORIZONTAL ELLIPSIS} {uninvolved} other tensor{'s' if uninvolved != 1 else ''} not shown "
                     "(no alias, event, finding or saved use; --show-all draws them)")
    return notes, activations
