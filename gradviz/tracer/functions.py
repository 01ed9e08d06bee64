"""Custom autograd.Functions: a forward seen running is tied to its node, which is recorded (with what
`ctx.save_for_backward` saved, at the versions autograd noted) as soon as `apply` has saved them, not when the program
first uses its output. While the program's backward runs that node, the writes its backward makes are recorded
(the node's own `apply`, which the engine calls, enters a BackwardWatch mode around the class's).

The mode sees no `Function.apply` call: a forward is found from the torch calls it makes (grad mode is off inside it,
and the frame below the forward is `Function.apply`'s); autograd saves what `save_for_backward` named after the forward
returns, so the node is recorded at the first call the program makes after that (nothing can write in between)."""

from __future__ import annotations

import heapq
import io
import sys
import weakref
from types import FrameType
from typing import Any

import torch
import torch.utils.checkpoint
from torch.overrides import TorchFunctionMode

from ..model import Event, Location
from . import verify
from .callsite import site as _site
from .source import frame_variables, user_frame_from
from .state import RecorderState
from .tensors import _byte_span, _flatten, _storage_key, _version
from .window import _CLOSED

_quiet = torch._C.DisableTorchFunction
_is_compiling = torch.compiler.is_compiling

# `Function.apply`'s code where it is Python (a classmethod); from torch 2.14 it is C (`_FunctionBase.apply`), which
# leaves no frame: a forward is then known by its own frame, a `forward` whose first argument is its node (the ctx)
_APPLY_FUNCTION = getattr(torch.autograd.function.Function.apply, "__func__", None)
_APPLY = getattr(_APPLY_FUNCTION, "__code__", None)
_CONTEXT = torch.autograd.function.BackwardCFunction  # a custom Function's ctx is its node
# torch.utils.checkpoint's reentrant Function: its node is tied to the `checkpoint(...)` line apart (nodes.py)
_CHECKPOINT = torch.utils.checkpoint.CheckpointFunction
_PENDING_AT_MOST = 16  # forwards that saved nothing are never finished: the oldest go


class _Forward:
    """A custom Function's forward seen running: its node (weakly), where `apply` was called, the tensors since."""

    __slots__ = ("ctx", "first_tensor", "module", "where")

    def __init__(self, ctx: Any, first_tensor: int, where: Location | None, module: str | None) -> None:
        self.ctx = weakref.ref(ctx)
        self.first_tensor = first_tensor  # tensors tracked from here on were made during the forward
        self.where = where
        self.module = module


def forward_frame(frame: FrameType | None) -> Any:
    """The frame of the custom Function forward that `frame` runs in (itself or a function it calls), or None."""
    while frame is not None:
        back = frame.f_back
        if _APPLY is not None:
            if back is not None and back.f_code is _APPLY:
                return frame
        elif _takes_its_node(frame):
            return frame
        frame = back
    return None


def _takes_its_node(frame: FrameType) -> bool:
    """Whether `frame` runs a custom Function's `forward(ctx, ...)`: its first argument is the node being made."""
    code = frame.f_code
    if code.co_name != "forward" or code.co_argcount < 1:
        return False
    return isinstance(frame_variables(frame).get(code.co_varnames[0]), _CONTEXT)


