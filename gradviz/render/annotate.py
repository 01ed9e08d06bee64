"""Turn findings into what the graph view marks: coloured saved tensors and leaves, cut edges, protected nodes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..analysis.names import Namer
from ..model import Event, EventKind

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import NodeRecord, Trace

__all__ = ["Annotations", "Cut", "Note", "annotate", "alias_expression", "consumer_node"]


@dataclass
class Note:
    """How to draw one tensor: a legend style, an optional better name, and lines of explanation."""

    style: str
    lines: list[str] = field(default_factory=list)
    name: str | None = None


@dataclass
class Cut:
    """A gradient path cut by `.detach()` or `.data`: from the node that made the value to the node that used it."""

    source: str | None  # autograd node that produced the detached tensor
    target: str | None  # autograd node of the first op that used the alias with grad; None if never used so
    alias: str | None  # the detached tensor
    label: str


@dataclass
class Annotations:
    saved: dict[tuple[str, str], Note] = field(default_factory=dict)  # (node id, saved name) -> note
    leaves: dict[str, Note] = field(default_factory=dict)  # tensor id -> note
    cuts: list[Cut] = field(default_factory=list)
    protected: set[str] = field(default_factory=set)  # node ids that simplification must keep visible
    holders: dict[str, Note] = field(default_factory=dict)  # node id -> a value keeping its graph alive / freed


def annotate(trace: Trace, findings: list[Finding]) -> Annotations:
    """What each finding marks in the graph view."""
    notes = Annotations()
    events = {e.seq: e for e in trace.events}
    acc_of: dict[str, list[str]] = defaultdict(list)  # leaf tensor -> its AccumulateGrad nodes
    for node in trace.nodes.values():
        if node.variable is not None:
            acc_of[node.variable].append(node.id)
    users: dict[str, list[int]] = defaultdict(list)  # tensor -> indexes of ops using it
    for i, op in enumerate(trace.ops):
        for tid in op.inputs:
            users[tid].append(i)
    for finding in findings:
        kind = finding.kind.value
        found = [events[s] for s in finding.events if s in events]
        notes.protected.update(n for n in finding.nodes if n in trace.nodes)
        if kind in ("poisoned_saved_tensor", "silently_corrupted_saved_tensor", "detach_inplace_saved"):
            _mark_saved(trace, finding, found, notes)
        elif kind in ("dead_parameter", "update_without_gradient"):
            # a dead_parameter finding names every parameter its cause starves: each gets its own note
            marked = finding.tensors if kind == "dead_parameter" else finding.tensors[:1]
            for tid in marked or ([] if finding.parameter is None else _by_parameter(trace, finding.parameter)):
                if tid not in trace.tensors:
                    continue
                if kind == "dead_parameter":
                    note = Note("dead", ["no gradient"], trace.tensors[tid].parameter or finding.parameter)
                else:
                    where = f" at line {finding.line}" if finding.line else ""
                    note = Note("updated", [f"updated{where} without a gradient"], finding.parameter)
                if tid not in notes.leaves or kind == "dead_parameter":
                    notes.leaves[tid] = note
                notes.protected.update(acc_of.get(tid, []))
        elif kind in ("graph_kept_alive", "backward_through_freed_graph"):
            _mark_lifetime(trace, finding, notes)
        elif kind == "cut_edge":
            alias_events = [e for e in found if e.kind in (EventKind.DETACH, EventKind.DATA_GET)]
            if not alias_events:  # fall back to the tensors the finding names
                alias_events = [
                    e for e in trace.events
                    if e.kind in (EventKind.DETACH, EventKind.DATA_GET) and e.result in finding.tensors
                ]
            alias_events = _same_line_too(trace, alias_events)
            for event in alias_events:
                source = event.data.get("source_grad_fn")
                if source is None and event.tensor in acc_of:
                    source = acc_of[event.tensor][0]
                if source not in trace.nodes:
                    source = None
                target = consumer_node(trace, event.result, after=event.seq, users=users)
                line = event.location.line if event.location else None
                label = f"\N{BLACK SCISSORS} {alias_expression(trace, event)}" + (f"  line {line}" if line else "")
                notes.cuts.append(Cut(source, target, event.result, label))
                notes.protected.update(n for n in (source, target) if n is not None)
    return notes


SAME_LINE_LIMIT = 20  # a loop detaching at one line: draw the cut of up to this many iterations


def _mark_lifetime(trace: Trace, finding: Finding, notes: Annotations) -> None:
    """A value that keeps many steps' graphs alive, or a graph built on one backward already freed."""
    where = f"line {finding.line}" if finding.line else "?"
    if finding.kind.value == "graph_kept_alive":
        for tid, nid in zip(finding.tensors, finding.nodes):
            record = trace.tensors.get(tid)
            name = Namer(trace).tensor(tid) if record is not None else None
            notes.holders[nid] = Note("kept", [f"keeps {finding.count} steps' graphs alive", f"stored at {where}"], name)
    elif len(finding.nodes) == 2:  # (new node, freed node it builds on)
        notes.holders[finding.nodes[1]] = Note(
            "freed", ["graph freed by an earlier backward", f"reused at {where}"], None
        )


