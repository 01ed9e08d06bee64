"""The calls the recorder handles itself: `.data` (read and set), `.detach()`, `.detach_()`, `requires_grad_`, and
backward (`Tensor.backward`, `autograd.backward`, `autograd.grad`)."""

from __future__ import annotations

import threading
from typing import Any, Callable

import torch

from ..model import EventData, EventKind, VersionChange
from ..text import safe_str, type_name
from . import source
from .callsite import call as _call, caller as _caller, site as _site, torch_own
from .state import RecorderState
from .tensors import _byte_span, _flatten, _grad_fn, _grad_key, _storage_key, _Tensor, _version

# while the recorder reads tensors for its bookkeeping, torch functions go straight to their implementation
_quiet = torch._C.DisableTorchFunction

# special calls that run the program's code (backward's hooks): the lock is not held around them
# (as torch defines them: the program may bind the names to wrappers of its own, which the mode never sees as such:
# callsite.unpatched)
TENSOR_BACKWARD = torch_own(_Tensor.backward, "torch._tensor", "Tensor.backward")
AUTOGRAD_BACKWARD = torch_own(torch.autograd.backward, "torch.autograd", "backward")
AUTOGRAD_GRAD = torch_own(torch.autograd.grad, "torch.autograd", "grad")
_RUNS_PROGRAM_CODE = frozenset({TENSOR_BACKWARD, AUTOGRAD_BACKWARD, AUTOGRAD_GRAD})


