"""A module's old-style backward hook, which torch puts on the output's grad_fn: no torch function call shows it."""
import torch
import torch.nn as nn

torch.manual_seed(0)
layer = nn.Linear(3, 1)
layer.register_backward_hook(lambda module, grad_in, grad_out: print("old hook ran"))
x = torch.randn(2, 3, requires_grad=True)
y = torch.sigmoid(layer(x))
y.data.mul_(0.5)
y.sum().backward()
print("grad:", x.grad.sum().item())
