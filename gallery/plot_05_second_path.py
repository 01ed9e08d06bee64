"""
A detached path next to a live one
==================================

``h.detach()`` cuts one path from ``layer1`` to the loss, but ``h`` also feeds
an auxiliary head directly. Gradients flow back along the live path, so
``layer1`` still trains: the cut is real, but no parameter is dead.

Findings: cut_edge
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(4, 3)
        self.head = nn.Linear(3, 2)
        self.aux = nn.Linear(3, 1)

    def forward(self, x):
        h = torch.relu(self.layer1(x))
        h_frozen = h.detach()
        return self.head(h_frozen), self.aux(h)


model = TwoHeads()
x = torch.randn(8, 4)
out, aux_out = model(x)
loss = out.pow(2).mean() + aux_out.pow(2).mean()
loss.backward()
print("layer1.weight.grad:", model.layer1.weight.grad)
assert model.layer1.weight.grad is not None and model.layer1.weight.grad.abs().sum() > 0
