"""--verify names the step it measured, the norm ratio beside the cosine, and the parameter the write went into, in
every medium: JSON and SARIF from the CLI, the graph's note through the real `dot`, the page's document. The loop
(tests/tracer/data/verify/loop_clamp.py) runs 24 steps whose gradients come out wrong only at steps 3 and 9: the
worst, step 9, is what every view shows, checked against PyTorch with every saved tensor cloned at save time."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gradviz
from gradviz.analysis import FindingKind
from gradviz.explorer import explorer_document

from .test_verify_restore import LOOP, _expected, replay

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "verify"


@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    """Per step and parameter: the errors PyTorch gives (program's gradient against clone-at-save)."""
    got, intact = replay(LOOP)
    per_step = [{name: _expected(g[name], i[name]) for name in g} for g, i in zip(got, intact)]
    worst = {n + 1: max(step[name]["max_rel"] for name in step) for n, step in enumerate(per_step)}
    return {"per_step": per_step, "worst": worst}


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gradviz", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _check_measured(measured: dict[str, Any], truth: dict[str, Any]) -> None:
    assert truth["worst"][9] > truth["worst"][3] > 0  # the bug matters at steps 3 and 9 only, most at 9
    assert {n for n, rel in truth["worst"].items() if rel > 0} == {3, 9}
    assert measured["step"] == 9 and measured["steps"] == list(range(1, 25))
    assert measured["elsewhere_max_rel"] == pytest.approx(truth["worst"][3], rel=1e-4)
    rows = {row["name"].strip("`"): row for row in measured["gradients"]}
    at_nine = truth["per_step"][8]
    assert rows.keys() == at_nine.keys()
    for name, row in rows.items():
        assert row["max_rel"] == pytest.approx(at_nine[name]["max_rel"], rel=1e-4, abs=1e-9), name
        assert row["norm_ratio"] == pytest.approx(at_nine[name]["norm_ratio"], rel=1e-6), name


def test_json_and_sarif_name_the_step_measured(truth: dict[str, Any], tmp_path: Path) -> None:
    result = _cli("check", LOOP, "--verify", "--json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["count"] == 24
    _check_measured(finding["measured"], truth)
    rel3 = f"{truth['worst'][3]:.3g}"
    assert f"Measured with --verify at step 9 (the worst of 24 steps measured; at the other 23 relative error at " \
           f"most {rel3})" in finding["message"]  # fmt: skip
    bias = truth["per_step"][8]["fc1.bias"]
    assert (
        f"`fc1.bias`: max abs error {bias['max_abs']:.3g}, relative error {bias['max_rel']:.3g}, cosine "
        f"{bias['cosine']:.6f}, norm ratio {bias['norm_ratio']:.3g}"
    ) in finding["message"]
    sarif = _cli("check", LOOP, "--verify", "--format", "sarif", cwd=tmp_path)
    (result_entry,) = json.loads(sarif.stdout)["runs"][0]["results"]
    _check_measured(result_entry["properties"]["measured"], truth)
    assert "at step 9" in result_entry["message"]["text"]


@pytest.mark.dot
def test_graph_note_names_the_step_through_dot(truth: dict[str, Any], tmp_path: Path) -> None:
    svg = tmp_path / "loop.svg"
    result = _cli("render", LOOP, "--verify", "-o", svg, "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    texts = [t.replace("&#160;", " ").replace("\xa0", " ") for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg.read_text())]
    bias = truth["per_step"][8]["fc1.bias"]  # the largest relative error at step 9
    note = (
        f"measured at step 9 (worst of 24): fc1.bias.grad off by up to {bias['max_abs']:.3g} (relative "
        f"{bias['max_rel']:.3g}, norm ratio {bias['norm_ratio']:.3g})"
    )
    assert note in texts


def test_page_document_names_the_step(truth: dict[str, Any]) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(LOOP, verify=True)
    document = explorer_document(trace, gradviz.diagnose(trace))
    (finding,) = [f for f in document["findings"] if f["kind"] == FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR.value]
    measured = dict(finding["measured"])
    measured["gradients"] = [
        {**row, "name": document["tensors"][row["tensor"]]["name"]} for row in measured["gradients"]
    ]
    _check_measured(measured, truth)
    assert "Measured with --verify at step 9 (the worst of 24 steps measured" in finding["message"]


def test_the_parameter_written_is_never_folded_into_more(tmp_path: Path) -> None:
    """Six earlier gradients wrong, more than a message shows: the clamped weight's own (identical) still listed."""
    result = _cli("check", DATA / "last_layer_clamped.py", "--verify", "--json", cwd=tmp_path)
    (finding,) = json.loads(result.stdout)["findings"]
    rows = {row["name"]: row for row in finding["measured"]["gradients"]}
    assert [name for name, row in rows.items() if row["written"]] == ["net.6.weight"]
    assert rows["net.6.weight"]["max_abs"] == 0.0
    assert sum(row["max_abs"] > 0 for row in rows.values()) == 6
    assert "`net.6.weight` (written): identical; 3 more with errors; 1 other identical." in finding["message"]


@pytest.mark.dot
def test_graph_marks_a_write_measured_harmless_as_such(tmp_path: Path) -> None:
    """The saved tensor of a finding measured identical is not drawn as "gradient silently wrong"."""
    svg = tmp_path / "saved_again.svg"
    result = _cli("render", DATA / "relu_clamp_saved_again.py", "--verify", "-o", svg, "-q", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = svg.read_text()
    texts = [t.replace("&#45;", "-") for t in re.findall(r"<text[^>]*>([^<]*)</text>", text)]
    assert "saved tensor&#39;s bytes changed, version unchanged: --verify measured gradients identical" in texts
    assert not any("gradient silently wrong" in t for t in texts)
    assert "measured at step 1: gradients identical" in texts
    assert 'fill="thistle"' in text and 'fill="orchid"' not in text
