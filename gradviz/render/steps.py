"""Training steps in the graph view: split the autograd graph by backward call, and draw steps of one shape once."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Hashable

if TYPE_CHECKING:
    from ..model import NodeRecord, Trace
    from .annotate import Annotations

__all__ = ["Step", "StepRoll", "split_steps", "roll_steps", "only_step"]


@dataclass
class Step:
    """The autograd nodes one backward call reached first (leaves excluded: parameters are shared by all steps)."""

    number: int  # 1-based: the K of `--step K`
    seq: int  # the backward event
    line: int | None
    nodes: list[str]  # in creation order


@dataclass
class StepRoll:
    """Steps that built the same graph, drawn once (on `nodes`, the representative's) for all `numbers`."""

    id: str
    numbers: list[int]
    nodes: list[str]
    line: int | None
    marks: dict[str, list[int]] = field(default_factory=dict)  # representative node -> steps a finding was in

    @property
    def count(self) -> int:
        return len(self.numbers)


def _is_leaf(node: NodeRecord) -> bool:
    return node.variable is not None or node.name == "AccumulateGrad"


def split_steps(trace: Trace) -> list[Step]:
    """One `Step` per backward call that reached nodes no earlier backward had reached, in program order."""
    nodes = trace.nodes
    claimed: set[str] = set()
    steps: list[Step] = []
    for event in trace.events:
        if event.kind.value != "backward":
            continue
        roots = event.data.get("roots") or ([event.tensor] if event.tensor else [])
        stack = []
        for tid in roots:
            record = trace.tensors.get(tid)
            if record is not None and record.grad_fn in nodes:
                stack.append(record.grad_fn)
        reached: list[str] = []
        while stack:  # iterative: graphs of 20,000 nodes are normal
            nid = stack.pop()
            if nid in claimed or nid not in nodes:
                continue
            node = nodes[nid]
            if _is_leaf(node) or node.seq > event.seq:
                continue
            claimed.add(nid)
            reached.append(nid)
            stack.extend(n for n in node.next if n is not None)
        if reached:
            line = event.location.line if event.location else None
            steps.append(Step(len(steps) + 1, event.seq, line, reached))
    # what a step built but its backward did not use (an LSTM's final state, a logged metric) belongs to that step
    # too, or every step would leave its own copy of it outside the picture of the step
    ends = [s.seq for s in steps]
    for nid, node in nodes.items():
        if nid in claimed or _is_leaf(node):
            continue
        at = bisect.bisect_left(ends, node.seq)
        if at < len(steps):
            steps[at].nodes.append(nid)
    for step in steps:
        step.nodes.sort(key=lambda n: (nodes[n].seq, n))
    return steps


def _signature(trace: Trace, step: Step) -> tuple[Hashable, ...]:
    """What makes two steps the same picture: each node's kind, module, line, output shape and inputs."""
    index = {nid: i for i, nid in enumerate(step.nodes)}
    out: list[Hashable] = []
    for nid in step.nodes:
        node = trace.nodes[nid]
        tensor = trace.tensors.get(node.output) if node.output else None
        inputs: list[Hashable] = []
        for nxt in node.next:
            if nxt is None:
                inputs.append(None)
            elif nxt in index:
                inputs.append(index[nxt])
            elif nxt in trace.nodes and _is_leaf(trace.nodes[nxt]):
                inputs.append(("leaf", trace.nodes[nxt].variable or nxt))
            else:
                inputs.append("earlier")  # a value carried from an earlier step (state not detached)
        out.append(
            (
                node.name,
                node.module,
                node.created.line if node.created else None,
                tuple(tensor.shape) if tensor is not None else None,
                tuple(inputs),
            )
        )
    return tuple(out)


def roll_steps(trace: Trace, steps: list[Step], notes: Annotations) -> tuple[list[StepRoll], dict[str, str]]:
    """Group steps with equal graphs; returns the groups and node id -> its representative's node id.

    The representative is the last step of a group, unless a finding sits in only some steps: then the first of
    those, so that what is drawn is a step the finding was in. Groups of one step are returned too (drawn as a
    step of their own when the trace has several steps).
    """
    groups: dict[tuple[Hashable, ...], list[Step]] = {}
    for step in steps:
        groups.setdefault(_signature(trace, step), []).append(step)
    rolls: list[StepRoll] = []
    mapping: dict[str, str] = {}
    for members in sorted(groups.values(), key=lambda g: g[0].number):
        # a saved tensor's finding belongs to one step; cut edges repeat at one line and are drawn once anyway
        flagged = {nid for nid, _ in notes.saved}
        marked = [s for s in members if flagged.intersection(s.nodes)]
        protected = [s for s in members if notes.protected.intersection(s.nodes)]
        if marked and len(marked) < len(members):
            rep = marked[0]
        elif protected and len(protected) < len(members):
            rep = protected[0]
        else:
            rep = members[-1]
        roll = StepRoll(f"step{len(rolls)}", [s.number for s in members], list(rep.nodes), rep.line)
        for step in members:
            for offset, nid in enumerate(step.nodes):
                target = rep.nodes[offset]
                if nid in flagged:
                    roll.marks.setdefault(target, []).append(step.number)
                if nid != target:
                    mapping[nid] = target
        if len(marked) == len(members):
            roll.marks = {}  # in every step: nothing to single out
        rolls.append(roll)
    return rolls, mapping


def only_step(trace: Trace, steps: list[Step], number: int) -> set[str]:
    """The node ids to draw for `--step K`: the nodes backward K reached, and the leaves they feed from."""
    if not 1 <= number <= len(steps):
        raise ValueError(f"step {number} does not exist: the program made {len(steps)} backward call(s) with a graph")
    keep = set(steps[number - 1].nodes)
    for nid in list(keep):
        for nxt in trace.nodes[nid].next:
            if nxt is not None and nxt in trace.nodes and _is_leaf(trace.nodes[nxt]):
                keep.add(nxt)
    return keep