class FunctionRecording(RecorderState):
    """The custom-Function half of the Recorder (mixed into it; uses its nodes, tensors and locations)."""

    # the Recorder's state and methods this half uses (recorder.py sets them up)
    _forwards: list[_Forward]
    _applied: set[str]  # nodes recorded when their apply saved: their backward is called through _Backward

    def _watch_backward(self, ctx: Any) -> BackwardWatch | None:
        """The watch for a recorded Function's backward, run by the program's backward now running through it."""
        if self._paused >= _CLOSED:
            return None
        nid = self._node_ids.get(ctx._sequence_nr())
        if nid is None:
            return None
        for running in reversed(self._backwards):
            if nid in running[0].data.get("reached_nodes", ()):
                return BackwardWatch(self, ctx, nid, running)
        return None

    def _see_forward(self, frame: FrameType) -> None:
        """A call made with grad mode off, from `frame`: if a custom Function's forward runs there, note it."""
        forward = forward_frame(frame)
        if forward is None:
            return
        code = forward.f_code
        if not code.co_argcount:
            return
        ctx = frame_variables(forward).get(code.co_varnames[0])
        # (a Function with setup_context gets no ctx in forward: its node is recorded where it is first met)
        if not isinstance(ctx, _CONTEXT) or getattr(ctx, "_forward_cls", None) is _CHECKPOINT:
            return
        if not any(ctx.needs_input_grad):  # applied to nothing that requires grad: no node to record
            return
        for pending in self._forwards:
            if pending.ctx() is ctx:
                return
        if ctx._sequence_nr() in self._node_ids:
            return
        apply = forward.f_back
        user = user_frame_from(apply.f_back)
        where = self._location(user.f_code.co_filename, _site(user)[1]) if user is not None else None
        module = self._running_module(apply)[0]
        if len(self._forwards) >= _PENDING_AT_MOST:
            del self._forwards[0]
        self._forwards.append(_Forward(ctx, len(self.trace.tensors), where, module))

    def _end_forwards(self) -> None:
        """Before any call: record the nodes of the forwards whose `apply` has saved their tensors since."""
        keep = []
        for pending in self._forwards:
            ctx = pending.ctx()
            if ctx is None:
                continue
            try:
                saved = ctx._raw_saved_tensors
            except RuntimeError:  # freed already (a backward ran through it): too late to say what it saved then
                continue
            if not saved:
                # still running, or done having saved nothing (then only its line is missed; grad mode is back on)
                if ctx.to_save is not None or not torch.is_grad_enabled():
                    keep.append(pending)
                continue
            try:
                self._forward_done(ctx, pending)
            except Exception as exc:  # never let bookkeeping break the user's program
                self._internal(exc, "autograd.Function")
        self._forwards = keep

    def _forward_done(self, ctx: Any, pending: _Forward) -> None:
        """Record the node of a forward whose apply has just saved: what it saved, at the versions autograd took."""
        known = ctx._sequence_nr() in self._node_ids
        nid = self._node(ctx)
        record = self.trace.nodes[nid]
        if not known:  # made by `apply` at the program's line, inside the module running there
            record.created, record.module = pending.where, pending.module
            # its backward is called through the node's own `apply` (an instance attribute, which the engine reads)
            ctx.apply = _Backward(ctx, self)
            self._applied.add(nid)
        tensors = self.trace.tensors
        for k in range(pending.first_tensor, len(tensors)):
            # the forward's outputs: tracked while it ran, before apply gave them this node
            tid = f"t{k}"
            live = self._by_tid.get(tid)
            t = live() if live is not None else None
            if t is not None and t.grad_fn is ctx:
                tensor = tensors[tid]
                tensor.grad_fn, tensor.requires_grad, tensor.is_leaf = nid, True, False
                if record.output is None:
                    record.output = tid


class _Backward:
    """Put on a recorded Function's node as its own `apply`, which autograd's engine calls to run its backward: the
    class's `apply` runs with a BackwardWatch entered (the recorder's mode is off while the program's backward runs).
    Holds the node and the recorder weakly; once tracing has ended it is the class's `apply` and nothing more."""

    __slots__ = ("ctx", "recorder")

    def __init__(self, ctx: Any, recorder: Any) -> None:
        self.ctx = weakref.ref(ctx)
        self.recorder = weakref.ref(recorder)

    def __call__(self, *grads: Any) -> Any:
        ctx, recorder = self.ctx(), self.recorder()
        if ctx is None:  # (the engine holds the node while it runs it: not reached)
            raise RuntimeError("autograd.Function node freed while its backward was called")
        apply = type(ctx).apply
        if sys.getprofile() is verify.tripwire:  # --verify's measuring run (verify.py): this backward a second time
            return _measured(apply, ctx, grads)
        watch = recorder._watch_backward(ctx) if recorder is not None else None
        if watch is None:
            return apply(ctx, *grads)
        with watch:
            return apply(ctx, *grads)


