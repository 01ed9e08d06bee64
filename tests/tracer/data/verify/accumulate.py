"""Gradient accumulation over two micro-batches; before the second backward the weights are clipped through
`.data` (as in a WGAN critic): the second backward adds a wrong gradient onto the first one."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
batches = [torch.randn(4, 3), torch.randn(4, 3)]
model(batches[0]).pow(2).mean().backward()
loss = model(batches[1]).pow(2).mean()
for p in model.parameters():
    p.data.clamp_(-0.2, 0.2)
loss.backward()
for name, p in model.named_parameters():
    print(name, p.grad.sum().item())
