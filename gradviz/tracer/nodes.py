"""Recording autograd nodes: identity, name, edges, and what each saved for backward (with its version then)."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import torch
import torch.autograd.grad_mode
import torch.utils.checkpoint

from ..model import Location, NodeRecord, SavedTensorRecord
from . import chains
from .saved_read import (
    HANDLE_DATA,
    UNREADABLE_EARLIER,
    UNREADABLE_PACKED,
    UnreadableSaved,
    contents_without_data,
    keeps_tensors,
)
from .source import frame_variables, user_frame_from
from .state import RecorderState
from .tensors import GradKey, _grad_key, _same_grad, _storage_key

_PYTHON_FUNCTION = torch.autograd.function.BackwardCFunction  # the node type of every autograd.Function subclass

_ACCUMULATE_GRAD = 2**64 - 1  # the sequence number autograd gives every AccumulateGrad node
# what a node type saves and how it is called depend only on the type: learnt once per process
_SAVED_NAMES: dict[type, tuple[tuple[str, str, bool], ...]] = {}  # type -> (name, _raw_saved_ attribute, is output)
_TYPE_NAMES: dict[type, str] = {}
_pack_hooks = torch._C._autograd._top_saved_tensors_default_hooks  # the innermost saved_tensors_hooks, or None
# checkpoint(..., use_reentrant=True) runs its block in CheckpointFunction.forward, under a `no_grad` entered there
_CHECKPOINT_FORWARD = torch.utils.checkpoint.CheckpointFunction.forward.__code__
_GRAD_MODE_FILE = torch.autograd.grad_mode.__file__


def _run_function_module(run: Any, names: dict[int, str]) -> str | None:
    """The named module a checkpointed function runs: the module itself, its bound method (`layer.__call__`, as
    transformers passes it), a `functools.partial` of either, or the modules a closure runs (checkpoint_sequential's
    segment: `functions[start..end]`), by their common parent."""
    for _ in range(4):
        name = names.get(id(run))
        if name is not None:
            return name
        inner = getattr(run, "__self__", None)
        if inner is None:
            inner = getattr(run, "func", None)
        if inner is None:
            break
        run = inner
    code = getattr(run, "__code__", None)
    cells = getattr(run, "__closure__", None)
    if code is None or not cells:
        return None
    free = {}
    for var, cell in zip(code.co_freevars, cells):
        try:
            free[var] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
    held = free.get("functions")
    if isinstance(held, (list, tuple)) and isinstance(free.get("start"), int) and isinstance(free.get("end"), int):
        modules = list(held[free["start"] : free["end"] + 1])
    else:
        modules = [v for value in free.values() for v in (value if isinstance(value, (list, tuple)) else [value])]
    paths = [names[id(m)].split(".") for m in modules if id(m) in names]
    if not paths:
        return None
    common = paths[0]
    for path in paths[1:]:
        n = 0
        while n < min(len(common), len(path)) and common[n] == path[n]:
            n += 1
        common = common[:n]
    return ".".join(common) or None


class GraphRecording(RecorderState):
    """The node-recording half of the Recorder (mixed into it; uses its tensor tracking and state)."""

    _numbers: Any  # threads.NodeNumbers: which node a number names once other threads record
    _heights: dict[str, int]  # node id -> levels above the nearest held node or leaf (chains.py)
    _checkpoint_calls: dict[int, Location | None]  # a reentrant checkpoint's node (sequence number) -> its call's line
    # the Recorder's state and methods this half uses (recorder.py owns them)
    _saved_names: dict[type, tuple[tuple[str, str, bool], ...]]
    _type_names: dict[type, str]

    def _reachable(self, fns: list[Any]) -> tuple[list[str], list[str]]:
        """Node ids a backward from `fns` runs through, and the leaves it feeds: read off the recorded graph.

        Autograd graphs do not change once built (an in-place op makes a new node, which is recorded), so the
        recorded `next` lists are the live graph; walking them is much cheaper than walking the live nodes.
        """
        nodes = self.trace.nodes
        seen: set[str] = set()
        stack = [self._node(fn) for fn in fns]
        add = seen.add
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            add(nid)
            for nxt in nodes[nid].next:
                if nxt is not None and nxt not in seen:
                    stack.append(nxt)
        # ids are "n<k>" in creation order: lexicographic, then (stable) by length, is numeric order
        ordered = sorted(sorted(seen), key=len)
        leaves = [variable for variable in (nodes[n].variable for n in ordered) if variable is not None]
        return ordered, leaves

    # ------------------------------------------------------------------ backwards nested in a backward
    def _nested_watch(self, reached: list[str]) -> dict[str, GradKey | None] | None:
        """The `.grad` of every live leaf that requires grad, when the backward will run a Python-defined node.

        Such a node's backward may call backward itself (`checkpoint(..., use_reentrant=True)` recomputes its
        block and backpropagates through it there): the leaves that inner backward reaches are no edge of the
        outer graph, but get their gradient from the outer call. The recorder's mode is off while the outer call
        runs, so the inner one is seen by its effect: the `.grad` fields it wrote.
        """
        nodes = self.trace.nodes
        if not any(nodes[n].name.endswith("Backward") for n in reached):  # built-in nodes end in a digit
            return None
        watched: dict[str, GradKey | None] = {}
        for tid, live in self._by_tid.items():
            t = live()
            try:
                if t is None or not t.requires_grad or t.grad_fn is not None:
                    continue
                g = t.grad
            except RuntimeError:  # a no_grad view whose base was later written in place has no readable grad_fn
                continue
            watched[tid] = None if g is None else _grad_key(g)
        return watched

    def _nested_reached(self, watched: dict[str, GradKey | None]) -> list[str]:
        """The watched leaves whose `.grad` the backward wrote (a new tensor, or an in-place accumulation)."""
        reached = []
        for tid, before in watched.items():
            live = self._by_tid.get(tid)
            t = live() if live is not None else None
            g = t.grad if t is not None else None
            if g is not None and not _same_grad(before, g):
                reached.append(tid)
        return reached

    # ------------------------------------------------------------------ autograd nodes
    def _function_module(self, node: Any) -> str | None:
        """The module a custom Function node runs again in backward (torch.utils.checkpoint keeps it as the
        context's `run_function`), by the name the tracer gave it; None for other Functions."""
        try:
            return _run_function_module(getattr(node, "run_function", None), self._module_names)
        except Exception:  # a Function whose attributes raise: no module rather than a failed recording
            return None

    def _on_grad_mode(self, func: Any, args: Any, kwargs: Any) -> Any:
        """`torch._C._set_grad_enabled`, passed through. The `no_grad` a reentrant checkpoint enters around its block
        is where the checkpoint's node can be tied to the line that called `checkpoint(...)`: found later, as another
        node's input, it has no line of its own (see `_node`)."""
        result = func(*args, **kwargs)
        if args and not args[0]:
            try:
                self._note_checkpoint_call()
            except Exception as exc:  # never let bookkeeping break the user's program
                self._internal(exc, "checkpoint")
        return result

    def _note_checkpoint_call(self) -> None:
        frame: FrameType | None = sys._getframe(3)  # this method's caller's caller: the code that switched grad off
        while frame is not None and frame.f_code.co_filename == _GRAD_MODE_FILE:  # no_grad.__enter__, set_grad_enabled
            frame = frame.f_back
        if frame is None or frame.f_code is not _CHECKPOINT_FORWARD:
            return
        ctx = frame_variables(frame).get("ctx")  # the context is the CheckpointFunctionBackward node itself
        user = user_frame_from(frame.f_back)
        if ctx is None or user is None:
            return
        self._checkpoint_calls[ctx._sequence_nr()] = self._location(user.f_code.co_filename, user.f_lineno)

    def _node(self, fn: Any, output: str | None = None, fresh: bool = False) -> str:
        """The id of autograd node `fn`, registering it and the part of its graph not seen yet.

        Runs for every new node the program makes (the hot path of graph recording): ids and records are made in
        the order nodes are discovered, so the records dict stays in id order.
        """
        ids = self._node_ids
        key = number = fn._sequence_nr()
        threads = self._numbers if self._numbers.on else None
        # the program's other threads record too: their numbers repeat the tracing thread's
        here = threads.here() if threads is not None else None
        if key == _ACCUMULATE_GRAD:
            key = ("leaf", self._tid(fn.variable))
        elif threads is not None:
            key = threads.key(fn, number, lambda: self._node_name(fn), *here)  # type: ignore[misc]  # (set with threads)
        nid = ids.get(key)
        nodes = self.trace.nodes
        if nid is not None:
            if output is not None:
                record = nodes[nid]
                if record.output is None:
                    record.output = output
            return nid
        created = self._here_loc
        module = (self._module_now or self._running_module())[0]
        nid = ids[key] = f"n{len(ids)}"
        if threads is not None and number != _ACCUMULATE_GRAD:
            threads.added(key, number, fn)
        kind = type(fn)
        # (seq -1: numbered after the walk, which may track leaves first)
        first = nodes[nid] = NodeRecord(nid, self._type_names.get(kind) or self._node_name(fn), [], -1, None, [], output, module, created)
        if self._checkpoint_calls and number in self._checkpoint_calls:  # a reentrant checkpoint's output, met first here
            first.module, first.created = self._function_module(fn), self._checkpoint_calls.pop(number)
        new, top = self._walk_new(fn, first, key, number, threads, here, module, created)
        self._register_new(new, top, first, output if fresh else None, threads)
        return nid

    def _walk_new(
        self, fn: Any, first: NodeRecord, key: Any, number: int, threads: Any, here: Any, module: str | None, created: Any
    ) -> tuple[list[tuple[Any, NodeRecord, Any, int]], int]:
        """Records for the nodes below new node `fn` not seen yet, depth first (node, record, key, number each, `fn`
        first), and the greatest height among the known nodes they lead to."""
        ids = self._node_ids
        nodes = self.trace.nodes
        live = self._live
        names = self._type_names
        heights = self._heights
        new = [(fn, first, key, number)]
        stack = [(fn, first)]
        top = -1
        while stack:
            node, record = stack.pop()
            next_ids = record.next
            for nxt, _ in node.next_functions:
                if nxt is None:
                    next_ids.append(None)
                    continue
                number = key = nxt._sequence_nr()
                if number == _ACCUMULATE_GRAD:
                    variable = nxt.variable
                    entry = live.get(id(variable))
                    key = ("leaf", entry.tid if entry is not None else self._tid(variable))
                elif threads is not None:
                    key = threads.key(nxt, number, lambda: self._node_name(nxt), *here)  # noqa: B023 - called at once
                nxt_id = ids.get(key)
                if nxt_id is None:
                    nxt_id = ids[key] = f"n{len(ids)}"
                    if threads is not None and number != _ACCUMULATE_GRAD:  # (a leaf's node is known by its leaf)
                        threads.added(key, number, nxt)
                    kind = type(nxt)
                    # a custom Function's node found only as another node's input was made elsewhere (the reentrant
                    # checkpoint's output, seen under no_grad before apply gave it a grad_fn): this op's module and
                    # line would be false claims, so it has none
                    # (the checkpoint's own call line was noted when it ran: _on_grad_mode)
                    made_here = not issubclass(kind, _PYTHON_FUNCTION)
                    nxt_record = nodes[nxt_id] = NodeRecord(
                        nxt_id, names.get(kind) or self._node_name(nxt), [], -1, None, [],
                        None, module if made_here else self._function_module(nxt),
                        created if made_here else self._checkpoint_calls.pop(number, None),
                    )
                    new.append((nxt, nxt_record, key, number))
                    stack.append((nxt, nxt_record))
                else:
                    below = heights.get(nxt_id, 0)
                    if below > top:
                        top = below
                next_ids.append(nxt_id)
        return new, top

    def _register_new(
        self, new: list[tuple[Any, NodeRecord, Any, int]], top: int, first: NodeRecord, output: str | None, threads: Any
    ) -> None:
        """Number the new nodes, hold the deep chains among them and read what each saved. `output`: the tensor
        the first of them just made (for its saved result)."""
        heights = self._heights
        seq = next(self._seq)
        # Heights above the last held node (see chains.py). No path through the new nodes is longer than all of them
        # and a known node below: that bound stands for each of them, until it reaches a segment's length, and only
        # then are the exact heights worked out (children first: the walk listed parents first).
        bound = len(new) + top
        if bound >= chains.SEGMENT:
            for node, record, _, _ in reversed(new):
                children = [heights.get(n, 0) for n in record.next if n is not None]
                height = 1 + max(children) if children else 0
                heights[record.id] = chains.hold(node) if height >= chains.SEGMENT else height
        # saved tensors after all records exist: they may point back into this subgraph
        first_number = self._first_sequence_nr
        saved_names = self._saved_names
        check = self._check
        for node, record, key, number in new:
            record.seq = seq
            if bound < chains.SEGMENT:
                heights[record.id] = bound
            if number == _ACCUMULATE_GRAD:  # the leaf it feeds
                record.variable = key[1]
            elif saved_names.get(type(node)) != ():  # (most nodes save nothing: TBackward0, AddBackward0, ...)
                # a node made before the trace began: what it saved may have been written since; version unknown
                before = number < (first_number if threads is None else threads.first(key, first_number))
                try:
                    record.saved = self._saved(node, output if record is first else None, before)
                    if check is not None and record.saved:  # --verify: watch them while the node lives
                        check.saved(self, node, record)
                except Exception as exc:  # one unreadable node must not leave the rest of its graph half-recorded
                    self._internal(exc)

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
            names = tuple(
                (n[len("_raw_saved_") :], n, n.startswith("_raw_saved_result")) for n in dir(node) if n.startswith("_raw_saved_")
            )
            self._saved_names[kind] = names
        if not names:
            return []
        saved = []
        live = self._live
        # A pack hook active now (saved_tensors_hooks, save_on_cpu, checkpointing) packed what this node just saved:
        # autograd checks no version of it at backward, and what it holds may be a copy, not the tensor itself
        packed = not made_before and _pack_hooks(False) is not None
        for name, attribute, is_output in names:
            if output is not None and name == "result" and not packed:
                # the node's own output, which the caller is tracking right now: no need to unpack it
                record = self.trace.tensors[output]
                saved.append(SavedTensorRecord(name, output, record.version, True, False))
                continue
            try:
                raw = getattr(node, attribute)
            except RuntimeError:
                continue
            if isinstance(raw, (list, tuple)):
                handles = [(f"{name}[{i}]", handle) for i, handle in enumerate(raw)]
            else:
                handles = [(name, raw)]
            if not HANDLE_DATA:  # torch 2.8-2.10: (label, tensor) pairs read another way (saved_read.py)
                handles = contents_without_data(node, name, handles, packed, made_before)
                if packed and keeps_tensors(_pack_hooks(False)[0]):
                    self._internal(UnreadableSaved(UNREADABLE_PACKED), type(node).__name__)
                elif made_before and handles:  # said, never silent: a write to it goes unchecked
                    self._internal(UnreadableSaved(UNREADABLE_EARLIER), type(node).__name__)
            for label, handle in handles:
                tensor = getattr(handle, "data", None) if HANDLE_DATA else handle
                if packed and isinstance(tensor, (list, tuple)):
                    # what the pack hook returned: save_on_cpu keeps (device, tensor), the tensor a copy or, already
                    # on the CPU, the saved tensor itself
                    tensor = next((t for t in tensor if isinstance(t, torch.Tensor)), None)
                if not isinstance(tensor, torch.Tensor):
                    # nothing saved, or what a saved_tensors_hooks pack hook made of it (checkpointing keeps a
                    # recipe to recompute it, offloading a copy elsewhere): no tensor to point at, no version
                    saved.append(SavedTensorRecord(label, None, None, is_output, False, packed))
                    continue
                entry = live.get(id(tensor))
                if entry is not None and entry() is tensor:
                    tid, original = entry.tid, True
                else:
                    tid, original = self._match_saved(tensor), False
                try:
                    version = None if made_before else tensor._version
                except RuntimeError:
                    version = None
                saved.append(SavedTensorRecord(label, tid, version, is_output, original, packed))
        return saved

    def _match_saved(self, tensor: torch.Tensor) -> str:
        """A saved tensor that is not a tracked object: the tracked tensor with the same memory layout, if any."""
        skey = _storage_key(tensor)
        sid = self._storage_ids.get(skey) if skey is not None else None
        if sid is not None:
            tid = self._layout.get((sid, tensor.storage_offset(), tensor.shape, tensor.stride()))
            if tid is not None:
                return tid
        return self._track(tensor, "saved")
