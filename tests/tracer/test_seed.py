"""The seed document's three examples, pinned: storages, version counters, saved versions, cut paths, lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import gradviz
from gradviz import EventKind, Trace
from gradviz.model import VersionChange

VERSION_MISMATCH = re.compile(r"is at version 1; expected version 0")


def script_line(path: Path, needle: str) -> int:
    """1-based number of the only code line of `path` that starts with `needle` (docstrings mention them too)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if line.strip().startswith(needle)]
    assert len(hits) == 1, f"{needle!r} on lines {hits} of {path.name}"
    return hits[0]


def only(events: list) -> object:
    assert len(events) == 1, events
    return events[0]


def tanh_node(trace: Trace):
    out = trace.tensor("out")
    assert out.grad_fn is not None
    node = trace.nodes[out.grad_fn]
    assert node.name == "TanhBackward0"
    return node


# ---------------------------------------------------------------------------------------------- .data (silent)
@pytest.fixture(scope="module")
def data_trace() -> Trace:
    return gradviz.trace_script(Path(__file__).resolve().parents[2] / "gallery" / "plot_02_data_silent.py")


def test_data_alias_shares_storage_not_counter(data_trace: Trace) -> None:
    out, c = data_trace.tensor("out"), data_trace.tensor("c")
    assert out.id != c.id
    assert c.storage == out.storage is not None
    assert c.byte_range == out.byte_range == (0, 12)  # three float32
    assert c.version_counter != out.version_counter
    assert data_trace.version_counters[c.version_counter].created_by == "data"
    assert c.origin == "data" and c.source == out.id
    assert c.requires_grad is False and c.grad_fn is None


def test_data_get_event_at_its_line(data_trace: Trace, gallery: Path) -> None:
    event = only(data_trace.events_of(EventKind.DATA_GET))
    out, c = data_trace.tensor("out"), data_trace.tensor("c")
    assert (event.tensor, event.result) == (out.id, c.id)
    assert event.location.line == script_line(gallery / "plot_02_data_silent.py", "c = out.data")
    assert event.location.code.strip().startswith("c = out.data")
    assert event.data["expression"] == "out"
    assert event.data["source_grad_fn"] == out.grad_fn
    assert event.data["source_requires_grad"] is True


def test_zero_through_data_moves_c_not_out(data_trace: Trace, gallery: Path) -> None:
    event = only(data_trace.events_of(EventKind.INPLACE_WRITE))
    out, c = data_trace.tensor("out"), data_trace.tensor("c")
    assert event.tensor == c.id
    assert event.op == "Tensor.zero_"
    assert event.versions[0] == VersionChange(c.id, 0, 1)  # the written tensor comes first
    assert VersionChange(out.id, 0, 0) in event.versions  # same bytes, counter untouched
    assert event.location.line == script_line(gallery / "plot_02_data_silent.py", "c.zero_()")
    assert event.location.code.strip().startswith("c.zero_()")
    assert event.location.file == str((gallery / "plot_02_data_silent.py").resolve())
    assert event.data["storage"] == out.storage
    assert event.data["byte_range"] == [0, 12]
    assert event.data["counter"] == c.version_counter


def test_tanh_saved_out_at_version_0(data_trace: Trace) -> None:
    node = tanh_node(data_trace)
    saved = only([s for s in node.saved if s.name == "result"])
    assert saved.tensor == data_trace.tensor("out").id
    assert saved.saved_version == 0
    assert saved.is_output is True


def test_data_backward_succeeds(data_trace: Trace, gallery: Path) -> None:
    event = only(data_trace.events_of(EventKind.BACKWARD))
    assert event.data["outcome"] == "ok"
    assert event.location.line == script_line(gallery / "plot_02_data_silent.py", "out.sum().backward()")
    assert data_trace.tensor("a").id in event.data["reached_leaves"]
    assert tanh_node(data_trace).id in event.data["reached_nodes"]
    assert data_trace.exception is None and data_trace.error is None


# ---------------------------------------------------------------------------------------------- .detach() (loud)
@pytest.fixture(scope="module")
def detach_trace() -> Trace:
    return gradviz.trace_script(Path(__file__).resolve().parents[2] / "gallery" / "plot_03_detach_raises.py")