class _NoWrites(TorchFunctionMode):
    """Around a custom backward run again by --verify's measurement: an in-place write there would be made twice,
    so the first one stops the measurement before it is made."""

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (name.endswith("_") and not name.endswith("__")) or name in _WRITES or "out" in kwargs:
            user = user_frame_from(sys._getframe(1))
            where = (user.f_code.co_filename, user.f_lineno) if user is not None else ("<unknown>", 0)
            raise verify.WriteWouldRepeat(f"the in-place `{name}` of {self.node}'s backward", *where)
        return func(*args, **kwargs)


_WRITES = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__set__", "copy_"})


def _measured(apply: Any, ctx: Any, grads: tuple[Any, ...]) -> Any:
    """The node's backward in --verify's measuring run: its Python code runs (the profile function that stops at
    the first line of a program's hook is off meanwhile), but writes nothing in place and prints nothing."""
    out, err = sys.stdout, sys.stderr
    sys.setprofile(None)
    sys.stdout = sys.stderr = io.StringIO()  # what it prints, the program printed already (or will, once)
    try:
        # (the measurement runs inside the recorder's bookkeeping, where torch functions are off: on, as for the program)
        with torch._C._EnableTorchFunction(), _NoWrites(type(ctx).__name__):
            return apply(ctx, *grads)
    finally:
        sys.stdout, sys.stderr = out, err
        sys.setprofile(verify.tripwire)


def _released(node: Any, names: tuple[tuple[str, str, bool], ...] | None) -> bool:
    """Whether a backward has run `node` and freed what it saved (autograd's own record of it)."""
    try:
        if isinstance(node, _CONTEXT):
            node._raw_saved_tensors  # noqa: B018 (raises once freed)
            return False
        for _, attribute, _ in names or ():
            handle = getattr(node, attribute)
            handle = handle[0] if isinstance(handle, (list, tuple)) and handle else handle
            return getattr(handle, "data", None) is None
    except RuntimeError:
        return True
    return False


