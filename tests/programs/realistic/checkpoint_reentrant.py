"""Activation checkpointing with the reentrant implementation: each block's forward is run again during backward."""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return x + torch.tanh(self.norm(self.fc(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=True)
        return self.head(h)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(4):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
