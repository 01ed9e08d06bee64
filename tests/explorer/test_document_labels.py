"""What the page's document says about a node's end and about a finding's own nodes (issue 35, item 5)."""

from __future__ import annotations

import gradviz
from gradviz.explorer import explorer_document
from gradviz.model import EventKind

LOOP = '''\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(6, 4), torch.randn(6, 1)
for step in range(3):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_a_graph_freed_by_a_backward_names_that_backward_not_the_next_call(trace_of) -> None:
    """`freed_by` is the backward that freed the node's saved tensors (line 11), not `opt.step()` (line 12), the
    first call after it, where the node itself was let go of."""
    trace = trace_of(LOOP)
    document = explorer_document(trace, gradviz.diagnose(trace))
    backwards = {e.seq: e.location.line for e in trace.events_of(EventKind.BACKWARD)}
    tanh = [n for n in document["nodes"] if n["label"] == "TanhBackward0"]
    assert tanh
    for node in tanh:
        assert node["freed_by"] in backwards and backwards[node["freed_by"]] == 11
    rows = [row for g in document["groups"] for inst in g.get("instances", []) for row in inst["nodes"]]
    assert rows and all(row[5] in backwards for row in rows if row[4] is not None)
