"""torch.jit.trace and nested tensors are traced without internal errors, and any internal error gradviz does meet
is counted and said: in the trace, on `gradviz check`'s summary line and in the HTML report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import gradviz
from gradviz import Trace

JIT = """
import torch
def f(x):
    return x.sin() * 2
traced = torch.jit.trace(f, torch.randn(3))
print(traced.graph)
print(traced(torch.ones(3)).tolist())
"""

NESTED = """
import torch
a = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], requires_grad=True)
b = (a * 2).sin()
j = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged, requires_grad=True)
k = (j * 2).cos()
print("ok")
"""


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_jit_trace_graph_points_at_the_program_and_saves(tmp_path: Path) -> None:
    (tmp_path / "jit.py").write_text(textwrap.dedent(JIT))
    plain = _run(tmp_path, "jit.py")
    traced = _run(tmp_path, "-m", "gradviz", "render", "jit.py", "-q", "-o", "jit.json")
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout  # the same TorchScript graph, its source ranges at jit.py:4, not gradviz
    assert "jit.py:4:0" in traced.stdout and "gradviz" not in traced.stdout
    assert traced.stderr == plain.stderr  # no TracerWarning from our own reads of shapes
    data = json.loads((tmp_path / "jit.json").read_text())
    saved = gradviz.Trace.load(tmp_path / "jit.json")  # the file render -o x.json writes is a trace file
    assert data["internal_error_count"] == 0 and saved.tensors
    assert all(all(type(n) is int for n in t.shape) for t in saved.tensors.values())  # were live tensors
    assert all(t.byte_range is None or all(type(n) is int for n in t.byte_range) for t in saved.tensors.values())


def test_nested_tensors_record_ragged_dimensions(trace_of: Callable[..., Trace], tmp_path: Path) -> None:
    trace = trace_of(NESTED)
    assert trace.exception is None
    assert trace.internal_errors == [] and trace.internal_error_count == 0
    shapes = [t.shape for t in trace.tensors.values()]
    assert [2, -1, -1] in shapes  # strided nested: no sizes beyond the batch
    assert [2, -1, 3] in shapes  # jagged: its ragged dimension
    trace.to_json(tmp_path / "nested.json")
    assert gradviz.Trace.load(tmp_path / "nested.json").tensors.keys() == trace.tensors.keys()


# makes the recorder fail on every `sin` call, as a gradviz bug would
FAILING_RECORDER = """
from gradviz.tracer import recorder
original = recorder.Recorder._after_call
def failing(self, func, *args):
    if recorder._func_name(func) == "Tensor.sin":
        raise ValueError("cannot read this tensor")
    return original(self, func, *args)
recorder.Recorder._after_call = failing
"""


@pytest.fixture
def failing_recorder(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(FAILING_RECORDER)
    (tmp_path / "prog.py").write_text("import torch\nx = torch.ones(3)\nfor i in range(5):\n    y = x.sin()\n")
    return {"PYTHONPATH": str(tmp_path / "site")}


def test_check_summary_says_what_gradviz_could_not_record(tmp_path: Path, failing_recorder: dict[str, str]) -> None:
    done = _run(tmp_path, "-m", "gradviz", "check", "prog.py", env=failing_recorder)
    assert done.returncode == 0, done.stderr  # not the program's fault: the exit status is the program's
    assert done.stdout.splitlines()[-1] == (
        "prog.py: 0 errors, 0 warnings, 0 info; gradviz could not record 5 calls: Tensor.sin: ValueError: cannot "
        "read this tensor"
    )
    assert "no problems found" not in done.stdout


def test_report_and_trace_file_carry_the_count(tmp_path: Path, failing_recorder: dict[str, str]) -> None:
    done = _run(tmp_path, "-m", "gradviz", "render", "prog.py", "-q", "-o", "r.html", env=failing_recorder)
    assert done.returncode == 0, done.stderr
    from gradviz.explorer.page import read_document

    document = read_document((tmp_path / "r.html").read_text())  # the explorer page shows it under the title
    assert document["facts"]["internal"] == "gradviz could not record 5 calls: Tensor.sin: ValueError: cannot read this tensor"
    done = _run(tmp_path, "-m", "gradviz", "render", "prog.py", "-q", "-o", "t.json", env=failing_recorder)
    data = json.loads((tmp_path / "t.json").read_text())
    trace = data.get("trace", data)
    assert trace["internal_error_count"] == 5
    assert trace["internal_errors"] == ["Tensor.sin: ValueError: cannot read this tensor"] * 5