def _same_line_too(trace: Trace, alias_events: list[Event]) -> list[Event]:
    """The finding's alias events plus the other iterations of the same line (a loop detaching each step)."""
    chosen = {e.seq: e for e in alias_events}
    places = {(e.kind, e.location.file, e.location.line) for e in alias_events if e.location}
    extra = [
        e for e in trace.events
        if e.seq not in chosen and e.location and (e.kind, e.location.file, e.location.line) in places
        and e.data.get("source_grad_fn") is not None
    ]
    for e in extra[:SAME_LINE_LIMIT]:
        chosen[e.seq] = e
    return [chosen[s] for s in sorted(chosen)]


def _by_parameter(trace: Trace, name: str) -> list[str]:
    return [t.id for t in trace.tensors.values() if t.parameter == name][:1]


def alias_expression(trace: Trace, event: Event) -> str:
    """`x.detach()` or `out.data`, from an alias event."""
    expr = event.data.get("expression")
    if not expr and event.tensor in trace.tensors:
        expr = Namer(trace).tensor(event.tensor)
    expr = expr or "?"
    return f"{expr}.data" if event.kind is EventKind.DATA_GET else f"{expr}.detach()"


def consumer_node(trace: Trace, tensor: str | None, *, after: int, users: dict[str, list[int]] | None = None) -> str | None:
    """The autograd node of the first op, after `after`, that used `tensor` (or a value computed from it without grad)."""
    if tensor is None:
        return None
    if users is None:
        users = defaultdict(list)
        for i, op in enumerate(trace.ops):
            for tid in op.inputs:
                users[tid].append(i)
    seen = {tensor}
    frontier = [tensor]
    steps = 0
    while frontier and steps < 10_000:
        best: tuple[int, str] | None = None
        nxt: list[str] = []
        for tid in frontier:
            for i in users.get(tid, []):
                op = trace.ops[i]
                if op.seq <= after:
                    continue
                steps += 1
                for out in op.outputs:
                    record = trace.tensors.get(out)
                    if record is None or out in seen:
                        continue
                    if record.grad_fn is not None:
                        if best is None or op.seq < best[0]:
                            best = (op.seq, record.grad_fn)
                    else:
                        seen.add(out)
                        nxt.append(out)
        if best is not None:
            return best[1]
        frontier = nxt
    return None