def test_detach_alias_shares_storage_and_counter(detach_trace: Trace) -> None:
    out, c = detach_trace.tensor("out"), detach_trace.tensor("c")
    assert c.storage == out.storage is not None
    assert c.byte_range == out.byte_range
    assert c.version_counter == out.version_counter is not None
    assert set(detach_trace.version_counters[out.version_counter].tensors) >= {out.id, c.id}
    assert c.origin == "detach" and c.source == out.id


def test_zero_through_detach_moves_both(detach_trace: Trace, gallery: Path) -> None:
    event = only(detach_trace.events_of(EventKind.INPLACE_WRITE))
    out, c = detach_trace.tensor("out"), detach_trace.tensor("c")
    assert event.versions[0] == VersionChange(c.id, 0, 1)
    assert VersionChange(out.id, 0, 1) in event.versions
    assert event.data["counter"] == out.version_counter
    assert event.location.line == script_line(gallery / "plot_03_detach_raises.py", "c.zero_()")
    detach = only(detach_trace.events_of(EventKind.DETACH))
    assert (detach.tensor, detach.result) == (out.id, c.id)
    assert detach.location.line == script_line(gallery / "plot_03_detach_raises.py", "c = out.detach()")


def test_detach_tanh_saved_out_at_version_0(detach_trace: Trace) -> None:
    saved = only([s for s in tanh_node(detach_trace).saved if s.name == "result"])
    assert (saved.tensor, saved.saved_version) == (detach_trace.tensor("out").id, 0)


def test_detach_runtime_error_recorded(detach_trace: Trace, gallery: Path) -> None:
    backward_line = script_line(gallery / "plot_03_detach_raises.py", "out.sum().backward()")
    exc = detach_trace.exception
    assert exc is not None
    assert exc.type == "RuntimeError"
    assert VERSION_MISMATCH.search(exc.message)
    assert exc.location.line == backward_line
    assert exc.location.file == str((gallery / "plot_03_detach_raises.py").resolve())
    # the live exception, so the caller can re-raise it
    assert isinstance(detach_trace.error, RuntimeError)
    assert str(detach_trace.error) == exc.message
    with pytest.raises(RuntimeError, match=VERSION_MISMATCH):
        detach_trace.reraise()
    backward = only(detach_trace.events_of(EventKind.BACKWARD))
    assert backward.data["outcome"] == "error"
    assert backward.data["error"]["type"] == "RuntimeError"
    assert VERSION_MISMATCH.search(backward.data["error"]["message"])
    last = detach_trace.events[-1]
    assert last.kind is EventKind.EXCEPTION and last.location.line == backward_line
    assert last.seq > backward.seq


# ---------------------------------------------------------------------------------------------- with-block form
def test_with_block_data_example() -> None:
    a = torch.tensor([1, 2, 3.0], requires_grad=True)
    with gradviz.trace() as t:
        out = a.tanh()
        c = out.data
        c.zero_()
        out.sum().backward()
    assert torch.equal(a.grad, torch.ones(3))  # the silently wrong gradient, unchanged by tracing
    ids = {name: t.tensor(name).id for name in ("a", "out", "c")}
    assert t.tensor("c").storage == t.tensor("out").storage
    assert t.tensor("c").version_counter != t.tensor("out").version_counter
    write = only(t.events_of(EventKind.INPLACE_WRITE))
    assert write.versions[0] == VersionChange(ids["c"], 0, 1)
    assert VersionChange(ids["out"], 0, 0) in write.versions
    assert write.location.file == __file__
    assert write.location.code.strip() == "c.zero_()"
    assert write.location.line == only(t.events_of(EventKind.DATA_GET)).location.line + 1
    saved = only(tanh_node(t).saved)
    assert (saved.tensor, saved.saved_version) == (ids["out"], 0)
    assert only(t.events_of(EventKind.BACKWARD)).data["reached_leaves"] == [ids["a"]]


