"""
nn.ReLU(inplace=True) after a sigmoid
=====================================

``torch.sigmoid`` saves its output, because its derivative is
``s * (1 - s)``. ``nn.ReLU(inplace=True)`` then writes into that very tensor.
The values do not even change (a sigmoid is positive), but the version counter
moves from 0 to 1, so backward raises.

Findings: poisoned_saved_tensor
Raises: RuntimeError
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        h = self.act(h)
        return h


model = Block()
out = model(torch.randn(8, 4))
print("output version:", out._version)  # 1: relu_ wrote into sigmoid's output
out.sum().backward()  # RuntimeError: ... output 0 of Sigmoid, is at version 1; expected version 0
