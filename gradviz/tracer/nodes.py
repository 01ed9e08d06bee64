"""Recording autograd nodes: identity, name, edges, and what each saved for backward (with its version then)."""

from __future__ import annotations

from typing import Any

import torch

from ..model import NodeRecord, SavedTensorRecord
from .tensors import _storage_key, _version

_ACCUMULATE_GRAD = 2**64 - 1  # the sequence number autograd gives every AccumulateGrad node
# what a node type saves and how it is called depend only on the type: learnt once per process
_SAVED_NAMES: dict[type, tuple[str, ...]] = {}
_TYPE_NAMES: dict[type, str] = {}


class GraphRecording:
    """The node-recording half of the Recorder (mixed into it; uses its tensor tracking and state)."""

    trace: Any
    _node_ids: dict[Any, str]

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
        new = [(fn, nid, [])]  # (node, id, ids of its next nodes)
        stack = [new[0]]
        while stack:
            node, _node_id, next_ids = stack.pop()
            for nxt, _ in node.next_functions:
                if nxt is None:
                    next_ids.append(None)
                    continue
                nxt_key = self._node_key(nxt)
                nxt_id = ids.get(nxt_key)
                if nxt_id is None:
                    nxt_id = ids[nxt_key] = f"n{len(ids)}"
                    entry = (nxt, nxt_id, [])
                    new.append(entry)
                    stack.append(entry)
                next_ids.append(nxt_id)
        created = self._location(*self._here)
        module = self._module_stack[-1] if self._module_stack else None
        seq = next(self._seq)
        nodes = self.trace.nodes
        for node, node_id, next_ids in new:  # records first: saved tensors may point back into this subgraph
            nodes[node_id] = NodeRecord(node_id, self._node_name(node), next_ids, seq, module=module, created=created)
        for node, node_id, _next in new:
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