def test_with_block_detach_example_raises_unchanged() -> None:
    a = torch.tensor([1, 2, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=VERSION_MISMATCH) as raised:
        with gradviz.trace() as t:
            out = a.tanh()
            c = out.detach()
            c.zero_()
            out.sum().backward()  # the line the error surfaces at
    assert a.grad is None
    write = only(t.events_of(EventKind.INPLACE_WRITE))
    out_id, c_id = t.tensor("out").id, t.tensor("c").id
    assert write.versions[0] == VersionChange(c_id, 0, 1)
    assert VersionChange(out_id, 0, 1) in write.versions
    assert t.tensor("c").version_counter == t.tensor("out").version_counter
    assert t.exception.type == "RuntimeError"
    assert t.exception.message == str(raised.value)
    assert t.exception.location.code.strip().startswith("out.sum().backward()")
    assert t.exception.location.line == write.location.line + 1


# ---------------------------------------------------------------------------------------------- TestDetach
@pytest.fixture(scope="module")
def testdetach_trace() -> Trace:
    return gradviz.trace_script(Path(__file__).resolve().parents[2] / "gallery" / "plot_01_testdetach.py")


def test_testdetach_layer1_unreachable_by_shape(testdetach_trace: Trace) -> None:
    """Identify the weights by shape (3x4 and 2x3), independent of how parameters get named."""
    params = {tuple(t.shape): t.id for t in testdetach_trace.tensors.values() if t.origin == "parameter"}
    layer1, layer2 = params[(3, 4)], params[(2, 3)]
    backwards = testdetach_trace.events_of(EventKind.BACKWARD)
    assert len(backwards) == 3  # three training steps
    for event in backwards:
        assert event.data["outcome"] == "ok"
        assert layer1 not in event.data["reached_leaves"]
        assert event.data["reached_leaves"] == [layer2]
    steps = testdetach_trace.events_of(EventKind.OPTIMIZER_STEP)
    assert [s.data["changed"] for s in steps] == [[layer2]] * 3
    assert all(s.data["grads"] == {layer1: "none", layer2: "fresh"} for s in steps)



def test_testdetach_layer1_unreachable_by_name(testdetach_trace: Trace) -> None:
    layer1 = testdetach_trace.tensor("layer1.weight")
    layer2 = testdetach_trace.tensor("layer2.weight")
    assert layer1.shape == [3, 4] and layer2.shape == [2, 3]
    for event in testdetach_trace.events_of(EventKind.BACKWARD):
        assert layer1.id not in event.data["reached_leaves"]
        assert layer2.id in event.data["reached_leaves"]


def test_testdetach_detach_event_at_its_line(testdetach_trace: Trace, gallery: Path) -> None:
    line = script_line(gallery / "plot_01_testdetach.py", "x = x.detach()")
    inside_forward = [e for e in testdetach_trace.events_of(EventKind.DETACH) if e.location.line == line]
    assert len(inside_forward) == 3  # once per forward pass
    for event in inside_forward:
        assert event.location.code.strip() == "x = x.detach()"
        assert event.data["expression"] == "x"
        source = testdetach_trace.tensors[event.tensor]
        assert testdetach_trace.nodes[source.grad_fn].name == "ReluBackward0"
        assert event.data["source_grad_fn"] == source.grad_fn
        alias = testdetach_trace.tensors[event.result]
        assert alias.grad_fn is None and alias.requires_grad is False
        assert alias.version_counter == source.version_counter and alias.storage == source.storage
    # the node consuming the detached tensor (layer2's matmul) has no path back to the ReLU
    relu_nodes = {n.id for n in testdetach_trace.nodes.values() if n.name == "ReluBackward0"}
    for event in testdetach_trace.events_of(EventKind.BACKWARD):
        assert not relu_nodes & set(event.data["reached_nodes"])
    assert testdetach_trace.exception is None


def test_writing_through_a_slice_of_a_tensor_is_two_writes_with_one_counter() -> None:
    """`x_[:, :3] *= 0.0`: `mul_` on the view, then `__setitem__` copying the view into x_. The view shares x_'s
    counter (PyTorch: both at version 2 after it), so each write moves both, and none is behind autograd's back: no
    third write for the value setitem read, and no 'x_: v2 -> v2'."""
    with gradviz.trace() as t:
        x = torch.randn(4, 6)
        x_ = x.clone()
        x_[:, :3] *= 0.0
    assert x_._version == 2
    writes = [e for e in t.events if e.kind is EventKind.INPLACE_WRITE]
    assert [e.op for e in writes] == ["Tensor.mul_", "Tensor.__setitem__"]
    for event, (before, after) in zip(writes, [(0, 1), (1, 2)]):
        assert {(c.before, c.after) for c in event.versions} == {(before, after)}
