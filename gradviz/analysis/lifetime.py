"""Graph lifetime: when each autograd node lives and how many bytes of saved tensors it holds (`Lifetimes`), read
off a trace once; the finding passes over it are kept_alive.py and freed_graph.py, the chart's data memory_profile.py."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ..model import EventKind, Trace
from .graphs import freed_at

END = 1 << 62  # "still alive when the trace ended"
_ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
}  # fmt: skip


def tensor_bytes(trace: Trace, tid: str) -> int:
    record = trace.tensors[tid]
    count = 1
    for n in record.shape:
        count *= n
    return count * _ITEMSIZE.get(record.dtype.removeprefix("torch."), 4)


@dataclass
class Lifetimes:
    """When each autograd node lives and what its saved tensors cost, read off a trace in one pass."""

    trace: Trace
    backward_seqs: list[int]
    death: dict[str, int]  # node id -> seq when nothing held it any more (END: alive at the end)
    freed_at: dict[str, int]  # node id -> seq of the backward that freed its saved tensors
    saved_bytes: dict[str, int]  # node id -> bytes of the saved tensors first saved by it
    holders_at_end: list[tuple[str, str]]  # (tensor id, node id) of values alive at the end that carry a graph
    intervals: list[tuple[int, int, str]] = field(default_factory=list)  # (from, to, node): saved bytes held
    op_seqs: list[int] = field(default_factory=list)
    op_runs: list[int] = field(default_factory=list)  # per op: which run of consecutive calls at one line it is in

    def execution(self, seq: int) -> int:
        """Which execution of a source line made what appeared at `seq`: calls at one line in a row are one."""
        return self.op_runs[bisect.bisect_left(self.op_seqs, seq) - 1] if self.op_seqs and seq > self.op_seqs[0] else -1

    def episode(self, seq: int) -> int:
        """How many backward calls ran before `seq`: nodes of different episodes belong to different steps."""
        return bisect.bisect_left(self.backward_seqs, seq)

    def reachable(self, start: str, seen: set[str]) -> list[str]:
        """Nodes reachable from `start` not in `seen` (which grows): each node is walked once per caller."""
        nodes = self.trace.nodes
        out: list[str] = []
        stack = [start]
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            out.append(nid)
            stack.extend(n for n in nodes[nid].next if n is not None and n not in seen)
        return out

    def held_bytes(self) -> list[tuple[int, int]]:
        """(seq, bytes of saved tensors held by live graphs from then on), in program order."""
        changes: dict[int, int] = {}
        for start, stop, nid in self.intervals:
            size = self.saved_bytes.get(nid, 0)
            if size:
                changes[start] = changes.get(start, 0) + size
                if stop < END:
                    changes[stop] = changes.get(stop, 0) - size
        total, out = 0, []
        for seq in sorted(changes):
            total += changes[seq]
            out.append((seq, total))
        return out


def lifetimes(trace: Trace) -> Lifetimes:
    nodes = trace.nodes
    backwards = trace.events_of(EventKind.BACKWARD)
    freed_by_backward = freed_at(backwards)
    death, holders_at_end = _node_deaths(trace)
    saved_bytes = _saved_bytes(trace)
    intervals = [
        (nodes[nid].seq, min(death[nid], freed_by_backward.get(nid, END)), nid)
        for nid in saved_bytes
    ]
    op_seqs, op_runs = _line_executions(trace)
    # steps are told apart by the backward calls that end them; a gradient taken with create_graph=True (MAML's
    # inner step, a gradient penalty, a Hessian-vector product) is part of computing a loss, not one of them
    steps = [e.seq for e in backwards if not e.data.get("create_graph")]
    return Lifetimes(
        trace, steps, death, freed_by_backward, saved_bytes, holders_at_end, intervals, op_seqs, op_runs
    )


def _node_deaths(trace: Trace) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """node -> seq until which something holds it (END: alive at the program's end), and (tensor, grad_fn) of the
    tensors holding a graph at the end."""
    # what holds a node: a tensor whose grad_fn it is, from when the tensor got it until the tensor died, an in-place
    # op gave it a new grad_fn or `detach_()` took it away
    death: dict[str, int] = {}
    current: dict[str, tuple[str, int]] = {}  # tensor -> (its grad_fn now, since when)

    def release(tid: str, until: int) -> None:
        held = current.pop(tid, None)
        if held is not None and death.get(held[0], -1) < until:
            death[held[0]] = until

    for record in trace.tensors.values():
        if record.grad_fn is not None and record.origin != "saved":
            current[record.id] = (record.grad_fn, record.seq)
    for event in trace.events:
        grad_fn = event.data.get("grad_fn") if event.kind is EventKind.INPLACE_WRITE else None
        if event.tensor and grad_fn:
            release(event.tensor, event.seq)
            current[event.tensor] = (grad_fn, event.seq)
        elif event.kind is EventKind.DETACH_ and event.tensor and not event.data.get("error"):
            release(event.tensor, event.seq)  # `state.detach_()`: the tensor lives on, holding no graph
    # what was freed after the program ended went with its variables: alive at its end
    ended = trace.ended if trace.ended is not None else END
    holders_at_end = []
    for tid, (nid, _since) in list(current.items()):
        freed = trace.tensors[tid].freed
        if freed is not None and freed > ended:
            freed = None
        if freed is None:
            holders_at_end.append((tid, nid))
        release(tid, END if freed is None else freed)
    # a node lives as long as the latest of its holders and of the nodes pointing at it: parents first
    order = sorted(trace.nodes.values(), key=lambda n: (-n.seq, int(n.id[1:])))
    for node in order:
        alive_until = max(death.get(node.id, node.seq), node.seq)
        death[node.id] = alive_until
        for nxt in node.next:
            if nxt is not None and death.get(nxt, -1) < alive_until:
                death[nxt] = alive_until
    return death, holders_at_end


def _saved_bytes(trace: Trace) -> dict[str, int]:
    """node -> bytes of the tensors it saved that would be freed with it (each tensor counted at its first saver)."""
    saved_bytes: dict[str, int] = {}
    owner: dict[str, str] = {}
    for node in sorted(trace.nodes.values(), key=lambda n: n.seq):
        for saved in node.saved:
            saved_id = saved.tensor
            if saved_id is None or saved_id in owner:
                continue
            record = trace.tensors[saved_id]
            if record.parameter is not None or (record.is_leaf and record.requires_grad):
                continue  # parameters live anyway: a graph holding them costs nothing extra
            owner[saved_id] = node.id
            saved_bytes[node.id] = saved_bytes.get(node.id, 0) + tensor_bytes(trace, saved_id)
    return saved_bytes


def _line_executions(trace: Trace) -> tuple[list[int], list[int]]:
    """Each op's seq, and the number of the execution of its line it belongs to (in program order)."""
    # executions of a line: calls in a row at one line are one, unless a call uses a parameter again the way an
    # earlier call of the run did (`outs.append(model(x))` looping on one line runs the model's layers again), or
    # writes in place a value of the graph an earlier call of the run made (`val_loss += crit(model(x), y)`: the sum
    # the previous iteration made, where that iteration's forward was not recorded, a step traced again from there)
    op_seqs, op_runs, run, previous = [], [], 0, None
    tensors = trace.tensors
    used: set[tuple[str, str]] = set()
    made: set[str] = set()
    for op in trace.ops:
        uses = [(op.name, tid) for tid in op.inputs if tensors[tid].is_leaf and tensors[tid].requires_grad]
        carried = any(tid in made and tid in op.inputs and tensors[tid].grad_fn is not None for tid in op.outputs)
        if (op.file, op.line) != previous or carried or any(use in used for use in uses):
            run, previous = run + 1, (op.file, op.line)
            used, made = set(), set()
        used.update(uses)
        made.update(op.outputs)
        op_seqs.append(op.seq)
        op_runs.append(run)
    return op_seqs, op_runs


def program_holders(trace: Trace, life: Lifetimes) -> list[tuple[str, str]]:
    """(tensor id, its grad_fn) of the values the program holds at the end.

    A tensor a graph alive at the end saved as it is (an input: `h` in `h.pow(2)`) stays alive with that graph
    whether the program holds it or not: a holder of its own only where the program's objects still held it at
    the end (`self.history.append(h)`, the tracer's held_at_end), or once backward freed what the node saved. So
    does the base of a saved view."""
    held_by_program = set(trace.held_at_end)
    tensors = trace.tensors
    saved_by_graph: set[str] = set()
    for node in trace.nodes.values():
        if life.death.get(node.id, END) < END or node.id in life.freed_at:
            continue
        for s in node.saved:
            tid = s.tensor
            if tid is None or not s.original:
                continue
            # a saved view holds its base alive (`x.flatten(1)` saved by a linear layer keeps the pooled `x`)
            while tid is not None and tid not in held_by_program and tid not in saved_by_graph:
                saved_by_graph.add(tid)
                record = tensors.get(tid)
                tid = record.source if record is not None and record.origin == "view" else None
    return [h for h in life.holders_at_end if h[0] not in saved_by_graph]


def freed_with_saved(trace: Trace, life: Lifetimes, nid: str, at: int) -> bool:
    """Whether a backward before `at` freed the tensors node `nid` saved (a node that saved any)."""
    freed = life.freed_at.get(nid)
    return freed is not None and freed < at and any(s.tensor is not None for s in trace.nodes[nid].saved)


def size_text(n: int) -> str:
    """`1.5 MB`: bytes for people."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(size) < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"
