"""Read an existing tensor's autograd graph (no tracing) into a Trace, iteratively, without tripping on saved tensors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from .. import collector
from ..model import NodeRecord, SavedTensorRecord, TensorRecord, Trace, VersionCounterRecord
from ..text import safe_str
from . import chains
from .saved_read import saved_contents

__all__ = ["Walk", "walk", "walk_graph"]

SAVED_PREFIX = "_saved_"
RAW_PREFIX = "_raw_saved_"
_VERSIONS = re.compile(r"is at version (\d+); expected version (\d+) instead")


@dataclass
class Walk:
    """What a walk found: the Trace plus details only torchviz-style drawing needs."""

    trace: Trace
    roots: list[str]  # tensor ids of the tensors asked for, in order
    order: list[tuple[str, str]] = field(default_factory=list)  # ("node"|"tensor", id) in torchviz's drawing order
    attrs: dict[str, dict[str, str]] = field(default_factory=dict)  # node id -> non-tensor saved attribute text
    status: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, saved name) -> "ok"/"poisoned"/"freed"
    custom_saved: dict[str, list[str | None]] = field(default_factory=dict)  # node -> ctx.saved_tensors (None: freed)
    bases: dict[str, str] = field(default_factory=dict)  # view tensor id -> its base tensor id
    params: dict[str, str] = field(default_factory=dict)  # tensor id -> name given in `params`


def walk_graph(tensors: Any, params: dict[str, Any] | None = None) -> Trace:
    """A Trace of the autograd graph behind `tensors` (a tensor or a tuple/list of them)."""
    return walk(tensors, params=params).trace


def walk(tensors: Any, *, params: dict[str, Any] | None = None, show_attrs: bool = False) -> Walk:
    """Walk the autograd graph behind `tensors` depth first (no recursion), as torchviz's make_dot visits it."""
    roots_in = list(tensors) if isinstance(tensors, (tuple, list)) else [tensors]
    for t in roots_in:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"expected a tensor or a tuple of tensors, got {type(t).__name__}")
    walker = _Walker(params, show_attrs)
    with collector.paused():  # the walk only adds objects: full collections as they pile up would dominate big graphs
        for t in roots_in:
            walker.result.roots.append(walker.add_base_tensor(t))
    trace = walker.result.trace
    _hold_deep_chains(trace, walker.fns)
    # program order is the reverse of a walk from the outputs: number nodes so loop rolling reads them in order
    count = len(trace.nodes)
    for i, record in enumerate(trace.nodes.values()):
        record.seq = count - i
    return walker.result


