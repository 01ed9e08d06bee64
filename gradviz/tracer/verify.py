"""--verify: how wrong the gradients are. The bytes a silent write (through an alias with its own version counter)
takes from a saved tensor are kept; at that graph's backward they are put back for one extra run of the autograd
engine (`autograd.grad`: nothing accumulates), the written bytes put back after it, and the program's own backward
runs unchanged. Its gradients are then compared with the ones the saved values would have given.

Nothing of this runs without --verify. The program sees no version move (restores go through a byte alias with a
version counter of its own) and no hook of its own run twice (the measurement is skipped, and says why)."""

from __future__ import annotations

import bisect
import contextlib
import gc
import inspect
import os
import sys
import warnings
import weakref
from typing import Any, cast

import torch
from torch.autograd import Variable

from .saved_read import saved_contents
from .source import user_frame
from .tensors import _byte_span, _storage_key
from .verify_restore import Plan, _alias, _merged, _minus, plan, restored

_quiet = torch._C.DisableTorchFunction
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # gradviz's own code (weakref callbacks)
_TORCH = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_TOKEN = "gradviz.verify"  # the key, in a node's metadata, of the object whose death says the node is gone
_SIGNATURES: dict[Any, inspect.Signature] = {}


class HookWouldRun(Exception):
    """Raised (by the profile function) at the first line of Python code the measurement's backward would run."""


class WriteWouldRepeat(HookWouldRun):
    """Raised (functions.py) at an in-place write a custom Function's backward would make a second time."""


def tripwire(frame: Any, event: str, arg: Any) -> None:
    # a Python hook (tensor, node, module hook, custom Function) would run a second time: stop before its first line
    if event == "call" and not frame.f_code.co_filename.startswith(_OWN):
        code = frame.f_code
        raise HookWouldRun(_qualname(frame), code.co_filename, frame.f_lineno)


def _qualname(frame: Any) -> str:
    """`Class.method` of a frame's code: its co_qualname from Python 3.11 on; before, from the method's `self` or
    the function holding the code."""
    code = frame.f_code
    if sys.version_info >= (3, 11):
        return str(code.co_qualname)
    owner = frame.f_locals.get("self") if code.co_argcount and code.co_varnames[0] == "self" else None
    name = str(code.co_name)
    if owner is not None:
        for kind in type(owner).__mro__:
            if getattr(kind.__dict__.get(name), "__code__", None) is code:
                return f"{kind.__qualname__}.{name}"
    # only on this rare path (a measurement skipped): the functions referring to the code know their __qualname__
    for holder in gc.get_referrers(code):
        if getattr(holder, "__code__", None) is code:
            return str(holder.__qualname__)
    return name


class _Token:
    """Put in a node's metadata: freed with the node, so a weak reference to it says when the graph is gone."""

    __slots__ = ("__weakref__",)


class _NodeRef(weakref.ref[_Token]):
    """A weak reference to a node's token, knowing the node's id."""

    __slots__ = ("nid",)
    nid: str


class _Saved:
    """A tensor a live node saved for backward: its bytes in a storage, from when (`seq`), its version counter."""

    __slots__ = ("counter", "hi", "lo", "nid", "original", "ref", "seq", "skey", "tid")

    def __init__(self, nid: str, tid: str, skey: int, lo: int, hi: int, seq: int, original: bool, counter: str | None) -> None:
        self.nid, self.tid, self.skey, self.lo, self.hi, self.seq, self.original = nid, tid, skey, lo, hi, seq, original
        self.counter = counter
        # saved as itself: the tensor the node holds (a weak reference), to hand it the bytes it saw (verify_restore)
        self.ref: weakref.ref[torch.Tensor] | None = None


class _Group:
    """The watched saved tensors of one storage (an ordered set), and how many of them have each version counter:
    a call on a tensor sharing the only counter there (a weight and the `.t()` every step saves of it) writes
    nothing silently, found without looking at each."""

    __slots__ = ("counters", "entries")

    def __init__(self) -> None:
        self.entries: dict[_Saved, None] = {}
        self.counters: dict[str | None, int] = {}

    def add(self, entry: _Saved) -> None:
        self.entries[entry] = None
        self.counters[entry.counter] = self.counters.get(entry.counter, 0) + 1

    def remove(self, entry: _Saved) -> None:
        if self.entries.pop(entry, 0) is None:
            left = self.counters[entry.counter] - 1
            if left:
                self.counters[entry.counter] = left
            else:
                del self.counters[entry.counter]

    def __iter__(self) -> Any:
        return iter(self.entries)


