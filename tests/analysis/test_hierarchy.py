"""The module tree of a trace: paths, parents, children, depths, ancestors and op counts."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import gradviz
from gradviz.analysis.hierarchy import Hierarchy, module_hierarchy
from gradviz.model import Trace


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.Linear(4, 4)
        self.mlp = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(torch.relu(self.attn(x)))


class TinyGPT(nn.Module):
    """nanoGPT's shape: a ModuleDict holding a ModuleList; neither container is ever called."""

    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict({"wte": nn.Embedding(10, 4), "h": nn.ModuleList([Block(), Block()])})
        self.lm_head = nn.Linear(4, 10, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(x)


@pytest.fixture(scope="module")
def gpt_trace() -> Trace:
    model = TinyGPT()
    idx = torch.randint(0, 10, (2, 3))
    with gradviz.trace() as tr:
        loss = nn.functional.cross_entropy(model(idx).reshape(-1, 10), idx.reshape(-1))
        loss.backward()
    return tr


def test_containers_never_called_group_their_children_by_path(gpt_trace: Trace) -> None:
    tree = module_hierarchy(gpt_trace)
    assert tree.roots == ("model",)
    assert tree.children("model") == ("model.transformer", "model.lm_head")
    assert tree.children("model.transformer") == ("model.transformer.wte", "model.transformer.h")
    assert tree.children("model.transformer.h") == ("model.transformer.h.0", "model.transformer.h.1")
    container = tree["model.transformer.h"]
    assert not container.called and container.ops == 0 and container.depth == 2
    assert tree["model.transformer.h.0"].called and tree["model.transformer.h.0"].parent == "model.transformer.h"
    assert tree["model.transformer.h.1.attn"].parameters == (
        "model.transformer.h.1.attn.weight", "model.transformer.h.1.attn.bias",
    )
    assert tree["model.lm_head"].parameters == ("model.lm_head.weight",)
    assert tree.max_depth == 4
    assert tree.at_depth(1) == ["model.transformer", "model.lm_head"]


def test_op_counts_add_up_the_tree(gpt_trace: Trace) -> None:
    tree = module_hierarchy(gpt_trace)
    block = tree["model.transformer.h.0"]
    # the block's own forward runs relu and the residual add; attn and mlp one addmm each (and the views around it)
    assert block.ops >= 2
    assert block.total_ops == block.ops + tree.ops("model.transformer.h.0.attn") + tree.ops("model.transformer.h.0.mlp")
    assert tree.ops("model.transformer.h") == tree.ops("model.transformer.h.0") + tree.ops("model.transformer.h.1")
    ops = [n for n in gpt_trace.nodes.values() if n.name != "AccumulateGrad" and n.variable is None]
    assert tree.ops("model") == sum(1 for n in ops if n.module) and tree.outside == sum(1 for n in ops if not n.module)
    assert tree.outside >= 1  # cross_entropy in the script, outside any module
    assert tree.ops("model.transformer.h.0", recursive=False) == block.ops
    assert tree.ops("no.such.module") == 0


def test_paths_depth_first_in_first_seen_order() -> None:
    tree = Hierarchy.from_paths(
        ["netD.main.0", "netD.main.2", "criterion", "netG.main.1"], ops={"netD.main.0": 2, "netG.main.1": 3},
        parameters=["netG.main.0.weight", "bare"],
    )
    assert list(tree) == [
        "netD", "netD.main", "netD.main.0", "netD.main.2", "criterion", "netG", "netG.main", "netG.main.1",
        "netG.main.0",
    ]
    assert tree.roots == ("netD", "criterion", "netG")
    assert tree.ops("netG") == 3 and tree.ops("netD.main") == 2 and tree.ops("criterion") == 0
    assert tree["criterion"].called and not tree["netG.main.0"].called and tree["netG.main.0"].parameters == (
        "netG.main.0.weight",
    )
    assert "bare" not in tree  # a parameter name without a module


def test_ancestor_depth_and_parent_of_any_path() -> None:
    tree = Hierarchy.from_paths(["model.transformer.h.0.attn.c_attn"])
    assert tree.ancestor("model.transformer.h.0.attn.c_attn", 0) == "model"
    assert tree.ancestor("model.transformer.h.0.attn.c_attn", 3) == "model.transformer.h.0"
    assert tree.ancestor("model.transformer", 4) == "model.transformer"  # shallower: itself
    assert tree.depth("model.transformer.h.0") == 3 and tree.parent("model") is None
    assert tree.parent("model.transformer.h") == "model.transformer" and tree["model"].name == "model"
    assert tree["model.transformer.h.0"].name == "0"
    with pytest.raises(ValueError, match="depth must be 0 or more, got -1"):
        tree.ancestor("model", -1)


def test_a_trace_without_modules() -> None:
    tree = module_hierarchy(Trace())
    assert len(tree) == 0 and tree.roots == () and tree.max_depth == -1 and tree.outside == 0