class _Walker:
    """One walk's state: ids handed out in torchviz's visiting order, and the objects keyed by id() held meanwhile."""

    def __init__(self, params: dict[str, Any] | None, show_attrs: bool) -> None:
        self.trace = Trace(torch_version=torch.__version__)
        self.result = Walk(trace=self.trace, roots=[])
        self.show_attrs = show_attrs
        self.keep_alive: list[Any] = []  # objects whose id() we key on must outlive the walk
        self.tensor_ids: dict[int, str] = {}
        self.node_ids: dict[int, str] = {}
        self.fns: dict[str, Any] = {}  # node id -> the node
        self.drawn_tensors: set[int] = set()
        self.param_names = {id(p): name for name, p in (params or {}).items()}

    def tensor_id(self, t: torch.Tensor, origin: str) -> str:
        key = id(t)
        if key in self.tensor_ids:
            return self.tensor_ids[key]
        trace = self.trace
        self.keep_alive.append(t)
        tid = f"t{len(self.tensor_ids)}"
        self.tensor_ids[key] = tid
        counter = f"v{len(trace.version_counters)}"
        version = _version(t)
        trace.version_counters[counter] = VersionCounterRecord(counter, [tid])
        name = self.param_names.get(key)
        trace.tensors[tid] = TensorRecord(
            id=tid,
            shape=list(t.shape),
            dtype=str(t.dtype).removeprefix("torch."),
            device=str(t.device),
            requires_grad=t.requires_grad,
            is_leaf=t.is_leaf,
            grad_fn=None,
            storage=None,
            byte_range=None,
            version_counter=None if version is None else counter,
            version=version,
            origin="parameter" if isinstance(t, torch.nn.Parameter) else origin,
            seq=0,
            parameter=name,
        )
        if version is None:
            del trace.version_counters[counter]
        if name is not None:
            self.result.params[tid] = name
        return tid

    def node_id(self, fn: Any) -> tuple[str, bool]:
        """The node's id, and whether it is new."""
        key = id(fn)
        if key in self.node_ids:
            return self.node_ids[key], False
        self.keep_alive.append(fn)
        nid = f"n{len(self.node_ids)}"
        self.node_ids[key] = nid
        self.fns[nid] = fn
        return nid, True

    def visit(self, fn: Any) -> str:
        """Record `fn` and emit what torchviz emits before recursing; returns its id."""
        result = self.result
        nid, _ = self.node_id(fn)
        record = NodeRecord(id=nid, name=_fn_name(fn), next=[], seq=0)
        self.trace.nodes[nid] = record
        record.saved = _saved(fn, nid, result, self.tensor_id)
        if self.show_attrs:
            result.attrs[nid] = _attrs(fn)
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):
            record.variable = self.tensor_id(variable, "input")
            result.order.append(("tensor", record.variable))
        result.order.append(("node", nid))
        custom = _custom_saved(fn)
        if custom is not None:
            result.custom_saved[nid] = [None if t is None else self.tensor_id(t, "saved") for t in custom]
        return nid

    def add_nodes(self, root_fn: Any) -> str:
        rid, new = self.node_id(root_fn)
        if not new:
            return rid
        self.visit(root_fn)
        stack: list[tuple[Any, Iterator[Any]]] = [(root_fn, iter(getattr(root_fn, "next_functions", ())))]
        while stack:
            fn, children = stack[-1]
            parent = self.trace.nodes[self.node_ids[id(fn)]]
            step = next(children, None)
            if step is None:
                stack.pop()
                continue
            child = step[0]
            if child is None:
                parent.next.append(None)
                continue
            cid, new = self.node_id(child)
            parent.next.append(cid)
            if new:
                self.visit(child)
                stack.append((child, iter(getattr(child, "next_functions", ()))))
        return rid

    def add_base_tensor(self, t: torch.Tensor) -> str:
        # torchviz: the tensor, its grad_fn's graph, then its view base (dotted edge), iteratively
        first = None
        pending = [t]
        while pending:
            cur = pending.pop()
            if id(cur) in self.drawn_tensors:
                continue
            self.drawn_tensors.add(id(cur))
            tid = self.tensor_id(cur, "output")
            first = first or tid
            self.result.order.append(("tensor", tid))
            if cur.grad_fn is not None:
                node_id = self.trace.tensors[tid].grad_fn = self.add_nodes(cur.grad_fn)
                node = self.trace.nodes[node_id]
                if node.output is None:
                    node.output = tid
            if cur._is_view() and cur._base is not None:
                base = cur._base
                self.result.bases[tid] = self.tensor_id(base, "view base")
                pending.append(base)
        return first or ""


def _hold_deep_chains(trace: Trace, fns: dict[str, Any]) -> None:
    """Every node the walk touched is now freed through Python: hold one per segment (see chains.py)."""
    heights: dict[str, int] = {}
    for nid in reversed(list(trace.nodes)):  # the walk lists parents first
        below = [heights.get(n, 0) for n in trace.nodes[nid].next if n is not None]
        height = 1 + max(below) if below else 0
        heights[nid] = chains.hold(fns[nid]) if height >= chains.SEGMENT else height


def _fn_name(fn: Any) -> str:
    name = fn.name() if hasattr(fn, "name") else type(fn).__name__
    return str(name).removeprefix("torch::autograd::")


