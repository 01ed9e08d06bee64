"""Tensor bookkeeping: the tensors the recorder watches while they live (weakly), their storages, layouts and
version counters, and what is forgotten when one is freed."""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..model import StorageRecord, TensorRecord, VersionCounterRecord
from .state import RecorderState, _Live
from .tensors import _device_name, _device_names, _dtype_name, _dtype_names


def _nested_shape(t: torch.Tensor) -> list[int]:
    """A nested tensor's shape, -1 for a ragged dimension (a strided nested tensor has no sizes to ask for)."""
    try:
        return [size if type(size) is int else -1 for size in t.shape]
    except RuntimeError:
        return [t.size(0), *[-1] * (t.dim() - 1)]


class TensorTracking(RecorderState):
    """The tensor-tracking half of the Recorder (mixed into it): ids, records and live entries of tensors, storages
    and version counters."""

    # the Recorder's state and methods this half uses (recorder.py sets them up)
    _finished: bool
    _on_dead_callback: Callable[[_Live], None]  # one bound method for every weak reference

    def _tid(self, t: torch.Tensor) -> str:
        live = self._live.get(id(t))
        return live.tid if live is not None else self._track(t, "input")

    def _track(
        self,
        t: torch.Tensor,
        origin: str,
        seq: int | None = None,
        op: str | None = None,
        file: str | None = None,
        line: int | None = None,
        source_tid: str | None = None,
        counter: str | None = None,
    ) -> str:
        key = id(t)
        live = self._live.get(key)
        if live is not None:
            return live.tid
        trace = self.trace
        tid = f"t{len(trace.tensors)}"
        if seq is None:
            seq = next(self._seq)
        dtype = _dtype_names.get(t.dtype) or _dtype_name(t.dtype)
        device = t.device
        device_name = _device_names.get(device) or _device_name(device)
        nested = t.is_nested
        skey, sid, byte_range, layout = self._place(t, nested, dtype, device_name)
        try:
            version: int | None = t._version
            inference = False
        except RuntimeError:
            version = None
            inference = t.is_inference()
        if inference:
            counter = None
        elif counter is None:
            base = t._base if t._is_view() else None
            if base is not None:
                counter = self._counter_of(self._tid(base))
                source_tid = source_tid or self._live[id(base)].tid
                origin = "view" if origin == "op" else origin
            else:
                counter = f"v{len(trace.version_counters)}"
                trace.version_counters[counter] = VersionCounterRecord(counter)
        if counter is not None:
            trace.version_counters[counter].tensors.append(tid)
        if file is None:
            file, line = self._here
        # (positional, in the record's field order: the hot path)
        record = TensorRecord(
            tid, _nested_shape(t) if nested else list(t.shape), dtype, device_name, t.requires_grad, t.is_leaf, None,
            sid, byte_range, counter, version, origin, seq, [], None, source_tid, op,
            self._locations.get((file, line)) or self._location(file, line), inference,
        )
        trace.tensors[tid] = record
        self._keep_live(t, record, skey, byte_range, layout)
        try:
            fn = t.grad_fn
        except RuntimeError:  # a no_grad view whose base was later written in place
            fn = None
        if fn is not None:
            record.grad_fn = self._node(fn, None if origin == "saved" else tid, origin == "op")
        return tid

    def _place(
        self, t: torch.Tensor, nested: bool, dtype: str, device_name: str
    ) -> tuple[int | None, str | None, tuple[int, int] | None, tuple[Any, ...] | None]:
        """Where a newly tracked tensor's bytes lie: its storage's key and id (recorded when new), its byte range in
        it and its layout; all None for a tensor without one strided storage of its own."""
        try:
            storage = t.untyped_storage()
            # a nested tensor's buffer is not one strided tensor's memory: no byte range to give it
            skey: int | None = None if nested else storage._cdata
            # a wrapper subclass (DTensor) has a placeholder storage without memory: its data lives in inner tensors
            ptr = storage.data_ptr() if skey is not None and skey not in self._storage_ids and device_name != "meta" else 0
        except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, functional and subclass wrappers
            skey = None
        if skey is None:
            return None, None, None, None
        sid = self._storage_ids.get(skey)
        if sid is None:
            sid = f"s{len(self.trace.storages)}"
            self._storage_ids[skey] = sid
            self.trace.storages[sid] = StorageRecord(sid, device_name, storage.nbytes(), ptr, dtype)
        item = t.element_size()
        # (sizes are `int | SymInt` in the stubs: symbolic only while dynamo traces, when the recorder steps aside)
        offset: int = t.storage_offset()  # type: ignore[assignment]  # (SymInt: see above)
        shape = t.shape
        stride = t.stride()
        start = offset * item
        numel = t.numel()
        if numel == 0:
            byte_range: tuple[int, int] = (start, start)
        elif t.is_contiguous():
            byte_range = (start, start + numel * item)
        else:
            byte_range = (start, start + (1 + sum((n - 1) * s for n, s in zip(shape, stride))) * item)
        return skey, sid, byte_range, (sid, offset, shape, stride)

    def _keep_live(
        self, t: torch.Tensor, record: TensorRecord, skey: int | None, byte_range: Any, layout: tuple[Any, ...] | None
    ) -> None:
        """Keep a live entry for a newly tracked tensor (a weak reference: forgotten when it is freed), and note it
        among its storage's tensors and layouts."""
        key, tid = id(t), record.id
        live = _Live(t, self._on_dead_callback)
        live.tid = tid
        live.key = key
        live.storage = skey
        live.byte_range = byte_range
        live.version = record.version
        live.layout = layout
        live.record = record
        self._live[key] = live
        self._by_tid[tid] = live
        if skey is not None:
            members = self._by_storage.get(skey)
            if members is None:
                self._by_storage[skey] = {key}
            else:
                members.add(key)
            if layout not in self._layout:
                self._layouts_of.setdefault(skey, []).append(layout)  # type: ignore[arg-type]  # (set with skey)
            self._layout[layout] = tid  # type: ignore[index]  # (as above)

    def _on_dead(self, live: _Live) -> None:
        """A tracked tensor was freed: forget it (its record stays) and retire its storage if it was the last."""
        with self._lock:
            if self._finished or self._live.get(live.key) is not live:
                return
            live.record.freed = next(self._seq)
            self._forget_tensor(live)

    def _forget_tensor(self, live: _Live) -> None:
        """Stop watching a tensor (freed, or let go of where recording stops); retire its storage if it was the last."""
        key = live.key
        del self._live[key]
        self._by_tid.pop(live.tid, None)
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

    def _new_counter(self, created_by: str = "new") -> str:
        cid = f"v{len(self.trace.version_counters)}"
        self.trace.version_counters[cid] = VersionCounterRecord(cid, created_by=created_by)
        return cid

    def _counter_of(self, tid: str) -> str | None:
        return self.trace.tensors[tid].version_counter