class _Kept:
    """Bytes [lo, hi) of a storage as they were before the write `seq` (and later writes `writes` over them)."""

    __slots__ = ("data", "hi", "lo", "seq", "writes")

    def __init__(self, lo: int, hi: int, data: torch.Tensor, seq: int) -> None:
        self.lo, self.hi, self.data, self.seq, self.writes = lo, hi, data, seq, [seq]


class _Storage:
    """The kept bytes of one storage, oldest first, and a byte alias of it with a version counter of its own."""

    __slots__ = ("items", "raw")

    def __init__(self, raw: torch.Tensor) -> None:
        self.raw = raw
        self.items: list[_Kept] = []


class _Swap:
    """`x.data = y` on a tensor a node saved as itself: x's data before (an alias of it), to put back for a moment."""

    __slots__ = ("old", "seq", "target", "writes")

    def __init__(self, target: torch.Tensor, old: torch.Tensor, seq: int) -> None:
        self.target, self.old, self.seq, self.writes = weakref.ref(target), old, seq, [seq]


def _raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """A uint8 tensor over all of t's storage: writes through it move no version counter of the program's."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _unpacked(node: Any, label: str) -> torch.Tensor | None:
    """The tensor `node` saved as `label` (`self`, `tensors[1]`), unpacked without the version check."""
    name = label.partition("[")[0]
    try:
        contents = dict(saved_contents(node, name, getattr(node, f"_raw_saved_{name}"), False, False))
        tensor = contents[label]
    except (AttributeError, RuntimeError, KeyError):
        return None
    return tensor if isinstance(tensor, torch.Tensor) else None


class GradientCheck:
    """The --verify half of the recorder: what live graphs saved, the bytes kept before silent writes, the
    measurement at each backward that uses them. Methods take the recorder (no cycle through it)."""

    def __init__(self) -> None:
        self.watched: dict[int, _Group] = {}  # storage key -> saved tensors of live nodes in it
        self._by_node: dict[str, list[_Saved]] = {}
        self._tokens: dict[str, _NodeRef] = {}  # node id -> its token's reference (dropped: no callback)
        self._kept: dict[int, _Storage] = {}
        self._swaps: dict[str, list[_Swap]] = {}  # tensor id -> its data before each `.data =`
        # (id of the input, its counter, storage key, lo, hi, bytes, byte alias): what this call may overwrite, until
        # it is known to have (the input by id: the call's arguments hold it meanwhile, nothing here keeps it after)
        self._tentative: list[tuple[int, str | None, int, int, int, torch.Tensor, torch.Tensor]] | None = None
        self._hooked: dict[str, str] = {}  # node or leaf id -> the hook registration the mode saw (`line 12`)

    # ------------------------------------------------------------------ what live graphs saved
    def saved(self, recorder: Any, node: Any, record: Any) -> None:
        """Watch what `node` (just recorded as `record`) saved, until the node is gone."""
        entries = []
        by_tid = recorder._by_tid
        tensors = recorder.trace.tensors
        for saved in record.saved:
            # a pack hook's tensors are not measured (unpacking them again may not be safe); a node made before
            # tracing began saved bytes the tracer never saw intact
            if saved.tensor is None or saved.packed or saved.saved_version is None:
                continue
            live = by_tid.get(saved.tensor)
            if live is not None and live.storage is not None and live.byte_range is not None:
                skey, (lo, hi) = live.storage, live.byte_range
            else:  # a view unpacked afresh (a weight's `.t()`), matched by its layout and gone again: read it back
                tensor = _unpacked(node, saved.name)
                skey = _storage_key(tensor) if tensor is not None else None
                if skey is None:
                    continue
                lo, hi = _byte_span(tensor)  # type: ignore[arg-type]
                del tensor
            counter = tensors[saved.tensor].version_counter
            entry = _Saved(record.id, saved.tensor, skey, lo, hi, record.seq, saved.original, counter)
            if saved.original:  # the very tensor object the node holds (recorder's weak reference to it)
                entry.ref = live
            entries.append(entry)
        if not entries:
            return
        try:
            token = node.metadata[_TOKEN] = _Token()
        except Exception:  # noqa: BLE001 - a node without metadata: not watched
            return
        ref = self._tokens[record.id] = _NodeRef(token, self._token_gone)
        ref.nid = record.id
        self._by_node[record.id] = entries
        for entry in entries:
            group = self.watched.get(entry.skey)
            if group is None:
                group = self.watched[entry.skey] = _Group()
            group.add(entry)

    def _token_gone(self, ref: _NodeRef) -> None:
        if self._tokens.get(ref.nid) is ref:
            self._node_gone(ref.nid)

    def _node_gone(self, nid: str) -> None:
        self._tokens.pop(nid, None)
        entries = self._by_node.pop(nid, None)
        if not entries:
            return
        for entry in entries:
            group = self.watched.get(entry.skey)
            if group is not None:
                group.remove(entry)
                if not group.entries:
                    del self.watched[entry.skey]
        if not self.watched:
            self._tentative = None  # keep() runs no more: what it took before the last call must not be taken later
        self._prune({e.skey for e in entries}, {e.tid for e in entries})

    def _prune(self, skeys: set[int], tids: set[str]) -> None:
        """Let go of kept bytes and data no watched tensor saved before them can want."""
        for skey in skeys:
            store = self._kept.get(skey)
            if store is None:
                continue
            oldest = min((e.seq for e in self.watched.get(skey, ())), default=None)
            store.items = [item for item in store.items if oldest is not None and item.seq > oldest]
            if not store.items:
                del self._kept[skey]
        for tid in tids:
            swaps = self._swaps.get(tid)
            if swaps is None:
                continue
            saves = [e.seq for entries in self._by_node.values() for e in entries if e.tid == tid and e.original]
            swaps[:] = [s for s in swaps if saves and s.seq > min(saves)]
            if not swaps:
                del self._swaps[tid]

    def close(self) -> None:
        """Tracing stopped: let go of everything (nodes that die later call nothing)."""
        self._tokens.clear()
        self._by_node.clear()
        self.watched.clear()
        self._kept.clear()
        self._swaps.clear()
        self._tentative = None
        self._hooked.clear()

    # ------------------------------------------------------------------ before and after a write
    def keep(self, recorder: Any, inputs: list[torch.Tensor]) -> None:
        """Before a call: copy the bytes of saved tensors it could overwrite through an alias with its own counter."""
        self._tentative = None
        try:
            self._keep(recorder, inputs)
        except Exception as exc:  # noqa: BLE001 - never let bookkeeping break the program
            self._tentative = None
            recorder._internal(exc, "verify")

    def _keep(self, recorder: Any, inputs: list[torch.Tensor]) -> None:
        watched = self.watched
        live_of = recorder._live.get
        tensors = recorder.trace.tensors
        for t in inputs:
            entry = live_of(id(t))
            if entry is not None and entry() is t:
                skey, span, counter = entry.storage, entry.byte_range, entry.record.version_counter
            else:  # not tracked yet: its counter is unknown, so it may be anyone's
                skey, span, counter = _storage_key(t), None, None
            saved = watched.get(skey) if skey is not None else None
            if saved is None or (counter is not None and len(saved.counters) == 1 and counter in saved.counters):
                continue  # nothing saved here, or only what a write through this tensor makes PyTorch raise on
            lo, hi = span if span is not None else _byte_span(t)
            start = stop = None
            for e in tuple(saved.entries):  # (a node freed meanwhile, in another thread, leaves its group)
                # (the record's counter: two counters found to be one since the save are merged there)
                if e.lo < hi and lo < e.hi and (counter is None or tensors[e.tid].version_counter != counter):
                    a, b = max(lo, e.lo), min(hi, e.hi)
                    start = a if start is None else min(start, a)
                    stop = b if stop is None else max(stop, b)
            if start is None or stop is None or start >= stop:
                continue
            store = self._kept.get(skey)
            raw = store.raw if store is not None else _raw_bytes(t)
            if self._tentative is None:
                self._tentative = []
            self._tentative.append((id(t), counter, skey, start, stop, raw[start:stop].clone(), raw))

    def written(self, t: torch.Tensor, event: Any) -> None:
        """After the call: `t` was written (event `event`); keep the bytes taken before it that no copy holds yet."""
        pending = self._tentative
        if not pending:
            return
        key = id(t)
        for item in pending:
            if item[0] == key:
                self._commit(item, event)
                return

    def _commit(self, item: tuple[Any, ...], event: Any) -> None:
        _, counter, skey, start, stop, data, raw = item
        seq = event.seq
        store = self._kept.get(skey)
        items = store.items if store is not None else []
        wanted: list[tuple[int, int]] = []
        for e in self.watched.get(skey, ()):
            lo, hi = max(start, e.lo), min(stop, e.hi)
            if lo >= hi or (counter is not None and e.counter == counter):  # (that write PyTorch sees: it raises)
                continue
            gaps = [(lo, hi)]
            for kept in items:
                if kept.seq > e.seq and kept.lo < hi and lo < kept.hi:  # holds e's bytes as saved, where it covers
                    if seq not in kept.writes:
                        kept.writes.append(seq)
                    gaps = _minus(gaps, kept.lo, kept.hi)
            wanted += gaps
        kept_bytes = 0
        for lo, hi in _merged(wanted):
            piece = data[lo - start : hi - start]
            if hi - lo < stop - start:
                piece = piece.clone()  # the rest of the copy goes
            if store is None:
                store = self._kept[skey] = _Storage(raw)
            store.items.append(_Kept(lo, hi, piece, seq))
            kept_bytes += hi - lo
        event.data["verify_kept"] = kept_bytes

    def before_data_set(self, recorder: Any, target: torch.Tensor) -> tuple[Any, ...] | None:
        """`x.data = y` is about to swap the data of a tensor a live node saved as itself: an alias of the old data."""
        live = recorder._live.get(id(target))
        if live is None or live.storage is None:
            return None
        saves = [e.seq for e in self.watched.get(live.storage, ()) if e.tid == live.tid and e.original]
        if not saves:
            return None
        return live.tid, saves, _alias(target)

    def after_data_set(self, pending: tuple[Any, ...], target: torch.Tensor, event: Any) -> None:
        tid, saves, old = pending
        swaps = self._swaps.setdefault(tid, [])
        uncovered = False
        for saved_at in saves:
            first = next((s for s in swaps if s.seq > saved_at), None)
            if first is None:
                uncovered = True
            elif event.seq not in first.writes:
                first.writes.append(event.seq)
        if uncovered:
            swaps.append(_Swap(target, old, event.seq))
        event.data["verify_kept"] = old.numel() * old.element_size() if uncovered else 0

    def hook_registered(self, recorder: Any, func: Any, args: Any, kwargs: Any) -> Any:
        """`t.register_hook(...)`, `t.retain_grad()`: passed through; where, noted (the measurement skips their graph)."""
        result = func(*args, **kwargs)
        try:
            with _quiet():
                t = args[0]
                fn = t.grad_fn
                key = recorder._node(fn) if fn is not None else recorder._tid(t)
                frame = user_frame(2)
                where = f"line {frame.f_lineno}" if frame is not None else "a line gradviz did not see"
                del frame
                what = "retain_grad()" if func is torch.Tensor.retain_grad else "register_hook"
                self._hooked.setdefault(key, f"`{what}` at {where}")
        except Exception as exc:  # noqa: BLE001 - never let bookkeeping break the program
            recorder._internal(exc, "register_hook")
        return result

    # ------------------------------------------------------------------ the measurement at a backward
    def _plan(self, nodes: set[str], only: set[int] | None = None) -> Plan | None:
        by_node = self._by_node
        return plan((e for nid in nodes for e in by_node.get(nid, ())), self._kept, self._swaps, only)

    def before_backward(self, recorder: Any, func: Any, args: Any, kwargs: Any, event: Any) -> Any:
        """Before the program's backward: when it runs through saved tensors whose bytes were kept, compute the
        gradients with them intact. Returns what `after_backward` needs, or None when there is nothing to do."""
        plan = self._plan(set(event.data.get("reached_nodes", ())))
        if plan is None:
            return None
        record: dict[str, Any] = {"writes": sorted(plan.writes)}
        event.data["verify"] = record
        pending = _Pending(plan, record)
        try:
            call = _call_parts(func, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - arguments the program's own call will reject
            record["skipped"] = f"gradviz could not read the backward call's arguments ({type(exc).__name__})"
            return pending
        reason = self._why_not(recorder, call, event, plan)
        if reason is not None:
            record["skipped"] = reason
            return pending
        inputs = call.inputs
        if inputs is None:
            found = [recorder._by_tid.get(tid) for tid in event.data.get("reached_leaves", ())]
            inputs = tuple(t for t in (live() if live is not None else None for live in found) if t is not None and t.requires_grad)
        if not inputs:
            record["skipped"] = "no tensor this backward gives a gradient to is alive"
            return pending
        pending.inputs = inputs
        pending.ids = [recorder._tid(t) for t in inputs]
        grads = _root_grads(call)
        if grads is None:
            record["skipped"] = "the backward's root is not a scalar and no gradient was given"
            return pending
        # the gradient the program gets: what its backward leaves in .grad where .grad was empty; elsewhere (a
        # gradient accumulated onto, a non-leaf input, a .grad a post-accumulate hook may change or take) the same
        # engine run with the bytes as the program has them
        if call.is_grad:
            pending.rerun = []
        else:
            pending.rerun = [
                i for i, t in enumerate(inputs)
                if not t.is_leaf or t.grad is not None or getattr(t, "_post_accumulate_grad_hooks", None)
            ]  # fmt: skip
        try:
            self._measure(pending, call.roots, tuple(grads), recorder, event)
        except HookWouldRun as hook:
            record["skipped"] = _repeated_hook(hook)
            pending.intact = None
        except Exception as exc:  # noqa: BLE001 - the program's own backward will say what is wrong
            record["skipped"] = f"the measuring backward raised {type(exc).__name__}"
            pending.intact = None
        return pending

    def _measure(self, pending: _Pending, roots: Any, grads: tuple[Any, ...], recorder: Any, event: Any) -> None:
        """Run the engine with the saved bytes intact (and, with silent writes at several lines, with each line's
        alone), and with the bytes as the program has them where the program's own .grad cannot tell."""
        plan, inputs = pending.plan, pending.inputs
        pending.intact = _engine(roots, grads, inputs, plan)
        lines = _lines(recorder.trace.events, plan.writes)
        if len(lines) > 1:  # silent writes at several lines into this graph: what each line's do, the rest left
            reached = set(event.data.get("reached_nodes", ()))
            for seqs in lines.values():
                alone = self._plan(reached, only=set(seqs))
                if alone is None or alone.conflict:
                    outcome: tuple[Any, ...] | str = (alone.conflict if alone else None) or "its bytes were not kept"
                else:
                    outcome = _engine(roots, grads, inputs, alone)
                pending.alone.update(dict.fromkeys(seqs, outcome))
        if pending.rerun:
            pending.written = _engine(roots, grads, tuple(inputs[i] for i in pending.rerun), None)

    def _why_not(self, recorder: Any, call: _Call, event: Any, plan: Plan) -> str | None:
        if plan.conflict:
            return plan.conflict
        if call.create:
            return "a higher-order backward (create_graph=True)"
        if call.batched:
            return "a batched backward (is_grads_batched=True)"
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return "under torch.distributed (a second backward could start collectives)"
        nodes = recorder.trace.nodes
        reached = event.data.get("reached_nodes", ())
        for nid in reached:
            node = nodes[nid]
            # built-in nodes end in a digit: this one runs Python code; a custom Function's node recorded when its
            # apply saved runs again under functions.py's guard (no in-place write, nothing printed)
            if node.name.endswith("Backward") and nid not in recorder._applied:
                return f"{node.name} (a custom autograd.Function or a module's backward hook) would run a second time"
            if any(s.packed for s in node.saved):
                return "a tensor in this graph was saved through saved_tensors_hooks (unpacked twice is not safe)"
        for key in (*reached, *event.data.get("reached_leaves", ())):
            hook = self._hooked.get(key)
            if hook is not None:
                return f"a hook ({hook}) would run a second time"
        members = set(reached)
        for tid, live in list(recorder._by_tid.items()):
            record = recorder.trace.tensors[tid]
            if record.grad_fn in members:
                t = live()
                if t is not None and t.retains_grad:
                    return f"{record.label}.retain_grad(): the measurement would write its .grad"
        return None

    def after_backward(self, recorder: Any, pending: _Pending | None, event: Any, result: Any) -> None:
        """The program's backward returned: compare its gradients with the intact ones; free what the graph's
        backward used (unless it kept the graph: retain_graph=True)."""
        if pending is not None and pending.intact is not None:
            rows = []
            compared: list[tuple[str, Any]] = []  # (tensor id, the program's gradient), per input
            rerun = {i: k for k, i in enumerate(pending.rerun or ())}
            for i, (t, tid, intact) in enumerate(zip(pending.inputs, pending.ids, pending.intact)):
                if isinstance(result, tuple) and i < len(result):
                    got = result[i]
                elif i in rerun:
                    got = pending.written[rerun[i]]
                else:
                    got = t.grad
                compared.append((tid, got))
                if intact is None or got is None:
                    continue
                rows.append({"tensor": tid, **_compare(got, intact)})
            pending.record["gradients"] = rows
            if pending.alone:  # per write, the others left in place: how much undoing it alone changes
                alone_rows: dict[str, Any] = {}
                for seq, grads in pending.alone.items():
                    if isinstance(grads, str):
                        alone_rows[str(seq)] = {"skipped": grads}
                        continue
                    alone_rows[str(seq)] = {"gradients": [
                        {"tensor": tid, **_compare(got, intact)}
                        for (tid, got), intact in zip(compared, grads) if got is not None and intact is not None
                    ]}  # fmt: skip
                pending.record["alone"] = alone_rows
        if not event.data.get("retain_graph"):
            self._release(event)

    def backward_failed(self, pending: _Pending | None, event: Any) -> None:
        if pending is not None and pending.intact is not None:
            pending.record["skipped"] = "the program's backward raised"
        self._release(event)

    def _release(self, event: Any) -> None:
        """The graph's backward ran and freed its saved tensors: the bytes kept for them go."""
        tokens = self._tokens
        for nid in event.data.get("reached_nodes", ()):
            if nid in tokens:
                self._node_gone(nid)


