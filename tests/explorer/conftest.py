"""Traces the explorer tests open: the document's `.data` example, a training script with modules, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradviz
from gradviz.model import Trace

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def data_trace(gallery: Path) -> Trace:
    return gradviz.trace_script(gallery / "plot_02_data_silent.py")


@pytest.fixture(scope="session")
def training_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """Two-layer model trained for three steps, with a frozen-by-detach layer: modules, steps, a cut edge."""
    script = tmp_path_factory.mktemp("train") / "train.py"
    script.write_text(TRAINING, encoding="utf-8")
    return gradviz.trace_script(script)


TRAINING = '''\
import torch
from torch import nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Block()
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        z = self.encoder(x).detach()
        return self.head(z)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(5, 4)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''
