"""The lifetime findings and the graph-memory view from the command line, run as users run them."""

from __future__ import annotations

import json

import gradviz
from gradviz.analysis.lifetime import size_text
from gradviz.analysis.memory_profile import memory_profile

from .conftest import GALLERY

TOTAL = GALLERY / "plot_22_total_loss_kept_alive.py"
VALIDATION = GALLERY / "plot_23_validation_without_no_grad.py"
HIDDEN = GALLERY / "plot_24_hidden_without_detach.py"


def _line(path, needle: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith(needle))


def test_check_json_reports_kept_alive_at_the_storing_line(gradviz_cli):
    result = gradviz_cli("check", TOTAL, "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)["findings"]
    kept = [f for f in found if f["kind"] == "graph_kept_alive"]
    assert len(kept) == 1
    assert kept[0]["severity"] == "warning"
    assert kept[0]["line"] == _line(TOTAL, "total_loss += loss")
    assert "graphs of 6 steps stay alive" in kept[0]["message"]
    assert "`.item()`" in kept[0]["fix"] or "loss.item()" in kept[0]["fix"]


def test_check_reports_backward_through_freed_graph_at_the_carrying_line(gradviz_cli):
    result = gradviz_cli("check", HIDDEN)
    assert result.returncode == 1
    line = _line(HIDDEN, "out, hidden = rnn(inputs, hidden)")
    assert f"plot_24_hidden_without_detach.py:{line}  backward_through_freed_graph" in result.stdout
    assert "`hidden = hidden.detach()`" in result.stdout
    assert "retain_graph=True` is almost never the fix" in result.stdout


def test_render_graph_memory_png_and_svg(gradviz_cli):
    png = gradviz_cli("render", VALIDATION, "--view", "graph-memory", "-o", "mem.png", "-q")
    assert png.returncode == 0, png.stderr
    data = (png.cwd / "mem.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    svg = gradviz_cli("render", VALIDATION, "--view", "graph-memory", "-o", "mem.svg", "-q")
    text = (svg.cwd / "mem.svg").read_text()
    line = _line(VALIDATION, "val_loss = val_loss + crit(out, y)")
    assert f"held by line {line}" in text  # the title a newcomer reads first
    assert f"graph_kept_alive: line {line}" in text
    profile = memory_profile(gradviz.trace_script(VALIDATION))
    # 8 batches of 32 x 64 activations kept: the peak is the sum of every batch's saved tensors
    assert profile.peak is not None and profile.peak[1] > 8 * 32 * 64 * 4
    assert f"peak {size_text(profile.peak[1])}" in text
    assert "held at the peak:" in text


def test_report_has_a_graph_memory_section(gradviz_cli):
    result = gradviz_cli("render", VALIDATION, "--view", "report", "-o", "r.html", "-q")
    assert result.returncode == 0, result.stderr
    from gradviz.explorer import read_document

    document = read_document((result.cwd / "r.html").read_text())
    assert document["chart"]["headline"].startswith("Graph memory grows by")
    assert "graph_kept_alive" in [f["kind"] for f in document["findings"]]
