"""A module's full backward hook (a Python node in the graph) with a saved tensor written through `.data`."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
model.register_full_backward_hook(lambda module, grad_in, grad_out: print("module hook ran"))
loss = model(torch.randn(2, 3)).sum()
model[2].weight.data.mul_(2)
loss.backward()
print("grad:", model[0].weight.grad.sum().item())
