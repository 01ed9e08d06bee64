"""w is saved by MulBackward0 as the original tensor; `w.data = ...` swaps its data, so x's gradient uses the new w."""
import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
x = torch.randn(3, requires_grad=True)
expected_x_grad = w.detach().clone()
y = (w * x).sum()
w.data = torch.zeros(3)  # expect: silently_corrupted_saved_tensor
y.backward()
print("x.grad:", x.grad, "expected:", expected_x_grad)
assert not torch.equal(x.grad, expected_x_grad)
