"""A reentrant checkpoint whose inputs do not require grad starves the parameters inside it: PyTorch warns and gives
them no gradient. The finding blames the `checkpoint` call, quotes PyTorch's warning and suggests
`use_reentrant=False`, not the layer inside it or a detach that is not there; the non-reentrant twin trains and gets
no finding."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gradviz
from gradviz.analysis.findings import FindingKind

PROGRAM = '''\
import torch
from torch import nn

torch.manual_seed(0)
fc1 = nn.Linear(8, 16)
fc2 = nn.Linear(16, 8)
head = nn.Linear(8, 1)


def block(x):
    return fc2(torch.relu(fc1(x)))


opt = torch.optim.SGD([*fc1.parameters(), *fc2.parameters(), *head.parameters()], lr=0.1)
for step in range(3):
    x = torch.randn(4, 8)
    h = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=REENTRANT)
    loss = head(h).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print([p.grad is None for p in (*fc1.parameters(), *fc2.parameters(), *head.parameters())])
'''
CALL = 17  # the line of `h = torch.utils.checkpoint.checkpoint(...)`


def _program(tmp_path: Path, reentrant: bool | None) -> Path:
    """`reentrant`: the `use_reentrant` passed, None: not passed (PyTorch warns and takes True)."""
    script = tmp_path / f"checkpointed_{reentrant}.py"
    text = PROGRAM.replace(", use_reentrant=REENTRANT", "") if reentrant is None else PROGRAM.replace("REENTRANT", str(reentrant))
    script.write_text(text, encoding="utf-8")
    assert script.read_text().splitlines()[CALL - 1].lstrip().startswith("h = torch.utils.checkpoint.checkpoint(")
    return script


def _pytorch(script: Path) -> tuple[list[bool], str]:
    """Which parameters' .grad PyTorch leaves None (fc1, fc2, then head), and what it warned."""
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    return eval(done.stdout.strip().splitlines()[-1]), done.stderr  # noqa: S307  (our own program's list of bools)


def test_reentrant_checkpoint_without_grad_inputs_blames_the_checkpoint_call(tmp_path: Path) -> None:
    script = _program(tmp_path, True)
    none, warned = _pytorch(script)
    assert none == [True, True, True, True, False, False]  # fc1 and fc2 never get a gradient; head does
    assert "None of the inputs have requires_grad=True. Gradients will be None" in warned
    findings = gradviz.diagnose(gradviz.trace_script(script))
    (dead,) = [f for f in findings if f.kind is FindingKind.DEAD_PARAMETER]
    assert dead.line == CALL  # the checkpoint call, not `return fc2(torch.relu(fc1(x)))` inside `block`
    assert set(dead.parameters) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert dead.message == (
        "4 parameters (`fc1: weight, bias`; `fc2: weight, bias`) take part in computing the loss backpropagated at "
        "line 20, but no backward in the run gives them a gradient: their values reach the loss only through "
        "`checkpoint` at line 17 (`h = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=True)`), which "
        "with `use_reentrant=True` runs its function without gradient tracking and passes gradients back only "
        "through inputs that require grad, and none of its inputs does (PyTorch warned: \"None of the inputs have "
        "requires_grad=True. Gradients will be None\"). They will never train."
    )
    assert dead.fix.startswith("Pass `use_reentrant=False` to `checkpoint`")
    assert "detach" not in dead.fix and "nn.functional.linear" not in dead.message


def test_the_non_reentrant_twin_trains_and_gets_no_finding(tmp_path: Path) -> None:
    script = _program(tmp_path, False)
    none, _ = _pytorch(script)
    assert none == [False] * 6  # every parameter gets a gradient
    findings = gradviz.diagnose(gradviz.trace_script(script))
    assert [f.kind for f in findings if f.kind is FindingKind.DEAD_PARAMETER] == []


def test_a_checkpoint_not_passed_use_reentrant_is_said_to_be_reentrant_by_default(tmp_path: Path) -> None:
    script = _program(tmp_path, None)
    none, warned = _pytorch(script)
    assert none == [True, True, True, True, False, False]  # as with use_reentrant=True
    assert "the use_reentrant parameter should be passed explicitly" in warned
    (dead,) = [f for f in gradviz.diagnose(gradviz.trace_script(script)) if f.kind is FindingKind.DEAD_PARAMETER]
    assert dead.line == CALL
    assert (
        "`checkpoint` at line 17 (`h = torch.utils.checkpoint.checkpoint(block, x)`), which with `use_reentrant` not "
        "passed (True then, and PyTorch warned to pass it) runs its function without gradient tracking"
    ) in dead.message
    assert dead.fix.startswith("Pass `use_reentrant=False` to `checkpoint`")
