"""cut_edge only where a trained parameter loses a gradient: a frozen copy of a parameter kept while it trains
(`copy.deepcopy(w).requires_grad_(False)`, `p.data.clone()` as a regulariser's reference) and `.data` read for its
size, dtype or device (`weight.data.new_zeros(...)`, `x.data.size(0)`) cut nothing. PyTorch is the judge: which
parameters get a non-zero gradient."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import gradviz
from gradviz.analysis import FindingKind, diagnose

# L2-SP / EWC: the starting weights kept as the regulariser's reference; a teacher copy of the first layer
SNAPSHOT = """
    import copy
    import torch, torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    anchor = copy.deepcopy(model[0].weight).requires_grad_(False)
    start = {name: p.data.clone() for name, p in model.named_parameters()}
    for step in range(20):
        x = torch.randn(16, 4)
        penalty = sum((p - start[name]).pow(2).sum() for name, p in model.named_parameters())
        loss = model(x).pow(2).mean() + 0.01 * (model[0].weight - anchor).pow(2).sum() + 0.01 * penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
# the word-language-model example's `init_hidden`, and shapes read off `.data`
SHAPES = """
    import torch, torch.nn as nn
    torch.manual_seed(0)


    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(20, 8)
            self.rnn = nn.LSTM(8, 8)
            self.decoder = nn.Linear(8, 20)

        def forward(self, x, hidden):
            out, hidden = self.rnn(self.encoder(x), hidden)
            scale = self.decoder.weight.data.numel() / self.decoder.weight.data.shape[0]
            return self.decoder(out) / scale, hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters()).data
            return (weight.new(1, bsz, 8).zero_(), weight.new_zeros(1, bsz, 8))


    model = RNNModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = nn.CrossEntropyLoss()
    for step in range(20):
        hidden = model.init_hidden(4)
        x, y = torch.randint(0, 20, (5, 4)), torch.randint(0, 20, (5, 4))
        mask = torch.ones(x.data.size(0), 4, dtype=x.data.dtype, device=x.data.device)
        out, hidden = model(x * mask, hidden)
        loss = crit(out.view(-1, 20), y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
# the real cuts of the family: the weight's values (itself, or a copy taken each forward) used in place of it
CUT = """
    import torch, torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(20):
        x = torch.randn(16, 4)
        h = torch.relu(x @ model[0].weight.data.t() + model[0].bias)
        out = h @ model[2].weight.data.clone().t() + model[2].bias
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _write(tmp: Path, name: str, source: str) -> Path:
    script = tmp / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    return script


def _line(script: Path, text: str) -> int:
    return next(i for i, line in enumerate(script.read_text().splitlines(), 1) if line.strip() == text)


def _trained(script: Path) -> dict[str, bool]:
    """PyTorch: whether each parameter of the plain program's model got a non-zero gradient at the last step."""
    model = runpy.run_path(str(script), run_name="__main__")["model"]
    return {name: p.grad is not None and bool(p.grad.abs().sum() > 0) for name, p in model.named_parameters()}


def _cuts(script: Path) -> list[int | None]:
    trace = gradviz.trace_script(script)
    assert not trace.internal_errors, trace.internal_errors
    return sorted(f.line for f in diagnose(trace) if f.kind is FindingKind.CUT_EDGE)


def test_frozen_snapshots_of_parameters_cut_nothing(tmp_path: Path) -> None:
    script = _write(tmp_path, "snapshot", SNAPSHOT)
    trained = _trained(script)
    assert trained == dict.fromkeys(["0.weight", "0.bias", "2.weight", "2.bias"], True)
    assert _cuts(script) == []


def test_data_read_for_shapes_cuts_nothing(tmp_path: Path) -> None:
    script = _write(tmp_path, "shapes", SHAPES)
    trained = _trained(script)
    assert set(trained) == {"encoder.weight", "rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
                            "rnn.bias_hh_l0", "decoder.weight", "decoder.bias"}  # fmt: skip
    assert all(trained.values()), trained
    assert _cuts(script) == []


def test_parameter_values_used_in_its_place_are_still_cuts(tmp_path: Path) -> None:
    script = _write(tmp_path, "cut", CUT)
    trained = _trained(script)
    assert trained == {"0.weight": False, "0.bias": True, "2.weight": False, "2.bias": True}
    assert _cuts(script) == [
        _line(script, "h = torch.relu(x @ model[0].weight.data.t() + model[0].bias)"),
        _line(script, "out = h @ model[2].weight.data.clone().t() + model[2].bias"),
    ]

