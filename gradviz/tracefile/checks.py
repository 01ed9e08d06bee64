"""Checks of a loaded trace beyond field types: ids that must exist, event data per kind, render's extra fields."""

from __future__ import annotations

from typing import Any

from ..model import EventKind, Trace


def check_references(trace: Trace) -> None:
    """Every id a record points at must exist, so later passes never meet a dangling reference."""
    tensors, nodes, storages, counters = trace.tensors, trace.nodes, trace.storages, trace.version_counters
    for t in tensors.values():
        check(t.grad_fn is None or t.grad_fn in nodes, "tensor {} points at unknown node {!r}", t.id, t.grad_fn)
        check(t.storage is None or t.storage in storages, "tensor {} points at unknown storage {!r}", t.id, t.storage)
        check(
            t.version_counter is None or t.version_counter in counters,
            "tensor {} points at unknown version counter {!r}", t.id, t.version_counter,
        )  # fmt: skip
        check(t.source is None or t.source in tensors, "tensor {} aliases unknown tensor {!r}", t.id, t.source)
        # -1: a nested tensor's ragged dimension (docs/trace-format.md); anything lower is not a size
        check(min(t.shape, default=0) >= -1, "tensor {} has a negative size in its shape {}", t.id, t.shape)
    for s in storages.values():
        check(s.nbytes >= 0, "storage {} has a negative size ({} bytes)", s.id, s.nbytes)
    for n in nodes.values():
        for nxt in n.next:
            check(nxt is None or nxt in nodes, "node {} points at unknown node {!r}", n.id, nxt)
        for saved in n.saved:
            tid = saved.tensor
            check(tid is None or tid in tensors, "node {} saved unknown tensor {!r}", n.id, tid)
        check(n.variable is None or n.variable in tensors, "node {} feeds unknown tensor {!r}", n.id, n.variable)
        check(n.output is None or n.output in tensors, "node {} names unknown output tensor {!r}", n.id, n.output)
    for v in counters.values():
        for tid in v.tensors:
            check(tid in tensors, "version counter {} lists unknown tensor {!r}", v.id, tid)
    for op in trace.ops:
        for tid in op.inputs:
            check(tid in tensors, "op {} ({}) uses unknown tensor {!r}", op.seq, op.name, tid)
        for tid in op.outputs:
            check(tid in tensors, "op {} ({}) uses unknown tensor {!r}", op.seq, op.name, tid)
    for e in trace.events:
        for tid in (e.tensor, e.result):
            check(tid is None or tid in tensors, "event {} ({}) names unknown tensor {!r}", e.seq, e.kind.value, tid)
        for vc in e.versions:
            check(vc.tensor in tensors, "event {} lists unknown tensor {!r}", e.seq, vc.tensor)
    for tid, kind in trace.held_at_end.items():
        check(tid in tensors, "held_at_end names unknown tensor {!r}", tid)
        check(kind in ("names", "objects"), "held_at_end[{!r}] must be 'names' or 'objects', got {!r}", tid, kind)
    for tid, seq in trace.gone_untraced.items():
        check(tid in tensors, "gone_untraced names unknown tensor {!r}", tid)
        check(type(seq) is int, "gone_untraced[{!r}] must be a seq, got {!r}", tid, seq)
    for tid, count in trace.untraced_kin.items():
        check(tid in tensors, "untraced_kin names unknown tensor {!r}", tid)
        check(type(count) is int and count > 0, "untraced_kin[{!r}] must be a positive count, got {!r}", tid, count)


# what each event kind keeps in `data`: key -> kind of value. "tensor"/"node"/"storage"/"counter" are ids that must
# exist ("?" allows null), "[tensor]" a list of them, "range" a byte range; other keys are kept unchecked
_ALIAS = {"source_grad_fn": "node?", "source_requires_grad": "bool", "expression": "str"}
_EVENT_DATA: dict[EventKind, dict[str, str]] = {
    EventKind.DATA_GET: _ALIAS,
    EventKind.DETACH: _ALIAS,
    EventKind.DATA_SET: {"old_storage": "storage?", "new_storage": "storage?", "byte_range": "range"},
    EventKind.DETACH_: {"source_grad_fn": "node?", "error": "str"},
    EventKind.REQUIRES_GRAD_: {"requires_grad": "bool"},
    EventKind.INPLACE_WRITE: {"storage": "storage?", "byte_range": "range", "counter": "counter?", "grad_fn": "node?"},
    EventKind.BACKWARD: {
        "api": "str", "roots": "[tensor]", "reached_nodes": "[node]", "reached_leaves": "[tensor]",
        "inputs": "[tensor]?", "retain_graph": "bool", "outcome": "outcome", "error": "error",
        "create_graph": "bool", "nested_leaves": "[tensor]", "thread": "str",
    },  # fmt: skip
    EventKind.OPTIMIZER_STEP: {
        "optimizer": "str", "optimizer_id": "str", "changed": "[tensor]", "grads": "grads", "outcome": "outcome",
        "thread": "str",
    },  # fmt: skip
    EventKind.EXCEPTION: {"type": "str", "message": "str"},
}
# the tensor an event acts on, where the passes and views need one
_NEEDS_TENSOR = {EventKind.DATA_GET, EventKind.DETACH, EventKind.DATA_SET, EventKind.DETACH_, EventKind.REQUIRES_GRAD_,
                 EventKind.INPLACE_WRITE}  # fmt: skip