def _lines(events: list[Any], seqs: set[int]) -> dict[int | None, list[int]]:
    """The writes `seqs` (event seqs, in the events' order) by the line they were made at."""
    out: dict[int | None, list[int]] = {}
    for seq in sorted(seqs):
        at = bisect.bisect_left(events, seq, key=lambda e: e.seq)
        event = events[at] if at < len(events) and events[at].seq == seq else None
        line = event.location.line if event is not None and event.location is not None else None
        out.setdefault(line, []).append(seq)
    return out


class _Call:
    """A backward call's arguments, whichever of the three APIs made it."""

    __slots__ = ("batched", "create", "grads", "inputs", "is_grad", "roots")
    batched: bool
    create: bool
    grads: tuple[Any, ...]  # one per root, None where none was given
    inputs: tuple[Any, ...] | None
    is_grad: bool  # autograd.grad: the gradients are returned, nothing accumulates
    roots: tuple[Any, ...]


def _tensors(value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return (value,)
    return tuple(value)


def _call_parts(func: Any, args: Any, kwargs: Any) -> _Call:
    signature = _SIGNATURES.get(func)
    if signature is None:
        signature = _SIGNATURES[func] = inspect.signature(func)
    params = signature.bind(*args, **kwargs).arguments
    call = _Call()
    call.is_grad = func is torch.autograd.grad
    if call.is_grad:
        roots, grads, inputs = params["outputs"], params.get("grad_outputs"), params["inputs"]
    elif func is torch.autograd.backward:
        roots = params["tensors"]
        grads = params.get("grad_tensors") if params.get("grad_tensors") is not None else params.get("grad_variables")
        inputs = params.get("inputs")
    else:
        roots, grads, inputs = params["self"], params.get("gradient"), params.get("inputs")
    call.roots = _tensors(roots) or ()
    given = _tensors(grads)
    call.grads = given if given is not None else (None,) * len(call.roots)
    call.inputs = _tensors(inputs)
    if call.inputs is not None and not all(isinstance(t, torch.Tensor) for t in call.inputs):
        raise TypeError("inputs that are not tensors (gradient edges)")
    if len(call.grads) != len(call.roots):
        raise ValueError("as many gradients as roots")
    call.create = bool(params.get("create_graph", False))
    call.batched = bool(params.get("is_grads_batched", False))
    return call


class _Pending:
    """One backward's measurement, between the engine runs before it and the comparison after."""

    def __init__(self, plan: Plan, record: dict[str, Any]) -> None:
        self.plan = plan
        self.record = record
        self.inputs: tuple[torch.Tensor, ...] = ()
        self.ids: list[str] = []
        self.intact: tuple[Any, ...] | None = None
        self.rerun: list[int] | None = None
        self.written: tuple[Any, ...] = ()
        self.alone: dict[int, tuple[Any, ...] | str] = {}  # write seq -> gradients with it alone undone, or why not


def _root_grads(call: _Call) -> list[Any] | None:
    """The gradients the backward starts from: the ones given, else ones for a scalar root; None where a root is not
    a scalar and has none (the program's own backward raises)."""
    grads = []
    for root, given in zip(call.roots, call.grads):
        if given is None:
            if root.numel() != 1:
                return None
            given = torch.ones_like(root, memory_format=torch.preserve_format)
        grads.append(given)
    return grads


def _repeated_hook(hook: HookWouldRun) -> str:
    """Why a measurement was skipped: the program's Python code (a hook, a write) would run a second time."""
    name, file, line = hook.args
    if isinstance(hook, WriteWouldRepeat):
        return f"{name} at {os.path.basename(file)}:{line} would be made a second time"
    if os.path.abspath(file).startswith(_TORCH):  # torch's wrapper around a hook of the program's
        return f"a backward hook (run through torch's `{name}`) would run a second time"
    return f"a hook (`{name}` at {os.path.basename(file)}:{line}) would run a second time"


def _engine(roots: tuple[Any, ...], grads: tuple[Any, ...], inputs: tuple[Any, ...], plan: Plan | None) -> tuple[Any, ...]:
    """One run of the autograd engine as `autograd.grad(roots, inputs, grads, retain_graph=True)` makes it (nothing
    accumulates into .grad), with the plan's saved values put back meanwhile; Python code it would run stops it
    (HookWouldRun) before its first line."""
    with restored(plan):
        # warnings this extra backward raises are not the program's: ignored, by a filter put in place directly
        # (catch_warnings would reset the registries behind "once per place", and the program's would show again)
        quiet = ("ignore", None, Warning, None, 0)
        filters = cast("list[Any]", warnings.filters)  # (a list: typeshed says Sequence)
        filters.insert(0, quiet)
        previous = sys.getprofile()
        sys.setprofile(tripwire)
        try:
            return Variable._execution_engine.run_backward(roots, grads, True, False, inputs, True, False)
        finally:
            sys.setprofile(previous)
            with contextlib.suppress(ValueError):
                filters.remove(quiet)


def _compare(got: torch.Tensor, intact: torch.Tensor) -> dict[str, Any]:
    """How far the program's gradient is from the intact one: largest absolute difference, that over the largest
    intact value, cosine similarity, the ratio of their norms, and whether the update direction flips (cosine < 0)."""
    if got.is_sparse:
        got = got.to_dense()
    if intact.is_sparse:
        intact = intact.to_dense()
    if got.shape != intact.shape:
        return {"max_abs": None, "max_rel": None, "cosine": None, "flipped": False, "shape_changed": True}
    a = got.detach().to(torch.float64).flatten()
    b = intact.detach().to(torch.float64).flatten()
    if a.numel() == 0:
        return {"max_abs": 0.0, "max_rel": 0.0, "cosine": 1.0, "norm_ratio": 1.0, "flipped": False}
    max_abs = float((a - b).abs().max())
    scale = float(b.abs().max())
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else None)
    got_norm, intact_norm = float(a.norm()), float(b.norm())
    norms = got_norm * intact_norm
    # how much larger the program's gradient is: a cosine near 1 says nothing of a gradient 6x too small
    norm_ratio = got_norm / intact_norm if intact_norm > 0 else (1.0 if got_norm == 0 else None)
    if max_abs == 0:  # the same numbers: exactly 1 (dot / norms can round to 0.9999999999999999)
        cosine: float | None = 1.0
    elif norms > 0:
        cosine = max(-1.0, min(1.0, float(a.dot(b)) / norms))
    else:
        cosine = None
    finite = [v for v in (max_abs, max_rel, cosine, norm_ratio) if v is not None]
    if any(v != v or v in (float("inf"), float("-inf")) for v in finite):  # NaN or inf in a gradient: no numbers
        return {"max_abs": None, "max_rel": None, "cosine": None, "flipped": False, "not_finite": True}
    flipped = cosine is not None and cosine < 0
    return {"max_abs": max_abs, "max_rel": max_rel, "cosine": cosine, "norm_ratio": norm_ratio, "flipped": flipped}
