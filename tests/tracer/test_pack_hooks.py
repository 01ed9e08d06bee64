"""Saved tensors packed by saved_tensors_hooks (copies, save_on_cpu, offloading): a write to the original tensor
afterwards is not a poisoned saved tensor when the hook kept a copy, and is a silent corruption when it kept the
tensor itself (autograd checks no versions under pack hooks)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import gradviz
from gradviz import FindingKind, Trace
from gradviz.tracer.saved_read import HANDLE_DATA

readable_pack_hooks = pytest.mark.skipif(
    not HANDLE_DATA,
    reason="torch 2.8-2.10: a tensor a pack hook saved cannot be read without running the unpack hook; the summary says so (test_saved_read.py)")

CLONED = """
import torch
from torch.autograd.graph import saved_tensors_hooks
z = torch.randn(3, requires_grad=True) * 1
with saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
    w = z.sigmoid()
w.detach().mul_(0)  # the node saved a clone: backward is right
w.sum().backward()
"""

# the CPU copy save_on_cpu makes of a CPU tensor is the tensor itself: the write reaches what backward uses
SAVED_ON_CPU = """
import torch
from torch.autograd.graph import save_on_cpu
a = torch.arange(3.0, requires_grad=True)
z = a * 1
with save_on_cpu():
    w = z.sigmoid()
w.detach().mul_(0)
w.sum().backward()
print(a.grad.tolist())
"""

# a real offloading hook (activations serialised to a byte buffer, as disk offloading does), around a training
# loop whose ReLU writes in place and whose optimizer writes the weights the next step saves
OFFLOADED_TRAINING = """
import io
import torch
from torch.autograd.graph import saved_tensors_hooks

def pack(t):
    buffer = io.BytesIO()
    torch.save(t, buffer)
    return buffer

def unpack(buffer):
    buffer.seek(0)
    return torch.load(buffer)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(inplace=True), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(3):
    x, y = torch.randn(8, 6), torch.randn(8, 1)
    with saved_tensors_hooks(pack, unpack):
        loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    x.mul_(2)  # the input, saved (as a copy) by the first layer, written after backward
print("loss", round(loss.item(), 6))
"""


def _kinds(trace: Trace) -> list[FindingKind]:
    return [f.kind for f in gradviz.diagnose(trace)]


@readable_pack_hooks
def test_cloned_by_pack_hook_is_not_poisoned(trace_of: Callable[..., Trace]) -> None:
    trace = trace_of(CLONED)
    assert trace.exception is None and trace.internal_errors == []
    assert _kinds(trace) == []
    sigmoid = next(n for n in trace.nodes.values() if n.name == "SigmoidBackward0")
    (saved,) = sigmoid.saved
    assert saved.packed and saved.name == "result"
    w = trace.tensor("w")
    assert saved.tensor != w.id and trace.tensors[saved.tensor].storage != w.storage  # the clone, not `w`


@readable_pack_hooks
def test_save_on_cpu_of_a_cpu_tensor_is_silently_corrupted(trace_of: Callable[..., Trace]) -> None:
    trace = trace_of(SAVED_ON_CPU)
    (finding,) = gradviz.diagnose(trace)
    assert finding.kind is FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR
    assert finding.line == 7
    assert "pack hook" in finding.message and "shares its version counter" not in finding.message


@readable_pack_hooks
def test_real_offloading_training_loop_has_no_finding(trace_of: Callable[..., Trace], tmp_path, capsys) -> None:
    namespace: dict[str, object] = {}
    exec(compile(OFFLOADED_TRAINING, "plain.py", "exec"), namespace)  # the same program, untraced
    plain_out = capsys.readouterr().out
    trace = trace_of(OFFLOADED_TRAINING)
    assert capsys.readouterr().out == plain_out
    assert trace.exception is None and trace.internal_errors == []
    assert _kinds(trace) == []
    addmm = [n for n in trace.nodes.values() if n.name == "AddmmBackward0"]
    assert len(addmm) == 6 and all(s.packed and s.tensor is None for n in addmm for s in n.saved)


def test_version_check_case_without_hooks_still_poisoned(trace_of: Callable[..., Trace]) -> None:
    """The same write with no hook is the seed's `.detach()` example: backward raises, the finding stays."""
    trace = trace_of(CLONED.replace("with saved_tensors_hooks(lambda t: t.clone(), lambda t: t):\n    w", "if True:\n    w"))
    assert _kinds(trace) == [FindingKind.POISONED_SAVED_TENSOR]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="offloading from a GPU needs one")
def test_save_on_cpu_offloading_gpu_activations_has_no_finding(trace_of: Callable[..., Trace]) -> None:
    trace = trace_of(SAVED_ON_CPU.replace("torch.arange(3.0, requires_grad=True)", "torch.arange(3.0, device='cuda', requires_grad=True)"))
    assert trace.exception is None and _kinds(trace) == []  # the saved tensor is a CPU copy: the write cannot reach it