class SpecialCalls(RecorderState):
    """The special-call half of the Recorder (mixed into it): each handler makes the call and records what it did."""

    # the Recorder's state and methods this half uses (recorder.py sets them up)
    _new_counter: Callable[..., str]
    _reachable: Callable[[list[Any]], tuple[list[str], list[str]]]
    _nested_watch: Callable[[list[str]], Any]
    _nested_reached: Callable[[Any], list[str]]
    _see_root: Callable[..., None]
    _window_before_backward: Callable[[], bool]

    def _where(self) -> tuple[str | None, int | None]:
        frame = source.user_frame(4)
        self._here = (frame.f_code.co_filename, _site(frame)[1]) if frame is not None else (None, None)
        self._here_loc = self._location(*self._here)
        return self._here

    def _on_data_get(self, func: Any, args: Any, kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        try:
            with _quiet():
                file, line = self._where()
                src = self._tid(args[0])
                seq = next(self._seq)
                rid = self._track(result, "data", seq, None, file, line, src, self._new_counter("data"))
                self._alias_event(EventKind.DATA_GET, "data", args[0], rid, file, line)
        except Exception as exc:
            self._internal(exc)
        return result

    def _on_detach(self, func: Any, args: Any, kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        try:
            with _quiet():
                file, line = self._where()
                src = self._tid(args[0])
                seq = next(self._seq)
                counter = self._counter_of(src)
                rid = self._track(result, "detach", seq, None, file, line, src, counter)
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
        data: EventData = {"source_grad_fn": grad_fn, "source_requires_grad": src_tensor.requires_grad}
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
            with _quiet():
                tid = self._tid(target)
                old = self._live[id(target)]
                old_storage = self._storage_ids.get(old.storage) if old.storage is not None else None
                kept = self._check.before_data_set(self, target) if self._check is not None else None
        except Exception as exc:
            self._internal(exc)
            return func(*args, **kwargs)
        result = func(*args, **kwargs)
        try:
            with _quiet():
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
                event = self._event(
                    EventKind.DATA_SET,
                    file,
                    line,
                    tensor=tid,
                    result=vid,
                    op="data",
                    data=EventData(
                        old_storage=old_storage,
                        new_storage=self._storage_ids.get(live.storage) if live.storage is not None else None,
                        byte_range=list(live.byte_range),
                    ),
                )
                if kept is not None:
                    self._check.after_data_set(kept, target, event)
        except Exception as exc:
            self._internal(exc)
        return result

    def _on_detach_(self, func: Any, args: Any, kwargs: Any) -> Any:
        target = args[0]
        try:
            with _quiet():
                tid = self._tid(target)
                fn = _grad_fn(target)
                # the history it has now: none for a tensor detached already (its record keeps the node it was made
                # by), whose second `detach_()` changes nothing autograd saved
                grad_fn = self._node(fn, output=tid) if fn is not None else None
        except Exception as exc:
            self._internal(exc)
            return func(*args, **kwargs)
        file, line = self._where()
        try:
            result = func(*args, **kwargs)
        except Exception as exc:
            self._event(EventKind.DETACH_, file, line, tensor=tid, op="detach_", data=EventData(source_grad_fn=grad_fn, error=f"{type_name(exc)}: {safe_str(exc)}"))
            raise
        try:
            with _quiet():
                self._event(EventKind.DETACH_, file, line, tensor=tid, op="detach_", data=EventData(source_grad_fn=grad_fn))
        except Exception as exc:
            self._internal(exc)
        return result

    def _on_requires_grad(self, func: Any, args: Any, kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        try:
            with _quiet():
                file, line = self._where()
                flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
                self._event(EventKind.REQUIRES_GRAD_, file, line, tensor=self._tid(args[0]), op="requires_grad_", data=EventData(requires_grad=bool(flag)))
        except Exception as exc:
            self._internal(exc)
        return result

    def _on_backward(self, func: Any, args: Any, kwargs: Any) -> Any:
        if self._window is not None and self._window_before_backward():
            return func(*args, **kwargs)  # the window just closed: this call is the program's alone
        try:
            with _quiet(), self._lock:
                file, line = self._where()
                is_grad = func is AUTOGRAD_GRAD
                roots_arg = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
                roots = _flatten((roots_arg,), None, [])
                root_ids = [self._tid(t) for t in roots]
                root_fns = [fn for fn in map(_grad_fn, roots) if fn is not None]
                reached_nodes, reached_leaves = self._reachable(root_fns)
                data, inputs = self._backward_data(func, args, kwargs, root_ids, reached_nodes, reached_leaves)
                event = self._event(EventKind.BACKWARD, file, line, tensor=root_ids[0] if root_ids else None, op=data["api"], data=data)
                self._bystanders.look()  # (once a step: the threads not recorded, seen running or not)
                self._see_root(_caller(3, func), roots, func)
                nested = self._nested_watch(reached_nodes) if not is_grad else None
                check = self._check
                measuring = check.before_backward(self, func, args, kwargs, event) if check is not None else None
        except Exception as exc:
            self._internal(exc)
            return _call(_caller(3), func, args, kwargs)
        # custom Functions' backwards this one runs record their writes against it (functions.py)
        running = (event, root_fns)
        self._backwards.append(running)
        try:
            result = _call(_caller(3), func, args, kwargs)
        except BaseException as exc:
            self._backwards = [other for other in self._backwards if other is not running]
            event.data["outcome"] = "error"
            event.data["error"] = {"type": type_name(exc), "message": safe_str(exc)}  # user code decides __str__
            if check is not None:
                try:
                    with _quiet():
                        check.backward_failed(measuring, event)
                except Exception as problem:  # never let bookkeeping replace the program's error
                    self._internal(problem)
            raise
        self._backwards = [other for other in self._backwards if other is not running]
        event.data["outcome"] = "ok"
        try:
            with _quiet(), self._lock:
                if check is not None:
                    check.after_backward(self, measuring, event, result)
                if nested:  # leaves a backward nested in this one reached (a reentrant checkpoint's recompute)
                    known = set(event.data["reached_leaves"])
                    extra = [t for t in self._nested_reached(nested) if t not in known and (inputs is None or t in inputs)]
                    if extra:
                        event.data["reached_leaves"] += extra
                        event.data["nested_leaves"] = extra
                self._note_fresh_grads(event.data["reached_leaves"])
        except Exception as exc:
            self._internal(exc)
        return result

    def _backward_data(
        self, func: Any, args: Any, kwargs: Any, root_ids: list[str], reached_nodes: list[str], reached_leaves: list[str]
    ) -> tuple[EventData, list[str] | None]:
        """A backward event's data (which API, its roots, what it reaches, its inputs) and the tensor ids of its
        `inputs=`, or None where it has none."""
        is_grad = func is AUTOGRAD_GRAD
        inputs_arg = kwargs.get("inputs")
        if is_grad:
            inputs_arg = args[1] if len(args) > 1 else inputs_arg
        inputs = [self._tid(t) for t in _flatten((inputs_arg,), None, [])] if inputs_arg is not None else None
        retain = kwargs.get("retain_graph")
        create = kwargs.get("create_graph", False)
        data: EventData = {
            "api": "autograd.grad" if is_grad else ("autograd.backward" if func is AUTOGRAD_BACKWARD else "Tensor.backward"),
            "roots": root_ids,
            "reached_nodes": reached_nodes,
            "reached_leaves": [t for t in reached_leaves if inputs is None or t in inputs],
            "inputs": inputs,
            "retain_graph": bool(retain if retain is not None else create),
        }
        if create:  # a higher-order gradient: part of computing a loss, not a training step's backward
            data["create_graph"] = True
        return data, inputs

    def _note_fresh_grads(self, reached_leaves: list[str]) -> None:
        """The gradients the tracing thread's optimizer steps read (the steps recorded: hooks.py); another thread's
        backward leaves them as they are."""
        fresh = {} if threading.get_ident() == self._thread else self._fresh_grads
        self._fresh_grads = fresh
        for tid in reached_leaves:
            live = self._by_tid.get(tid)
            leaf = live() if live is not None else None
            g = leaf.grad if leaf is not None and leaf.requires_grad else None
            if g is not None:
                fresh[tid] = _grad_key(g)
