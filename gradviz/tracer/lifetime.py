"""What graph-lifetime analysis needs from the tracer: when the program stopped running, so tensors released with
its variables afterwards count as alive at its end (the loop variable, `total_loss`, a list of losses), and which
tensors a graph saved as they are the program itself still held then."""

from __future__ import annotations

import collections
import gc
import types
import weakref
from typing import Any

import torch


def mark_end(recorder: Any) -> None:
    """Called when tracing stops, before the program's namespace is let go: a seq of its own marks the end."""
    if recorder.trace.ended is None:
        recorder.trace.ended = next(recorder._seq)
        _settle_let_go(recorder)
        mark_held(recorder)


def _settle_let_go(recorder: Any) -> None:
    """Values let go of where recording stopped and freed since (a loop variable rebound in a step not traced, an
    attribute overwritten): the trace keeps them alive at the end of what was recorded (they stand for the same
    line's values the untraced steps made), and names them in `gone_untraced` with where they were let go of, so the
    analysis does not count two of them, let go of at two ends of recording, as two graphs alive at once."""
    trace = recorder.trace
    gone = {tid: seq for ref, tid, seq in recorder._let_go.values() if ref() is None and trace.tensors[tid].freed is None}
    trace.gone_untraced = {tid: gone[tid] for tid in sorted(gone, key=lambda t: trace.tensors[t].seq)}


_FEW = 16  # a line with more values alive at the end than this is not a handful of variables: not asked about


def watch_stored(recorder: Any, lives: Any, seq: int) -> None:
    """Before the recorder lets go of tensors it tracks (`lives`: where the step window closes, where a re-armed step
    ends), a weak reference to the latest value of each line that has a graph: the end of the run looks into what
    holds it then (mark_held), for the same line's values from steps not traced (one validation batch traced, three
    in `val_history` at the end). `seq`: where recording stopped, the time a value freed later is freed at in the trace
    (_settle_let_go)."""
    latest: dict[tuple[str | None, int | None], Any] = {}
    for live in lives:
        record = live.record
        if record.grad_fn is None or record.origin == "saved" or record.created is None:
            continue
        tensor = live()
        if tensor is not None:  # traced, so never counted among the values of steps not traced
            recorder._let_go[live.key] = (weakref.ref(tensor), live.tid, seq)
        tensor = None
        where = (record.created.file, record.created.line)
        if where not in latest or latest[where].record.seq < record.seq:
            latest[where] = live
    for live in latest.values():
        tensor = live()
        if tensor is not None:
            recorder._kin_watch[live.tid] = weakref.ref(tensor)
        del tensor


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
    candidates, ids, kin_asked = _asked(recorder)
    if not candidates:
        return
    held: dict[str, str] = {}
    kin: dict[str, int] = {}
    # get_referrers compares each reference with every candidate: for many, one pass over the objects is linear.
    # Python 3.13 copies the arguments of the call into a tuple the collector tracks, which get_referrers finds
    # referring to every candidate (and every tensor asked about seemed stored); a marker of ours first in that
    # tuple tells it from the program's own tuples, on any Python
    marker = object()
    referrers = gc.get_referrers(marker, *candidates) if len(candidates) <= _FEW else gc.get_objects()
    for referrer in referrers:
        # (the object's type, never isinstance: an object may answer `__class__` itself, with a warning the program
        # would not have printed: torch.distributed's deprecated `reduce_op`)
        cls = type(referrer)
        if referrer is candidates or issubclass(cls, _NOT_ASKED) or _ours(referrer, marker):
            # this search's own list and arguments, frames still running (ours), tensors (a view's base), and module
            # objects (their variables are their namespace dict's, asked apart): on Python 3.12 (3.12.1 seen) the
            # referents of the `_asyncio` module include its free list's freed memory, and taking them hangs the
            # program's next collection (CPython gh-122695)
            continue
        # a module's namespace (the program's globals) holds variables; any other object is a container
        kind = "names" if issubclass(cls, dict) and "__builtins__" in referrer else "objects"
        referents = gc.get_referents(referrer)
        for obj in referents:
            tid = ids.get(id(obj))
            if tid is not None and held.get(tid) != "objects":
                held[tid] = kind
            if tid in kin_asked and kind == "objects" and _growing(referrer):
                kin[tid] = max(kin.get(tid, 0), _untraced_kin(recorder, trace.nodes[trace.tensors[tid].grad_fn].name,
                                                              referents))
    candidates.clear()
    trace.held_at_end = {tid: held[tid] for tid in sorted(held, key=lambda t: trace.tensors[t].seq)}
    trace.untraced_kin = {tid: kin[tid] for tid in sorted(kin, key=lambda t: trace.tensors[t].seq) if kin[tid]}


_NOT_ASKED = (types.FrameType, torch.Tensor, types.ModuleType)


def _asked(recorder: Any) -> tuple[list[Any], dict[int, str], set[str]]:
    """The tensors mark_held asks about, alive (their id -> tensor id), and of those the ones whose containers are
    looked into for more of their kind (untraced_kin)."""
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
    # values the recorder let go of where recording stopped (the window's end, a re-armed step's end): still alive,
    # their containers are looked into for more of their kind that steps not traced made (untraced_kin)
    kin_asked: set[str] = set()
    for tid, ref in getattr(recorder, "_kin_watch", {}).items():
        tensor = ref()
        if tensor is not None and id(tensor) not in ids:
            candidates.append(tensor)
            ids[id(tensor)] = tid
        kin_asked.add(tid)
    tensor = None
    return candidates, ids, kin_asked


def _growing(container: object) -> bool:
    """A container a loop adds to, one value per step: a list, a deque, a set, a dict keyed by step numbers
    (`history[step] = loss`). Not an object's attributes or a dict of named metrics (`{"val": loss, "train": ...}`):
    one value per name, however long the run, where another name's value of the same kind is no second step."""
    if issubclass(type(container), (list, collections.deque, set)):
        return True
    return type(container) is dict and not all(type(key) is str for key in container)


def _untraced_kin(recorder: Any, node_name: str, referents: list[Any]) -> int:
    """How many tensors among a container's `referents` have an autograd history the recorder never saw, ending in a
    node of the same type as the traced value's (`NllLossBackward0`): the same line's values from steps not traced."""
    count = 0
    live_of = recorder._live.get
    let_go = recorder._let_go
    with torch._C.DisableTorchFunctionSubclass():  # (reading grad_fn runs no subclass's __torch_function__)
        for obj in referents:
            if not isinstance(obj, torch.Tensor):
                continue
            live = live_of(id(obj))
            if live is not None and live() is obj:
                continue  # one the recorder tracks: counted by the analysis itself
            gone = let_go.get(id(obj))
            if gone is not None and gone[0]() is obj:
                continue  # one it traced and let go of where recording stopped: counted too
            fn = obj.grad_fn
            if fn is not None and type(fn).__name__ == node_name:
                count += 1
    return count


def _ours(referrer: object, marker: object) -> bool:
    """The tuple of get_referrers' own arguments (see mark_held)."""
    return type(referrer) is tuple and len(referrer) > 0 and referrer[0] is marker
