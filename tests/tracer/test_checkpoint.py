"""Activation checkpointing: its saved_tensors_hooks pack recipes instead of tensors. The tracer records those saved
slots without a tensor, never unpacks them (that would recompute the forward), and the rest of the graph is whole."""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

import gradviz
from gradviz import EventKind


def _program() -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 8))
    x = torch.randn(4, 8, requires_grad=True)
    hidden = checkpoint(block, x, use_reentrant=False)
    loss = hidden.pow(2).mean()
    loss.backward()
    # dropout inside the checkpoint: a recomputation would have drawn random numbers again
    return loss.detach(), [p.grad.clone() for p in block.parameters()], torch.rand(3)


def test_checkpointed_block_traced_without_recomputing_it() -> None:
    expected_loss, expected_grads, expected_next_random = _program()
    tracer = gradviz.trace()
    with tracer as t:
        loss, grads, next_random = _program()
    assert tracer._recorder.internal_errors == []
    assert torch.equal(loss, expected_loss)
    assert all(torch.equal(a, b) for a, b in zip(grads, expected_grads))
    assert torch.equal(next_random, expected_next_random)  # the random stream is where it would be untraced
    backward = t.events_of(EventKind.BACKWARD)[0]
    reached = {t.tensors[tid].label for tid in backward.data["reached_leaves"]}
    assert reached == {"x", "block.0.weight", "block.0.bias", "block.2.weight", "block.2.bias"}
    addmm = [n for n in t.nodes.values() if n.name == "AddmmBackward0"]
    assert len(addmm) == 2
    # what the checkpoint's pack hook made of mat1/mat2 is not a tensor: recorded as a slot with no tensor
    assert {s.name for n in addmm for s in n.saved} == {"mat1", "mat2"}
    assert all(s.tensor is None and s.saved_version is None for n in addmm for s in n.saved)
    assert gradviz.diagnose(t) == []
