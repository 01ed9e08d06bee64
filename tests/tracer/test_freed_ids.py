"""A model or optimizer made after another was freed often sits at the freed one's address (CPython reuses it at
once: thread B's model built after thread A ended, a fresh model per fold). It is a new object all the same: its
ops, parameters and steps are named as its own, never as the freed one's (the torch 2.8 CI run of
test_thread_steps.py, where thread B's parameters came out unnamed in one run of 20)."""

from __future__ import annotations

import gc

import torch

import gradviz
from gradviz.tracer.live_ids import LiveIds


def test_a_model_at_a_freed_models_address_is_named_as_itself() -> None:
    x = torch.randn(16, 4)
    with gradviz.trace() as t:
        a = torch.nn.Linear(4, 1)
        a(x).sum().backward()
        freed = id(a)
        del a
        b = torch.nn.Linear(4, 1)
        reused = id(b) == freed
        b(x).sum().backward()
    assert reused  # what makes the case: CPython gave `b` the address `a` had
    linear = [n for n in t.nodes.values() if n.name == "AddmmBackward0"]
    assert [n.module for n in linear] == ["a", "b"]
    assert sorted(r.parameter for r in t.tensors.values() if r.parameter) == ["a.bias", "a.weight", "b.bias", "b.weight"]
    # PyTorch: both models got their gradients, each from its own backward
    assert b.weight.grad is not None and b.weight.grad.abs().sum() > 0


def test_an_optimizer_at_a_freed_optimizers_address_is_another_optimizer() -> None:
    model = torch.nn.Linear(4, 1)
    x = torch.randn(16, 4)
    with gradviz.trace() as t:
        first = torch.optim.SGD(model.parameters(), lr=0.1)
        model(x).sum().backward()
        first.step()
        freed = id(first)
        del first
        second = torch.optim.SGD(model.parameters(), lr=0.1)
        reused = id(second) == freed
        model(x).sum().backward()
        second.step()
    assert reused
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
