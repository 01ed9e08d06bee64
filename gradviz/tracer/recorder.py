"""The recorder: a TorchFunctionMode that writes down tensors, storages, version counters, nodes and events."""

from __future__ import annotations

import gc
import itertools
import os
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, resolve_name

from ..model import (
    Event,
    EventKind,
    Location,
    NodeRecord,
    OpRecord,
    SavedTensorRecord,
    StorageRecord,
    TensorRecord,
    Trace,
    VersionChange,
    VersionCounterRecord,
)
from . import source

_Tensor = torch.Tensor
_DEBUG = bool(os.environ.get("GRADVIZ_DEBUG"))  # raise gradviz's own errors instead of recording them
_ACCUMULATE_GRAD = 2**64 - 1
# what a node type saves and how it is called depend only on the type: learnt once per process
_SAVED_NAMES: dict[type, tuple[str, ...]] = {}
_TYPE_NAMES: dict[type, str] = {}  # the sequence number autograd gives every AccumulateGrad node


def _version(t: torch.Tensor) -> int | None:
    try:
        return t._version
    except RuntimeError:  # inference tensors have no version counter
        return None


def _grad_fn(t: torch.Tensor) -> Any:
    """t.grad_fn, or None where reading it raises (a no_grad view whose base was later written in place)."""
    try:
        return t.grad_fn
    except RuntimeError:
        return None


_dtype_names: dict[torch.dtype, str] = {}
_device_names: dict[torch.device, str] = {}


