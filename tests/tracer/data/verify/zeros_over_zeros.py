"""`.data.zero_()` on a saved result that is already all zeros: the bytes do not change."""
import torch

a = torch.tensor([-1.0, -2.0, -3.0], requires_grad=True)
w = torch.tensor([0.5, 1.5, 2.5], requires_grad=True)
out = torch.relu(a)  # all zeros
y = out * w  # MulBackward0 saves out (for w's gradient) and w
out.data.zero_()  # zeros over zeros
y.sum().backward()
print("w.grad:", w.grad, "a.grad:", a.grad)
