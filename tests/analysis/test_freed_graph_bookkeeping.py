"""backward_through_freed_graph only where a backward can reach a freed graph: values built on a loss the program
already differentiated (running sums, lists of scaled losses, MAML's inner losses) are bookkeeping, not a carried
state. PyTorch is the judge: the programs run to their end without "Trying to backward through the graph a second
time", and the carried-state twin raises it at its next backward."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

import gradviz
from gradviz.analysis import FindingKind, diagnose

# the PyTorch tutorials' epoch average: `running_loss += loss * inputs.size(0)` after backward, and a list of
# per-step losses scaled for the mean; each multiplication saves a tensor that no backward has freed
BOOKKEEPING = """
    import torch, torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total_loss = 0
    mean_loss = []
    for step in range(20):
        x = torch.randn(8, 4)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        total_loss = total_loss + loss * x.size(0)
        mean_loss.append(loss / 20)
        TAIL
    print(f"avg {float(total_loss) / 160:.4f} {torch.stack(mean_loss).sum().item():.4f}")
"""
# MAML: the inner loss is differentiated by autograd.grad(create_graph=True); the meta backward frees the forward it
# shares with the adapted weights' graph
MAML = """
    import torch, torch.nn as nn, torch.nn.functional as F
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    meta_opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for it in range(20):
        meta_opt.zero_grad()
        meta_loss = 0.0
        for task in range(3):
            x, y = torch.randn(8, 4), torch.randn(8, 1)
            w, b = model.weight, model.bias
            for inner in range(2):
                inner_loss = F.mse_loss(F.linear(x, w, b), y)
                gw, gb = torch.autograd.grad(inner_loss, (w, b), create_graph=True)
                w, b = w - 0.1 * gw, b - 0.1 * gb
            meta_loss = meta_loss + F.mse_loss(F.linear(torch.randn(8, 4), w, b), torch.randn(8, 1))
        meta_loss.backward()
        meta_opt.step()
    print(float(meta_loss))
"""
# the GAN fixed (fake detached for the discriminator, the generator's loss after the discriminator's step), its
# losses summed per sample for the epoch's average
GAN = """
    import torch, torch.nn as nn
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
    D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_g = torch.optim.Adam(G.parameters(), 1e-3)
    opt_d = torch.optim.Adam(D.parameters(), 1e-3)
    bce = nn.BCEWithLogitsLoss()
    d_total, g_total, seen = 0.0, 0.0, 0
    for step in range(20):
        real = torch.randn(16, 2) + 3
        fake = G(torch.randn(16, 2))
        d_loss = bce(D(real), torch.ones(16, 1)) + bce(D(fake.detach()), torch.zeros(16, 1))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = bce(D(fake), torch.ones(16, 1))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        d_total = d_total + d_loss * real.size(0)
        g_total = g_total + g_loss * real.size(0)
        seen += real.size(0)
    print(f"D {float(d_total) / seen:.4f} G {float(g_total) / seen:.4f}")
"""
# the real bug of the family: a GRU state carried into a new graph after backward freed the old one
CARRIED = """
    import torch, torch.nn as nn
    torch.manual_seed(0)
    cell = nn.GRUCell(3, 4)
    h = torch.zeros(2, 4)
    total = 0
    for step in range(4):
        h = cell(torch.randn(2, 3), h)
        loss = h.pow(2).mean()
        loss.backward()
        total = total + loss * 2
        h = cell(torch.randn(2, 3), h)
        NEXT
