"""Saved tensors read without `SavedTensor.data` (torch 2.8-2.10 lack it): through the checked getter, the same
tensors and versions as `.data` gives; None where reading would run the program's code or the version moved.

On a torch that has `.data` the older path is forced (saved_read.HANDLE_DATA off) and compared with it; on one
that lacks it these tests run the real thing."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import gradviz
from gradviz.analysis import diagnose
from gradviz.integrations.compat import make_dot
from gradviz.tracer import nodes, saved_read
from gradviz.tracer.saved_read import contents_without_data


def _handles(node: Any, name: str) -> list[tuple[str, Any]]:
    raw = getattr(node, "_raw_saved_" + name)
    if isinstance(raw, (list, tuple)):
        return [(f"{name}[{i}]", h) for i, h in enumerate(raw)]
    return [(name, raw)]


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        return grad * w, grad * x


def test_inputs_outputs_lists_and_custom_functions_read_as_their_tensors() -> None:
    a = torch.randn(4, requires_grad=True)
    x = a * 2
    sin = torch.sin(x)  # saves its input: the tensor x itself
    tanh = torch.tanh(x)  # saves its output: the same memory and version counter as `tanh`
    index = torch.tensor([0, 2])
    picked = x[index]  # saves a list of indices
    w = torch.ones(4, requires_grad=True)
    custom = Scale.apply(x, w)
    x.data.add_(1)  # a silent write: the version does not move, the getter still reads

    (label, got), = contents_without_data(sin.grad_fn, "self", _handles(sin.grad_fn, "self"), False, False)
    assert label == "self" and got is x and got._version == 0
    (label, got), = contents_without_data(tanh.grad_fn, "result", _handles(tanh.grad_fn, "result"), False, False)
    assert label == "result" and got.data_ptr() == tanh.data_ptr() and got._version == tanh._version == 0
    (label, got), = contents_without_data(picked.grad_fn, "indices", _handles(picked.grad_fn, "indices"), False, False)
    assert label == "indices[0]" and got is index
    saved = contents_without_data(custom.grad_fn, "tensors", _handles(custom.grad_fn, "tensors"), False, False)
    assert [label for label, _ in saved] == ["tensors[0]", "tensors[1]"]
    assert saved[0][1] is x and saved[1][1] is w


def test_moved_version_packed_and_made_before_read_as_none() -> None:
    a = torch.randn(3, requires_grad=True)
    x = a * 2
    y = torch.sin(x)
    handles = _handles(y.grad_fn, "self")
    assert contents_without_data(y.grad_fn, "self", handles, True, False) == [("self", None)]  # a pack hook's
    assert contents_without_data(y.grad_fn, "self", handles, False, True) == [("self", None)]  # made before
    x.detach().add_(1)  # now the getter raises: autograd's own check
    assert contents_without_data(y.grad_fn, "self", handles, False, False) == [("self", None)]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.fixture
def without_handle_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as torch 2.8-2.10 would have it: no `SavedTensor.data` read."""
    monkeypatch.setattr(saved_read, "HANDLE_DATA", False)
    monkeypatch.setattr(nodes, "HANDLE_DATA", False)


def _saved_write_program() -> None:
    a = torch.randn(3, requires_grad=True)
    x = a * 2
    y = x * x  # saves x twice, at version 0
    x.data.add_(1)  # silent: backward gives wrong gradients
    y.sum().backward()


WRITE_LINE = _saved_write_program.__code__.co_firstlineno + 4


@pytest.mark.usefixtures("without_handle_data")
def test_traced_saved_tensors_keep_their_versions_without_handle_data() -> None:
    with gradviz.trace() as trace:
        _saved_write_program()
    square = [n for n in trace.nodes.values() if n.name == "MulBackward0"][-1]  # x * x (the first: a * 2)
    x = trace.tensor("x").id
    assert [(s.name, s.tensor, s.saved_version) for s in square.saved] == [("other", x, 0), ("self", x, 0)]
    assert [(f.kind.value, f.line) for f in diagnose(trace)] == [("silently_corrupted_saved_tensor", WRITE_LINE)]


@pytest.mark.usefixtures("without_handle_data")
def test_pack_hook_tensors_are_counted_as_not_recorded_not_dropped_silently() -> None:
    with gradviz.trace() as trace:
        a = torch.randn(3, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            y = torch.tanh(a * 2)
        y.sum().backward()
    assert trace.internal_errors and trace.internal_errors[-1].startswith("TanhBackward0: ")
    for error in trace.internal_errors:  # (a * 2, made under the hook too, saved the scalar 2)
        assert re.fullmatch(
            r"\w+: UnreadableSaved: torch \S+ cannot show a tensor saved through a saved_tensors_hooks pack hook "
            r"without running the unpack hook \(torch >= 2\.11 can\): writes to it are not checked",
            error,
        )


@pytest.mark.usefixtures("without_handle_data")
def test_checkpoint_packing_is_not_counted() -> None:
    layer = torch.nn.Linear(3, 3)
    with gradviz.trace() as trace:
        out = torch.utils.checkpoint.checkpoint(layer, torch.randn(2, 3), use_reentrant=False)
        out.sum().backward()
    assert trace.internal_errors == []


@pytest.mark.usefixtures("without_handle_data")
def test_make_dot_marks_a_poisoned_saved_tensor_it_cannot_read() -> None:
    a = torch.randn(3, requires_grad=True)
    y = torch.tanh(a * 2)
    y.detach().add_(1)  # the saved result moved to v1: the checked getter raises, there is no .data
    source = make_dot(y, show_saved=True).source
    assert re.search(r'"result\n poisoned: expected v0" fillcolor=red', source), source
