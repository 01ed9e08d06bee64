"""Activation checkpointing: its saved_tensors_hooks pack recipes instead of tensors. The tracer records those saved
slots without a tensor, never unpacks them (that would recompute the forward), and the rest of the graph is whole."""

from __future__ import annotations

import functools
from pathlib import Path

import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import gradviz
from gradviz import EventKind
from gradviz.explorer.document import explorer_document
from gradviz.render.graph import graph_view


def _program() -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 8))
    x = torch.randn(4, 8, requires_grad=True)
    hidden = checkpoint(block, x, use_reentrant=False)
    loss = hidden.pow(2).mean()
    loss.backward()
    # dropout inside the checkpoint: a recomputation would have drawn random numbers again
    return loss.detach(), [p.grad.clone() for p in block.parameters()], torch.rand(3)


def assert_same_gradients(grads: list[torch.Tensor], expected: list[torch.Tensor], *, count: int) -> None:
    """Traced and untraced, the same `count` gradients, equal bit for bit (a lost or extra one fails, as zip alone
    would not notice)."""
    assert (len(grads), len(expected)) == (count, count)
    assert all(torch.equal(a, b) for a, b in zip(grads, expected, strict=True))

def test_checkpointed_block_traced_without_recomputing_it() -> None:
    expected_loss, expected_grads, expected_next_random = _program()
    tracer = gradviz.trace()
    with tracer as t:
        loss, grads, next_random = _program()
    assert tracer._recorder.internal_errors == []
    assert torch.equal(loss, expected_loss)
    assert_same_gradients(grads, expected_grads, count=4)  # block.0 and block.2: weight and bias
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


# ---------------------------------------------------------------- reentrant checkpoint: the node's call line
class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.fc(x))  # BLOCK BODY


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Linear(8, 8)  # a reentrant checkpoint's input must require grad
        self.blocks = torch.nn.ModuleList([_Block() for _ in range(3)])
        self.last = _Block()
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)  # CALL IN LOOP
        x = checkpoint(self.last, x, use_reentrant=True)  # CALL OUTSIDE LOOP
        return self.head(x)


def _line_of(marker: str) -> int:
    """The line of this file that carries `marker` (so the test does not hard-code line numbers)."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def _reentrant_program() -> tuple[torch.Tensor, list[torch.Tensor]]:
    torch.manual_seed(0)
    model = _Net()
    x = torch.randn(4, 8)
    loss = model(x).pow(2).mean()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def test_reentrant_checkpoint_node_has_the_line_that_called_checkpoint() -> None:
    expected_loss, expected_grads = _reentrant_program()
    tracer = gradviz.trace()
    with tracer as t:
        loss, grads = _reentrant_program()
    assert tracer._recorder.internal_errors == []
    assert torch.equal(loss, expected_loss)  # the truth: PyTorch's own gradients, untouched by tracing
    assert_same_gradients(grads, expected_grads, count=12)  # every parameter of the model
    in_loop, outside = _line_of("CALL IN LOOP"), _line_of("CALL OUTSIDE LOOP")
    nodes = {n.module: n for n in t.nodes.values() if n.name == "CheckpointFunctionBackward"}
    assert set(nodes) == {"model.blocks.0", "model.blocks.1", "model.blocks.2", "model.last"}
    assert {m: n.created.line for m, n in nodes.items() if n.created} == {
        "model.blocks.0": in_loop, "model.blocks.1": in_loop, "model.blocks.2": in_loop, "model.last": outside,
    }
    assert all(Path(n.created.file) == Path(__file__) for n in nodes.values() if n.created)

    # the graph's label of each checkpoint node names its block and that line (file:line: no script was run)
    dot = graph_view(t, gradviz.diagnose(t), depth="all").digraph.source
    labels = [line for line in dot.splitlines() if "CheckpointFunctionBackward" in line]
    assert len(labels) == 4
    for module, node in nodes.items():
        assert sum(f"{module}  {Path(__file__).name}:{node.created.line}:" in label for label in labels) == 1

    # the explorer's details: the node's file and line
    document = explorer_document(t)
    shown = [n for n in document["nodes"] if n["label"] == "CheckpointFunctionBackward"]
    assert sorted((n["module"], n["line"]) for n in shown) == sorted((m, n.created.line) for m, n in nodes.items())
    assert {document["files"][n["file"]]["name"] for n in shown} == {Path(__file__).name}


def test_checkpoint_sequential_and_a_bound_method_are_named_by_their_modules() -> None:
    """checkpoint_sequential checkpoints a closure over its modules (named by their parent), transformers passes
    `layer.__call__` through a functools.partial of checkpoint (named by the layer); both at their call lines."""

    def program() -> list[torch.Tensor]:
        torch.manual_seed(0)
        seq = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(4)])
        layer = torch.nn.Linear(8, 8)
        run = functools.partial(checkpoint, use_reentrant=True)
        h = checkpoint_sequential(seq, 2, torch.randn(4, 8, requires_grad=True), use_reentrant=True)  # SEQUENTIAL
        h = run(layer.__call__, h)  # PARTIAL
        h.sum().backward()
        return [p.grad.clone() for p in [*seq.parameters(), *layer.parameters()]]

    expected = program()
    with gradviz.trace() as t:
        grads = program()
    assert_same_gradients(grads, expected, count=10)  # four layers in the Sequential and one more
    found = sorted((n.module, n.created.line if n.created else None)
                   for n in t.nodes.values() if n.name == "CheckpointFunctionBackward")
    assert found == sorted([("seq", _line_of("SEQUENTIAL")), ("layer", _line_of("PARTIAL"))])


def test_non_reentrant_checkpoint_ops_are_drawn_at_their_own_lines() -> None:
    """use_reentrant=False keeps the block's ops in the graph (their saved tensors packed as recipes): each op has the
    module and line that made it in the forward, and there is no CheckpointFunctionBackward node."""

    def program() -> list[torch.Tensor]:
        torch.manual_seed(0)
        blocks = torch.nn.ModuleList([_Block() for _ in range(3)])
        h = torch.randn(4, 8)
        for block in blocks:
            h = checkpoint(block, h, use_reentrant=False)
        h.pow(2).mean().backward()
        return [p.grad.clone() for p in blocks.parameters()]

    expected = program()
    with gradviz.trace() as t:
        grads = program()
    assert_same_gradients(grads, expected, count=6)  # three blocks
    assert not any(n.name == "CheckpointFunctionBackward" for n in t.nodes.values())
    block_line = _line_of("BLOCK BODY")
    tanh = [n for n in t.nodes.values() if n.name == "TanhBackward0"]
    assert len(tanh) == 3
    assert [n.created.line for n in tanh if n.created] == [block_line] * 3
    assert all(Path(n.created.file) == Path(__file__) for n in tanh if n.created)
