"""
detach() does not stop parameter updates
========================================

原题：关于pytorch中使用detach并不能阻止参数更新这档子事儿

After one normal step, ``layer1`` is "frozen" by detaching its output, and no
gradient reaches it any more. But ``zero_grad(set_to_none=False)`` leaves a
zero ``.grad`` instead of ``None``, so SGD does not skip the parameter: the
momentum buffer from the first step and weight decay keep moving it.

Findings: cut_edge, update_without_gradient
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
        self.freeze_layer1 = False

    def forward(self, x):
        h = torch.relu(self.layer1(x))
        if self.freeze_layer1:
            h = h.detach()
        return self.layer2(h)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
x, target = torch.randn(8, 4), torch.randn(8, 2)
for step in range(4):
    model.freeze_layer1 = step > 0  # step 0 trains both layers
    optimizer.zero_grad(set_to_none=False)
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    before = model.layer1.weight.detach().clone()
    optimizer.step()
    moved = (model.layer1.weight - before).abs().max().item()
    print(f"step {step}: frozen={model.freeze_layer1}, layer1.weight.grad is zero: "
          f"{bool((model.layer1.weight.grad == 0).all())}, layer1.weight moved by {moved:.5f}")
