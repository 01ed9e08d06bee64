"""Other torch-function handlers (a mode the program entered, a tensor subclass) see exactly the calls the program
makes: none of the reads gradviz makes for its own bookkeeping reach them, traced or not."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

import gradviz
from gradviz import EventKind


class CallCounter(TorchFunctionMode):
    """What a FLOP counter or a logging mode sees: every torch function call, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter[str] = Counter()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.seen[getattr(func, "__qualname__", repr(func))] += 1
        return func(*args, **(kwargs or {}))


class Logged(torch.Tensor):
    """A tensor subclass that counts the torch functions called on it."""

    calls: Counter[str] = Counter()

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        cls.calls[getattr(func, "__qualname__", repr(func))] += 1
        return super().__torch_function__(func, types, args, kwargs or {})


def _program() -> float:
    """The seed's `.data` write, a detach, a failing and a working backward, an optimizer step and a dim() call."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(4, 3)
    out = lin(x).tanh()
    c = out.data
    c.zero_()
    out.detach().mul(2)
    assert x.dim() == 2
    try:
        out.detach().zero_()
        out.sum().backward()
    except RuntimeError:
        pass
    loss = lin(x).sigmoid().sum()
    loss.backward()
    opt.step()
    return loss.item()


def test_a_mode_the_program_entered_sees_the_same_calls_traced_or_not() -> None:
    with CallCounter() as untraced:
        expected = _program()
    with CallCounter() as traced, gradviz.trace() as t:
        got = _program()
    assert got == expected
    assert sum(untraced.seen.values()) > 30
    assert traced.seen == untraced.seen
    # and gradviz still recorded everything, under the program's mode
    kinds = [e.kind for e in t.events]
    writes = [e.op for e in t.events if e.kind == EventKind.INPLACE_WRITE]
    assert writes == ["nn.init.kaiming_uniform_", "nn.init.uniform_", "Tensor.zero_", "Tensor.zero_"]
    assert EventKind.DATA_GET in kinds and EventKind.DETACH in kinds and EventKind.OPTIMIZER_STEP in kinds
    assert [e.data["outcome"] for e in t.events if e.kind == EventKind.BACKWARD] == ["error", "ok"]
    assert t.internal_errors == []


def test_a_tensor_subclass_sees_the_same_calls_traced_or_not() -> None:
    def program() -> Counter[str]:
        Logged.calls = Counter()
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True).as_subclass(Logged)
        out = a.tanh()
        c = out.data
        c.mul_(2)
        out.sum().backward()
        return Logged.calls

    expected = program()
    with gradviz.trace() as t:
        got = program()
    assert sum(expected.values()) > 3
    assert got == expected
    write = next(e for e in t.events if e.kind == EventKind.INPLACE_WRITE)
    versions = {t.tensors[v.tensor].label: (v.before, v.after) for v in write.versions}
    assert versions["c"] == (0, 1) and versions["out"] == (0, 0)
