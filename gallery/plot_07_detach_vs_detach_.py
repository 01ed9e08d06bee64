"""
detach() versus detach_()
=========================

原题：pytorch中detach()和detach_()的用法和区别

``h.detach()`` returns a new leaf and leaves ``h`` in the graph. ``h.detach_()``
turns ``h`` itself into a leaf: its ``grad_fn`` becomes ``None`` and
``requires_grad`` becomes ``False``, so every later use of ``h`` is cut from
``layer1``, which never receives a gradient.

Findings: cut_edge, dead_parameter
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
        h = self.layer1(x)
        d = h.detach()
        print("after detach():  d.grad_fn =", d.grad_fn, "| h.grad_fn =", type(h.grad_fn).__name__)
        h.detach_()
        print("after detach_(): h.grad_fn =", h.grad_fn, "| h.requires_grad =", h.requires_grad)
        return self.layer2(torch.relu(h))


model = Net()
loss = model(torch.randn(8, 4)).pow(2).mean()
loss.backward()
print("layer1.weight.grad:", model.layer1.weight.grad)  # None
print("layer2.weight.grad is None:", model.layer2.weight.grad is None)  # False
