"""networkx views of a trace: the autograd graph, and a time-aware dataflow index over tensors."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx

from ..model import Event, EventKind, TensorRecord, Trace

ALIAS_EVENTS = (EventKind.DATA_GET, EventKind.DETACH)
# calls that read only the size, dtype and device of their first tensor, never its values (`weight.data.new_zeros(
# 1, bsz, n)`, `torch.zeros_like(x)`): no value flows from it into the result
SHAPE_ONLY = frozenset({
    "Tensor.new", "Tensor.new_zeros", "Tensor.new_ones", "Tensor.new_empty", "Tensor.new_full",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
})  # fmt: skip


def value_inputs(name: str, inputs: list[str]) -> list[str]:
    """The inputs whose values a call reads: all of them, but the template of a shape-only call (`Tensor.new(t)`
    with a tensor argument still copies `t`)."""
    return inputs[1:] if name in SHAPE_ONLY else inputs


def autograd_graph(trace: Trace) -> nx.DiGraph:
    """Nodes are autograd node ids; an edge a -> b means a's backward feeds b (a.next_functions holds b)."""
    graph = nx.DiGraph()
    for node in trace.nodes.values():
        graph.add_node(node.id, name=node.name, variable=node.variable, module=node.module)
        for nxt in node.next:
            if nxt is not None:
                graph.add_edge(node.id, nxt)
    return graph


def dataflow_graph(trace: Trace) -> nx.MultiDiGraph:
    """Tensor -> tensor edges for every call (input -> output) and alias (source -> `.data`/`.detach()` result)."""
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(trace.tensors)
    for op in trace.ops:
        for src in value_inputs(op.name, op.inputs):
            for dst in op.outputs:
                if src != dst:
                    graph.add_edge(src, dst, seq=op.seq, op=op.name)
    for event in trace.events:
        if event.kind in ALIAS_EVENTS and event.tensor and event.result:
            graph.add_edge(event.tensor, event.result, seq=event.seq, op=event.kind.value, alias=True)
    return graph


def rewrapped(trace: Trace) -> list[tuple[TensorRecord, str]]:
    """(tensor, the live tensor whose memory it wraps) for tensors that appeared from outside torch on the memory
    of another: `torch.from_numpy(t.numpy())`, `Variable(t.data)`. A new storage object over the same bytes: their
    values are that tensor's values."""
    by_ptr: dict[tuple[int, str], list[str]] = {}
    for storage in trace.storages.values():
        if storage.data_ptr:
            by_ptr.setdefault((storage.data_ptr, storage.device), []).append(storage.id)
    shared = {sid: sids for sids in by_ptr.values() if len(sids) > 1 for sid in sids}
    if not shared:
        return []
    in_storage: dict[str, list[TensorRecord]] = defaultdict(list)
    for tensor in trace.tensors.values():
        if tensor.storage in shared:
            in_storage[tensor.storage].append(tensor)
    found = []
    for sid, sids in shared.items():
        for tensor in in_storage[sid]:
            if tensor.origin != "input" or tensor.byte_range is None:
                continue
            # the latest tensor made before on the same bytes of a storage of the same size and dtype (the wrapper
            # keeps the memory alive; the tensor objects it came from may be gone when the program first uses it)
            size = (trace.storages[sid].nbytes, trace.storages[sid].dtype)
            before = [
                other for other_sid in sids
                if other_sid != sid and (trace.storages[other_sid].nbytes, trace.storages[other_sid].dtype) == size
                for other in in_storage[other_sid]
                if other.seq < tensor.seq and other.byte_range is not None
                and other.byte_range[0] < tensor.byte_range[1] and tensor.byte_range[0] < other.byte_range[1]
            ]
            if before:
                found.append((tensor, max(before, key=lambda other: other.seq).id))
    return found


@dataclass
class _Step:
    seq: int
    inputs: list[str]
    outputs: list[str]
    alias_event: int | None = None  # seq of the data_get/detach event, for alias steps


@dataclass
class Dataflow:
    """Which tensors' values flowed into which, respecting program order.

    A tensor's content at time `s` depends on the calls that wrote it before `s`; an in-place write after a
    value was consumed does not flow back into what was computed from it.
    """

    trace: Trace
    steps: list[_Step] = field(default_factory=list)
    producers: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    consumers: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def of(cls, trace: Trace) -> Dataflow:
        flow = cls(trace)
        steps = [_Step(op.seq, value_inputs(op.name, op.inputs), op.outputs) for op in trace.ops]
        steps += [
            _Step(e.seq, [e.tensor], [e.result], alias_event=e.seq)
            for e in trace.events
            if e.kind in ALIAS_EVENTS and e.tensor and e.result
        ]
        steps += [_Step(tensor.seq, [source], [tensor.id]) for tensor, source in rewrapped(trace)]
        steps.sort(key=lambda s: s.seq)
        flow.steps = steps
        for index, step in enumerate(steps):
            for tid in step.outputs:
                flow.producers[tid].append((step.seq, index))
            for tid in step.inputs:
                flow.consumers[tid].append((step.seq, index))
        return flow

    def ancestors(self, tid: str, before: int) -> set[str]:
        """Tensors whose values flowed into `tid` as it was at time `before` (alias edges included)."""
        best: dict[str, int] = {}
        stack = [(tid, before)]
        found: set[str] = set()
        while stack:
            tensor, bound = stack.pop()
            if best.get(tensor, -1) >= bound:
                continue
            best[tensor] = bound
            producers = self.producers.get(tensor, ())
            stop = bisect.bisect_left(producers, (bound, -1))
            for seq, index in producers[:stop]:
                for src in self.steps[index].inputs:
                    if src != tensor:
                        found.add(src)
                    stack.append((src, seq))
        return found

    def descendants(
        self, tid: str, after: int, *, skip_alias: int | None = None, before: int | None = None
    ) -> dict[str, int]:
        """Tensors computed from `tid`'s value as of time `after`, each with the earliest time it got it (only by
        calls before `before`, when given: the walk then stops there instead of running to the end of the trace)."""
        best: dict[str, int] = {}
        stack = [(tid, after)]
        while stack:
            tensor, bound = stack.pop()
            if tensor in best and best[tensor] <= bound:
                continue
            best[tensor] = bound
            consumers = self.consumers.get(tensor, ())
            start = bisect.bisect_right(consumers, (bound, len(self.steps)))
            for seq, index in consumers[start:]:
                if before is not None and seq >= before:
                    break
                step = self.steps[index]
                if skip_alias is not None and step.alias_event == skip_alias:
                    continue
                for dst in step.outputs:
                    stack.append((dst, seq))
        best.pop(tid, None)
        return best


def freed_at(backwards: list[Event]) -> dict[str, int]:
    """Node id -> seq of the first backward that freed its saved tensors (ran through it without retain_graph)."""
    freed: dict[str, int] = {}
    for event in backwards:
        if event.data.get("outcome") == "ok" and not event.data.get("retain_graph"):
            for nid in event.data.get("reached_nodes", []):
                freed.setdefault(nid, event.seq)
    return freed
