"""A store repeated in steps the window did not trace is still counted (issue 35, item 3): a 40-step loop traced with
`--steps 5` appends its validation loss (no `torch.no_grad()`) to a list at four late steps. The sentinel re-arms at
the first validation and traces that batch only; the other three run untraced. `check` reports the list at its line
with as many graphs as PyTorch keeps alive in it at the end, and says how many of them were not traced; the same
loop storing `.item()` gets no warning. A list of training losses counts every step's graph, traced or not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

VALIDATION = '''\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
data = [(torch.randn(8, 1, 4, 4), torch.randint(0, 10, (8,))) for _ in range(4)]
val_x, val_y = torch.randn(16, 1, 4, 4), torch.randint(0, 10, (16,))
val_history = []
for step in range(40):
    x, y = data[step % len(data)]
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step >= 20 and step % 5 == 0:
        model.eval()
        val_loss = F.cross_entropy(model(val_x), val_y)
        val_history.append(val_loss)
        model.train()
'''
STORE_LINE = 20  # `val_history.append(val_loss)`

LOSSES = '''\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
losses = []
for step in range(24):
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
'''


def graphs_in(program: str, variable: str) -> int:
    """The program run plainly: how many of the tensors in the list `variable` hold an autograd graph at the end."""
    scope: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(program, "<plain run>", "exec"), scope)  # noqa: S102 - our own test program
    return sum(isinstance(t, torch.Tensor) and t.grad_fn is not None for t in scope[variable])


def check(folder: Path, program: str, *args: str) -> tuple[int, dict[str, Any]]:
    (folder / "train.py").write_text(program, encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "gradviz", "check", "train.py", "--format", "json", *args],
                            cwd=folder, capture_output=True, text=True, timeout=300)
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def test_a_validation_list_counts_the_batches_appended_in_steps_not_traced(tmp_path: Path) -> None:
    assert graphs_in(VALIDATION, "val_history") == 4  # PyTorch: four validation graphs stay alive in the list
    status, report = check(tmp_path, VALIDATION, "--steps", "5")
    assert status == 0  # a warning
    [finding] = report["findings"]
    assert (finding["kind"], finding["line"], finding["code"]) == ("graph_kept_alive", STORE_LINE,
                                                                  "val_history.append(val_loss)")
    [evidence] = finding["evidence"]
    assert (finding["count"], evidence["steps"], evidence["untraced"]) == (4, 4, 3)
    assert "the graphs of 4 steps stay alive at the end: the one traced has " in finding["message"]
    assert "and the same list holds 3 more of its kind from steps not traced" in finding["message"]


def test_the_same_loop_storing_numbers_gets_no_warning(tmp_path: Path) -> None:
    fixed = VALIDATION.replace("val_history.append(val_loss)", "val_history.append(val_loss.item())")
    assert graphs_in(fixed, "val_history") == 0
    status, report = check(tmp_path, fixed, "--steps", "5")
    assert (status, report["findings"]) == (0, [])


@pytest.mark.parametrize(("steps", "traced", "untraced"), [("5", 5, 19), ("24", 24, 0)])
def test_a_list_of_losses_counts_every_steps_graph(tmp_path: Path, steps: str, traced: int, untraced: int) -> None:
    assert graphs_in(LOSSES, "losses") == 24
    _, report = check(tmp_path, LOSSES, "--steps", steps)
    [finding] = report["findings"]
    assert (finding["kind"], finding["line"]) == ("graph_kept_alive", 14)
    [evidence] = finding["evidence"]
    assert (evidence["steps"], evidence["untraced"], len(finding["tensors"])) == (24, untraced, traced)
