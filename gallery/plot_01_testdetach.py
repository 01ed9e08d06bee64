"""
Blocking gradient flow with detach()
====================================

原题：Pytorch中x.data()与x.detach()的区别（作用：阻断梯度回传）

The document's ``TestDetach`` module detaches the output of ``layer1`` before
feeding it to ``layer2``. ``x.detach()`` returns a tensor that shares storage
with ``x`` but has no ``grad_fn``, so backward stops there: ``layer2`` trains,
while ``model.layer1.weight`` never receives a gradient and never changes.

Findings: cut_edge, dead_parameter
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TestDetach(nn.Module):
    def __init__(self, InDim, HiddenDim, OutDim):
        super().__init__()
        self.layer1 = nn.Linear(InDim, HiddenDim, False)
        self.layer2 = nn.Linear(HiddenDim, OutDim, False)

    def forward(self, x, DetachLayer1=True):
        x = torch.relu(self.layer1(x))
        x = x.detach()
        x = self.layer2(x)
        return x


model = TestDetach(4, 3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
w1_before = model.layer1.weight.detach().clone()
w2_before = model.layer2.weight.detach().clone()
x, target = torch.randn(8, 4), torch.randn(8, 2)
for step in range(3):
    optimizer.zero_grad()
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}, layer1.weight.grad = {model.layer1.weight.grad}")

layer1_changed = not torch.equal(model.layer1.weight, w1_before)
layer2_changed = not torch.equal(model.layer2.weight, w2_before)
print("layer1 changed:", layer1_changed)  # False
print("layer2 changed:", layer2_changed)  # True
assert not layer1_changed and layer2_changed
