"""The graph view's legend under a long header, laid out by the real `dot`: dot stretches a table to its cell, so a
legend under a long "raised RuntimeError ..." line had swatches half the picture wide; its cell is sized to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gradviz
from gradviz.render.graph_dot import LEGEND

pytestmark = [pytest.mark.dot]

GALLERY = Path(__file__).resolve().parents[2] / "gallery"


def _polygon_width(points: str) -> float:
    xs = [float(p.split(",")[0]) for p in points.split()]
    return max(xs) - min(xs)


def test_a_long_header_does_not_widen_the_legend_swatches() -> None:
    trace = gradviz.trace_script(GALLERY / "plot_03_detach_raises.py")
    svg = gradviz.render(trace, "graph").svg()
    header = "raised RuntimeError at line 31"
    assert header in svg  # the long line above the legend
    colour = LEGEND["backward"][0]
    swatches = [_polygon_width(m) for m in re.findall(rf'<polygon fill="{colour}" stroke="transparent" points="([^"]+)"', svg)]
    assert swatches, "the legend's backward-node swatch is drawn"
    viewbox = re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) [\d.]+"', svg)
    assert viewbox is not None
    width = float(viewbox.group(1))
    # the swatch is 24 pt wide plus what the estimate of the text's width leaves over: well under a tenth of the page
    assert 20 <= swatches[0] <= 0.1 * width, (swatches, width)