"""


def _write(tmp: Path, name: str, source: str) -> Path:
    script = tmp / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    return script


def _line(script: Path, text: str) -> int:
    return next(i for i, line in enumerate(script.read_text().splitlines(), 1) if line.strip() == text)


def _kinds(script: Path) -> list[tuple[str, int | None, bool]]:
    trace = gradviz.trace_script(script)
    assert not trace.internal_errors, trace.internal_errors
    return sorted((f.kind.value, f.line, f.predicted) for f in diagnose(trace))


def _pytorch_error(script: Path) -> str | None:
    """What the plain program raised under PyTorch (None: it ran to its end)."""
    try:
        runpy.run_path(str(script), run_name="__main__")
    except RuntimeError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("name, source", [("bookkeeping", BOOKKEEPING.replace("TAIL", "")), ("maml", MAML),
                                          ("gan_fixed", GAN)])  # fmt: skip
def test_bookkeeping_on_differentiated_losses_is_no_freed_graph(name: str, source: str, tmp_path: Path, capsys) -> None:
    script = _write(tmp_path, name, source)
    assert _pytorch_error(script) is None  # PyTorch: no backward of the program runs into a freed graph
    capsys.readouterr()
    found = _kinds(script)
    assert [k for k in found if k[0] == FindingKind.BACKWARD_THROUGH_FREED_GRAPH.value] == [], found


def test_bookkeeping_keeps_its_graph_kept_alive_findings(tmp_path: Path, capsys) -> None:
    script = _write(tmp_path, "bookkeeping", BOOKKEEPING.replace("TAIL", ""))
    expected = [
        ("graph_kept_alive", _line(script, "total_loss = total_loss + loss * x.size(0)"), False),
        ("graph_kept_alive", _line(script, "mean_loss.append(loss / 20)"), False),
    ]
    assert _kinds(script) == expected


def test_backpropagating_the_running_sum_is_still_an_error(tmp_path: Path, capsys) -> None:
    """The twin that does what the bookkeeping does not: backward of the running sum reaches the freed graphs."""
    script = _write(tmp_path, "sum_backward", BOOKKEEPING.replace("TAIL", "total_loss.backward()"))
    error = _pytorch_error(script)
    assert error is not None and "second time" in error
    found = [k for k in _kinds(script) if k[0] == FindingKind.BACKWARD_THROUGH_FREED_GRAPH.value]
    # an error (the backward raised), at the line that built the new graph on the freed one
    assert found == [(FindingKind.BACKWARD_THROUGH_FREED_GRAPH.value, _line(script, "total_loss = total_loss + loss * x.size(0)"), False)]


def test_a_state_carried_past_backward_is_still_predicted(tmp_path: Path, capsys) -> None:
    """The carried state built on the freed graph (stopped before its backward) is predicted; PyTorch confirms: the
    program that goes on to backpropagate it raises. The scaled running sum beside it gets no prediction."""
    stopped = _write(tmp_path, "carried", CARRIED.replace("NEXT", "break"))
    assert _pytorch_error(stopped) is None
    goes_on = _write(tmp_path, "carried_on", CARRIED.replace("NEXT", "h.sum().backward()"))
    error = _pytorch_error(goes_on)
    assert error is not None and "second time" in error
    capsys.readouterr()
    found = [k for k in _kinds(stopped) if k[0] == FindingKind.BACKWARD_THROUGH_FREED_GRAPH.value]
    second = [i for i, line in enumerate(stopped.read_text().splitlines(), 1) if line.strip() == "h = cell(torch.randn(2, 3), h)"][1]
    assert found == [(FindingKind.BACKWARD_THROUGH_FREED_GRAPH.value, second, True)]



# a side branch for logging: `probs` shares the model's graph with the loss, whose backward frees it; the program
# reads probs' values and never backpropagates them
SIDE_BRANCH = """
    import torch, torch.nn as nn, torch.nn.functional as F
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(20):
        x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
        logits = model(x)
        probs = logits.softmax(-1)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        TAIL
        opt.step()
        acc = (probs.argmax(-1) == y).float().mean()
    print(f"acc {acc.item():.2f} conf {probs.max(-1).values.mean().item():.2f}")
"""


def test_a_side_branch_nobody_backpropagates_gets_no_finding(tmp_path: Path, capsys) -> None:
    """No warning and no note: the backward the note would be about is one nobody calls (issue 36, item 3)."""
    script = _write(tmp_path, "side_branch", SIDE_BRANCH.replace("TAIL", ""))
    assert _pytorch_error(script) is None
    capsys.readouterr()
    assert _kinds(script) == []


def test_backpropagating_the_side_branch_after_the_loss_is_an_error(tmp_path: Path, capsys) -> None:
    script = _write(tmp_path, "side_branch_backward", SIDE_BRANCH.replace("TAIL", "probs.max(-1).values.sum().backward()"))
    error = _pytorch_error(script)
    assert error is not None and "second time" in error
    capsys.readouterr()
    [finding] = diagnose(gradviz.trace_script(script))
    # an error at the backward that raised, naming the freeing backward; the fix is the one for two losses sharing a
    # graph, not a carried state's `.detach()` for truncated backpropagation through time
    assert (finding.kind, finding.line, finding.predicted) == (
        FindingKind.BACKWARD_THROUGH_FREED_GRAPH, _line(script, "probs.max(-1).values.sum().backward()"), False)
    assert f"the backward at line {_line(script, 'loss.backward()')} freed" in finding.message
    assert finding.fix.startswith(f"`probs` was made beside the loss whose backward at line {_line(script, 'loss.backward()')} freed")
    assert "retain_graph=True` to the first backward" in finding.fix and "truncated" not in finding.fix