class BackwardWatch(TorchFunctionMode):
    """Entered while a recorded Function's backward runs inside the program's backward: the in-place writes it makes
    are recorded at their line, with the nodes of the same backward that read the written bytes later (autograd has
    not run and freed them yet)."""

    def __init__(self, recorder: Any, ctx: Any, nid: str, running: Any) -> None:
        super().__init__()
        self.recorder = recorder
        self.ctx = ctx
        self.nid = nid
        self.event, self.roots = running  # the program's backward event, its root nodes

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        recorder = self.recorder
        if func in recorder._queries or _is_compiling() or recorder._paused >= _CLOSED:
            return func(*args, **kwargs)
        with _quiet():
            inputs = _flatten(args, kwargs, [])
            try:
                with recorder._lock:
                    for t in inputs:
                        if id(t) not in recorder._live:
                            self._adopt(t)
            except Exception as exc:  # never let bookkeeping break the user's program
                recorder._internal(exc, "autograd.Function backward")
            before = [_version(t) for t in inputs]
        special = recorder._special.get(func)
        if special is not None and (special == recorder._on_data_get or special == recorder._on_detach):
            with recorder._lock:
                return special(func, args, kwargs)
        result = func(*args, **kwargs)
        with _quiet():
            written = [(t, v) for t, v in zip(inputs, before) if v is not None and _version(t) != v]
            if written:
                try:
                    with recorder._lock:
                        self._written(written, func)
                except Exception as exc:
                    recorder._internal(exc, "autograd.Function backward")
        return result

    def _adopt(self, t: torch.Tensor) -> None:
        """A tensor the backward met that the recorder does not know: what `ctx.saved_tensors` unpacked (a new
        Python object on the same version counter as the tensor saved) is tracked on that tensor's counter."""
        recorder = self.recorder
        skey = _storage_key(t)
        sid = recorder._storage_ids.get(skey) if skey is not None else None
        if sid is not None:
            span = list(_byte_span(t))
            for saved in recorder.trace.nodes[self.nid].saved:
                record = recorder.trace.tensors.get(saved.tensor) if saved.tensor is not None else None
                if (
                    record is not None
                    and record.storage == sid
                    and list(record.byte_range or ()) == span
                    and record.shape == list(t.shape)
                ):
                    recorder._track(t, "saved", counter=record.version_counter, source_tid=record.id)
                    return
        recorder._tid(t)

    def _written(self, written: list[tuple[torch.Tensor, int]], func: Any) -> None:
        recorder = self.recorder
        user = user_frame_from(sys._getframe(2))
        file, line = (user.f_code.co_filename, _site(user)[1]) if user is not None else (None, None)
        del user
        recorder._here = (file, line)
        recorder._here_loc = recorder._location(file, line)
        recorder._module_now = (None, None)
        try:
            for t, before in written:
                event = recorder._record_write(t, before, recorder._name_of(func), file, line)
                event.data["backward"] = self.event.seq
                event.data["backward_node"] = self.nid
                later = self._read_later(event)
                if later:
                    event.data["read_later"] = later
        finally:
            recorder._module_now = None

    def _read_later(self, event: Event) -> list[str]:
        """Nodes of this backward, other than the one running, that saved bytes the write changed and have not run."""
        trace = self.recorder.trace
        storage = event.data.get("storage")
        lo, hi = event.data.get("byte_range", (0, 0))
        candidates = set()
        for nid in self.event.data.get("reached_nodes", ()):
            if nid == self.nid:
                continue
            for saved in trace.nodes[nid].saved:
                record = trace.tensors.get(saved.tensor) if saved.tensor is not None else None
                span = record.byte_range if record is not None else None
                if record is not None and record.storage == storage and span and span[0] < hi and lo < span[1]:
                    candidates.add(nid)
        if not candidates:
            return []
        if self.event.data.get("retain_graph"):  # nothing is freed while the graph is kept: autograd's order says
            order = _engine_order(self.roots, self.recorder._node_ids)
            here = order.get(self.nid, -1)
            return sorted((n for n in candidates if order.get(n, -1) > here), key=lambda n: int(n[1:]))
        later = []
        ids = self.recorder._node_ids
        names = self.recorder._saved_names
        seen: set[int] = set()
        stack: list[Any] = list(self.roots)
        while stack:
            fn = stack.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            nid = ids.get(fn._sequence_nr())
            if nid in candidates and not _released(fn, names.get(type(fn))):
                later.append(nid)
            stack.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)
        return sorted(later, key=lambda n: int(n[1:]))


def _engine_order(roots: list[Any], ids: dict[Any, str]) -> dict[str, int]:
    """The order autograd's engine runs the graph below `roots` in (one ready queue, as on the CPU): a node once every
    node that feeds it has run, the one made last first (AccumulateGrad before all). Recorded node id -> position."""
    feeding: dict[int, int] = {}
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                feeding[id(nxt)] = feeding.get(id(nxt), 0) + 1
                stack.append(nxt)
    ready = [(-fn._sequence_nr(), k, fn) for k, fn in enumerate(roots) if not feeding.get(id(fn))]
    heapq.heapify(ready)
    order: dict[str, int] = {}
    count = len(ready)
    while ready:
        _, _, fn = heapq.heappop(ready)
        nid = ids.get(fn._sequence_nr())
        if nid is not None and nid not in order:
            order[nid] = len(order)
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                feeding[id(nxt)] -= 1
                if not feeding[id(nxt)]:
                    count += 1
                    heapq.heappush(ready, (-nxt._sequence_nr(), count, nxt))
    return order
