"""`gradviz render` and `gradviz check` on the document's three examples, run as real commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import GALLERY, svg_texts

DATA = GALLERY / "plot_02_data_silent.py"
DETACH = GALLERY / "plot_03_detach_raises.py"
MODULE = GALLERY / "plot_01_testdetach.py"


def line_of(path: Path, needle: str) -> int:
    """The only line that starts with `needle` (docstrings quote code too, mid-line)."""
    hits = [i + 1 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()) if line.strip().startswith(needle)]
    assert len(hits) == 1, f"{needle!r} is on lines {hits} of {path.name}"
    return hits[0]


@pytest.mark.dot
def test_render_data_example_writes_annotated_svg_and_lists_the_finding(gradviz_cli):
    result = gradviz_cli("render", DATA)
    write_line = line_of(DATA, "c.zero_()")

    assert result.returncode == 0, result.stderr
    out = result.cwd / "plot_02_data_silent.gradviz.svg"
    assert out.exists()
    texts = svg_texts(out)
    assert "TanhBackward0" in texts
    assert any("c = out.data" in t and f"line {write_line}" in t for t in texts), texts
    assert "version unchanged (v0)" in texts
    # the script's own output comes first, then where gradviz wrote and one line per finding
    lines = result.stdout.splitlines()
    assert "tensor([1., 1., 1.])" in lines
    wrote = lines.index("gradviz: wrote plot_02_data_silent.gradviz.svg")
    assert wrote > lines.index("tensor([1., 1., 1.])")
    # the finding as `gradviz check` prints it: severity, place, kind; the source line; the message; the fix
    findings = lines[wrote + 1 :]
    assert findings[0] == f"error  {DATA}:{write_line}  silently_corrupted_saved_tensor"
    assert findings[1].split("|", 1)[1].strip().startswith("c.zero_()")
    assert "TanhBackward0" in findings[2] and findings[3].startswith("  fix: ") and findings[4:] == [""]
    assert result.stderr == ""  # no progress display when stderr is not a terminal


@pytest.mark.dot
def test_render_detach_example_writes_diagram_then_prints_the_scripts_traceback_as_python_does(gradviz_cli):
    result = gradviz_cli("render", DETACH, "-o", "detach.svg")
    plain = subprocess.run([sys.executable, str(DETACH)], capture_output=True, text=True, cwd=result.cwd)

    assert plain.returncode == 1
    assert result.returncode == 1
    texts = svg_texts(result.cwd / "detach.svg")
    backward_line, write_line = line_of(DETACH, "out.sum().backward()"), line_of(DETACH, "c.zero_()")
    assert any(t.startswith(f"raised RuntimeError at line {backward_line}") for t in texts), texts
    assert "saved v0, now v1," in texts
    assert f"written at line {write_line} via c" in texts
    assert "gradviz: wrote detach.svg" in result.stdout
    assert f"plot_03_detach_raises.py:{write_line}  poisoned_saved_tensor" in result.stdout
    # exactly Python's own traceback: no gradviz, runpy or torch-function-mode frames
    assert result.stderr == plain.stderr
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert "RuntimeError: one of the variables needed for gradient computation" in result.stderr


@pytest.mark.dot
def test_render_testdetach_shows_the_cut_edge_and_the_parameter_without_gradient(gradviz_cli):
    result = gradviz_cli("render", MODULE, "--quiet")
    detach_line = line_of(MODULE, "x = x.detach()")

    assert result.returncode == 0, result.stderr
    texts = svg_texts(result.cwd / "plot_01_testdetach.gradviz.svg")
    assert any(t.startswith("✂ x.detach()") and f"line {detach_line}" in t for t in texts), texts
    assert "model.layer1.weight" in texts and "model.layer2.weight" in texts
    assert "no gradient" in texts
    assert "gradviz:" not in result.stdout  # --quiet: only the script's own output
    assert "layer1 changed: False" in result.stdout


@pytest.mark.parametrize(
    ("script", "extra", "status", "kinds", "exception"),
    [
        (DATA, [], 1, [("silently_corrupted_saved_tensor", "c.zero_()")], None),
        (DETACH, [], 1, [("poisoned_saved_tensor", "c.zero_()")], ("RuntimeError", "out.sum().backward()")),
        (MODULE, ["--strict"], 1, [("dead_parameter", "x = x.detach()"), ("cut_edge", "x = x.detach()")], None),
    ],
    ids=["data", "detach", "testdetach-strict"],
)
def test_check_json_is_one_document_with_the_findings(gradviz_cli, script, extra, status, kinds, exception):
    result = gradviz_cli("check", script, "--json", *extra)

    assert result.returncode == status, result.stderr
    document = json.loads(result.stdout)  # stdout holds nothing but the document
    assert set(document) == {"gradviz", "script", "exception", "findings"}
    assert document["script"] == str(script)
    assert [(f["kind"], f["line"]) for f in document["findings"]] == [(k, line_of(script, n)) for k, n in kinds]
    for finding in document["findings"]:
        assert {"kind", "severity", "file", "line", "message", "fix"} <= set(finding)
        assert finding["file"] == str(script)
    if exception is None:
        assert document["exception"] is None
    else:
        assert document["exception"]["type"] == exception[0]
        assert document["exception"]["line"] == line_of(script, exception[1])
        assert "is at version 1; expected version 0" in document["exception"]["message"]
    # the script's printed output went to stderr
    assert "----------------------------------------------" in result.stderr or script == MODULE
    if script == MODULE:
        dead = document["findings"][0]
        assert dead["severity"] == "warning" and dead["parameter"] == "model.layer1: weight"
        assert dead["parameters"] == ["model.layer1.weight"]
        assert "layer1 changed: False" in result.stderr


def test_check_human_report_has_severity_place_source_message_and_fix(gradviz_cli):
    result = gradviz_cli("check", DATA)
    line = line_of(DATA, "c.zero_()")

    assert result.returncode == 1
    report = result.stdout[result.stdout.index("error  ") :]
    lines = report.splitlines()
    assert lines[0] == f"error  {DATA}:{line}  silently_corrupted_saved_tensor"
    assert lines[1].split("|")[0].strip() == str(line)
    assert lines[1].split("|", 1)[1].strip().startswith("c.zero_()")
    assert "TanhBackward0" in lines[2] and "`c`" in lines[2] and "out.data" in lines[2]
    assert lines[3].startswith("  fix: ") and ".detach()" in lines[3]
    assert lines[-1] == f"{DATA}: 1 error, 0 warnings, 0 info"
    assert "\x1b[" not in result.stdout  # no colour when stdout is not a terminal


def test_check_human_report_on_testdetach_exits_0_without_strict(python_m_gradviz):
    result = python_m_gradviz("check", MODULE, "-q")

    assert result.returncode == 0, result.stderr
    assert f"warning  {MODULE}:{line_of(MODULE, 'x = x.detach()')}  dead_parameter  (model.layer1: weight)" in result.stdout
    assert f"info  {MODULE}:{line_of(MODULE, 'x = x.detach()')}  cut_edge" in result.stdout
