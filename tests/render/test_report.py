"""The report view is the explorer page (gradviz/explorer): one self-contained file, written by render() and -o
x.html. The page's behaviour in a browser is tested in tests/explorer/test_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

import gradviz
from gradviz.explorer import explorer_html as report_html, read_document
from gradviz.model import Trace
from gradviz.render import render


def test_report_is_one_self_contained_page(data_trace: Trace) -> None:
    page = report_html(data_trace, gradviz.diagnose(data_trace))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # nothing is fetched: no external scripts, styles, frames or images (the only URL named is SVG's namespace)
    assert not re.search(r"<script[^>]*\ssrc=|<link(?![^>]*href=\"data:,\")|<img|<iframe|@import|url\(http", page)
    assert set(re.findall(r"https?://[^\s\"')]+", page)) <= {"http://www.w3.org/2000/svg"}
    document = read_document(page)
    assert document["format"] == "gradviz-explorer"
    assert [f["kind"] for f in document["findings"]] == ["silently_corrupted_saved_tensor"]


def test_render_writes_the_report(data_trace: Trace, tmp_path: Path) -> None:
    diagram = render(data_trace, "report", path=tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page == diagram.html()
    assert read_document(page)["title"] == "gradviz: plot_02_data_silent.py"
    # in a notebook: the page in a sandboxed frame as wide as the output area
    frame = diagram._repr_mimebundle_()["text/html"]
    assert frame.startswith('<iframe class="gradviz-explorer" sandbox="allow-scripts" style="width:100%;')


def test_a_program_without_events_or_sources() -> None:
    document = read_document(report_html(Trace(), []))
    assert document["events"] == [] and document["files"] == [] and document["findings"] == []


def test_a_saved_trace_opens_in_the_explorer_from_the_command_line(data_trace: Trace, tmp_path: Path) -> None:
    import subprocess
    import sys

    saved = tmp_path / "trace.json"
    render(data_trace, "graph", path=saved)
    result = subprocess.run([sys.executable, "-m", "gradviz", "render", str(saved), "--view", "report", "-o",
                             str(tmp_path / "page.html"), "-q"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    document = read_document((tmp_path / "page.html").read_text(encoding="utf-8"))
    assert [f["kind"] for f in document["findings"]] == ["silently_corrupted_saved_tensor"]
    assert len(document["nodes"]) == len(data_trace.nodes)


def test_a_displayed_trace_is_the_explorer_with_its_picture_beside_it(data_trace: Trace) -> None:
    bundle = data_trace._repr_mimebundle_()
    assert bundle["text/html"].startswith('<iframe class="gradviz-explorer" sandbox="allow-scripts"')
    assert "image/svg+xml" in bundle or "text/plain" in bundle  # the static graph (or how to install dot)
    assert list(data_trace._repr_mimebundle_(include=["text/html"])) == ["text/html"]
