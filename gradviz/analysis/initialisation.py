"""Which writes set a model up (`nn.Linear(...)` filling its weights) rather than train or break it."""

from __future__ import annotations

from ..model import EventKind, Trace

__all__ = ["initialisation_writes"]


def initialisation_writes(trace: Trace) -> set[int]:
    """Seqs of the in-place writes made before the program built any autograd graph, to parameters only: module
    construction and `nn.init.*_` calls. Views fold them into one row; a write after the first graph is the program's
    own and is always shown."""
    first_node = min((n.seq for n in trace.nodes.values()), default=None)
    out: set[int] = set()
    for event in trace.events:
        if first_node is not None and event.seq > first_node:
            break
        if event.kind is not EventKind.INPLACE_WRITE:
            continue
        written = [trace.tensors.get(v.tensor) for v in event.versions]
        if written and all(t is not None and (t.parameter is not None or t.origin == "parameter") for t in written):
            out.add(event.seq)
    return out
