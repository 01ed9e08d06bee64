"""The facts a finding rests on, gathered once per trace for every pass: who made an alias and how it was written,
which node first used a value downstream (the passes put them in each finding's typed evidence)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..model import Event, EventKind, Trace
from .findings import CutEvidence, Evidence, SavedTensorEvidence, version_text
from .names import Namer

__all__ = ["Facts", "alias_expression", "consumer_node", "evidence_summary"]


def alias_expression(trace: Trace, event: Event, namer: Namer | None = None) -> str:
    """`x.detach()` or `out.data`, from an alias event."""
    expr = event.data.get("expression")
    if not expr and event.tensor in trace.tensors:
        expr = (namer or Namer(trace)).tensor(event.tensor)
    expr = expr or "?"
    return f"{expr}.data" if event.kind is EventKind.DATA_GET else f"{expr}.detach()"


def consumer_node(trace: Trace, tensor: str | None, *, after: int, users: dict[str, list[int]] | None = None) -> str | None:
    """The autograd node of the first op, after `after`, that used `tensor` (or a value computed from it without grad)."""
    if tensor is None:
        return None
    if users is None:
        users = _users(trace)
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


def _users(trace: Trace) -> dict[str, list[int]]:
    users: dict[str, list[int]] = defaultdict(list)  # tensor -> indexes of ops using it
    for i, op in enumerate(trace.ops):
        for tid in op.inputs:
            users[tid].append(i)
    return users


@dataclass
class Facts:
    """Indexes over one trace that evidence is read from, each built on first use."""

    trace: Trace
    _namer: Namer | None = None
    _users: dict[str, list[int]] | None = None
    _made_by: dict[str, Event] | None = None  # alias tensor -> the `.data` / `.detach()` event that made it
    _aliases: dict[str, str | None] = field(default_factory=dict)
    _accumulator: dict[str, str] | None = None  # leaf tensor -> its first AccumulateGrad node

    def accumulator(self, tid: str | None) -> str | None:
        """The AccumulateGrad node of a leaf tensor (what a cut of a leaf's value is drawn from)."""
        if self._accumulator is None:
            self._accumulator = {}
            for node in self.trace.nodes.values():
                if node.variable is not None:
                    self._accumulator.setdefault(node.variable, node.id)
        return self._accumulator.get(tid) if tid is not None else None

    @property
    def namer(self) -> Namer:
        if self._namer is None:
            self._namer = Namer(self.trace)
        return self._namer

    def consumer(self, tensor: str | None, after: int) -> str | None:
        if self._users is None:
            self._users = _users(self.trace)
        return consumer_node(self.trace, tensor, after=after, users=self._users)

    def alias_expression(self, event: Event) -> str:
        return alias_expression(self.trace, event, self.namer)

    def writer_alias(self, tid: str) -> str | None:
        """`c = out.data` for a tensor made by an alias event (`out.detach()` when it has no name of its own)."""
        if tid not in self._aliases:
            if self._made_by is None:
                self._made_by = {}
                for event in self.trace.events:
                    if event.result is not None and event.kind in (EventKind.DATA_GET, EventKind.DETACH):
                        self._made_by.setdefault(event.result, event)
            maker = self._made_by.get(tid)
            alias = None
            if maker is not None:
                made = self.alias_expression(maker)
                own = self.namer.variable(tid)
                alias = made if own is None or own == made else f"{own} = {made}"
            self._aliases[tid] = alias
        return self._aliases[tid]


def evidence_summary(evidence: Evidence, namer: Namer) -> dict[str, Any]:
    """The evidence as people read it, for every medium that shows it (SARIF `properties`, the page's document):
    tensors and nodes by their names, versions spelled by `version_text` (one spelling of "unknown")."""
    trace = namer.trace

    def tensor(tid: str | None) -> str | None:
        return namer.tensor(tid) if tid is not None and tid in trace.tensors else None

    def node(nid: str | None) -> str | None:
        return trace.nodes[nid].name if nid is not None and nid in trace.nodes else None

    if isinstance(evidence, SavedTensorEvidence):
        return {
            "type": evidence.type, "node": node(evidence.node), "saved_name": evidence.saved_name,
            "tensor": tensor(evidence.tensor), "saved_version": version_text(evidence.saved_version),
            "version_now": version_text(evidence.version_now), "write_line": evidence.write_line,
            "writer": tensor(evidence.writer), "writer_alias": evidence.writer_alias,
            "shared_counter": evidence.shared_counter,
        }
    if isinstance(evidence, CutEvidence):
        return {
            "type": evidence.type, "source_node": node(evidence.source_node),
            "alias_expression": evidence.alias_expression, "use": node(evidence.use), "line": evidence.line,
        }
    return {
        "type": evidence.type, "holder": evidence.holder_name or tensor(evidence.holder), "node": node(evidence.node),
        "growth_per_step": evidence.growth_per_step, "steps": evidence.steps, "unit": evidence.unit,
        "untraced": evidence.untraced,
    }
