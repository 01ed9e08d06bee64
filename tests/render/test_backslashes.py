"""Backslashes in user text reach the drawing literally: Graphviz would read `\\G \\N \\T \\E \\H \\L` in labels
and tooltips as graph, node, tail, edge, head names and line breaks (issue 10.9)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import gradviz
from gradviz.render.escape import html_label_text, plain_label, record_safe, tooltip_text

WINDOWS_PATH = r"C:\Temp\Gradients\Net\Layer\Edge\Head"
SHORT_PATH = r"C:\Temp\Gradients"

SCRIPT = f'''
import torch
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh() if r"{SHORT_PATH}" else None
c = out.data
c.zero_() if r"{SHORT_PATH}" else None  # {WINDOWS_PATH}
out.sum().backward()
'''


def _svg(path: Path) -> tuple[list[str], list[str]]:
    text = path.read_text(encoding="utf-8")
    texts = [html.unescape(t).replace("\xa0", " ") for t in re.findall(r"<text[^>]*>([^<]*)</text>", text)]
    titles = [html.unescape(t) for t in re.findall(r'xlink:title="([^"]*)"', text)]
    return texts, titles


@pytest.fixture(scope="module")
def windows_trace(tmp_path_factory: pytest.TempPathFactory) -> gradviz.Trace:
    # a folder named with backslashes is legal on Linux: it plays the Windows path a user's code may carry
    folder = tmp_path_factory.mktemp("paths") / WINDOWS_PATH
    folder.mkdir(parents=True)
    script = folder / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    return gradviz.trace_script(script)


def test_every_escape_function_writes_a_backslash_as_graphviz_needs_it() -> None:
    assert html_label_text(r"C:\Temp") == r"C:\\Temp"
    assert plain_label(r"C:\Temp") == r"C:\\Temp"
    assert record_safe(r"C:\Temp") == r"C:\\Temp"
    assert tooltip_text(r"C:\Temp") == r"C:\\\\Temp"


@pytest.mark.dot
@pytest.mark.parametrize("view", ["graph", "memory", "timeline"])
def test_a_windows_path_in_the_source_is_drawn_literally(windows_trace: gradviz.Trace, view: str, tmp_path: Path) -> None:
    out = tmp_path / f"{view}.svg"
    gradviz.render(windows_trace, view=view).save(out)
    texts, titles = _svg(out)
    joined = "\n".join(texts + titles)
    # never expanded: no graph name ("gradviz"), node id or tail name where the backslash sequences were
    assert "Temptimeline" not in joined and "Tempgradviz" not in joined
    if view == "timeline":
        # the code line of the write, in its row and (with its comment) in the row's tooltip
        assert any(t.startswith(f'c.zero_() if r"{SHORT_PATH}') for t in texts), texts  # the column may cut it after
        assert any(WINDOWS_PATH in t for t in titles), titles
    elif view == "graph":
        # the node tanh made names the line that created it, backslashes and all
        assert any(t.startswith(f'line 4: out = a.tanh() if r"{SHORT_PATH}"') for t in texts), texts
    else:
        # the write that moved the version counter, with its code line
        assert any(t.startswith(f'line 6: c.zero_() if r"{SHORT_PATH}"') for t in texts), texts
    for t in texts + titles:
        if "C:" in t:
            assert r"C:\Temp\Gradients" in t, t


@pytest.mark.dot
def test_each_label_kind_survives_real_dot(tmp_path: Path) -> None:
    """HTML-like node and edge labels, plain and record labels, graph labels and tooltips, through `dot -Tsvg`."""
    import graphviz

    text = WINDOWS_PATH
    dot = graphviz.Digraph("G")
    dot.attr(label=f"<{html_label_text('graph ' + text)}>")
    dot.node("a", f"<{html_label_text('html ' + text)}>", tooltip=tooltip_text("node tip " + text))
    dot.node("b", plain_label("plain " + text))
    dot.node("c", record_safe("record " + text), shape="record")
    dot.edge("a", "b", label=f"<{html_label_text('edge ' + text)}>", tooltip=tooltip_text("edge tip " + text))
    dot.edge("b", "c", label=plain_label("plain edge " + text))
    out = tmp_path / "labels.svg"
    out.write_bytes(dot.pipe(format="svg"))
    texts, titles = _svg(out)
    for kind in ("graph", "html", "plain", "record", "edge", "plain edge"):
        assert f"{kind} {text}" in texts, (kind, texts)
    for kind in ("node tip", "edge tip"):
        assert f"{kind} {text}" in titles, (kind, titles)
