"""A weight that only module boxes use (a GAN's discriminator, called on real and fake images in both of its steps)
is counted in each box that uses it, not drawn as a node of its own with edges across the picture: at a shallow
depth those nodes lined up side by side and made depth 0 wider than the deeper default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gradviz
from gradviz.model import Trace
from gradviz.render import render

PROGRAMS = Path(__file__).resolve().parents[1] / "programs" / "realistic"

pytestmark = pytest.mark.slow  # a DCGAN trains six steps under the tracer


@pytest.fixture(scope="module")
def dcgan() -> Trace:
    trace = gradviz.trace_script(PROGRAMS / "dcgan.py")
    assert trace.exception is None, trace.exception
    return trace


def test_weights_only_boxes_use_are_counted_in_each_box(dcgan: Trace) -> None:
    source = render(dcgan, depth=0).source
    leaves = re.findall(r'\[label=<([^>]*?)<BR/>[^>]*> fillcolor=lightblue', source)
    # netD.main.0.weight stays drawn: the ConvolutionBackward0 the cut `fake.detach()` enters uses it too
    assert leaves == ["netD.main.0.weight"]
    boxes = re.findall(r'<B>(\w+)</B><BR/><FONT POINT-SIZE="8">([^<]*)</FONT>', source)
    # netD's other four weights (main.2, main.3 weight and bias, main.5) in each of its three boxes
    assert sorted(detail for name, detail in boxes if name == "netD") == ["6 ops, 4 params", "7 ops, 4 params",
                                                                           "7 ops, 4 params"]
    assert ("netG", "7 ops, 7 params") in boxes
    # no edge from a weight that is not drawn
    drawn = set(re.findall(r"^\s*(\w+) \[", source, re.MULTILINE))
    edges = re.findall(r"^\s*(\w+) -> (\w+)", source, re.MULTILINE)
    assert all(src in drawn and dst in drawn for src, dst in edges)
