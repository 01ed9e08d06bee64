"""Which writes set a model up (`nn.Linear(...)` filling its weights) rather than train or break it."""

from __future__ import annotations

from ..model import EventKind, Trace

__all__ = ["initialisation_writes", "setup_events"]


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


def setup_events(trace: Trace) -> set[int]:
    """Seqs of the events that set the model up, for views that fold them into one row: `initialisation_writes`,
    and before the first autograd graph also `param.data = ...` of a parameter (`model.to(device)`: Module._apply)
    and writes to other tensors at a line where parameters were initialised (a BatchNorm's running_mean/var and
    num_batches_tracked filled while the module is built)."""
    initial = initialisation_writes(trace)
    first_node = min((n.seq for n in trace.nodes.values()), default=None)
    places = {(e.location.file, e.location.line) for e in trace.events if e.seq in initial and e.location}
    out = set(initial)
    for event in trace.events:
        if first_node is not None and event.seq > first_node:
            break
        if event.kind is EventKind.DATA_SET:
            tensor = trace.tensors.get(event.tensor or "")
            if tensor is not None and (tensor.parameter is not None or tensor.origin == "parameter"):
                out.add(event.seq)
        elif event.kind is EventKind.INPLACE_WRITE and event.location is not None and \
                (event.location.file, event.location.line) in places:
            out.add(event.seq)
    return out
