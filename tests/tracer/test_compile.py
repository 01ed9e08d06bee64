"""A torch.compile'd model runs under the tracer with the same results and no warnings the program did not cause."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """\
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
fast = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = fast(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("loss", round(loss.item(), 6))
"""


@pytest.mark.slow
def test_compiled_model_is_traced_without_extra_warnings(tmp_path: Path) -> None:
    (tmp_path / "compiled.py").write_text(SCRIPT)
    plain = subprocess.run([sys.executable, "compiled.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    traced = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", "compiled.py", "-q", "-o", "g.dot"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert plain.returncode == 0 and traced.returncode == 0, traced.stderr
    assert plain.stdout.splitlines()[-1] == traced.stdout.splitlines()[0]  # the same loss, printed by the script
    assert traced.stderr == plain.stderr == ""
    assert "AddmmBackward0" in (tmp_path / "g.dot").read_text()
