"""A program that wraps torch's own functions runs under gradviz as under Python (issue 36 item 6): a torch function
written in Python hands the mode whatever its name is bound to, the program's wrapper, which gradviz must not call a
second time; its backward calls are still recorded as backward calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

import gradviz

WRAPPERS = """\
import functools
import inspect
import torch
import torch.nn.functional as F

calls = []
orig_backward = torch.Tensor.backward
orig_autograd_backward = torch.autograd.backward
orig_grad = torch.autograd.grad
orig_relu = F.relu


def counted(self, *a, **k):
    calls.append("Tensor.backward")
    return orig_backward(self, *a, **k)


@functools.wraps(orig_autograd_backward)
def counted_autograd(*a, **k):
    calls.append("autograd.backward")
    return orig_autograd_backward(*a, **k)


def counted_grad(*a, **k):
    calls.append("autograd.grad")
    return orig_grad(*a, **k)


def make_relu():
    inner = orig_relu

    def relu(x, inplace=False):
        calls.append("relu")
        return inner(x, inplace=inplace)

    return relu


torch.Tensor.backward = counted
torch.autograd.backward = counted_autograd
torch.autograd.grad = counted_grad
F.relu = make_relu()
print(torch.Tensor.backward is counted, torch.autograd.backward.__wrapped__ is orig_autograd_backward)
print(inspect.signature(torch.Tensor.backward), inspect.signature(torch.autograd.backward))
x = torch.ones(3, requires_grad=True)
F.relu(x * 2 - 1).sum().backward()
(x * 3).sum().backward()
torch.autograd.backward([(x ** 2).sum()])
(g,) = torch.autograd.grad((x * 4).sum(), x)
print(calls)
print(x.grad.tolist(), g.tolist())
"""


def test_wrappers_of_torch_functions_run_once_as_under_python(tmp_path: Path) -> None:
    (tmp_path / "wrappers.py").write_text(WRAPPERS)
    plain = subprocess.run([sys.executable, "wrappers.py"], cwd=tmp_path, capture_output=True, text=True, timeout=240)
    traced = subprocess.run(
        [sys.executable, "-m", "gradviz", "check", "wrappers.py"], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert plain.returncode == 0, plain.stderr
    assert traced.returncode == 0, traced.stdout + traced.stderr
    lines = plain.stdout.splitlines()
    assert lines[0] == "True True"
    assert lines[1].startswith("(self, *a, **k) (tensors: ")  # (functools.wraps: the wrapped function's signature)
    # each wrapper once per call the program makes (Tensor.backward calls autograd.backward itself)
    assert lines[2:] == [
        str(["relu", "Tensor.backward", "autograd.backward", "Tensor.backward", "autograd.backward",
             "autograd.backward", "autograd.grad"]),
        "[7.0, 7.0, 7.0] [4.0, 4.0, 4.0]",
    ]
    assert traced.stdout.splitlines() == [*lines, "wrappers.py: no problems found"]


def test_a_wrapped_backward_is_recorded_once_as_a_backward() -> None:
    calls: list[int] = []
    orig = torch.Tensor.backward

    def counted(self, *a, **k):  # type: ignore[no-untyped-def]
        calls.append(1)
        return orig(self, *a, **k)

    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    torch.Tensor.backward = counted  # type: ignore[method-assign]
    try:
        with gradviz.trace() as t:
            out = a.tanh()
            out.data.zero_()
            out.sum().backward()
            (a * 2).sum().backward()
    finally:
        torch.Tensor.backward = orig  # type: ignore[method-assign]
    assert calls == [1, 1]
    # PyTorch: the zeroed saved output gives 1 - 0 = 1, then 2 from the second backward
    assert a.grad.tolist() == [3.0, 3.0, 3.0]
    backwards = t.events_of("backward")
    assert [(e.op, e.data["outcome"]) for e in backwards] == [("Tensor.backward", "ok")] * 2
    assert backwards[0].location is not None and backwards[0].location.code.strip() == "return orig(self, *a, **k)"
    assert t.nodes[t.tensor("out").grad_fn].name == "TanhBackward0"
    assert t.tensor("out").grad_fn in backwards[0].data["reached_nodes"]
    findings = gradviz.diagnose(t)
    assert [f.kind.value for f in findings] == ["silently_corrupted_saved_tensor"]
    assert findings[0].affected_backward == backwards[0].seq
