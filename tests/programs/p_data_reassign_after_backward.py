"""`w.data = ...` after backward: the graph that saved w is gone, so nothing is corrupted."""
import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
x = torch.randn(3, requires_grad=True)
expected_x_grad = w.detach().clone()
y = (w * x).sum()
y.backward()
w.data = torch.zeros(3)
print("x.grad:", x.grad, "expected:", expected_x_grad)
assert torch.equal(x.grad, expected_x_grad)