_NEEDS_RESULT = {EventKind.DATA_GET, EventKind.DETACH}
_GRADS = {"fresh", "written", "none", "zero", "nonzero"}


def check_event_data(trace: Trace) -> None:
    tables: dict[str, dict[str, Any]] = {
        "tensor": trace.tensors, "node": trace.nodes, "storage": trace.storages, "counter": trace.version_counters,
    }  # fmt: skip
    seen: set[int] = set()
    for i, event in enumerate(trace.events):
        check(event.seq not in seen, "events[{}].seq {} is used by another event", i, event.seq)
        seen.add(event.seq)
        kind = event.kind
        for name, value, needs in (("tensor", event.tensor, _NEEDS_TENSOR), ("result", event.result, _NEEDS_RESULT)):
            check(value is not None or kind not in needs, "events[{}].{} must name a tensor for a {} event", i, name, kind.value)
        specs = _EVENT_DATA[kind]
        for key, held in event.data.items():
            spec = specs.get(key)
            if spec is None:
                check(is_json_plain(held), "events[{}].data.{} holds a value of unsupported type", i, key)
            else:
                problem = _value_problem(held, spec, tables)
                if problem is not None:
                    raise ValueError(f"events[{i}].data.{key}{problem}")


def _value_problem(value: Any, spec: str, tables: dict[str, dict[str, Any]]) -> str | None:
    """What is wrong with an event's data value (the message after its name), or None when it fits `spec`."""
    if value is None and spec.endswith("?"):
        return None
    spec = spec.rstrip("?")
    if spec == "str":
        return None if is_str(value) else f" must be a string, got {describe(value)}"
    if spec == "bool":
        return None if is_bool(value) else f" must be true or false, got {describe(value)}"
    if spec == "range":
        if isinstance(value, list) and len(value) == 2 and all(map(is_int, value)) and 0 <= value[0] <= value[1]:
            return None
        return f" must be a list of 2 values [start, stop) with 0 <= start <= stop, got {short(value)}"
    if spec == "outcome":
        return None if value in ("ok", "error") else f" must be 'ok' or 'error', got {short(value)}"
    if spec == "error":
        if isinstance(value, dict) and set(value) == {"type", "message"} and all(map(is_str, value.values())):
            return None
        return f" must be an object {{type, message}} of two strings, got {short(value)}"
    if spec == "grads":
        if not isinstance(value, dict):
            return f" must be an object, got {describe(value)}"
        for tid, how in value.items():
            if tid not in tables["tensor"]:
                return f" names unknown tensor {tid!r}"
            if how not in _GRADS:
                return f".{tid} must be one of {sorted(_GRADS)}, got {short(how)}"
        return None
    if spec.startswith("["):
        what = spec[1:-1]
        table = tables[what]
        if not isinstance(value, list):
            return f" must be a list, got {describe(value)}"
        for j, item in enumerate(value):
            if not (is_str(item) and item in table):
                return f"[{j}] names unknown {what} {short(item)}"
        return None
    return None if is_str(value) and value in tables[spec] else f" names unknown {spec} {short(value)}"


def check_extras(data: dict[str, Any]) -> None:
    """`view` and `findings`, written by `gradviz render -o x.json`: informational, so only their shape is checked."""
    view = data.get("view")
    check(view is None or is_str(view), f"'view' must be a string, got {describe(view)}")
    findings = data.get("findings", [])
    check(isinstance(findings, list), f"'findings' must be a list, got {describe(findings)}")
    for i, finding in enumerate(findings):
        check(
            isinstance(finding, dict) and is_str(finding.get("kind")) and is_json_plain(finding),
            f"findings[{i}] must be an object with a 'kind', got {short(finding)}",
        )


def is_str(v: Any) -> bool:
    return type(v) is str


def is_int(v: Any) -> bool:
    return type(v) is int


def is_bool(v: Any) -> bool:
    return type(v) is bool


def is_json_plain(value: Any, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(value, (str, int, float, bool, type(None))):
        return True
    if isinstance(value, list):
        return all(is_json_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json_plain(v, depth + 1) for k, v in value.items())
    return False


def check(cond: bool, what: str, *args: Any) -> None:
    """Raise ValueError(what) unless `cond`; `what` is formatted with `args` only then (hot loops stay cheap)."""
    if not cond:
        raise ValueError(what.format(*args) if args else what)


def describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
