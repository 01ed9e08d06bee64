"""A model or optimizer made after another was freed often sits at the freed one's address (CPython reuses it at
once: thread B's model built after thread A ended, a fresh model per fold). It is a new object all the same: its
ops, parameters and steps are named as its own, never as the freed one's (the torch 2.8 CI run of
test_thread_steps.py, where thread B's parameters came out unnamed in one run of 20)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
import torch

import gradviz
from gradviz.model import EventKind
from gradviz.tracer.live_ids import LiveIds


def _at_a_freed_address(make: Callable[[], Any], use: Callable[[Any], None]) -> tuple[gradviz.Trace, Any, Any]:
    """A trace in which `make()` gave a second object the address of a first one that `use` ran and the program freed.
    CPython usually reuses the address at once; where other allocations take it first (a busy test worker), a few
    more objects are made (kept alive, so the addresses tried are new), then a fresh trace is tried. One object is made
    and used under a trace first: on Python 3.13 an instance's size follows the attributes its type's instances have
    had, and an object of another size never gets the freed one's address."""
    with gradviz.trace():
        use(make())
    for _ in range(20):
        with gradviz.trace() as t:
            first = make()
            use(first)
            freed = id(first)
            del first
            others = []
            for _ in range(50):
                second = make()
                if id(second) == freed:
                    break
                others.append(second)
            reused = id(second) == freed
            use(second)
        if reused:
            return t, second, others
    pytest.fail("CPython never gave the second object the freed one's address: the case could not be made")


def test_a_model_at_a_freed_models_address_is_named_as_itself() -> None:
    x = torch.randn(16, 4)
    t, b, others = _at_a_freed_address(lambda: torch.nn.Linear(4, 1), lambda m: m(x).sum().backward())
    linear = [n for n in t.nodes.values() if n.name == "AddmmBackward0"]
    # the freed model's ops are `first`'s, the new one's `second`'s: never the freed one's name
    assert [n.module for n in linear] == ["first", "second"]
    assert sorted(r.parameter for r in t.tensors.values() if r.parameter and r.parameter.startswith(("first", "second"))) == [
        "first.bias", "first.weight", "second.bias", "second.weight"]
    # PyTorch: the second model got its gradient from its own backward
    assert b.weight.grad is not None and b.weight.grad.abs().sum() > 0


def test_an_optimizer_at_a_freed_optimizers_address_is_another_optimizer() -> None:
    model = torch.nn.Linear(4, 1)
    x = torch.randn(16, 4)

    def step(optimizer: torch.optim.Optimizer) -> None:
        model(x).sum().backward()
        optimizer.step()

    t, _, others = _at_a_freed_address(lambda: torch.optim.SGD(model.parameters(), lr=0.1), step)
    steps = [e for e in t.events if e.kind.value == "optimizer_step"]
    assert [e.data["optimizer_id"] for e in steps] == ["o0", "o1"]


def test_an_entry_leaves_with_its_object() -> None:
    names: dict[int, str] = {}
    table: LiveIds[str] = LiveIds(names)
    module = torch.nn.Linear(2, 2)
    key = id(module)
    table.put(module, "model")
    assert names.get(key) == "model" and type(names) is dict  # a plain dict: read on every recorded op
    del module
    gc.collect()
    assert key not in names
    table.put(3, "an int: no weak reference, kept")  # (ints cannot be weakly referenced)
    assert names[id(3)] == "an int: no weak reference, kept"


def test_a_new_grad_at_a_freed_grads_address_is_written_not_the_stale_one() -> None:
    """`p.grad = None; p.grad = g2` often puts g2 where the freed gradient was. The step must still call g2 a
    gradient the program wrote, not "nonzero" (the same gradient as at the previous step): PyTorch applied g2."""
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.SGD([p], lr=0.1)
    for _ in range(50):
        with torch.no_grad():
            p.zero_()
        with gradviz.trace() as t:
            p.grad = torch.ones_like(p)
            opt.step()
            old = id(p.grad)
            p.grad = None
            p.grad = torch.full_like(p, 2.0)
            reused = id(p.grad) == old
            opt.step()
        if reused:
            break
    else:
        pytest.fail("CPython never gave the new gradient the freed one's address: the case could not be made")
    assert torch.allclose(p.detach(), torch.full((3,), -0.3))  # PyTorch: both gradients were applied, 1 then 2
    steps = [e for e in t.events if e.kind is EventKind.OPTIMIZER_STEP]
    tid = steps[0].data["changed"][0]
    assert [step.data["grads"][tid] for step in steps] == ["written", "written"]
