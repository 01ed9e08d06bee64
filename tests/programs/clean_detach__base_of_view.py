"""`detach_()` on an encoder's output whose transposed view (made before) feeds the head, with no in-place write
after it: the view keeps its history and the encoder gets its gradient (checked below), so nothing is flagged."""
import torch
import torch.nn as nn

torch.manual_seed(0)
enc = nn.Linear(4, 3)
head = nn.Linear(5, 1)
x = torch.randn(5, 4)

h = enc(x)
ht = h.t()
h.detach_()
loss = head(ht).sum()
loss.backward()
assert enc.weight.grad is not None and enc.weight.grad.abs().sum() > 0