def _version(t: torch.Tensor) -> int | None:
    try:
        return int(t._version)
    except RuntimeError:  # inference tensors have no version counter
        return None


def _saved(fn: Any, nid: str, result: Walk, tensor_id: Any) -> list[SavedTensorRecord]:
    """Saved tensors through the unchecked `_raw_saved_*` handles; the checked getter only classifies the state."""
    records: list[SavedTensorRecord] = []
    for attr in _raw_names(fn):
        name = attr[len(RAW_PREFIX):]
        try:
            raw = getattr(fn, attr)
        except RuntimeError:
            continue
        status, saved_version = _check(fn, name)
        for label, tensor in saved_contents(fn, name, raw, packed=False, made_before=False):
            result.status[(nid, label)] = "freed" if tensor is None and status == "freed" else status
            if not isinstance(tensor, torch.Tensor):
                # (before torch 2.11 a poisoned one cannot be read: its version at save time is still known)
                records.append(SavedTensorRecord(label, None, saved_version, name.startswith("result")))
                continue
            tid = tensor_id(tensor, "saved")
            version = saved_version if saved_version is not None else _version(tensor)
            records.append(SavedTensorRecord(label, tid, version, name.startswith("result")))
    return records


_RAW_NAMES: dict[type, tuple[str, ...]] = {}


def _raw_names(fn: Any) -> tuple[str, ...]:
    """The `_raw_saved_*` attributes of a node; they depend only on its type (custom Functions excepted)."""
    kind = type(fn)
    names = _RAW_NAMES.get(kind)
    if names is None:
        names = tuple(sorted(a for a in dir(fn) if a.startswith(RAW_PREFIX)))
        if not hasattr(fn, "_forward_cls"):
            _RAW_NAMES[kind] = names
    return names


def _check(fn: Any, name: str) -> tuple[str, int | None]:
    """Ask autograd's own checked getter: ("ok", None), ("poisoned", version at save time) or ("freed", None)."""
    try:
        if hasattr(fn, "_forward_cls"):  # custom autograd.Function: its checked getter is ctx.saved_tensors
            fn.saved_tensors  # noqa: B018 (the read itself is the check)
        else:
            getattr(fn, SAVED_PREFIX + name)
    except AttributeError:
        return "ok", None
    except RuntimeError as exc:
        text = safe_str(exc)
        match = _VERSIONS.search(text)
        if match:
            return "poisoned", int(match.group(2))
        if "freed" in text or "backward through the graph a second time" in text:
            return "freed", None
        return "error", None
    return "ok", None


def _attrs(fn: Any) -> dict[str, str]:
    """torchviz's show_attrs text for each `_saved_*` attribute, without raising on poisoned or freed tensors."""
    attrs: dict[str, str] = {}
    for attr in sorted(a for a in dir(fn) if a.startswith(SAVED_PREFIX)):
        name = attr[len(SAVED_PREFIX):]
        if hasattr(type(fn), RAW_PREFIX + name) or (RAW_PREFIX + name) in dir(fn):
            status, _ = _check(fn, name)
            if status != "ok":
                attrs[name] = f"[saved tensor: {status}]"
                continue
        try:
            val = getattr(fn, attr)
        except RuntimeError as exc:
            attrs[name] = f"[unreadable: {type(exc).__name__}]"
            continue
        if torch.is_tensor(val):
            attrs[name] = "[saved tensor]"
        elif isinstance(val, tuple) and any(torch.is_tensor(t) for t in val):
            attrs[name] = "[saved tensors]"
        else:
            attrs[name] = safe_str(val)
    return attrs


def _custom_saved(fn: Any) -> list[torch.Tensor | None] | None:
    """`ctx.saved_tensors` of a custom autograd.Function node; [None] when backward has freed them."""
    if not hasattr(fn, "_forward_cls"):
        return None
    try:
        saved = fn.saved_tensors
    except RuntimeError:  # freed by backward, or poisoned: the walk's status says which
        return [None]
    return [t for t in saved if isinstance(t, torch.Tensor)]
