"""No predicted backward_through_freed_graph on a branch no backward reaches (issue 36 item 3): `probs =
logits.softmax(-1)` logged beside the loss, made before the loss's backward freed `logits`'s graph, is a tensor the
program never backpropagates; a training loop builds its next graph anew. PyTorch is the judge: the program's backward
does not reach the branch (the gradients are those of the program without it), and the carried-state bugs, whose next
backward does run into the freed graph, are still found."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest
import torch

import gradviz
from gradviz.analysis import FindingKind, diagnose

PROGRAMS = Path(__file__).parent.parent / "programs"
FREED = FindingKind.BACKWARD_THROUGH_FREED_GRAPH.value

# LOGGED: the line that makes the unused branch, or `pass` for the twin without it
ONE_STEP = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    logits = model(x)
    LOGGED
    loss = torch.nn.functional.cross_entropy(logits, y)
    loss.backward()
    GRADS = [p.grad.clone() for p in model.parameters()]
"""
LOOP = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    for step in range(3):
        opt.zero_grad()
        logits = model(x)
        LOGGED
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        opt.step()
    GRADS = [p.grad.clone() for p in model.parameters()]
"""


def _write(tmp: Path, name: str, source: str, logged: str) -> Path:
    script = tmp / f"{name}.py"
    script.write_text(textwrap.dedent(source).replace("LOGGED", logged))
    return script


@pytest.mark.parametrize("name, source", [("one_step", ONE_STEP), ("loop", LOOP)])
@pytest.mark.parametrize("logged", ["probs = logits.softmax(-1)", "top = logits.log_softmax(-1).max(-1).values"])
def test_a_logged_branch_beside_the_loss_gets_no_freed_graph_note(name: str, source: str, logged: str,
                                                                   tmp_path: Path, capsys) -> None:
    script = _write(tmp_path, name, source, logged)
    twin = _write(tmp_path, f"{name}_without", source, "pass")
    ran = runpy.run_path(str(script), run_name="__main__")
    without = runpy.run_path(str(twin), run_name="__main__")
    # PyTorch: the loss's backward does not reach the branch (the same gradients as without it) ...
    assert all(torch.equal(a, b) for a, b in zip(ran["GRADS"], without["GRADS"]))
    # ... and the branch's graph is spent: only a backward of its own would run into the freed buffers
    variable = logged.split(" = ")[0]
    with pytest.raises(RuntimeError, match="second time"):
        ran[variable].sum().backward()
    capsys.readouterr()
    trace = gradviz.trace_script(script)
    assert [f.kind.value for f in diagnose(trace) if f.kind.value == FREED] == []


@pytest.mark.parametrize("program, predicted, raises", [("freed_predicted.py", True, None),
                                                        ("freed_rnn_hidden.py", False, "second time")])
def test_carried_states_are_still_found(program: str, predicted: bool, raises: str | None, capsys) -> None:
    script = PROGRAMS / program
    line = next(i for i, text in enumerate(script.read_text().splitlines(), 1) if "expect: backward_through_freed_graph" in text)
    if raises is None:  # PyTorch: runs to its end (the backward that would raise is not called) ...
        runpy.run_path(str(script), run_name="__main__")
    else:  # ... or raises at the next backward through the carried state
        with pytest.raises(RuntimeError, match=raises):
            runpy.run_path(str(script), run_name="__main__")
    capsys.readouterr()
    trace = gradviz.trace_script(script)
    found = sorted((f.line, f.predicted) for f in diagnose(trace) if f.kind.value == FREED)
    assert found == [(line, predicted)]
