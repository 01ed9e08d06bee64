"""sphinx-gallery over two small examples: the gradviz scraper puts their diagrams into the HTML pages."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.dot, pytest.mark.slow]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# exactly the README's configuration: `image_scrapers: ("gradviz",)` makes sphinx-gallery call
# gradviz._get_sg_image_scraper(), which the package itself must provide
CONF = """
project = "gradviz-gallery-test"
extensions = ["sphinx_gallery.gen_gallery"]
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "image_scrapers": ("gradviz",),
    "filename_pattern": "/plot_",
    "download_all_examples": False,
    "reset_modules": (),  # the default resets matplotlib, which these examples do not use
}
"""

INDEX = """
Test
====

.. toctree::

   auto_examples/index
"""

EXAMPLE_DATA = '''
"""
Writing through .data
=====================

The write is invisible to autograd.
"""
import torch

import gradviz
from gradviz.render import render

with gradviz.trace() as data_trace:
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = a.tanh()
    c = out.data
    c.zero_()
    out.sum().backward()

diagram = render(data_trace)
'''

EXAMPLE_TWO_BLOCKS = '''
"""
Two views, two blocks
=====================

The memory view first, then the graph view.
"""
import torch

import gradviz
from gradviz.render import render

with gradviz.trace() as detach_trace:
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = a.tanh()
    c = out.detach()
    c.zero_()

memory = render(detach_trace, "memory")

# %%
# The graph of the same trace:

graph = render(detach_trace, "graph")
'''


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def _images(page: Path) -> list[Path]:
    sources = re.findall(r'<img [^>]*src="([^"]+)"', page.read_text(encoding="utf-8"))
    return [(page.parent / s).resolve() for s in sources]


GALLERY = Path(__file__).resolve().parents[2] / "gallery"
#: plain scripts of gradviz's own gallery (no Trace, no Diagram in them) that run to their end
PLAIN = ("plot_01_testdetach.py", "plot_02_data_silent.py")


def test_sphinx_gallery_pages_show_gradviz_diagrams(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _write(docs / "conf.py", CONF)
    assert "_get_sg_image_scraper" not in (docs / "conf.py").read_text()
    _write(docs / "index.rst", INDEX)
    _write(docs / "examples" / "README.txt", "Examples\n========\n")
    _write(docs / "examples" / "plot_data.py", EXAMPLE_DATA)
    _write(docs / "examples" / "plot_two_blocks.py", EXAMPLE_TWO_BLOCKS)
    for name in PLAIN:
        (docs / "examples" / name).write_text((GALLERY / name).read_text(encoding="utf-8"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", str(docs), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr

    html = tmp_path / "html" / "auto_examples"
    data_images = [p for p in _images(html / "plot_data.html") if "sphx_glr_plot_data_0" in p.name]
    assert [p.name for p in data_images] == ["sphx_glr_plot_data_001.svg"]
    svg = data_images[0].read_text(encoding="utf-8")
    assert "<svg" in svg and "TanhBackward0" in svg and "c = out.data" in svg

    two = [p for p in _images(html / "plot_two_blocks.html") if "sphx_glr_plot_two_blocks_0" in p.name]
    # one image per block: the memory view, then the graph view, each once
    assert [p.name for p in two] == ["sphx_glr_plot_two_blocks_001.svg", "sphx_glr_plot_two_blocks_002.svg"]
    assert all(p.is_file() for p in two)
    assert "version counter" in two[0].read_text(encoding="utf-8")
    assert "AccumulateGrad" in two[1].read_text(encoding="utf-8")

    # the gallery's plain scripts: traced after their last block and drawn as `gradviz render` draws them
    silent = [p for p in _images(html / "plot_02_data_silent.html") if "sphx_glr_plot_02_data_silent_0" in p.name]
    assert [p.name for p in silent] == ["sphx_glr_plot_02_data_silent_001.svg"]
    texts = _svg_texts(silent[0])
    assert "TanhBackward0" in texts and "version unchanged (v0)" in texts
    assert any("c = out.data" in t and "line 24" in t for t in texts), texts
    module = [p for p in _images(html / "plot_01_testdetach.html") if "sphx_glr_plot_01_testdetach_0" in p.name]
    assert [p.name for p in module] == ["sphx_glr_plot_01_testdetach_001.svg"]
    texts = _svg_texts(module[0])
    assert "model.layer1.weight" in texts and "no gradient" in texts
    assert any(t.startswith("✂ x.detach()") for t in texts), texts
    # the example's own output is shown once: the second, traced run prints nothing into the page
    page = (html / "plot_02_data_silent.html").read_text(encoding="utf-8")
    assert page.count("tensor([0.4200, 0.0707, 0.0099])") == 1  # the printed correct gradient


def _svg_texts(path: Path) -> list[str]:
    import html as html_module

    text = path.read_text(encoding="utf-8")
    return [html_module.unescape(t).replace("\xa0", " ") for t in re.findall(r"<text[^>]*>([^<]*)</text>", text)]
