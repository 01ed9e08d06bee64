"""`gradviz check --verify` and `gradviz render --verify`, run as a user runs them: how wrong the gradients are, in
the JSON, SARIF and text output and in the graph's note."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import GALLERY, ROOT, Result

DATA = ROOT / "tests" / "tracer" / "data" / "verify"


def test_check_verify_json_carries_the_measured_error(python_m_gradviz: Callable[..., Result]) -> None:
    result = python_m_gradviz("check", GALLERY / "plot_02_data_silent.py", "--verify", "--json")
    assert result.returncode == 1, result.stderr
    assert "tensor([1., 1., 1.])" in result.stderr  # the script's own output, off stdout
    document = json.loads(result.stdout)
    (finding,) = document["findings"]
    assert (finding["kind"], finding["severity"], finding["line"]) == ("silently_corrupted_saved_tensor", "error", 24)
    measured = finding["measured"]
    assert measured["identical"] is False and measured["writes"] == [finding["events"][0]]
    assert measured["backward"] == finding["affected_backward"]
    (row,) = measured["gradients"]
    # a.grad is 1 where 1 - tanh(a)^2 is right: off by 1 - (1 - tanh(3)^2) = 0.990 at a = 3
    assert row["name"] == "a" and row["max_abs"] == pytest.approx(0.9901340, rel=1e-6)
    assert row["max_rel"] == pytest.approx(2.3576062, rel=1e-6) and row["cosine"] == pytest.approx(0.6783230, rel=1e-6)
    assert row["flipped"] is False
    assert "Measured with --verify" in finding["message"]


def test_check_verify_identical_is_info_and_passes(python_m_gradviz: Callable[..., Result]) -> None:
    result = python_m_gradviz("check", DATA / "relu_masked.py", "--verify", "--json")
    assert result.returncode == 0, result.stderr
    findings = json.loads(result.stdout)["findings"]
    assert findings and {f["severity"] for f in findings} == {"info"}
    for finding in findings:
        assert finding["measured"]["identical"] is True
        assert [g["max_abs"] for g in finding["measured"]["gradients"]] == [0.0]
        assert "the write changed values the backward does not read: gradients identical" in finding["message"]
    # without --verify the same write is an error: gradviz cannot know the backward ignores it
    plain = python_m_gradviz("check", DATA / "relu_masked.py", "--json")
    assert plain.returncode == 1
    assert all("measured" not in f and f["severity"] == "error" for f in json.loads(plain.stdout)["findings"])


def test_check_verify_text_and_sarif(python_m_gradviz: Callable[..., Result]) -> None:
    text = python_m_gradviz("check", GALLERY / "plot_16_wgan_clip_between.py", "--verify", "--color", "never")
    assert text.returncode == 1
    assert "Measured with --verify" in text.stdout
    assert "`critic.0.weight`: max abs error 1.04, relative error 0.97" in text.stdout
    sarif = python_m_gradviz("check", GALLERY / "plot_02_data_silent.py", "--verify", "--format", "sarif")
    (result,) = json.loads(sarif.stdout)["runs"][0]["results"]
    measured = result["properties"]["measured"]
    assert measured["gradients"][0]["max_abs"] == pytest.approx(0.9901340, rel=1e-6)
    assert "Measured with --verify" in result["message"]["text"]


def test_render_verify_puts_the_error_in_the_graph_note(python_m_gradviz: Callable[..., Result], tmp_path: Path) -> None:
    out = tmp_path / "graph.dot"
    result = python_m_gradviz("render", GALLERY / "plot_02_data_silent.py", "--verify", "-o", out, "-q")
    assert result.returncode == 0, result.stderr
    assert "measured at step 1: a.grad off by up to 0.99 (relative 2.36, norm ratio 4.07)" in out.read_text()
    identical = tmp_path / "identical.dot"
    python_m_gradviz("render", DATA / "zeros_over_zeros.py", "--verify", "-o", identical, "-q")
    assert "measured at step 1: gradients identical" in identical.read_text()


def test_verify_on_a_saved_trace_is_a_usage_error(python_m_gradviz: Callable[..., Result], tmp_path: Path) -> None:
    saved = tmp_path / "run.json"
    assert python_m_gradviz("render", GALLERY / "plot_02_data_silent.py", "--verify", "-o", saved, "-q").returncode == 0
    result = python_m_gradviz("check", saved, "--verify")
    assert result.returncode == 2
    assert "is a saved trace: nothing runs, so --verify cannot measure" in result.stderr
    assert "Traceback" not in result.stderr
    # the measurements recorded in the saved trace are read back
    again = python_m_gradviz("check", saved, "--json")
    (finding,) = json.loads(again.stdout)["findings"]
    assert finding["measured"]["gradients"][0]["max_abs"] == pytest.approx(0.9901340, rel=1e-6)


@pytest.mark.dot
def test_render_verify_names_each_blocks_own_gradient(python_m_gradviz: Callable[..., Result], tmp_path: Path) -> None:
    """Both blocks clamp their own `h` at one line: one finding, whose worst gradient is block 0's. Block 1's `fc2`
    saved block 1's `h`, and its note names block 1's `fc2.weight` with that gradient's error, not block 0's."""
    program = ROOT / "tests" / "programs" / "realistic" / "tied_lm_blocks_clamp.py"
    svg, saved = tmp_path / "graph.svg", tmp_path / "run.json"
    result = python_m_gradviz("render", program, "--verify", "-o", svg, "-o", saved, "-q", "--", "3")
    assert result.returncode == 0, result.stderr
    (finding,) = json.loads(python_m_gradviz("check", saved, "--json").stdout)["findings"]
    errors = {g["name"]: g for g in finding["measured"]["gradients"] if g["max_abs"]}
    assert set(errors) == {"model.blocks.0.fc2.weight", "model.blocks.1.fc2.weight"}
    text = svg.read_text()
    notes = {}
    for block in ("0", "1"):  # the note boxes beside each block's fc2 node (AddmmBackward0 saved h as `mat1`)
        titles = re.findall(r"<title>(n\d+_s_mat1)</title>(.*?)</g>", text, re.S)
        notes[block] = [body for _, body in titles if f"blocks.{block}.fc2" in body]
    for block in ("0", "1"):
        name = f"model.blocks.{block}.fc2.weight"
        expected = f"{name}.grad off by up to {errors[name]['max_abs']:.3g}"
        assert notes[block] and all(expected in html.unescape(body) for body in notes[block]), (block, notes[block])
    assert not any("blocks.0" in body for body in notes["1"])
