"""Recording autograd nodes: identity, name, edges, and what each saved for backward (with its version then)."""

from __future__ import annotations

from typing import Any

import torch

from ..model import NodeRecord, SavedTensorRecord
from . import chains
from .tensors import _storage_key

_ACCUMULATE_GRAD = 2**64 - 1  # the sequence number autograd gives every AccumulateGrad node
# what a node type saves and how it is called depend only on the type: learnt once per process
_SAVED_NAMES: dict[type, tuple[tuple[str, str, bool], ...]] = {}  # type -> (name, _raw_saved_ attribute, is output)
_TYPE_NAMES: dict[type, str] = {}
_pack_hooks = torch._C._autograd._top_saved_tensors_default_hooks  # the innermost saved_tensors_hooks, or None


class GraphRecording:
    """The node-recording half of the Recorder (mixed into it; uses its tensor tracking and state)."""

    trace: Any
    _node_ids: dict[Any, str]
    _heights: dict[str, int]  # node id -> levels above the nearest held node or leaf (chains.py)

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

    def _node(self, fn: Any, output: str | None = None, fresh: bool = False) -> str:
        """The id of autograd node `fn`, registering it and the part of its graph not seen yet.

        Runs for every new node the program makes (the hot path of graph recording): ids and records are made in
        the order nodes are discovered, so the records dict stays in id order.
        """
        ids = self._node_ids
        key = fn._sequence_nr()
        if key == _ACCUMULATE_GRAD:
            key = ("leaf", self._tid(fn.variable))
        nid = ids.get(key)
        nodes = self.trace.nodes
        if nid is not None:
            if output is not None:
                record = nodes[nid]
                if record.output is None:
                    record.output = output
            return nid
        live = self._live
        names = self._type_names
        heights = self._heights
        created = self._here_loc
        module = self._module_stack[-1] if self._module_stack else None
        seq = -1  # numbered after the walk, which may track leaves first
        nid = ids[key] = f"n{len(ids)}"
        kind = type(fn)
        first = nodes[nid] = NodeRecord(nid, names.get(kind) or self._node_name(fn), [], seq, None, [], output, module, created)
        new = [(fn, first, key)]
        stack = [(fn, first)]
        top = -1  # the greatest height among the known nodes the new ones lead to
        while stack:
            node, record = stack.pop()
            next_ids = record.next
            for nxt, _ in node.next_functions:
                if nxt is None:
                    next_ids.append(None)
                    continue
                number = nxt._sequence_nr()
                if number == _ACCUMULATE_GRAD:
                    variable = nxt.variable
                    entry = live.get(id(variable))
                    number = ("leaf", entry.tid if entry is not None else self._tid(variable))
                nxt_id = ids.get(number)
                if nxt_id is None:
                    nxt_id = ids[number] = f"n{len(ids)}"
                    kind = type(nxt)
                    nxt_record = nodes[nxt_id] = NodeRecord(
                        nxt_id, names.get(kind) or self._node_name(nxt), [], seq, None, [], None, module, created
                    )
                    new.append((nxt, nxt_record, number))
                    stack.append((nxt, nxt_record))
                else:
                    below = heights.get(nxt_id, 0)
                    if below > top:
                        top = below
                next_ids.append(nxt_id)
        seq = next(self._seq)
        # Heights above the last held node (see chains.py). No path through the new nodes is longer than all of them
        # and a known node below: that bound stands for each of them, until it reaches a segment's length, and only
        # then are the exact heights worked out (children first: the walk listed parents first).
        bound = len(new) + top
        if bound >= chains.SEGMENT:
            for node, record, _ in reversed(new):
                children = [heights.get(n, 0) for n in record.next if n is not None]
                height = 1 + max(children) if children else 0
                heights[record.id] = chains.hold(node) if height >= chains.SEGMENT else height
        # saved tensors after all records exist: they may point back into this subgraph
        first_number = self._first_sequence_nr
        saved_names = self._saved_names
        for node, record, number in new:
            record.seq = seq
            if bound < chains.SEGMENT:
                heights[record.id] = bound
            if type(number) is tuple:  # AccumulateGrad: the leaf it feeds
                record.variable = number[1]
            elif saved_names.get(type(node)) != ():  # (most nodes save nothing: TBackward0, AddBackward0, ...)
                # a node made before the trace began: what it saved may have been written since; version unknown
                try:
                    record.saved = self._saved(node, output if fresh and record is first else None, number < first_number)
                except Exception as exc:  # one unreadable node must not leave the rest of its graph half-recorded
                    self._internal(exc)
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
            for label, handle in handles:
                tensor = getattr(handle, "data", None)
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
