"""Deep autograd chains read by gradviz are freed a segment at a time: no stack overflow (exit 139) when dropped."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch

import gradviz
from gradviz.tracer import chains

CHAIN = """\
import sys, torch
x = torch.ones(3, requires_grad=True)
y = x
for i in range(int(sys.argv[1])):
    y = y * 1.00001
y.sum().backward()
print("grad", round(x.grad[0].item(), 4))
"""


def _exp_chain(length: int) -> tuple[torch.Tensor, weakref.ref[torch.Tensor]]:
    """A chain of `exp` nodes (each saves its result) and a weak reference to the first saved result."""
    x = torch.zeros(2, requires_grad=True)
    first = y = x.exp()
    for _ in range(length - 1):
        y = (y * 0.5).exp()
    return y, weakref.ref(first)


def _nodes_keep_their_python_objects() -> bool:
    """Whether an autograd node Python has read keeps its Python object (torch 2.13 does; 2.8 lets it go with
    Python's last reference, so nothing needs holding and a deep chain frees as it does untraced)."""
    y = torch.ones(1, requires_grad=True) * 2
    node = y.grad_fn
    return sys.getrefcount(node) > 2  # ours, getrefcount's argument, and the node's own when it keeps it


holding = pytest.mark.skipif(
    not _nodes_keep_their_python_objects(),
    reason=f"torch {torch.__version__} keeps no Python object per node: nothing to hold (the 200k-op test covers it)",
)


@holding
def test_traced_deep_chain_is_held_per_segment_and_let_go_once_dropped() -> None:
    with gradviz.trace() as trace:
        y, first = _exp_chain(chains.SEGMENT + 1)  # 2 * SEGMENT + 2 nodes: one held per SEGMENT levels
    assert len(trace.nodes) == 2 * chains.SEGMENT + 2
    assert len(chains._held) == 2
    del y
    gc.collect()  # the sweep runs at every collection
    assert chains._held == []
    assert first() is None  # the saved results went with the graph: nothing kept alive


@holding
def test_drawn_deep_chain_is_held_per_segment_and_let_go_once_dropped() -> None:
    y, first = _exp_chain(chains.SEGMENT + 1)
    gradviz.draw(y, max_nodes=20)
    assert len(chains._held) == 2
    del y
    gc.collect()
    assert chains._held == [] and first() is None


def test_shallow_graphs_are_never_held() -> None:
    with gradviz.trace():
        y, first = _exp_chain(50)
        y.sum().backward()
    assert chains._held == []
    del y
    assert first() is None  # freed at once, as untraced


@pytest.mark.slow
def test_200k_op_chain_exits_normally_with_a_diagram(tmp_path: Path) -> None:
    (tmp_path / "chain.py").write_text(CHAIN)
    done = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", "chain.py", "-q", "-o", "chain.dot", "--", "200000"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]  # was -11 (segfault) from 30k ops on
    assert done.stdout.splitlines()[0] == "grad 7.4088"  # 1.00001 ** 200000 in float32, as untraced
    dot = (tmp_path / "chain.dot").read_text()
    assert "SumBackward0" in dot and "AccumulateGrad" in dot and "MulBackward0" in dot
