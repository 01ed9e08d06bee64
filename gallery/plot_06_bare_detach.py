"""
A bare detach() changes nothing
===============================

``detach()`` is out of place: it returns a new tensor and leaves ``h`` attached
to the graph. Calling it and throwing the result away, as below, has no effect;
both layers receive gradients.

Findings: none
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(4, 3)
        self.layer2 = nn.Linear(3, 2)

    def forward(self, x):
        h = torch.relu(self.layer1(x))
        h.detach()  # result discarded: h itself still has a grad_fn
        return self.layer2(h)


model = Net()
loss = model(torch.randn(8, 4)).pow(2).mean()
loss.backward()
print("layer1.weight.grad:", model.layer1.weight.grad)
print("layer2.weight.grad:", model.layer2.weight.grad)
assert model.layer1.weight.grad is not None and model.layer2.weight.grad is not None
