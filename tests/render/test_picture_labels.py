"""What the static pictures say, drawn through the real `dot` and read back from the SVG's text (issue 35, item 5):
each label states what PyTorch did."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import gradviz
from gradviz.render import render

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.dot

BATCH_NORM = '''\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 1)
for step in range(3):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def svg_text(source: str) -> str:
    """Every text the SVG shows (its `<text>` elements and tooltips), unescaped, one per line."""
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", source) + re.findall(r'xlink:title="([^"]*)"', source)
    return "\n".join(html.unescape(t) for t in texts)


def test_batch_norm_statistics_are_written_by_its_kernel_not_through_data(trace_of) -> None:
    """batch_norm updates `running_mean` and `running_var` in place without moving their version counter
    (checked below on PyTorch itself): no `.data` is involved, and the timeline must not say there was."""
    import torch

    bn = torch.nn.BatchNorm1d(3)
    before = bn.running_mean._version, bn.running_mean.clone()
    bn(torch.randn(5, 3))
    assert bn.running_mean._version == before[0] and not torch.equal(bn.running_mean, before[1])

    trace = trace_of(BATCH_NORM)
    text = svg_text(render(trace, "timeline", findings=gradviz.diagnose(trace)).svg())
    assert "written in place by batch_norm's kernel, which does not move the version counter" in text
    assert ".data" not in text


def test_the_memory_legend_names_a_kept_alive_value_as_such() -> None:
    trace = gradviz.trace_script(ROOT / "tests" / "programs" / "kept_losses_list.py")
    findings = gradviz.diagnose(trace)
    assert {f.kind.value for f in findings} == {"graph_kept_alive"}
    text = svg_text(render(trace, "memory", findings=findings).svg())
    assert "finding: value keeping the graphs of many steps alive" in text
    assert "gradient path cut here" not in text


VALIDATION_LEAK = '''\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(12):
    loss = F.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 4, (8,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
val_loss = 0.0
for batch in range(6):
    val_loss += F.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 4, (4,)))
'''


def test_the_graph_memory_chart_keeps_every_label_inside_the_figure_and_off_the_axes(trace_of, monkeypatch) -> None:
    """The chart (matplotlib) of a validation leak: the headline, the axis labels and the kept-alive note are drawn
    whole inside the figure, the note over no tick label or axis label, and it counts iterations (no backward ran
    through the validation's graphs), as the finding does."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    from gradviz.render.graph_memory import graph_memory_image

    drawn: list[Figure] = []
    savefig = Figure.savefig

    def keep(self: Figure, *args, **kwargs):  # type: ignore[no-untyped-def]
        drawn.append(self)
        return savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    trace = trace_of(VALIDATION_LEAK)
    findings = gradviz.diagnose(trace)
    assert [(f.kind.value, f.count) for f in findings] == [("graph_kept_alive", 6)]
    assert "6 iterations" in findings[0].message
    svg = graph_memory_image(trace, findings, "svg").decode()
    (figure,) = drawn
    renderer = figure.canvas.get_renderer()
    frame = figure.bbox
    texts = [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]
    for text in texts:
        box = text.get_window_extent(renderer)
        assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, f"{text.get_text()!r} runs past the figure"
        assert frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1, f"{text.get_text()!r} runs past the figure"
    (note,) = [t for t in texts if "graph_kept_alive" in t.get_text()]
    note_box = note.get_bbox_patch().get_window_extent(renderer) if note.get_bbox_patch() else note.get_window_extent(
        renderer)
    for axes in figure.axes:
        labels = [axes.yaxis.label, *axes.get_yticklabels(), axes.xaxis.label, *axes.get_xticklabels()]
        for label in labels:
            if label.get_visible() and label.get_text().strip():
                assert not note_box.overlaps(label.get_window_extent(renderer)), label.get_text()
    assert "keeps every iteration" in " ".join(note.get_text().split())
    assert "per step" not in svg and "per iteration" in " ".join(svg.split())


TIED_LM = ROOT / "tests" / "programs" / "realistic" / "tied_lm_data_renorm.py"


def svg_graph(source: str) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """The SVG's nodes (title -> their texts, joined) and edges (title pairs), as dot wrote them."""
    nodes, edges = {}, set()
    for kind, title, body in re.findall(r'<g id="[^"]*" class="(node|edge)">\s*<title>([^<]*)</title>(.*?)</g>', source,
                                        re.S):
        title = html.unescape(title)
        if kind == "node":
            nodes[title] = " ".join(html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", body))
        else:
            edges.add(tuple(title.split("->", 1)))  # type: ignore[arg-type]
    return nodes, edges


def test_the_tied_embedding_weight_gets_an_edge_from_the_embedding_and_from_the_output_layer() -> None:
    """PyTorch accumulates both gradients into the one tied tensor (checked below); the graph view draws the weight
    once in the step with an edge from each user, the embedding's box and the output layer's."""
    import runpy
    import sys

    argv = sys.argv
    try:
        sys.argv = [str(TIED_LM), "1"]
        scope = runpy.run_path(str(TIED_LM), run_name="plain")
    finally:
        sys.argv = argv
    model = scope["model"]
    assert model.head.weight is model.wte.weight
    users = {type(n).__name__ for n in _users_of(scope["loss"].grad_fn, model.wte.weight)}
    assert users == {"EmbeddingBackward0", "TBackward0"}

    trace = gradviz.trace_script(TIED_LM, argv=["3"])
    nodes, edges = svg_graph(render(trace, "graph", findings=gradviz.diagnose(trace)).svg())
    (leaf,) = [t for t, text in nodes.items() if text.startswith("model.wte.weight")]
    accumulate = [dst for src, dst in edges if src == leaf]
    users_drawn = {nodes[dst].split(" ")[0] for acc in accumulate for src, dst in edges if src == acc}
    assert users_drawn == {"model.wte", "model.head"}, users_drawn


def _users_of(root, parameter):  # type: ignore[no-untyped-def]
    """The autograd nodes whose inputs include `parameter`'s AccumulateGrad."""
    found, stack, seen = [], [root], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for nxt, _ in node.next_functions:
            if nxt is not None and getattr(nxt, "variable", None) is parameter:
                found.append(node)
            stack.append(nxt)
    return found


REPEATED_WRITE = '''\
import torch
from torch import nn

torch.manual_seed(0)
fc1, fc2, fc3 = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 1)
opt = torch.optim.SGD([*fc1.parameters(), *fc2.parameters(), *fc3.parameters()], lr=0.01)
x = torch.randn(16, 4)
for step in range({steps}):
    h = torch.tanh(fc1(x))
    g = torch.tanh(fc2(h))
    loss = fc3(g).pow(2).mean()
    if {condition}:
        h.data.mul_(0.5)
        g.data.mul_(0.5)
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_a_roll_names_the_steps_of_a_finding_only_when_it_knows_them_all(trace_of) -> None:
    """Two `.data` writes in each of 30 steps: 120 occurrences, more than a finding keeps as evidence (20). PyTorch
    runs every step's backward through the written bytes, so "finding in steps 1-10" would be false: the roll names
    no steps. The same writes in step 3 only are named as such."""
    import torch

    h = torch.tanh(torch.ones(3, requires_grad=True))
    h.data.mul_(0.5)
    assert h._version == 0  # PyTorch's own view of the write: no version moved, the next backward reads new bytes

    every = trace_of(REPEATED_WRITE.format(steps=30, condition="True"))
    findings = gradviz.diagnose(every)
    assert {f.kind.value for f in findings} == {"silently_corrupted_saved_tensor"}
    # each write changes two saved tensors (tanh's result, the next linear's input): 4 occurrences a step
    assert sum(f.count for f in findings) == 120
    text = svg_text(render(every, "graph", findings=findings).svg())
    assert "×30" in text or "x30" in text
    assert "finding in step" not in text

    once = trace_of(REPEATED_WRITE.format(steps=25, condition="step == 2"))
    text = svg_text(render(once, "graph", findings=gradviz.diagnose(once)).svg())
    assert "finding in step 3" in text
