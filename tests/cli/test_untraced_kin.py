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


ATTRIBUTES = '''\
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def run(self, steps):
        for step in range(steps):
            x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
            loss = F.cross_entropy(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.last_train = loss
            if step == 20:
                self.model.eval()
                self.last_val = F.cross_entropy(self.model(torch.randn(32, 8)), torch.randint(0, 4, (32,)))
                self.model.train()


trainer = Trainer()
trainer.run(30)
'''


def test_an_objects_attributes_are_not_a_growing_store(tmp_path: Path) -> None:
    """`self.last_val` (traced when the validation re-armed the recorder) beside `self.last_train` (the same kind of
    loss, from a step not traced): one value per attribute however long the run, so no kept-alive warning. (Before,
    the traced `self.last_train` values let go of at the window's end and at the re-armed step's end, both
    overwritten since, counted as two graphs alive at once: "the graphs of 2 steps".)"""
    scope: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(ATTRIBUTES, "<plain run>", "exec"), scope)  # noqa: S102 - our own test program
    held = [v for v in vars(scope["trainer"]).values() if isinstance(v, torch.Tensor)]
    assert len(held) == 2 and all(t.grad_fn is not None for t in held)  # PyTorch: two graphs alive, a fixed number
    status, report = check(tmp_path, ATTRIBUTES, "--steps", "5")
    assert (status, [f["kind"] for f in report["findings"]]) == (0, [])


def test_a_dict_keyed_by_step_counts_its_untraced_entries(tmp_path: Path) -> None:
    program = VALIDATION.replace("val_history = []", "val_history = {}").replace(
        "val_history.append(val_loss)", "val_history[step] = val_loss")
    scope: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(program, "<plain run>", "exec"), scope)  # noqa: S102 - our own test program
    assert sum(t.grad_fn is not None for t in scope["val_history"].values()) == 4
    _, report = check(tmp_path, program, "--steps", "5")
    [finding] = report["findings"]
    assert (finding["kind"], finding["line"], finding["code"]) == ("graph_kept_alive", STORE_LINE,
                                                                  "val_history[step] = val_loss")
    assert (finding["evidence"][0]["steps"], finding["evidence"][0]["untraced"]) == (4, 3)
    assert "and the same container holds 3 more of its kind from steps not traced" in finding["message"]