def _dtype_name(dtype: torch.dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return name


def _device_name(device: torch.device) -> str:
    name = _device_names.get(device)
    if name is None:
        name = _device_names[device] = str(device)
    return name


def _flatten(args: Any, kwargs: dict[str, Any] | None, out: list[torch.Tensor]) -> list[torch.Tensor]:
    for a in args:
        if isinstance(a, _Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            _flatten(a, None, out)
    if kwargs:
        _flatten(kwargs.values(), None, out)
    return out


def _byte_span(t: torch.Tensor) -> tuple[int, int]:
    item = t.element_size()
    start = t.storage_offset() * item
    numel = t.numel()
    if numel == 0:
        return (start, start)
    if t.is_contiguous():
        return (start, start + numel * item)
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return (start, start + span * item)


def _storage_key(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, functional wrappers
        return None


class _Live:
    """What the recorder keeps about a tensor while it is alive: a weak reference, never the tensor."""

    __slots__ = ("ref", "tid", "storage", "byte_range", "version", "layout", "record")

    def __init__(
        self, ref: weakref.ref, tid: str, storage: int | None, byte_range: Any, version: int | None, layout: Any, record: TensorRecord
    ):
        self.ref = ref
        self.tid = tid
        self.storage = storage
        self.byte_range = byte_range
        self.version = version
        self.layout = layout
        self.record = record


class Recorder(TorchFunctionMode):
    """Records every torch call made while active. Build a Trace with :meth:`finish`."""

    def __init__(self) -> None:
        super().__init__()
        self.trace = Trace(torch_version=torch.__version__)
        self._node_ids: dict[Any, str] = {}  # node identity (see _node_key) -> node id
        self._first_sequence_nr = 0  # autograd's next node number when tracing began
        self._gc_threshold: tuple[int, ...] | None = None  # the program's GC thresholds, while we hold them
        self._steps: dict[int, list[Any]] = {}  # id(optimizer) -> parameters' state before its step
        self._fresh_grads: dict[str, tuple[int, int | None]] = {}  # leaf -> its .grad right after the last backward
        self._by_tid: dict[str, _Live] = {}
        self._seq = itertools.count()
        self._live: dict[int, _Live] = {}  # id(tensor) -> live entry
        self._by_storage: dict[int, set[int]] = {}  # storage key -> ids of live tensors in it
        self._storage_ids: dict[int, str] = {}
        self._layout: dict[tuple[Any, ...], str] = {}
        self._layouts_of: dict[int, list[tuple[Any, ...]]] = {}  # storage key -> its layouts in _layout
        self._node_count = 0
        self._saved_names = _SAVED_NAMES
        self._type_names = _TYPE_NAMES
        self._paused = 0
        self._module_names: dict[int, str] = {}
        self._module_stack: list[str] = []
        self._finished = False
        self._refs: dict[weakref.ref, int] = {}
        self._locations: dict[tuple[str, int], Location] = {}
        self._here: tuple[str | None, int | None] = (None, None)  # user file and line of the current call
        self._named_roots: set[int] = set()
        self._handles: list[Any] = []
        self.internal_errors = self.trace.internal_errors
        self._special: dict[Any, Callable[..., Any]] = {
            _Tensor.data.__get__: self._on_data_get,
            _Tensor.data.__set__: self._on_data_set,
            _Tensor.detach: self._on_detach,
            _Tensor.detach_: self._on_detach_,
            _Tensor.requires_grad_: self._on_requires_grad,
            _Tensor.requires_grad.__set__: self._on_requires_grad,
            _Tensor.backward: self._on_backward,
            torch.autograd.backward: self._on_backward,
            torch.autograd.grad: self._on_backward,
        }

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._handles = [
            register_module_forward_pre_hook(self._module_pre),
            register_module_forward_hook(self._module_post, always_call=True),
            register_optimizer_step_pre_hook(self._step_pre),
            register_optimizer_step_post_hook(self._step_post),
        ]
        # Objects alive now (torch's own, the program's so far) move to the permanent generation while tracing, so
        # the collections our records trigger do not rescan them; they return to the oldest generation at stop.
        self._first_sequence_nr = torch._C._autograd._get_sequence_nr()
        gc.freeze()
        # The records made per call would otherwise trigger a young-generation collection every few hundred calls;
        # collect less often while tracing (the program's cyclic garbage is still collected, a little later).
        self._gc_threshold = gc.get_threshold()
        gc.set_threshold(max(self._gc_threshold[0], 20_000), *self._gc_threshold[1:])
        self.__enter__()

    def stop(self) -> None:
        self.__exit__(None, None, None)
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)
            self._gc_threshold = None
            gc.unfreeze()
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def finish(self) -> Trace:
        """Stop watching tensors (their records stay) and collect the source text events point at."""
        if self._finished:
            return self.trace
        self._finished = True
        self._live.clear()
        self._by_tid.clear()
        self._fresh_grads.clear()
        self._by_storage.clear()
        for path in {e.location.file for e in self.trace.events if e.location} | (
            {self.trace.script} if self.trace.script else set()
        ):
            text = "".join(source.linecache.getlines(path))
            if text:
                self.trace.sources[path] = text
        return self.trace

    # ------------------------------------------------------------------ the hot path
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        if self._paused:
            return func(*args, **kwargs)
        special = self._special.get(func)
        if special is not None:
            return special(func, args, kwargs)
        inputs = _flatten(args, kwargs, [])
        before = [_version(t) for t in inputs]
        result = func(*args, **kwargs)
        try:
            self._after_call(func, inputs, before, result)
        except Exception as exc:  # never let bookkeeping break the user's program
            self._internal(exc)
        return result

    def _after_call(self, func: Any, inputs: list[torch.Tensor], before: list[int | None], result: Any) -> None:
        written = [t for t, v in zip(inputs, before) if v is not None and _version(t) != v]
        if isinstance(result, _Tensor):
            outputs = [result]
        elif isinstance(result, (list, tuple)):
            outputs = _flatten(result, None, [])
        else:
            outputs = []
        if not outputs and not written:
            return
        frame = source.user_frame(3)
        file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
        self._here = (file, line)
        name = _func_name(func)
        seq = next(self._seq)
        in_ids = [self._track(t, "input", seq=seq, file=file, line=line) for t in inputs]
        if written:
            versions_before = {id(t): v for t, v in zip(inputs, before)}
            for t in written:
                self._record_write(t, versions_before[id(t)], name, file, line)
        out_ids = []
        for t in outputs:
            if id(t) in self._live:
                out_ids.append(self._live[id(t)].tid)
            else:
                out_ids.append(self._track(t, "op", seq=seq, op=name, file=file, line=line))
        self.trace.ops.append(OpRecord(seq, name, in_ids, out_ids, line, file))

    def _internal(self, exc: BaseException) -> None:
        if _DEBUG:
            raise exc
        if len(self.internal_errors) < 20:
            self.internal_errors.append(f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ tensors
    def _tid(self, t: torch.Tensor) -> str:
        live = self._live.get(id(t))
        return live.tid if live is not None else self._track(t, "input")

    def _track(
        self,
        t: torch.Tensor,
        origin: str,
        *,
        seq: int | None = None,
        op: str | None = None,
        source_tid: str | None = None,
        counter: str | None = None,
        file: str | None = None,
        line: int | None = None,
    ) -> str:
        key = id(t)
        live = self._live.get(key)
        if live is not None:
            return live.tid
        trace = self.trace
        tid = f"t{len(trace.tensors)}"
        if seq is None:
            seq = next(self._seq)
        skey = _storage_key(t)
        sid = None
        byte_range = None
        layout = None
        dtype = _dtype_name(t.dtype)
        device = t.device
        if skey is not None:
            sid = self._storage_ids.get(skey)
            if sid is None:
                sid = f"s{len(trace.storages)}"
                self._storage_ids[skey] = sid
                storage = t.untyped_storage()
                ptr = storage.data_ptr() if device.type != "meta" else 0
                trace.storages[sid] = StorageRecord(sid, _device_name(device), storage.nbytes(), ptr, dtype)
            byte_range = _byte_span(t)
            layout = (sid, t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        inference = t.is_inference()
        version = None if inference else _version(t)
        if inference:
            counter = None
        elif counter is None:
            base = t._base if t._is_view() else None
            if base is not None:
                counter = self._counter_of(self._tid(base))
                source_tid = source_tid or self._live[id(base)].tid
                origin = "view" if origin == "op" else origin
            else:
                counter = self._new_counter()
        if counter is not None:
            trace.version_counters[counter].tensors.append(tid)
        if file is None:
            file, line = self._here
        record = TensorRecord(
            id=tid,
            shape=list(t.shape),
            dtype=dtype,
            device=_device_name(device),
            requires_grad=t.requires_grad,
            is_leaf=t.is_leaf,
            grad_fn=None,
            storage=sid,
            byte_range=byte_range,
            version_counter=counter,
            version=version,
            origin=origin,
            seq=seq,
            source=source_tid,
            op=op,
            created=self._location(file, line),
            is_inference=inference,
        )
        trace.tensors[tid] = record
        ref = weakref.ref(t, self._on_dead)
        live = _Live(ref, tid, skey, byte_range, version, layout, record)
        self._live[key] = live
        self._by_tid[tid] = live
        self._refs[ref] = key
        if skey is not None:
            members = self._by_storage.get(skey)
            if members is None:
                self._by_storage[skey] = {key}
            else:
                members.add(key)
            if layout not in self._layout:
                self._layouts_of.setdefault(skey, []).append(layout)
            self._layout[layout] = tid
        fn = _grad_fn(t)
        if fn is not None:
            record.grad_fn = self._node(fn, output=None if origin == "saved" else tid, fresh=origin == "op")
        return tid

    def _on_dead(self, ref: weakref.ref) -> None:
        """A tracked tensor was freed: forget it (its record stays) and retire its storage if it was the last."""
        key = self._refs.pop(ref, None)
        if key is None or self._finished:
            return
        live = self._live.pop(key, None)
        if live is None:
            return
        self._by_tid.pop(live.tid, None)
        live.record.freed = next(self._seq)
        skey = live.storage
        if skey is not None:
            members = self._by_storage.get(skey)
            if members is not None:
                members.discard(key)
                if not members:
                    # the storage may be freed and its address reused: a later tensor there is new memory
                    del self._by_storage[skey]
                    self._storage_ids.pop(skey, None)
                    # layouts stay known while their storage lives (saved views of a weight are unpacked afresh
                    # every time and must match the same record); they go with it
                    for layout in self._layouts_of.pop(skey, ()):
                        self._layout.pop(layout, None)

    def _location(self, file: str | None, line: int | None) -> Location | None:
        """One shared Location per source line."""
        if file is None or line is None:
            return None
        where = (file, line)
        loc = self._locations.get(where)
        if loc is None:
            loc = self._locations[where] = source.make_location(file, line)
        return loc

    def _new_counter(self, created_by: str = "new") -> str:
        cid = f"v{len(self.trace.version_counters)}"
        self.trace.version_counters[cid] = VersionCounterRecord(cid, created_by=created_by)
        return cid

    def _counter_of(self, tid: str) -> str | None:
        return self.trace.tensors[tid].version_counter

    def _merge_counters(self, keep: str, gone: str) -> None:
        """Observed behaviour says two counters are one: fold `gone` into `keep`."""
        counters = self.trace.version_counters
        for tid in counters[gone].tensors:
            self.trace.tensors[tid].version_counter = keep
            counters[keep].tensors.append(tid)
        counters[keep].created_by = "inferred" if counters[keep].created_by == "new" else counters[keep].created_by
        counters[gone].tensors = []

    # ------------------------------------------------------------------ writes
    def _record_write(self, t: torch.Tensor, before: int | None, op: str, file: str | None, line: int | None) -> None:
        live = self._live[id(t)]
        tid = live.tid
        after = _version(t)
        changes = [VersionChange(tid, before, after)]
        counter = self._counter_of(tid)
        live.version = after
        start, stop = live.byte_range or (0, 0)
        for key in sorted(self._by_storage.get(live.storage, ()), key=lambda k: int(self._live[k].tid[1:])):
            other = self._live.get(key)
            if other is None or other is live:
                continue
            alias = other.ref()
            if alias is None:
                continue
            lo, hi = other.byte_range or (0, 0)
            if not (lo < stop and start < hi) and start != stop:
                continue
            now = _version(alias)
            changes.append(VersionChange(other.tid, other.version, now))
            other_counter = self._counter_of(other.tid)
            if (
                now != other.version
                and now == after
                and counter is not None
                and other_counter is not None
                and other_counter != counter
            ):
                self._merge_counters(counter, other_counter)
            other.version = now
        data: dict[str, Any] = {
            "storage": self._storage_ids.get(live.storage) if live.storage is not None else None,
            "byte_range": [start, stop],
            "counter": counter,
        }
        fn = _grad_fn(t)
        if fn is not None:  # an in-place op on a graph tensor gives it a new grad_fn
            data["grad_fn"] = self._node(fn)
        self._event(EventKind.INPLACE_WRITE, file, line, tensor=tid, op=op, versions=changes, data=data)

    def _event(self, kind: EventKind, file: str | None, line: int | None, **fields: Any) -> Event:
        loc = source.make_location(file, line) if file is not None and line is not None else None
        event = Event(seq=next(self._seq), kind=kind, location=loc, **fields)
        self.trace.events.append(event)
        if loc is not None:
            self._name_from_frame_at(loc)
        return event

    def _name_from_frame_at(self, loc: Location) -> None:
        frame = source.user_frame(3)
        while frame is not None and (frame.f_code.co_filename != loc.file or frame.f_lineno != loc.line):
            frame = frame.f_back
        if frame is not None:
            self.name_locals(source.frame_variables(frame))

    def name_locals(self, namespace: dict[str, Any], *, modules: bool = False) -> None:
        """Give tracked tensors found in `namespace` (a frame's locals or a module's globals) their names.

        With `modules`, also name the parameters of the nn.Modules found there that were never called (a frozen
        module handed to an optimizer): only at the end, when no module is still half-built.
        """
        for name, value in list(namespace.items()):
            if name.startswith("__"):
                continue
            if isinstance(value, _Tensor):
                live = self._live.get(id(value))
                if live is not None and live.ref() is value:
                    names = self.trace.tensors[live.tid].names
                    if name not in names:
                        names.append(name)
            elif modules and isinstance(value, torch.nn.Module):
                for param_name, param in value.named_parameters():
                    live = self._live.get(id(param))
                    if live is not None and live.ref() is param and live.record.parameter is None:
                        live.record.parameter = param_name
                        live.record.origin = "parameter"

    # ------------------------------------------------------------------ special calls
    def _where(self) -> tuple[str | None, int | None]:
        frame = source.user_frame(4)
        self._here = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
        return self._here

    def _on_data_get(self, func: Any, args: Any, kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        try:
            file, line = self._where()
            src = self._tid(args[0])
            seq = next(self._seq)
            rid = self._track(result, "data", seq=seq, source_tid=src, counter=self._new_counter("data"), file=file, line=line)
            self._alias_event(EventKind.DATA_GET, "data", args[0], rid, file, line)
        except Exception as exc:
            self._internal(exc)
        return result

    def _on_detach(self, func: Any, args: Any, kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        try:
            file, line = self._where()
            src = self._tid(args[0])
            seq = next(self._seq)
            counter = self._counter_of(src)
            rid = self._track(result, "detach", seq=seq, source_tid=src, counter=counter, file=file, line=line)
            self._alias_event(EventKind.DETACH, "detach", args[0], rid, file, line)
        except Exception as exc:
            self._internal(exc)
        return result

    def _alias_event(
        self, kind: EventKind, attribute: str, src_tensor: torch.Tensor, rid: str, file: str | None, line: int | None
    ) -> None:
        src = self._tid(src_tensor)
        # the source's grad_fn now, which an in-place op may have changed since it was first seen
        fn = _grad_fn(src_tensor)
        grad_fn = self._node(fn) if fn is not None else None
        version = self.trace.tensors[rid].version
        data: dict[str, Any] = {"source_grad_fn": grad_fn, "source_requires_grad": src_tensor.requires_grad}
        event = self._event(kind, file, line, tensor=src, result=rid, op=attribute, data=data)
        event.versions = [VersionChange(src, _version(src_tensor), _version(src_tensor)), VersionChange(rid, version, version)]
        if event.location is not None:
            target = source.assigned_name(event.location.code, attribute)
            names = self.trace.tensors[rid].names
            if target and target not in names:
                names.append(target)
            expr = source.alias_expression(event.location.code, attribute)
            if expr:
                data["expression"] = expr

    def _on_data_set(self, func: Any, args: Any, kwargs: Any) -> Any:
        target, value = args[0], args[1]
        try:
            tid = self._tid(target)
            old = self._live[id(target)]
            old_storage = self._storage_ids.get(old.storage) if old.storage is not None else None
        except Exception as exc:
            self._internal(exc)
            return func(*args, **kwargs)
        result = func(*args, **kwargs)
        try:
            file, line = self._where()
            vid = self._tid(value) if isinstance(value, _Tensor) else None
            live = self._live[id(target)]
            if live.storage is not None:
                self._by_storage.get(live.storage, set()).discard(id(target))
            live.storage = _storage_key(target)
            live.byte_range = _byte_span(target)
            if live.storage is not None:
                self._by_storage.setdefault(live.storage, set()).add(id(target))
                if live.storage not in self._storage_ids:
                    self._track(target.detach(), "input")  # registers the new storage
            self._event(
                EventKind.DATA_SET,
                file,
                line,
                tensor=tid,
                result=vid,
                op="data",
                data={
                    "old_storage": old_storage,
                    "new_storage": self._storage_ids.get(live.storage) if live.storage is not None else None,
                    "byte_range": list(live.byte_range),
                },
            )
        except Exception as exc:
            self._internal(exc)
        return result

    def _on_detach_(self, func: Any, args: Any, kwargs: Any) -> Any:
        target = args[0]
        try:
            tid = self._tid(target)
            grad_fn = self.trace.tensors[tid].grad_fn
            fn = _grad_fn(target)
            if fn is not None:
                grad_fn = self._node(fn, output=tid)
        except Exception as exc:
            self._internal(exc)
            return func(*args, **kwargs)
        file, line = self._where()
        try:
            result = func(*args, **kwargs)
        except Exception as exc:
            self._event(EventKind.DETACH_, file, line, tensor=tid, op="detach_", data={"source_grad_fn": grad_fn, "error": f"{type(exc).__name__}: {exc}"})
            raise
        try:
            self._event(EventKind.DETACH_, file, line, tensor=tid, op="detach_", data={"source_grad_fn": grad_fn})
        except Exception as exc:
            self._internal(exc)
        return result

    def _on_requires_grad(self, func: Any, args: Any, kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        try:
            file, line = self._where()
            flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
            self._event(EventKind.REQUIRES_GRAD_, file, line, tensor=self._tid(args[0]), op="requires_grad_", data={"requires_grad": bool(flag)})
        except Exception as exc:
            self._internal(exc)
        return result

    def _on_backward(self, func: Any, args: Any, kwargs: Any) -> Any:
        try:
            file, line = self._where()
            is_grad = func is torch.autograd.grad
            roots_arg = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
            roots = _flatten((roots_arg,), None, [])
            root_ids = [self._tid(t) for t in roots]
            reached_nodes, reached_leaves = self._reachable([fn for fn in map(_grad_fn, roots) if fn is not None])
            inputs_arg = kwargs.get("inputs")
            if is_grad:
                inputs_arg = args[1] if len(args) > 1 else inputs_arg
            inputs = [self._tid(t) for t in _flatten((inputs_arg,), None, [])] if inputs_arg is not None else None
            retain = kwargs.get("retain_graph")
            create = kwargs.get("create_graph", False)
            data: dict[str, Any] = {
                "api": "autograd.grad" if is_grad else ("autograd.backward" if func is torch.autograd.backward else "Tensor.backward"),
                "roots": root_ids,
                "reached_nodes": reached_nodes,
                "reached_leaves": [t for t in reached_leaves if inputs is None or t in inputs],
                "inputs": inputs,
                "retain_graph": bool(retain if retain is not None else create),
            }
            event = self._event(EventKind.BACKWARD, file, line, tensor=root_ids[0] if root_ids else None, op=data["api"], data=data)
        except Exception as exc:
            self._internal(exc)
            return func(*args, **kwargs)
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            event.data["outcome"] = "error"
            event.data["error"] = {"type": type(exc).__name__, "message": str(exc)}
            raise
        event.data["outcome"] = "ok"
        try:
            self._fresh_grads = {}
            for tid in event.data["reached_leaves"]:
                live = self._by_tid.get(tid)
                leaf = live.ref() if live is not None else None
                g = leaf.grad if leaf is not None and leaf.requires_grad else None
                if g is not None:
                    self._fresh_grads[tid] = (id(g), _version(g))
        except Exception as exc:
            self._internal(exc)
        return result

    def _reachable(self, fns: list[Any]) -> tuple[list[str], list[str]]:
        """Node ids a backward from `fns` runs through, and the leaves it feeds: read off the recorded graph.

        Autograd graphs do not change once built (an in-place op makes a new node, which is recorded), so the
        recorded `next` lists are the live graph; walking them is much cheaper than walking the live nodes.
        """
        nodes = self.trace.nodes
        seen: set[str] = set()
        stack = [self._node(fn) for fn in fns]
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            stack.extend(nxt for nxt in nodes[nid].next if nxt is not None and nxt not in seen)
        ordered = sorted(seen, key=lambda n: int(n[1:]))
        leaves = [nodes[n].variable for n in ordered if nodes[n].variable is not None]
        return ordered, leaves  # type: ignore[return-value]

    # ------------------------------------------------------------------ autograd nodes
    def _node_key(self, fn: Any) -> Any:
        """A node's identity while it lives, read without touching it.

        Autograd numbers every node it makes (`sequence_nr`, per thread, never reused); the one exception is
        AccumulateGrad, which has the largest number and is known by the leaf it feeds.
        """
        number = fn._sequence_nr()
        if number != _ACCUMULATE_GRAD:
            return number
        return ("leaf", self._tid(fn.variable))

    def _node(self, fn: Any, output: str | None = None, *, fresh: bool = False) -> str:
        """The id of autograd node `fn`, registering it and the part of its graph not seen yet."""
        ids = self._node_ids
        key = self._node_key(fn)
        nid = ids.get(key)
        if nid is not None:
            if output is not None and self.trace.nodes[nid].output is None:
                self.trace.nodes[nid].output = output
            return nid
        nid = ids[key] = f"n{len(ids)}"
        new = [(fn, nid)]
        stack = [fn]
        while stack:
            node = stack.pop()
            for nxt, _ in node.next_functions:
                if nxt is not None:
                    nxt_key = self._node_key(nxt)
                    if nxt_key not in ids:
                        ids[nxt_key] = f"n{len(ids)}"
                        new.append((nxt, ids[nxt_key]))
                        stack.append(nxt)
        created = self._location(*self._here)
        module = self._module_stack[-1] if self._module_stack else None
        seq = next(self._seq)
        nodes = self.trace.nodes
        for node, node_id in new:  # records first: saved tensors may point back into this subgraph
            nodes[node_id] = NodeRecord(
                id=node_id,
                name=self._node_name(node),
                next=[None if nxt is None else ids[self._node_key(nxt)] for nxt, _ in node.next_functions],
                seq=seq,
                module=module,
                created=created,
            )
        for node, node_id in new:
            record = nodes[node_id]
            if record.name == "AccumulateGrad":
                variable = node.variable
                record.variable = self._track(variable, "parameter" if isinstance(variable, torch.nn.Parameter) else "input")
            else:
                # a node made before the trace began: what it saved may have been written since; version unknown
                made_before = node._sequence_nr() < self._first_sequence_nr
                record.saved = self._saved(node, output if fresh and node_id == nid else None, made_before)
        if output is not None:
            nodes[nid].output = output
        return nid

    def _node_name(self, node: Any) -> str:
        kind = type(node)
        name = self._type_names.get(kind)
        if name is None:
            name = self._type_names[kind] = node.name().removeprefix("torch::autograd::")
        return name

    def _saved(self, node: Any, output: str | None, made_before: bool = False) -> list[SavedTensorRecord]:
        """What `node` saved for backward, with versions now (it was just made: that is the version at save time)."""
        kind = type(node)
        names = self._saved_names.get(kind)
        if names is None:
            names = tuple(n[len("_raw_saved_"):] for n in dir(node) if n.startswith("_raw_saved_"))
            self._saved_names[kind] = names
        saved = []
        for name in names:
            if output is not None and name == "result":
                # the node's own output, which the caller is tracking right now: no need to unpack it
                record = self.trace.tensors[output]
                saved.append(SavedTensorRecord(name, output, record.version, True, False))
                continue
            try:
                raw = getattr(node, "_raw_saved_" + name)
            except RuntimeError:
                continue
            handles = raw if isinstance(raw, (list, tuple)) else [raw]
            for i, handle in enumerate(handles):
                label = name if len(handles) == 1 and not isinstance(raw, (list, tuple)) else f"{name}[{i}]"
                tensor = getattr(handle, "data", None)
                if tensor is None:
                    saved.append(SavedTensorRecord(label, None, None, name.startswith("result")))
                    continue
                original = id(tensor) in self._live and self._live[id(tensor)].ref() is tensor
                tid = self._match_saved(tensor)
                version = None if made_before else _version(tensor)
                saved.append(SavedTensorRecord(label, tid, version, name.startswith("result"), original))
        return saved

    def _match_saved(self, tensor: torch.Tensor) -> str:
        live = self._live.get(id(tensor))
        if live is not None and live.ref() is tensor:
            return live.tid
        skey = _storage_key(tensor)
        sid = self._storage_ids.get(skey) if skey is not None else None
        if sid is not None:
            tid = self._layout.get((sid, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride())))
            if tid is not None:
                return tid
        return self._track(tensor, "saved")

    # ------------------------------------------------------------------ modules and optimizers
    def _name_module(self, module: torch.nn.Module) -> None:
        """Qualified names, from the outermost module called, for its submodules and parameters."""
        root = type(module).__name__
        for name, sub in module.named_modules():
            self._module_names[id(sub)] = name or root
        for name, param in module.named_parameters():
            record = self.trace.tensors[self._tid(param)]
            if record.parameter is None or len(name) > len(record.parameter):
                record.parameter = name
                record.origin = "parameter"

    def _module_pre(self, module: torch.nn.Module, args: Any) -> None:
        if self._paused:
            return
        try:
            if not self._module_stack and id(module) not in self._named_roots:  # an outermost call: name its tree
                self._named_roots.add(id(module))
                self._name_module(module)
            self._module_stack.append(self._module_names.get(id(module), type(module).__name__))
        except Exception as exc:
            self._internal(exc)
            self._module_stack.append("?")

    def _module_post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self._paused:
            return
        if self._module_stack:
            self._module_stack.pop()

    def _step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._paused += 1
        try:
            state = []
            fresh = self._fresh_grads
            for group in optimizer.param_groups:
                for p in group["params"]:
                    live = self._live.get(id(p))
                    g = p.grad
                    if g is None:
                        grad = "none"
                    elif live is not None and fresh.get(live.tid) == (id(g), _version(g)):
                        # the latest backward wrote this .grad and nothing touched it since: no need to read it
                        grad = "fresh"
                    else:
                        grad = "zero" if not bool(g.any()) else "nonzero"
                    # a zero gradient moves the version but maybe not the values: keep a copy to compare
                    copy = p.detach().clone() if grad == "zero" else None
                    state.append((p, _version(p), grad, copy))
            self._steps[id(optimizer)] = state
        except Exception as exc:
            self._internal(exc)

    def _step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            state = self._steps.pop(id(optimizer), [])
            changed, grads, versions = [], {}, []
            for p, before, grad, copy in state:
                tid = self._tid(p)
                after = _version(p)
                moved = after != before and (copy is None or not torch.equal(copy, p))
                if moved:
                    changed.append(tid)
                grads[tid] = grad
                versions.append(VersionChange(tid, before, after))
                live = self._live.get(id(p))
                if live is not None:
                    live.version = after
            frame = source.user_frame(2)
            file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
            self._event(
                EventKind.OPTIMIZER_STEP,
                file,
                line,
                op=f"{type(optimizer).__name__}.step",
                versions=versions,
                data={"optimizer": type(optimizer).__name__, "changed": changed, "grads": grads},
            )
        except Exception as exc:
            self._internal(exc)
        finally:
            self._paused -= 1


_names: dict[Any, str] = {}


def _func_name(func: Any) -> str:
    """`Tensor.tanh`, `relu`, `Tensor.grad.__get__`: the public name of a torch callable (cached)."""
    try:
        return _names[func]
    except (KeyError, TypeError):
        pass
    name = resolve_name(func) or getattr(func, "__qualname__", None) or repr(func)
    name = name.removeprefix("torch.")
    try:
        _names[func] = name
    except TypeError:
        pass
    return name
