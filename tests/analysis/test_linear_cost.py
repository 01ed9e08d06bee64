"""Every analysis pass costs O(events + nodes): the work `diagnose` does grows linearly with the steps traced.

Work is counted, not timed: the number of Python lines executed while diagnosing (gradviz's passes and the
networkx calls they make), on traces of the same training loop run for 40 and 400 steps.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import gradviz
from gradviz.analysis import diagnose

# Truncated BPTT with the patterns that used to cost a walk of the whole history per step: a hidden state detached
# every step (a cut whose value flows on forever), a frozen embedding detached every step (a dead parameter that a
# cut explains), a running average of detached losses that never reaches a backward, and a tensor kept alive whose
# graph reaches into the one the last backward freed.
PROGRAM = """\
import sys, torch
torch.manual_seed(0)
steps = int(sys.argv[1])
cell = torch.nn.RNNCell(3, 3)
embed = torch.nn.Linear(2, 3)  # expect: dead_parameter param=embed.weight
head = torch.nn.Linear(3, 1)
opt = torch.optim.SGD([*cell.parameters(), *head.parameters(), *embed.parameters()], lr=0.01)
h = torch.zeros(1, 3)
running = torch.zeros(())
for step in range(steps):
    opt.zero_grad()
    feats = embed(torch.randn(1, 2)).detach()
    h = cell(feats, h.detach())
    loss = head(h).pow(2).mean()
    loss.backward()
    opt.step()
    running = 0.9 * running + 0.1 * loss.detach()
kept = head(h).sum()
"""


def _lines_executed(trace: gradviz.Trace) -> tuple[int, list[str]]:
    count = 0

    def tracer(frame, event, arg):  # noqa: ANN001
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        findings = diagnose(trace)
    finally:
        sys.settrace(None)
    return count, sorted({f.kind.value for f in findings})


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[int, gradviz.Trace]:
    path = Path(tmp_path_factory.mktemp("linear")) / "tbptt.py"
    path.write_text(PROGRAM)
    return {steps: gradviz.trace_script(path, [str(steps)]) for steps in (40, 400)}


def test_diagnose_work_grows_linearly_with_steps(traces):
    small, kinds_small = _lines_executed(traces[40])
    large, kinds_large = _lines_executed(traces[400])
    # `kept = head(h).sum()` builds on the graph the last backward freed: a backward of it would raise (predicted)
    assert kinds_small == kinds_large == ["backward_through_freed_graph", "cut_edge", "dead_parameter"]
    # 10x the steps: about 10x the work (a pass walking the history once per step would make it about 100x)
    assert large / small < 12, (small, large)


def test_the_trace_grows_linearly_too(traces):
    small, large = traces[40], traces[400]
    for size in (len, ):
        assert size(large.events) / size(small.events) < 10.5
        assert size(large.nodes) / size(small.nodes) < 10.5
        assert size(large.ops) / size(small.ops) < 10.5
