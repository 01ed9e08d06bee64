"""Activation checkpointing (its saved_tensors_hooks pack recipes, not tensors), a custom autograd.Function and
autocast: every parameter trains, nothing is flagged."""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
head = nn.Linear(8, 1)
optimizer = torch.optim.Adam([*block.parameters(), *head.parameters()], lr=1e-3)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


for step in range(3):
    x = torch.randn(4, 8, requires_grad=True)
    hidden = checkpoint(block, x, use_reentrant=False)
    squared = Square.apply(hidden)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = head(squared)
    loss = out.float().pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
