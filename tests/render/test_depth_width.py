"""`--depth 0` (one box per model) is never wider than the default picture (the deepest depth that fits a page), as
dot lays both out: the legend sits under the title rather than beside a short picture, a finding drawn inside a
module call splits the call instead of sitting beside one box that both feeds it and is fed by it, and a module
box lists its op kinds a line each when they would make it wide."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

import gradviz
from gradviz.render import Diagram, render
from gradviz.render.graph_fit import layout

pytestmark = [pytest.mark.dot, pytest.mark.slow]  # every gallery script runs under the tracer

GALLERY = Path(__file__).resolve().parents[2] / "gallery"
EPISODES = Path(__file__).resolve().parents[1] / "programs" / "realistic" / "episodes_5_to_7.py"
SCRIPTS = [*sorted(GALLERY.glob("plot_*.py")), EPISODES]


def _width(diagram: Diagram) -> int:
    assert diagram.digraph is not None
    laid_out = layout(diagram.digraph)
    assert laid_out is not None
    return laid_out[0][0]


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.stem for path in SCRIPTS])
def test_depth_0_is_no_wider_than_the_default(script: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(script)
    default, shallowest = render(trace), render(trace, depth=0)
    assert "cluster_legend" not in shallowest.source  # the legend is the graph's label, not a box beside it
    assert _width(shallowest) <= _width(default), (default.messages, shallowest.messages)