def _mark_saved(trace: Trace, finding: Finding, found: list[Event], notes: Annotations) -> None:
    kind = finding.kind.value
    targets = set(finding.tensors)
    candidates = [trace.nodes[n] for n in finding.nodes if n in trace.nodes] or [
        n for n in trace.nodes.values() if any(s.tensor in targets for s in n.saved)
    ]
    for node in candidates:
        records = [s for s in node.saved if s.tensor is not None and (s.tensor in targets or not targets)]
        if not records:
            records = [s for s in node.saved if s.tensor is not None and _shares_storage(trace, s.tensor, targets)]
        for saved in records:
            notes.saved[(node.id, saved.name)] = Note(_SAVED_STYLE[kind], _saved_lines(trace, finding, found, node, saved.tensor, saved.saved_version))
            notes.protected.add(node.id)


_SAVED_STYLE = {
    "poisoned_saved_tensor": "poisoned",
    "silently_corrupted_saved_tensor": "corrupted",
    "detach_inplace_saved": "detached_saved",
}


def _shares_storage(trace: Trace, tid: str, others: set[str]) -> bool:
    storage = trace.tensors[tid].storage
    return storage is not None and any(
        o in trace.tensors and trace.tensors[o].storage == storage for o in others
    )


def _saved_lines(
    trace: Trace, finding: Finding, found: list[Event], node: NodeRecord, tensor: str | None, saved_version: int | None
) -> list[str]:
    kind = finding.kind.value
    if kind == "detach_inplace_saved":
        where = f" at line {finding.line}" if finding.line else ""
        return [f"detached in place{where}", "backward cannot use it"]
    writes = [e for e in found if e.kind is EventKind.INPLACE_WRITE]
    if not writes:  # the finding named no event: the writes to this tensor's memory after it was saved
        storage = trace.tensors[tensor].storage if tensor in trace.tensors else None
        writes = [
            e for e in trace.events
            if e.kind is EventKind.INPLACE_WRITE and e.seq > node.seq
            and (any(v.tensor == tensor for v in e.versions) or (storage and e.data.get("storage") == storage))
        ]
    write = writes[-1] if kind == "poisoned_saved_tensor" and writes else (writes[0] if writes else None)
    line = write.location.line if write is not None and write.location else finding.line
    via = Namer(trace).tensor(write.tensor) if write is not None and write.tensor in trace.tensors else None
    saved_v = f"v{saved_version}" if saved_version is not None else "v?"
    if kind == "poisoned_saved_tensor":
        now = None
        for e in writes:
            for change in e.versions:
                if change.tensor == tensor and change.after is not None:
                    now = change.after
        if now is None and tensor in trace.tensors and trace.tensors[tensor].version != saved_version:
            now = trace.tensors[tensor].version  # a walked graph: no events, but the current version is known
        origin = None
        if write is not None and write.tensor in trace.tensors and write.tensor != tensor:
            origin = _alias_origin(trace, write.tensor)  # "c = out.detach()": the alias shares the counter
        now_v = f"v{now}" if now is not None else "a later version"
        text = [f"saved {saved_v}, now {now_v},"]
        if line:
            text.append(f"written at line {line}" + (f" via {via}" if via else ""))
        else:
            text.append("written in place after it was saved" + (f" via {via}" if via else ""))
        if origin:
            text.append(f"({origin} shares the counter)")
        return text
    # silent: the bytes changed through an alias with its own version counter
    alias = via
    if write is not None and write.tensor in trace.tensors:
        alias = _alias_origin(trace, write.tensor) or via
    where = f", line {line}" if line else ""
    lines = [f"bytes changed via {alias}{where};" if alias else f"bytes changed{where};", f"version unchanged ({saved_v})"]
    if finding.measured is not None:  # --verify: how wrong the gradients came out
        lines.append(finding.measured.short())
    return lines


def _alias_origin(trace: Trace, tid: str) -> str | None:
    """`c = out.data` for a tensor made by an alias event."""
    for event in trace.events:
        if event.result == tid and event.kind in (EventKind.DATA_GET, EventKind.DETACH):
            made = alias_expression(trace, event)
            own = Namer(trace).variable(tid)
            return made if own is None or own == made else f"{own} = {made}"
    return None
