"""Diagram: saving by suffix, errors that name the choices, a missing `dot`, notebook display, render() options."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

import gradviz
from gradviz.render import Diagram, GraphvizNotFound, render


@pytest.fixture(scope="module")
def silent(gallery: Path) -> gradviz.Trace:
    with contextlib.redirect_stdout(io.StringIO()):
        return gradviz.trace_script(gallery / "plot_02_data_silent.py")


def test_unknown_suffix_names_the_choices(silent: gradviz.Trace, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        render(silent).save(tmp_path / "picture.jpeg")
    message = str(info.value)
    assert "'.jpeg'" in message
    for suffix in (".svg", ".png", ".pdf", ".dot", ".json", ".html"):
        assert suffix in message
    assert not (tmp_path / "picture.jpeg").exists()


def test_unknown_view_names_the_choices(silent: gradviz.Trace) -> None:
    with pytest.raises(ValueError, match=r"unknown view 'graf'.*'graph', 'memory', 'timeline', 'report'"):
        render(silent, "graf")


def test_unknown_format_names_the_choices(silent: gradviz.Trace) -> None:
    with pytest.raises(ValueError, match=r"unknown format 'gif'; choose one of svg, png, pdf, dot, json, html"):
        render(silent, format="gif")


def test_dot_and_json_need_no_graphviz(silent: gradviz.Trace, tmp_path: Path) -> None:
    diagram = render(silent)
    dot_path = diagram.save(tmp_path / "g.dot")
    assert dot_path.read_text(encoding="utf-8") == diagram.source
    data = json.loads(diagram.save(tmp_path / "g.json").read_text(encoding="utf-8"))
    assert data["view"] == "graph"
    assert data["format"] == "gradviz-trace"  # the trace file itself, with the view and findings added
    assert [f["kind"] for f in data["findings"]] == ["silently_corrupted_saved_tensor"]
    loaded = gradviz.Trace.load(tmp_path / "g.json")
    assert loaded.tensor("c").origin == "data"
    assert loaded == silent


def test_render_with_path_saves_and_format_fills_a_missing_suffix(silent: gradviz.Trace, tmp_path: Path) -> None:
    diagram = render(silent, path=tmp_path / "picture", format="dot")
    assert isinstance(diagram, Diagram)
    assert (tmp_path / "picture.dot").read_text(encoding="utf-8").startswith("digraph gradviz {")
    with pytest.raises(ValueError, match="does not match"):
        render(silent, path=tmp_path / "picture.svg", format="png")


def test_missing_dot_writes_the_dot_file_and_says_how_to_install(
    silent: gradviz.Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no `dot` anywhere on PATH
    target = tmp_path / "out" / "graph.svg"
    target.parent.mkdir()
    with pytest.raises(GraphvizNotFound) as info:
        render(silent).save(target)
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert "apt-get install graphviz" in message and "brew install graphviz" in message
    assert "graphviz.org" in message
    written = tmp_path / "out" / "graph.dot"
    assert info.value.dot_path == written
    assert str(written) in message
    assert written.read_text(encoding="utf-8") == render(silent).source
    assert not target.exists()
    # in a notebook, a missing dot shows the advice instead of failing
    bundle = render(silent)._repr_mimebundle_()
    assert "apt-get install graphviz" in bundle["text/plain"]


@pytest.mark.dot
def test_svg_has_the_labels_and_colours(silent: gradviz.Trace, tmp_path: Path) -> None:
    path = render(silent).save(tmp_path / "g.svg")
    svg = path.read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "TanhBackward0" in svg
    assert "bytes changed via c = out.data, line 24;" in svg
    assert 'fill="orchid"' in svg and 'fill="lightblue"' in svg and 'fill="#caff70"' in svg  # darkolivegreen1


@pytest.mark.dot
def test_png_and_pdf_are_real_files(silent: gradviz.Trace, tmp_path: Path) -> None:
    png = render(silent).save(tmp_path / "g.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    pdf = render(silent).save(tmp_path / "g.pdf").read_bytes()
    assert pdf[:5] == b"%PDF-"


@pytest.mark.dot
def test_notebook_display_is_svg(silent: gradviz.Trace) -> None:
    diagram = render(silent)
    bundle = diagram._repr_mimebundle_()
    assert list(bundle) == ["image/svg+xml"]
    assert "TanhBackward0" in bundle["image/svg+xml"]
    assert diagram._repr_mimebundle_(exclude=["image/svg+xml"]) == {}
    assert not hasattr(diagram, "_repr_html_")


def test_findings_default_to_diagnose(silent: gradviz.Trace) -> None:
    diagram = render(silent)
    assert [f.kind.value for f in diagram.findings] == ["silently_corrupted_saved_tensor"]
    assert render(silent, findings=[]).findings == []
    assert diagram.view == "graph" and diagram.trace is silent


def test_mime_bundles_honour_include_and_exclude_and_count_findings_in_words() -> None:
    from types import SimpleNamespace

    from gradviz.explorer.inline import Explorer
    from gradviz.render.diagram import mime_subset

    bundle = {"text/html": "<p>", "image/svg+xml": "<svg/>", "text/plain": "x"}
    assert mime_subset(bundle) == bundle
    assert mime_subset(bundle, include={"image/svg+xml"}) == {"image/svg+xml": "<svg/>"}
    assert mime_subset(bundle, exclude={"text/html"}) == {"image/svg+xml": "<svg/>", "text/plain": "x"}
    assert mime_subset(bundle, include={"text/html", "text/plain"}, exclude={"text/plain"}) == {"text/html": "<p>"}
    assert repr(Explorer(SimpleNamespace(findings=["one"]))) == "<gradviz explorer: 1 finding>"  # type: ignore[arg-type]
    assert repr(Explorer(SimpleNamespace(findings=[]))) == "<gradviz explorer: 0 findings>"  # type: ignore[arg-type]
