"""`detach_()` on an encoder's output whose transposed view feeds the head, then an in-place write on it: PyTorch
rebuilds the view's grad_fn from the detached base, so the encoder gets no gradient (checked: its .grad stays None).
Without the write the view keeps its history and the encoder trains (clean_detach__base_of_view.py)."""
import torch
import torch.nn as nn

torch.manual_seed(0)
enc = nn.Linear(4, 3)
head = nn.Linear(5, 1)
x = torch.randn(5, 4)

h = enc(x)
ht = h.t()
h.detach_()  # expect: cut_edge; expect: dead_parameter params=enc.weight,enc.bias
h.mul_(2)
loss = head(ht).sum()
loss.backward()
assert enc.weight.grad is None and head.weight.grad is not None

