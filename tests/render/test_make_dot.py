"""gradviz.integrations.compat.make_dot: torchviz's picture where torchviz works, marked states where torchviz crashes; draw()."""

from __future__ import annotations

import re
import sys
from collections import Counter
from typing import Any

import pytest

torch = pytest.importorskip("torch")
torchviz = pytest.importorskip("torchviz")
nn = torch.nn

from gradviz.integrations.compat import draw, make_dot  # noqa: E402
from gradviz.render import Diagram  # noqa: E402

_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^ \]]+)')


def _structure(dot: Any) -> tuple[Counter, Counter]:
    """Nodes as (attributes) and edges as (source attrs, target attrs, edge attrs), ids left out."""
    nodes: dict[str, tuple] = {}
    edges = []
    for line in dot.body:
        line = line.strip()
        edge = re.match(r"^(\S+) -> (\S+)(?: \[(.*)\])?$", line, re.S)
        if edge:
            edges.append((edge.group(1), edge.group(2), tuple(sorted(_ATTR.findall(edge.group(3) or "")))))
            continue
        node = re.match(r"^(\S+) \[(.*)\]$", line, re.S)
        if node:
            nodes[node.group(1)] = tuple(sorted(_ATTR.findall(node.group(2))))
    return Counter(nodes.values()), Counter((nodes.get(a), nodes.get(b), at) for a, b, at in edges)


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        (x,) = ctx.saved_tensors
        return grad * 2 + x * 0


def _mlp() -> tuple[Any, dict[str, Any]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return model(torch.randn(3, 4)).pow(2).sum(), dict(model.named_parameters())


def _conv_with_views() -> tuple[Any, dict[str, Any]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Tanh())
    out = model(torch.randn(2, 1, 5, 5)).view(2, -1)  # an output that is a view: dark green base
    return out, dict(model.named_parameters())


def _custom_and_shared() -> tuple[Any, dict[str, Any]]:
    w = torch.randn(3, requires_grad=True)
    y = Double.apply(w * w) + w.exp()
    return (y.sum(), y.mean()), {"w": w}


@pytest.mark.parametrize("build", [_mlp, _conv_with_views, _custom_and_shared], ids=["mlp", "conv-view", "custom-shared"])
@pytest.mark.parametrize(
    "options",
    [{}, {"params": True}, {"show_saved": True}, {"show_attrs": True, "show_saved": True, "params": True}],
    ids=["plain", "params", "saved", "attrs"],
)
def test_same_nodes_and_edges_as_torchviz(build: Any, options: dict[str, Any]) -> None:
    var, params = build()
    kwargs = dict(options)
    if kwargs.pop("params", False):
        kwargs["params"] = params
    theirs = _structure(torchviz.make_dot(var, **kwargs))
    ours = _structure(make_dot(var, **kwargs))
    assert ours == theirs
    assert sum(theirs[0].values()) > 3


def test_returns_a_digraph_with_torchviz_styles() -> None:
    var, params = _mlp()
    dot = make_dot(var, params=params)
    source = dot.source
    assert 'fillcolor=lightblue' in source and "fillcolor=darkolivegreen1" in source
    assert '"0.weight\n (8, 4)"' in source
    assert dot.graph_attr["size"] == torchviz.make_dot(var, params=params).graph_attr["size"]


def _poisoned() -> Any:
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = a.tanh()
    out.detach().zero_()  # out goes from version 0 to 1; TanhBackward saved it at 0
    return out.sum()


def test_poisoned_saved_tensor_is_marked_where_torchviz_raises() -> None:
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torchviz.make_dot(_poisoned(), show_saved=True)
    source = make_dot(_poisoned(), show_saved=True).source
    assert re.search(r'"result\n \(3\)\n poisoned: v1, expected v0" fillcolor=red', source)
    with pytest.raises(RuntimeError):
        torchviz.make_dot(_poisoned(), show_attrs=True)
    assert "[saved tensor: poisoned]" in make_dot(_poisoned(), show_attrs=True).source


def test_freed_saved_tensors_are_marked_after_backward() -> None:
    var, _ = _mlp()
    var.backward()
    with pytest.raises(RuntimeError, match="freed"):
        torchviz.make_dot(var, show_saved=True)
    source = make_dot(var, show_saved=True).source
    assert source.count("freed by backward") >= 3
    assert "fillcolor=orange" not in source


def test_custom_function_after_backward_is_marked() -> None:
    w = torch.randn(3, requires_grad=True)
    y = Double.apply(w).sum()
    y.backward()
    with pytest.raises(RuntimeError):
        torchviz.make_dot(y)
    assert "saved_tensors\n freed by backward" in make_dot(y).source


def test_deep_chain_where_torchviz_hits_the_recursion_limit() -> None:
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(2_000):
        y = y * 1.0001
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(1_000)
        with pytest.raises(RecursionError):
            torchviz.make_dot(y)
        dot = make_dot(y)
    finally:
        sys.setrecursionlimit(limit)
    nodes, _ = _structure(dot)
    assert nodes[(("label", "MulBackward0"),)] == 2_000
    assert dot.graph_attr["nslimit"] == "1" and dot.graph_attr["mclimit"] == "0.01"  # a layout dot can finish
    assert "nslimit" not in make_dot(_mlp()[0]).graph_attr  # small graphs: torchviz's attributes exactly


def test_params_must_be_tensors() -> None:
    var, _ = _mlp()
    with pytest.raises(TypeError, match="'bad'"):
        make_dot(var, params={"bad": 3})


def test_draw_marks_a_poisoned_saved_tensor_without_tracing() -> None:
    diagram = draw(_poisoned())
    assert isinstance(diagram, Diagram) and diagram.view == "graph"
    assert [f.kind.value for f in diagram.findings] == ["poisoned_saved_tensor"]
    assert re.search(r'_s_result \[label=<result: \(3\)<BR/><B>saved v0, now v1,</B>.*fillcolor="#ff6666"', diagram.source)


def test_draw_names_parameters_and_rolls_a_long_loop() -> None:
    torch.manual_seed(0)
    cell = nn.RNNCell(3, 3)
    h = torch.zeros(1, 3)
    for _ in range(300):
        h = cell(torch.ones(1, 3), h)
    diagram = draw(h.sum(), params=dict(cell.named_parameters()))
    source = diagram.source
    assert re.search(r"loop body ×\d{3} iterations", source)
    assert "weight_hh" in source and "bias_ih" in source
    assert len(re.findall(r"\[label=<<B>TanhBackward0</B>", source)) <= 2


def test_draw_rejects_non_tensors() -> None:
    with pytest.raises(TypeError, match="expected a tensor"):
        draw([1, 2])
