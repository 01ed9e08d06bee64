"""A graph kept alive holds the tensors its nodes saved, and the bases of saved views: those are the graph's, not
the program's. A validation pass without `no_grad` through conv, pool, flatten and linear keeps each batch's pooled
output alive only as the base of the flattened view the linear layer saved; one finding (at `val_loss +=`), never a
second one at the pooling line saying "0 autograd nodes holding 0 B"."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

import gradviz
from gradviz.analysis import FindingKind, diagnose

PROGRAM = """\
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.head(x.flatten(1))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(2, 1, 8, 8), torch.randint(0, 3, (2,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
val_loss = 0.0
for _ in range(3):
    x, y = torch.randn(2, 1, 8, 8), torch.randint(0, 3, (2,))
    out = model(x)
    val_loss += F.cross_entropy(out, y)
"""
VAL_LINE = 32  # `val_loss += F.cross_entropy(out, y)`


def test_pytorch_keeps_the_pooled_output_alive_through_the_saved_flattened_view() -> None:
    """The pooled output is held by the graph (addmm saved its flattened view, a view holds its base), and by
    nothing of the program's: it dies with the graph."""
    conv, head = nn.Conv2d(1, 4, 3, padding=1), nn.Linear(64, 3)
    pooled = F.max_pool2d(F.relu(conv(torch.randn(2, 1, 8, 8))), 2)
    alive = weakref.ref(pooled)
    flat = pooled.flatten(1)
    assert flat._base is pooled
    loss = head(flat).sum()
    del pooled, flat
    gc.collect()
    assert alive() is not None  # held through the graph `loss` keeps
    del loss
    gc.collect()
    assert alive() is None


def test_one_finding_at_the_line_that_keeps_the_graphs(tmp_path: Path) -> None:
    script = tmp_path / "val.py"
    script.write_text(PROGRAM, encoding="utf-8")
    assert PROGRAM.splitlines()[VAL_LINE - 1].strip() == "val_loss += F.cross_entropy(out, y)"
    trace = gradviz.trace_script(script)
    kept = [f for f in diagnose(trace) if f.kind is FindingKind.GRAPH_KEPT_ALIVE]
    assert [(f.line, f.count) for f in kept] == [(VAL_LINE, 3)], [f.message for f in kept]
    assert "stores `val_loss`" in kept[0].message
    # the graph view's note says what the message says: iterations of a loop no backward ran through, not steps
    assert "so the graphs of 3 iterations stay alive" in kept[0].message
    source = gradviz.render(trace, "graph", findings=kept).source
    assert "keeps 3 iterations&#x27; graphs alive" in source and "steps&#x27; graphs" not in source


def test_the_fixed_validation_has_no_finding(tmp_path: Path) -> None:
    script = tmp_path / "val.py"
    script.write_text(PROGRAM.replace("F.cross_entropy(out, y)\n", "F.cross_entropy(out, y).item()\n"), encoding="utf-8")
    trace = gradviz.trace_script(script)
    assert [f.kind for f in diagnose(trace) if f.kind is FindingKind.GRAPH_KEPT_ALIVE] == []
