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
