"""What graph-lifetime analysis needs from the tracer: when the program stopped running, so tensors released with
its variables afterwards count as alive at its end (the loop variable, `total_loss`, a list of losses), and which
tensors a graph saved as they are the program itself still held then."""

from __future__ import annotations

import gc
import types
from typing import Any

import torch


def mark_end(recorder: Any) -> None:
    """Called when tracing stops, before the program's namespace is let go: a seq of its own marks the end."""
    if recorder.trace.ended is None:
        recorder.trace.ended = next(recorder._seq)
        mark_held(recorder)


_FEW = 16  # a line with more values alive at the end than this is not a handful of variables: not asked about


def mark_held(recorder: Any) -> None:
    """What refers to some tensors alive at the end: only the program's variables ("names"), or its objects too
    ("objects": a list, a dict, an instance's attribute). Two questions need it:

    - a node that saved a tensor as it is (an input: `h` in `h.pow(2)`) keeps that tensor's Python object alive as
      long as the node keeps it, so "alive at the end" cannot tell a tensor the program stored
      (`self.history.append(h)`) from one only its graph keeps: the ones nothing of the program refers to;
    - a few values of one line alive at the end, each in a variable of its own (`previous, last = last, loss`), are
      a fixed number however long the loop runs, unlike the same values in a list.

    One search of the collector's objects answers both. The objects alive when tracing began are frozen out of it
    (gcstate), which keeps it cheap: what the program made while traced is searched (its namespace, its lists and
    instances); a container made before (a notebook's namespace) is not, and a tensor only it holds goes
    unanswered, as before this search existed. Its cost grows with those objects once, not with them times the
    tensors asked about (a 3000-step chain whose every step saved its input: 0.15 s)."""
    trace = recorder.trace
    asked = {s.tensor for node in trace.nodes.values() for s in node.saved if s.original and s.tensor is not None}
    by_line: dict[object, list[str]] = {}
    for tid in recorder._by_tid:
        record = trace.tensors[tid]
        if record.grad_fn is not None and record.origin != "saved" and record.created is not None:
            by_line.setdefault((record.created.file, record.created.line), []).append(tid)
    asked.update(tid for tids in by_line.values() if 2 <= len(tids) <= _FEW for tid in tids)
    candidates: list[Any] = []
    ids: dict[int, str] = {}
    for tid in sorted(asked):
        live = recorder._by_tid.get(tid)
        tensor = live() if live is not None else None
        if tensor is not None and trace.tensors[tid].grad_fn is not None:
            candidates.append(tensor)
            ids[id(tensor)] = tid
    if not candidates:
        return
    held: dict[str, str] = {}
    # get_referrers compares each reference with every candidate: for many, one pass over the objects is linear.
    # Python 3.13 copies the arguments of the call into a tuple the collector tracks, which get_referrers finds
    # referring to every candidate (and every tensor asked about seemed stored); a marker of ours first in that
    # tuple tells it from the program's own tuples, on any Python
    marker = object()
    referrers = gc.get_referrers(marker, *candidates) if len(candidates) <= _FEW else gc.get_objects()
    for referrer in referrers:
        if referrer is candidates or isinstance(referrer, (types.FrameType, torch.Tensor)) or _ours(referrer, marker):
            continue  # this search's own list and arguments, frames still running (ours), tensors (a view's base)
        # a module's namespace (the program's globals) holds variables; any other object is a container
        kind = "names" if isinstance(referrer, dict) and "__builtins__" in referrer else "objects"
        for obj in gc.get_referents(referrer):
            tid = ids.get(id(obj))
            if tid is not None and held.get(tid) != "objects":
                held[tid] = kind
    candidates.clear()
    trace.held_at_end = {tid: held[tid] for tid in sorted(held, key=lambda t: trace.tensors[t].seq)}


def _ours(referrer: object, marker: object) -> bool:
    """The tuple of get_referrers' own arguments (see mark_held)."""
    return type(referrer) is tuple and len(referrer) > 0 and referrer[0] is marker
