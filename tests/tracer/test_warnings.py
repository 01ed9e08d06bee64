"""Warnings PyTorch raises during a traced call (from C++ or Python) are shown as untraced: once per place, at the
program's line, under the program's module, never at gradviz/tracer/recorder.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

import gradviz

PROGRAM = """\
import torch
x = torch.ones(1, requires_grad=True) * 2
for i in range(3):
    v = float(x)  # C++: "Converting a tensor with requires_grad=True to a scalar"
    y = torch.tensor(x)  # C++: "To copy construct from a tensor"
    z = torch.nn.functional.softmax(torch.ones(2, 2))  # Python (stacklevel): "Implicit dimension choice"
print("done")
"""


def test_warnings_match_the_untraced_run_exactly(tmp_path: Path) -> None:
    (tmp_path / "warns.py").write_text(PROGRAM)
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    plain = subprocess.run([sys.executable, "warns.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    traced = subprocess.run(
        [sys.executable, "-m", "gradviz", "check", "-q", "warns.py"], cwd=tmp_path, capture_output=True, text=True,
        env=env,
    )
    assert traced.returncode == 0
    assert traced.stderr == plain.stderr
    assert "recorder.py" not in traced.stderr
    assert traced.stderr.count("UserWarning") == 3  # once per place, as untraced: not once per loop iteration
    assert "warns.py:4: UserWarning: Converting a tensor" in traced.stderr


BLOCK = """\
import sys, warnings, torch, gradviz
x = torch.ones(1, requires_grad=True) * 2
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with gradviz.trace():
        float(x)
(warning,) = [w for w in caught if "to a scalar" in str(w.message)]
print(warning.filename, warning.lineno)
"""


def test_warning_in_a_trace_block_is_attributed_to_the_caller(tmp_path: Path) -> None:
    # in a fresh interpreter: PyTorch raises this warning once per process (TORCH_WARN_ONCE), so an earlier test
    # in this one may already have used it up
    (tmp_path / "block.py").write_text(BLOCK)
    result = subprocess.run([sys.executable, "block.py"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    filename, line = result.stdout.split()
    assert Path(filename) == tmp_path / "block.py" and line == "6"  # the program's own line, not the tracer's


def test_errors_raised_through_the_stand_in_keep_python_s_traceback() -> None:
    """The stand-in frame that carries the caller's line is not shown twice in a traceback."""
    try:
        with gradviz.trace():
            torch.ones(2) @ torch.ones(3)
    except RuntimeError as exc:
        frames = [(f.f_code.co_filename, f.f_code.co_name) for f, _ in __import__("traceback").walk_tb(exc.__traceback__)]
    here = [frame for frame in frames if frame[0] == __file__]
    assert here == [(__file__, "test_errors_raised_through_the_stand_in_keep_python_s_traceback")]
